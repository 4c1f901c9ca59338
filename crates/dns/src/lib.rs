//! Cluster DNS as a pod sees it: the names the Kubernetes DNS specification (and CoreDNS's
//! `kubernetes` plugin, in kubeadm's `pods insecure` mode) answers, over the cluster's
//! Services, EndpointSlices and Pods, and the search-path expansion a pod's `resolv.conf`
//! (`search <ns>.svc.<domain> svc.<domain> <domain>`, `options ndots:5`) makes of a short
//! name.
//!
//! - `<service>.<ns>.svc.<domain>`: the ClusterIP; for a headless Service its ready
//!   endpoints' addresses; for an ExternalName Service an alias (CNAME) to its name.
//! - `<hostname>.<service>.<ns>.svc.<domain>`: a headless Service's ready endpoint — its
//!   `hostname` (a StatefulSet pod's, through `spec.hostname`/`spec.subdomain`) or its dashed
//!   address.
//! - `<a-b-c-d>.<ns>.pod.<domain>`: the address itself.
//!
//! Build a [`Resolver`] from the objects, then [`Resolver::lookup`]. Knows nothing about
//! sockets, the DNS wire format, or names outside the cluster domain (they do not resolve:
//! the simulated cluster has no upstream resolver).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde_json::Value;
use tessera_model::json::text;

/// How many dots make a name absolute enough to be tried before the search path
/// (kubelet's `ndots:5`).
pub const NDOTS: usize = 5;

/// What a lookup answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A records of `name` (the absolute name that answered).
    Addresses {
        /// The name that answered, absolute, without the final dot.
        name: String,
        /// Its addresses, sorted.
        addresses: Vec<Ipv4Addr>,
    },
    /// `name` is an alias (CNAME) of `target` (an ExternalName Service).
    Alias {
        /// The name that answered.
        name: String,
        /// The name it points to.
        target: String,
    },
    /// `name` exists but has no address (a headless Service without ready endpoints).
    NoData {
        /// The name that answered.
        name: String,
    },
    /// No candidate name exists.
    NxDomain,
}

/// What one absolute name holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Record {
    Addresses(Vec<Ipv4Addr>),
    Alias(String),
}

/// The cluster's DNS records.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    domain: String,
    records: BTreeMap<String, Record>,
}

impl Resolver {
    /// The records of `services`, their `slices` (EndpointSlices) under the cluster `domain`
    /// (e.g. `cluster.local`).
    pub fn new(domain: &str, services: &[Value], slices: &[Value]) -> Resolver {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        let mut records: BTreeMap<String, Record> = BTreeMap::new();
        for service in services {
            let name = text(service, "/metadata/name");
            let namespace = text(service, "/metadata/namespace");
            let fqdn = format!("{name}.{namespace}.svc.{domain}");
            if text(service, "/spec/type") == "ExternalName" {
                let target = text(service, "/spec/externalName").trim_end_matches('.');
                records.insert(fqdn, Record::Alias(target.to_ascii_lowercase()));
                continue;
            }
            let cluster_ip = text(service, "/spec/clusterIP");
            if cluster_ip != "None" {
                let addresses = cluster_ip.parse().into_iter().collect();
                records.insert(fqdn, Record::Addresses(addresses));
                continue;
            }
            // Headless: the ready endpoints, and a name for each.
            let mut all = Vec::new();
            for (hostname, address) in ready_endpoints(slices, namespace, name) {
                all.push(address);
                let host = hostname.unwrap_or_else(|| dashed(address));
                let entry = records
                    .entry(format!("{host}.{fqdn}"))
                    .or_insert_with(|| Record::Addresses(Vec::new()));
                if let Record::Addresses(list) = entry {
                    list.push(address);
                }
            }
            records.insert(fqdn, Record::Addresses(all));
        }
        for record in records.values_mut() {
            if let Record::Addresses(list) = record {
                list.sort();
                list.dedup();
            }
        }
        Resolver { domain, records }
    }

    /// The cluster domain.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// A pod's search domains in namespace `namespace`, in order.
    pub fn search_domains(&self, namespace: &str) -> Vec<String> {
        let domain = &self.domain;
        vec![
            format!("{namespace}.svc.{domain}"),
            format!("svc.{domain}"),
            domain.clone(),
        ]
    }

    /// Resolves `name` as a resolver in a pod of `from_namespace` would: a name ending in a
    /// dot is absolute; one with at least [`NDOTS`] dots is tried as is first, then with each
    /// search domain; a shorter one with each search domain first, then as is. The first
    /// name with records answers; a name that exists without addresses answers
    /// [`Answer::NoData`] unless a later candidate has records.
    pub fn lookup(&self, name: &str, from_namespace: &str) -> Answer {
        let name = name.to_ascii_lowercase();
        if name.is_empty() {
            return Answer::NxDomain;
        }
        let candidates: Vec<String> = if let Some(absolute) = name.strip_suffix('.') {
            vec![absolute.to_string()]
        } else {
            let searched = self
                .search_domains(from_namespace)
                .into_iter()
                .map(|domain| format!("{name}.{domain}"));
            let dots = name.matches('.').count();
            if dots >= NDOTS {
                std::iter::once(name.clone()).chain(searched).collect()
            } else {
                searched.chain(std::iter::once(name.clone())).collect()
            }
        };
        let mut no_data = None;
        for candidate in candidates {
            match self.resolve(&candidate) {
                Some(Record::Addresses(addresses)) if addresses.is_empty() => {
                    no_data.get_or_insert(candidate);
                }
                Some(Record::Addresses(addresses)) => {
                    return Answer::Addresses {
                        name: candidate,
                        addresses,
                    };
                }
                Some(Record::Alias(target)) => {
                    return Answer::Alias {
                        name: candidate,
                        target,
                    };
                }
                None => {}
            }
        }
        no_data.map_or(Answer::NxDomain, |name| Answer::NoData { name })
    }

    /// What one absolute name holds.
    fn resolve(&self, name: &str) -> Option<Record> {
        if let Some(record) = self.records.get(name) {
            return Some(record.clone());
        }
        // <a-b-c-d>.<ns>.pod.<domain>
        let rest = name.strip_suffix(&format!(".pod.{}", self.domain))?;
        let (host, namespace) = rest.split_once('.')?;
        if namespace.is_empty() || namespace.contains('.') {
            return None;
        }
        let address: Ipv4Addr = host.replace('-', ".").parse().ok()?;
        (dashed(address) == host).then(|| Record::Addresses(vec![address]))
    }
}

/// The ready endpoints (hostname, address) of a Service's slices.
fn ready_endpoints(
    slices: &[Value],
    namespace: &str,
    service: &str,
) -> Vec<(Option<String>, Ipv4Addr)> {
    slices
        .iter()
        .filter(|s| text(s, "/metadata/namespace") == namespace)
        .filter(|s| {
            s.pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                == Some(service)
        })
        .filter(|s| text(s, "/addressType") == "IPv4")
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
        // An unset `ready` means ready (the API's documented reading).
        .filter(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false))
        .flat_map(|e| {
            let hostname = e
                .get("hostname")
                .and_then(Value::as_str)
                .filter(|h| !h.is_empty())
                .map(str::to_ascii_lowercase);
            e["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str()?.parse().ok())
                .map(move |address| (hostname.clone(), address))
        })
        .collect()
}

/// `10.244.1.5` → `10-244-1-5`.
fn dashed(address: Ipv4Addr) -> String {
    address.to_string().replace('.', "-")
}

#[cfg(test)]
mod tests;
