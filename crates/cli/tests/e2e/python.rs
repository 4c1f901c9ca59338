//! The official Python Kubernetes client against `tessera up` (`pip install -r
//! requirements-test.txt`): what a client nobody on the project wrote reads and writes.

use crate::support::Cluster;

#[test]
fn the_official_python_client_reads_and_writes_the_platform() {
    let cluster = Cluster::start();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/python/official_client.py"
    );
    let stdout = crate::support::python(&[
        std::path::Path::new(script).as_os_str(),
        cluster.kubeconfig().as_os_str(),
    ]);
    let seen: serde_json::Value = serde_json::from_slice(&stdout).expect("the script prints JSON");

    assert_eq!(seen["gitVersion"], "v1.34.1");
    assert!(
        seen["nodes"].as_array().is_some_and(|n| n.len() == 8),
        "{seen}"
    );
    assert_eq!(seen["deploymentReady"], true);
    let pods = seen["pods"].as_array().expect("pods");
    assert_eq!(pods.len(), 2, "{seen}");
    for pod in pods {
        assert_eq!(pod["phase"], "Running", "{seen}");
        assert!(
            pod["ip"]
                .as_str()
                .is_some_and(|ip| ip.starts_with("10.244.")),
            "{seen}"
        );
    }
    let event = &seen["scheduledEvent"];
    assert!(event["eventTime"].as_str().is_some(), "{seen}");
    assert_eq!(event["reportingController"], "default-scheduler");
    assert_eq!(event["regarding"], "Pod");
    assert_eq!(seen["scaledTo"], 1);
    assert_eq!(seen["badName"]["status"], 422, "{seen}");
    assert!(
        seen["badName"]["body"]
            .as_str()
            .is_some_and(|m| m.contains("metadata.name: Invalid value: \"Bad_Name\"")),
        "{seen}"
    );
}
