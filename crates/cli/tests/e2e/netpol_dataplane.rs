//! NetworkPolicy enforced by the simulated dataplane, probed as upstream's network-policy e2e
//! suite probes a CNI: namespaces x, y, z with pods a, b, c (agnhost serving 80 and 81 over
//! TCP and UDP behind a Service `s-<ns>-<pod>` each), and for each case the full 9×9 truth
//! table of `kubectl exec <from> -- /agnhost connect <target> --protocol=…` through the real
//! kubectl, compared with upstream's expectation (a pod with itself is left out, as upstream
//! leaves loopback out). A target is the Service's name (so the lookup is judged by egress
//! policy too) or the pod's IP. Cases ported from upstream's `network_policy.go`: default-deny
//! ingress, default-deny all (DNS included), allow from the same namespace, allow from a
//! namespaceSelector, egress denied but DNS, ingress on one named port (probed on 80 and 81),
//! ingress for one protocol (probed over UDP), egress by ipBlock with an except clause (probed
//! by pod IP), and an AdminNetworkPolicy Deny overriding a NetworkPolicy allow.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::Cluster;

const V: &str = "1.33";
const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PODS: [&str; 3] = ["a", "b", "c"];
/// What every pod serves, as upstream's model serves it (SCTP left out).
const SERVED: [(u16, &str); 4] = [(80, "TCP"), (81, "TCP"), (80, "UDP"), (81, "UDP")];
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
        let containers: Vec<String> = SERVED
            .iter()
            .map(|(port, protocol)| {
                let lower = protocol.to_lowercase();
                format!(
                    "  - name: cont-{port}-{lower}\n    image: registry.k8s.io/e2e-test-images/agnhost:2.47\n    command: [/agnhost, porter]\n    env: [{{name: SERVE_PORT_{port}, value: foo}}]\n    ports: [{{name: serve-{port}-{lower}, containerPort: {port}, protocol: {protocol}}}]\n"
                )
            })
            .collect();
        let service_ports: Vec<String> = SERVED
            .iter()
            .map(|(port, protocol)| {
                let lower = protocol.to_lowercase();
                format!(
                    "  - {{name: serve-{port}-{lower}, port: {port}, targetPort: {port}, protocol: {protocol}}}\n"
                )
            })
            .collect();
        docs.push(format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: \"{pod}\", namespace: \"{ns}\", labels: {{pod: \"{pod}\"}}}}\nspec:\n  containers:\n{}",
            containers.concat()
        ));
        docs.push(format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: s-{ns}-{pod}, namespace: \"{ns}\"}}\nspec:\n  selector: {{pod: \"{pod}\"}}\n  ports:\n{}",
            service_ports.concat()
        ));
    }
    docs.join("---\n")
}

/// How a probe names its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// `s-<ns>-<pod>.<ns>.svc.cluster.local`: looked up through the cluster DNS first.
    ServiceName,
    /// The pod's IP.
    PodIp,
}

/// One upstream case: the policies it applies, the probe, and whether `from` may reach `to`.
struct Case {
    name: &'static str,
    policies: &'static str,
    port: u16,
    protocol: &'static str,
    target: Target,
    expect: fn(Pod, Pod) -> bool,
}

/// A case probing TCP port 80 by Service name, as most of upstream's do.
const TCP_80: Case = Case {
    name: "",
    policies: "",
    port: 80,
    protocol: "tcp",
    target: Target::ServiceName,
    expect: |_, _| true,
};

const ALLOW_81_BY_NAME: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-ingress-on-port-81, namespace: "x"}
spec:
  podSelector: {}
  ingress: [{ports: [{port: serve-81-tcp}]}]
"#;

const CASES: [Case; 10] = [
    Case {
        name: "should support a 'default-deny-ingress' policy",
        policies: r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-ingress, namespace: "x"}
spec: {podSelector: {}, ingress: []}
"#,
        expect: |_, to| to.0 != "x",
        ..TCP_80
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
        ..TCP_80
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
        ..TCP_80
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
        ..TCP_80
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
        ..TCP_80
    },
    Case {
        name: "should support a 'default-deny-all' policy",
        policies: r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: "x"}
spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
"#,
        // Pods of x cannot even look the Service up.
        expect: |from, to| from.0 != "x" && to.0 != "x",
        ..TCP_80
    },
    Case {
        name: "should allow ingress access on one named port (probed on 80)",
        policies: ALLOW_81_BY_NAME,
        expect: |_, to| to.0 != "x",
        ..TCP_80
    },
    Case {
        name: "should allow ingress access on one named port (probed on 81)",
        policies: ALLOW_81_BY_NAME,
        port: 81,
        expect: |_, _| true,
        ..TCP_80
    },
    Case {
        name: "should enforce ingress policy allowing any port traffic to a server on a specific protocol",
        policies: r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-tcp-only, namespace: "x"}
spec:
  podSelector: {}
  ingress: [{ports: [{protocol: TCP}]}]
"#,
        protocol: "udp",
        expect: |_, to| to.0 != "x",
        ..TCP_80
    },
    Case {
        name: "should enforce except clause while egress access to server in CIDR block",
        policies: r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-pod-network-but-dns, namespace: "x"}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress:
  - to: [{ipBlock: {cidr: 0.0.0.0/0, except: [10.244.0.0/16]}}]
  - ports: [{port: 53, protocol: UDP}]
"#,
        target: Target::PodIp,
        expect: |from, _| from != ("x", "a"),
        ..TCP_80
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

/// Where the probes go: the case's port, protocol and way of naming the destination, with
/// the pods' IPs.
struct Probing<'a> {
    port: u16,
    protocol: &'a str,
    target: Target,
    ips: &'a BTreeMap<Pod, String>,
}

impl Probing<'_> {
    fn of<'a>(case: &'a Case, ips: &'a BTreeMap<Pod, String>) -> Probing<'a> {
        Probing {
            port: case.port,
            protocol: case.protocol,
            target: case.target,
            ips,
        }
    }

    fn target(&self, to: Pod) -> String {
        let host = match self.target {
            Target::ServiceName => format!("s-{}-{}.{}.svc.cluster.local", to.0, to.1, to.0),
            Target::PodIp => self.ips.get(&to).cloned().unwrap_or_default(),
        };
        format!("{host}:{}", self.port)
    }
}

fn probe(cluster: &Cluster, probing: &Probing<'_>, from: Pod, to: Pod) -> Probe {
    let target = probing.target(to);
    let protocol = format!("--protocol={}", probing.protocol);
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
            &protocol,
        ],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Probe::Connected
    } else if text.contains("TIMEOUT") || (text.starts_with("DNS:") && text.contains("i/o timeout"))
    {
        Probe::Blocked
    } else {
        Probe::Other(format!("{}/{} -> {target}: {text}", from.0, from.1))
    }
}

/// Probes every pair, `PARALLEL` at a time; indexed `from * 9 + to`.
fn probe_all(cluster: &Cluster, probing: &Probing<'_>, pods: &[Pod]) -> Vec<Probe> {
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
                    let outcome = probe(cluster, probing, *from, *to);
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
    // The cluster Services every cluster has, and the DNS behind them.
    let dns_ip = cluster.ok(
        V,
        &[
            "get",
            "svc",
            "kube-dns",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    assert_eq!(dns_ip, "10.96.0.10");
    let lookup = cluster.ok(
        V,
        &[
            "exec",
            "-n",
            "x",
            "a",
            "-c",
            "cont-80-tcp",
            "--",
            "nslookup",
            "kubernetes.default",
        ],
    );
    assert!(
        lookup.contains("Name:\tkubernetes.default.svc.cluster.local\nAddress: 10.96.0.1\n"),
        "{lookup}"
    );
    let ips: BTreeMap<Pod, String> = cluster
        .ok(
            V,
            &[
                "get",
                "pods",
                "-A",
                "-o",
                "jsonpath={range .items[*]}{.metadata.namespace} {.metadata.name} {.status.podIP}{\"\\n\"}{end}",
            ],
        )
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let (ns, pod, ip) = (words.next()?, words.next()?, words.next()?);
            let pod = *layout().iter().find(|p| *p == &(ns, pod))?;
            Some((pod, ip.to_string()))
        })
        .collect();
    assert_eq!(ips.len(), pods.len(), "{ips:?}");
    // Without policies everything connects, over each protocol and by name or address.
    for (port, protocol, target) in [
        (80, "tcp", Target::ServiceName),
        (81, "tcp", Target::ServiceName),
        (80, "udp", Target::ServiceName),
        (81, "tcp", Target::PodIp),
    ] {
        let probing = Probing {
            port,
            protocol,
            target,
            ips: &ips,
        };
        let open = probe_all(&cluster, &probing, &pods);
        assert!(
            open.iter().all(|p| *p == Probe::Connected),
            "{port}/{protocol} {target:?}: {open:?}\n--- server log ---\n{}",
            cluster.server_log()
        );
    }

    for case in &CASES {
        cluster.ok_stdin(V, &["apply", "-f", "-"], case.policies);
        let probing = Probing::of(case, &ips);
        // As upstream's validation does: a table that disagrees is probed once more (the
        // dataplane learns of policies through its watches).
        let mut observed = probe_all(&cluster, &probing, &pods);
        let first = compare(case, &pods, &observed).0;
        if !first.is_empty() {
            eprintln!(
                "{}: {} wrong at first, probing again",
                case.name,
                first.len()
            );
            std::thread::sleep(std::time::Duration::from_secs(1));
            observed = probe_all(&cluster, &probing, &pods);
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

    // With egress denied, lookups time out as a real resolver's do, before any connection.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny-egress, namespace: \"x\"}\nspec: {podSelector: {}, policyTypes: [Egress]}\n",
    );
    let in_x_a = |command: &[&str]| -> Vec<String> {
        ["exec", "-n", "x", "a", "-c", "cont-80-tcp", "--"]
            .iter()
            .chain(command)
            .map(|w| w.to_string())
            .collect()
    };
    let nslookup = in_x_a(&["nslookup", "s-y-b.y.svc.cluster.local"]);
    let nslookup: Vec<&str> = nslookup.iter().map(String::as_str).collect();
    cluster.wait_for(V, &nslookup, |out| {
        out.contains(";; connection timed out; no servers could be reached")
    });
    let connect = in_x_a(&[
        "/agnhost",
        "connect",
        "s-y-b.y.svc.cluster.local:80",
        "--timeout=1s",
    ]);
    let connect: Vec<&str> = connect.iter().map(String::as_str).collect();
    let (connected, _, stderr) = crate::support::outcome(cluster.kubectl(V, &connect));
    assert!(!connected);
    assert!(
        stderr.starts_with("DNS: lookup s-y-b.y.svc.cluster.local on 10.96.0.10:53: read udp ")
            && stderr.contains("i/o timeout"),
        "{stderr}"
    );
}
