//! Restarts and crashes of the server process lose nothing that was acknowledged.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};

use crate::support::Cluster;

#[test]
fn restart_finds_every_object_and_keeps_running_pods() {
    let mut cluster = Cluster::start();
    let v = "1.33";
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n",
    );
    for i in 0..5 {
        cluster.ok_stdin(
            v,
            &["apply", "-n", "team-a", "-f", "-"],
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}}}\ndata: {{i: \"{i}\"}}\n"),
        );
    }
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: server}\nspec:\n  nodeName: cpu-2\n  containers: [{name: app, image: app:1}]\n",
    );
    cluster.wait_for(v, &["get", "pod", "server"], |out| out.contains("Running"));
    let before = cluster.ok(v, &["get", "configmaps,pods,namespaces", "-A", "-o", "jsonpath={range .items[*]}{.metadata.uid}{\" \"}{.metadata.resourceVersion}{\"\\n\"}{end}"]);
    let pod_ip = cluster.ok(
        v,
        &["get", "pod", "server", "-o", "jsonpath={.status.podIP}"],
    );

    let status = cluster.stop();
    assert!(status.success(), "clean shutdown on SIGTERM: {status}");
    cluster.launch(&[]);

    let after = cluster.ok(v, &["get", "configmaps,pods,namespaces", "-A", "-o", "jsonpath={range .items[*]}{.metadata.uid}{\" \"}{.metadata.resourceVersion}{\"\\n\"}{end}"]);
    let mut before_lines: Vec<&str> = before.lines().collect();
    let mut after_lines: Vec<&str> = after.lines().collect();
    before_lines.sort();
    after_lines.sort();
    // The pod may have been touched by its node twin again; everything else is identical.
    let pod_uid = cluster.ok(
        v,
        &["get", "pod", "server", "-o", "jsonpath={.metadata.uid}"],
    );
    before_lines.retain(|l| !l.starts_with(&pod_uid));
    after_lines.retain(|l| !l.starts_with(&pod_uid));
    assert_eq!(before_lines, after_lines);
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "configmap",
                "cm-3",
                "-n",
                "team-a",
                "-o",
                "jsonpath={.data.i}"
            ]
        ),
        "3"
    );
    assert_eq!(
        cluster.ok(
            v,
            &["get", "pod", "server", "-o", "jsonpath={.status.phase}"]
        ),
        "Running"
    );
    assert_eq!(
        cluster.ok(
            v,
            &["get", "pod", "server", "-o", "jsonpath={.status.podIP}"]
        ),
        pod_ip
    );
    assert!(
        cluster
            .ok(v, &["logs", "server"])
            .contains("container app started")
    );

    // --reset starts from an empty store.
    cluster.stop();
    cluster.launch(&["--reset"]);
    let error = cluster.fails(v, &["get", "namespace", "team-a"], None);
    assert!(error.contains("NotFound"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_write() {
    let mut cluster = Cluster::start();
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    let client =
        kube::Client::try_from(config).expect("client over TLS with the admin certificate");
    let api: Api<ConfigMap> = Api::default_namespaced(client);

    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let writer = {
        let api = api.clone();
        let acknowledged = acknowledged.clone();
        tokio::spawn(async move {
            for i in 0.. {
                let name = format!("write-{i}");
                let cm: ConfigMap = serde_json::from_value(
                    serde_json::json!({"metadata": {"name": name}, "data": {"i": i.to_string()}}),
                )
                .unwrap();
                match api.create(&PostParams::default(), &cm).await {
                    Ok(_) => acknowledged.lock().unwrap().push(name),
                    Err(_) => break,
                }
            }
        })
    };
    // Let the writer get going, then kill the server mid-stream.
    while acknowledged.lock().unwrap().len() < 200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cluster.kill();
    let _ = tokio::time::timeout(Duration::from_secs(30), writer).await;
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 200);

    cluster.launch(&[]);
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    let api: Api<ConfigMap> =
        Api::default_namespaced(kube::Client::try_from(config).expect("client"));
    let stored: std::collections::BTreeSet<String> = api
        .list(&ListParams::default())
        .await
        .expect("list after restart")
        .items
        .iter()
        .map(|cm| cm.name_any())
        .collect();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|name| !stored.contains(*name))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged writes lost after kill -9: {lost:?}",
        lost.len()
    );
}
