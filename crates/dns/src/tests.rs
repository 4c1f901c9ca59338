//! Lookups against a small cluster, table-driven (after the cases of CoreDNS's
//! `plugin/kubernetes` tests and the DNS specification's examples).

use serde_json::json;

use super::*;

fn cluster() -> Resolver {
    let services = vec![
        json!({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"clusterIP": "10.96.1.1"}}),
        json!({"metadata": {"name": "db", "namespace": "shop"}, "spec": {"clusterIP": "None"}}),
        json!({"metadata": {"name": "empty", "namespace": "shop"}, "spec": {"clusterIP": "None"}}),
        json!({"metadata": {"name": "web", "namespace": "other"}, "spec": {"clusterIP": "10.96.2.2"}}),
        json!({"metadata": {"name": "ext", "namespace": "shop"}, "spec": {"type": "ExternalName", "externalName": "Example.COM."}}),
    ];
    let slices = vec![json!({
        "metadata": {"name": "db-abc", "namespace": "shop", "labels": {"kubernetes.io/service-name": "db"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.244.0.5"], "hostname": "db-0", "conditions": {"ready": true}},
            {"addresses": ["10.244.1.6"], "hostname": "db-1", "conditions": {}},
            {"addresses": ["10.244.1.7"], "conditions": {"ready": true}},
            {"addresses": ["10.244.1.8"], "hostname": "db-2", "conditions": {"ready": false}},
        ],
    })];
    Resolver::new("cluster.local", &services, &slices)
}

fn addresses(name: &str, list: &[&str]) -> Answer {
    Answer::Addresses {
        name: name.into(),
        addresses: list.iter().map(|a| a.parse().expect("ip")).collect(),
    }
}

#[test]
fn lookups_answer_as_cluster_dns() {
    let resolver = cluster();
    let table = [
        // Short names expand through the search path of the asking pod's namespace.
        (
            "web",
            "shop",
            addresses("web.shop.svc.cluster.local", &["10.96.1.1"]),
        ),
        (
            "web",
            "other",
            addresses("web.other.svc.cluster.local", &["10.96.2.2"]),
        ),
        (
            "web.other",
            "shop",
            addresses("web.other.svc.cluster.local", &["10.96.2.2"]),
        ),
        (
            "web.shop.svc",
            "other",
            addresses("web.shop.svc.cluster.local", &["10.96.1.1"]),
        ),
        (
            "WEB.shop.svc.cluster.local",
            "x",
            addresses("web.shop.svc.cluster.local", &["10.96.1.1"]),
        ),
        (
            "web.shop.svc.cluster.local.",
            "x",
            addresses("web.shop.svc.cluster.local", &["10.96.1.1"]),
        ),
        // Headless: ready endpoints only (unset ready counts as ready).
        (
            "db",
            "shop",
            addresses(
                "db.shop.svc.cluster.local",
                &["10.244.0.5", "10.244.1.6", "10.244.1.7"],
            ),
        ),
        // StatefulSet pods by hostname; other endpoints by dashed address.
        (
            "db-0.db",
            "shop",
            addresses("db-0.db.shop.svc.cluster.local", &["10.244.0.5"]),
        ),
        (
            "db-1.db.shop.svc.cluster.local",
            "x",
            addresses("db-1.db.shop.svc.cluster.local", &["10.244.1.6"]),
        ),
        (
            "10-244-1-7.db.shop.svc.cluster.local",
            "x",
            addresses("10-244-1-7.db.shop.svc.cluster.local", &["10.244.1.7"]),
        ),
        ("db-2.db", "shop", Answer::NxDomain),
        // Pod records.
        (
            "10-244-3-4.shop.pod.cluster.local",
            "x",
            addresses("10-244-3-4.shop.pod.cluster.local", &["10.244.3.4"]),
        ),
        (
            "10-244-3-4.shop.pod",
            "x",
            addresses("10-244-3-4.shop.pod.cluster.local", &["10.244.3.4"]),
        ),
        ("10-244-3-400.shop.pod.cluster.local", "x", Answer::NxDomain),
        ("010-244-3-4.shop.pod.cluster.local", "x", Answer::NxDomain),
        // ExternalName: an alias.
        (
            "ext",
            "shop",
            Answer::Alias {
                name: "ext.shop.svc.cluster.local".into(),
                target: "example.com".into(),
            },
        ),
        // A headless Service without ready endpoints exists but has no address.
        (
            "empty",
            "shop",
            Answer::NoData {
                name: "empty.shop.svc.cluster.local".into(),
            },
        ),
        // Names that do not exist.
        ("nope", "shop", Answer::NxDomain),
        ("web", "nowhere", Answer::NxDomain),
        (
            "web.shop.svc.cluster.local.",
            "shop",
            addresses("web.shop.svc.cluster.local", &["10.96.1.1"]),
        ),
        ("web.", "shop", Answer::NxDomain),
        ("example.com", "shop", Answer::NxDomain),
        ("", "shop", Answer::NxDomain),
    ];
    for (name, namespace, want) in table {
        assert_eq!(
            resolver.lookup(name, namespace),
            want,
            "{name} from {namespace}"
        );
    }
}

#[test]
fn the_search_path_follows_the_cluster_domain() {
    let resolver = Resolver::new(
        "lab.example.",
        &[
            json!({"metadata": {"name": "web", "namespace": "a"}, "spec": {"clusterIP": "10.0.0.1"}}),
        ],
        &[],
    );
    assert_eq!(resolver.domain(), "lab.example");
    assert_eq!(
        resolver.search_domains("a"),
        ["a.svc.lab.example", "svc.lab.example", "lab.example"]
    );
    assert_eq!(
        resolver.lookup("web", "a"),
        addresses("web.a.svc.lab.example", &["10.0.0.1"])
    );
    assert_eq!(
        resolver.lookup("web.a.svc.cluster.local", "a"),
        Answer::NxDomain
    );
}
