//! Changes a maintenance plan makes to a running node's spec: a new MIG layout on a drained
//! node (as the GPU operator's MIG manager applies `nvidia.com/mig.config`), and the
//! replacement a node rotation adds (the old node's spec under a new name and address). Also
//! what the Node object must lose when its spec changes — labels and resources the old spec
//! had and the new one lacks — since merge patches only add.
//!
//! Pure: specs in, specs out. GFD's labels and the device plugin's resources come from
//! [`crate::accelerators`], ResourceSlices from [`crate::resource_slice`] over the new spec;
//! knows nothing of who asked for the change or how it is published.

use std::collections::BTreeMap;

use tessera_model::{Format, Quantity};

use crate::accelerators;
use crate::hardware::{Devices, MigLayout, MigMode, Sharing};
use crate::topology::NodeSpec;

/// The Node annotation recording the MIG layout a maintenance plan installed (each GPU's
/// profiles, comma-separated: `3g.71gb,3g.71gb`); the twins apply it as the MIG manager
/// would, and read it back when they start.
pub const INSTALLED_MIG_LAYOUT_ANNOTATION: &str = "maintenance.tessera.dev/mig-layout";
/// The GPU operator's MIG manager's label naming the wanted mig-parted configuration.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
/// The MIG manager's label reporting where applying it stands (`pending`, `success`, `failed`).
pub const MIG_CONFIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";
/// The annotation keeping a node the twins added at run time (a rotation's replacement) at
/// the same address index across restarts.
pub const NODE_INDEX_ANNOTATION: &str = "sim.tessera.dev/node-index";
/// The annotation naming the node whose spec a node the twins added at run time copies (a
/// rotation's replacement keeps it after the rotation is over).
pub const CLONED_FROM_ANNOTATION: &str = "sim.tessera.dev/cloned-from";

/// The profiles an [`INSTALLED_MIG_LAYOUT_ANNOTATION`] value names (empty entries dropped).
pub fn parse_layout(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// The mig-parted configuration name of a layout: `all-<profile>` when every instance is the
/// same profile, `custom` otherwise.
pub fn config_name(profiles: &[String]) -> String {
    match profiles.split_first() {
        Some((first, rest)) if rest.iter().all(|p| p == first) => format!("all-{first}"),
        _ => "custom".to_string(),
    }
}

/// Why a node's MIG layout cannot change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutChangeError {
    /// The node has no GPUs (or offers none).
    #[error("node {node} offers no GPUs")]
    NoGpus { node: String },
    /// The layout does not fit the node's GPU model.
    #[error("node {node}: {message}")]
    Invalid { node: String, message: String },
}

impl NodeSpec {
    /// The spec with each GPU partitioned into `profiles` (a fixed MIG layout): hardware, sharing,
    /// GFD's labels (`nvidia.com/mig.strategy`, `nvidia.com/mig-<profile>.count`) and the device
    /// plugin's extended resources follow. Labels the pool set itself stay as they were.
    pub fn with_mig_profiles(&self, profiles: &[String]) -> Result<NodeSpec, LayoutChangeError> {
        let no_gpus = || LayoutChangeError::NoGpus {
            node: self.name.clone(),
        };
        let (Some(hardware), Some(devices)) = (&self.hardware, &self.devices) else {
            return Err(no_gpus());
        };
        let gpu = hardware.gpu.as_ref().ok_or_else(no_gpus)?;
        let names: Vec<&str> = profiles.iter().map(String::as_str).collect();
        if names.is_empty() {
            return Err(LayoutChangeError::Invalid {
                node: self.name.clone(),
                message: "a MIG layout needs at least one profile".into(),
            });
        }
        tessera_devices::plan_layout(gpu, &names).map_err(|e| LayoutChangeError::Invalid {
            node: self.name.clone(),
            message: e.to_string(),
        })?;
        let mut next = self.clone();
        let mut new_hardware = hardware.clone();
        new_hardware.mig = Some(MigMode::Static(profiles.to_vec()));
        let new_devices = Devices {
            exposure: devices.exposure,
            sharing: Some(Sharing::Mig {
                layout: MigLayout::Profiles(profiles.to_vec()),
            }),
        };
        // Device labels the spec carries as the old hardware gave them make way for the new.
        let old_labels = accelerators::labels(hardware, Some(devices));
        for (key, value) in &old_labels {
            if next.labels.get(key) == Some(value) {
                next.labels.remove(key);
            }
        }
        for (key, value) in accelerators::labels(&new_hardware, Some(&new_devices)) {
            next.labels.entry(key).or_insert(value);
        }
        for resource in accelerators::extended_resources(hardware, Some(devices)).keys() {
            next.capacity.remove(resource);
            next.allocatable.remove(resource);
        }
        for (resource, count) in accelerators::extended_resources(&new_hardware, Some(&new_devices))
        {
            let quantity =
                Quantity::from_units(i64::try_from(count).unwrap_or(i64::MAX), Format::DecimalSi);
            next.capacity.insert(resource.clone(), quantity);
            next.allocatable.insert(resource, quantity);
        }
        next.hardware = Some(new_hardware);
        next.devices = Some(new_devices);
        Ok(next)
    }

    /// The replacement a rotation adds for this node: the same pool, hardware, labels and
    /// taints under `name`, at address `index` (its IP and pod CIDR follow).
    pub fn replacement(&self, name: &str, index: u32) -> NodeSpec {
        let mut next = self.clone();
        next.name = name.to_string();
        next.index = index;
        next.labels
            .insert("kubernetes.io/hostname".into(), name.to_string());
        // A replacement joins as a configured node, not through onboarding again.
        next.onboarding = false;
        next
    }

    /// The MIG profiles of each GPU under a fixed layout, if the node has one.
    pub fn mig_profiles(&self) -> Option<&[String]> {
        self.hardware.as_ref().and_then(|h| h.mig_profiles())
    }
}

/// What the Node object must lose when its spec goes from `old` to `new`: label keys, and
/// capacity/allocatable resource names, that `old` had and `new` lacks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    pub labels: Vec<String>,
    pub resources: Vec<String>,
}

/// The labels and resources `old` had that `new` lacks.
pub fn removed(old: &NodeSpec, new: &NodeSpec) -> Removed {
    let gone = |a: &BTreeMap<String, _>, b: &BTreeMap<String, _>| -> Vec<String> {
        a.keys().filter(|k| !b.contains_key(*k)).cloned().collect()
    };
    let mut resources = gone(&old.capacity, &new.capacity);
    for resource in gone(&old.allocatable, &new.allocatable) {
        if !resources.contains(&resource) {
            resources.push(resource);
        }
    }
    Removed {
        labels: old
            .labels
            .keys()
            .filter(|k| !new.labels.contains_key(*k))
            .cloned()
            .collect(),
        resources,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    fn node(topology: &Topology, name: &str) -> NodeSpec {
        topology
            .nodes()
            .into_iter()
            .find(|n| n.name == name)
            .expect("node in the lab")
    }

    fn profiles(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_new_mig_layout_moves_labels_resources_and_slices() {
        let lab = Topology::default_lab();
        let h200 = node(&lab, "h200-1");
        assert_eq!(h200.labels["nvidia.com/mig-1g.18gb.count"], "56");
        let next = h200
            .with_mig_profiles(&profiles(&["3g.71gb", "3g.71gb"]))
            .expect("fits an H200");
        assert_eq!(next.labels["nvidia.com/mig-3g.71gb.count"], "16");
        assert!(!next.labels.contains_key("nvidia.com/mig-1g.18gb.count"));
        assert_eq!(next.labels["nvidia.com/mig.strategy"], "mixed");
        // Pool labels and identity stay.
        assert_eq!(next.labels["tessera.dev/pool"], "h200");
        assert_eq!(next.name, "h200-1");
        assert_eq!(
            next.mig_profiles(),
            Some(&profiles(&["3g.71gb", "3g.71gb"])[..])
        );
        // The DRA slices are built from the new layout.
        let devices: Vec<String> = crate::resource_slice::resource_slices(&next)
            .iter()
            .flat_map(|s| s["spec"]["devices"].as_array().cloned().unwrap_or_default())
            .filter_map(|d| d["name"].as_str().map(str::to_string))
            .collect();
        assert_eq!(devices.len(), 16, "{devices:?}");
        assert!(devices.iter().all(|d| d.contains("3g71gb")), "{devices:?}");
        let gone = removed(&h200, &next);
        assert_eq!(gone.labels, vec!["nvidia.com/mig-1g.18gb.count"]);
        assert!(
            gone.resources.is_empty(),
            "DRA nodes carry no MIG resources"
        );
    }

    #[test]
    fn a_device_plugin_node_swaps_its_mig_resources() {
        let lab = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: a\n  count: 1\n  server: dgx-h100\n  devices: {exposure: device-plugin, sharing: {mig: {layout: all-1g.10gb}}}\n",
        )
        .expect("topology");
        let a = node(&lab, "a-1");
        assert!(a.capacity.contains_key("nvidia.com/mig-1g.10gb"));
        let next = a
            .with_mig_profiles(&profiles(&["3g.40gb", "3g.40gb"]))
            .expect("fits an H100");
        assert_eq!(
            next.allocatable["nvidia.com/mig-3g.40gb"].to_canonical(),
            "16"
        );
        assert!(!next.capacity.contains_key("nvidia.com/mig-1g.10gb"));
        let gone = removed(&a, &next);
        assert_eq!(gone.resources, vec!["nvidia.com/mig-1g.10gb"]);
        assert!(
            gone.labels
                .contains(&"nvidia.com/mig-1g.10gb.count".to_string())
        );
    }

    #[test]
    fn layouts_that_do_not_fit_are_refused_naming_the_node() {
        let lab = Topology::default_lab();
        let cases: [(&str, &[&str], &str); 4] = [
            ("h200-1", &["7g.141gb", "1g.18gb"], "h200-1: "),
            ("h200-1", &["9g.1tb"], "h200-1: "),
            ("h200-1", &[], "needs at least one profile"),
            ("cpu-1", &["1g.18gb"], "node cpu-1 offers no GPUs"),
        ];
        for (name, layout, want) in cases {
            let error = node(&lab, name)
                .with_mig_profiles(&profiles(layout))
                .expect_err("refused");
            assert!(
                error.to_string().contains(want),
                "{name} {layout:?}: {error}"
            );
        }
    }

    #[test]
    fn layout_annotations_and_config_names() {
        let cases: [(&str, &[&str], &str); 4] = [
            ("3g.71gb,3g.71gb", &["3g.71gb", "3g.71gb"], "all-3g.71gb"),
            (" 1g.18gb, ,2g.35gb ", &["1g.18gb", "2g.35gb"], "custom"),
            ("7g.141gb", &["7g.141gb"], "all-7g.141gb"),
            ("", &[], "custom"),
        ];
        for (value, want, name) in cases {
            let got = parse_layout(value);
            assert_eq!(got, profiles(want), "{value:?}");
            assert_eq!(config_name(&got), name, "{value:?}");
        }
    }

    #[test]
    fn a_replacement_takes_a_new_name_and_address() {
        let lab = Topology::default_lab();
        let old = node(&lab, "cpu-1");
        let new = old.replacement("cpu-1-r", 40);
        assert_eq!(new.labels["kubernetes.io/hostname"], "cpu-1-r");
        assert_eq!(new.labels["tessera.dev/pool"], "cpu");
        assert_ne!(new.internal_ip(), old.internal_ip());
        assert_ne!(new.pod_cidr(), old.pod_cidr());
        assert_eq!(new.capacity, old.capacity);
        assert_eq!(removed(&old, &new), Removed::default());
    }
}
