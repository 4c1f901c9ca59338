//! Drift: a bundle's desired objects against what is live, as findings — an object missing, a
//! field the bundle sets holding another value (or none), an object labelled as the tenant's
//! that the bundle no longer holds.
//!
//! Only the fields the bundle sets are compared: what the API server or other managers add
//! beside them (defaults, status, metadata) is not drift. A list of another length is reported
//! whole, as the bundle's lists are atomic (a rule or subject added by hand is drift); one of
//! the same length item by item. Quantities compare by
//! value (`1024Mi` is `1Gi`). Also which objects must be replaced rather than applied over (a
//! field the API server never lets change differs). Knows nothing of how the live objects
//! were read.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;
use tessera_model::quantity::Quantity;

use crate::bundle::{ObjectRef, TENANT_LABEL};

/// One difference between the bundle and the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The bundle holds the object; the cluster does not.
    Missing(ObjectRef),
    /// A field the bundle sets differs live.
    Differs {
        /// The object.
        object: ObjectRef,
        /// The field's path (`spec.hard[requests.nvidia.com/gpu]`).
        field: String,
        /// Its live value (compact JSON), `None` when absent.
        live: Option<String>,
        /// The bundle's value (compact JSON).
        want: String,
    },
    /// Live and labelled as the tenant's, but not in the bundle.
    NotInBundle(ObjectRef),
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Missing(object) => write!(f, "{object}: missing"),
            Finding::Differs {
                object,
                field,
                live,
                want,
            } => match live {
                Some(live) => write!(f, "{object}: {field} is {live}, the bundle sets {want}"),
                None => write!(f, "{object}: {field} is not set, the bundle sets {want}"),
            },
            Finding::NotInBundle(object) => write!(
                f,
                "{object}: labelled {TENANT_LABEL} but not in the bundle (`tenant create` \
                 removes it)"
            ),
        }
    }
}

/// The findings of `desired` (a bundle) against `live` (the objects found: those of the
/// bundle's names and those labelled as the tenant's), in the bundle's order, then the
/// objects not in it.
pub fn drift(desired: &[Value], live: &[Value]) -> Vec<Finding> {
    let live: BTreeMap<ObjectRef, &Value> = live
        .iter()
        .filter_map(|object| Some((ObjectRef::of(object)?, object)))
        .collect();
    let mut findings = Vec::new();
    let mut wanted = std::collections::BTreeSet::new();
    for object in desired {
        let Some(reference) = ObjectRef::of(object) else {
            continue;
        };
        wanted.insert(reference.clone());
        let Some(found) = live.get(&reference) else {
            findings.push(Finding::Missing(reference));
            continue;
        };
        let mut differences = Vec::new();
        for key in [
            "metadata",
            "spec",
            "roleRef",
            "subjects",
            "automountServiceAccountToken",
        ] {
            if let Some(want) = object.get(key) {
                compare(key, want, found.get(key), &mut differences);
            }
        }
        findings.extend(
            differences
                .into_iter()
                .map(|(field, live, want)| Finding::Differs {
                    object: reference.clone(),
                    field,
                    live,
                    want,
                }),
        );
    }
    findings.extend(
        stale(live.keys(), &wanted)
            .into_iter()
            .map(Finding::NotInBundle),
    );
    findings
}

/// The live objects (`labelled` as the tenant's) that the bundle (`wanted`) does not hold:
/// what `tenant create` removes after applying.
pub fn stale<'a>(
    labelled: impl IntoIterator<Item = &'a ObjectRef>,
    wanted: &std::collections::BTreeSet<ObjectRef>,
) -> Vec<ObjectRef> {
    labelled
        .into_iter()
        .filter(|r| !wanted.contains(*r))
        .cloned()
        .collect()
}

/// Fields the API server never lets change once an object exists, by kind: a LocalQueue's
/// ClusterQueue (Kueue's CEL rule) and a RoleBinding's role.
const IMMUTABLE: [(&str, &str); 2] = [
    ("LocalQueue", "/spec/clusterQueue"),
    ("RoleBinding", "/roleRef"),
];

/// Whether objects of `kind` have fields that cannot change (so the live object is read before
/// applying, for [`needs_replacement`]).
pub fn has_immutable_fields(kind: &str) -> bool {
    IMMUTABLE.iter().any(|(k, _)| *k == kind)
}

/// Whether applying `desired` over `live` would change a field that cannot change, so the
/// object must be deleted and created again: the field's path, if so.
pub fn needs_replacement(desired: &Value, live: &Value) -> Option<&'static str> {
    let kind = desired.get("kind")?.as_str()?;
    IMMUTABLE
        .iter()
        .filter(|(k, _)| *k == kind)
        .find(|(_, pointer)| {
            desired.pointer(pointer).is_some() && desired.pointer(pointer) != live.pointer(pointer)
        })
        .map(|(_, pointer)| *pointer)
}

/// Fields under these paths are quantities.
fn quantity_field(path: &str) -> bool {
    path.starts_with("spec.hard") || path.starts_with("spec.limits")
}

fn compact(value: &Value) -> String {
    value.to_string()
}

fn field_path(parent: &str, key: &str) -> String {
    if key.contains(['.', '/']) {
        format!("{parent}[{key}]")
    } else {
        format!("{parent}.{key}")
    }
}

type Difference = (String, Option<String>, String);

fn compare(path: &str, want: &Value, live: Option<&Value>, out: &mut Vec<Difference>) {
    match (want, live) {
        (Value::Object(fields), Some(Value::Object(live_fields))) => {
            for (key, value) in fields {
                compare(&field_path(path, key), value, live_fields.get(key), out);
            }
        }
        (Value::Array(items), Some(Value::Array(live_items)))
            if items.len() == live_items.len() =>
        {
            for (i, (item, live_item)) in items.iter().zip(live_items).enumerate() {
                compare(&format!("{path}[{i}]"), item, Some(live_item), out);
            }
        }
        (_, Some(live)) if same_scalar(path, want, live) => {}
        (_, live) => out.push((path.to_owned(), live.map(compact), compact(want))),
    }
}

fn same_scalar(path: &str, want: &Value, live: &Value) -> bool {
    if want == live {
        return true;
    }
    if !quantity_field(path) {
        return false;
    }
    let quantity = |v: &Value| match v {
        Value::String(s) => s.parse::<Quantity>().ok(),
        Value::Number(n) => n.to_string().parse::<Quantity>().ok(),
        _ => None,
    };
    matches!((quantity(want), quantity(live)), (Some(a), Some(b)) if a.nanos() == b.nanos())
}
