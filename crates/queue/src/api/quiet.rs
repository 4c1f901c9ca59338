//! The Workloads a pass's per-Workload steps (the workload controller's admission-check
//! steps, evictions by stop policy, restarts, the end of a requeue backoff, the
//! waitForPodsReady timeout, deactivation) answered nothing for, remembered so that the next
//! pass skips them while nothing they read has changed: the same parsed Workload (so the same
//! resourceVersion, [`crate::api::parsed`]), the same [`StepContext`], and nothing in it that
//! time alone changes ([`timeless`]). What a pass writes is the same with or without it, as
//! long as one resourceVersion stands for one object (the API server's promise; an overlay
//! that edits a Workload must give it a new version, as the shells' overlays of written
//! objects do).
//!
//! Knows nothing of what the steps decide; the pass says which Workloads were quiet.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use tessera_model::address::{AddressMap, address_of};

use crate::api::admission_checks::ClusterQueueChecks;
use crate::api::objects::WorkloadState;
use crate::config::WaitForPodsReady;
use crate::queue::{LocalQueue, StopPolicy};

/// Everything besides the Workload and the time that the per-Workload steps read.
#[derive(Debug, Clone, PartialEq)]
pub struct StepContext {
    /// The LocalQueues by key (their ClusterQueue and stop policy).
    pub local_queues: BTreeMap<String, LocalQueue>,
    /// Each ClusterQueue's stop policy.
    pub stop_policies: BTreeMap<String, StopPolicy>,
    /// Each ClusterQueue's admission checks.
    pub checks: BTreeMap<String, ClusterQueueChecks>,
    /// waitForPodsReady.
    pub wait: Option<WaitForPodsReady>,
}

/// The quiet Workloads of the last pass, by the address of their parsed state (held, so that
/// no other state can take its address), and the context they were quiet in.
#[derive(Debug, Clone, Default)]
pub struct QuietWorkloads {
    context: Option<StepContext>,
    by_state: AddressMap<Arc<WorkloadState>>,
}

/// One pass's view: the Workloads quiet in the last pass, and those quiet in this one.
#[derive(Debug, Default)]
pub struct QuietPass {
    before: AddressMap<Arc<WorkloadState>>,
    now: AddressMap<Arc<WorkloadState>>,
}

impl QuietWorkloads {
    /// Begins a pass in `context`: the Workloads quiet in another context are forgotten.
    pub fn start(&mut self, context: StepContext) -> QuietPass {
        let before = if self.context.as_ref() == Some(&context) {
            std::mem::take(&mut self.by_state)
        } else {
            self.by_state.clear();
            AddressMap::default()
        };
        self.context = Some(context);
        QuietPass {
            now: AddressMap::with_capacity_and_hasher(before.len(), Default::default()),
            before,
        }
    }

    /// Ends a pass: the Workloads quiet in it are remembered, the rest forgotten.
    pub fn end(&mut self, pass: QuietPass) {
        self.by_state = pass.now;
    }
}

impl QuietPass {
    /// Whether `state` was quiet in the last pass (it stays quiet for the next).
    pub fn was_quiet(&mut self, state: &Arc<WorkloadState>) -> bool {
        match self.before.remove(&address_of(state)) {
            Some(held) => {
                self.now.insert(address_of(state), held);
                true
            }
            None => false,
        }
    }

    /// Marks `state` quiet in this pass.
    pub fn quiet(&mut self, state: &Arc<WorkloadState>) {
        self.now.insert(address_of(state), Arc::clone(state));
    }
}

/// Whether what the per-Workload steps answer for `object` in `state` changes with time
/// alone: not when it carries a requeue backoff (`status.requeueState`) or admission check
/// states (retries), nor while it holds quota, active, under waitForPodsReady (its timeout).
pub fn timeless(object: &Value, state: &WorkloadState, wait: Option<&WaitForPodsReady>) -> bool {
    let status = object.get("status");
    let holds = |field: &str| {
        status
            .and_then(|s| s.get(field))
            .is_some_and(|value| match value {
                Value::Null => false,
                Value::Array(items) => !items.is_empty(),
                _ => true,
            })
    };
    if holds("requeueState") || holds("admissionChecks") {
        return false;
    }
    match state {
        WorkloadState::Reserving { active, .. } => !(*active && wait.is_some()),
        WorkloadState::Pending(_) | WorkloadState::Finished | WorkloadState::Inactive => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn context(stop: StopPolicy) -> StepContext {
        StepContext {
            local_queues: BTreeMap::new(),
            stop_policies: [("cq".to_owned(), stop)].into(),
            checks: BTreeMap::new(),
            wait: None,
        }
    }

    #[test]
    fn a_quiet_workload_stays_quiet_only_at_its_version_and_in_its_context() {
        let mut kept = QuietWorkloads::default();
        let first = Arc::new(WorkloadState::Finished);
        let second = Arc::new(WorkloadState::Inactive);
        let mut pass = kept.start(context(StopPolicy::None));
        assert!(!pass.was_quiet(&first));
        pass.quiet(&first);
        pass.quiet(&second);
        kept.end(pass);
        // The next pass: `first` met again stays quiet; `second` not met is forgotten.
        let mut pass = kept.start(context(StopPolicy::None));
        assert!(pass.was_quiet(&first));
        kept.end(pass);
        let mut pass = kept.start(context(StopPolicy::None));
        assert!(pass.was_quiet(&first));
        assert!(!pass.was_quiet(&second));
        // An equal state at another address (another version) is not the one remembered.
        assert!(!pass.was_quiet(&Arc::new(WorkloadState::Finished)));
        kept.end(pass);
        // Another context forgets every one.
        let mut pass = kept.start(context(StopPolicy::Hold));
        assert!(!pass.was_quiet(&first));
        kept.end(pass);
    }

    /// A Workload holding quota in ClusterQueue `cq`, `spec.active` as given.
    fn reserving(active: bool) -> WorkloadState {
        let object = json!({"metadata": {"name": "w", "namespace": "default", "uid": "w",
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"queueName": "q", "active": active, "podSets": [{"name": "main", "count": 1,
                "template": {"spec": {"containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "1"}}}]}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True",
                    "reason": "QuotaReserved", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
                    "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]}}});
        let state = crate::api::objects::workload_state(&object).expect("a Workload");
        assert!(
            matches!(state, WorkloadState::Reserving { .. }),
            "{state:?}"
        );
        state
    }

    #[test]
    fn what_time_alone_changes_is_never_quiet() {
        let wait = WaitForPodsReady {
            timeout: std::time::Duration::from_secs(300),
            block_admission: false,
            recovery_timeout: None,
            requeuing: crate::config::RequeuingStrategy {
                timestamp: crate::queue::RequeuingTimestamp::Eviction,
                backoff_limit_count: None,
                backoff_base_seconds: 60,
                backoff_max_seconds: 3600,
            },
        };
        let requeue =
            json!({"status": {"requeueState": {"count": 1, "requeueAt": "2026-01-01T00:00:00Z"}}});
        let retry = json!({"status": {"admissionChecks": [{"name": "prov", "state": "Retry"}]}});
        let cleared = json!({"status": {"requeueState": null, "admissionChecks": []}});
        let cases = [
            (json!({}), WorkloadState::Finished, None, true),
            (requeue, WorkloadState::Finished, None, false),
            (cleared, WorkloadState::Finished, None, true),
            (retry, WorkloadState::Finished, None, false),
            (json!({}), reserving(true), None, true),
            // Its waitForPodsReady timeout runs while it is active.
            (json!({}), reserving(true), Some(&wait), false),
            (json!({}), reserving(false), Some(&wait), true),
        ];
        for (object, state, wait, expected) in cases {
            assert_eq!(
                timeless(&object, &state, wait),
                expected,
                "{object} {state:?} {wait:?}"
            );
        }
    }
}
