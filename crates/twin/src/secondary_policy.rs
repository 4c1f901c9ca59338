//! MultiNetworkPolicy in the simulated dataplane: per secondary network, an evaluator over
//! that network's view of the world (its attached pods at their addresses on it, every
//! namespace, the MultiNetworkPolicies whose `policy-for` names it), built by
//! `tessera-netpol`'s `secondary` reader on the first probe over that network and kept until
//! the world changes (the watch cache then makes a new [`SecondaryNetworks`]).
//!
//! Decides nothing itself; knows nothing of watches or of how a probe found its network.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tessera_exec::{Cluster, Protocol};
use tessera_netpol::{Endpoint, Evaluator};

use crate::netpol::netpol_protocol;

/// The objects the secondary networks' evaluators are built from, and those built so far.
pub struct SecondaryNetworks {
    cluster: Arc<Cluster>,
    values: Vec<Value>,
    evaluators: Mutex<BTreeMap<String, Option<Evaluator>>>,
}

impl SecondaryNetworks {
    /// Over the cluster's pods and `values`, the Namespaces and MultiNetworkPolicies (each
    /// with its apiVersion and kind). Nothing is read until a network is first asked about.
    pub fn new(cluster: Arc<Cluster>, values: Vec<Value>) -> SecondaryNetworks {
        SecondaryNetworks {
            cluster,
            values,
            evaluators: Mutex::default(),
        }
    }

    /// Every object of the secondary networks' view, the pods typed as `v1` Pods.
    fn objects(&self) -> Vec<Value> {
        let pods = self.cluster.pods.iter().map(|pod| {
            let mut pod = pod.clone();
            pod["apiVersion"] = Value::from("v1");
            pod["kind"] = Value::from("Pod");
            pod
        });
        self.values.iter().cloned().chain(pods).collect()
    }

    /// Whether `network`'s MultiNetworkPolicies let `from` open `to` on `port`/`protocol`; a
    /// pod the network's view lacks is not reached.
    pub fn allowed(
        &self,
        network: &str,
        from: &Value,
        to: &Value,
        port: u16,
        protocol: Protocol,
    ) -> bool {
        let mut evaluators = self.evaluators.lock().unwrap_or_else(|p| p.into_inner());
        let evaluator = evaluators.entry(network.to_string()).or_insert_with(|| {
            match tessera_netpol::secondary::network_objects(self.objects(), network) {
                Ok(objects) => Some(objects.evaluator()),
                Err(error) => {
                    tracing::warn!(%network, %error, "a secondary network's policies cannot be read");
                    None
                }
            }
        });
        let Some(evaluator) = evaluator else {
            return false;
        };
        let id = |pod: &Value| {
            evaluator.pod_id(
                tessera_model::json::text(pod, "/metadata/namespace"),
                tessera_model::json::text(pod, "/metadata/name"),
            )
        };
        match (id(from), id(to)) {
            (Some(from), Some(to)) => {
                evaluator
                    .verdict(
                        Endpoint::Pod(from),
                        Endpoint::Pod(to),
                        port,
                        netpol_protocol(protocol),
                    )
                    .allowed
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, storage: &str) -> Value {
        let status = format!(
            r#"[{{"name":"tessera-pod-network","interface":"eth0","ips":["10.244.0.{storage}"],"mac":"","default":true,"dns":{{}}}},{{"name":"ml/storage","interface":"net1","ips":["172.17.0.{storage}"],"mac":"","dns":{{}}}}]"#
        );
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "ml", "name": name, "labels": {"app": name},
                "annotations": {"k8s.v1.cni.cncf.io/network-status": status}},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": format!("10.244.0.{storage}")}})
    }

    #[test]
    fn a_network_s_multi_network_policies_decide_and_other_networks_are_unaffected() {
        let cluster = Cluster {
            resolver: tessera_dns::Resolver::new("cluster.local", &[], &[]),
            nameserver: std::net::Ipv4Addr::new(10, 96, 0, 10),
            pods: vec![
                pod("trainer", "2"),
                pod("loader", "3"),
                pod("intruder", "4"),
            ],
            services: Vec::new(),
            slices: Vec::new(),
            nodes: Vec::new(),
            gateways: Default::default(),
            inference_pools: Vec::new(),
        };
        let values = vec![
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "ml", "labels": {"kubernetes.io/metadata.name": "ml"}}}),
            json!({"apiVersion": "k8s.cni.cncf.io/v1beta1", "kind": "MultiNetworkPolicy",
                "metadata": {"namespace": "ml", "name": "storage-from-loader",
                    "annotations": {"k8s.v1.cni.cncf.io/policy-for": "storage"}},
                "spec": {"podSelector": {"matchLabels": {"app": "trainer"}},
                    "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "loader"}}}]}]}}),
        ];
        let networks = SecondaryNetworks::new(Arc::new(cluster), values);
        let (trainer, loader, intruder) = (
            pod("trainer", "2"),
            pod("loader", "3"),
            pod("intruder", "4"),
        );
        for (network, from, to, allowed) in [
            ("ml/storage", &loader, &trainer, true),
            ("ml/storage", &intruder, &trainer, false),
            // Not isolated: no policy selects the loader.
            ("ml/storage", &intruder, &loader, true),
            // A network none of them is attached to reaches none of them.
            ("ml/other", &loader, &trainer, false),
        ] {
            assert_eq!(
                networks.allowed(network, from, to, 80, Protocol::Tcp),
                allowed,
                "{network}: {} -> {}",
                from["metadata"]["name"],
                to["metadata"]["name"]
            );
        }
    }
}
