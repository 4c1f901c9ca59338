//! Which PersistentVolume a claim gets, as upstream's `FindMatchingVolume`
//! (`component-helpers/storage/volume/pv_helpers.go`) and the PV controller's access-mode
//! index (`pkg/controller/volume/persistentvolume/index.go`, `findByClaim`) decide it.
//!
//! A volume bound to another claim, smaller than the request, of another volume mode or
//! volume attributes class, being deleted, out of `Available`, outside the claim's label selector or of another class is
//! skipped; a volume pre-bound to the claim (its `claimRef`) wins outright; otherwise the
//! smallest fitting volume wins. In the controller's path (no node) volumes are tried in groups
//! of identical access modes that contain every requested mode, fewest modes first; in the
//! scheduler's path (a node) the volume's node affinity must match the node and the access
//! modes are checked volume by volume.
//!
//! Knows nothing of classes' binding modes (the caller says whether binding is delayed) nor of
//! which volumes a pod already chose (the caller leaves those out).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::objects::{
    self, ACCESS_MODES, access_modes, access_modes_string, check_access_modes, check_node_affinity,
    claim_class, claim_ref, is_deleting, is_volume_bound_to_claim, requested_storage,
    selector_matches, volume_attributes_class, volume_capacity, volume_class, volume_mode_mismatch,
};

/// The best volume for `claim` among `volumes`, or `None`.
///
/// `node` is given only on the scheduler's path: the volume's node affinity must then match
/// it. `delay_binding` is true only on the PV controller's path for a `WaitForFirstConsumer`
/// class: pre-bound volumes still match, unbound ones are left to the scheduler.
pub fn find_matching_volume<'a>(
    claim: &Value,
    volumes: impl IntoIterator<Item = &'a Value>,
    node: Option<&Value>,
    delay_binding: bool,
) -> Option<&'a Value> {
    let volumes: Vec<&Value> = volumes.into_iter().collect();
    match node {
        Some(node) => {
            let labels = objects::node_labels(node);
            find_in(claim, &volumes, Some(&labels), delay_binding)
        }
        None => find_by_claim(claim, &volumes, delay_binding),
    }
}

/// The controller's `findByClaim`: groups of volumes with the same access modes, each group
/// offering every requested mode, tried fewest modes first (ties in the modes' text order).
fn find_by_claim<'a>(
    claim: &Value,
    volumes: &[&'a Value],
    delay_binding: bool,
) -> Option<&'a Value> {
    let mut groups: BTreeMap<String, Vec<&'a Value>> = BTreeMap::new();
    for volume in volumes {
        let modes: Vec<String> = access_modes(volume, "/spec/accessModes");
        groups
            .entry(access_modes_string(&modes))
            .or_default()
            .push(volume);
    }
    let requested: Vec<String> = access_modes(claim, "/spec/accessModes");
    let mut keys: Vec<&String> = groups
        .keys()
        .filter(|key| {
            let offered: Vec<&str> = key.split(',').collect();
            requested.iter().all(|mode| {
                ACCESS_MODES
                    .iter()
                    .any(|(long, short)| long == mode && offered.contains(short))
            })
        })
        .collect();
    keys.sort_by_key(|key| {
        (
            key.split(',').filter(|m| !m.is_empty()).count(),
            key.to_string(),
        )
    });
    keys.into_iter()
        .find_map(|key| find_in(claim, &groups[key], None, delay_binding))
}

/// Upstream's `FindMatchingVolume` loop (access modes checked here only with a node).
fn find_in<'a>(
    claim: &Value,
    volumes: &[&'a Value],
    node_labels: Option<&BTreeMap<String, String>>,
    delay_binding: bool,
) -> Option<&'a Value> {
    let requested = requested_storage(claim);
    let requested_class = claim_class(claim);
    let selector = claim.pointer("/spec/selector");
    let mut smallest: Option<&'a Value> = None;
    for &volume in volumes {
        if claim_ref(volume).is_some() && !is_volume_bound_to_claim(volume, claim) {
            continue;
        }
        let capacity = volume_capacity(volume);
        if capacity < requested
            || volume_mode_mismatch(claim, volume)
            || volume_attributes_class(claim) != volume_attributes_class(volume)
            || is_deleting(volume)
        {
            continue;
        }
        let affinity_fits = node_labels.is_none_or(|labels| check_node_affinity(volume, labels));
        if is_volume_bound_to_claim(volume, claim) {
            // A pre-bound volume that does not fit the node means no match at all.
            return affinity_fits.then_some(volume);
        }
        if node_labels.is_none() && delay_binding {
            continue;
        }
        if tessera_model::json::text(volume, "/status/phase") != "Available"
            || !selector_matches(selector, &objects::node_labels(volume))
            || volume_class(volume) != requested_class
            || !affinity_fits
            || (node_labels.is_some() && !check_access_modes(claim, volume))
        {
            continue;
        }
        if smallest.is_none_or(|best| volume_capacity(best) > capacity) {
            smallest = Some(volume);
        }
    }
    smallest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::with;
    use serde_json::json;

    fn volume(name: &str, size: &str, modes: &[&str]) -> Value {
        json!({
            "metadata": {"name": name, "labels": {}},
            "spec": {"capacity": {"storage": size}, "accessModes": modes,
                     "persistentVolumeReclaimPolicy": "Retain"},
            "status": {"phase": "Available"}
        })
    }

    fn claim(size: &str, modes: &[&str]) -> Value {
        json!({
            "metadata": {"name": "claim01", "namespace": "myns", "uid": "uid01"},
            "spec": {"accessModes": modes, "resources": {"requests": {"storage": size}}}
        })
    }

    /// Upstream's `createTestVolumes`, reduced: GCE-like (RWO,ROX) and NFS-like (RWO,ROX,RWX)
    /// volumes of several sizes.
    fn catalog() -> Vec<Value> {
        vec![
            volume("gce-pd-1", "1G", &["ReadWriteOnce", "ReadOnlyMany"]),
            volume("gce-pd-5", "5G", &["ReadWriteOnce", "ReadOnlyMany"]),
            volume("gce-pd-10", "10G", &["ReadWriteOnce", "ReadOnlyMany"]),
            volume(
                "nfs-1",
                "1G",
                &["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"],
            ),
            volume(
                "nfs-5",
                "5G",
                &["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"],
            ),
            volume(
                "nfs-10",
                "10G",
                &["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"],
            ),
            with(
                volume(
                    "gce-pd-20-labelled",
                    "20G",
                    &["ReadWriteOnce", "ReadOnlyMany"],
                ),
                &[(
                    "/metadata/labels",
                    json!({"should-exist": "true", "zone": "a"}),
                )],
            ),
            with(
                volume("gce-pd-2-bound", "2G", &["ReadWriteOnce", "ReadOnlyMany"]),
                &[
                    (
                        "/spec/claimRef",
                        json!({"name": "other", "namespace": "myns", "uid": "x"}),
                    ),
                    ("/status/phase", json!("Bound")),
                ],
            ),
        ]
    }

    #[test]
    fn controller_path_matches_as_upstream_index_tests() {
        let volumes = catalog();
        let table: [(&str, Value, Option<&str>); 12] = [
            (
                "smallest gce fits 8G",
                claim("8G", &["ReadWriteOnce"]),
                Some("gce-pd-10"),
            ),
            (
                "fewest modes first, then smallest",
                claim("1G", &["ReadOnlyMany"]),
                Some("gce-pd-1"),
            ),
            (
                "only nfs offers RWX",
                claim("3G", &["ReadWriteMany"]),
                Some("nfs-5"),
            ),
            (
                "a volume bound to another claim is skipped",
                claim("2G", &["ReadWriteOnce"]),
                Some("gce-pd-5"),
            ),
            (
                "nothing is big enough",
                claim("999G", &["ReadWriteOnce"]),
                None,
            ),
            (
                "RWOP is offered by none",
                claim("1G", &["ReadWriteOncePod"]),
                None,
            ),
            (
                "label selector",
                with(
                    claim("1G", &["ReadWriteOnce"]),
                    &[(
                        "/spec/selector",
                        json!({"matchLabels": {"should-exist": "true"}}),
                    )],
                ),
                Some("gce-pd-20-labelled"),
            ),
            (
                "label selector with expressions",
                with(
                    claim("1G", &["ReadWriteOnce"]),
                    &[(
                        "/spec/selector",
                        json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}),
                    )],
                ),
                None,
            ),
            (
                "class must be equal",
                with(
                    claim("1G", &["ReadWriteOnce"]),
                    &[("/spec/storageClassName", json!("gold"))],
                ),
                None,
            ),
            (
                "empty class matches only empty class",
                with(
                    claim("1G", &["ReadWriteOnce"]),
                    &[("/spec/storageClassName", json!(""))],
                ),
                Some("gce-pd-1"),
            ),
            (
                "block claim needs a block volume",
                with(
                    claim("1G", &["ReadWriteOnce"]),
                    &[("/spec/volumeMode", json!("Block"))],
                ),
                None,
            ),
            (
                "pre-bound claim of another name gets nothing from the bound volume",
                with(
                    claim("2G", &["ReadWriteOnce"]),
                    &[("/metadata/name", json!("nobody"))],
                ),
                Some("gce-pd-5"),
            ),
        ];
        for (case, claim, want) in table {
            let got = find_matching_volume(&claim, &volumes, None, false).map(objects::name);
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn a_pre_bound_volume_wins_over_a_smaller_one() {
        let mut volumes = catalog();
        volumes.push(with(
            volume("prebound-50", "50G", &["ReadWriteOnce", "ReadOnlyMany"]),
            &[(
                "/spec/claimRef",
                json!({"name": "claim01", "namespace": "myns"}),
            )],
        ));
        let table: [(&str, Value, bool, Option<&str>); 4] = [
            (
                "pre-bound wins",
                claim("1G", &["ReadWriteOnce"]),
                false,
                Some("prebound-50"),
            ),
            (
                "pre-bound wins with delayed binding",
                claim("1G", &["ReadWriteOnce"]),
                true,
                Some("prebound-50"),
            ),
            (
                "pre-bound too small is skipped",
                claim("60G", &["ReadWriteOnce"]),
                false,
                None,
            ),
            (
                "pre-bound to another uid is skipped",
                with(
                    claim("1G", &["ReadWriteOnce"]),
                    &[("/metadata/name", json!("other"))],
                ),
                false,
                Some("gce-pd-1"),
            ),
        ];
        for (case, claim, delay, want) in table {
            let got = find_matching_volume(&claim, &volumes, None, delay).map(objects::name);
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn unusable_volumes_are_skipped() {
        let table: [(&str, Value); 5] = [
            (
                "of another volume attributes class",
                with(
                    volume("v", "5G", &["ReadWriteOnce"]),
                    &[("/spec/volumeAttributesClassName", json!("gold"))],
                ),
            ),
            (
                "being deleted",
                with(
                    volume("v", "5G", &["ReadWriteOnce"]),
                    &[("/metadata/deletionTimestamp", json!("2026-01-01T00:00:00Z"))],
                ),
            ),
            (
                "released",
                with(
                    volume("v", "5G", &["ReadWriteOnce"]),
                    &[("/status/phase", json!("Released"))],
                ),
            ),
            (
                "pending",
                with(
                    volume("v", "5G", &["ReadWriteOnce"]),
                    &[("/status/phase", json!("Pending"))],
                ),
            ),
            (
                "of a class",
                with(
                    volume("v", "5G", &["ReadWriteOnce"]),
                    &[("/spec/storageClassName", json!("gold"))],
                ),
            ),
        ];
        let claim = claim("1G", &["ReadWriteOnce"]);
        for (case, volume) in table {
            assert_eq!(
                find_matching_volume(&claim, [&volume], None, false),
                None,
                "{case}"
            );
        }
    }

    #[test]
    fn delayed_binding_leaves_unbound_volumes_to_the_scheduler() {
        let volumes = catalog();
        let claim = claim("1G", &["ReadWriteOnce"]);
        assert_eq!(find_matching_volume(&claim, &volumes, None, true), None);
        let node = json!({"metadata": {"name": "n1", "labels": {}}});
        assert_eq!(
            find_matching_volume(&claim, &volumes, Some(&node), true).map(objects::name),
            Some("gce-pd-1")
        );
    }

    #[test]
    fn scheduler_path_checks_node_affinity_and_access_modes() {
        let local = |name: &str, size: &str, zone: &str| {
            with(
                volume(name, size, &["ReadWriteOnce"]),
                &[(
                    "/spec/nodeAffinity",
                    json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": [zone]}]}]}}),
                )],
            )
        };
        let volumes = vec![
            local("a-1", "1G", "a"),
            local("b-1", "1G", "b"),
            local("a-5", "5G", "a"),
        ];
        let node = |zone: &str| json!({"metadata": {"name": "n", "labels": {"zone": zone}}});
        let table: [(&str, Value, Value, Option<&str>); 5] = [
            (
                "zone a gets its smallest",
                claim("1G", &["ReadWriteOnce"]),
                node("a"),
                Some("a-1"),
            ),
            (
                "zone b",
                claim("1G", &["ReadWriteOnce"]),
                node("b"),
                Some("b-1"),
            ),
            (
                "zone b too small",
                claim("2G", &["ReadWriteOnce"]),
                node("b"),
                None,
            ),
            (
                "zone c has none",
                claim("1G", &["ReadWriteOnce"]),
                node("c"),
                None,
            ),
            (
                "modes checked per volume",
                claim("1G", &["ReadWriteMany"]),
                node("a"),
                None,
            ),
        ];
        for (case, claim, node, want) in table {
            let got = find_matching_volume(&claim, &volumes, Some(&node), true).map(objects::name);
            assert_eq!(got, want, "{case}");
        }
        // A pre-bound volume whose affinity misses the node means no match, not another volume.
        let mut prebound = local("pre-b", "1G", "b");
        prebound["spec"]["claimRef"] = json!({"name": "claim01", "namespace": "myns"});
        let mut all = volumes.clone();
        all.push(prebound);
        let claim = claim("1G", &["ReadWriteOnce"]);
        assert_eq!(
            find_matching_volume(&claim, &all, Some(&node("a")), true),
            None
        );
        assert_eq!(
            find_matching_volume(&claim, &all, Some(&node("b")), true).map(objects::name),
            Some("pre-b")
        );
    }
}
