//! The FieldsV1 a create records, remembered by the shape of the object: objects made from
//! one template (a Job's pods, a controller's Events) differ in names and values, not in
//! the fields they set, and building the FieldsV1 tree anew for each of them was the
//! largest part of a pod create's managed fields.
//!
//! Knows which parts of an object [`fields_v1_of`] reads, and nothing else of managed
//! fields: the field set itself is [`fields_v1_of`]'s.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use serde_json::Value;

use super::fieldset::fields_v1_of;
use crate::patch::Schema;

/// Shapes remembered per thread before the memory is emptied and filled again.
const REMEMBERED: usize = 256;

/// A definition and the two halves of a 128-bit fingerprint of an object's shape.
type Key = (&'static str, u64, u64);

thread_local! {
    static FIELDS: RefCell<HashMap<Key, Value, foldhash::fast::FixedState>> =
        RefCell::default();
}

/// [`fields_v1_of`], remembered for objects of a bundled definition (whose schema never
/// changes): two objects with the same fingerprint of what the field set reads — every
/// map's keys and the kind of each value under them, and lists whole, since their items'
/// keys name the list's members — have the same FieldsV1.
pub fn fields_v1_of_remembered(object: &Value, schema: Schema<'_>) -> Value {
    let Some(definition) = schema.definition_name() else {
        return fields_v1_of(object, schema);
    };
    let key = (
        definition,
        fingerprint(object, 0x5d4e_1f0a_9c3b_2a71),
        fingerprint(object, 0x1b87_3c5e_d2f6_04a9),
    );
    if let Some(known) = FIELDS.with(|fields| fields.borrow().get(&key).cloned()) {
        return known;
    }
    let built = fields_v1_of(object, schema);
    FIELDS.with(|fields| {
        let mut fields = fields.borrow_mut();
        if fields.len() >= REMEMBERED {
            fields.clear();
        }
        fields.insert(key, built.clone());
    });
    built
}

fn fingerprint(object: &Value, seed: u64) -> u64 {
    let mut hasher = foldhash::quality::FixedState::with_seed(seed).build_hasher();
    shape(object, &mut hasher, false);
    hasher.finish()
}

/// What the field set reads of a value: under map keys the kind of each value (`whole`
/// false), in lists everything (`whole` true).
fn shape(value: &Value, hasher: &mut impl Hasher, whole: bool) {
    match value {
        Value::Object(map) => {
            hasher.write_u8(b'{');
            hasher.write_usize(map.len());
            for (key, child) in map {
                hasher.write_usize(key.len());
                hasher.write(key.as_bytes());
                shape(child, hasher, whole);
            }
        }
        Value::Array(items) => {
            hasher.write_u8(b'[');
            hasher.write_usize(items.len());
            for item in items {
                shape(item, hasher, true);
            }
        }
        Value::Null => hasher.write_u8(b'n'),
        Value::Bool(b) => hasher.write_u8(match (whole, b) {
            (false, _) => b'b',
            (true, true) => b't',
            (true, false) => b'f',
        }),
        Value::Number(number) => {
            hasher.write_u8(b'0');
            if whole {
                match (number.as_u64(), number.as_i64(), number.as_f64()) {
                    (Some(n), _, _) => hasher.write_u64(n),
                    (None, Some(n), _) => hasher.write_i64(n),
                    (None, None, n) => hasher.write_u64(n.unwrap_or(f64::NAN).to_bits()),
                }
            }
        }
        Value::String(text) => {
            hasher.write_u8(b's');
            if whole {
                hasher.write_usize(text.len());
                hasher.write(text.as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_schema() -> Schema<'static> {
        Schema::definition("io.k8s.api.core.v1.Pod")
    }

    #[test]
    fn objects_of_one_shape_share_their_field_set_and_others_do_not() {
        let pod = |name: &str, labels: Value, containers: Value| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "labels": labels},
                   "spec": {"containers": containers, "priority": 0}})
        };
        let one = json!([{"name": "c", "image": "i"}]);
        // (case, object) — each must get exactly what fields_v1_of builds for it.
        let cases = [
            ("first", pod("a", json!({"app": "x"}), one.clone())),
            (
                "same shape, other values",
                pod("b", json!({"app": "y"}), one.clone()),
            ),
            ("another label", pod("c", json!({"tier": "x"}), one.clone())),
            ("a label null", pod("d", json!({"app": null}), one.clone())),
            ("labels empty", pod("e", json!({}), one.clone())),
            (
                "another container name",
                pod(
                    "f",
                    json!({"app": "x"}),
                    json!([{"name": "d", "image": "i"}]),
                ),
            ),
            (
                "two containers",
                pod(
                    "g",
                    json!({"app": "x"}),
                    json!([{"name": "c", "image": "i"}, {"name": "d", "image": "i"}]),
                ),
            ),
            ("first again", pod("h", json!({"app": "z"}), one.clone())),
        ];
        for (case, object) in cases {
            assert_eq!(
                fields_v1_of_remembered(&object, pod_schema()),
                fields_v1_of(&object, pod_schema()),
                "{case}"
            );
        }
    }

    #[test]
    fn fingerprints_tell_shapes_apart_and_ignore_values_outside_lists() {
        let fp = |v: &Value| fingerprint(v, 1);
        assert_eq!(fp(&json!({"a": "x"})), fp(&json!({"a": "y"})));
        assert_eq!(fp(&json!({"a": 1})), fp(&json!({"a": 2.5})));
        assert_ne!(fp(&json!({"a": "x"})), fp(&json!({"a": 1})));
        assert_ne!(fp(&json!({"a": {}})), fp(&json!({"a": null})));
        assert_ne!(fp(&json!({"a": {"b": 1}})), fp(&json!({"a": {}, "b": 1})));
        assert_ne!(fp(&json!({"ab": 1})), fp(&json!({"a": 1, "b": 1})));
        assert_ne!(fp(&json!({"l": ["x"]})), fp(&json!({"l": ["y"]})));
        assert_ne!(fp(&json!({"l": [{"k": 1}]})), fp(&json!({"l": [{"k": 2}]})));
        assert_ne!(fp(&json!({"l": [1]})), fp(&json!({"l": [-1]})));
        assert_ne!(fp(&json!({"l": [true]})), fp(&json!({"l": [false]})));
        assert_eq!(fp(&json!({"a": true})), fp(&json!({"a": false})));
    }

    #[test]
    fn custom_schemas_are_not_remembered() {
        let node = json!({"type": "object"});
        let schema = Schema::of(&node);
        assert_eq!(schema.definition_name(), None);
        assert_eq!(
            pod_schema().definition_name(),
            Some("io.k8s.api.core.v1.Pod")
        );
        assert_eq!(pod_schema().property("spec").definition_name(), None);
        let object = json!({"spec": {"a": 1}});
        assert_eq!(
            fields_v1_of_remembered(&object, schema),
            fields_v1_of(&object, schema)
        );
    }
}
