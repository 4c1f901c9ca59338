//! Which objects MultiKueue's watches have shown changed since its last pass, by
//! `namespace/name`: the manager's Jobs and JobSets, and the workers' copies of Workloads,
//! Jobs and JobSets. A Workload settled at its last reconciliation is left alone, without
//! being read again, while neither it (its JSON is the very one planned from) nor its owner
//! nor any of the workers' copies of either has been touched; a pass then costs in proportion
//! to what changed, not to every Workload with a MultiKueue check. A relist or a failed watch
//! touches everything.
//!
//! Knows nothing of kinds: a Workload and a Job of the same name are one entry, so a change to
//! one reconciles the other too (a reconciliation too many, never one too few).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::runtime::watcher;

/// The keys touched since they were last taken; shared by the watches that mark them and the
/// pass that takes them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Touched(Arc<Mutex<TouchedSet>>);

/// What was touched: everything, or these `namespace/name` keys.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct TouchedSet {
    everything: bool,
    keys: HashSet<String>,
}

impl TouchedSet {
    /// Whether the object `namespace/name` may have changed.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.everything || self.keys.contains(key)
    }
}

impl Touched {
    /// Takes what was touched since the last call (to be taken before the caches are read:
    /// a change shown while they are read is then in the next call's).
    pub(crate) fn take(&self) -> TouchedSet {
        std::mem::take(&mut *self.lock())
    }

    /// Marks everything touched.
    pub(crate) fn everything(&self) {
        self.lock().everything = true;
    }

    /// Marks what a watcher's event touched: its object, or everything for a relist's end
    /// (objects deleted meanwhile leave without an event of their own) or a failed watch.
    pub(crate) fn event<K: kube::Resource>(
        &self,
        event: &Result<watcher::Event<K>, watcher::Error>,
    ) {
        match event {
            Ok(
                watcher::Event::Apply(object)
                | watcher::Event::Delete(object)
                | watcher::Event::InitApply(object),
            ) => {
                let meta = object.meta();
                let key = format!(
                    "{}/{}",
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default()
                );
                let mut set = self.lock();
                if !set.everything {
                    set.keys.insert(key);
                }
            }
            Ok(watcher::Event::Init) => {}
            Ok(watcher::Event::InitDone) | Err(_) => self.everything(),
        }
    }

    /// A reflector's `events` marked as they pass, as a stream of changes.
    pub(crate) fn marking<K>(
        &self,
        events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    ) -> futures::stream::BoxStream<'static, ()>
    where
        K: kube::Resource + Send + 'static,
    {
        let touched = self.clone();
        events.map(move |event| touched.event(&event)).boxed()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TouchedSet> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    fn job(namespace: &str, name: &str) -> DynamicObject {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs");
        DynamicObject::new(name, &resource).within(namespace)
    }

    /// A case: its name, the events, and whether each key is then touched.
    type Case<'a> = (
        &'a str,
        Vec<watcher::Event<DynamicObject>>,
        Vec<(&'a str, bool)>,
    );

    #[test]
    fn a_watchs_events_touch_their_objects_and_a_relist_touches_everything() {
        let cases: Vec<Case> = vec![
            (
                "an applied and a deleted object",
                vec![
                    watcher::Event::Apply(job("ml", "a")),
                    watcher::Event::Delete(job("ml", "b")),
                ],
                vec![
                    ("ml/a", true),
                    ("ml/b", true),
                    ("ml/c", false),
                    ("team/a", false),
                ],
            ),
            (
                "a relist under way",
                vec![
                    watcher::Event::Init,
                    watcher::Event::InitApply(job("ml", "a")),
                ],
                vec![("ml/a", true), ("ml/c", false)],
            ),
            (
                "a relist ended",
                vec![watcher::Event::Init, watcher::Event::InitDone],
                vec![("ml/a", true), ("ml/c", true)],
            ),
        ];
        for (name, events, expected) in cases {
            let touched = Touched::default();
            for event in events {
                touched.event(&Ok(event));
            }
            let set = touched.take();
            for (key, contained) in expected {
                assert_eq!(set.contains(key), contained, "{name}: {key}");
            }
            assert_eq!(touched.take(), TouchedSet::default(), "{name}: taken once");
        }
        let failed = Touched::default();
        failed.event::<DynamicObject>(&Err(watcher::Error::NoResourceVersion));
        assert!(failed.take().contains("any/thing"), "a failed watch");
    }
}
