use serde_json::{Value, json};
use tessera_dns::Resolver;

use super::*;

fn pod(name: &str, ip: &str, phase: &str, containers: Value) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "x"},
        "spec": {"containers": containers, "nodeName": "n1"},
        "status": {"podIP": ip, "phase": phase},
    })
}

fn slice(service: &str, port_name: &str, port: u16, endpoints: Value) -> Value {
    json!({
        "metadata": {"name": format!("{service}-abc"), "namespace": "x",
                      "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": endpoints,
    })
}

fn cluster() -> Cluster {
    let services = vec![
        json!({"metadata": {"name": "web", "namespace": "x"},
               "spec": {"clusterIP": "10.96.0.20", "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}]}}),
        json!({"metadata": {"name": "empty", "namespace": "x"},
               "spec": {"clusterIP": "10.96.0.21", "ports": [{"port": 80, "protocol": "TCP"}]}}),
        json!({"metadata": {"name": "kubernetes", "namespace": "default"},
               "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}}),
        json!({"metadata": {"name": "other", "namespace": "y"},
               "spec": {"clusterIP": "10.96.0.30", "ports": [{"port": 53, "protocol": "UDP"}]}}),
    ];
    let slices = vec![
        slice(
            "web",
            "http",
            8080,
            json!([
                {"addresses": ["10.244.0.2"], "conditions": {"ready": true}},
                {"addresses": ["10.244.0.4"], "conditions": {"ready": false}},
            ]),
        ),
        slice("empty", "", 80, json!([])),
    ];
    let pods = vec![
        pod(
            "server",
            "10.244.0.2",
            "Running",
            json!([{"name": "c", "ports": [{"containerPort": 8080}]}]),
        ),
        pod(
            "agn",
            "10.244.0.3",
            "Running",
            json!([{"name": "c", "image": "agnhost",
            "args": ["serve-hostname", "--tcp", "--http=false", "--udp", "--port", "81"]}]),
        ),
        pod(
            "unready",
            "10.244.0.4",
            "Running",
            json!([{"name": "c", "ports": [{"containerPort": 8080}]}]),
        ),
        pod(
            "done",
            "10.244.0.5",
            "Succeeded",
            json!([{"name": "c", "ports": [{"containerPort": 80}]}]),
        ),
        json!({"metadata": {"name": "client", "namespace": "x"},
               "spec": {"containers": [{"name": "c", "env": [
                   {"name": "MODE", "value": "probe"},
                   {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                   {"name": "WEB_SERVICE_HOST", "value": "overridden"}]}]},
               "status": {"podIP": "10.244.0.9", "phase": "Running"}}),
    ];
    let nodes = vec![json!({"metadata": {"name": "n1"},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}})];
    Cluster {
        resolver: Resolver::new("cluster.local", &services, &slices),
        nameserver: "10.96.0.10".parse().expect("address"),
        pods,
        services,
        slices,
        nodes,
        gateways: Default::default(),
        inference_pools: Vec::new(),
    }
}

struct DenyTo(&'static str);

impl PolicyVerdict for DenyTo {
    fn allowed(&self, _: &Value, to: Peer<'_>, _: u16, _: Protocol) -> bool {
        match to {
            Peer::Pod(pod) => pod["metadata"]["name"] != self.0,
            Peer::Address(_) => true,
        }
    }
}

/// Asserts a command's (exit code, stdout, stderr).
fn assert_output(output: &Output, (code, stdout, stderr): (i32, &str, &str), line: &str) {
    assert_eq!(
        (
            output.code,
            String::from_utf8_lossy(&output.stdout).as_ref(),
            String::from_utf8_lossy(&output.stderr).as_ref()
        ),
        (code, stdout, stderr),
        "{line}"
    );
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

fn run_in(
    cluster: &Cluster,
    policy: &dyn PolicyVerdict,
    gpus: &[VisibleGpu],
    line: &str,
    stdin: &str,
) -> Output {
    let client = cluster
        .pods
        .iter()
        .find(|p| p["metadata"]["name"] == "client")
        .expect("client");
    let session = Session {
        cluster,
        pod: client,
        container: "c",
        gpus,
        policy,
        model_servers: &tessera_inference::openai::NoModelServers,
        seed: 7,
    };
    run(&session, &words(line), stdin.as_bytes())
}

#[test]
fn connect_travels_dns_service_endpoint_and_pod_port() {
    let cluster = cluster();
    let deny_server = DenyTo("server");
    let cases: &[(&str, &dyn PolicyVerdict, i32, &str)] = &[
        (
            "/agnhost connect web:80 --timeout=1s --protocol=tcp",
            &AllowAll,
            0,
            "",
        ),
        (
            "/agnhost connect web.x.svc.cluster.local:80 --timeout=1s",
            &AllowAll,
            0,
            "",
        ),
        (
            "/agnhost connect 10.96.0.20:80 --timeout 1s --protocol tcp",
            &AllowAll,
            0,
            "",
        ),
        // A port the Service does not declare has no rule: dropped.
        (
            "/agnhost connect web:81 --timeout=1s --protocol=tcp",
            &AllowAll,
            1,
            "TIMEOUT\n",
        ),
        // No ready endpoint: kube-proxy rejects.
        (
            "/agnhost connect empty:80 --timeout=1s --protocol=tcp",
            &AllowAll,
            1,
            "REFUSED\n",
        ),
        // Pod IPs: open iff a container listens.
        (
            "/agnhost connect 10.244.0.2:8080 --timeout=1s --protocol=tcp",
            &AllowAll,
            0,
            "",
        ),
        (
            "/agnhost connect 10.244.0.2:9999 --timeout=1s --protocol=tcp",
            &AllowAll,
            1,
            "REFUSED\n",
        ),
        (
            "/agnhost connect 10.244.0.3:81 --timeout=1s --protocol=tcp",
            &AllowAll,
            0,
            "",
        ),
        (
            "/agnhost connect 10.244.0.3:81 --timeout=1s --protocol=udp",
            &AllowAll,
            0,
            "",
        ),
        (
            "/agnhost connect 10.244.0.3:81 --timeout=1s --protocol=sctp",
            &AllowAll,
            1,
            "OTHER: connection refused\n",
        ),
        (
            "/agnhost connect 10.244.0.2:8080 --timeout=1s --protocol=udp",
            &AllowAll,
            1,
            "REFUSED: read udp 10.244.0.9:32775->10.244.0.2:8080: connection refused\n",
        ),
        // A finished pod and an unknown address do not answer.
        (
            "/agnhost connect 10.244.0.5:80 --timeout=1s",
            &AllowAll,
            1,
            "TIMEOUT\n",
        ),
        (
            "/agnhost connect 192.0.2.1:80 --timeout=1s",
            &AllowAll,
            1,
            "TIMEOUT\n",
        ),
        // Node ports and the node itself.
        (
            "/agnhost connect 10.0.0.2:30080 --timeout=1s",
            &AllowAll,
            0,
            "",
        ),
        (
            "/agnhost connect 10.0.0.2:31000 --timeout=1s",
            &AllowAll,
            1,
            "REFUSED\n",
        ),
        // Policy drops after Service translation, at the endpoint pod.
        (
            "/agnhost connect web:80 --timeout=1s --protocol=tcp",
            &deny_server,
            1,
            "TIMEOUT\n",
        ),
        (
            "/agnhost connect 10.244.0.2:9999 --timeout=1s",
            &deny_server,
            1,
            "TIMEOUT\n",
        ),
        // Names that do not resolve, bad arguments.
        (
            "/agnhost connect nope:80 --timeout=1s",
            &AllowAll,
            1,
            "DNS: lookup nope on 10.96.0.10:53: no such host\n",
        ),
        (
            "/agnhost connect other:53 --protocol=udp",
            &AllowAll,
            1,
            "DNS: lookup other on 10.96.0.10:53: no such host\n",
        ),
        (
            "/agnhost connect web --timeout=1s",
            &AllowAll,
            1,
            "UNKNOWN: address web: missing port in address\n",
        ),
        (
            "/agnhost connect web:80 --protocol=icmp",
            &AllowAll,
            1,
            "Unsupported protocol\nicmp",
        ),
        (
            "/agnhost connect",
            &AllowAll,
            1,
            "Error: accepts 1 arg(s), received 0\n",
        ),
    ];
    for (line, policy, code, stderr) in cases {
        let output = run_in(&cluster, *policy, &[], line, "");
        assert_eq!(
            (
                output.code,
                String::from_utf8_lossy(&output.stderr).as_ref()
            ),
            (*code, *stderr),
            "{line}"
        );
    }
}

#[test]
fn service_picks_only_ready_endpoints_whatever_the_seed() {
    let cluster = cluster();
    let client = &cluster.pods[4];
    for seed in 0..8 {
        let attempt = cluster.connect(client, "web", 80, Protocol::Tcp, &AllowAll, seed);
        assert_eq!(attempt.outcome, Outcome::Connected, "seed {seed}");
    }
    let service = &cluster.services[0];
    let endpoints = cluster.ready_endpoints(service, &service["spec"]["ports"][0], Protocol::Tcp);
    assert_eq!(endpoints, vec![("10.244.0.2".parse().expect("ip"), 8080)]);
}

#[test]
fn commands_print_what_the_real_tools_print() {
    let cluster = cluster();
    let gpus = [
        VisibleGpu {
            product_name: "NVIDIA H100 80GB HBM3".into(),
            uuid: "GPU-1".into(),
            memory_mib: 81559,
            mig: None,
        },
        VisibleGpu {
            product_name: "NVIDIA A100-SXM4-40GB".into(),
            uuid: "GPU-2".into(),
            memory_mib: 40960,
            mig: Some(("1g.5gb".into(), "MIG-a".into())),
        },
        VisibleGpu {
            product_name: "NVIDIA A100-SXM4-40GB".into(),
            uuid: "GPU-2".into(),
            memory_mib: 40960,
            mig: Some(("3g.20gb".into(), "MIG-b".into())),
        },
    ];
    type Case<'a> = (&'a str, &'a str, &'a [VisibleGpu], i32, &'a str, &'a str);
    let cases: &[Case] = &[
        (
            "nslookup web.x.svc.cluster.local",
            "",
            &[],
            0,
            "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10#53\n\nName:\tweb.x.svc.cluster.local\nAddress: 10.96.0.20\n\n",
            "",
        ),
        (
            "nslookup kubernetes.default",
            "",
            &[],
            0,
            "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10#53\n\nName:\tkubernetes.default.svc.cluster.local\nAddress: 10.96.0.1\n\n",
            "",
        ),
        (
            "nslookup nope",
            "",
            &[],
            1,
            "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10#53\n\n** server can't find nope: NXDOMAIN\n\n",
            "",
        ),
        (
            "getent hosts web",
            "",
            &[],
            0,
            "10.96.0.20      web.x.svc.cluster.local\n",
            "",
        ),
        ("getent hosts nope", "", &[], 2, "", ""),
        ("hostname", "", &[], 0, "client\n", ""),
        (
            "cat /etc/resolv.conf",
            "",
            &[],
            0,
            "search x.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n",
            "",
        ),
        (
            "cat /nope",
            "",
            &[],
            1,
            "",
            "cat: /nope: No such file or directory\n",
        ),
        ("cat", "hello\n", &[], 0, "hello\n", ""),
        (
            "printenv MODE MY_IP WEB_SERVICE_HOST KUBERNETES_SERVICE_PORT_HTTPS",
            "",
            &[],
            0,
            "probe\n10.244.0.9\noverridden\n443\n",
            "",
        ),
        ("printenv OTHER_SERVICE_HOST", "", &[], 1, "", ""),
        ("sh -c exit\\ 3", "", &[], 3, "", ""),
        (
            "nvidia-smi -L",
            "",
            &gpus,
            0,
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2)\n  MIG 1g.5gb      Device  0: (UUID: MIG-a)\n  MIG 3g.20gb     Device  1: (UUID: MIG-b)\n",
            "",
        ),
        (
            "nvidia-smi -L",
            "",
            &[],
            126,
            "",
            "OCI runtime exec failed: exec failed: unable to start container process: exec: \"nvidia-smi\": executable file not found in $PATH: unknown\r\n",
        ),
        (
            "frobnicate --now",
            "",
            &[],
            126,
            "",
            "OCI runtime exec failed: exec failed: unable to start container process: exec: \"frobnicate\": executable file not found in $PATH: unknown\r\n",
        ),
    ];
    for (line, stdin, gpus, code, stdout, stderr) in cases {
        let mut argv = words(line);
        if argv.first().map(String::as_str) == Some("sh") {
            argv = vec!["sh".into(), "-c".into(), "exit 3".into()];
        }
        let client = &cluster.pods[4];
        let session = Session {
            cluster: &cluster,
            pod: client,
            container: "c",
            gpus,
            policy: &AllowAll,
            model_servers: &tessera_inference::openai::NoModelServers,
            seed: 0,
        };
        let output = run(&session, &argv, stdin.as_bytes());
        assert_output(&output, (*code, stdout, stderr), line);
    }
}

#[test]
fn environment_links_services_as_the_kubelet_does() {
    let cluster = cluster();
    let session = Session {
        cluster: &cluster,
        pod: &cluster.pods[4],
        container: "c",
        gpus: &[],
        policy: &AllowAll,
        model_servers: &tessera_inference::openai::NoModelServers,
        seed: 0,
    };
    let env = env::environment(&session);
    let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "KUBERNETES_SERVICE_HOST",
        "KUBERNETES_PORT_443_TCP_ADDR",
        "EMPTY_SERVICE_PORT",
        "EMPTY_PORT",
        "WEB_SERVICE_PORT_HTTP",
        "WEB_PORT_80_TCP_PROTO",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    assert!(
        !names.contains(&"OTHER_SERVICE_HOST"),
        "another namespace's Service is not linked"
    );
    let value = |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    assert_eq!(value("WEB_PORT"), Some("tcp://10.96.0.20:80"));
    assert_eq!(value("WEB_SERVICE_HOST"), Some("overridden"));
    let mut unlinked = cluster.pods[4].clone();
    unlinked["spec"]["enableServiceLinks"] = json!(false);
    let links = env::service_links(&unlinked, &cluster.services);
    assert!(
        links.iter().all(|(n, _)| n.starts_with("KUBERNETES_")),
        "{links:?}"
    );
}

#[test]
fn shell_scripts_run_in_order_with_their_exit_codes() {
    let cluster = cluster();
    let cases: &[(&str, &str, i32, &str, &str)] = &[
        (
            "echo a; echo 'b c' && false || echo d",
            "",
            0,
            "a\nb c\nd\n",
            "",
        ),
        ("false && echo no; exit", "", 1, "", ""),
        ("exit 300", "", 44, "", ""),
        (
            "missing-tool x",
            "",
            127,
            "",
            "sh: missing-tool: not found\n",
        ),
        (
            "echo \"unterminated",
            "",
            2,
            "",
            "sh: syntax error: unterminated quoted string\n",
        ),
        ("cat; exit 5", "in", 5, "in", ""),
    ];
    for (script, stdin, code, stdout, stderr) in cases {
        let output = {
            let client = &cluster.pods[4];
            let session = Session {
                cluster: &cluster,
                pod: client,
                container: "c",
                gpus: &[],
                policy: &AllowAll,
                model_servers: &tessera_inference::openai::NoModelServers,
                seed: 0,
            };
            run(
                &session,
                &["/bin/sh".into(), "-c".into(), (*script).into()],
                stdin.as_bytes(),
            )
        };
        assert_eq!(
            (
                output.code,
                String::from_utf8_lossy(&output.stdout).as_ref(),
                String::from_utf8_lossy(&output.stderr).as_ref()
            ),
            (*code, *stdout, *stderr),
            "{script}"
        );
    }
    for (argv, reads) in [
        (vec!["cat"], true),
        (vec!["cat", "/etc/hosts"], false),
        (vec!["sh", "-c", "echo x; cat"], true),
        (vec!["sh", "-c", "exit 3"], false),
        (vec!["nslookup", "web"], false),
    ] {
        let argv: Vec<String> = argv.into_iter().map(String::from).collect();
        assert_eq!(reads_stdin(&argv), reads, "{argv:?}");
    }
}

#[test]
fn dns_queries_travel_to_the_dns_server_under_policy() {
    let timeout =
        "DNS: lookup web on 10.96.0.10:53: read udp 10.244.0.9:32775->10.96.0.10:53: i/o timeout\n";
    let unreachable = ";; connection timed out; no servers could be reached\n\n";
    // No CoreDNS pod runs: the built-in server stands behind the nameserver address.
    let builtin = cluster();
    // A kube-dns Service with a ready CoreDNS pod: queries go to that pod.
    let mut with_coredns = cluster();
    with_coredns.services.push(json!({
        "metadata": {"name": "kube-dns", "namespace": "kube-system"},
        "spec": {"clusterIP": "10.96.0.10", "selector": {"k8s-app": "kube-dns"},
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}]}}));
    with_coredns.slices.push(json!({
        "metadata": {"name": "kube-dns-abc", "namespace": "kube-system",
                     "labels": {"kubernetes.io/service-name": "kube-dns"}},
        "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}],
        "endpoints": [{"addresses": ["10.244.1.2"], "conditions": {"ready": true}}]}));
    with_coredns.pods.push(json!({
        "metadata": {"name": "coredns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
        "spec": {"containers": [{"name": "coredns", "ports": [{"containerPort": 53, "protocol": "UDP"}]}]},
        "status": {"podIP": "10.244.1.2", "phase": "Running"}}));
    let deny_builtin = DenyTo("tessera-cluster-dns");
    let deny_coredns = DenyTo("coredns");
    let cases: &[(&Cluster, &dyn PolicyVerdict, &str, i32, &str, &str)] = &[
        (&builtin, &AllowAll, "/agnhost connect web:80", 0, "", ""),
        (
            &builtin,
            &deny_builtin,
            "/agnhost connect web:80",
            1,
            "",
            timeout,
        ),
        // An address needs no lookup.
        (
            &builtin,
            &deny_builtin,
            "/agnhost connect 10.96.0.20:80",
            0,
            "",
            "",
        ),
        (&builtin, &deny_builtin, "nslookup web", 1, unreachable, ""),
        (&builtin, &deny_builtin, "getent hosts web", 2, "", ""),
        // With CoreDNS running, policy judges the query to its pod, not the built-in one.
        (
            &with_coredns,
            &deny_builtin,
            "/agnhost connect web:80",
            0,
            "",
            "",
        ),
        (
            &with_coredns,
            &deny_coredns,
            "/agnhost connect web:80",
            1,
            "",
            timeout,
        ),
        (&with_coredns, &deny_coredns, "getent hosts web", 2, "", ""),
    ];
    for (cluster, policy, line, code, stdout, stderr) in cases {
        let output = run_in(cluster, *policy, &[], line, "");
        assert_output(&output, (*code, stdout, stderr), line);
    }
}

#[test]
fn the_builtin_dns_server_is_a_kube_dns_pod_of_kube_system_at_the_nameserver() {
    let server = network::builtin_dns_server("10.96.0.10".parse().expect("address"));
    assert_eq!(server["metadata"]["namespace"], "kube-system");
    assert_eq!(server["metadata"]["labels"]["k8s-app"], "kube-dns");
    assert_eq!(server["status"]["podIP"], "10.96.0.10");
    assert!(network::listens(&server, 53, Protocol::Udp));
}

/// Denies everything on one secondary network.
struct DenyOn(&'static str);

impl PolicyVerdict for DenyOn {
    fn allowed(&self, _: &Value, _: Peer<'_>, _: u16, _: Protocol) -> bool {
        true
    }

    fn allowed_on(&self, network: &str, _: &Value, _: &Value, _: u16, _: Protocol) -> bool {
        network != self.0
    }
}

#[test]
fn secondary_network_addresses_are_reached_only_from_attached_pods_under_their_policies() {
    let status = |primary: &str, storage: &str| {
        json!({"k8s.v1.cni.cncf.io/network-status": format!(
            r#"[{{"name":"tessera-pod-network","interface":"eth0","ips":["{primary}"],"mac":"","default":true,"dns":{{}}}},{{"name":"x/storage","interface":"net1","ips":["{storage}/24"],"mac":"","dns":{{}}}}]"#
        )})
    };
    let mut cluster = cluster();
    let mut loader = pod(
        "loader",
        "10.244.0.7",
        "Running",
        json!([{"name": "c", "ports": [{"containerPort": 9000}]}]),
    );
    loader["metadata"]["annotations"] = status("10.244.0.7", "172.17.0.7");
    let mut attached = cluster.pods[4].clone();
    attached["metadata"]["name"] = json!("attached");
    attached["metadata"]["annotations"] = status("10.244.0.8", "172.17.0.8");
    cluster.pods.extend([loader, attached.clone()]);
    let unattached = cluster.pods[4].clone();
    let cases: &[(&Value, &dyn PolicyVerdict, u16, Outcome)] = &[
        (&attached, &AllowAll, 9000, Outcome::Connected),
        (&attached, &AllowAll, 9001, Outcome::Refused),
        // No route from a pod that is not on the network.
        (&unattached, &AllowAll, 9000, Outcome::Timeout),
        // MultiNetworkPolicy of that network, not NetworkPolicy, decides.
        (&attached, &DenyTo("loader"), 9000, Outcome::Connected),
        (&attached, &DenyOn("x/storage"), 9000, Outcome::Timeout),
        (&attached, &DenyOn("x/other"), 9000, Outcome::Connected),
    ];
    for (index, (from, policy, port, outcome)) in cases.iter().enumerate() {
        let attempt = cluster.connect(from, "172.17.0.7", *port, Protocol::Tcp, *policy, 1);
        assert_eq!(attempt.outcome, *outcome, "case {index}");
    }
}
