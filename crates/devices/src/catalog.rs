//! The accelerator catalog: GPU models with vendor and PCI IDs, architecture, compute
//! capability, memory, NVLink, sharing capabilities and MIG profile tables, read from the YAML
//! compiled into the binary (`data/gpus.yaml`) or from a user's file, and checked on load.
//!
//! Server models (`data/servers.yaml`, see [`crate::server`]) are part of the catalog; their
//! GPU model references are checked here. Knows nothing about nodes, topology files or
//! Kubernetes objects.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::server::ServerModel;

/// The GPU models shipped with Tessera.
pub const BUILT_IN: &str = include_str!("../data/gpus.yaml");
/// The server models shipped with Tessera.
pub const BUILT_IN_SERVERS: &str = include_str!("../data/servers.yaml");

/// A catalog that cannot be used: the file's location or the field, and what is wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CatalogError {
    /// The YAML does not parse or does not have the catalog's shape.
    #[error("{source_name}: {message}")]
    Parse {
        /// Where the catalog came from.
        source_name: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value breaks a rule of the catalog.
    #[error("{source_name}: {field}: {message}")]
    Invalid {
        /// Where the catalog came from.
        source_name: String,
        /// The field path, e.g. `gpus[3].mig.profiles[2].starts`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// Accelerator vendors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// NVIDIA (PCI vendor 10de).
    Nvidia,
    /// AMD (PCI vendor 1002).
    Amd,
    /// Intel (PCI vendor 8086).
    Intel,
}

impl Vendor {
    /// The PCI vendor ID, lower-case hex.
    pub fn pci_id(self) -> &'static str {
        match self {
            Vendor::Nvidia => "10de",
            Vendor::Amd => "1002",
            Vendor::Intel => "8086",
        }
    }
}

/// NVLink (or the vendor's peer fabric) of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nvlink {
    /// Generation (3 for A100, 4 for Hopper).
    pub generation: u8,
    /// Links per GPU (12 on A100, 18 on Hopper: `NV18` in `nvidia-smi topo -m`).
    pub links: u8,
}

/// Which sharing modes a model supports besides MIG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Sharing {
    /// CUDA time-slicing (the device plugin's `sharing.timeSlicing`).
    pub time_slicing: bool,
    /// CUDA MPS (the device plugin's `sharing.mps`).
    pub mps: bool,
}

/// One MIG GPU-instance profile.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MigProfile {
    /// The profile name as NVIDIA writes it (`1g.10gb`, `1g.10gb+me`).
    pub name: String,
    /// Compute slices (the `<N>g`).
    pub compute_slices: u8,
    /// Memory in MiB where a source states it exactly.
    #[serde(default, rename = "memoryMiB")]
    pub memory_mib: Option<u64>,
    /// How many instances of this profile fit on one GPU at most.
    pub max_instances: u8,
    /// Memory slices one instance occupies.
    pub size: u8,
    /// Memory slices an instance may start at.
    pub starts: Vec<u8>,
}

impl MigProfile {
    /// The memory in GB the name states (`1g.10gb` → 10).
    pub fn named_memory_gb(&self) -> Option<u32> {
        let (_, memory) = self.name.split_once('.')?;
        memory.split('+').next()?.strip_suffix("gb")?.parse().ok()
    }

    /// The compute slices the name states (`3g.40gb` → 3).
    fn named_compute_slices(&self) -> Option<u8> {
        self.name.split_once('g')?.0.parse().ok()
    }
}

/// The MIG capability of a model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Mig {
    /// Memory slices of the GPU (8 on A100 and Hopper).
    pub memory_slices: u8,
    /// Compute slices of the GPU (7 on A100 and Hopper).
    pub compute_slices: u8,
    /// GPU-instance profiles.
    pub profiles: Vec<MigProfile>,
}

/// A GPU model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GpuModel {
    /// Catalog name (`H100-SXM5-80GB`), what topology files refer to.
    pub name: String,
    /// Vendor.
    pub vendor: Vendor,
    /// PCI vendor ID, lower-case hex.
    pub vendor_id: String,
    /// PCI device ID, lower-case hex.
    pub device_id: String,
    /// The product name as `nvidia-smi` (or the vendor's tool) reports it.
    pub product_name: String,
    /// Family as GPU Feature Discovery labels it (`nvidia.com/gpu.family`).
    pub family: String,
    /// Architecture as NVIDIA's DRA driver publishes it.
    pub architecture: String,
    /// CUDA compute capability (`9.0`); absent for non-CUDA devices.
    #[serde(default)]
    pub compute_capability: Option<String>,
    /// Memory in MiB as the driver reports it.
    #[serde(rename = "memoryMiB")]
    pub memory_mib: u64,
    /// NVLink, when the model has it.
    #[serde(default)]
    pub nvlink: Option<Nvlink>,
    /// Sharing modes.
    pub sharing: Sharing,
    /// MIG, when the model supports it.
    #[serde(default)]
    pub mig: Option<Mig>,
}

impl GpuModel {
    /// A MIG profile by name.
    pub fn mig_profile(&self, name: &str) -> Option<&MigProfile> {
        self.mig.as_ref()?.profiles.iter().find(|p| p.name == name)
    }

    /// The CUDA compute capability as (major, minor).
    pub fn compute_capability(&self) -> Option<(u32, u32)> {
        let (major, minor) = self.compute_capability.as_deref()?.split_once('.')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    #[serde(default)]
    gpus: Vec<GpuModel>,
    #[serde(default)]
    servers: Vec<ServerModel>,
}

/// The checked catalog.
#[derive(Debug, Clone)]
pub struct Catalog {
    gpus: Vec<GpuModel>,
    servers: Vec<ServerModel>,
}

impl Catalog {
    /// The catalog shipped with Tessera.
    pub fn built_in() -> Result<Catalog, CatalogError> {
        Catalog::parse_all(&[
            ("built-in catalog (crates/devices/data/gpus.yaml)", BUILT_IN),
            (
                "built-in catalog (crates/devices/data/servers.yaml)",
                BUILT_IN_SERVERS,
            ),
        ])
    }

    /// Reads and checks one catalog file; `source_name` names it in errors.
    pub fn parse(source_name: &str, text: &str) -> Result<Catalog, CatalogError> {
        Catalog::parse_all(&[(source_name, text)])
    }

    /// Reads and checks catalog files (`gpus:` and `servers:` lists, in any of them) as one
    /// catalog; each is named in errors by its source name.
    pub fn parse_all(sources: &[(&str, &str)]) -> Result<Catalog, CatalogError> {
        let mut catalog = Catalog {
            gpus: Vec::new(),
            servers: Vec::new(),
        };
        let mut server_sources = Vec::new();
        for (source_name, text) in sources {
            let file: CatalogFile =
                serde_saphyr::from_str(text).map_err(|error| CatalogError::Parse {
                    source_name: source_name.to_string(),
                    message: error.to_string(),
                })?;
            let invalid = |field: String, message: String| CatalogError::Invalid {
                source_name: source_name.to_string(),
                field,
                message,
            };
            for (i, gpu) in file.gpus.iter().enumerate() {
                if catalog.gpu(&gpu.name).is_some() {
                    return Err(invalid(
                        format!("gpus[{i}].name"),
                        format!("duplicate model {:?}", gpu.name),
                    ));
                }
                check_gpu(gpu)
                    .map_err(|(field, message)| invalid(format!("gpus[{i}].{field}"), message))?;
                catalog.gpus.push(gpu.clone());
            }
            for (i, server) in file.servers.into_iter().enumerate() {
                server_sources.push((source_name.to_string(), i));
                catalog.servers.push(server);
            }
        }
        // Servers are checked once every GPU model is known, whichever file it came from.
        let mut names = BTreeSet::new();
        for (server, (source_name, i)) in catalog.servers.iter().zip(&server_sources) {
            let invalid = |field: &str, message: String| CatalogError::Invalid {
                source_name: source_name.clone(),
                field: format!("servers[{i}].{field}"),
                message,
            };
            if !names.insert(server.name.as_str()) {
                return Err(invalid(
                    "name",
                    format!("duplicate server model {:?}", server.name),
                ));
            }
            server
                .check()
                .map_err(|(field, message)| invalid(&field, message))?;
            if let Some(model) = &server.gpu_model
                && catalog.gpu(model).is_none()
            {
                return Err(invalid("gpuModel", format!("unknown GPU model {model:?}")));
            }
        }
        Ok(catalog)
    }

    /// Every server model, in catalog order.
    pub fn servers(&self) -> &[ServerModel] {
        &self.servers
    }

    /// A server model by catalog name.
    pub fn server(&self, name: &str) -> Option<&ServerModel> {
        self.servers.iter().find(|server| server.name == name)
    }

    /// Every model, in catalog order.
    pub fn gpus(&self) -> &[GpuModel] {
        &self.gpus
    }

    /// A model by catalog name.
    pub fn gpu(&self, name: &str) -> Option<&GpuModel> {
        self.gpus.iter().find(|gpu| gpu.name == name)
    }

    /// A model by PCI vendor and device ID (as discovery reads them).
    pub fn gpu_by_pci(&self, vendor_id: &str, device_id: &str) -> Option<&GpuModel> {
        self.gpus.iter().find(|gpu| {
            gpu.vendor_id.eq_ignore_ascii_case(vendor_id)
                && gpu.device_id.eq_ignore_ascii_case(device_id)
        })
    }
}

/// Checks one GPU model; returns the field (relative to the model) and message.
fn check_gpu(gpu: &GpuModel) -> Result<(), (String, String)> {
    if gpu.vendor_id != gpu.vendor.pci_id() {
        return Err((
            "vendorId".into(),
            format!(
                "{:?} is not the PCI ID of {:?} ({})",
                gpu.vendor_id,
                gpu.vendor,
                gpu.vendor.pci_id()
            ),
        ));
    }
    let hex4 = |s: &str| s.len() == 4 && s.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
    if !hex4(&gpu.device_id) {
        return Err((
            "deviceId".into(),
            format!("{:?} is not four lower-case hex digits", gpu.device_id),
        ));
    }
    if gpu.compute_capability.is_some() && gpu.compute_capability().is_none() {
        return Err((
            "computeCapability".into(),
            format!("{:?} is not <major>.<minor>", gpu.compute_capability),
        ));
    }
    match &gpu.mig {
        Some(mig) => check_mig(mig, &|field| format!("mig.{field}")),
        None => Ok(()),
    }
}

fn check_mig(mig: &Mig, at: &dyn Fn(&str) -> String) -> Result<(), (String, String)> {
    let mut names = BTreeSet::new();
    for (j, profile) in mig.profiles.iter().enumerate() {
        let field = |name: &str| at(&format!("profiles[{j}].{name}"));
        if !names.insert(profile.name.as_str()) {
            return Err((
                field("name"),
                format!("duplicate profile {:?}", profile.name),
            ));
        }
        if profile.named_memory_gb().is_none()
            || profile.named_compute_slices() != Some(profile.compute_slices)
        {
            return Err((
                field("name"),
                format!(
                    "{:?} is not <compute slices>g.<memory>gb[+me] with {} compute slices",
                    profile.name, profile.compute_slices
                ),
            ));
        }
        if profile.compute_slices == 0 || profile.compute_slices > mig.compute_slices {
            return Err((
                field("computeSlices"),
                format!(
                    "{} is not within 1..={} compute slices",
                    profile.compute_slices, mig.compute_slices
                ),
            ));
        }
        if profile.size == 0 || profile.size > mig.memory_slices {
            return Err((
                field("size"),
                format!(
                    "{} is not within 1..={} memory slices",
                    profile.size, mig.memory_slices
                ),
            ));
        }
        if let Some(start) = profile
            .starts
            .iter()
            .find(|start| **start + profile.size > mig.memory_slices)
        {
            return Err((
                field("starts"),
                format!(
                    "an instance at {start} of size {} ends past the GPU's {} memory slices",
                    profile.size, mig.memory_slices
                ),
            ));
        }
        if profile.max_instances == 0 || usize::from(profile.max_instances) > profile.starts.len() {
            return Err((
                field("maxInstances"),
                format!(
                    "{} is not within 1..={} (the placements listed)",
                    profile.max_instances,
                    profile.starts.len()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_catalog_loads_with_the_required_models() {
        let catalog = Catalog::built_in().expect("built-in catalog");
        for (name, profiles) in [
            ("A100-SXM4-40GB", 7),
            ("A100-SXM4-80GB", 7),
            ("H100-SXM5-80GB", 7),
            ("H200-SXM5-141GB", 7),
            ("L40S", 0),
            ("MI300X", 0),
        ] {
            let gpu = catalog.gpu(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(
                gpu.mig.as_ref().map_or(0, |m| m.profiles.len()),
                profiles,
                "{name}"
            );
        }
        let h200 = catalog.gpu_by_pci("10DE", "2335").expect("H200 by PCI ID");
        assert_eq!(h200.name, "H200-SXM5-141GB");
        let profile = h200.mig_profile("3g.71gb").expect("3g.71gb");
        assert_eq!(
            (profile.memory_mib, profile.max_instances),
            (Some(72704), 2)
        );
        assert_eq!(profile.named_memory_gb(), Some(71));
        assert_eq!(
            catalog
                .gpu("H100-SXM5-80GB")
                .and_then(GpuModel::compute_capability),
            Some((9, 0))
        );
    }

    fn with_profile(profile: &str) -> String {
        format!(
            "gpus:\n- name: X\n  vendor: nvidia\n  vendorId: \"10de\"\n  deviceId: \"2330\"\n  productName: X\n  family: hopper\n  architecture: Hopper\n  memoryMiB: 1\n  sharing: {{timeSlicing: true, mps: true}}\n  mig:\n    memorySlices: 8\n    computeSlices: 7\n    profiles:\n    - {profile}\n"
        )
    }

    #[test]
    fn bad_catalogs_name_the_field() {
        let table = [
            (
                "{name: 1g.10gb, computeSlices: 1, maxInstances: 7, size: 1, starts: [0, 7, 8]}",
                "gpus[0].mig.profiles[0].starts",
                "ends past",
            ),
            (
                "{name: 3g.40gb, computeSlices: 2, maxInstances: 2, size: 4, starts: [0, 4]}",
                "gpus[0].mig.profiles[0].name",
                "with 2 compute slices",
            ),
            (
                "{name: 3g.40gb, computeSlices: 3, maxInstances: 3, size: 4, starts: [0, 4]}",
                "gpus[0].mig.profiles[0].maxInstances",
                "1..=2",
            ),
            (
                "{name: 9g.40gb, computeSlices: 9, maxInstances: 1, size: 8, starts: [0]}",
                "gpus[0].mig.profiles[0].computeSlices",
                "1..=7",
            ),
        ];
        for (profile, field, message) in table {
            match Catalog::parse("test.yaml", &with_profile(profile)) {
                Err(CatalogError::Invalid {
                    field: got,
                    message: text,
                    ..
                }) => {
                    assert_eq!(got, field, "{profile}");
                    assert!(text.contains(message), "{text}");
                }
                other => panic!("{profile}: {other:?}"),
            }
        }
        let unknown = with_profile(
            "{name: 1g.10gb, computeSlices: 1, maxInstances: 1, size: 1, starts: [0], colour: red}",
        );
        match Catalog::parse("test.yaml", &unknown) {
            Err(CatalogError::Parse { message, .. }) => {
                assert!(message.contains("colour"), "{message}");
                assert!(message.contains("line"), "names the line: {message}");
            }
            other => panic!("{other:?}"),
        }
        let wrong_vendor = with_profile(
            "{name: 1g.10gb, computeSlices: 1, maxInstances: 1, size: 1, starts: [0]}",
        )
        .replace("\"10de\"", "\"1002\"");
        assert!(matches!(
            Catalog::parse("test.yaml", &wrong_vendor),
            Err(CatalogError::Invalid { field, .. }) if field == "gpus[0].vendorId"
        ));
    }

    #[test]
    fn bad_servers_name_the_field_in_their_file() {
        let server = |gpu_model: &str, numa: u8, second_bus: &str| {
            format!(
                "servers:\n- name: s\n  description: d\n  gpuModel: {gpu_model}\n  sockets: 2\n  coresPerSocket: 8\n  memoryGiB: 64\n  fabric: {{kind: pcie}}\n  gpus:\n  - {{busId: '0000:01:00.0', numa: {numa}, pcieRoot: r0, pcieSwitch: s0}}\n  - {{busId: '{second_bus}', numa: 0, pcieRoot: r0, pcieSwitch: s0}}\n  nics: []\n"
            )
        };
        let table = [
            (server("L40S", 0, "0000:02:00.0"), None),
            (
                server("B300", 0, "0000:02:00.0"),
                Some(("servers[0].gpuModel", "unknown GPU model \"B300\"")),
            ),
            (
                server("L40S", 2, "0000:02:00.0"),
                Some(("servers[0].gpus[0].numa", "NUMA node 2 does not exist")),
            ),
            (
                server("L40S", 0, "0000:01:00.0"),
                Some(("servers[0].gpus[1].busId", "used twice")),
            ),
        ];
        for (text, expected) in table {
            let result = Catalog::parse_all(&[("gpus.yaml", BUILT_IN), ("lab.yaml", &text)]);
            match (result, expected) {
                (Ok(catalog), None) => assert!(catalog.server("s").is_some()),
                (
                    Err(CatalogError::Invalid {
                        source_name,
                        field,
                        message,
                    }),
                    Some((want_field, want)),
                ) => {
                    assert_eq!(source_name, "lab.yaml");
                    assert_eq!(field, want_field);
                    assert!(message.contains(want), "{message}");
                }
                (other, expected) => panic!("{other:?}, expected {expected:?}"),
            }
        }
    }

    proptest::proptest! {
        /// Arbitrary text is an error or a catalog, never a panic.
        #[test]
        fn arbitrary_input_never_panics(text in "\\PC{0,200}") {
            let _ = Catalog::parse("fuzz.yaml", &text);
        }

        /// Mutated copies of the real catalog either load or name what is wrong.
        #[test]
        fn mutated_catalogs_fail_cleanly(cut in 0usize..4000, insert in "[ :\\-\\[\\]{}a-z0-9]{0,6}") {
            let mut text = BUILT_IN.to_string();
            let at = text.char_indices().map(|(i, _)| i).nth(cut % BUILT_IN.len()).unwrap_or(0);
            text.insert_str(at, &insert);
            if let Err(error) = Catalog::parse("mutated.yaml", &text) {
                proptest::prop_assert!(error.to_string().starts_with("mutated.yaml: "));
            }
        }
    }
}
