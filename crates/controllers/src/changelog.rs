//! What a watch changed since a shell last looked: the keys (namespace, name) of the
//! objects its events applied or deleted, and whether a relist replaced its whole store. A
//! shell that keeps something derived from a watch cache between passes updates only those
//! keys instead of walking every object the cache holds. Knows nothing about what is derived.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use kube::runtime::watcher;

use crate::shell::{ObjectKey, object_key};

/// The changes a watch's events made, shared between the watch's stream (which notes
/// them) and the shell (which takes them).
#[derive(Debug, Clone, Default)]
pub struct Changelog(Arc<Mutex<Changes>>);

/// What changed since the last [`Changelog::take`].
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// The objects applied or deleted one by one.
    pub touched: HashSet<ObjectKey>,
    /// Whether a relist replaced the store (objects may have gone without an event).
    pub relisted: bool,
}

impl Changes {
    /// Whether anything changed.
    pub fn any(&self) -> bool {
        self.relisted || !self.touched.is_empty()
    }
}

impl Changelog {
    /// Notes what `event` changes in a reflector's store: an applied or deleted object by
    /// its key; the end of a relist (when the store swaps in the listed objects) as a
    /// replacement of everything. The relist's own objects are part of that replacement.
    pub fn note<K: kube::Resource>(&self, event: &watcher::Event<K>) {
        let mut changes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            watcher::Event::Apply(object) | watcher::Event::Delete(object) => {
                if !changes.relisted {
                    changes.touched.insert(object_key(object.meta()));
                }
            }
            watcher::Event::InitDone => {
                changes.relisted = true;
                changes.touched.clear();
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }

    /// What changed since the last call; starts over.
    pub fn take(&self) -> Changes {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn object(namespace: &str, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn key(namespace: &str, name: &str) -> ObjectKey {
        (namespace.to_owned(), name.to_owned())
    }

    #[test]
    fn a_changelog_gives_what_its_events_changed_since_it_was_last_taken() {
        use watcher::Event;
        let cases: Vec<(&str, Vec<Event<ConfigMap>>, Changes)> = vec![
            ("nothing", vec![], Changes::default()),
            (
                "applied and deleted objects, each once",
                vec![
                    Event::Apply(object("a", "w")),
                    Event::Delete(object("b", "w")),
                    Event::Apply(object("a", "w")),
                ],
                Changes {
                    touched: [key("a", "w"), key("b", "w")].into(),
                    relisted: false,
                },
            ),
            (
                "a relist under way changes nothing yet",
                vec![Event::Init, Event::InitApply(object("a", "w"))],
                Changes::default(),
            ),
            (
                "a finished relist replaces everything, whatever came before",
                vec![
                    Event::Apply(object("a", "w")),
                    Event::Init,
                    Event::InitApply(object("a", "v")),
                    Event::InitDone,
                ],
                Changes {
                    touched: HashSet::new(),
                    relisted: true,
                },
            ),
            (
                "changes after a relist are part of the replacement",
                vec![Event::InitDone, Event::Apply(object("a", "w"))],
                Changes {
                    touched: HashSet::new(),
                    relisted: true,
                },
            ),
        ];
        for (name, events, want) in cases {
            let log = Changelog::default();
            for event in &events {
                log.note(event);
            }
            assert_eq!(log.take(), want, "{name}");
            assert_eq!(log.take(), Changes::default(), "{name}: taken once");
        }
    }
}
