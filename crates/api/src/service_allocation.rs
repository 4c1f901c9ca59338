//! Service ClusterIPs and node ports, as kube-apiserver allocates them in its Service storage
//! (`pkg/registry/core/service/storage/alloc.go`): IP family fields defaulted (single-stack
//! IPv4), a ClusterIP allocated from the service range or a requested one reserved, node
//! ports for NodePort and LoadBalancer Services (and a LoadBalancer's health-check node port
//! under `externalTrafficPolicy: Local`), values carried over on update, the primary ClusterIP
//! immutable, all with upstream's messages and field paths.
//!
//! The book of who holds what ([`Allocations`]) is rebuilt from the stored Services at start,
//! so it needs no storage of its own; the shell keeps it beside the store and calls
//! [`Allocations::settle`] with each Service it writes or removes. Dynamic picks are
//! deterministic: the first free address (or port) of the upper band, then of the lower band
//! upstream keeps for static requests. Knows nothing about the store, locks or the topology
//! file that declares the ranges.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use serde_json::{Value, json};
use tessera_model::net::{Ipv4Cidr, PortRange};

use crate::error::{ApiError, ApiResult, Cause};

/// The ranges Services draw from (kube-apiserver's `--service-cluster-ip-range` and
/// `--service-node-port-range`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceRanges {
    /// ClusterIPs.
    pub cluster_ips: Ipv4Cidr,
    /// Node ports.
    pub node_ports: PortRange,
}

impl Default for ServiceRanges {
    fn default() -> Self {
        ServiceRanges {
            cluster_ips: Ipv4Cidr::new(Ipv4Addr::new(10, 96, 0, 0), 12),
            node_ports: PortRange {
                base: 30000,
                size: 2768,
            },
        }
    }
}

/// What one write reserved, so a failed write can give it back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    ips: Vec<Ipv4Addr>,
    ports: Vec<u16>,
}

impl Grant {
    /// Whether nothing was reserved.
    pub fn is_empty(&self) -> bool {
        self.ips.is_empty() && self.ports.is_empty()
    }
}

/// Who holds which ClusterIP and node port; owners are `namespace/name`.
#[derive(Debug, Clone, Default)]
pub struct Allocations {
    ranges: ServiceRanges,
    ips: BTreeMap<Ipv4Addr, String>,
    ports: BTreeMap<u16, String>,
}

/// One reservation being made for a Service: the book and what has been taken so far.
struct Reserving<'a> {
    book: &'a mut Allocations,
    owner: &'a str,
    name: &'a str,
    grant: Grant,
}

const EXTERNAL_NAME: &str = "ExternalName";
const NONE: &str = "None";

/// The key a Service's holdings are booked under.
pub fn owner_of(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl Allocations {
    /// An empty book over `ranges`.
    pub fn new(ranges: ServiceRanges) -> Allocations {
        Allocations {
            ranges,
            ..Allocations::default()
        }
    }

    /// The book the stored Services imply: each holds its ClusterIPs and node ports.
    /// Addresses and ports outside today's ranges are not booked (upstream's repair loop
    /// reports them and leaves them be).
    pub fn restore<'a>(
        ranges: ServiceRanges,
        services: impl IntoIterator<Item = (String, &'a Value)>,
    ) -> Allocations {
        let mut book = Allocations::new(ranges);
        for (owner, service) in services {
            book.settle(&owner, Some(service));
        }
        book
    }

    /// The ranges.
    pub fn ranges(&self) -> ServiceRanges {
        self.ranges
    }

    /// Who holds `ip`.
    pub fn ip_holder(&self, ip: Ipv4Addr) -> Option<&str> {
        self.ips.get(&ip).map(String::as_str)
    }

    /// Who holds node port `port`.
    pub fn port_holder(&self, port: u16) -> Option<&str> {
        self.ports.get(&port).map(String::as_str)
    }

    /// How many addresses and ports are held.
    pub fn held(&self) -> (usize, usize) {
        (self.ips.len(), self.ports.len())
    }

    /// Defaults and allocates a new Service's IP family fields, ClusterIP and node ports.
    /// On error nothing stays reserved.
    pub fn allocate_create(&mut self, owner: &str, service: &mut Value) -> ApiResult<Grant> {
        let name = crate::meta::meta_str(service, "name")
            .unwrap_or_default()
            .to_string();
        let mut reserving = Reserving {
            book: self,
            owner,
            name: &name,
            grant: Grant::default(),
        };
        let result = reserving.create(service);
        reserving.finish(result)
    }

    /// Carries a Service's allocated values into its update (as upstream's
    /// `patchAllocatedValues`), checks the primary ClusterIP did not change, and allocates
    /// what the new form needs beyond the old (a type change to NodePort, from ExternalName,
    /// …). Releases happen in [`Allocations::settle`] once the update is decided. On error
    /// nothing stays reserved.
    pub fn allocate_update(
        &mut self,
        owner: &str,
        old: &Value,
        service: &mut Value,
    ) -> ApiResult<Grant> {
        let name = crate::meta::meta_str(service, "name")
            .unwrap_or_default()
            .to_string();
        let mut reserving = Reserving {
            book: self,
            owner,
            name: &name,
            grant: Grant::default(),
        };
        let result = reserving.update(old, service);
        reserving.finish(result)
    }

    /// Gives back what a failed write reserved.
    pub fn revert(&mut self, owner: &str, grant: &Grant) {
        for ip in &grant.ips {
            if self.ip_holder(*ip) == Some(owner) {
                self.ips.remove(ip);
            }
        }
        for port in &grant.ports {
            if self.port_holder(*port) == Some(owner) {
                self.ports.remove(port);
            }
        }
    }

    /// After a write is decided: `owner` holds exactly what `service` holds (nothing when
    /// it is gone). Values another owner holds stay theirs.
    pub fn settle(&mut self, owner: &str, service: Option<&Value>) {
        let (ips, ports) = service.map(|s| self.holdings(s)).unwrap_or_default();
        self.ips
            .retain(|ip, holder| holder != owner || ips.contains(ip));
        self.ports
            .retain(|port, holder| holder != owner || ports.contains(port));
        for ip in ips {
            self.ips.entry(ip).or_insert_with(|| owner.to_string());
        }
        for port in ports {
            self.ports.entry(port).or_insert_with(|| owner.to_string());
        }
    }

    /// The in-range ClusterIPs and node ports a Service's form holds.
    fn holdings(&self, service: &Value) -> (BTreeSet<Ipv4Addr>, BTreeSet<u16>) {
        let spec = &service["spec"];
        let ips = cluster_ips(spec)
            .iter()
            .filter_map(|ip| ip.parse::<Ipv4Addr>().ok())
            .filter(|ip| self.ip_in_range(*ip))
            .collect();
        let ports = node_ports(spec)
            .into_iter()
            .chain(spec["healthCheckNodePort"].as_i64())
            .filter(|port| self.ranges.node_ports.contains(*port))
            .filter_map(|port| u16::try_from(port).ok())
            .collect();
        (ips, ports)
    }

    /// Whether `ip` is allocatable: in the range, neither its network nor its broadcast
    /// address.
    fn ip_in_range(&self, ip: Ipv4Addr) -> bool {
        let cidr = self.ranges.cluster_ips;
        cidr.offset_of(ip)
            .is_some_and(|offset| offset > 0 && u64::from(offset) < cidr.size() - 1)
    }
}

impl Reserving<'_> {
    fn finish(self, result: ApiResult<()>) -> ApiResult<Grant> {
        match result {
            Ok(()) => Ok(self.grant),
            Err(error) => {
                self.book.revert(self.owner, &self.grant);
                Err(error)
            }
        }
    }

    fn invalid(&self, causes: Vec<Cause>) -> ApiError {
        ApiError::invalid("", "Service", self.name, causes)
    }

    fn create(&mut self, service: &mut Value) -> ApiResult<()> {
        let spec = spec_mut(service);
        if type_of(spec) == EXTERNAL_NAME {
            return Ok(());
        }
        reconcile_cluster_ip_fields(spec);
        self.init_ip_families(spec)?;
        self.allocate_cluster_ip(spec)?;
        self.allocate_node_ports(spec, &BTreeSet::new())
    }

    fn update(&mut self, old: &Value, service: &mut Value) -> ApiResult<()> {
        let old_spec = &old["spec"];
        let spec = spec_mut(service);
        let (old_type, new_type) = (type_of(old_spec), type_of(spec).to_string());
        if new_type == EXTERNAL_NAME {
            drop_when_unchanged(spec, old_spec, &["clusterIP", "clusterIPs"]);
            drop_when_unchanged(spec, old_spec, &["ipFamilies", "ipFamilyPolicy"]);
            return Ok(());
        }
        if old_type == EXTERNAL_NAME {
            reconcile_cluster_ip_fields(spec);
            self.init_ip_families(spec)?;
            self.allocate_cluster_ip(spec)?;
            return self.allocate_node_ports(spec, &BTreeSet::new());
        }
        carry_cluster_ips(spec, old_spec);
        reconcile_cluster_ip_fields(spec);
        let (old_primary, new_primary) = (primary_ip(old_spec), primary_ip(spec));
        if let (Some(old_ip), Some(new_ip)) = (&old_primary, &new_primary)
            && old_ip != new_ip
        {
            return Err(self.invalid(vec![Cause::invalid(
                "spec.clusterIPs[0]",
                &json!(new_ip),
                "may not change once set",
            )]));
        }
        if old_primary.is_none() {
            // Stored before it had one (an older server): allocate now.
            self.init_ip_families(spec)?;
            self.allocate_cluster_ip(spec)?;
        }
        for field in ["ipFamilies", "ipFamilyPolicy"] {
            if spec.get(field).is_none()
                && let Some(value) = old_spec.get(field)
            {
                spec[field] = value.clone();
            }
        }
        self.init_ip_families(spec)?;
        if !needs_node_ports(&new_type) && needs_node_ports(old_type) {
            drop_unchanged_node_ports(spec, old_spec);
        }
        if needs_node_ports(old_type) && needs_node_ports(&new_type) {
            carry_node_ports(spec, old_spec);
        }
        if needs_health_check(old_spec) && needs_health_check(spec) {
            carry_field(spec, old_spec, "healthCheckNodePort");
        }
        let held: BTreeSet<i64> = node_ports(old_spec)
            .into_iter()
            .chain(old_spec["healthCheckNodePort"].as_i64())
            .collect();
        self.allocate_node_ports(spec, &held)
    }

    /// upstream's `initIPFamilyFields` on a single-stack IPv4 cluster.
    fn init_ip_families(&mut self, spec: &mut Value) -> ApiResult<()> {
        let headless_selectorless = primary_ip(spec).as_deref() == Some(NONE)
            && spec["selector"].as_object().is_none_or(|s| s.is_empty());
        if spec.get("ipFamilyPolicy").is_none_or(Value::is_null) {
            spec["ipFamilyPolicy"] = json!(if headless_selectorless {
                "RequireDualStack"
            } else {
                "SingleStack"
            });
        }
        let policy = spec["ipFamilyPolicy"].as_str().unwrap_or("").to_string();
        let ips = cluster_ips(spec);
        let mut families: Vec<String> = spec["ipFamilies"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .map(|f| f.as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default();
        let mut causes = Vec::new();
        if policy == "SingleStack" {
            if ips.len() == 2 {
                causes.push(Cause::invalid(
                    "spec.ipFamilyPolicy",
                    &json!(policy),
                    "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
                ));
            }
            if families.len() == 2 {
                causes.push(Cause::invalid(
                    "spec.ipFamilyPolicy",
                    &json!(policy),
                    "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
                ));
            }
        }
        for (index, ip) in ips.iter().enumerate() {
            if ip == NONE {
                break;
            }
            let family = match ip.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(_)) => "IPv4",
                Ok(std::net::IpAddr::V6(_)) => "IPv6",
                Err(_) => {
                    causes.push(Cause::invalid(
                        format!("spec.clusterIPs[{index}]"),
                        &json!(ip),
                        "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                    ));
                    continue;
                }
            };
            if index >= families.len() {
                if family == "IPv4" {
                    families.push(family.into());
                } else {
                    causes.push(string_list_invalid(
                        &format!("spec.clusterIPs[{index}]"),
                        &ips,
                        &format!("{family} is not configured on this cluster"),
                    ));
                }
            }
        }
        if !causes.is_empty() {
            return Err(self.invalid(causes));
        }
        if headless_selectorless {
            if families.is_empty() {
                families.push("IPv4".into());
            }
            if families.len() < 2 && policy != "SingleStack" {
                let other = if families[0] == "IPv4" {
                    "IPv6"
                } else {
                    "IPv4"
                };
                families.push(other.into());
            }
            spec["ipFamilies"] = json!(families);
            return Ok(());
        }
        if policy == "RequireDualStack" {
            causes.push(Cause::invalid(
                "spec.ipFamilyPolicy",
                &json!(policy),
                "this cluster is not configured for dual-stack services",
            ));
        }
        for (index, family) in families.iter().enumerate() {
            if family != "IPv4" {
                causes.push(Cause::invalid(
                    format!("spec.ipFamilies[{index}]"),
                    &json!(family),
                    "not configured on this cluster",
                ));
            }
        }
        if !causes.is_empty() {
            return Err(self.invalid(causes));
        }
        if families.is_empty() {
            families.push("IPv4".into());
        }
        spec["ipFamilies"] = json!(families);
        Ok(())
    }

    fn allocate_cluster_ip(&mut self, spec: &mut Value) -> ApiResult<()> {
        let requested = primary_ip(spec).unwrap_or_default();
        if requested == NONE {
            spec["clusterIP"] = json!(NONE);
            spec["clusterIPs"] = json!([NONE]);
            return Ok(());
        }
        let ip = if requested.is_empty() {
            self.next_ip()?
        } else {
            let shown = cluster_ips(spec);
            let ip = requested.parse::<Ipv4Addr>().ok();
            let refusal = match ip {
                Some(ip) if self.book.ip_holder(ip) == Some(self.owner) => None,
                Some(ip) if self.book.ip_holder(ip).is_some() => {
                    Some("provided IP is already allocated".to_string())
                }
                Some(ip) if self.book.ip_in_range(ip) => None,
                _ => Some(format!(
                    "provided IP is not in the valid range. The range of valid IPs is {}",
                    self.book.ranges.cluster_ips
                )),
            };
            if let Some(reason) = refusal {
                return Err(self.invalid(vec![string_list_invalid(
                    "spec.clusterIPs",
                    &shown,
                    &format!("failed to allocate IP {requested}: {reason}"),
                )]));
            }
            let Some(ip) = ip else {
                return Err(ApiError::internal("requested ClusterIP vanished"));
            };
            if self.book.ip_holder(ip).is_none() {
                self.take_ip(ip);
            }
            ip
        };
        spec["clusterIP"] = json!(ip.to_string());
        spec["clusterIPs"] = json!([ip.to_string()]);
        Ok(())
    }

    fn take_ip(&mut self, ip: Ipv4Addr) {
        self.book.ips.insert(ip, self.owner.to_string());
        self.grant.ips.push(ip);
    }

    /// The first free address of the upper band, then of the lower band.
    fn next_ip(&mut self) -> ApiResult<Ipv4Addr> {
        let cidr = self.book.ranges.cluster_ips;
        // Usable offsets are 1..=size-2 (no network, no broadcast address).
        let usable = cidr.size().saturating_sub(2);
        let band = range_offset(usable, 16, 256, 16);
        let order = (band..usable).chain(0..band);
        for index in order {
            let Ok(offset) = u32::try_from(index + 1) else {
                continue;
            };
            let ip = cidr.address(offset);
            if self.book.ip_holder(ip).is_none() {
                self.take_ip(ip);
                return Ok(ip);
            }
        }
        Err(ApiError::internal(
            "failed to allocate a serviceIP: range is full",
        ))
    }

    /// upstream's `initNodePorts`/`updateNodePorts`: requested ports reserved, missing ones
    /// allocated when the type needs them; ports of one service port number are shared
    /// across protocols. `held` are ports the Service already holds.
    fn allocate_node_ports(&mut self, spec: &mut Value, held: &BTreeSet<i64>) -> ApiResult<()> {
        let service_type = type_of(spec).to_string();
        let allocate_missing = needs_node_ports(&service_type)
            && !(service_type == "LoadBalancer"
                && spec["allocateLoadBalancerNodePorts"].as_bool() == Some(false));
        let count = spec["ports"].as_array().map_or(0, Vec::len);
        if !needs_node_ports(&service_type) {
            let causes: Vec<Cause> = (0..count)
                .filter(|i| spec["ports"][*i]["nodePort"].as_i64().unwrap_or_default() != 0)
                .map(|i| {
                    Cause::forbidden(
                        format!("spec.ports[{i}].nodePort"),
                        format!("may not be used when `type` is '{service_type}'"),
                    )
                })
                .collect();
            if !causes.is_empty() {
                return Err(self.invalid(causes));
            }
        }
        let mut by_service_port: BTreeMap<i64, i64> = BTreeMap::new();
        for index in 0..count {
            let port = &spec["ports"][index];
            let service_port = port["port"].as_i64().unwrap_or_default();
            let requested = port["nodePort"].as_i64().unwrap_or_default();
            if requested == 0 && !allocate_missing {
                continue;
            }
            let node_port = if requested != 0 {
                if by_service_port.get(&service_port) != Some(&requested) {
                    self.reserve_port(requested, held, &format!("spec.ports[{index}].nodePort"))?;
                }
                requested
            } else if let Some(shared) = by_service_port.get(&service_port) {
                *shared
            } else {
                i64::from(self.next_port("failed to allocate a nodePort")?)
            };
            by_service_port.entry(service_port).or_insert(node_port);
            spec["ports"][index]["nodePort"] = json!(node_port);
        }
        if needs_health_check(spec) {
            let requested = spec["healthCheckNodePort"].as_i64().unwrap_or_default();
            if requested != 0 {
                if !held.contains(&requested) {
                    self.reserve_port(requested, held, "spec.healthCheckNodePort")
                        .map_err(|_| {
                            ApiError::internal(format!(
                                "failed to allocate requested HealthCheck NodePort {requested}: provided port is already allocated"
                            ))
                        })?;
                }
            } else {
                let port = self.next_port("failed to allocate a HealthCheck NodePort 0")?;
                spec["healthCheckNodePort"] = json!(port);
            }
        }
        Ok(())
    }

    fn reserve_port(&mut self, port: i64, held: &BTreeSet<i64>, field: &str) -> ApiResult<()> {
        let range = self.book.ranges.node_ports;
        let reason = match u16::try_from(port).ok().filter(|_| range.contains(port)) {
            None => format!(
                "provided port is not in the valid range. The range of valid ports is {range}"
            ),
            Some(port) => match self.book.port_holder(port) {
                None => {
                    self.take_port(port);
                    return Ok(());
                }
                Some(holder) if holder == self.owner && held.contains(&i64::from(port)) => {
                    return Ok(());
                }
                Some(_) => "provided port is already allocated".to_string(),
            },
        };
        Err(self.invalid(vec![Cause::invalid(field, &json!(port), reason)]))
    }

    fn take_port(&mut self, port: u16) {
        self.book.ports.insert(port, self.owner.to_string());
        self.grant.ports.push(port);
    }

    fn next_port(&mut self, context: &str) -> ApiResult<u16> {
        let range = self.book.ranges.node_ports;
        let size = u64::from(range.size);
        let band = range_offset(size, 16, 128, 32);
        for index in (band..size).chain(0..band) {
            let Some(port) = u16::try_from(index)
                .ok()
                .and_then(|i| range.base.checked_add(i))
            else {
                continue;
            };
            if self.book.port_holder(port).is_none() {
                self.take_port(port);
                return Ok(port);
            }
        }
        Err(ApiError::internal(format!("{context}: range is full")))
    }
}

/// upstream's `calculateRangeOffset`: the size of the lower band kept for static requests.
fn range_offset(size: u64, min: u64, max: u64, step: u64) -> u64 {
    if size < min {
        return 0;
    }
    (size / step).clamp(min, max)
}

/// A field error whose value is a list of strings, as Go prints `[]string{…}`.
fn string_list_invalid(field: &str, values: &[String], detail: &str) -> Cause {
    let shown = values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    Cause {
        reason: "FieldValueInvalid",
        field: field.to_string(),
        message: format!("Invalid value: []string{{{shown}}}: {detail}"),
    }
}

fn spec_mut(service: &mut Value) -> &mut Value {
    if !service["spec"].is_object() {
        service["spec"] = json!({});
    }
    &mut service["spec"]
}

fn type_of(spec: &Value) -> &str {
    spec["type"].as_str().unwrap_or("ClusterIP")
}

fn needs_node_ports(service_type: &str) -> bool {
    matches!(service_type, "NodePort" | "LoadBalancer")
}

fn needs_health_check(spec: &Value) -> bool {
    type_of(spec) == "LoadBalancer" && spec["externalTrafficPolicy"].as_str() == Some("Local")
}

/// `clusterIPs`, or `[clusterIP]` when only that is set.
fn cluster_ips(spec: &Value) -> Vec<String> {
    let listed: Vec<String> = spec["clusterIPs"]
        .as_array()
        .map(|ips| {
            ips.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if !listed.is_empty() {
        return listed;
    }
    spec["clusterIP"]
        .as_str()
        .filter(|ip| !ip.is_empty())
        .map(|ip| vec![ip.to_string()])
        .unwrap_or_default()
}

fn primary_ip(spec: &Value) -> Option<String> {
    spec["clusterIP"]
        .as_str()
        .filter(|ip| !ip.is_empty())
        .map(str::to_string)
        .or_else(|| cluster_ips(spec).into_iter().next())
}

/// upstream's defaulting between the two fields: either fills the other.
fn reconcile_cluster_ip_fields(spec: &mut Value) {
    let primary = spec["clusterIP"].as_str().unwrap_or_default().to_string();
    let listed = cluster_ips(spec);
    if primary.is_empty() {
        if let Some(first) = listed.first() {
            spec["clusterIP"] = json!(first);
        }
    } else if spec["clusterIPs"].as_array().is_none_or(Vec::is_empty) {
        spec["clusterIPs"] = json!([primary]);
    }
}

/// Node ports of the Service's ports (non-zero).
fn node_ports(spec: &Value) -> Vec<i64> {
    spec["ports"]
        .as_array()
        .map(|ports| {
            ports
                .iter()
                .filter_map(|p| p["nodePort"].as_i64())
                .filter(|p| *p != 0)
                .collect()
        })
        .unwrap_or_default()
}

fn carry_field(spec: &mut Value, old_spec: &Value, field: &str) {
    let unset = spec
        .get(field)
        .is_none_or(|v| v.is_null() || v.as_i64() == Some(0) || v.as_str() == Some(""));
    if unset && let Some(value) = old_spec.get(field) {
        spec[field] = value.clone();
    }
}

/// An update that leaves out the ClusterIPs keeps them (`kubectl replace` of a manifest).
fn carry_cluster_ips(spec: &mut Value, old_spec: &Value) {
    if primary_ip(spec).is_none() {
        carry_field(spec, old_spec, "clusterIP");
        carry_field(spec, old_spec, "clusterIPs");
    }
}

/// upstream's `patchAllocatedValues` for node ports: a port left at 0 takes the node port
/// its name had, unless another port of the new form uses it.
fn carry_node_ports(spec: &mut Value, old_spec: &Value) {
    let old_used: BTreeSet<i64> = node_ports(old_spec).into_iter().collect();
    let used: BTreeSet<i64> = node_ports(spec)
        .into_iter()
        .filter(|p| old_used.contains(p))
        .collect();
    let by_name: BTreeMap<String, i64> = old_spec["ports"]
        .as_array()
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    (
                        p["name"].as_str().unwrap_or_default().to_string(),
                        p["nodePort"].as_i64().unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let Some(ports) = spec["ports"].as_array_mut() else {
        return;
    };
    for port in ports {
        if port["nodePort"].as_i64().unwrap_or_default() != 0 {
            continue;
        }
        let name = port["name"].as_str().unwrap_or_default();
        if let Some(old) = by_name.get(name).filter(|p| **p != 0 && !used.contains(p)) {
            port["nodePort"] = json!(old);
        }
    }
}

/// upstream's `dropTypeDependentFields`: fields the old type needed are dropped when the
/// update left them as they were.
fn drop_when_unchanged(spec: &mut Value, old_spec: &Value, fields: &[&str]) {
    for field in fields {
        if spec.get(*field) == old_spec.get(*field)
            && let Some(map) = spec.as_object_mut()
        {
            map.remove(*field);
        }
    }
}

fn drop_unchanged_node_ports(spec: &mut Value, old_spec: &Value) {
    let old = node_ports(old_spec);
    if node_ports(spec) != old {
        return;
    }
    if let Some(ports) = spec["ports"].as_array_mut() {
        for port in ports {
            if let Some(port) = port.as_object_mut() {
                port.remove("nodePort");
            }
        }
    }
    if spec["healthCheckNodePort"] == old_spec["healthCheckNodePort"]
        && let Some(map) = spec.as_object_mut()
    {
        map.remove("healthCheckNodePort");
    }
}

#[cfg(test)]
#[path = "service_allocation_tests.rs"]
mod tests;
