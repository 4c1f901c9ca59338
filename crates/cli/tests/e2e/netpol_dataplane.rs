//! NetworkPolicy enforced by the simulated dataplane, probed as upstream's network-policy e2e
//! suite probes a CNI: namespaces x, y, z with pods a, b, c (agnhost serving 80 and 81 behind a
//! Service `s-<ns>-<pod>` each), and for each case the full 9×9 truth table of
//! `kubectl exec <from> -- /agnhost connect s-<ns>-<pod>.<ns>.svc.cluster.local:80` through
//! the real kubectl, compared with upstream's expectation (a pod with itself is left out, as
//! upstream leaves loopback out). Cases: default-deny ingress, allow from the same namespace,
//! allow from a namespaceSelector, egress denied but DNS, and an AdminNetworkPolicy Deny
//! overriding a NetworkPolicy allow.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::Cluster;

const V: &str = "1.33";
const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PODS: [&str; 3] = ["a", "b", "c"];
/// Probes in flight at once.
const PARALLEL: usize = 8;

/// A pod of the layout: (namespace, name).
type Pod = (&'static str, &'static str);

fn layout() -> Vec<Pod> {
    NAMESPACES
        .iter()
        .flat_map(|ns| PODS.iter().map(move |pod| (*ns, *pod)))
        .collect()
}

/// Upstream's layout: labelled namespaces, pods serving 80 and 81 (named ports), a Service
/// per pod.
fn layout_manifest() -> String {
    let mut docs = Vec::new();
    for ns in NAMESPACES {
        docs.push(format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: \"{ns}\", labels: {{ns: \"{ns}\"}}}}\n"
        ));
    }
    for (ns, pod) in layout() {
        let containers: Vec<String> = [80, 81]
            .iter()
            .map(|port| {
                format!(
                    "  - name: cont-{port}-tcp\n    image: registry.k8s.io/e2e-test-images/agnhost:2.47\n    command: [/agnhost, porter]\n    env: [{{name: SERVE_PORT_{port}, value: foo}}]\n    ports: [{{name: serve-{port}-tcp, containerPort: {port}, protocol: TCP}}]\n"
                )
            })
            .collect();
        docs.push(format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: \"{pod}\", namespace: \"{ns}\", labels: {{pod: \"{pod}\"}}}}\nspec:\n  containers:\n{}",
            containers.concat()
        ));
        docs.push(format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: s-{ns}-{pod}, namespace: \"{ns}\"}}\nspec:\n  selector: {{pod: \"{pod}\"}}\n  ports:\n  - {{name: serve-80-tcp, port: 80, targetPort: 80, protocol: TCP}}\n  - {{name: serve-81-tcp, port: 81, targetPort: 81, protocol: TCP}}\n"
        ));
    }
    docs.join("---\n")
}

/// One upstream case: the policies it applies, and whether `from` may reach `to` on port 80.
struct Case {
    name: &'static str,
    policies: &'static str,
    expect: fn(Pod, Pod) -> bool,
}

const CASES: [Case; 5] = [
    Case {
        name: "should support a 'default-deny-ingress' policy",
        policies: r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-ingress, namespace: "x"}
spec: {podSelector: {}, ingress: []}
"#,
        expect: |_, to| to.0 != "x",
    },
    Case {
        name: "should allow ingress from the same namespace only",
        policies: r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-same-namespace, namespace: "x"}
spec: {podSelector: {}, ingress: [{from: [{podSelector: {}}]}]}
"#,
        expect: |from, to| to.0 != "x" || from.0 == "x",
    },
    Case {
        name: "should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector",
        policies: r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-client-a-via-ns-selector, namespace: "x"}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: "y"}}}]}]
"#,
        expect: |from, to| to != ("x", "a") || from.0 == "y",
    },
    Case {
        name: "should deny egress from all pods in a namespace but DNS",
        policies: r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-egress-but-dns, namespace: "x"}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress: [{ports: [{port: 53, protocol: UDP}, {port: 53, protocol: TCP}]}]
"#,
        expect: |from, _| from.0 != "x",
    },
    Case {
        name: "an AdminNetworkPolicy Deny overrides a NetworkPolicy allow",
        policies: r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-all, namespace: "x"}
spec: {podSelector: {}, ingress: [{}]}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: deny-y-to-x}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {ns: "x"}}}
  ingress:
  - {name: deny-from-y, action: Deny, from: [{namespaces: {matchLabels: {ns: "y"}}}]}
"#,
        expect: |from, to| !(from.0 == "y" && to.0 == "x"),
    },
];

/// How one probe ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Probe {
    Connected,
    Blocked,
    /// Anything else (a failed exec, an unresolved name): the test's own failure.
    Other(String),
}

fn probe(cluster: &Cluster, from: Pod, to: Pod) -> Probe {
    let target = format!("s-{}-{}.{}.svc.cluster.local:80", to.0, to.1, to.0);
    let output = cluster.kubectl(
        V,
        &[
            "exec",
            "-n",
            from.0,
            from.1,
            "-c",
            "cont-80-tcp",
            "--",
            "/agnhost",
            "connect",
            &target,
            "--timeout=1s",
            "--protocol=tcp",
        ],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Probe::Connected
    } else if text.contains("TIMEOUT") {
        Probe::Blocked
    } else {
        Probe::Other(format!("{}/{} -> {target}: {text}", from.0, from.1))
    }
}

/// Probes every pair, `PARALLEL` at a time; indexed `from * 9 + to`.
fn probe_all(cluster: &Cluster, pods: &[Pod]) -> Vec<Probe> {
    let pairs: Vec<(Pod, Pod)> = pods
        .iter()
        .flat_map(|from| pods.iter().map(move |to| (*from, *to)))
        .collect();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(vec![Probe::Other("not probed".into()); pairs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some((from, to)) = pairs.get(index) else {
                        break;
                    };
                    let outcome = probe(cluster, *from, *to);
                    results.lock().unwrap()[index] = outcome;
                }
            });
        }
    });
    results.into_inner().unwrap()
}

/// Cyclonus's layout: a row per source, a column per destination; `.` connected, `X`
/// blocked, `?` anything else; a pod with itself is `-` (not compared).
fn table(pods: &[Pod], cell: impl Fn(usize, usize) -> char) -> String {
    let mut out = String::from("     ");
    for (ns, pod) in pods {
        out.push_str(&format!(" {ns}/{pod}"));
    }
    out.push('\n');
    for (row, (ns, pod)) in pods.iter().enumerate() {
        out.push_str(&format!("{ns}/{pod}  "));
        for column in 0..pods.len() {
            let mark = if row == column {
                '-'
            } else {
                cell(row, column)
            };
            out.push_str(&format!("   {mark}"));
        }
        out.push('\n');
    }
    out
}

/// The case's mismatches (pairs of distinct pods), and the observed and expected tables.
fn compare(case: &Case, pods: &[Pod], observed: &[Probe]) -> (Vec<String>, String) {
    let mut wrong = Vec::new();
    for (index, outcome) in observed.iter().enumerate() {
        let (from, to) = (pods[index / pods.len()], pods[index % pods.len()]);
        if from == to {
            continue;
        }
        let expected = if (case.expect)(from, to) {
            Probe::Connected
        } else {
            Probe::Blocked
        };
        if *outcome != expected {
            wrong.push(format!(
                "{from:?} -> {to:?}: {outcome:?}, expected {expected:?}"
            ));
        }
    }
    let mark = |p: &Probe| match p {
        Probe::Connected => '.',
        Probe::Blocked => 'X',
        Probe::Other(_) => '?',
    };
    let n = pods.len();
    let tables = format!(
        "observed:\n{}expected:\n{}",
        table(pods, |r, c| mark(&observed[r * n + c])),
        table(pods, |r, c| if (case.expect)(pods[r], pods[c]) {
            '.'
        } else {
            'X'
        }),
    );
    (wrong, tables)
}

#[test]
fn network_policies_are_enforced_on_kubectl_exec_probes_across_the_full_truth_table() {
    let cluster = Cluster::start();
    cluster.ok_stdin(V, &["apply", "-f", "-"], &layout_manifest());
    let pods = layout();
    for (ns, pod) in &pods {
        cluster.node_when_running(V, Some(ns), pod);
    }
    // Every Service has its pod as a ready endpoint.
    cluster.wait_for(
        V,
        &[
            "get",
            "endpointslices",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.labels.kubernetes\\.io/service-name}={.endpoints[*].conditions.ready}{\"\\n\"}{end}",
        ],
        |out| {
            out.lines()
                .filter(|l| l.starts_with("s-") && l.ends_with("=true"))
                .count()
                == pods.len()
        },
    );
    // Without policies everything connects.
    let open = probe_all(&cluster, &pods);
    assert!(
        open.iter().all(|p| *p == Probe::Connected),
        "{open:?}\n--- server log ---\n{}",
        cluster.server_log()
    );

    for case in &CASES {
        cluster.ok_stdin(V, &["apply", "-f", "-"], case.policies);
        // As upstream's validation does: a table that disagrees is probed once more (the
        // dataplane learns of policies through its watches).
        let mut observed = probe_all(&cluster, &pods);
        let first = compare(case, &pods, &observed).0;
        if !first.is_empty() {
            eprintln!(
                "{}: {} wrong at first, probing again",
                case.name,
                first.len()
            );
            std::thread::sleep(std::time::Duration::from_secs(1));
            observed = probe_all(&cluster, &pods);
        }
        let (wrong, tables) = compare(case, &pods, &observed);
        assert!(
            wrong.is_empty(),
            "{}: {} wrong:\n{}\n{tables}",
            case.name,
            wrong.len(),
            wrong.join("\n")
        );
        cluster.ok(V, &["delete", "networkpolicy", "--all", "-n", "x"]);
        cluster.ok(V, &["delete", "adminnetworkpolicies", "--all"]);
    }
}
