//! The embedded platform's simulated cluster autoscaler for ProvisioningRequests
//! (`autoscaling.x-k8s.io/v1`) of the classes `check-capacity.autoscaling.x-k8s.io` and
//! `best-effort-atomic-scale-up.autoscaling.x-k8s.io`: a request whose pods (read from its
//! PodTemplates) all fit one autoscaled pool ([`crate::topology::AutoscaledPool`]) is
//! `Accepted`, gets idle registered nodes of that pool at once or, when they do not suffice,
//! standby nodes registered after the pool's `provisioningDelay`, all booked for it, and is
//! then `Provisioned`. Booked nodes stay while their request exists; a node of the pool
//! that is neither booked nor running pods for [`IDLE_REMOVAL_DELAY`] is removed again,
//! except the pool's first `min` nodes. A request nothing fits, or that needs more nodes than the
//! pool has left, stays `Provisioned=False` (`CapacityIsNotFound`) and is tried again.
//!
//! Pure: what the cluster holds is handed in, the time is an argument, what to do is handed
//! back; what it remembers between steps (first sight of requests, bookings, idle times) is
//! [`Autoscaler`]'s own. Knows nothing about Kueue: pods consuming a request reach its nodes
//! through their node selector (the pool's labels, usually a ResourceFlavor's).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::{Value, json};
use tessera_model::{Quantity, conditions, json as json_read, time};

use crate::topology::{AutoscaledPool, NodeSpec};

/// How long a node of an autoscaled pool stays idle (no booking, no running pod) before it is
/// removed.
pub const IDLE_REMOVAL_DELAY: Duration = Duration::from_secs(60);
/// The classes it provisions.
pub const CLASSES: [&str; 2] = [
    "check-capacity.autoscaling.x-k8s.io",
    "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
];

/// What the cluster holds, for one step.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// ProvisioningRequests.
    pub requests: &'a [Value],
    /// PodTemplates.
    pub pod_templates: &'a [Value],
    /// The names of the Nodes that exist.
    pub nodes: &'a BTreeSet<String>,
    /// The nodes running (or about to run) a pod that has not finished.
    pub busy: &'a BTreeSet<String>,
}

/// One thing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Register this node twin.
    Register(Box<NodeSpec>),
    /// Remove this Node.
    Remove(String),
    /// Set a request's (namespace, name) `status.conditions`.
    RequestConditions(String, String, Vec<Value>),
}

/// The autoscaler: its pools and what it remembers.
#[derive(Debug, Clone)]
pub struct Autoscaler {
    pools: Vec<AutoscaledPool>,
    /// When each request (namespace/name) was first seen.
    seen: BTreeMap<String, SystemTime>,
    /// Each booked node's request.
    booked: BTreeMap<String, String>,
    /// Since when each node has been idle.
    idle_since: BTreeMap<String, SystemTime>,
}

fn list<'v>(value: &'v Value, pointer: &str) -> &'v [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn key(object: &Value) -> String {
    format!(
        "{}/{}",
        json_read::text(object, "/metadata/namespace"),
        json_read::text(object, "/metadata/name")
    )
}

/// A pod set of a request: what one pod needs (milli-units) and its node selector,
/// tolerations, and how many pods.
struct Demand {
    requests: BTreeMap<String, i128>,
    selector: BTreeMap<String, String>,
    tolerations: Vec<Value>,
    count: i64,
}

fn milli(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, i128> {
    list.into_iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.clone(), q.0.parse::<Quantity>().ok()?.milli_value())))
        .collect()
}

/// The request's pod sets, or `None` while a PodTemplate is missing.
fn demands(request: &Value, templates: &[Value]) -> Option<Vec<Demand>> {
    let namespace = json_read::text(request, "/metadata/namespace");
    list(request, "/spec/podSets")
        .iter()
        .map(|pod_set| {
            let name = json_read::text(pod_set, "/podTemplateRef/name");
            let template = templates.iter().find(|t| {
                json_read::text(t, "/metadata/namespace") == namespace
                    && json_read::text(t, "/metadata/name") == name
            })?;
            let spec: PodSpec =
                serde_json::from_value(template.pointer("/template/spec")?.clone()).ok()?;
            let mut requests = tessera_model::pod_requests::pod_requests(&spec, &milli);
            requests.insert("pods".into(), 1000);
            Some(Demand {
                requests,
                selector: spec.node_selector.clone().unwrap_or_default(),
                tolerations: spec
                    .tolerations
                    .iter()
                    .flatten()
                    .filter_map(|t| serde_json::to_value(t).ok())
                    .collect(),
                count: json_read::int_or_zero(pod_set, "/count"),
            })
        })
        .collect()
}

/// How many of the demand's pods one node of the pool holds (0: none fits).
fn pods_per_node(node: &NodeSpec, demand: &Demand) -> i64 {
    let selected = demand
        .selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    let tolerated = node
        .taints
        .iter()
        .filter(|t| t.effect != "PreferNoSchedule")
        .all(|taint| {
            demand.tolerations.iter().any(|t| {
                let key_matches =
                    t["key"] == taint.key.as_str() || t.get("key").is_none_or(|k| k == "");
                let value_matches = t["operator"] == "Exists" || t["value"] == taint.value.as_str();
                let effect_matches = t
                    .get("effect")
                    .is_none_or(|e| e == "" || e == taint.effect.as_str());
                key_matches && value_matches && effect_matches
            })
        });
    if !selected || !tolerated {
        return 0;
    }
    demand
        .requests
        .iter()
        .filter(|(_, need)| **need > 0)
        .map(|(resource, need)| {
            let have = node
                .allocatable
                .get(resource)
                .map_or(0, Quantity::milli_value);
            i64::try_from(have / need).unwrap_or(i64::MAX)
        })
        .min()
        .unwrap_or(i64::MAX)
}

/// The nodes of `pool` the demands need (each pod set on nodes of its own), or `None` when a
/// pod does not fit a node of it.
fn nodes_needed(pool: &AutoscaledPool, demands: &[Demand]) -> Option<usize> {
    let node = pool.nodes.first()?;
    demands.iter().try_fold(0usize, |total, demand| {
        let per_node = pods_per_node(node, demand);
        (per_node > 0).then(|| {
            let count = demand.count.max(0);
            total + usize::try_from((count + per_node - 1) / per_node).unwrap_or(usize::MAX)
        })
    })
}

impl Autoscaler {
    /// An autoscaler of these pools, remembering nothing yet.
    pub fn new(pools: Vec<AutoscaledPool>) -> Autoscaler {
        Autoscaler {
            pools,
            seen: BTreeMap::new(),
            booked: BTreeMap::new(),
            idle_since: BTreeMap::new(),
        }
    }

    /// The nodes that stand by at start (not registered).
    pub fn standby(&self) -> Vec<NodeSpec> {
        self.pools
            .iter()
            .flat_map(|p| p.nodes[p.initial.min(p.nodes.len())..].iter().cloned())
            .collect()
    }

    /// One step at `now`: requests provisioned, nodes registered and removed.
    pub fn step(&mut self, observed: &Observed<'_>, now: SystemTime) -> Vec<Action> {
        let live: BTreeSet<String> = observed.requests.iter().map(key).collect();
        self.booked.retain(|_, request| live.contains(request));
        self.seen.retain(|request, _| live.contains(request));
        let mut actions = Vec::new();
        for request in observed.requests {
            let class = json_read::text(request, "/spec/provisioningClassName");
            if !CLASSES.contains(&class) || conditions::is_true(request, "Provisioned") {
                continue;
            }
            actions.extend(self.provision(request, observed, now));
        }
        actions.extend(self.scale_down(observed, now));
        actions
    }

    /// The actions for one request not provisioned yet.
    fn provision(
        &mut self,
        request: &Value,
        observed: &Observed<'_>,
        now: SystemTime,
    ) -> Vec<Action> {
        let request_key = key(request);
        let first_seen = *self.seen.entry(request_key.clone()).or_insert(now);
        let Some(demands) = demands(request, observed.pod_templates) else {
            return Vec::new();
        };
        let fitting = self.pools.iter().find_map(|pool| {
            let needed = nodes_needed(pool, &demands)?;
            let free: Vec<&NodeSpec> = pool
                .nodes
                .iter()
                .filter(|n| !self.booked.contains_key(&n.name) && !observed.busy.contains(&n.name))
                .collect();
            let (idle, standby): (Vec<&NodeSpec>, Vec<&NodeSpec>) = free
                .into_iter()
                .partition(|n| observed.nodes.contains(&n.name));
            (idle.len() + standby.len() >= needed).then_some((pool, needed, idle, standby))
        });
        let Some((pool, needed, idle, standby)) = fitting else {
            return status(
                request,
                &[
                    (
                        "Accepted",
                        "True",
                        "Accepted",
                        "ProvisioningRequest is accepted",
                    ),
                    (
                        "Provisioned",
                        "False",
                        "CapacityIsNotFound",
                        "Capacity is not found, CA will try to find it later.",
                    ),
                ],
                now,
            );
        };
        let added: Vec<&NodeSpec> = standby
            .into_iter()
            .take(needed.saturating_sub(idle.len()))
            .collect();
        let delay = pool.autoscaling.delay();
        if !added.is_empty() && now < first_seen + delay {
            let message = format!(
                "Provisioning {} node(s) in pool {} (ready {}s after acceptance)",
                added.len(),
                pool.name,
                delay.as_secs()
            );
            return status(
                request,
                &[
                    (
                        "Accepted",
                        "True",
                        "Accepted",
                        "ProvisioningRequest is accepted",
                    ),
                    ("Provisioned", "False", "Provisioning", &message),
                ],
                now,
            );
        }
        let mut actions: Vec<Action> = added
            .iter()
            .map(|n| Action::Register(Box::new((*n).clone())))
            .collect();
        for node in idle.iter().take(needed).chain(added.iter()) {
            self.booked.insert(node.name.clone(), request_key.clone());
            self.idle_since.remove(&node.name);
        }
        actions.extend(status(
            request,
            &[
                (
                    "Accepted",
                    "True",
                    "Accepted",
                    "ProvisioningRequest is accepted",
                ),
                (
                    "Provisioned",
                    "True",
                    "CapacityIsProvisioned",
                    "Capacity is found in the cluster",
                ),
            ],
            now,
        ));
        actions
    }

    /// Nodes of autoscaled pools idle for [`IDLE_REMOVAL_DELAY`] removed; the first `min`
    /// nodes of each pool are never removed.
    fn scale_down(&mut self, observed: &Observed<'_>, now: SystemTime) -> Vec<Action> {
        let mut actions = Vec::new();
        for pool in &self.pools {
            let removable = pool
                .nodes
                .iter()
                .skip(pool.autoscaling.min as usize)
                .filter(|n| observed.nodes.contains(&n.name));
            for node in removable {
                let idle =
                    !self.booked.contains_key(&node.name) && !observed.busy.contains(&node.name);
                if !idle {
                    self.idle_since.remove(&node.name);
                    continue;
                }
                let since = *self.idle_since.entry(node.name.clone()).or_insert(now);
                if now >= since + IDLE_REMOVAL_DELAY {
                    self.idle_since.remove(&node.name);
                    actions.push(Action::Remove(node.name.clone()));
                }
            }
        }
        actions
    }
}

/// The request's conditions set to `wanted`; nothing when they already are.
fn status(request: &Value, wanted: &[(&str, &str, &str, &str)], now: SystemTime) -> Vec<Action> {
    let mut list = list(request, "/status/conditions").to_vec();
    let stamp = time::timestamp(now);
    let mut changed = false;
    for (kind, status, reason, message) in wanted {
        changed |= conditions::set(&mut list, kind, status, reason, message, &stamp);
    }
    if !changed {
        return Vec::new();
    }
    let generation = request
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    for condition in &mut list {
        condition["observedGeneration"] = generation.clone();
    }
    vec![Action::RequestConditions(
        json_read::text(request, "/metadata/namespace").to_owned(),
        json_read::text(request, "/metadata/name").to_owned(),
        list,
    )]
}

#[cfg(test)]
#[path = "autoscaler_tests.rs"]
mod tests;
