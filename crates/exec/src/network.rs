//! The simulated network path of one probe: a name through cluster DNS, a Service VIP or a
//! node port to one ready endpoint, then the destination pod, open on the port iff one of its
//! containers listens there, with the policy seam asked on the way.
//!
//! An address a pod holds on a secondary network (its Multus network-status) is reached only
//! from pods attached to the same network, under that network's MultiNetworkPolicies.
//!
//! Works over the stored objects (Services, EndpointSlices, Pods, Nodes) as JSON. Knows no
//! sockets and no policy rules; the endpoint a Service picks comes from the caller's seed.

use std::net::Ipv4Addr;

use serde_json::Value;
use tessera_dns::{Answer, Resolver};
use tessera_model::json::text;
use tessera_model::multus::{network_statuses, status_address};

use crate::policy::{Peer, PolicyVerdict, Protocol};

/// The cluster as the dataplane sees it.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Cluster DNS over the Services and EndpointSlices.
    pub resolver: Resolver,
    /// The cluster DNS server's address (`nameserver` in a pod's resolv.conf).
    pub nameserver: Ipv4Addr,
    /// Every pod.
    pub pods: Vec<Value>,
    /// Every Service.
    pub services: Vec<Value>,
    /// Every EndpointSlice.
    pub slices: Vec<Value>,
    /// Every Node.
    pub nodes: Vec<Value>,
    /// The Gateway API's decisions (Gateways, their addresses and routes), for requests to
    /// a Gateway's address.
    pub gateways: tessera_gateway::Model,
    /// Every InferencePool (backends of HTTPRoutes whose endpoint picker chooses the pod).
    pub inference_pools: Vec<Value>,
}

/// How a connection attempt ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Connected (for UDP and SCTP: the server answered).
    Connected,
    /// The host answered that nothing listens there.
    Refused,
    /// Nothing answered: dropped by policy, no such host, or no rule for the address.
    Timeout,
    /// The name does not resolve.
    NoSuchHost,
    /// The name could not be looked up: the DNS server did not answer.
    DnsTimeout,
}

/// What the pod's resolver made of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// An address.
    Address(Ipv4Addr),
    /// The DNS server answered that the name does not exist (or has no address).
    NoSuchHost,
    /// The DNS server could not be reached.
    DnsUnreachable,
}

/// The DNS port.
pub const DNS_PORT: u16 = 53;

/// The cluster DNS server as policy sees it when no pod of the DNS Service runs: a pod of
/// `kube-system` labelled `k8s-app: kube-dns` (as CoreDNS's pods are) at the nameserver
/// address, so the usual "allow DNS" egress rules (`namespaceSelector` kube-system with
/// `podSelector` k8s-app=kube-dns, or port 53 to anywhere) let queries through.
pub fn builtin_dns_server(nameserver: Ipv4Addr) -> Value {
    let address = nameserver.to_string();
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": "kube-system", "name": "tessera-cluster-dns",
            "labels": {"k8s-app": "kube-dns"}},
        "spec": {"containers": [{"name": "coredns", "ports": [
            {"name": "dns", "containerPort": DNS_PORT, "protocol": "UDP"},
            {"name": "dns-tcp", "containerPort": DNS_PORT, "protocol": "TCP"},
        ]}]},
        "status": {"phase": "Running", "podIP": address, "podIPs": [{"ip": address}]},
    })
}

/// Where a connection ended up, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// How it ended.
    pub outcome: Outcome,
    /// The address connected to (before Service translation).
    pub address: Option<Ipv4Addr>,
}

impl Cluster {
    /// Opens `host:port` over `protocol` from `from` (a pod), choosing among a Service's
    /// ready endpoints with `seed`.
    pub fn connect(
        &self,
        from: &Value,
        host: &str,
        port: u16,
        protocol: Protocol,
        policy: &dyn PolicyVerdict,
        seed: u64,
    ) -> Attempt {
        let address = match self.resolve(from, host, policy, seed) {
            Resolved::Address(address) => address,
            Resolved::NoSuchHost => {
                return Attempt {
                    outcome: Outcome::NoSuchHost,
                    address: None,
                };
            }
            Resolved::DnsUnreachable => {
                return Attempt {
                    outcome: Outcome::DnsTimeout,
                    address: None,
                };
            }
        };
        let outcome = self.connect_address(from, address, port, protocol, policy, seed);
        Attempt {
            outcome,
            address: Some(address),
        }
    }

    /// A host name or address as the pod's resolver turns it into one address.
    pub fn resolve(
        &self,
        from: &Value,
        host: &str,
        policy: &dyn PolicyVerdict,
        seed: u64,
    ) -> Resolved {
        if let Ok(address) = host.parse() {
            return Resolved::Address(address);
        }
        if host == "localhost" {
            return Resolved::Address(Ipv4Addr::LOCALHOST);
        }
        match self.lookup(from, host, policy, seed) {
            Some(Answer::Addresses { addresses, .. }) => match addresses.first() {
                Some(address) => Resolved::Address(*address),
                None => Resolved::NoSuchHost,
            },
            Some(_) => Resolved::NoSuchHost,
            None => Resolved::DnsUnreachable,
        }
    }

    /// `name` looked up through the cluster DNS from `from`; `None` when the query cannot
    /// reach the DNS server (policy drops UDP/53 on the way).
    pub fn lookup(
        &self,
        from: &Value,
        name: &str,
        policy: &dyn PolicyVerdict,
        seed: u64,
    ) -> Option<Answer> {
        self.dns_reachable(from, policy, seed).then(|| {
            self.resolver
                .lookup(name, text(from, "/metadata/namespace"))
        })
    }

    /// Whether a DNS query from `from` reaches the DNS server: UDP/53 to the nameserver
    /// address, through the Service holding it to one of its ready endpoints when any run,
    /// otherwise to the built-in server ([`builtin_dns_server`]), judged by policy as any
    /// connection.
    pub fn dns_reachable(&self, from: &Value, policy: &dyn PolicyVerdict, seed: u64) -> bool {
        let endpoints = self
            .service_with_ip(self.nameserver)
            .and_then(|service| {
                let port = service_port(
                    service,
                    |p| p.get("port").and_then(Value::as_u64) == Some(DNS_PORT.into()),
                    Protocol::Udp,
                )?;
                Some(self.ready_endpoints(service, port, Protocol::Udp))
            })
            .unwrap_or_default();
        if endpoints.is_empty() {
            let server = builtin_dns_server(self.nameserver);
            return policy.allowed(from, Peer::Pod(&server), DNS_PORT, Protocol::Udp);
        }
        let (address, port) = endpoints[(seed % endpoints.len() as u64) as usize];
        match self.running_pod(address) {
            Some(server) => policy.allowed(from, Peer::Pod(server), port, Protocol::Udp),
            None => false,
        }
    }

    fn connect_address(
        &self,
        from: &Value,
        address: Ipv4Addr,
        port: u16,
        protocol: Protocol,
        policy: &dyn PolicyVerdict,
        seed: u64,
    ) -> Outcome {
        self.open(from, address, port, protocol, policy, seed).0
    }

    /// Opens `address:port` from `from`, as [`Cluster::connect`] does after resolving, and
    /// names the pod that answered (none for a node's kubelet).
    pub fn open<'a>(
        &'a self,
        from: &'a Value,
        address: Ipv4Addr,
        port: u16,
        protocol: Protocol,
        policy: &dyn PolicyVerdict,
        seed: u64,
    ) -> (Outcome, Option<&'a Value>) {
        if address.is_loopback() {
            return if listens(from, port, protocol) {
                (Outcome::Connected, Some(from))
            } else {
                (Outcome::Refused, None)
            };
        }
        if let Some(service) = self.service_with_ip(address) {
            let Some(service_port) = service_port(
                service,
                |p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)),
                protocol,
            ) else {
                // kube-proxy has no rule for a port the Service does not declare.
                return (Outcome::Timeout, None);
            };
            return self.to_endpoint(from, service, service_port, protocol, policy, seed);
        }
        if self.is_node(address) {
            let node_port = self.services.iter().find_map(|service| {
                service_port(
                    service,
                    |p| p.get("nodePort").and_then(Value::as_u64) == Some(u64::from(port)),
                    protocol,
                )
                .map(|p| (service, p))
            });
            return match node_port {
                Some((service, service_port)) => {
                    self.to_endpoint(from, service, service_port, protocol, policy, seed)
                }
                None if !policy.allowed(from, Peer::Address(address), port, protocol) => {
                    (Outcome::Timeout, None)
                }
                // The node's kubelet listens; nothing else does.
                None if port == 10250 && protocol == Protocol::Tcp => (Outcome::Connected, None),
                None => (Outcome::Refused, None),
            };
        }
        if let Some(pod) = self.running_pod(address) {
            return to_pod(from, pod, port, protocol, policy);
        }
        match self.secondary_pod(address) {
            // Only a pod attached to the same network has a route to the address.
            Some((pod, network)) if attached(from, &network) => {
                if !policy.allowed_on(&network, from, pod, port, protocol) {
                    (Outcome::Timeout, None)
                } else if listens(pod, port, protocol) {
                    (Outcome::Connected, Some(pod))
                } else {
                    (Outcome::Refused, None)
                }
            }
            _ => (Outcome::Timeout, None),
        }
    }

    /// The running pod holding `address` on a secondary network, with that network's name
    /// (`namespace/name` of its NetworkAttachmentDefinition), from the pods' network-status.
    fn secondary_pod(&self, address: Ipv4Addr) -> Option<(&Value, String)> {
        let address = address.to_string();
        self.pods
            .iter()
            .filter(|pod| is_running(pod))
            .find_map(|pod| {
                network_statuses(pod)
                    .into_iter()
                    .find(|status| {
                        !status.default && status.ips.iter().any(|ip| status_address(ip) == address)
                    })
                    .map(|status| (pod, status.name))
            })
    }

    /// Through a Service port to one of its ready endpoints, naming the pod that answered.
    pub fn to_endpoint<'a>(
        &'a self,
        from: &Value,
        service: &Value,
        service_port: &Value,
        protocol: Protocol,
        policy: &dyn PolicyVerdict,
        seed: u64,
    ) -> (Outcome, Option<&'a Value>) {
        let endpoints = self.ready_endpoints(service, service_port, protocol);
        if endpoints.is_empty() {
            // kube-proxy rejects traffic to a Service without endpoints.
            return (Outcome::Refused, None);
        }
        let (address, port) = endpoints[(seed % endpoints.len() as u64) as usize];
        match self.running_pod(address) {
            Some(pod) => to_pod(from, pod, port, protocol, policy),
            None => (Outcome::Timeout, None),
        }
    }

    /// The ready endpoints (address, target port) of a Service port, in slice order.
    pub fn ready_endpoints(
        &self,
        service: &Value,
        service_port: &Value,
        protocol: Protocol,
    ) -> Vec<(Ipv4Addr, u16)> {
        let namespace = text(service, "/metadata/namespace");
        let name = text(service, "/metadata/name");
        let port_name = text(service_port, "/name");
        self.slices
            .iter()
            .filter(|s| text(s, "/metadata/namespace") == namespace)
            .filter(|s| {
                s.pointer("/metadata/labels/kubernetes.io~1service-name")
                    .and_then(Value::as_str)
                    == Some(name)
            })
            .filter_map(|s| {
                let port = s["ports"].as_array()?.iter().find(|p| {
                    text(p, "/name") == port_name
                        && Protocol::parse_api(text(p, "/protocol")) == Some(protocol)
                })?;
                let port = u16::try_from(port.get("port")?.as_u64()?).ok()?;
                Some((s, port))
            })
            .flat_map(|(s, port)| {
                s["endpoints"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| {
                        e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false)
                    })
                    .flat_map(|e| e["addresses"].as_array().into_iter().flatten())
                    .filter_map(move |a| Some((a.as_str()?.parse().ok()?, port)))
            })
            .collect()
    }

    /// The Service `namespace/name`.
    pub fn service(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.services.iter().find(|s| {
            text(s, "/metadata/namespace") == namespace && text(s, "/metadata/name") == name
        })
    }

    fn service_with_ip(&self, address: Ipv4Addr) -> Option<&Value> {
        let address = address.to_string();
        self.services
            .iter()
            .find(|s| text(s, "/spec/clusterIP") == address)
    }

    fn is_node(&self, address: Ipv4Addr) -> bool {
        let address = address.to_string();
        self.nodes.iter().any(|node| {
            node.pointer("/status/addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|a| text(a, "/address") == address)
        })
    }

    /// The running pod with this IP.
    fn running_pod(&self, address: Ipv4Addr) -> Option<&Value> {
        let address = address.to_string();
        self.pods
            .iter()
            .find(|pod| text(pod, "/status/podIP") == address && is_running(pod))
    }
}

/// Whether a pod runs and is not being deleted.
fn is_running(pod: &Value) -> bool {
    text(pod, "/status/phase") == "Running" && pod.pointer("/metadata/deletionTimestamp").is_none()
}

/// Whether a pod is attached to the secondary network `network`.
fn attached(pod: &Value, network: &str) -> bool {
    network_statuses(pod)
        .iter()
        .any(|status| !status.default && status.name == network)
}

/// The Service port `matches` picks, of `protocol`.
pub fn service_port(
    service: &Value,
    matches: impl Fn(&Value) -> bool,
    protocol: Protocol,
) -> Option<&Value> {
    service
        .pointer("/spec/ports")?
        .as_array()?
        .iter()
        .find(|p| matches(p) && Protocol::parse_api(text(p, "/protocol")) == Some(protocol))
}

fn to_pod<'a>(
    from: &Value,
    pod: &'a Value,
    port: u16,
    protocol: Protocol,
    policy: &dyn PolicyVerdict,
) -> (Outcome, Option<&'a Value>) {
    if !policy.allowed(from, Peer::Pod(pod), port, protocol) {
        (Outcome::Timeout, None)
    } else if listens(pod, port, protocol) {
        (Outcome::Connected, Some(pod))
    } else {
        (Outcome::Refused, None)
    }
}

/// Whether one of the pod's containers listens on `port`/`protocol`: a declared container
/// port, or what agnhost's `serve-hostname` or `netexec` serve by their arguments.
pub fn listens(pod: &Value, port: u16, protocol: Protocol) -> bool {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|container| listening_ports(container).contains(&(port, protocol)))
}

/// The ports a container listens on.
pub fn listening_ports(container: &Value) -> Vec<(u16, Protocol)> {
    let mut ports: Vec<(u16, Protocol)> = container
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let port = u16::try_from(p.get("containerPort")?.as_u64()?).ok()?;
            Some((port, Protocol::parse_api(text(p, "/protocol"))?))
        })
        .collect();
    let argv: Vec<&str> = ["command", "args"]
        .iter()
        .flat_map(|key| {
            container
                .get(*key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(Value::as_str)
        .collect();
    ports.extend(agnhost_ports(&argv));
    ports
}

/// What `agnhost serve-hostname` / `agnhost netexec` listen on, from their flags.
fn agnhost_ports(argv: &[&str]) -> Vec<(u16, Protocol)> {
    let flag = |name: &str| -> Option<&str> {
        let long = format!("--{name}");
        argv.iter().enumerate().find_map(|(i, arg)| {
            if let Some(value) = arg.strip_prefix(&format!("{long}=")) {
                Some(value)
            } else if *arg == long {
                // A bare boolean flag, or a value in the next word.
                Some(
                    argv.get(i + 1)
                        .copied()
                        .filter(|v| !v.starts_with("--"))
                        .unwrap_or("true"),
                )
            } else {
                None
            }
        })
    };
    let on = |name: &str, default: bool| -> bool { flag(name).map_or(default, |v| v != "false") };
    let number = |name: &str, default: i64| -> i64 {
        flag(name).and_then(|v| v.parse().ok()).unwrap_or(default)
    };
    let mut ports = Vec::new();
    let mut add = |port: i64, protocol| {
        if let Ok(port) = u16::try_from(port)
            && port > 0
        {
            ports.push((port, protocol));
        }
    };
    if argv.contains(&"serve-hostname") {
        let port = number("port", 9376);
        if on("tcp", false) || on("http", true) {
            add(port, Protocol::Tcp);
        }
        if on("udp", false) {
            add(port, Protocol::Udp);
        }
        if on("sctp", false) {
            add(port, Protocol::Sctp);
        }
    }
    if argv.contains(&"netexec") {
        add(number("http-port", 8080), Protocol::Tcp);
        add(number("udp-port", 8081), Protocol::Udp);
        add(number("sctp-port", -1), Protocol::Sctp);
    }
    ports
}
