//! The evaluator against upstream's cases: Kubernetes' NetworkPolicy e2e truth tables,
//! network-policy-api's conformance probes for the cluster-wide tiers and cyclonus-style
//! generated cases (`testdata/*.yaml`, read by `harness.rs`); and property tests that the
//! incremental evaluator always equals one built from scratch (`incremental.rs`).

mod harness;
mod incremental;

#[test]
fn upstream_e2e_truth_tables() {
    harness::run_file("upstream-e2e.yaml");
}

#[test]
fn network_policy_api_conformance() {
    harness::run_file("conformance.yaml");
}

#[test]
fn cyclonus_generated_cases() {
    harness::run_file("cyclonus.yaml");
}
