//! `tessera catalog`: the built-in catalog printed as a user sees it, and a user's catalog
//! file rejected with its name and the field at fault.

use std::process::Command;

use crate::support::outcome;

fn tessera(args: &[&str]) -> (bool, String, String) {
    outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .output()
            .expect("tessera"),
    )
}

#[test]
fn the_catalog_prints_models_profiles_and_topologies() {
    let (ok, listing, error) = tessera(&["catalog"]);
    assert!(ok, "{error}");
    assert!(listing.contains("H200-SXM5-141GB\t10de:2335\tNVIDIA H200\t143771MiB\t9.0\t7"));
    assert!(listing.contains("pcie-l40s-4\t4x L40S\t2\t2\t"));

    let (ok, profiles, _) = tessera(&["catalog", "--mig", "H200-SXM5-141GB"]);
    assert!(ok);
    assert!(
        profiles.contains("3g.71gb\t3/7\t72704MiB\t2\t4/8\t0,4"),
        "{profiles}"
    );

    let (ok, matrix, _) = tessera(&["catalog", "--topology", "pcie-l40s-4"]);
    assert!(ok);
    assert!(
        matrix.contains("GPU2\tSYS\tSYS\tX\tNODE\tSYS\tNODE\t1"),
        "{matrix}"
    );

    let (ok, _, error) = tessera(&["catalog", "--mig", "L40S"]);
    assert!(!ok);
    assert!(error.contains("L40S does not support MIG"), "{error}");
}

#[test]
fn a_bad_catalog_file_is_named_with_its_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("lab-servers.yaml");
    std::fs::write(
        &path,
        "servers:\n- name: odd\n  description: unknown GPU\n  gpuModel: H300\n  sockets: 1\n  coresPerSocket: 8\n  memoryGiB: 64\n  fabric: {kind: pcie}\n  gpus:\n  - {busId: '0000:01:00.0', numa: 0, pcieRoot: r0, pcieSwitch: s0}\n  nics: []\n",
    )
    .expect("write");
    let file = path.to_string_lossy().into_owned();
    let (ok, _, error) = tessera(&["catalog", "--file", &file]);
    assert!(!ok);
    assert!(
        error.contains(&format!(
            "{file}: servers[0].gpuModel: unknown GPU model \"H300\""
        )),
        "{error}"
    );
}

#[test]
fn agent_discover_reads_a_recorded_sysfs_tree() {
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../discovery/tests/fixtures/sysfs-h100-pair"
    );
    let (ok, out, warnings) = tessera(&["agent", "discover", "--root", root]);
    assert!(ok, "{warnings}");
    assert!(out.contains("NUMA nodes: 0,1"), "{out}");
    assert!(
        out.contains("0000:9d:00.0\t10de:2330\t030200\t1\tpci0000:97\tH100-SXM5-80GB"),
        "{out}"
    );
    assert!(
        out.contains("feature.node.kubernetes.io/pci-10de.present=true"),
        "{out}"
    );
    assert!(
        warnings.contains("warning: 0000:ff:00.0: unreadable IDs"),
        "{warnings}"
    );
    let slice = out
        .split("RESOURCESLICES\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no slice in {out}"));
    let slice: serde_json::Value = serde_json::from_str(slice.trim()).expect("one JSON slice");
    assert_eq!(slice["spec"]["driver"], "gpu.nvidia.com");
    assert_eq!(slice["spec"]["devices"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        slice["spec"]["devices"][1]["attributes"]["resource.kubernetes.io/pcieRoot"]["string"],
        "pci0000:97"
    );
}

#[test]
fn node_inventory_prints_devices_topology_and_labels() {
    let (ok, out, error) = tessera(&["node", "inventory", "h200-1"]);
    assert!(ok, "{error}");
    assert!(out.contains("Server: hgx-h200"), "{out}");
    assert!(
        out.contains("MIG layout per GPU: 1g.18gb, 1g.18gb"),
        "{out}"
    );
    assert!(out.contains("GPU4\t0000:9d:00.0\t1\tpci0000:97"), "{out}");
    assert!(out.contains("GPU0\tX\tNV18"), "{out}");
    assert!(
        out.contains("  nvidia.com/gpu.product=NVIDIA-H200"),
        "{out}"
    );
    assert!(out.contains("  tessera.dev/rack=r3"), "{out}");
    let (ok, _, error) = tessera(&["node", "inventory", "gpu-9"]);
    assert!(!ok);
    assert!(
        error.contains("no node \"gpu-9\" in the topology (it has cpu-1,"),
        "{error}"
    );
}
