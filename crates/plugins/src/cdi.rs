//! Container Device Interface spec files (CDI 0.6): the per-claim specs a DRA driver writes
//! to `/var/run/cdi` for the container runtime, named and shaped as NVIDIA's DRA driver
//! names them (kind `k8s.gpu.nvidia.com/claim`, devices `<claimUID>-<device>`).
//!
//! Knows nothing of claims beyond the names it is given; writes atomically (temporary file
//! then rename) so a runtime never reads half a spec.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The CDI spec version written.
pub const CDI_VERSION: &str = "0.6.0";

/// A CDI spec file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// `cdiVersion`.
    pub cdi_version: String,
    /// `<vendor>/<class>`.
    pub kind: String,
    /// The devices it defines.
    pub devices: Vec<Device>,
}

/// One CDI device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    /// Its name within the kind.
    pub name: String,
    /// What the runtime does to a container that gets it.
    pub container_edits: ContainerEdits,
}

/// Edits to a container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerEdits {
    /// `KEY=VALUE` environment entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Device nodes to create.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<DeviceNode>,
}

/// A device node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceNode {
    /// Path in the container (and on the host).
    pub path: String,
}

/// The fully qualified CDI device name `<kind>=<name>`.
pub fn qualified_name(kind: &str, name: &str) -> String {
    format!("{kind}={name}")
}

/// The file a spec of `kind` named `name` lives in under `dir`:
/// `<vendor>-<class>_<name>.json`.
pub fn spec_path(dir: &Path, kind: &str, name: &str) -> PathBuf {
    dir.join(format!("{}_{name}.json", kind.replace('/', "-")))
}

/// Writes `spec` to `path` atomically, creating the directory.
pub fn write(path: &Path, spec: &Spec) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_vec_pretty(spec).map_err(io::Error::other)?;
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)
}

/// Removes the spec at `path`; a missing file is not an error.
pub fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
