//! End-to-end tests: the real `tessera` binary started in a temporary directory, driven by
//! the real kubectl (every bundled version 1.27–1.33, called explicitly), by the official
//! Python client and by kube-rs over TLS; restarts and `kill -9` crashes of the server process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod accelerators;
mod agent;
mod audit;
mod autoscaling;
mod bench;
mod catalog;
mod cli;
mod compat;
mod crds;
mod detach;
mod diagnose;
mod doc_blocks;
mod docs;
mod dra;
mod durability;
mod encryption;
mod exec;
mod faults;
mod gateway;
mod hpa;
mod images;
mod inference;
mod kubectl;
mod kueue_api;
mod kueue_config;
mod kueue_dra;
mod kueue_jobset;
mod kueue_multikueue;
mod kueue_pods;
mod kueue_provisioning;
mod kueue_queue;
mod kueue_tas;
mod kueue_topology;
mod kueue_visibility;
mod least_privilege;
mod maintenance;
mod maintenance_changes;
mod model_store;
mod models;
mod monitoring;
mod netpol;
mod netpol_dataplane;
mod networks;
mod node_cache;
mod pod_security;
mod python;
mod rbac;
mod runtime_class;
mod scheduling;
mod services;
mod sim;
mod snapshots;
mod storage;
mod telemetry;
mod tenant;
mod workers;
mod workloads;
