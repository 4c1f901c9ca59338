//! Services end to end with the real kubectl: ClusterIPs from the topology's service range,
//! EndpointSlices (and the legacy Endpoints `kubectl describe` shows) following a
//! Deployment's ready pods as it scales, a node-port collision refused with upstream's
//! message, and a headless Service.

use crate::support::Cluster;

const TOPOLOGY: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: cpu
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
networking:
  serviceCIDR: 10.100.0.0/16
  serviceNodePortRange: 30000-32767
"#;

fn manifests(replicas: u32, node_port: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: web
        image: registry.k8s.io/e2e-test-images/agnhost:2.47
        ports: [{{name: http, containerPort: 8080}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: http}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web-np}}
spec:
  type: NodePort
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 8080, nodePort: {node_port}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web-headless}}
spec:
  clusterIP: None
  selector: {{app: web}}
  ports: [{{port: 80}}]
"#
    )
}

/// The ready endpoints' addresses of the Service's slices, sorted.
fn ready_addresses(cluster: &Cluster, v: &str, ns: &str, service: &str) -> Vec<String> {
    let out = cluster.ok(
        v,
        &[
            "get",
            "endpointslices",
            "-n",
            ns,
            "-l",
            &format!("kubernetes.io/service-name={service}"),
            "-o",
            r#"jsonpath={range .items[*].endpoints[*]}{.addresses[0]} {.conditions.ready}{"\n"}{end}"#,
        ],
    );
    let mut ready: Vec<String> = out
        .lines()
        .filter_map(|line| line.strip_suffix(" true").map(str::to_string))
        .collect();
    ready.sort();
    ready
}

fn pod_ips(cluster: &Cluster, v: &str, ns: &str) -> Vec<String> {
    let out = cluster.ok(
        v,
        &[
            "get",
            "pods",
            "-n",
            ns,
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].status.podIP}",
        ],
    );
    let mut ips: Vec<String> = out.split_whitespace().map(str::to_string).collect();
    ips.sort();
    ips
}

/// Waits until the Service's slices list exactly the `count` running pods' IPs as ready.
fn wait_for_endpoints(cluster: &Cluster, v: &str, ns: &str, count: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let ips = pod_ips(cluster, v, ns);
        let ready = ready_addresses(cluster, v, ns, "web");
        if ips.len() == count && ready == ips {
            return ready;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "slices never listed the {count} pods: pods {ips:?}, ready endpoints {ready:?}\n{}",
            cluster.server_log()
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

#[test]
fn services_get_cluster_ips_and_endpoint_slices_follow_ready_pods() {
    let cluster = Cluster::start_with_topology(TOPOLOGY, 2);
    for (v, node_port) in [("1.27", "30080"), ("1.33", "30081")] {
        let ns = format!("svc-{}", v.replace('.', "-"));
        cluster.ok(v, &["create", "namespace", &ns]);
        let port: u32 = node_port.parse().expect("port");
        cluster.ok_stdin(v, &["apply", "-n", &ns, "-f", "-"], &manifests(2, port));

        let ip = cluster.ok(
            v,
            &[
                "get",
                "svc",
                "web",
                "-n",
                &ns,
                "-o",
                "jsonpath={.spec.clusterIP}",
            ],
        );
        assert!(
            ip.starts_with("10.100."),
            "ClusterIP {ip} from 10.100.0.0/16"
        );
        let table = cluster.ok(v, &["get", "svc", "-n", &ns]);
        assert!(table.contains(&ip) && table.contains("80/TCP"), "{table}");
        let families = cluster.ok(
            v,
            &[
                "get",
                "svc",
                "web",
                "-n",
                &ns,
                "-o",
                "jsonpath={.spec.ipFamilies} {.spec.ipFamilyPolicy}",
            ],
        );
        assert_eq!(families, r#"["IPv4"] SingleStack"#);

        let ready = wait_for_endpoints(&cluster, v, &ns, 2);
        let slices = cluster.ok(
            v,
            &[
                "get",
                "endpointslices",
                "-n",
                &ns,
                "-l",
                "kubernetes.io/service-name=web",
            ],
        );
        assert!(
            slices.contains("IPv4") && slices.contains("8080"),
            "{slices}"
        );
        for address in &ready {
            assert!(slices.contains(address.as_str()), "{slices}");
        }
        let managed = cluster.ok(
            v,
            &[
                "get", "endpointslices", "-n", &ns, "-l", "kubernetes.io/service-name=web",
                "-o", r#"jsonpath={.items[0].metadata.labels.endpointslice\.kubernetes\.io/managed-by} {.items[0].metadata.ownerReferences[0].kind}/{.items[0].metadata.ownerReferences[0].name}"#,
            ],
        );
        assert_eq!(managed, "endpointslice-controller.k8s.io Service/web");

        // kubectl describe shows the endpoints.
        let described = cluster.wait_for(v, &["describe", "svc", "web", "-n", &ns], |out| {
            ready.iter().all(|a| out.contains(&format!("{a}:8080")))
        });
        assert!(described.contains("Endpoints:"), "{described}");
        assert!(
            described.contains(&format!("IP:                {ip}")) || described.contains(&ip),
            "{described}"
        );

        // Scaling follows.
        cluster.ok(
            v,
            &["scale", "deployment", "web", "-n", &ns, "--replicas=3"],
        );
        wait_for_endpoints(&cluster, v, &ns, 3);
        cluster.ok(
            v,
            &["scale", "deployment", "web", "-n", &ns, "--replicas=1"],
        );
        wait_for_endpoints(&cluster, v, &ns, 1);

        // A taken node port is refused with upstream's message.
        let clash = format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: clash}}\nspec:\n  type: NodePort\n  ports: [{{port: 80, nodePort: {node_port}}}]\n"
        );
        let refused = cluster.fails(v, &["apply", "-n", &ns, "-f", "-"], Some(&clash));
        assert!(
            refused.contains(&format!(
                "The Service \"clash\" is invalid: spec.ports[0].nodePort: Invalid value: {node_port}: provided port is already allocated"
            )),
            "{refused}"
        );
        let taken_ip = format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: clash}}\nspec:\n  clusterIP: {ip}\n  ports: [{{port: 80}}]\n"
        );
        let refused = cluster.fails(v, &["apply", "-n", &ns, "-f", "-"], Some(&taken_ip));
        assert!(
            refused.contains("provided IP is already allocated"),
            "{refused}"
        );

        // Deleting the Service takes its slices (owner reference) and Endpoints with it, and
        // frees its address.
        cluster.ok(v, &["delete", "svc", "web", "-n", &ns]);
        cluster.wait_for(v, &["get", "endpoints", "web", "-n", &ns], |out| {
            out.contains("NotFound")
        });
        cluster.wait_for(
            v,
            &[
                "get",
                "endpointslices",
                "-n",
                &ns,
                "-l",
                "kubernetes.io/service-name=web",
            ],
            |out| out.contains("No resources found"),
        );
        let reused = taken_ip.replace("name: clash", "name: reuse");
        cluster.ok_stdin(v, &["apply", "-n", &ns, "-f", "-"], &reused);

        // Headless.
        let headless = cluster.ok(
            v,
            &[
                "get",
                "svc",
                "web-headless",
                "-n",
                &ns,
                "-o",
                "jsonpath={.spec.clusterIP}",
            ],
        );
        assert_eq!(headless, "None");
        let headless_table = cluster.ok(v, &["get", "svc", "web-headless", "-n", &ns]);
        assert!(headless_table.contains("None"), "{headless_table}");
    }
}
