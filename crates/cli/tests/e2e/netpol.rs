//! `tessera netpol matrix` and `explain` against the embedded platform: namespaces, pods and
//! policies applied with the real kubectl (a NetworkPolicy, and a ClusterNetworkPolicy served
//! through the bundled CRD), then the truth table and the deciding tier, policy and rule read back
//! from the cluster; a what-if file laid over the cluster's objects; and a file alone. A
//! malformed NetworkPolicy is refused with upstream's field paths and messages.

use std::process::Command;

use crate::support::{Cluster, outcome};

const V: &str = "1.33";

const OBJECTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {ns: x}}
---
apiVersion: v1
kind: Namespace
metadata: {name: "y", labels: {ns: "y"}}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x, labels: {pod: a}}
spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10, ports: [{name: serve-80-tcp, containerPort: 80}]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x, labels: {pod: b}}
spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10, ports: [{name: serve-80-tcp, containerPort: 80}]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: "y", labels: {pod: a}}
spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10, ports: [{name: serve-80-tcp, containerPort: 80}]}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-from-y, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: "y"}}}], ports: [{port: serve-80-tcp}]}]
"#;

const BAD_POLICY: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad, namespace: x}
spec:
  podSelector: {}
  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.0.0.0/8]}}], ports: [{port: 80, endPort: 79}]}]
"#;

const CNP: &str = r#"
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: deny-y-to-xb}
spec:
  tier: Admin
  priority: 10
  subject: {pods: {namespaceSelector: {matchLabels: {ns: x}}, podSelector: {matchLabels: {pod: b}}}}
  ingress: [{name: deny-from-y, action: Deny, from: [{namespaces: {matchLabels: {ns: "y"}}}]}]
"#;

const WHAT_IF: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-egress, namespace: "y"}
spec: {podSelector: {}, policyTypes: [Egress]}
"#;

fn tessera(home: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("share"))
        .output()
        .expect("run tessera");
    let (ok, stdout, stderr) = outcome(output);
    assert!(ok, "tessera {} failed: {stderr}", args.join(" "));
    stdout
}

#[test]
fn netpol_matrix_and_explain_read_the_clusters_policies() {
    let cluster = Cluster::start();
    let home = tempfile::tempdir().expect("home");
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    cluster.ok_stdin(V, &["apply", "-f", "-"], OBJECTS);
    // Bad input is refused with upstream's field path and message.
    let refused = cluster.fails(V, &["apply", "-f", "-"], Some(BAD_POLICY));
    assert!(
        refused.contains(
            "spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"10.0.0.0/8\": must be a strict subset of `cidr`"
        ) && refused.contains(
            "spec.ingress[0].ports[0].endPort: Invalid value: 79: must be greater than or equal to `port`"
        ),
        "{refused}"
    );
    // Served by the bundled network-policy-api CRD, with no install.
    cluster.ok_stdin(V, &["apply", "-f", "-"], CNP);

    let matrix = tessera(
        home.path(),
        &[
            "netpol",
            "matrix",
            "-n",
            "x",
            "-n",
            "y",
            "--port",
            "80/TCP",
            "--kubeconfig",
            &kubeconfig,
        ],
    );
    assert_eq!(
        matrix,
        "\
+--------+-----+-----+-----+
| TCP/80 | X/A | X/B | Y/A |
+--------+-----+-----+-----+
| x/a    | X   | .   | .   |
| x/b    | X   | .   | .   |
| y/a    | .   | X   | .   |
+--------+-----+-----+-----+
"
    );

    let allowed = tessera(
        home.path(),
        &[
            "netpol",
            "explain",
            "--from",
            "y/a",
            "--to",
            "x/a:80/TCP",
            "--kubeconfig",
            &kubeconfig,
        ],
    );
    assert!(
        allowed.ends_with(
            "ALLOWED: decided by Ingress (allow: tier NetworkPolicy, NetworkPolicy x/allow-from-y, rule 0)\n"
        ),
        "{allowed}"
    );
    let admin = tessera(
        home.path(),
        &[
            "netpol",
            "explain",
            "--from",
            "y/a",
            "--to",
            "x/b:80/TCP",
            "--kubeconfig",
            &kubeconfig,
        ],
    );
    assert!(
        admin.ends_with(
            "DENIED: decided by Ingress (deny: tier Admin, ClusterNetworkPolicy deny-y-to-xb, rule 0 (deny-from-y))\n"
        ),
        "{admin}"
    );
    let isolated = tessera(
        home.path(),
        &[
            "netpol",
            "explain",
            "--from",
            "x/b",
            "--to",
            "x/a:80/TCP",
            "--kubeconfig",
            &kubeconfig,
        ],
    );
    assert!(
        isolated.ends_with(
            "DENIED: decided by Ingress (deny: tier NetworkPolicy, NetworkPolicy x/allow-from-y, no rule matches: the pod is isolated)\n"
        ),
        "{isolated}"
    );

    // A what-if: the file's policy laid over the cluster's objects.
    let what_if = home.path().join("what-if.yaml");
    std::fs::write(&what_if, WHAT_IF).expect("write");
    let what_if = what_if.to_string_lossy().into_owned();
    let matrix = tessera(
        home.path(),
        &[
            "netpol",
            "matrix",
            "-n",
            "x",
            "-n",
            "y",
            "--port",
            "80/TCP",
            "--kubeconfig",
            &kubeconfig,
            "-f",
            &what_if,
        ],
    );
    assert!(matrix.contains("| y/a    | X   | X   | X   |"), "{matrix}");

    // A file alone needs no cluster.
    let offline = home.path().join("objects.yaml");
    std::fs::write(&offline, format!("{OBJECTS}\n---\n{WHAT_IF}")).expect("write");
    let offline = offline.to_string_lossy().into_owned();
    let matrix = tessera(
        home.path(),
        &["netpol", "matrix", "--port", "80/TCP", "-f", &offline],
    );
    assert!(matrix.contains("| x/b    | X   | .   | .   |"), "{matrix}");
    assert!(matrix.contains("| y/a    | X   | X   | X   |"), "{matrix}");
}
