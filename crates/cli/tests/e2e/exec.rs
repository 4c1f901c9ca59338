//! `kubectl exec` end to end: kubectl 1.27 (SPDY/3.1) and 1.33 (WebSocket v5) into the node
//! twins' simulated containers — agnhost's `connect` through a Service to a ready endpoint
//! (TIMEOUT for a port the Service lacks, REFUSED for a pod port nothing listens on),
//! `nslookup` of the Service's name, `-i` stdin through `cat`, exit codes, and `nvidia-smi -L`
//! in a pod holding two GPUs.

use crate::support::Cluster;

const TOPOLOGY: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- {name: cpu, count: 1, capacity: {cpu: "16", memory: 64Gi, pods: "110"}}
- name: dgx
  count: 1
  server: dgx-h100
  devices: {exposure: device-plugin}
networking:
  serviceCIDR: 10.100.0.0/16
"#;

const MANIFESTS: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: probe}
---
apiVersion: v1
kind: Pod
metadata: {name: server, namespace: probe, labels: {app: web}}
spec:
  nodeName: cpu-1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.47
    args: [serve-hostname, --tcp, --http=false, --port, "80"]
    ports: [{containerPort: 80}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: probe}
spec:
  nodeName: cpu-1
  containers:
  - name: agnhost
    image: registry.k8s.io/e2e-test-images/agnhost:2.47
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: probe}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: probe}
spec:
  nodeName: dgx-1
  containers:
  - name: train
    image: trainer:1
    resources: {limits: {nvidia.com/gpu: "2"}}
"#;

/// Runs `kubectl exec` in namespace `probe`; (exit code, stdout, stderr).
fn exec(cluster: &Cluster, v: &str, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut full = vec!["exec", "-n", "probe"];
    full.extend(args);
    let output = cluster.kubectl_with_stdin(v, &full, stdin);
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn kubectl_exec_runs_probes_and_tools_in_simulated_containers_over_spdy_and_websocket() {
    let cluster = Cluster::start_with_topology(TOPOLOGY, 2);
    let v = "1.33";
    cluster.ok_stdin(v, &["apply", "-f", "-"], MANIFESTS);
    for pod in ["server", "client", "trainer"] {
        cluster.node_when_running(v, Some("probe"), pod);
    }
    let cluster_ip = cluster.ok(
        v,
        &[
            "get",
            "svc",
            "web",
            "-n",
            "probe",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    assert!(cluster_ip.starts_with("10.100."), "{cluster_ip}");
    let server_ip = cluster.ok(
        v,
        &[
            "get",
            "pod",
            "server",
            "-n",
            "probe",
            "-o",
            "jsonpath={.status.podIP}",
        ],
    );
    // The endpoint is in place once the slice lists the ready server.
    cluster.wait_for(
        v,
        &[
            "get",
            "endpointslices",
            "-n",
            "probe",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "jsonpath={.items[*].endpoints[*].addresses[0]}",
        ],
        |out| out == server_ip,
    );
    for v in ["1.27", "1.33"] {
        let connect = |target: &str| {
            exec(
                &cluster,
                v,
                &[
                    "client",
                    "--",
                    "/agnhost",
                    "connect",
                    target,
                    "--timeout=1s",
                    "--protocol=tcp",
                ],
                None,
            )
        };
        let (code, _, stderr) = connect("web:80");
        assert_eq!(code, 0, "kubectl {v}: connect web:80: {stderr}");
        let (code, _, stderr) = connect("web.probe.svc.cluster.local:80");
        assert_eq!(code, 0, "kubectl {v}: {stderr}");
        let (code, _, stderr) = connect("web:81");
        assert_eq!(code, 1, "kubectl {v}: {stderr}");
        assert!(stderr.starts_with("TIMEOUT\n"), "kubectl {v}: {stderr}");
        assert!(
            stderr.contains("command terminated with exit code 1"),
            "kubectl {v}: {stderr}"
        );
        let (code, _, stderr) = connect(&format!("{server_ip}:81"));
        assert_eq!(
            (code, stderr.lines().next()),
            (1, Some("REFUSED")),
            "kubectl {v}: {stderr}"
        );

        let (code, stdout, stderr) = exec(
            &cluster,
            v,
            &["client", "--", "nslookup", "web.probe.svc.cluster.local"],
            None,
        );
        assert_eq!(code, 0, "kubectl {v}: {stderr}");
        assert!(
            stdout.contains(&format!(
                "Name:\tweb.probe.svc.cluster.local\nAddress: {cluster_ip}\n"
            )),
            "kubectl {v}: {stdout}"
        );

        let (code, stdout, stderr) = exec(
            &cluster,
            v,
            &["-i", "client", "--", "cat"],
            Some("hello\nthere\n"),
        );
        assert_eq!(
            (code, stdout.as_str()),
            (0, "hello\nthere\n"),
            "kubectl {v}: {stderr}"
        );

        let (code, _, stderr) = exec(&cluster, v, &["client", "--", "sh", "-c", "exit 3"], None);
        assert_eq!(code, 3, "kubectl {v}: {stderr}");
        assert!(
            stderr.contains("command terminated with exit code 3"),
            "kubectl {v}: {stderr}"
        );

        let (code, stdout, stderr) =
            exec(&cluster, v, &["trainer", "--", "nvidia-smi", "-L"], None);
        assert_eq!(code, 0, "kubectl {v}: {stderr}");
        let gpus: Vec<&str> = stdout.lines().collect();
        assert_eq!(gpus.len(), 2, "kubectl {v}: {stdout}");
        for (index, line) in gpus.iter().enumerate() {
            assert!(
                line.starts_with(&format!("GPU {index}: NVIDIA H100 80GB HBM3 (UUID: GPU-")),
                "kubectl {v}: {stdout}"
            );
        }
        let (code, stdout, _) = exec(&cluster, v, &["client", "--", "nvidia-smi", "-L"], None);
        assert_eq!(
            code, 126,
            "kubectl {v}: a pod without GPUs has no nvidia-smi: {stdout}"
        );
    }
    // Authorization is `create` on pods/exec, for SPDY's POST and WebSocket's GET alike.
    let role = |verbs: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: poke, namespace: probe}}\n\
             rules:\n- {{apiGroups: [\"\"], resources: [pods], verbs: [get, list]}}\n\
             - {{apiGroups: [\"\"], resources: [pods/exec], verbs: [{verbs}]}}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: poke, namespace: probe}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: poke}}\n\
             subjects: [{{kind: User, name: viewer, apiGroup: rbac.authorization.k8s.io}}]\n"
        )
    };
    cluster.ok_stdin(v, &["apply", "-f", "-"], &role("get"));
    for v in ["1.27", "1.33"] {
        let (code, _, stderr) = exec(
            &cluster,
            v,
            &["--as=viewer", "client", "--", "hostname"],
            None,
        );
        assert_ne!(code, 0, "kubectl {v}");
        assert!(
            stderr.contains(r#"User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "probe""#),
            "kubectl {v}: {stderr}"
        );
    }
    cluster.ok_stdin(v, &["apply", "-f", "-"], &role("create"));
    for v in ["1.27", "1.33"] {
        let (code, stdout, stderr) = exec(
            &cluster,
            v,
            &["--as=viewer", "client", "--", "hostname"],
            None,
        );
        assert_eq!(
            (code, stdout.as_str()),
            (0, "client\n"),
            "kubectl {v}: {stderr}"
        );
    }

    // kubectl 1.33 took the WebSocket path, not the SPDY fallback.
    let (code, _, stderr) = exec(
        &cluster,
        "1.33",
        &["-v=4", "client", "--", "hostname"],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("The subprotocol is v5.channel.k8s.io"),
        "{stderr}"
    );
}
