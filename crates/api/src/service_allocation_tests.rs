//! Table tests of Service allocation (cases after upstream's `storage_test.go` and
//! `alloc_test.go`) and a property: no address or port is ever held twice.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn service(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
}

fn small_ranges() -> ServiceRanges {
    ServiceRanges {
        cluster_ips: "10.0.0.0/28".parse().expect("cidr"),
        node_ports: PortRange::new(30000, 30003).expect("range"),
    }
}

/// A book holding `ns/taken` with 10.96.0.10 and node port 30080.
fn book() -> Allocations {
    let taken = service(
        "taken",
        json!({"type": "NodePort", "clusterIP": "10.96.0.10", "ports": [{"port": 80, "nodePort": 30080}]}),
    );
    Allocations::restore(ServiceRanges::default(), [("ns/taken".to_string(), &taken)])
}

fn created(book: &mut Allocations, name: &str, spec: Value) -> Result<Value, String> {
    let mut object = service(name, spec);
    book.allocate_create(&owner_of("ns", name), &mut object)
        .map(|_| object["spec"].clone())
        .map_err(|e| e.message)
}

#[test]
fn creates_allocate_as_upstream() {
    // (spec, the fields expected in the allocated spec, or the error message)
    let table: Vec<(Value, Result<Value, &str>)> = vec![
        (
            json!({"type": "ClusterIP", "ports": [{"port": 80}]}),
            Ok(
                json!({"clusterIP": "10.96.1.1", "clusterIPs": ["10.96.1.1"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}),
            ),
        ),
        (
            json!({"clusterIP": "10.96.0.20"}),
            Ok(json!({"clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"]})),
        ),
        (
            json!({"clusterIPs": ["10.96.0.21"]}),
            Ok(json!({"clusterIP": "10.96.0.21", "clusterIPs": ["10.96.0.21"]})),
        ),
        (
            json!({"clusterIP": "10.96.0.10"}),
            Err(
                "Service \"s\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.10\"}: failed to allocate IP 10.96.0.10: provided IP is already allocated",
            ),
        ),
        (
            json!({"clusterIP": "192.168.1.1"}),
            Err(
                "Service \"s\" is invalid: spec.clusterIPs: Invalid value: []string{\"192.168.1.1\"}: failed to allocate IP 192.168.1.1: provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12",
            ),
        ),
        (
            json!({"clusterIP": "10.96.0.0"}),
            Err("failed to allocate IP 10.96.0.0: provided IP is not in the valid range"),
        ),
        (
            json!({"clusterIP": "10.111.255.255"}),
            Err("failed to allocate IP 10.111.255.255: provided IP is not in the valid range"),
        ),
        (
            json!({"clusterIP": "None", "selector": {"app": "web"}}),
            Ok(
                json!({"clusterIP": "None", "clusterIPs": ["None"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"}),
            ),
        ),
        (
            json!({"clusterIP": "None"}),
            Ok(
                json!({"clusterIP": "None", "clusterIPs": ["None"], "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "RequireDualStack"}),
            ),
        ),
        (
            json!({"type": "ExternalName", "externalName": "example.com"}),
            Ok(json!({"clusterIP": null, "ipFamilies": null, "ipFamilyPolicy": null})),
        ),
        (
            json!({"ipFamilyPolicy": "RequireDualStack"}),
            Err(
                "spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services",
            ),
        ),
        (
            json!({"ipFamilyPolicy": "PreferDualStack"}),
            Ok(json!({"ipFamilies": ["IPv4"], "ipFamilyPolicy": "PreferDualStack"})),
        ),
        (
            json!({"ipFamilies": ["IPv6"]}),
            Err("spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster"),
        ),
        (
            json!({"clusterIP": "fd00::10"}),
            Err(
                "spec.clusterIPs[0]: Invalid value: []string{\"fd00::10\"}: IPv6 is not configured on this cluster",
            ),
        ),
        (
            json!({"clusterIP": "not-an-ip"}),
            Err("spec.clusterIPs[0]: Invalid value: \"not-an-ip\": must be a valid IP address"),
        ),
        (
            json!({"clusterIPs": ["10.96.0.30", "10.96.0.31"], "ipFamilyPolicy": "SingleStack"}),
            Err(
                "spec.ipFamilyPolicy: Invalid value: \"SingleStack\": must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            ),
        ),
        (
            json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}, {"port": 443}]}),
            Ok(
                json!({"ports": [{"port": 80, "protocol": "TCP", "nodePort": 30086}, {"port": 80, "protocol": "UDP", "nodePort": 30086}, {"port": 443, "nodePort": 30087}]}),
            ),
        ),
        (
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30081}]}),
            Ok(json!({"ports": [{"port": 80, "nodePort": 30081}]})),
        ),
        (
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}),
            Err(
                "Service \"s\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated",
            ),
        ),
        (
            json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 81, "nodePort": 8080}]}),
            Err(
                "spec.ports[1].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767",
            ),
        ),
        (
            json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": [{"port": 80}]}),
            Ok(json!({"ports": [{"port": 80}]})),
        ),
        (
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}),
            Ok(json!({"ports": [{"port": 80, "nodePort": 30086}], "healthCheckNodePort": 30087})),
        ),
        (
            json!({"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30090}]}),
            Err("spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"),
        ),
    ];
    for (spec, want) in table {
        let mut book = book();
        let before = book.held();
        let got = created(&mut book, "s", spec.clone());
        match (got, want) {
            (Ok(got), Ok(want)) => {
                for (field, value) in want.as_object().expect("object") {
                    assert_eq!(&got[field], value, "{spec}: {field} in {got}");
                }
            }
            (Err(got), Err(want)) => {
                assert!(got.contains(want), "{spec}: {got}");
                assert_eq!(
                    book.held(),
                    before,
                    "{spec}: a refused create holds nothing"
                );
            }
            (got, want) => panic!("{spec}: {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn dynamic_picks_fill_the_upper_band_then_the_lower() {
    let mut book = Allocations::new(small_ranges());
    // A /28 has 14 usable addresses, below upstream's 16-address minimum for a band.
    let ips: Vec<String> = (0..14)
        .map(|i| {
            created(&mut book, &format!("s{i}"), json!({}))
                .map(|spec| spec["clusterIP"].as_str().unwrap_or_default().to_string())
                .expect("allocated")
        })
        .collect();
    assert_eq!(ips.first().map(String::as_str), Some("10.0.0.1"));
    assert_eq!(ips.last().map(String::as_str), Some("10.0.0.14"));
    assert_eq!(
        created(&mut book, "full", json!({})),
        Err("failed to allocate a serviceIP: range is full".into())
    );
    for i in 0..4 {
        created(
            &mut book,
            &format!("n{i}"),
            json!({"clusterIP": "None", "type": "NodePort", "ports": [{"port": 80}]}),
        )
        .expect("node port");
    }
    assert_eq!(
        created(
            &mut book,
            "nfull",
            json!({"clusterIP": "None", "type": "NodePort", "ports": [{"port": 80}]})
        ),
        Err("failed to allocate a nodePort: range is full".into())
    );
    book.settle("ns/s3", None);
    assert_eq!(
        created(&mut book, "again", json!({})).map(|s| s["clusterIP"].clone()),
        Ok(json!("10.0.0.4"))
    );
}

fn updated(book: &mut Allocations, old: &Value, spec: Value) -> Result<Value, String> {
    let mut object = service("s", spec);
    let result = book
        .allocate_update("ns/s", old, &mut object)
        .map_err(|e| e.message);
    if result.is_ok() {
        book.settle("ns/s", Some(&object));
    }
    result.map(|_| object["spec"].clone())
}

#[test]
fn updates_carry_values_keep_the_ip_and_follow_type_changes() {
    let mut book = book();
    let mut stored = service(
        "s",
        json!({"type": "NodePort", "ports": [{"name": "http", "port": 80}]}),
    );
    book.allocate_create("ns/s", &mut stored).expect("created");
    book.settle("ns/s", Some(&stored));
    let ip = stored["spec"]["clusterIP"].clone();
    assert_eq!(stored["spec"]["ports"][0]["nodePort"], json!(30086));

    // A replace without the allocated values keeps them.
    let kept = updated(
        &mut book,
        &stored,
        json!({"type": "NodePort", "ports": [{"name": "http", "port": 80}]}),
    )
    .expect("kept");
    assert_eq!(kept["clusterIP"], ip);
    assert_eq!(kept["ports"][0]["nodePort"], json!(30086));
    assert_eq!(kept["ipFamilies"], json!(["IPv4"]));

    // The primary ClusterIP is immutable.
    assert_eq!(
        updated(&mut book, &stored, json!({"clusterIP": "10.96.0.99"})),
        Err("Service \"s\" is invalid: spec.clusterIPs[0]: Invalid value: \"10.96.0.99\": may not change once set".into())
    );
    assert_eq!(book.ip_holder("10.96.0.99".parse().expect("ip")), None);

    // Another node port: the new one is taken, the old one released once settled.
    let moved = updated(&mut book, &stored, json!({"type": "NodePort", "clusterIP": ip, "ports": [{"name": "http", "port": 80, "nodePort": 30100}]}))
        .expect("moved");
    assert_eq!(book.port_holder(30100), Some("ns/s"));
    assert_eq!(book.port_holder(30086), None);
    stored["spec"] = moved;

    // A taken node port is refused and nothing changes hands.
    assert_eq!(
        updated(&mut book, &stored, json!({"type": "NodePort", "ports": [{"name": "http", "port": 80, "nodePort": 30080}]})),
        Err("Service \"s\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated".into())
    );
    assert_eq!(book.port_holder(30080), Some("ns/taken"));
    assert_eq!(book.port_holder(30100), Some("ns/s"));

    // NodePort → ClusterIP drops the unchanged node ports and releases them.
    let plain = updated(
        &mut book,
        &stored,
        json!({"type": "ClusterIP", "ports": [{"name": "http", "port": 80, "nodePort": 30100}]}),
    )
    .expect("plain");
    assert_eq!(plain["ports"][0].get("nodePort"), None);
    assert_eq!(book.port_holder(30100), None);
    stored["spec"] = plain;

    // → ExternalName releases the address; back → a new one.
    let external = updated(&mut book, &stored, json!({"type": "ExternalName", "externalName": "example.com", "clusterIP": ip, "clusterIPs": [ip]}))
        .expect("external");
    assert_eq!(external.get("clusterIP"), None);
    assert_eq!(
        book.ip_holder(ip.as_str().expect("ip").parse().expect("ip")),
        None
    );
    stored["spec"] = external;
    let back = updated(&mut book, &stored, json!({"type": "ClusterIP"})).expect("back");
    assert_eq!(back["clusterIP"], json!("10.96.1.1"));
}

#[test]
fn restore_books_what_stored_services_hold() {
    let headless = service("h", json!({"clusterIP": "None"}));
    let outside = service(
        "o",
        json!({"clusterIP": "192.168.0.1", "type": "NodePort", "ports": [{"port": 1, "nodePort": 80}]}),
    );
    let lb = service(
        "lb",
        json!({"clusterIP": "10.96.0.5", "type": "LoadBalancer", "healthCheckNodePort": 30200, "ports": [{"port": 1, "nodePort": 30201}]}),
    );
    let book = Allocations::restore(
        ServiceRanges::default(),
        [
            ("ns/h".to_string(), &headless),
            ("ns/o".to_string(), &outside),
            ("ns/lb".to_string(), &lb),
        ],
    );
    assert_eq!(book.held(), (1, 2));
    assert_eq!(
        book.ip_holder("10.96.0.5".parse().expect("ip")),
        Some("ns/lb")
    );
    assert_eq!(book.port_holder(30200), Some("ns/lb"));
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        name: u8,
        ip: Option<u8>,
        node_port: Option<u8>,
        node_port_type: bool,
    },
    Delete {
        name: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0u8..12,
            proptest::option::of(0u8..20),
            proptest::option::of(0u8..6),
            any::<bool>()
        )
            .prop_map(|(name, ip, node_port, node_port_type)| Op::Create {
                name,
                ip,
                node_port,
                node_port_type
            }),
        (0u8..12).prop_map(|name| Op::Delete { name }),
    ]
}

proptest! {
    /// Whatever the sequence of creates (some refused) and deletes, every held address and
    /// port belongs to exactly one live Service, and live Services hold distinct ones.
    #[test]
    fn nothing_is_allocated_twice(ops in proptest::collection::vec(op(), 1..60)) {
        let mut book = Allocations::new(small_ranges());
        let mut live: BTreeMap<String, Value> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Create { name, ip, node_port, node_port_type } => {
                    let owner = format!("ns/s{name}");
                    if live.contains_key(&owner) {
                        continue;
                    }
                    let mut spec = json!({"ports": [{"port": 80}]});
                    if let Some(ip) = ip {
                        spec["clusterIP"] = json!(format!("10.0.0.{ip}"));
                    }
                    if node_port_type {
                        spec["type"] = json!("NodePort");
                    }
                    if let Some(port) = node_port {
                        spec["ports"][0]["nodePort"] = json!(30000 + i64::from(port));
                    }
                    let mut object = service(&format!("s{name}"), spec);
                    if book.allocate_create(&owner, &mut object).is_ok() {
                        book.settle(&owner, Some(&object));
                        live.insert(owner, object);
                    }
                }
                Op::Delete { name } => {
                    let owner = format!("ns/s{name}");
                    if live.remove(&owner).is_some() {
                        book.settle(&owner, None);
                    }
                }
            }
            let rebuilt = Allocations::restore(small_ranges(), live.iter().map(|(o, s)| (o.clone(), s)));
            prop_assert_eq!(&rebuilt.ips, &book.ips);
            prop_assert_eq!(&rebuilt.ports, &book.ports);
            let mut ips = BTreeSet::new();
            let mut ports = BTreeSet::new();
            for object in live.values() {
                let (held_ips, held_ports) = book.holdings(object);
                for ip in held_ips {
                    prop_assert!(ips.insert(ip), "{} held twice", ip);
                }
                for port in held_ports {
                    prop_assert!(ports.insert(port), "{} held twice", port);
                }
            }
        }
    }
}
