//! The Workloads a pass reads ([`objects::workload_state`]), remembered between passes by
//! key (`namespace/name`) and `metadata.resourceVersion`: a Workload whose resourceVersion
//! is the one read before is not parsed again, so a pass costs parsing in proportion to the
//! Workloads that changed, not to those stored. What a pass reads is the same either way.
//!
//! Not remembered, so parsed in every pass: an object without a resourceVersion (a test's,
//! a file's), a Workload with DRA claims resolved for the pass (`Objects::devices`: its
//! requests and the statuses laid over it come from other objects, not from its version),
//! and one whose PodSets take their overhead from a RuntimeClass
//! (`objects::with_pod_overhead`).
//! Knows nothing about where the objects come from or what the pass decides.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::api::objects::{self, Objects, WorkloadState};

/// Workloads read into the pass's model, by key, with the resourceVersion read.
#[derive(Debug, Clone, Default)]
pub struct ParsedWorkloads {
    by_key: BTreeMap<String, Parsed>,
    /// How many Workloads the last [`ParsedWorkloads::read`] parsed (the rest were
    /// remembered).
    parsed: usize,
}

/// One Workload as read at one resourceVersion; `None` when it does not parse.
#[derive(Debug, Clone)]
struct Parsed {
    version: String,
    state: Option<Arc<WorkloadState>>,
}

impl ParsedWorkloads {
    /// The Workloads of `objects` by key, each with where it stands (one that does not parse
    /// left out), parsing only those not read before at their resourceVersion; forgets the
    /// Workloads no longer there.
    pub fn read<'o>(
        &mut self,
        objects: &'o Objects,
    ) -> BTreeMap<String, (&'o Value, Arc<WorkloadState>)> {
        let mut kept = BTreeMap::new();
        let mut read = BTreeMap::new();
        self.parsed = 0;
        for object in &objects.workloads {
            let key = objects::key(object);
            // Pod overhead from a RuntimeClass: read from the class, not the version.
            let adjusted = objects::with_pod_overhead(object, &objects.runtime_classes);
            let version = object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .filter(|_| objects.devices.get(&key).is_none() && adjusted.is_none());
            let state = match version {
                None => {
                    self.parsed += 1;
                    let read = adjusted.as_ref().unwrap_or(object);
                    objects.devices.workload_state(read).map(Arc::new)
                }
                Some(version) => {
                    let parsed = match self.by_key.remove(&key) {
                        Some(parsed) if parsed.version == version => parsed,
                        _ => {
                            self.parsed += 1;
                            Parsed {
                                version: version.to_owned(),
                                state: objects::workload_state(object).map(Arc::new),
                            }
                        }
                    };
                    let state = parsed.state.clone();
                    kept.insert(key.clone(), parsed);
                    state
                }
            };
            if let Some(state) = state {
                read.insert(key, (object.as_ref(), state));
            }
        }
        self.by_key = kept;
        read
    }

    /// How many Workloads the last read parsed.
    pub fn parsed(&self) -> usize {
        self.parsed
    }

    /// How many Workloads are remembered.
    pub fn remembered(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
#[path = "parsed_tests.rs"]
mod tests;
