//! End-to-end tests: the real `tessera` binary started in a temporary directory, driven by
//! the real kubectl (bundled versions 1.32 and 1.33, called explicitly) and by kube-rs over
//! TLS; restarts and `kill -9` crashes of the server process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod accelerators;
mod agent;
mod bench;
mod catalog;
mod crds;
mod dra;
mod durability;
mod faults;
mod kubectl;
mod rbac;
mod scheduling;
mod sim;
mod workloads;
