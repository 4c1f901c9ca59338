//! What a pass's sync queued, kept for the next sync: each pending Workload queued, by key,
//! with the state read (by address), the ClusterQueue queue it went to and the LocalQueue it
//! came from (what the pass counts its pending Workloads by), and what those
//! queues were resolved from (the LocalQueues, each ClusterQueue and its activity). A
//! Workload offered again at the very state read, under the same LocalQueues and
//! ClusterQueues, resolves to the same queue; while that queue holds the copy it made, the
//! sync passes the Workload by without reading it. Otherwise a pass over 15,000 pending
//! Workloads reads each one's state, namespace and LocalQueue, scattered over the heap, to
//! learn that nothing changed.
//!
//! Knows nothing about how a Workload is queued or what holds one back.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::api::objects::WorkloadState;
use crate::queue::LocalQueue;

/// What resolves a pending Workload's queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Resolution {
    /// The LocalQueues by `namespace/name`.
    pub local_queues: BTreeMap<String, LocalQueue>,
    /// Each ClusterQueue's name and whether it is active, in name order.
    pub cluster_queues: Vec<(String, bool)>,
}

/// One Workload queued by a sync.
#[derive(Debug, Clone)]
struct Entry {
    key: Arc<str>,
    state: Arc<WorkloadState>,
    /// Its ClusterQueue, by index in [`Resolution::cluster_queues`].
    cluster_queue: usize,
    /// Its LocalQueue, by index in [`Resolution::local_queues`] (in key order).
    local_queue: usize,
}

/// What the last sync queued.
#[derive(Debug, Clone, Default)]
pub(crate) struct Offered {
    resolution: Resolution,
    /// In key order.
    entries: Vec<Entry>,
}

impl Offered {
    /// Starts a sync that resolves queues from `resolution`: the last sync's Workloads may be
    /// passed by only when it resolved them from the same.
    pub fn walk(&mut self, resolution: Resolution) -> Walk<'_> {
        let previous = std::mem::take(&mut self.entries);
        let previous = if self.resolution == resolution {
            previous
        } else {
            Vec::new()
        };
        self.resolution = resolution;
        self.entries.reserve(previous.len());
        Walk {
            previous: previous.into_iter().peekable(),
            offered: self,
        }
    }
}

/// A sync's walk over the pending Workloads, in key order, each met once.
pub(crate) struct Walk<'o> {
    previous: std::iter::Peekable<std::vec::IntoIter<Entry>>,
    offered: &'o mut Offered,
}

impl Walk<'_> {
    /// Whether the Workload `key` at `state` was queued by the last sync at this very state,
    /// in a ClusterQueue queue that `holds` (given its name) still says holds it: then it is
    /// kept for the next sync, unread, and the caller passes it by, told the index of the
    /// LocalQueue it was queued from (in [`Resolution::local_queues`]).
    pub fn pass_by(
        &mut self,
        key: &Arc<str>,
        state: &Arc<WorkloadState>,
        holds: impl FnOnce(&str) -> bool,
    ) -> Option<usize> {
        let before = loop {
            let Some(entry) = self.previous.peek() else {
                break None;
            };
            // Keys are shared between passes: compared as text only where the lists differ.
            if !Arc::ptr_eq(&entry.key, key) {
                match entry.key.as_ref().cmp(key.as_ref()) {
                    Ordering::Less => {
                        self.previous.next();
                        continue;
                    }
                    Ordering::Greater => break None,
                    Ordering::Equal => {}
                }
            }
            break self.previous.next();
        };
        let entry = before.filter(|entry| Arc::ptr_eq(&entry.state, state))?;
        let resolution = &self.offered.resolution;
        let name = resolution.cluster_queues[entry.cluster_queue].0.as_str();
        if !holds(name) {
            return None;
        }
        let local_queue = entry.local_queue;
        self.offered.entries.push(entry);
        Some(local_queue)
    }

    /// Records that the Workload `key` at `state` was queued in the ClusterQueue
    /// `cluster_queue` (one of the resolution's) from the LocalQueue at index `local_queue`
    /// in the resolution's.
    pub fn queued(
        &mut self,
        key: &Arc<str>,
        state: &Arc<WorkloadState>,
        cluster_queue: &str,
        local_queue: usize,
    ) {
        let resolution = &self.offered.resolution;
        let Some(index) = resolution
            .cluster_queues
            .iter()
            .position(|(name, _)| name == cluster_queue)
        else {
            return;
        };
        self.offered.entries.push(Entry {
            key: Arc::clone(key),
            state: Arc::clone(state),
            cluster_queue: index,
            local_queue,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolution(active: bool) -> Resolution {
        Resolution {
            local_queues: BTreeMap::new(),
            cluster_queues: vec![("cq-a".to_owned(), true), ("cq-b".to_owned(), active)],
        }
    }

    /// One Workload offered to a walk: its key, whether its key and state are the very ones
    /// queued before (else copies), and the queue that holds it now.
    struct Met {
        key: &'static str,
        same_key: bool,
        same_state: bool,
        held_by: Option<&'static str>,
    }

    const fn met(key: &'static str, held_by: Option<&'static str>) -> Met {
        Met {
            key,
            same_key: true,
            same_state: true,
            held_by,
        }
    }

    #[test]
    fn a_workload_is_passed_by_only_at_the_state_queued_under_the_same_resolution_and_held() {
        // (case, the second sync's resolution is the first's, Workloads met in the second
        // sync, which of them are passed by). The first sync queued a and c in cq-b, e in
        // cq-a, from the LocalQueues at 1, 2 and 0.
        let cases: Vec<(&str, bool, Vec<Met>, Vec<bool>)> = vec![
            (
                "all unchanged and held",
                true,
                vec![
                    met("a", Some("cq-b")),
                    met("c", Some("cq-b")),
                    met("e", Some("cq-a")),
                ],
                vec![true, true, true],
            ),
            (
                "a new state is read again",
                true,
                vec![
                    Met {
                        same_state: false,
                        ..met("a", Some("cq-b"))
                    },
                    met("c", Some("cq-b")),
                ],
                vec![false, true],
            ),
            (
                "a Workload its queue no longer holds (popped) is offered again",
                true,
                vec![met("a", None), met("c", Some("cq-b"))],
                vec![false, true],
            ),
            (
                "held by another queue than the one it was queued in",
                true,
                vec![met("a", Some("cq-a"))],
                vec![false],
            ),
            (
                "another resolution reads every Workload again",
                false,
                vec![met("a", Some("cq-b")), met("c", Some("cq-b"))],
                vec![false, false],
            ),
            (
                "a key read again as a copy of its text is the same Workload",
                true,
                vec![Met {
                    same_key: false,
                    ..met("c", Some("cq-b"))
                }],
                vec![true],
            ),
            (
                "Workloads gone and new between the kept ones",
                true,
                vec![
                    met("b", Some("cq-b")),
                    met("c", Some("cq-b")),
                    met("d", Some("cq-a")),
                    met("e", Some("cq-a")),
                ],
                vec![false, true, false, true],
            ),
        ];
        for (case, same_resolution, second, expected) in cases {
            let keys: BTreeMap<&str, Arc<str>> = ["a", "b", "c", "d", "e"]
                .into_iter()
                .map(|key| (key, Arc::from(key)))
                .collect();
            let states: BTreeMap<&str, Arc<WorkloadState>> = keys
                .keys()
                .map(|key| (*key, Arc::new(WorkloadState::Finished)))
                .collect();
            let mut offered = Offered::default();
            let mut first = offered.walk(resolution(true));
            let local_queues = BTreeMap::from([("a", 1), ("c", 2), ("e", 0)]);
            for (key, queue) in [("a", "cq-b"), ("c", "cq-b"), ("e", "cq-a")] {
                let passed = first.pass_by(&keys[key], &states[key], |_| true);
                assert_eq!(passed, None, "{case}");
                first.queued(&keys[key], &states[key], queue, local_queues[key]);
            }
            let mut walk = offered.walk(resolution(same_resolution));
            let passed: Vec<bool> = second
                .iter()
                .map(|met| {
                    let key = match met.same_key {
                        true => Arc::clone(&keys[met.key]),
                        false => Arc::from(met.key),
                    };
                    let state = match met.same_state {
                        true => Arc::clone(&states[met.key]),
                        false => Arc::new(WorkloadState::Finished),
                    };
                    let passed = walk.pass_by(&key, &state, |name| Some(name) == met.held_by);
                    // Passed by, it is counted in the LocalQueue it was queued from.
                    if let Some(local_queue) = passed {
                        assert_eq!(local_queue, local_queues[met.key], "{case}: {}", met.key);
                    }
                    passed.is_some()
                })
                .collect();
            assert_eq!(passed, expected, "{case}");
            // What was passed by is kept for the sync after: passed by again.
            let kept: Vec<&Met> = second
                .iter()
                .zip(&passed)
                .filter(|(_, p)| **p)
                .map(|(m, _)| m)
                .collect();
            let mut third = offered.walk(resolution(same_resolution));
            for met in kept {
                let key = Arc::clone(&keys[met.key]);
                let state = Arc::clone(&states[met.key]);
                assert_eq!(
                    third.pass_by(&key, &state, |_| true),
                    Some(local_queues[met.key]),
                    "{case}: {} kept",
                    met.key
                );
            }
        }
    }
}
