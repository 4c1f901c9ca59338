//! The verdict adapter: the dataplane's pod objects and addresses in, the evaluator's verdict
//! (and the deciding tier, policy and rule) out.

use super::*;
use serde_json::json;
use std::net::Ipv4Addr;
use tessera_netpol::Tier;

const POLICIES: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: "x", labels: {ns: "x"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: "y", labels: {ns: "y"}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-from-y, namespace: "x"}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from: [{namespaceSelector: {matchLabels: {ns: "y"}}}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: egress-dns-only, namespace: "y"}
spec:
  podSelector: {matchLabels: {pod: c}}
  policyTypes: [Egress]
  egress:
  - ports: [{port: 53, protocol: UDP}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: no-81}
spec:
  priority: 10
  subject: {namespaces: {}}
  ingress:
  - name: deny-81
    action: Deny
    from: [{namespaces: {}}]
    ports: [{portNumber: {port: 81, protocol: TCP}}]
"#;

fn pod(namespace: &str, name: &str, ip: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": namespace, "name": name, "labels": {"pod": name}},
        "spec": {"containers": [{"name": "c", "image": "agnhost",
            "ports": [{"containerPort": 80, "name": "serve-80"}]}]},
        "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}})
}

fn index() -> PolicyIndex {
    let objects = tessera_netpol::Objects::from_yaml(POLICIES).expect("objects");
    let index = PolicyIndex::from_objects(objects);
    for (ns, name, ip) in [
        ("x", "a", "10.244.0.1"),
        ("x", "b", "10.244.0.2"),
        ("y", "b", "10.244.1.2"),
        ("y", "c", "10.244.1.3"),
    ] {
        let typed: Pod = serde_json::from_value(pod(ns, name, ip)).expect("pod");
        index.apply_pod(&typed);
    }
    index
}

/// (allowed, deciding tier, deciding policy's name, deciding rule's index).
type Expected = (bool, Tier, Option<&'static str>, Option<usize>);

#[test]
fn verdicts_name_the_deciding_tier_policy_and_rule() {
    let index = index();
    let x_a = pod("x", "a", "10.244.0.1");
    let x_b = pod("x", "b", "10.244.0.2");
    let y_b = pod("y", "b", "10.244.1.2");
    let y_c = pod("y", "c", "10.244.1.3");
    let outside = Peer::Address(Ipv4Addr::new(192, 0, 2, 7));
    let cases: Vec<(&str, &Value, Peer<'_>, u16, Protocol, Expected)> = vec![
        (
            "no policy selects x/b",
            &y_b,
            Peer::Pod(&x_b),
            80,
            Protocol::Tcp,
            (true, Tier::Default, None, None),
        ),
        (
            "x/a admits namespace y",
            &y_b,
            Peer::Pod(&x_a),
            80,
            Protocol::Tcp,
            (true, Tier::NetworkPolicy, Some("allow-from-y"), Some(0)),
        ),
        (
            "x/a isolated from its own namespace",
            &x_b,
            Peer::Pod(&x_a),
            80,
            Protocol::Tcp,
            (false, Tier::NetworkPolicy, Some("allow-from-y"), None),
        ),
        (
            "the admin tier denies 81 before the NetworkPolicy allows",
            &y_b,
            Peer::Pod(&x_a),
            81,
            Protocol::Tcp,
            (false, Tier::Admin, Some("no-81"), Some(0)),
        ),
        (
            "the admin rule is TCP only",
            &y_b,
            Peer::Pod(&x_b),
            81,
            Protocol::Udp,
            (true, Tier::Default, None, None),
        ),
        (
            "y/c egress allows DNS",
            &y_c,
            Peer::Pod(&y_b),
            53,
            Protocol::Udp,
            (true, Tier::NetworkPolicy, Some("egress-dns-only"), Some(0)),
        ),
        (
            "y/c egress drops TCP 80",
            &y_c,
            Peer::Pod(&x_b),
            80,
            Protocol::Tcp,
            (false, Tier::NetworkPolicy, Some("egress-dns-only"), None),
        ),
        (
            "y/c egress drops an outside address",
            &y_c,
            outside,
            443,
            Protocol::Tcp,
            (false, Tier::NetworkPolicy, Some("egress-dns-only"), None),
        ),
        (
            "x/b reaches an outside address",
            &x_b,
            outside,
            443,
            Protocol::Tcp,
            (true, Tier::Default, None, None),
        ),
    ];
    for (name, from, to, port, protocol, (allowed, tier, policy, rule)) in cases {
        let verdict = index.verdict(from, to, port, protocol).expect(name);
        let (_, decision) = verdict.decided_by();
        assert_eq!(verdict.allowed, allowed, "{name}");
        assert_eq!(index.allowed(from, to, port, protocol), allowed, "{name}");
        assert_eq!(decision.tier, tier, "{name}");
        assert_eq!(
            decision.policy.as_ref().map(|p| p.name.as_str()),
            policy,
            "{name}"
        );
        assert_eq!(decision.rule.as_ref().map(|r| r.index), rule, "{name}");
    }
}

#[test]
fn the_dataplane_pod_is_taken_over_a_stale_or_missing_one() {
    let index = index();
    let y_b = pod("y", "b", "10.244.1.2");
    // x/d is not indexed yet and x/a has been relabelled since the index last saw it.
    let mut x_d = pod("x", "d", "10.244.0.4");
    x_d["metadata"]["labels"] = json!({"pod": "a"});
    let mut x_a = pod("x", "a", "10.244.0.1");
    x_a["metadata"]["labels"] = json!({"pod": "z"});
    let cases = [
        (
            "an unseen pod is selected by its labels",
            &x_d,
            true,
            Tier::NetworkPolicy,
        ),
        (
            "a relabelled pod leaves the policy",
            &x_a,
            true,
            Tier::Default,
        ),
    ];
    for (name, to, allowed, tier) in cases {
        let verdict = index
            .verdict(&y_b, Peer::Pod(to), 80, Protocol::Tcp)
            .expect(name);
        assert_eq!(
            (verdict.allowed, verdict.ingress.tier),
            (allowed, tier),
            "{name}"
        );
    }
    // Isolation of the new pod follows: its own namespace is not admitted.
    let x_b = pod("x", "b", "10.244.0.2");
    assert!(!index.allowed(&x_b, Peer::Pod(&x_d), 80, Protocol::Tcp));
}

#[test]
fn removals_lift_isolation_and_finished_pods_leave() {
    let index = index();
    let x_a = pod("x", "a", "10.244.0.1");
    let x_b = pod("x", "b", "10.244.0.2");
    assert!(!index.allowed(&x_b, Peer::Pod(&x_a), 80, Protocol::Tcp));
    index.remove_policy(&PolicyRef {
        kind: tessera_netpol::PolicyKind::NetworkPolicy,
        namespace: Some("x".into()),
        name: "allow-from-y".into(),
    });
    assert!(index.allowed(&x_b, Peer::Pod(&x_a), 80, Protocol::Tcp));
    let mut finished: Pod = serde_json::from_value(pod("y", "c", "10.244.1.3")).expect("pod");
    if let Some(status) = finished.status.as_mut() {
        status.phase = Some("Succeeded".into());
    }
    index.apply_pod(&finished);
    assert_eq!(index.read().pod_id("y", "c"), None);
    assert!(
        index
            .verdict(
                &json!({"kind": "NotAPod", "spec": 1}),
                Peer::Pod(&x_a),
                80,
                Protocol::Tcp
            )
            .is_none()
    );
}

/// Upstream's usual "allow DNS" rules let queries reach the built-in DNS server; a default
/// deny of egress stops them.
#[test]
fn dns_queries_are_judged_as_egress_to_a_kube_dns_pod_of_kube_system() {
    const DNS_POLICIES: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: kube-system, labels: {kubernetes.io/metadata.name: kube-system}}
---
apiVersion: v1
kind: Namespace
metadata: {name: deny, labels: {kubernetes.io/metadata.name: deny}}
---
apiVersion: v1
kind: Namespace
metadata: {name: allow, labels: {kubernetes.io/metadata.name: allow}}
---
apiVersion: v1
kind: Namespace
metadata: {name: elsewhere, labels: {kubernetes.io/metadata.name: elsewhere}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny-egress, namespace: deny}
spec:
  podSelector: {}
  policyTypes: [Egress]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-dns, namespace: allow}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress:
  - to:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}
      podSelector: {matchLabels: {k8s-app: kube-dns}}
    ports: [{port: 53, protocol: UDP}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: dns-in-the-wrong-namespace, namespace: elsewhere}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress:
  - to:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: elsewhere}}
      podSelector: {matchLabels: {k8s-app: kube-dns}}
    ports: [{port: 53, protocol: UDP}]
"#;
    let objects = tessera_netpol::Objects::from_yaml(DNS_POLICIES).expect("objects");
    let index = PolicyIndex::from_objects(objects);
    let server = tessera_exec::network::builtin_dns_server(Ipv4Addr::new(10, 96, 0, 10));
    for (namespace, udp_53, tcp_53) in [
        ("deny", false, false),
        ("allow", true, false),
        ("elsewhere", false, false),
        // No policy selects it: everything is allowed.
        ("kube-system", true, true),
    ] {
        let client = pod(namespace, "client", "10.244.2.9");
        assert_eq!(
            (
                index.allowed(&client, Peer::Pod(&server), 53, Protocol::Udp),
                index.allowed(&client, Peer::Pod(&server), 53, Protocol::Tcp),
            ),
            (udp_53, tcp_53),
            "{namespace}"
        );
    }
}
