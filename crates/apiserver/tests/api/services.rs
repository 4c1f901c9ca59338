//! Service ClusterIP and node-port allocation through `Objects`: the write path allocates,
//! refuses taken values with upstream's messages, releases on delete and type changes, leaks
//! nothing on refused or dry-run writes, and a restarted server knows what stored Services
//! hold.

use serde_json::{Value, json};
use tessera_api::Resource;
use tessera_api::service_allocation::ServiceRanges;
use tessera_api::write::{DeleteOptions, Part, PatchBody, WriteOptions};
use tessera_apiserver::Objects;
use tessera_store::{Store, StoreOptions};

fn open(path: &std::path::Path) -> Objects {
    let store = Store::open(path, StoreOptions::default()).expect("store");
    Objects::new(store).with_service_ranges(ServiceRanges {
        cluster_ips: "10.20.0.0/24".parse().expect("cidr"),
        node_ports: "31000-31099".parse().expect("range"),
    })
}

fn services() -> Resource {
    Resource::find("", "v1", "services").expect("services")
}

fn create(objects: &Objects, name: &str, spec: Value, dry_run: bool) -> Result<Value, String> {
    let service =
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec});
    let options = WriteOptions {
        dry_run,
        ..WriteOptions::default()
    };
    objects
        .create(services(), Some("default"), service, &options)
        .map(|written| written.object["spec"].clone())
        .map_err(|e| e.message)
}

#[test]
fn allocations_follow_writes_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let objects = open(&path);
    let namespaces = Resource::find("", "v1", "namespaces").expect("namespaces");
    objects
        .create(
            namespaces,
            None,
            json!({"metadata": {"name": "default"}}),
            &WriteOptions::default(),
        )
        .expect("namespace");

    let web = create(
        &objects,
        "web",
        json!({"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80}]}),
        false,
    )
    .expect("web");
    // /24: 254 usable, upper band from offset 16; 100 ports, upper band from 16.
    assert_eq!(web["clusterIP"], json!("10.20.0.17"));
    assert_eq!(web["ports"][0]["nodePort"], json!(31016));
    assert_eq!(web["ports"][0]["targetPort"], json!(80));
    assert_eq!(web["ports"][0]["protocol"], json!("TCP"));
    assert_eq!(web["internalTrafficPolicy"], json!("Cluster"));
    assert_eq!(web["externalTrafficPolicy"], json!("Cluster"));

    // A dry run shows an allocation but holds none; a duplicate name holds nothing.
    let dry = create(&objects, "dry", json!({"ports": [{"port": 80}]}), true).expect("dry run");
    assert_eq!(dry["clusterIP"], json!("10.20.0.18"));
    assert!(
        create(&objects, "web", json!({"ports": [{"port": 80}]}), false)
            .is_err_and(|e| e.contains("already exists"))
    );
    let next = create(&objects, "next", json!({"ports": [{"port": 80}]}), false).expect("next");
    assert_eq!(next["clusterIP"], json!("10.20.0.18"));

    assert_eq!(
        create(&objects, "clash", json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 31016}]}), false),
        Err("Service \"clash\" is invalid: spec.ports[0].nodePort: Invalid value: 31016: provided port is already allocated".into())
    );
    assert_eq!(
        create(&objects, "clash", json!({"clusterIP": "10.20.0.17"}), false),
        Err("Service \"clash\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.20.0.17\"}: failed to allocate IP 10.20.0.17: provided IP is already allocated".into())
    );

    // The ClusterIP is immutable; a type change to ClusterIP releases the node port.
    let patch = |body: Value| {
        objects
            .patch(
                services(),
                Some("default"),
                "web",
                &PatchBody::Merge(body),
                Part::Main,
                &WriteOptions::default(),
            )
            .map(|w| w.object["spec"].clone())
            .map_err(|e| e.message)
    };
    assert_eq!(
        patch(json!({"spec": {"clusterIP": "10.20.0.99"}})),
        Err("Service \"web\" is invalid: spec.clusterIPs[0]: Invalid value: \"10.20.0.99\": may not change once set".into())
    );
    let plain = patch(json!({"spec": {"type": "ClusterIP"}})).expect("type change");
    assert_eq!(plain["ports"][0].get("nodePort"), None);
    let reused = create(
        &objects,
        "reuse",
        json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 31016}]}),
        false,
    )
    .expect("released node port is free");
    assert_eq!(reused["ports"][0]["nodePort"], json!(31016));

    // Deleting releases the address.
    objects
        .delete(
            services(),
            Some("default"),
            "next",
            &DeleteOptions::default(),
            false,
        )
        .expect("delete");
    assert!(create(&objects, "takes", json!({"clusterIP": "10.20.0.18"}), false).is_ok());

    // A restarted server refuses what the stored Services hold.
    drop(objects);
    let objects = open(&path);
    assert!(
        create(&objects, "after", json!({"clusterIP": "10.20.0.17"}), false)
            .is_err_and(|e| e.contains("provided IP is already allocated"))
    );
    assert!(
        create(
            &objects,
            "after",
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 31016}]}),
            false
        )
        .is_err_and(|e| e.contains("provided port is already allocated"))
    );
    let after = create(&objects, "after", json!({}), false).expect("after");
    assert_eq!(after["clusterIP"], json!("10.20.0.20"));
}
