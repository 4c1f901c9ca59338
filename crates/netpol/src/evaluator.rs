//! The indexed, incremental evaluator: namespaces, pods and compiled policies, with the
//! policies that select each pod precomputed and kept in evaluation order. A change to one
//! policy re-examines only the pods of the namespaces its subject can reach and updates only
//! the pods it selects or selected; a change to a pod or a namespace re-examines only that
//! pod's or namespace's memberships. Verdicts walk the tiers in upstream's order: Admin →
//! NetworkPolicy → Baseline → allow, for the source's egress and the destination's ingress.
//!
//! Knows nothing of where objects come from (`objects.rs`) or how tables are printed.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use crate::compile::{Action, Other, Policy};
use crate::model::{
    Direction, EndpointName, Labels, PodInfo, PolicyRef, Protocol, Tier, namespace_labels,
};

/// A pod's handle in an evaluator (stable until the pod is removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodId(pub(crate) u32);

/// A policy's handle in an evaluator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyId(pub(crate) u32);

/// One end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// A known pod.
    Pod(PodId),
    /// An address outside the known pods.
    Address(IpAddr),
}

/// The rule that decided, by index in its direction's list (and name, if it has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    /// Index in the policy's `ingress` or `egress` list.
    pub index: usize,
    /// The rule's name.
    pub name: Option<String>,
}

/// What one direction decided, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether that direction lets the connection through.
    pub allowed: bool,
    /// The tier that decided.
    pub tier: Tier,
    /// The policy that decided (for an isolated pod that no rule allows: the first policy
    /// isolating it); `None` for the default.
    pub policy: Option<PolicyRef>,
    /// The rule that decided; `None` when no rule matched.
    pub rule: Option<RuleRef>,
}

impl Decision {
    fn default_allow() -> Decision {
        Decision {
            allowed: true,
            tier: Tier::Default,
            policy: None,
            rule: None,
        }
    }
}

/// A connection's verdict: both directions, and the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the connection is allowed (egress AND ingress).
    pub allowed: bool,
    /// The source's egress decision.
    pub egress: Decision,
    /// The destination's ingress decision.
    pub ingress: Decision,
}

impl Verdict {
    /// The decision that settles the verdict: a denying direction (egress first), else the
    /// ingress decision unless only the egress one came from a policy.
    pub fn decided_by(&self) -> (Direction, &Decision) {
        if !self.egress.allowed {
            (Direction::Egress, &self.egress)
        } else if !self.ingress.allowed {
            (Direction::Ingress, &self.ingress)
        } else if self.ingress.tier == Tier::Default && self.egress.tier != Tier::Default {
            (Direction::Egress, &self.egress)
        } else {
            (Direction::Ingress, &self.ingress)
        }
    }
}

/// What a change touched: the pods whose set of selecting policies changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touched {
    /// Those pods, sorted.
    pub pods: Vec<PodId>,
}

struct PolicyEntry {
    policy: Policy,
    subjects: BTreeSet<PodId>,
}

/// The evaluator.
#[derive(Default)]
pub struct Evaluator {
    namespaces: HashMap<String, Labels>,
    pods: Vec<Option<PodInfo>>,
    free_pods: Vec<u32>,
    pod_ids: HashMap<(String, String), PodId>,
    pods_by_namespace: HashMap<String, BTreeSet<PodId>>,
    /// Per pod: the policies selecting it, in evaluation order.
    selected: Vec<Vec<PolicyId>>,
    policies: Vec<Option<PolicyEntry>>,
    free_policies: Vec<u32>,
    policy_ids: HashMap<PolicyRef, PolicyId>,
    policies_by_namespace: HashMap<String, BTreeSet<PolicyId>>,
    cluster_policies: BTreeSet<PolicyId>,
}

impl Evaluator {
    /// An empty evaluator.
    pub fn new() -> Evaluator {
        Evaluator::default()
    }

    /// A pod's handle.
    pub fn pod_id(&self, namespace: &str, name: &str) -> Option<PodId> {
        self.pod_ids
            .get(&(namespace.to_string(), name.to_string()))
            .copied()
    }

    /// The endpoint a tool names: a known pod, or any address.
    pub fn endpoint(&self, name: &EndpointName) -> Option<Endpoint> {
        match name {
            EndpointName::Pod { namespace, name } => {
                self.pod_id(namespace, name).map(Endpoint::Pod)
            }
            EndpointName::Address(ip) => Some(Endpoint::Address(*ip)),
        }
    }

    /// A pod.
    pub fn pod(&self, id: PodId) -> Option<&PodInfo> {
        self.pods.get(id.0 as usize).and_then(Option::as_ref)
    }

    /// Every pod, sorted by namespace and name.
    pub fn pod_ids(&self) -> Vec<PodId> {
        let mut ids: Vec<(&str, &str, PodId)> = self
            .pods
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let p = p.as_ref()?;
                Some((
                    p.namespace.as_str(),
                    p.name.as_str(),
                    PodId(u32::try_from(i).ok()?),
                ))
            })
            .collect();
        ids.sort_unstable();
        ids.into_iter().map(|(_, _, id)| id).collect()
    }

    /// A policy.
    pub fn policy(&self, id: PolicyId) -> Option<&Policy> {
        self.entry(id).map(|e| &e.policy)
    }

    /// The policies selecting a pod, in evaluation order.
    pub fn selecting(&self, pod: PodId) -> &[PolicyId] {
        self.selected.get(pod.0 as usize).map_or(&[], Vec::as_slice)
    }

    /// The pods a policy selects.
    pub fn subjects(&self, policy: &PolicyRef) -> Vec<PodId> {
        self.policy_ids
            .get(policy)
            .and_then(|id| self.entry(*id))
            .map(|e| e.subjects.iter().copied().collect())
            .unwrap_or_default()
    }

    /// A namespace's labels (the automatic name label only, if it has no Namespace object).
    pub fn namespace_labels(&self, namespace: &str) -> Labels {
        self.labels_or_default(namespace).into_owned()
    }

    pub(crate) fn labels_of(&self, namespace: &str) -> Option<&Labels> {
        self.namespaces.get(namespace)
    }

    fn entry(&self, id: PolicyId) -> Option<&PolicyEntry> {
        self.policies.get(id.0 as usize).and_then(Option::as_ref)
    }

    /// Sets a namespace's labels (the automatic name label is added); re-examines the
    /// cluster-wide policies' selection of its pods.
    pub fn upsert_namespace(&mut self, name: &str, labels: &Labels) -> Touched {
        let labels = namespace_labels(name, Some(labels));
        if self.namespaces.get(name) == Some(&labels) {
            return Touched::default();
        }
        self.namespaces.insert(name.to_string(), labels);
        self.reselect_namespace(name)
    }

    /// Forgets a namespace's labels (its pods keep only the automatic one).
    pub fn remove_namespace(&mut self, name: &str) -> Touched {
        let default = namespace_labels(name, None);
        if self.namespaces.get(name).is_none_or(|l| *l == default) {
            return Touched::default();
        }
        self.namespaces.insert(name.to_string(), default);
        self.reselect_namespace(name)
    }

    fn reselect_namespace(&mut self, name: &str) -> Touched {
        let pods: Vec<PodId> = self
            .pods_by_namespace
            .get(name)
            .map(|p| p.iter().copied().collect())
            .unwrap_or_default();
        let cluster: Vec<PolicyId> = self.cluster_policies.iter().copied().collect();
        let mut touched = Vec::new();
        for pod in pods {
            let mut changed = false;
            for &policy in &cluster {
                changed |= self.refresh_membership(pod, policy);
            }
            if changed {
                touched.push(pod);
            }
        }
        Touched { pods: touched }
    }

    /// Adds or replaces a pod; re-examines which policies select it.
    pub fn upsert_pod(&mut self, pod: PodInfo) -> PodId {
        let key = (pod.namespace.clone(), pod.name.clone());
        let id = match self.pod_ids.get(&key).copied() {
            Some(id) => {
                self.detach_pod(id);
                id
            }
            None => {
                let id = match self.free_pods.pop() {
                    Some(slot) => PodId(slot),
                    None => {
                        self.pods.push(None);
                        self.selected.push(Vec::new());
                        PodId(u32::try_from(self.pods.len() - 1).unwrap_or(u32::MAX))
                    }
                };
                self.pod_ids.insert(key, id);
                id
            }
        };
        self.pods_by_namespace
            .entry(pod.namespace.clone())
            .or_default()
            .insert(id);
        if !self.namespaces.contains_key(&pod.namespace) {
            let labels = namespace_labels(&pod.namespace, None);
            self.namespaces.insert(pod.namespace.clone(), labels);
        }
        let candidates: Vec<PolicyId> = self
            .policies_by_namespace
            .get(&pod.namespace)
            .into_iter()
            .flatten()
            .chain(self.cluster_policies.iter())
            .copied()
            .collect();
        self.pods[id.0 as usize] = Some(pod);
        for policy in candidates {
            self.refresh_membership(id, policy);
        }
        id
    }

    /// Removes a pod.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) -> Option<PodId> {
        let id = self
            .pod_ids
            .remove(&(namespace.to_string(), name.to_string()))?;
        self.detach_pod(id);
        self.pods[id.0 as usize] = None;
        if let Some(set) = self.pods_by_namespace.get_mut(namespace) {
            set.remove(&id);
        }
        self.free_pods.push(id.0);
        Some(id)
    }

    fn detach_pod(&mut self, id: PodId) {
        let policies = std::mem::take(&mut self.selected[id.0 as usize]);
        for policy in policies {
            if let Some(Some(entry)) = self.policies.get_mut(policy.0 as usize) {
                entry.subjects.remove(&id);
            }
        }
    }

    /// Whether `policy` selects `pod` now; fixes both indexes; returns whether it changed.
    fn refresh_membership(&mut self, pod: PodId, policy: PolicyId) -> bool {
        let Some(info) = self.pod(pod) else {
            return false;
        };
        let Some(entry) = self.entry(policy) else {
            return false;
        };
        let ns_labels = self.labels_or_default(&info.namespace);
        let selects = entry.policy.subject.contains(info, &ns_labels);
        let was = entry.subjects.contains(&pod);
        if selects == was {
            return false;
        }
        // Where the policy sits in the pod's list, in evaluation order (borrowed keys, no
        // allocation: the lookups end before the lists change).
        let position = {
            let key = entry.policy.order_key();
            self.selected[pod.0 as usize].binary_search_by(|probe| {
                self.entry(*probe)
                    .map(|e| e.policy.order_key())
                    .cmp(&Some(key))
            })
        };
        let list = &mut self.selected[pod.0 as usize];
        let Some(Some(entry)) = self.policies.get_mut(policy.0 as usize) else {
            return false;
        };
        if selects {
            entry.subjects.insert(pod);
            if let Err(at) = position {
                list.insert(at, policy);
            }
        } else {
            entry.subjects.remove(&pod);
            if let Ok(at) = position {
                list.remove(at);
            }
        }
        true
    }

    fn labels_or_default(&self, namespace: &str) -> Cow<'_, Labels> {
        match self.namespaces.get(namespace) {
            Some(labels) => Cow::Borrowed(labels),
            None => Cow::Owned(namespace_labels(namespace, None)),
        }
    }

    /// Adds or replaces a policy; returns the pods whose selecting policies changed (those
    /// it selected before or selects now, and nothing else).
    pub fn upsert_policy(&mut self, policy: Policy) -> Touched {
        let mut touched: BTreeSet<PodId> = BTreeSet::new();
        if let Some(old) = self.policy_ids.get(&policy.id).copied() {
            touched.extend(self.detach_policy(old));
        }
        let id = match self.policy_ids.get(&policy.id) {
            Some(id) => *id,
            None => {
                let id = match self.free_policies.pop() {
                    Some(slot) => PolicyId(slot),
                    None => {
                        self.policies.push(None);
                        PolicyId(u32::try_from(self.policies.len() - 1).unwrap_or(u32::MAX))
                    }
                };
                self.policy_ids.insert(policy.id.clone(), id);
                id
            }
        };
        match &policy.id.namespace {
            Some(ns) => {
                self.policies_by_namespace
                    .entry(ns.clone())
                    .or_default()
                    .insert(id);
            }
            None => {
                self.cluster_policies.insert(id);
            }
        }
        let candidates = self.candidates(&policy);
        self.policies[id.0 as usize] = Some(PolicyEntry {
            policy,
            subjects: BTreeSet::new(),
        });
        for pod in candidates {
            if self.refresh_membership(pod, id) {
                // A pod both selected before and now had its order key possibly changed;
                // it is touched either way.
                touched.insert(pod);
            }
        }
        Touched {
            pods: touched.into_iter().collect(),
        }
    }

    /// Removes a policy; returns the pods it selected.
    pub fn remove_policy(&mut self, policy: &PolicyRef) -> Touched {
        let Some(id) = self.policy_ids.remove(policy) else {
            return Touched::default();
        };
        let pods = self.detach_policy(id);
        self.policies[id.0 as usize] = None;
        match &policy.namespace {
            Some(ns) => {
                if let Some(set) = self.policies_by_namespace.get_mut(ns) {
                    set.remove(&id);
                }
            }
            None => {
                self.cluster_policies.remove(&id);
            }
        }
        self.free_policies.push(id.0);
        Touched { pods }
    }

    /// Takes a policy off every pod it selects (the entry stays); returns those pods.
    fn detach_policy(&mut self, id: PolicyId) -> Vec<PodId> {
        let Some(Some(entry)) = self.policies.get_mut(id.0 as usize) else {
            return Vec::new();
        };
        let pods: Vec<PodId> = std::mem::take(&mut entry.subjects).into_iter().collect();
        for pod in &pods {
            if let Some(list) = self.selected.get_mut(pod.0 as usize) {
                list.retain(|p| *p != id);
            }
        }
        pods
    }

    /// The pods a policy could select: those of its namespace, or of every namespace its
    /// subject's namespace selector selects.
    fn candidates(&self, policy: &Policy) -> Vec<PodId> {
        let mut pods = Vec::new();
        for (namespace, set) in &self.pods_by_namespace {
            let labels = self.labels_or_default(namespace);
            if policy.subject.namespaces.matches(namespace, &labels) {
                pods.extend(set.iter().copied());
            }
        }
        pods
    }

    /// The verdict on a connection from `from` to `to` on `port`/`protocol`.
    pub fn verdict(&self, from: Endpoint, to: Endpoint, port: u16, protocol: Protocol) -> Verdict {
        let destination = match to {
            Endpoint::Pod(id) => self.pod(id),
            Endpoint::Address(_) => None,
        };
        let egress = match (from, self.as_other(to)) {
            (Endpoint::Pod(id), Some(other)) => {
                self.decide(id, Direction::Egress, other, port, protocol, destination)
            }
            _ => Decision::default_allow(),
        };
        let ingress = match (to, self.as_other(from)) {
            (Endpoint::Pod(id), Some(other)) => {
                self.decide(id, Direction::Ingress, other, port, protocol, destination)
            }
            _ => Decision::default_allow(),
        };
        Verdict {
            allowed: egress.allowed && ingress.allowed,
            egress,
            ingress,
        }
    }

    fn as_other(&self, endpoint: Endpoint) -> Option<Other<'_>> {
        match endpoint {
            Endpoint::Pod(id) => {
                let pod = self.pod(id)?;
                Some(Other::Pod(pod, self.namespaces.get(&pod.namespace)?))
            }
            Endpoint::Address(ip) => Some(Other::Address(ip)),
        }
    }

    /// One direction's decision for the pod `subject`, whose peer is `other`.
    pub(crate) fn decide(
        &self,
        subject: PodId,
        direction: Direction,
        other: Other<'_>,
        port: u16,
        protocol: Protocol,
        destination: Option<&PodInfo>,
    ) -> Decision {
        let mut skip_tier: Option<Tier> = None;
        let mut isolating: Option<&PolicyRef> = None;
        let mut current_tier = Tier::Admin;
        for &id in self.selecting(subject) {
            let Some(policy) = self.policy(id) else {
                continue;
            };
            let Some(rules) = policy.rules(direction) else {
                continue;
            };
            if policy.tier != current_tier {
                // Leaving the NetworkPolicy tier with the pod isolated: nothing allowed it.
                if let Some(isolator) = isolating {
                    return deny_isolated(isolator);
                }
                current_tier = policy.tier;
            }
            if skip_tier == Some(policy.tier) {
                continue;
            }
            if policy.tier == Tier::NetworkPolicy {
                isolating.get_or_insert(&policy.id);
            }
            for (index, rule) in rules.iter().enumerate() {
                if !rule.matches(other, port, protocol, destination) {
                    continue;
                }
                let decided = |allowed| Decision {
                    allowed,
                    tier: policy.tier,
                    policy: Some(policy.id.clone()),
                    rule: Some(RuleRef {
                        index,
                        name: rule.name.clone(),
                    }),
                };
                match rule.action {
                    Action::Allow => return decided(true),
                    Action::Deny => return decided(false),
                    Action::Pass => {
                        skip_tier = Some(policy.tier);
                        break;
                    }
                }
            }
        }
        match isolating {
            Some(isolator) => deny_isolated(isolator),
            None => Decision::default_allow(),
        }
    }

    /// Builds an evaluator from scratch.
    pub fn build(
        namespaces: impl IntoIterator<Item = (String, Labels)>,
        pods: impl IntoIterator<Item = PodInfo>,
        policies: impl IntoIterator<Item = Policy>,
    ) -> Evaluator {
        let mut evaluator = Evaluator::new();
        for (name, labels) in namespaces {
            evaluator
                .namespaces
                .insert(name.clone(), namespace_labels(&name, Some(&labels)));
        }
        for policy in policies {
            evaluator.upsert_policy(policy);
        }
        for pod in pods {
            evaluator.upsert_pod(pod);
        }
        evaluator
    }
}

fn deny_isolated(isolator: &PolicyRef) -> Decision {
    Decision {
        allowed: false,
        tier: Tier::NetworkPolicy,
        policy: Some(isolator.clone()),
        rule: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EndpointName;
    use crate::objects::Objects;

    const CLUSTER: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: prod, labels: {env: prod}}
---
apiVersion: v1
kind: Namespace
metadata: {name: dev, labels: {env: dev}}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {namespace: prod, name: api, labels: {app: api}},
   spec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}, status: {podIP: 10.1.0.1}}
- {apiVersion: v1, kind: Pod, metadata: {namespace: prod, name: db, labels: {app: db}},
   spec: {containers: [{name: c}]}, status: {podIPs: [{ip: 10.1.0.2}, {ip: "fd00::1:2"}]}}
- {apiVersion: v1, kind: Pod, metadata: {namespace: dev, name: client, labels: {app: client}},
   spec: {containers: [{name: c}]}, status: {podIP: 10.2.0.1}}
- {apiVersion: v1, kind: Pod, metadata: {namespace: dev, name: tool, labels: {app: tool}},
   spec: {containers: [{name: c}]}, status: {podIP: 10.2.0.2}}
- {apiVersion: v1, kind: Pod, metadata: {namespace: ops, name: monitor, labels: {app: monitor}},
   spec: {containers: [{name: c}]}, status: {podIP: 10.3.0.1}}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: deny-dev-to-prod}
spec:
  priority: 20
  subject: {namespaces: {matchLabels: {env: prod}}}
  ingress: [{name: from-dev, action: Deny, from: [{namespaces: {matchLabels: {env: dev}}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: allow-monitor}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {env: prod}}}
  ingress:
  - name: scrape
    action: Allow
    from: [{pods: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ops}}, podSelector: {matchLabels: {app: monitor}}}}]
    ports: [{namedPort: http}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: pass-ops}
spec:
  priority: 15
  subject: {namespaces: {matchLabels: {env: prod}}}
  ingress: [{name: ops, action: Pass, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: ops}}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {matchLabels: {env: prod}}}
  ingress: [{name: no-ops, action: Deny, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: ops}}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: prod, name: db-ingress}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress: [{from: [{podSelector: {matchLabels: {app: api}}}], ports: [{port: 5432}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: dev, name: client-egress}
spec:
  podSelector: {matchLabels: {app: client}}
  policyTypes: [Egress]
  egress: [{to: [{ipBlock: {cidr: 0.0.0.0/0, except: [10.0.0.0/8]}}]}]
"#;

    #[test]
    fn verdicts_name_the_tier_policy_and_rule_that_decide() {
        let evaluator = Objects::from_yaml(CLUSTER).expect("objects").evaluator();
        let end = |text: &str| {
            evaluator
                .endpoint(&EndpointName::parse(text).expect("name"))
                .expect(text)
        };
        // (from, to, port, protocol) → (allowed, deciding direction, tier, policy, rule)
        let table = [
            (
                "ops/monitor",
                "prod/api",
                8080,
                Protocol::Tcp,
                (
                    true,
                    Direction::Ingress,
                    Tier::Admin,
                    Some("allow-monitor"),
                    Some(0),
                ),
            ),
            // The named port resolves on the destination only: 9090 is not `http`; Pass
            // skips the Admin tier, no NetworkPolicy selects prod/api, the baseline denies.
            (
                "ops/monitor",
                "prod/api",
                9090,
                Protocol::Tcp,
                (
                    false,
                    Direction::Ingress,
                    Tier::Baseline,
                    Some("default"),
                    Some(0),
                ),
            ),
            (
                "dev/tool",
                "prod/api",
                8080,
                Protocol::Tcp,
                (
                    false,
                    Direction::Ingress,
                    Tier::Admin,
                    Some("deny-dev-to-prod"),
                    Some(0),
                ),
            ),
            // Egress isolation decides before the destination's Admin tier is consulted.
            (
                "dev/client",
                "prod/api",
                8080,
                Protocol::Tcp,
                (
                    false,
                    Direction::Egress,
                    Tier::NetworkPolicy,
                    Some("client-egress"),
                    None,
                ),
            ),
            (
                "dev/client",
                "8.8.8.8",
                53,
                Protocol::Udp,
                (
                    true,
                    Direction::Egress,
                    Tier::NetworkPolicy,
                    Some("client-egress"),
                    Some(0),
                ),
            ),
            (
                "8.8.8.8",
                "prod/api",
                8080,
                Protocol::Tcp,
                (true, Direction::Ingress, Tier::Default, None, None),
            ),
            (
                "prod/api",
                "prod/db",
                5432,
                Protocol::Tcp,
                (
                    true,
                    Direction::Ingress,
                    Tier::NetworkPolicy,
                    Some("db-ingress"),
                    Some(0),
                ),
            ),
            (
                "prod/api",
                "prod/db",
                5432,
                Protocol::Udp,
                (
                    false,
                    Direction::Ingress,
                    Tier::NetworkPolicy,
                    Some("db-ingress"),
                    None,
                ),
            ),
            (
                "prod/api",
                "prod/db",
                80,
                Protocol::Tcp,
                (
                    false,
                    Direction::Ingress,
                    Tier::NetworkPolicy,
                    Some("db-ingress"),
                    None,
                ),
            ),
            (
                "ops/monitor",
                "dev/tool",
                80,
                Protocol::Tcp,
                (true, Direction::Ingress, Tier::Default, None, None),
            ),
        ];
        for (from, to, port, protocol, (allowed, direction, tier, policy, rule)) in table {
            let verdict = evaluator.verdict(end(from), end(to), port, protocol);
            let (decided, decision) = verdict.decided_by();
            let got = (
                verdict.allowed,
                decided,
                decision.tier,
                decision.policy.as_ref().map(|p| p.name.as_str()),
                decision.rule.as_ref().map(|r| r.index),
            );
            assert_eq!(
                got,
                (allowed, direction, tier, policy, rule),
                "{from} → {to}:{port}/{protocol}"
            );
        }
        // The ops namespace has no object: its pods still carry the automatic name label.
        assert_eq!(
            evaluator
                .namespace_labels("ops")
                .get(crate::model::NAMESPACE_NAME_LABEL)
                .map(String::as_str),
            Some("ops")
        );
    }

    #[test]
    fn a_policy_change_touches_only_the_pods_it_selects_or_selected() {
        let mut evaluator = Objects::from_yaml(CLUSTER).expect("objects").evaluator();
        let db = evaluator.pod_id("prod", "db").expect("db");
        let api = evaluator.pod_id("prod", "api").expect("api");
        let mut policy = evaluator
            .selecting(db)
            .iter()
            .filter_map(|id| evaluator.policy(*id))
            .find(|p| p.id.name == "db-ingress")
            .cloned()
            .expect("a NetworkPolicy on db");
        // Re-selecting from db to api touches both, and nothing else.
        policy.subject.pods.match_labels = Some([("app".to_string(), "api".to_string())].into());
        assert_eq!(evaluator.upsert_policy(policy.clone()).pods, {
            let mut both = vec![api, db];
            both.sort();
            both
        });
        assert_eq!(evaluator.remove_policy(&policy.id).pods, vec![api]);
        assert_eq!(
            evaluator.remove_policy(&policy.id).pods,
            Vec::<PodId>::new()
        );
    }
}
