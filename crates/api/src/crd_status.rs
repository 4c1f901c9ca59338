//! The status the server keeps on a CustomResourceDefinition: the names it accepted against
//! the other CRDs of its group (`NamesAccepted` with upstream's conflict reasons),
//! `Established` (true once, never back), `Terminating`, and `storedVersions`.
//!
//! Pure: the names other CRDs claim are an input ([`ClaimedNames`]); which CRDs exist and
//! when to recompute is the object layer's business.

use std::collections::BTreeSet;
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};
use tessera_model::json::strings_at;
use tessera_model::json::text;

/// The group of a CRD from its name, `<plural>.<group>`.
pub fn group_of(crd_name: &str) -> &str {
    crd_name.split_once('.').map_or("", |(_, group)| group)
}

/// The names other CRDs of one group have accepted: resource names (plural, singular,
/// short names) and kinds (kind, listKind) are separate spaces, as upstream keeps them.
#[derive(Debug, Default, Clone)]
pub struct ClaimedNames {
    resources: BTreeSet<String>,
    kinds: BTreeSet<String>,
}

impl ClaimedNames {
    /// The names claimed by `crds` other than the one named `own`, within `own`'s group.
    pub fn by_others<'a>(crds: impl IntoIterator<Item = &'a Value>, own: &str) -> ClaimedNames {
        let group = group_of(own);
        let mut claimed = ClaimedNames::default();
        for crd in crds {
            if text(crd, "/metadata/name") == own || text(crd, "/spec/group") != group {
                continue;
            }
            let Some(names) = crd.at("/status/acceptedNames") else {
                continue;
            };
            for key in ["plural", "singular"] {
                claimed
                    .resources
                    .insert(text(names, &format!("/{key}")).into());
            }
            claimed
                .resources
                .extend(strings_at::<Vec<String>>(names, "/shortNames"));
            for key in ["kind", "listKind"] {
                claimed.kinds.insert(text(names, &format!("/{key}")).into());
            }
        }
        claimed.resources.remove("");
        claimed.kinds.remove("");
        claimed
    }
}

/// Upstream's rule: a requested name is fine if it is already ours or nobody else holds it.
fn equal_to_accepted_or_fresh(
    requested: &str,
    accepted: &str,
    used: &BTreeSet<String>,
) -> Result<(), String> {
    if requested == accepted || !used.contains(requested) {
        Ok(())
    } else {
        Err(format!("{requested:?} is already in use"))
    }
}

fn condition(kind: &str, status: &str, reason: &str, message: &str, since: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": since})
}

/// Keeps a condition's transition time when its status did not change.
fn carry_transition(next: &mut Value, previous: Option<&Value>) {
    if let Some(previous) = previous
        && previous.get("status") == next.get("status")
        && let Some(since) = previous.get("lastTransitionTime")
    {
        next["lastTransitionTime"] = since.clone();
    }
}

/// The status of `crd` at `now`, given the names the rest of its group claims.
pub fn status(crd: &Value, now: &str, claimed: &ClaimedNames) -> Value {
    let mut requested = crd.at("/spec/names").cloned().unwrap_or(json!({}));
    let kind = text(&requested, "/kind").to_string();
    if text(&requested, "/singular").is_empty() {
        requested["singular"] = json!(kind.to_ascii_lowercase());
    }
    if text(&requested, "/listKind").is_empty() {
        requested["listKind"] = json!(format!("{kind}List"));
    }
    let accepted = crd
        .at("/status/acceptedNames")
        .cloned()
        .unwrap_or(json!({}));
    let mut names = accepted.clone();
    if !names.is_object() {
        names = json!({});
    }
    let mut conflict: Option<(&str, String)> = None;
    for (key, reason, used) in [
        ("plural", "PluralConflict", &claimed.resources),
        ("singular", "SingularConflict", &claimed.resources),
    ] {
        let pointer = format!("/{key}");
        match equal_to_accepted_or_fresh(
            text(&requested, &pointer),
            text(&accepted, &pointer),
            used,
        ) {
            Ok(()) => names[key] = requested[key].clone(),
            Err(message) => conflict = Some((reason, message)),
        }
    }
    let (wanted, held): (Vec<String>, Vec<String>) = (
        strings_at(&requested, "/shortNames"),
        strings_at(&accepted, "/shortNames"),
    );
    if wanted != held {
        let errors: Vec<String> = wanted
            .iter()
            .filter(|short| !held.contains(short))
            .filter_map(|short| equal_to_accepted_or_fresh(short, "", &claimed.resources).err())
            .collect();
        if errors.is_empty() {
            match requested.get("shortNames") {
                Some(shorts) => names["shortNames"] = shorts.clone(),
                None => {
                    if let Some(map) = names.as_object_mut() {
                        map.remove("shortNames");
                    }
                }
            }
        } else {
            let message = if errors.len() == 1 {
                errors[0].clone()
            } else {
                format!("[{}]", errors.join(", "))
            };
            conflict = Some(("ShortNamesConflict", message));
        }
    }
    for (key, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        let pointer = format!("/{key}");
        match equal_to_accepted_or_fresh(
            text(&requested, &pointer),
            text(&accepted, &pointer),
            &claimed.kinds,
        ) {
            Ok(()) => names[key] = requested[key].clone(),
            Err(message) => conflict = Some((reason, message)),
        }
    }
    match requested.get("categories") {
        Some(categories) => names["categories"] = categories.clone(),
        None => {
            if let Some(map) = names.as_object_mut() {
                map.remove("categories");
            }
        }
    }

    let previous = |kind: &str| {
        crd.at("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|all| all.iter().find(|c| text(c, "/type") == kind))
    };
    let mut names_accepted = match &conflict {
        None => condition(
            "NamesAccepted",
            "True",
            "NoConflicts",
            "no conflicts found",
            now,
        ),
        Some((reason, message)) => condition("NamesAccepted", "False", reason, message, now),
    };
    carry_transition(&mut names_accepted, previous("NamesAccepted"));
    // Established turns true once every name is accepted and never goes back.
    let mut established = match previous("Established") {
        Some(old) if text(old, "/status") == "True" => old.clone(),
        _ if conflict.is_none() => condition(
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
            now,
        ),
        _ => condition(
            "Established",
            "False",
            "NotAccepted",
            "not all names are accepted",
            now,
        ),
    };
    carry_transition(&mut established, previous("Established"));
    let mut conditions = vec![names_accepted, established];
    if crd.at("/metadata/deletionTimestamp").is_some() {
        let mut terminating = condition(
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResourceDefinition marked for deletion; instances are being deleted",
            now,
        );
        carry_transition(&mut terminating, previous("Terminating"));
        conditions.push(terminating);
    }

    let mut stored: Vec<String> = strings_at(crd, "/status/storedVersions");
    if let Some(storage) = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|v| {
            v.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .map(|v| text(v, "/name").to_string())
        && !stored.contains(&storage)
    {
        stored.push(storage);
    }
    json!({
        "acceptedNames": names,
        "conditions": conditions,
        "storedVersions": stored,
    })
}

/// Whether the server serves the CRD's kinds: it is established and not being deleted
/// past the point of accepting new objects (that is checked on create).
pub fn is_established(crd: &Value) -> bool {
    crd.at("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| text(c, "/type") == "Established" && text(c, "/status") == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(plural: &str, kind: &str, short: &[&str]) -> Value {
        json!({
            "metadata": {"name": format!("{plural}.example.com")},
            "spec": {
                "group": "example.com",
                "names": {"plural": plural, "kind": kind, "shortNames": short},
                "versions": [{"name": "v1", "served": true, "storage": true}],
            },
        })
    }

    fn accepted(mut crd: Value) -> Value {
        crd["status"] = status(&crd, "t0", &ClaimedNames::default());
        crd
    }

    #[test]
    fn names_conflict_with_the_group_like_upstream() {
        let existing = accepted(crd("widgets", "Widget", &["wd"]));
        let table = [
            // (plural, kind, short names, reason, message)
            ("gadgets", "Gadget", vec!["gd"], None),
            (
                "gadgets",
                "Widget",
                vec![],
                // Kind and listKind both collide; as upstream, the last check reports.
                Some(("ListKindConflict", r#""WidgetList" is already in use"#)),
            ),
            (
                "gadgets",
                "WidgetList",
                vec![],
                Some(("KindConflict", r#""WidgetList" is already in use"#)),
            ),
            (
                "gadgets",
                "Gadget",
                vec!["wd"],
                Some(("ShortNamesConflict", r#""wd" is already in use"#)),
            ),
            (
                "widget",
                "Gadget",
                vec![],
                Some(("PluralConflict", r#""widget" is already in use"#)),
            ),
        ];
        for (plural, kind, short, expected) in table {
            let candidate = crd(plural, kind, &short);
            let claimed = ClaimedNames::by_others(
                [&existing, &candidate],
                text(&candidate, "/metadata/name"),
            );
            let status = status(&candidate, "t1", &claimed);
            let names = &status["conditions"][0];
            let established = &status["conditions"][1];
            match expected {
                None => {
                    assert_eq!(names["status"], "True", "{plural}/{kind}");
                    assert_eq!(established["status"], "True");
                    assert_eq!(status["acceptedNames"]["kind"], kind);
                }
                Some((reason, message)) => {
                    assert_eq!(names["status"], "False", "{plural}/{kind}");
                    assert_eq!(names["reason"], reason);
                    assert_eq!(names["message"], message);
                    assert_eq!(established["reason"], "NotAccepted");
                    assert!(!is_established(&json!({"status": status})));
                }
            }
        }
    }

    #[test]
    fn established_stays_true_and_keeps_its_transition_time() {
        let mut widget = accepted(crd("widgets", "Widget", &[]));
        widget["metadata"]["deletionTimestamp"] = json!("t2");
        let status = status(&widget, "t2", &ClaimedNames::default());
        assert_eq!(status["conditions"][1]["lastTransitionTime"], "t0");
        assert_eq!(status["conditions"][2]["type"], "Terminating");
        assert_eq!(status["acceptedNames"]["listKind"], "WidgetList");
        assert_eq!(status["acceptedNames"]["singular"], "widget");
        assert_eq!(status["storedVersions"], json!(["v1"]));
    }
}
