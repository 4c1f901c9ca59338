//! The Workloads the queue manager's passes read, as JSON, kept between passes and updated
//! from what changed: the keys its watch touched ([`Changelog`]) and the Workloads it wrote
//! ([`WrittenWorkloads`], laid over the watch until the watch shows them). A pass costs
//! work in proportion to the Workloads that changed, not to those stored (copying 15,000
//! Workloads out of the watch cache, laying the writes over them, finding each one's JSON by
//! address and keying them again after the pass took a quarter of a round's computation).
//! The JSON lies in one vector, handed to the pass and back without a copy, with each
//! Workload's place by key (`namespace/name`): what the steps after the pass look Workloads
//! up by. Knows nothing about what a pass decides.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::changelog::Changes;
use crate::queue::WrittenWorkloads;
use crate::shell::{ObjectKey, object_key};

/// The Workloads as the next pass reads them, and as the steps after a pass see them.
#[derive(Debug, Default)]
pub struct Workloads {
    /// Each Workload's JSON (while a pass runs, the pass holds them).
    values: Vec<Arc<Value>>,
    /// The key of each, in the same order.
    keys: Vec<Arc<str>>,
    /// The place of each key, and the resourceVersion its JSON shows (`None` when its JSON
    /// is not an object at a version: laid over for one pass).
    index: HashMap<Arc<str>, Slot, foldhash::fast::RandomState>,
    /// The keys whose JSON is not the watch's copy: looked at again by the next refresh.
    overlaid: Vec<ObjectKey>,
    /// Whether the watch cache has been read whole once.
    primed: bool,
}

#[derive(Debug)]
struct Slot {
    at: usize,
    version: Option<String>,
}

/// A Workload's key as the pass keys it (`namespace/name`).
fn joined((namespace, name): &ObjectKey) -> String {
    format!("{namespace}/{name}")
}

impl Workloads {
    /// Brings the Workloads up to date with the watch cache `store` (of `resource`), given
    /// what its watch changed since the last refresh, with `written` laid over it: the
    /// objects the watch touched, those written and those laid over before are looked at
    /// again; the rest stand. The whole cache is read the first time and after a relist.
    pub(crate) fn refresh(
        &mut self,
        (store, resource): (&Store<DynamicObject>, &ApiResource),
        changes: Changes,
        written: &mut WrittenWorkloads,
    ) {
        if changes.relisted || !self.primed {
            self.read_whole(store, written);
            return;
        }
        let mut keys = changes.touched;
        keys.extend(written.keys().cloned());
        keys.extend(self.overlaid.drain(..));
        for key in keys {
            let reference = ObjectRef::new_with(&key.1, resource.clone()).within(&key.0);
            let shown = written.resolve(&key, store.get(&reference));
            self.show(key, shown);
        }
    }

    /// Reads every Workload of `store` again, with `written` laid over them.
    fn read_whole(&mut self, store: &Store<DynamicObject>, written: &mut WrittenWorkloads) {
        self.index.clear();
        self.values.clear();
        self.keys.clear();
        self.overlaid.clear();
        self.primed = true;
        let mut unseen: HashSet<ObjectKey> = written.keys().cloned().collect();
        for object in store.state() {
            let key = object_key(object.meta());
            unseen.remove(&key);
            let shown = written.resolve(&key, Some(object));
            self.show(key, shown);
        }
        // Written, but not shown by the watch: gone, or not shown yet; left out either way.
        for key in unseen {
            written.resolve(&key, None);
        }
    }

    /// Shows `key` as `shown` (the object, and whether it is ours, not the watch's); gone
    /// when `None`.
    fn show(&mut self, key: ObjectKey, shown: Option<(Arc<DynamicObject>, bool)>) {
        let joined = joined(&key);
        let Some((object, ours)) = shown else {
            self.remove(&joined);
            return;
        };
        if ours {
            self.overlaid.push(key);
        }
        let version = object.resource_version();
        let unchanged = version.is_some()
            && self
                .index
                .get(joined.as_str())
                .is_some_and(|slot| slot.version == version);
        if unchanged {
            return;
        }
        match serde_json::to_value(object.as_ref()) {
            Ok(value) => self.put(joined, Arc::new(value), version),
            // One that does not serialize is left out.
            Err(_) => self.remove(&joined),
        }
    }

    /// Sets a Workload's JSON (showing `version`).
    fn put(&mut self, key: String, value: Arc<Value>, version: Option<String>) {
        if let Some(slot) = self.index.get_mut(key.as_str()) {
            self.values[slot.at] = value;
            slot.version = version;
            return;
        }
        let key: Arc<str> = key.into();
        let at = self.values.len();
        self.index.insert(Arc::clone(&key), Slot { at, version });
        self.values.push(value);
        self.keys.push(key);
    }

    /// Removes a Workload; the last one takes its place.
    fn remove(&mut self, key: &str) {
        let Some(slot) = self.index.remove(key) else {
            return;
        };
        self.values.swap_remove(slot.at);
        self.keys.swap_remove(slot.at);
        if let Some(moved) = self.keys.get(slot.at)
            && let Some(moved) = self.index.get_mut(moved)
        {
            moved.at = slot.at;
        }
    }

    /// Hands the Workloads' JSON to a pass; [`Workloads::restore`] takes it back.
    pub(crate) fn take_values(&mut self) -> Vec<Arc<Value>> {
        std::mem::take(&mut self.values)
    }

    /// Takes back what [`Workloads::take_values`] handed out, in its order, with the objects
    /// named in `laid_over` changed for the pass (statuses laid over them): those are read
    /// again from the watch by the next refresh.
    pub(crate) fn restore(&mut self, values: Vec<Arc<Value>>, laid_over: Vec<ObjectKey>) {
        if values.len() != self.keys.len() {
            // Not what was handed out: the next refresh reads the watch cache whole.
            tracing::debug!("queue manager: Workloads handed back changed; reading them again");
            self.primed = false;
            return;
        }
        self.values = values;
        for key in laid_over {
            if let Some(slot) = self.index.get_mut(joined(&key).as_str()) {
                slot.version = None;
            }
            self.overlaid.push(key);
        }
    }

    /// Shows a Workload the queue manager has just written, as the API server answered it,
    /// until the next refresh decides between it and the watch's copy.
    pub(crate) fn show_written(&mut self, object: &DynamicObject) {
        let key = joined(&object_key(object.meta()));
        if let Ok(value) = serde_json::to_value(object) {
            self.put(key, Arc::new(value), object.resource_version());
        }
    }

    /// A Workload by key (`namespace/name`).
    pub fn get(&self, key: &str) -> Option<&Arc<Value>> {
        self.index
            .get(key)
            .and_then(|slot| self.values.get(slot.at))
    }

    /// Every Workload, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Arc<Value>> {
        self.values.iter()
    }

    /// How many Workloads there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::api::{ApiResource, GroupVersionKind, ObjectMeta};
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;
    use crate::changelog::Changelog;

    fn resource() -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload"),
            "workloads",
        )
    }

    fn workload(name: &str, version: u64, phase: &str) -> DynamicObject {
        let mut object = DynamicObject::new(name, &resource()).within("team-a");
        object.metadata = ObjectMeta {
            resource_version: Some(version.to_string()),
            ..object.metadata
        };
        object.data = json!({"status": {"phase": phase}});
        object
    }

    /// One step: what the watch delivers, or what the queue manager writes.
    enum Step {
        Apply(&'static str, u64, &'static str),
        Delete(&'static str),
        /// A relist that ends with these objects.
        Relist(Vec<(&'static str, u64, &'static str)>),
        /// A write the API server answered at this version.
        Write(&'static str, u64, &'static str),
        /// A pass: refresh, then the statuses each Workload shows (`name=phase@version`).
        Pass(&'static str),
    }

    /// The Workloads by key with the phase and version each shows; checks that every key
    /// is where the index says and that each JSON is the Workload its key names.
    fn shown(workloads: &Workloads) -> String {
        let mut shown = BTreeMap::new();
        assert_eq!(workloads.values().count(), workloads.len());
        for (at, key) in workloads.keys.iter().enumerate() {
            assert_eq!(workloads.index[key].at, at, "{key}: its place");
            let value = workloads.get(key).expect("indexed");
            assert_eq!(
                tessera_queue::api::objects::key(value),
                key.as_ref(),
                "{key}: the JSON at its place"
            );
            let name = value["metadata"]["name"].as_str().unwrap_or_default();
            let phase = value["status"]["phase"].as_str().unwrap_or_default();
            let version = value["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            shown.insert(name.to_owned(), format!("{name}={phase}@{version}"));
        }
        shown.into_values().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn workloads_kept_from_the_changes_are_what_reading_the_whole_watch_gives() {
        use Step::*;
        let cases: Vec<(&str, Vec<Step>)> = vec![
            (
                "applied, changed and deleted",
                vec![
                    Relist(vec![("a", 1, "new"), ("b", 2, "new"), ("c", 3, "new")]),
                    Pass("a=new@1 b=new@2 c=new@3"),
                    Apply("b", 4, "admitted"),
                    Delete("a"),
                    Apply("d", 5, "new"),
                    Pass("b=admitted@4 c=new@3 d=new@5"),
                    Delete("d"),
                    Delete("c"),
                    Pass("b=admitted@4"),
                ],
            ),
            (
                "a write shows until the watch shows it or a later version",
                vec![
                    Relist(vec![("a", 1, "new"), ("b", 2, "new")]),
                    Pass("a=new@1 b=new@2"),
                    Write("a", 3, "admitted"),
                    Write("b", 4, "admitted"),
                    Pass("a=admitted@3 b=admitted@4"),
                    Apply("a", 3, "admitted"),
                    Apply("b", 5, "finished"),
                    Pass("a=admitted@3 b=finished@5"),
                    // The watch's older copy, delivered late, does not undo a later write.
                    Write("a", 7, "finished"),
                    Apply("a", 6, "evicted"),
                    Pass("a=finished@7 b=finished@5"),
                ],
            ),
            (
                "a write to a Workload the watch no longer has is left out",
                vec![
                    Relist(vec![("a", 1, "new")]),
                    Pass("a=new@1"),
                    Write("a", 2, "admitted"),
                    Delete("a"),
                    Pass(""),
                    Apply("a", 3, "new"),
                    Pass("a=new@3"),
                ],
            ),
            (
                "a relist replaces everything, writes still laid over",
                vec![
                    Relist(vec![("a", 1, "new"), ("b", 2, "new")]),
                    Pass("a=new@1 b=new@2"),
                    Write("b", 5, "admitted"),
                    Relist(vec![("b", 3, "new"), ("c", 4, "new")]),
                    Pass("b=admitted@5 c=new@4"),
                ],
            ),
        ];
        for (name, steps) in cases {
            let log = Changelog::default();
            let mut writer = Writer::new(resource());
            let store = writer.as_reader();
            let mut written = WrittenWorkloads::default();
            let mut kept = Workloads::default();
            let mut deliver = |event: Event<DynamicObject>| {
                writer.apply_watcher_event(&event);
                log.note(&event);
            };
            for (at, step) in steps.into_iter().enumerate() {
                match step {
                    Apply(object, version, phase) => {
                        deliver(Event::Apply(workload(object, version, phase)));
                    }
                    Delete(object) => deliver(Event::Delete(workload(object, 0, ""))),
                    Relist(objects) => {
                        deliver(Event::Init);
                        for (object, version, phase) in objects {
                            deliver(Event::InitApply(workload(object, version, phase)));
                        }
                        deliver(Event::InitDone);
                    }
                    Write(object, version, phase) => {
                        let object = Arc::new(workload(object, version, phase));
                        written.remember(&object);
                        kept.show_written(&object);
                    }
                    Pass(want) => {
                        let mut whole = Workloads::default();
                        whole.refresh(
                            (&store, &resource()),
                            Changes::default(),
                            &mut written.clone(),
                        );
                        kept.refresh((&store, &resource()), log.take(), &mut written);
                        assert_eq!(shown(&kept), want, "{name}, step {at}");
                        assert_eq!(shown(&whole), want, "{name}, step {at}: read whole");
                    }
                }
            }
        }
    }

    #[test]
    fn workloads_laid_over_for_a_pass_are_read_from_the_watch_again() {
        let log = Changelog::default();
        let mut writer = Writer::new(resource());
        for event in [
            Event::Init,
            Event::InitApply(workload("a", 1, "new")),
            Event::InitApply(workload("b", 2, "new")),
            Event::InitDone,
        ] {
            writer.apply_watcher_event(&event);
            log.note(&event);
        }
        let store = writer.as_reader();
        let mut written = WrittenWorkloads::default();
        let mut kept = Workloads::default();
        kept.refresh((&store, &resource()), log.take(), &mut written);
        let mut values = kept.take_values();
        let at = values
            .iter()
            .position(|value| value["metadata"]["name"] == "a")
            .expect("a is read");
        Arc::make_mut(&mut values[at])["status"]["phase"] = json!("laid-over");
        kept.restore(values, vec![("team-a".to_owned(), "a".to_owned())]);
        assert_eq!(shown(&kept), "a=laid-over@1 b=new@2", "the pass's copy");
        kept.refresh((&store, &resource()), log.take(), &mut written);
        assert_eq!(shown(&kept), "a=new@1 b=new@2", "the watch's copy again");
        // Handed back something else: the next refresh reads the watch whole.
        let mut values = kept.take_values();
        values.pop();
        kept.restore(values, vec![]);
        kept.refresh((&store, &resource()), log.take(), &mut written);
        assert_eq!(shown(&kept), "a=new@1 b=new@2", "read whole");
    }
}
