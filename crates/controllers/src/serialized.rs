//! Watched objects as JSON, kept between passes by key (namespace, name) and
//! `metadata.resourceVersion`: an object the watch still shows at the version serialized
//! before is not serialized again, so a pass costs serializing in proportion to the objects
//! that changed, not to those watched. The very object serialized before (the same [`Arc`],
//! as a watch cache hands out an unchanged object) is found by its address, without reading
//! its metadata. An object without a resourceVersion is serialized every time. The JSON is
//! shared ([`Arc`]): handing it out copies nothing. [`SerializedEach`] does the same for
//! objects looked up one at a time. Knows nothing about what the JSON is read for.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tessera_model::address::{AddressMap, address_of, sweep};

use crate::shell::{ObjectKey, object_key};

/// The JSON of the objects last serialized, by the object's address, with the
/// resourceVersion serialized; and the address of each by key.
#[derive(Debug, Default)]
pub struct Serialized {
    by_address: AddressMap<Entry>,
    /// The address of the object kept for each key.
    by_key: HashMap<ObjectKey, usize>,
    /// Counts the calls: an object not met in the last one is forgotten.
    calls: u64,
}

/// One object's JSON at one version.
#[derive(Debug)]
struct Entry {
    version: String,
    value: Arc<Value>,
    /// The object serialized: held, so that its address names it while it is kept.
    object: Arc<dyn Any + Send + Sync>,
    /// The call that last met it.
    met: u64,
}

impl Serialized {
    /// `objects` as JSON (one that does not serialize left out), serializing only those not
    /// serialized before at their resourceVersion; forgets the objects no longer there.
    pub fn values<K>(&mut self, objects: &[Arc<K>]) -> Vec<Arc<Value>>
    where
        K: kube::Resource + serde::Serialize + Send + Sync + 'static,
    {
        self.calls += 1;
        let met = self.calls;
        let mut values = Vec::with_capacity(objects.len());
        // How many kept objects this call met: when all of them, none is to be forgotten.
        let mut met_count = 0;
        for object in objects {
            let at = address_of(object);
            // The very object kept (held, so no other object has its address).
            if let Some(entry) = self.by_address.get_mut(&at) {
                debug_assert_eq!(address_of(&entry.object), at);
                if entry.met != met {
                    entry.met = met;
                    met_count += 1;
                }
                values.push(Arc::clone(&entry.value));
                continue;
            }
            let meta = object.meta();
            let Some(version) = meta.resource_version.as_deref() else {
                values.extend(serde_json::to_value(object.as_ref()).ok().map(Arc::new));
                continue;
            };
            let key = object_key(meta);
            let before = self
                .by_key
                .remove(&key)
                .and_then(|before| self.by_address.remove(&before));
            let value = match before {
                Some(entry) if entry.version == version => entry.value,
                _ => match serde_json::to_value(object.as_ref()) {
                    Ok(value) => Arc::new(value),
                    Err(_) => continue,
                },
            };
            values.push(Arc::clone(&value));
            let held: Arc<dyn Any + Send + Sync> = object.clone();
            let entry = Entry {
                version: version.to_owned(),
                value,
                object: held,
                met,
            };
            self.by_address.insert(at, entry);
            self.by_key.insert(key, at);
            met_count += 1;
        }
        sweep(&mut self.by_address, &mut self.by_key, met_count, |entry| {
            entry.met == met
        });
        values
    }
}

/// Objects looked up one at a time as JSON, kept by the object's address for as long as
/// something else still holds the object (the watch cache that handed it out): once the cache
/// has dropped or replaced it, [`SerializedEach::forget_released`] forgets its JSON. For a
/// reader that looks up a few objects of a cache, where [`Serialized`] reads them all.
#[derive(Default)]
pub struct SerializedEach {
    by_address: AddressMap<(Arc<dyn Any + Send + Sync>, Arc<Value>)>,
}

impl SerializedEach {
    /// `object` as JSON, `finish`ed (as a typed object's kind is added) when serialized; the
    /// JSON kept before when this very object was serialized before. `None` when it does
    /// not serialize.
    pub fn value<K>(
        &mut self,
        object: &Arc<K>,
        finish: impl FnOnce(&mut Value),
    ) -> Option<Arc<Value>>
    where
        K: serde::Serialize + Send + Sync + 'static,
    {
        let at = address_of(object);
        if let Some((_, value)) = self.by_address.get(&at) {
            return Some(Arc::clone(value));
        }
        let mut value = serde_json::to_value(object.as_ref()).ok()?;
        finish(&mut value);
        let value = Arc::new(value);
        let held: Arc<dyn Any + Send + Sync> = object.clone();
        self.by_address.insert(at, (held, Arc::clone(&value)));
        Some(value)
    }

    /// Forgets the objects nothing else holds any more.
    pub fn forget_released(&mut self) {
        self.by_address
            .retain(|_, (object, _)| Arc::strong_count(object) > 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    fn object(name: &str, version: Option<&str>, data: i64) -> Arc<DynamicObject> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("g", "v1", "K"));
        let mut object = DynamicObject::new(name, &resource).within("ns");
        object.metadata.resource_version = version.map(str::to_owned);
        object.data = serde_json::json!({"spec": {"n": data}});
        Arc::new(object)
    }

    fn spec_numbers(values: &[Arc<Value>]) -> Vec<i64> {
        values
            .iter()
            .filter_map(|v| v.pointer("/spec/n").and_then(Value::as_i64))
            .collect()
    }

    #[test]
    fn an_object_is_serialized_again_only_at_a_new_version() {
        // (case, second listing, its spec numbers as answered, objects kept after it).
        // Content changed under an unchanged version (which a watch never shows) is not
        // looked at: that shows the object was not serialized again.
        let cases = [
            (
                "unchanged version, not serialized again",
                vec![object("a", Some("1"), 10), object("b", Some("2"), 20)],
                vec![1, 2],
                2,
            ),
            (
                "a new version, serialized",
                vec![object("a", Some("3"), 10), object("b", Some("2"), 20)],
                vec![10, 2],
                2,
            ),
            (
                "gone, forgotten",
                vec![object("b", Some("2"), 20)],
                vec![2],
                1,
            ),
            (
                "without a version, serialized and not kept",
                vec![object("a", None, 10), object("b", Some("2"), 20)],
                vec![10, 2],
                1,
            ),
        ];
        for (case, second, want, kept) in cases {
            let mut serialized = Serialized::default();
            let first = [object("a", Some("1"), 1), object("b", Some("2"), 2)];
            assert_eq!(
                spec_numbers(&serialized.values(&first)),
                vec![1, 2],
                "{case}"
            );
            let values = serialized.values(&second);
            assert_eq!(spec_numbers(&values), want, "{case}");
            assert_eq!(serialized.by_key.len(), kept, "{case}: kept");
            assert_eq!(
                serialized.by_address.len(),
                kept,
                "{case}: found by address"
            );
            // The very objects again: found by address, answered alike.
            assert_eq!(spec_numbers(&serialized.values(&second)), want, "{case}");
        }
    }

    #[test]
    fn an_object_looked_up_alone_is_serialized_once_while_its_cache_holds_it() {
        let mut each = SerializedEach::default();
        let kind = |value: &mut Value| value["kind"] = "K".into();
        let held = object("a", Some("1"), 1);
        let first = each.value(&held, kind);
        assert_eq!(first.as_ref().map(|v| v["kind"].clone()), Some("K".into()));
        // The very object again: its JSON kept, not serialized again (nor finished again).
        let again = each.value(&held, |value| value["kind"] = "other".into());
        assert!(first.zip(again).is_some_and(|(a, b)| Arc::ptr_eq(&a, &b)));
        // Another object (a newer version from the cache): serialized.
        let newer = object("a", Some("2"), 2);
        let value = each.value(&newer, kind);
        assert_eq!(value.map(|v| v["spec"]["n"].clone()), Some(2.into()));
        // The cache drops the first: forgotten; the one it still holds is kept.
        drop(held);
        each.forget_released();
        assert_eq!(each.by_address.len(), 1);
        assert!(each.by_address.contains_key(&address_of(&newer)));
    }
}
