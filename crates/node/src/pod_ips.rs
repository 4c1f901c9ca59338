//! Pod IPs of the twins' nodes: each pod gets the lowest free host (`.2`–`.254`) of its node's
//! pod CIDR, released when the pod goes; after a restart, the IPs pods already show are taken
//! again before new ones are handed out.
//!
//! Pure bookkeeping; knows nothing of the API: the twin reads the pods and posts the IPs.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

use crate::topology::NodeSpec;

/// The pod IPs in use, by node.
#[derive(Debug, Clone, Default)]
pub struct PodIps {
    used: BTreeMap<String, BTreeSet<u8>>,
}

/// The host octet of a pod's IP, when it has one.
fn octet(pod: &Pod) -> Option<u8> {
    let ip = pod.status.as_ref().and_then(|s| s.pod_ip.as_ref())?;
    ip.rsplit('.').next().and_then(|o| o.parse::<u8>().ok())
}

impl PodIps {
    /// Marks the IP `pod` already has on `node` as taken (after a restart).
    pub fn remember(&mut self, node: &str, pod: &Pod) {
        if let Some(octet) = octet(pod) {
            self.used.entry(node.to_string()).or_default().insert(octet);
        }
    }

    /// Hands out the lowest free pod IP of `spec`'s pod CIDR; `None` when all are taken.
    pub fn allocate(&mut self, spec: &NodeSpec) -> Option<String> {
        let used = self.used.entry(spec.name.clone()).or_default();
        let octet = (2..=254u8).find(|o| !used.contains(o))?;
        used.insert(octet);
        Some(spec.pod_ip(octet))
    }

    /// Frees the IP of a pod that went away.
    pub fn release(&mut self, pod: &Pod) {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) else {
            return;
        };
        if let Some(octet) = octet(pod)
            && let Some(used) = self.used.get_mut(node)
        {
            used.remove(&octet);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    fn pod(node: &str, ip: Option<&str>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"nodeName": node, "containers": []},
            "status": {"podIP": ip},
        }))
        .expect("pod")
    }

    #[test]
    fn the_lowest_free_host_is_handed_out_and_released() {
        let spec = Topology::default_lab().nodes().remove(0);
        let prefix = spec.pod_ip(0);
        let prefix = prefix.trim_end_matches('0');
        let mut ips = PodIps::default();
        // A pod that already had .2 before a restart keeps it.
        ips.remember(&spec.name, &pod(&spec.name, Some(&format!("{prefix}2"))));
        assert_eq!(ips.allocate(&spec), Some(format!("{prefix}3")));
        assert_eq!(ips.allocate(&spec), Some(format!("{prefix}4")));
        ips.release(&pod(&spec.name, Some(&format!("{prefix}3"))));
        assert_eq!(ips.allocate(&spec), Some(format!("{prefix}3")));
        // A pod without an IP, or on another node, frees nothing.
        ips.release(&pod(&spec.name, None));
        ips.release(&pod("elsewhere", Some(&format!("{prefix}4"))));
        assert_eq!(ips.allocate(&spec), Some(format!("{prefix}5")));
        for _ in 6..=254 {
            assert!(ips.allocate(&spec).is_some());
        }
        assert_eq!(ips.allocate(&spec), None, "the /24 is full");
    }
}
