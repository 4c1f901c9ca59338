//! The two Services every cluster starts with, as kube-apiserver and kubeadm create them:
//! `default/kubernetes` (the API server, the service range's first address, port 443 to the
//! port the server listens on) and `kube-system/kube-dns` (the cluster DNS, the range's tenth
//! address, ports 53/UDP, 53/TCP and 9153/TCP, selecting `k8s-app: kube-dns`). Created when
//! missing; an existing one is left as its owner edited it.
//!
//! Knows nothing of how DNS answers or who stands behind the DNS address: the dataplane
//! (`tessera-exec`) decides that. No EndpointSlice is written for `kubernetes`: the embedded
//! API server listens on the host, which no simulated pod reaches.

use serde_json::{Value, json};
use tessera_api::Resource;
use tessera_api::write::WriteOptions;
use tessera_apiserver::Objects;
use tessera_model::net::Ipv4Cidr;

/// The `kubernetes` Service of `default` and the `kube-dns` Service of `kube-system`, for a
/// service range and the API server's port.
pub fn cluster_services(service_cidr: Ipv4Cidr, api_port: u16) -> [(&'static str, Value); 2] {
    let kubernetes = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes",
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": service_cidr.address(1).to_string(),
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": api_port}],
        },
    });
    let dns = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns",
            "labels": {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true",
                "kubernetes.io/name": "CoreDNS"},
            "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": service_cidr.address(10).to_string(),
            "selector": {"k8s-app": "kube-dns"},
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153},
            ],
        },
    });
    [("default", kubernetes), ("kube-system", dns)]
}

/// Creates the cluster Services that are missing. One that cannot be created (its address
/// already held by a user's Service, say) is logged and skipped: the platform still starts.
pub fn ensure_cluster_services(
    objects: &Objects,
    service_cidr: Ipv4Cidr,
    api_port: u16,
) -> anyhow::Result<()> {
    let services = Resource::find("", "v1", "services")
        .ok_or_else(|| anyhow::anyhow!("the services resource is not served"))?;
    for (namespace, service) in cluster_services(service_cidr, api_port) {
        let name = service["metadata"]["name"].as_str().unwrap_or_default();
        if objects.get(services, Some(namespace), name).is_ok() {
            continue;
        }
        let name = name.to_string();
        if let Err(error) =
            objects.create(services, Some(namespace), service, &WriteOptions::default())
        {
            tracing::warn!(%namespace, %name, %error, "could not create a cluster Service");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_services_take_the_first_and_tenth_addresses_of_the_range() {
        let range: Ipv4Cidr = "10.100.0.0/16".parse().expect("cidr");
        let [(kubernetes_ns, kubernetes), (dns_ns, dns)] = cluster_services(range, 6443);
        assert_eq!(kubernetes_ns, "default");
        assert_eq!(kubernetes["spec"]["clusterIP"], "10.100.0.1");
        assert_eq!(kubernetes["spec"]["ports"][0]["targetPort"], 6443);
        assert_eq!(dns_ns, "kube-system");
        assert_eq!(dns["spec"]["clusterIP"], "10.100.0.10");
        let ports: Vec<(i64, &str)> = dns["spec"]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .map(|p| {
                (
                    p["port"].as_i64().expect("port"),
                    p["protocol"].as_str().expect("protocol"),
                )
            })
            .collect();
        assert_eq!(ports, [(53, "UDP"), (53, "TCP"), (9153, "TCP")]);
    }
}
