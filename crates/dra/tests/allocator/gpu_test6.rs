//! NVIDIA's quickstart `gpu-test6.yaml`, unchanged, against the devices the node twins
//! publish: its selector (`productName.lowerAscii().matches(...)` and a GPU `index`)
//! compiles, evaluates to false — without an error — on every H100, H200 and MIG device of the
//! lab (short-circuited by the product name), and on an A100 node selects the even-indexed
//! GPUs when the driver publishes `index` (as NVIDIA's driver did before it dropped the
//! attribute; without it, reading `index` on an A100 is a runtime error, as upstream).

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};
use tessera_dra::selector::{Attribute, DeviceView, Selector, SelectorError};
use tessera_dra::{Allocator, NodeView};

const GPU_TEST6: &str =
    include_str!("../../../cli/tests/fixtures/upstream/dra-driver-nvidia-gpu/gpu-test6.yaml");

fn documents() -> Vec<Value> {
    GPU_TEST6
        .split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str(d).expect("a YAML document"))
        .collect()
}

/// The claim the template stamps out.
fn claim() -> ResourceClaim {
    let template = documents()
        .into_iter()
        .find(|d| d["kind"] == "ResourceClaimTemplate")
        .expect("a ResourceClaimTemplate");
    serde_json::from_value(json!({
        "metadata": {"namespace": "gpu-test6", "name": "pod-a100"},
        "spec": template["spec"]["spec"],
    }))
    .expect("a claim")
}

fn expressions() -> Vec<String> {
    let claim = serde_json::to_value(claim()).expect("json");
    claim["spec"]["devices"]["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| {
            r["exactly"]["selectors"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|s| s["cel"]["expression"].as_str().map(str::to_string))
        .collect()
}

fn classes() -> Vec<DeviceClass> {
    tessera_node::resource_slice::nvidia_device_classes()
        .into_iter()
        .map(|c| serde_json::from_value(c).expect("class"))
        .collect()
}

/// Each device of `slices` as the selector sees it.
fn views(slices: &[Value]) -> Vec<(String, DeviceView)> {
    let mut out = Vec::new();
    for slice in slices {
        let driver = slice["spec"]["driver"].as_str().unwrap_or_default();
        for device in slice["spec"]["devices"].as_array().into_iter().flatten() {
            let mut view = DeviceView {
                driver: driver.into(),
                ..DeviceView::default()
            };
            let attributes = device["attributes"].as_object().into_iter().flatten();
            for (name, value) in attributes {
                let attribute = match (&value["string"], &value["int"], &value["version"]) {
                    (Value::String(s), _, _) => Attribute::String(s.clone()),
                    (_, Value::Number(n), _) => Attribute::Int(n.as_i64().expect("int")),
                    (_, _, Value::String(v)) => {
                        Attribute::Version(semver::Version::parse(v).expect("version"))
                    }
                    _ => continue,
                };
                view.attributes.insert(name.clone(), attribute);
            }
            let name = device["name"].as_str().unwrap_or_default();
            out.push((format!("{driver}/{name}"), view));
        }
    }
    out
}

fn lab_slices(node: &str) -> Vec<Value> {
    let spec = tessera_node::Topology::default_lab()
        .nodes()
        .into_iter()
        .find(|n| n.name == node)
        .expect("a lab node");
    tessera_node::resource_slice::resource_slices(&spec)
}

/// An A100 node: the DGX layout with A100s; `with_index` adds the `index` attribute older
/// NVIDIA drivers published.
fn a100_slices(with_index: bool) -> Vec<Value> {
    let catalog = tessera_devices::catalog::Catalog::built_in().expect("catalog");
    let gpu = catalog.gpu("A100-SXM4-40GB").expect("A100");
    let server = catalog.server("dgx-h100").expect("server");
    let mut slices = tessera_node::resource_slice::nvidia_slices("a100-1", &server.gpus, gpu, None);
    if with_index {
        for slice in &mut slices {
            for (index, device) in slice["spec"]["devices"]
                .as_array_mut()
                .into_iter()
                .flatten()
                .enumerate()
            {
                device["attributes"]["index"] = json!({"int": index});
            }
        }
    }
    slices
}

#[test]
fn the_selector_evaluates_against_the_devices_twins_publish() {
    let expressions = expressions();
    assert_eq!(expressions.len(), 1, "{expressions:?}");
    let selector = Selector::compile(&expressions[0]).expect("gpu-test6 compiles");
    // (node, devices, what each device's verdict must be)
    type Verdict = fn(&str) -> Result<bool, &'static str>;
    let cases: [(&str, Vec<Value>, Verdict); 5] = [
        ("h100-1", lab_slices("h100-1"), |_| Ok(false)),
        ("h100-2", lab_slices("h100-2"), |_| Ok(false)),
        // MIG partitions of H200s (static layout): still no A100.
        ("h200-1", lab_slices("h200-1"), |_| Ok(false)),
        ("a100 (index published)", a100_slices(true), |device| {
            Ok(["gpu-0", "gpu-2", "gpu-4", "gpu-6"]
                .iter()
                .any(|d| device.ends_with(&format!("/{d}"))))
        }),
        ("a100 (no index)", a100_slices(false), |_| {
            Err("No such key: index")
        }),
    ];
    for (node, slices, verdict) in cases {
        let devices = views(&slices);
        assert!(!devices.is_empty(), "{node}");
        for (id, view) in devices {
            let got = selector.matches(&id, &view);
            match (got, verdict(&id)) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{node} {id}"),
                (Err(SelectorError::Runtime { message, .. }), Err(part)) => {
                    assert!(message.contains(part), "{node} {id}: {message}")
                }
                (got, want) => panic!("{node} {id}: got {got:?}, want {want:?}"),
            }
        }
    }
}

#[test]
fn its_claim_allocates_an_even_a100_and_nothing_elsewhere() {
    let claim = claim();
    let node = |name: &str| NodeView {
        name: name.into(),
        labels: Default::default(),
    };
    let typed = |slices: Vec<Value>| -> Vec<ResourceSlice> {
        slices
            .into_iter()
            .map(|s| serde_json::from_value(s).expect("slice"))
            .collect()
    };
    let h100 = typed(lab_slices("h100-1"));
    let allocator = Allocator::new(node("h100-1"), &h100, &classes(), &[]);
    assert_eq!(allocator.allocate(&[&claim]), Ok(None));

    let a100 = typed(a100_slices(true));
    let allocator = Allocator::new(node("a100-1"), &a100, &classes(), &[]);
    let result = allocator
        .allocate(&[&claim])
        .expect("no error")
        .expect("fits");
    let devices = result[0].devices.as_ref().expect("devices");
    let picked: Vec<(&str, &str)> = devices
        .results
        .iter()
        .flatten()
        .map(|r| (r.request.as_str(), r.device.as_str()))
        .collect();
    assert_eq!(picked, [("gpu", "gpu-0")]);
    // The claim's TimeSlicing configuration travels with the result.
    let config = devices.config.as_ref().expect("config");
    assert!(
        config.iter().any(|c| c.source == "FromClaim"
            && c.opaque
                .as_ref()
                .is_some_and(|o| o.parameters.0["sharing"]["strategy"] == "TimeSlicing")),
        "{config:?}"
    );
}
