//! The Workloads a pass reads ([`objects::workload_state`]), remembered between passes by
//! key (`namespace/name`) and `metadata.resourceVersion`: a Workload whose resourceVersion
//! is the one read before is not parsed again, so a pass costs parsing in proportion to the
//! Workloads that changed, not to those stored. The very object read before (the same
//! [`Arc`], as a watch cache hands out an unchanged object) is found by its address, without
//! reading its JSON at all. The Workloads a pass acts on ([`ActedOn`]) are kept between
//! passes too and updated from those that changed, came or went, so an unchanged Workload
//! costs one look-up by address. What a pass reads is the same either way.
//!
//! Not remembered, so parsed in every pass: an object without a resourceVersion (a test's,
//! a file's), a Workload with DRA claims resolved for the pass (`Objects::devices`: its
//! requests and the statuses laid over it come from other objects, not from its version),
//! and one whose PodSets take their overhead from a RuntimeClass
//! (`objects::with_pod_overhead`).
//! Knows nothing about where the objects come from or what the pass decides.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use tessera_model::address::{AddressMap, address_of, sweep};

use crate::api::objects::{self, Objects, WorkloadState};

/// The Workloads a pass acts on (pending or holding quota), by key (`namespace/name`): each
/// object with where it stands.
pub type ActedOn = BTreeMap<Arc<str>, (Arc<Value>, Arc<WorkloadState>)>;

/// Workloads read into the pass's model, by the address of the object read, with the
/// resourceVersion read; and the address of each by key.
#[derive(Debug, Clone, Default)]
pub struct ParsedWorkloads {
    by_address: AddressMap<Parsed>,
    /// The address of the object remembered for each key.
    by_key: HashMap<Arc<str>, usize>,
    /// The Workloads the last read answered, once handed back ([`ParsedWorkloads::keep`]):
    /// what the next read updates.
    acted_on: Option<ActedOn>,
    /// The keys of the objects read without being remembered, by the read that last met
    /// them: what leaves the Workloads acted on when such an object is gone.
    unremembered: HashMap<Arc<str>, u64>,
    /// How many Workloads the last [`ParsedWorkloads::read`] parsed (the rest were
    /// remembered).
    parsed: usize,
    /// Counts the reads: a Workload not met in the last one is forgotten.
    reads: u64,
}

/// One Workload as read at one resourceVersion; `None` when it does not parse.
#[derive(Debug, Clone)]
struct Parsed {
    key: Arc<str>,
    version: String,
    state: Option<Arc<WorkloadState>>,
    /// Whether a pass acts on it ([`acted_on`] its state), kept beside the state so that
    /// meeting it again reads no state.
    acted_on: bool,
    /// The object read: held, so that its address names it while it is remembered.
    object: Arc<Value>,
    /// Whether meeting the very object again answers it unread (not when it names a
    /// RuntimeClass, whose overhead may change under the same object).
    by_address: bool,
    /// The read that last met it.
    met: u64,
}

/// A remembered Workload met again as the very object read before.
struct MetAgain<'p> {
    key: &'p Arc<str>,
    /// Its state, when a pass acts on it.
    state: Option<&'p Arc<WorkloadState>>,
    /// Whether this read meets it for the first time.
    first: bool,
}

/// Whether a pass acts on a Workload in `state`: pending, or holding quota.
fn acted_on(state: &WorkloadState) -> bool {
    matches!(
        state,
        WorkloadState::Pending(_) | WorkloadState::Reserving { .. }
    )
}

impl ParsedWorkloads {
    /// The Workloads of `objects` a pass acts on (pending or holding quota) by key, each with
    /// where it stands, parsing only those not read before at their resourceVersion; forgets
    /// the Workloads no longer there. A finished or inactive Workload, or one that does not
    /// parse, is left out (still remembered: a pass over thousands of finished Workloads
    /// reads none of them again). Starts from the Workloads the last read answered when they
    /// were handed back ([`ParsedWorkloads::keep`]), changing only those that changed.
    pub fn read(&mut self, objects: &Objects) -> ActedOn {
        self.parsed = 0;
        self.reads += 1;
        let met = self.reads;
        // Without the last answer, every Workload met is entered again.
        let (mut answer, whole) = match self.acted_on.take() {
            Some(kept) => (kept, false),
            None => (BTreeMap::new(), true),
        };
        // How many remembered Workloads this read met: when all of them, none is forgotten.
        let mut met_count = 0;
        for object in &objects.workloads {
            if let Some(MetAgain { key, state, first }) = self.same_object(object, objects, met) {
                met_count += usize::from(first);
                if let Some(state) = state.filter(|_| whole) {
                    answer.insert(Arc::clone(key), (Arc::clone(object), Arc::clone(state)));
                }
                continue;
            }
            let key = objects::key(object);
            // Pod overhead from a RuntimeClass: read from the class, not the version.
            let adjusted = objects::with_pod_overhead(object, &objects.runtime_classes);
            let version = objects::resource_version(object)
                .filter(|_| objects.devices.get(&key).is_none() && adjusted.is_none());
            let (key, state): (Arc<str>, _) = match version {
                None => {
                    self.parsed += 1;
                    let read = adjusted.as_ref().unwrap_or(object);
                    // A version remembered before under this key is not the Workload now.
                    if let Some(at) = self.by_key.remove(key.as_str()) {
                        self.by_address.remove(&at);
                    }
                    let key: Arc<str> = Arc::from(key);
                    self.unremembered.insert(Arc::clone(&key), met);
                    (key, objects.devices.workload_state(read).map(Arc::new))
                }
                Some(version) => {
                    let before = self
                        .by_key
                        .remove(key.as_str())
                        .and_then(|at| self.by_address.remove(&at));
                    let key = before
                        .as_ref()
                        .map_or_else(|| Arc::from(key), |before| Arc::clone(&before.key));
                    let (state, acts_on) = match before.filter(|before| before.version == version) {
                        Some(before) => (before.state, before.acted_on),
                        None => {
                            self.parsed += 1;
                            let state = objects::workload_state(object).map(Arc::new);
                            let acts_on = state.as_deref().is_some_and(acted_on);
                            (state, acts_on)
                        }
                    };
                    let at = address_of(object);
                    met_count += 1;
                    self.unremembered.remove(&key);
                    self.by_key.insert(Arc::clone(&key), at);
                    self.by_address.insert(
                        at,
                        Parsed {
                            key: Arc::clone(&key),
                            version: version.to_owned(),
                            state: state.clone(),
                            acted_on: acts_on,
                            object: Arc::clone(object),
                            by_address: !objects::names_runtime_class(object),
                            met,
                        },
                    );
                    (key, state)
                }
            };
            match state.filter(|state| acted_on(state)) {
                Some(state) => answer.insert(key, (Arc::clone(object), state)),
                None => answer.remove(&key),
            };
        }
        // Remembered Workloads this read did not meet are gone.
        if met_count != self.by_address.len() {
            for parsed in self.by_address.values().filter(|parsed| parsed.met != met) {
                answer.remove(&parsed.key);
            }
        }
        sweep(
            &mut self.by_address,
            &mut self.by_key,
            met_count,
            |parsed| parsed.met == met,
        );
        // So are those read without a version before and not met now (one remembered now
        // left this set when it was read).
        self.unremembered.retain(|key, last| {
            let here = *last == met;
            if !here {
                answer.remove(key);
            }
            here
        });
        answer
    }

    /// Hands back what the last [`ParsedWorkloads::read`] answered, for the next read to
    /// update; without it, the next read enters every Workload again.
    pub fn keep(&mut self, acted_on: ActedOn) {
        self.acted_on = Some(acted_on);
    }

    /// The key of `object` and its state if a pass acts on it, when it is the very object
    /// remembered, neither naming a RuntimeClass nor resolved through DRA claims in this
    /// pass: met again, unread (and whether this read meets it for the first time).
    fn same_object(
        &mut self,
        object: &Arc<Value>,
        objects: &Objects,
        met: u64,
    ) -> Option<MetAgain<'_>> {
        let parsed = self.by_address.get_mut(&address_of(object))?;
        // Held, so no other object can have been given its address.
        debug_assert!(Arc::ptr_eq(&parsed.object, object));
        if !parsed.by_address || objects.devices.get(&parsed.key).is_some() {
            return None;
        }
        let first = parsed.met != met;
        parsed.met = met;
        let state = parsed.state.as_ref().filter(|_| parsed.acted_on);
        Some(MetAgain {
            key: &parsed.key,
            state,
            first,
        })
    }

    /// How many Workloads the last read parsed.
    pub fn parsed(&self) -> usize {
        self.parsed
    }

    /// How many Workloads are remembered.
    pub fn remembered(&self) -> usize {
        self.by_address.len()
    }
}

#[cfg(test)]
#[path = "parsed_tests.rs"]
mod tests;
