//! In-process API tests: a kube-rs `Client` speaks to the axum router directly (no sockets),
//! exercising CRUD, list/watch, patches, errors and metadata semantics as clients see them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod admission;
mod audit;
mod binding;
mod crds;
mod crud;
mod eviction;
mod list_watch;
mod patching;
mod pod_security;
mod requests;
mod services;
