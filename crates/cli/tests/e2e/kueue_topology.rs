//! Kueue's Topology kind as `tessera up` bundles it: listed with upstream's short name,
//! Kueue's published TAS example applied unchanged, read back in v1beta1 and v1beta2, and
//! levels refused or accepted as the CRD's CEL rules say.

use crate::support::Cluster;

const V: &str = "1.33";

/// site/static/examples/tas/sample-gpu-queues.yaml (see tests/fixtures/upstream/README.md).
const SAMPLE: &str = include_str!("../fixtures/upstream/kueue/tas-sample-gpu-queues.yaml");

fn topology(name: &str, levels: &[&str]) -> String {
    let levels: String = levels
        .iter()
        .map(|level| format!("  - nodeLabel: {level}\n"))
        .collect();
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {{name: {name}}}\nspec:\n  levels:\n{levels}"
    )
}

#[test]
fn kueue_topology_is_served_and_validated_as_upstream() {
    let cluster = Cluster::start();

    let resources = cluster.ok(V, &["api-resources", "--api-group=kueue.x-k8s.io"]);
    let line = resources
        .lines()
        .find(|l| l.split_whitespace().next() == Some("topologies"))
        .unwrap_or_else(|| panic!("topologies missing:\n{resources}"));
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        [
            "topologies",
            "topo",
            "kueue.x-k8s.io/v1beta2",
            "false",
            "Topology"
        ]
    );

    let applied = cluster.ok_stdin(V, &["apply", "-f", "-"], SAMPLE);
    assert!(
        applied.contains("topology.kueue.x-k8s.io/default created"),
        "{applied}"
    );
    for version in ["v1beta1", "v1beta2"] {
        let levels = cluster.ok(
            V,
            &[
                "get",
                &format!("topologies.{version}.kueue.x-k8s.io"),
                "default",
                "-o",
                "jsonpath={.apiVersion} {.spec.levels[*].nodeLabel}",
            ],
        );
        assert_eq!(
            levels,
            format!(
                "kueue.x-k8s.io/{version} cloud.provider.com/topology-block cloud.provider.com/topology-rack kubernetes.io/hostname"
            )
        );
    }

    // (manifest, the error kubectl prints)
    let refused = [
        (
            topology("dup", &["cloud.com/rack", "cloud.com/rack"]),
            "spec.levels: Invalid value: \"array\": must be unique",
        ),
        (
            topology("host-first", &["kubernetes.io/hostname", "cloud.com/rack"]),
            "the kubernetes.io/hostname label can only be used at the lowest level of topology",
        ),
        (
            topology("racks", &["cloud.com/block"]),
            "levels are mutable only when kubernetes.io/hostname is the lowest level both before and after the change",
        ),
    ];
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        &topology("racks", &["cloud.com/block", "cloud.com/rack"]),
    );
    for (manifest, want) in &refused {
        let error = cluster.fails(V, &["apply", "-f", "-"], Some(manifest));
        assert!(error.contains(want), "{error}");
    }
    // With the hostname lowest before and after, levels above it may change.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        &topology(
            "default",
            &["cloud.provider.com/topology-rack", "kubernetes.io/hostname"],
        ),
    );
}
