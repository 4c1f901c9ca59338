//! A stored object read only as deep as a change needs: a JSON object's members in their
//! order, each value the raw JSON text it was stored as until a change opens it. A change
//! that touches a few fields of a large object (the pod binding's `spec.nodeName`, a
//! condition, annotations) then decodes and re-encodes those alone and copies the rest byte
//! for byte, where decoding the whole object into a `Value` tree cost the binding more than
//! anything else it does.
//!
//! Knows nothing of kinds or of what a change means; it reads and writes JSON objects, and
//! the stored form's revision slot (`metadata.resourceVersion` first, as
//! [`crate::write::encode_versioned`] lays it out).

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::write::{Encoded, open_revision_slot};

/// A JSON object's members in order; each is the raw text it was read from until opened.
#[derive(Debug, Default)]
pub struct RawObject<'a> {
    members: Vec<(String, Member<'a>)>,
}

/// One member's value.
#[derive(Debug)]
enum Member<'a> {
    /// As read, not decoded.
    Raw(&'a RawValue),
    /// Opened one level further.
    Object(RawObject<'a>),
    /// Decoded (or set) whole.
    Value(Value),
}

impl<'a> RawObject<'a> {
    /// Reads a JSON object one level deep.
    pub fn parse(json: &'a [u8]) -> Result<RawObject<'a>, serde_json::Error> {
        serde_json::from_slice(json)
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.members.iter().position(|(k, _)| k == key)
    }

    /// The member `key`, added at the end as `absent` gives it when it is not there.
    fn member_mut(&mut self, key: &str, absent: impl FnOnce() -> Member<'a>) -> &mut Member<'a> {
        let index = match self.position(key) {
            Some(index) => index,
            None => {
                self.members.push((key.to_string(), absent()));
                self.members.len() - 1
            }
        };
        &mut self.members[index].1
    }

    /// The member `key` decoded as a `Value` (`None` when it is absent).
    pub fn value(&self, key: &str) -> Result<Option<Value>, serde_json::Error> {
        let Some(index) = self.position(key) else {
            return Ok(None);
        };
        self.members[index].1.decode().map(Some)
    }

    /// The member `key` when it is a string.
    pub fn str(&self, key: &str) -> Option<String> {
        match self.value(key) {
            Ok(Some(Value::String(text))) => Some(text),
            _ => None,
        }
    }

    /// The member `key` opened one level further; an absent (or `null`) member becomes an
    /// empty object at the end, as indexing a `Value` by a new key makes it. `None` when the
    /// member holds something other than an object.
    pub fn object_mut(
        &mut self,
        key: &str,
    ) -> Result<Option<&mut RawObject<'a>>, serde_json::Error> {
        let member = self.member_mut(key, || Member::Object(RawObject::default()));
        let opened = match member {
            Member::Raw(raw) if raw.get() == "null" => Some(RawObject::default()),
            Member::Raw(raw) if raw.get().starts_with('{') => Some(RawObject::parse_str(raw)?),
            Member::Value(Value::Null) => Some(RawObject::default()),
            _ => None,
        };
        if let Some(opened) = opened {
            *member = Member::Object(opened);
        }
        Ok(match member {
            Member::Object(object) => Some(object),
            _ => None,
        })
    }

    /// The member `key` decoded to be changed in place; an absent member is added as
    /// `null` at the end.
    pub fn value_mut(&mut self, key: &str) -> Result<&mut Value, serde_json::Error> {
        let member = self.member_mut(key, || Member::Value(Value::Null));
        if !matches!(member, Member::Value(_)) {
            *member = Member::Value(member.decode()?);
        }
        match member {
            Member::Value(value) => Ok(value),
            Member::Raw(_) | Member::Object(_) => {
                Err(serde::de::Error::custom("a member was not decoded"))
            }
        }
    }

    /// Sets the member `key`: in its place when it is there, at the end otherwise.
    pub fn set(&mut self, key: &str, value: Value) {
        match self.position(key) {
            Some(index) => self.members[index].1 = Member::Value(value),
            None => self.members.push((key.to_string(), Member::Value(value))),
        }
    }

    fn parse_str(raw: &'a RawValue) -> Result<RawObject<'a>, serde_json::Error> {
        serde_json::from_str(raw.get())
    }

    /// The object's JSON.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1024);
        self.write(&mut out, |_| true);
        out
    }

    /// Writes the members `keep` lets through as a JSON object.
    fn write(&self, out: &mut Vec<u8>, keep: impl Fn(&str) -> bool) {
        out.push(b'{');
        let mut first = true;
        for (key, member) in self.members.iter().filter(|(k, _)| keep(k)) {
            if !first {
                out.push(b',');
            }
            first = false;
            write_key(out, key);
            member.write(out);
        }
        out.push(b'}');
    }

    /// The object in its stored form: `metadata.resourceVersion` first and left empty for
    /// the store to fill in, everything else in its order (what
    /// [`crate::write::encode_versioned`] gives for the same object).
    pub fn encode_versioned(&mut self) -> Result<Encoded, serde_json::Error> {
        let mut out = Vec::with_capacity(4096);
        let mut revision_at = None;
        // Metadata that is not an object has no slot, as in encode_versioned.
        if let Some(index) = self.position("metadata") {
            let member = &mut self.members[index].1;
            match member {
                Member::Raw(raw) if raw.get().starts_with('{') => {
                    *member = Member::Object(RawObject::parse_str(raw)?);
                }
                Member::Value(Value::Object(fields)) => {
                    let members = std::mem::take(fields)
                        .into_iter()
                        .map(|(key, value)| (key, Member::Value(value)))
                        .collect();
                    *member = Member::Object(RawObject { members });
                }
                _ => {}
            }
        }
        out.push(b'{');
        for (i, (key, member)) in self.members.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_key(&mut out, key);
            match (key.as_str(), member) {
                ("metadata", Member::Object(metadata)) => {
                    revision_at = Some(open_revision_slot(&mut out));
                    let mut rest = Vec::new();
                    metadata.write(&mut rest, |k| k != "resourceVersion");
                    // The members between the braces, after the slot.
                    if rest.len() > 2 {
                        out.push(b',');
                        out.extend_from_slice(&rest[1..rest.len() - 1]);
                    }
                    out.push(b'}');
                }
                _ => member.write(&mut out),
            }
        }
        out.push(b'}');
        Ok(Encoded {
            bytes: out,
            revision_at,
        })
    }
}

impl Member<'_> {
    fn decode(&self) -> Result<Value, serde_json::Error> {
        match self {
            Member::Raw(raw) => serde_json::from_str(raw.get()),
            Member::Object(object) => serde_json::from_slice(&object.to_vec()),
            Member::Value(value) => Ok(value.clone()),
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Member::Raw(raw) => out.extend_from_slice(raw.get().as_bytes()),
            Member::Object(object) => object.write(out, |_| true),
            Member::Value(value) => {
                // Writing a Value to memory cannot fail.
                serde_json::to_writer(&mut *out, value).ok();
            }
        }
    }
}

fn write_key(out: &mut Vec<u8>, key: &str) {
    serde_json::to_writer(&mut *out, key).ok();
    out.push(b':');
}

impl<'de> Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    // A repeated key: the last one counts, as it does in a Value.
                    members.retain(|(k, _): &(String, Member<'de>)| *k != key);
                    members.push((key, Member::Raw(value)));
                }
                Ok(RawObject { members })
            }
        }
        deserializer.deserialize_map(Members)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resource::Resource;
    use crate::write::encode_versioned;

    fn pods() -> Resource {
        Resource::find("", "v1", "pods").expect("pods are served")
    }

    #[test]
    fn untouched_members_are_copied_byte_for_byte_and_changes_land_in_place() {
        let stored = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"7","name":"p","labels":{"a":"\u00e9"}},"spec":{"containers":[{"name":"c","image":"i","args":["1.50","x"]}],"priority":0},"status":{"phase":"Pending"}}"#;
        let mut object = RawObject::parse(stored).unwrap();
        let spec = object.object_mut("spec").unwrap().unwrap();
        spec.set("nodeName", json!("n1"));
        spec.set("priority", json!(5));
        object.value_mut("status").unwrap()["phase"] = json!("Running");
        let encoded = object.encode_versioned().unwrap();
        let text = String::from_utf8(encoded.bytes.clone()).unwrap();
        assert_eq!(
            text,
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"","name":"p","labels":{"a":"\u00e9"}},"spec":{"containers":[{"name":"c","image":"i","args":["1.50","x"]}],"priority":5,"nodeName":"n1"},"status":{"phase":"Running"}}"#
        );
        assert_eq!(
            &text[..encoded.revision_at.unwrap()],
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":""#
        );
    }

    #[test]
    fn members_read_as_a_value_would_read_them() {
        let stored = br#"{"metadata":{"name":"p","uid":7,"deletionTimestamp":null},"spec":null,"a":1,"a":2}"#;
        let mut object = RawObject::parse(stored).unwrap();
        assert_eq!(
            object.value("a").unwrap(),
            Some(json!(2)),
            "the last of a repeated key"
        );
        assert_eq!(object.value("b").unwrap(), None);
        let metadata = object.object_mut("metadata").unwrap().unwrap();
        assert_eq!(metadata.str("name").as_deref(), Some("p"));
        assert_eq!(metadata.str("uid"), None, "a number is no string");
        assert_eq!(metadata.str("deletionTimestamp"), None);
        // null and absent members open as empty objects; anything else is no object.
        assert!(
            object
                .object_mut("spec")
                .unwrap()
                .unwrap()
                .members
                .is_empty()
        );
        assert!(object.object_mut("status").unwrap().is_some());
        assert!(object.object_mut("a").unwrap().is_none());
        assert!(RawObject::parse(b"[1]").is_err());
        assert!(RawObject::parse(br#"{"a":"#).is_err());
    }

    #[test]
    fn the_stored_form_is_what_encode_versioned_gives_for_the_same_object() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "p", "resourceVersion": "12", "uid": "u",
                                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
                   "spec": {"containers": [{"name": "c", "image": "i"}]}}),
            json!({"metadata": {"resourceVersion": "3"}}),
            json!({"metadata": {}}),
            json!({"kind": "NoMetadata", "spec": {"x": [1, 2.5, "é", null, true]}}),
            json!({"metadata": "not an object", "spec": {}}),
            json!({"metadata": null}),
        ];
        for object in objects {
            let bytes = serde_json::to_vec(&object).unwrap();
            let mut raw = RawObject::parse(&bytes).unwrap();
            let whole = encode_versioned(pods(), &object);
            let shallow = raw.encode_versioned().unwrap();
            assert_eq!(
                String::from_utf8(shallow.bytes).unwrap(),
                String::from_utf8(whole.bytes).unwrap(),
                "{object}"
            );
            assert_eq!(shallow.revision_at, whole.revision_at, "{object}");
        }
    }
}
