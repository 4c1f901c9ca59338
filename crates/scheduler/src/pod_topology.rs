//! The filters and scores that look across nodes: PodTopologySpread (DoNotSchedule
//! constraints filter: `count(domain) + 1 − min over eligible domains ≤ maxSkew`, with
//! `minDomains`, `matchLabelKeys` and the default Honor policy for node affinity;
//! ScheduleAnyway constraints score) and InterPodAffinity (required affinity — satisfied by a
//! matching pod in the node's domain, or by the pod itself when it is the first of its group —
//! required anti-affinity, the required anti-affinity of pods already placed, and preferred
//! terms for scoring). Everything that depends only on the pod is computed once per pod
//! ([`Context::new`]); each node is then judged in time proportional to the terms.
//!
//! Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use tessera_model::selector::matches_typed;

use crate::filters::{self, Plugin, Rejection, reasons};
use crate::node_info::{NodeInfo, PodSummary};

/// Namespace labels, for terms with a `namespaceSelector`.
pub type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

/// A term's pod-selecting part, resolved for the incoming pod.
#[derive(Debug, Clone)]
struct Term {
    key: String,
    selector: LabelSelector,
    namespaces: Option<BTreeSet<String>>,
    namespace_selector: Option<LabelSelector>,
}

impl Term {
    fn new(term: &PodAffinityTerm, own_namespace: &str, labels: &BTreeMap<String, String>) -> Term {
        let mut selector = term.label_selector.clone().unwrap_or_default();
        // matchLabelKeys: the pod's own values join the selector.
        for key in term.match_label_keys.iter().flatten() {
            if let Some(value) = labels.get(key) {
                selector
                    .match_labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key.clone(), value.clone());
            }
        }
        let listed: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
        let (namespaces, namespace_selector) = match (&term.namespace_selector, listed.is_empty()) {
            (Some(selector), _) => (
                (!listed.is_empty()).then_some(listed),
                Some(selector.clone()),
            ),
            (None, true) => (Some(BTreeSet::from([own_namespace.to_string()])), None),
            (None, false) => (Some(listed), None),
        };
        Term {
            key: term.topology_key.clone(),
            selector,
            namespaces,
            namespace_selector,
        }
    }

    fn selects(&self, pod: &PodSummary, namespaces: &NamespaceLabels) -> bool {
        let listed = self
            .namespaces
            .as_ref()
            .is_some_and(|n| n.contains(&pod.namespace));
        let by_selector = self.namespace_selector.as_ref().is_some_and(|s| {
            let empty = BTreeMap::new();
            matches_typed(s, namespaces.get(&pod.namespace).unwrap_or(&empty))
        });
        (listed || by_selector) && matches_typed(&self.selector, &pod.labels)
    }
}

/// One spread constraint with its domain counts.
#[derive(Debug, Clone)]
struct Spread {
    key: String,
    max_skew: i64,
    hard: bool,
    counts: BTreeMap<String, i64>,
    min: i64,
    self_match: bool,
}

/// What the pod's cross-node rules need, computed once per pod.
#[derive(Debug, Clone, Default)]
pub struct Context {
    spreads: Vec<Spread>,
    /// Required affinity: (term key, domains with a matching pod, the pod matches itself).
    affinity: Vec<(String, BTreeSet<String>, bool)>,
    /// Required anti-affinity: (term key, domains with a matching pod).
    anti: Vec<(String, BTreeSet<String>)>,
    /// Existing pods' anti-affinity that selects this pod: (key, domain).
    existing_anti: BTreeSet<(String, String)>,
    /// Preferred terms: (weight, key, domains with matching pods → count); negative weights
    /// for anti-affinity.
    preferred: Vec<(i64, String, BTreeMap<String, i64>)>,
}

fn domain<'a>(node: &'a NodeInfo, key: &str) -> Option<&'a str> {
    node.labels.get(key).map(String::as_str)
}

impl Context {
    /// Precomputes `pod`'s rules over `nodes`.
    pub fn new(pod: &Pod, nodes: &[Arc<NodeInfo>], namespaces: &NamespaceLabels) -> Context {
        let holders = nodes
            .iter()
            .map(|n| &**n)
            .filter(|n| n.anti_affinity_pods > 0);
        Context::build(pod, nodes, holders, namespaces)
    }

    /// [`Context::new`] told which nodes hold pods with required anti-affinity.
    pub fn build<'a>(
        pod: &Pod,
        nodes: &[Arc<NodeInfo>],
        anti_affinity_holders: impl Iterator<Item = &'a NodeInfo>,
        namespaces: &NamespaceLabels,
    ) -> Context {
        let mut context = Context::default();
        let Some(spec) = pod.spec.as_ref() else {
            return context;
        };
        let own_ns = pod.metadata.namespace.clone().unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let me = PodSummary::of(pod);
        // Spreading: eligible nodes honour the pod's node affinity and carry the key.
        for constraint in spec.topology_spread_constraints.iter().flatten() {
            let mut selector = constraint.label_selector.clone().unwrap_or_default();
            for key in constraint.match_label_keys.iter().flatten() {
                if let Some(value) = labels.get(key) {
                    selector
                        .match_labels
                        .get_or_insert_with(BTreeMap::new)
                        .insert(key.clone(), value.clone());
                }
            }
            let honour = constraint.node_affinity_policy.as_deref() != Some("Ignore");
            let mut counts: BTreeMap<String, i64> = BTreeMap::new();
            for node in nodes {
                if honour && filters::node_affinity(pod, node).is_err() {
                    continue;
                }
                let Some(value) = domain(node, &constraint.topology_key) else {
                    continue;
                };
                let matching = node
                    .pods
                    .iter()
                    .filter(|p| p.namespace == own_ns && matches_typed(&selector, &p.labels))
                    .count() as i64;
                *counts.entry(value.to_string()).or_insert(0) += matching;
            }
            let min_domains = i64::from(constraint.min_domains.unwrap_or(1));
            let min = if (counts.len() as i64) < min_domains {
                0
            } else {
                counts.values().copied().min().unwrap_or(0)
            };
            context.spreads.push(Spread {
                key: constraint.topology_key.clone(),
                max_skew: i64::from(constraint.max_skew),
                hard: constraint.when_unsatisfiable == "DoNotSchedule",
                counts,
                min,
                self_match: matches_typed(&selector, &labels),
            });
        }
        let affinity = spec.affinity.as_ref();
        let domains_with = |term: &Term| -> BTreeMap<String, i64> {
            let mut found = BTreeMap::new();
            for node in nodes {
                let Some(value) = domain(node, &term.key) else {
                    continue;
                };
                let n = node
                    .pods
                    .iter()
                    .filter(|p| term.selects(p, namespaces))
                    .count() as i64;
                if n > 0 {
                    *found.entry(value.to_string()).or_insert(0) += n;
                }
            }
            found
        };
        let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
        for term in pod_affinity
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten()
        {
            let term = Term::new(term, &own_ns, &labels);
            let found = domains_with(&term).into_keys().collect();
            let self_match = term.selects(&me, namespaces);
            context.affinity.push((term.key.clone(), found, self_match));
        }
        let pod_anti = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        for term in pod_anti
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten()
        {
            let term = Term::new(term, &own_ns, &labels);
            let found = domains_with(&term).into_keys().collect();
            context.anti.push((term.key.clone(), found));
        }
        for (weighted, sign) in [
            (
                pod_affinity.and_then(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
                1,
            ),
            (
                pod_anti.and_then(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .as_ref()
                }),
                -1,
            ),
        ] {
            for preference in weighted.into_iter().flatten() {
                let term = Term::new(&preference.pod_affinity_term, &own_ns, &labels);
                let found = domains_with(&term);
                context
                    .preferred
                    .push((sign * i64::from(preference.weight), term.key, found));
            }
        }
        // Existing pods whose required anti-affinity selects this pod.
        for node in anti_affinity_holders {
            for existing in &node.pods {
                for term in &existing.anti_affinity {
                    let term = Term::new(term, &existing.namespace, &existing.labels);
                    if term.selects(&me, namespaces)
                        && let Some(value) = domain(node, &term.key)
                    {
                        context
                            .existing_anti
                            .insert((term.key.clone(), value.to_string()));
                    }
                }
            }
        }
        context
    }

    /// PodTopologySpread's filter on `node`.
    pub fn spread_filter(&self, node: &NodeInfo) -> Result<(), Rejection> {
        for spread in self.spreads.iter().filter(|s| s.hard) {
            let Some(value) = domain(node, &spread.key) else {
                return Err(Rejection::one(
                    Plugin::PodTopologySpread,
                    reasons::SPREAD_LABEL,
                ));
            };
            let count = spread.counts.get(value).copied().unwrap_or(0);
            let skew = count + i64::from(spread.self_match) - spread.min;
            if skew > spread.max_skew {
                return Err(Rejection::one(Plugin::PodTopologySpread, reasons::SPREAD));
            }
        }
        Ok(())
    }

    /// InterPodAffinity's filter on `node`.
    pub fn affinity_filter(&self, node: &NodeInfo) -> Result<(), Rejection> {
        for (key, value) in &self.existing_anti {
            if domain(node, key) == Some(value.as_str()) {
                return Err(Rejection::one(
                    Plugin::InterPodAffinity,
                    reasons::EXISTING_ANTI_AFFINITY,
                ));
            }
        }
        for (key, found) in &self.anti {
            if domain(node, key).is_some_and(|v| found.contains(v)) {
                return Err(Rejection::one(
                    Plugin::InterPodAffinity,
                    reasons::ANTI_AFFINITY_RULES,
                ));
            }
        }
        // The first pod of a group may land anywhere its own terms would accept.
        let nobody_anywhere = self.affinity.iter().all(|(_, found, _)| found.is_empty());
        for (key, found, self_match) in &self.affinity {
            let here = domain(node, key).is_some_and(|v| found.contains(v));
            let first = nobody_anywhere && *self_match && domain(node, key).is_some();
            if !here && !first {
                return Err(Rejection::one(
                    Plugin::InterPodAffinity,
                    reasons::AFFINITY_RULES,
                ));
            }
        }
        Ok(())
    }

    /// Raw InterPodAffinity score: weights of preferred terms matched in the node's domain.
    pub fn affinity_score(&self, node: &NodeInfo) -> i64 {
        self.preferred
            .iter()
            .filter_map(|(weight, key, found)| {
                let value = domain(node, key)?;
                found.get(value).map(|n| weight * n)
            })
            .sum()
    }

    /// Raw PodTopologySpread score: matching pods in the node's domains under ScheduleAnyway
    /// constraints (fewer is better).
    pub fn spread_count(&self, node: &NodeInfo) -> i64 {
        self.spreads
            .iter()
            .filter(|s| !s.hard)
            .map(|s| {
                domain(node, &s.key)
                    .and_then(|v| s.counts.get(v))
                    .copied()
                    .unwrap_or(0)
            })
            .sum()
    }

    /// Whether the pod has any cross-node rule (so the rest can be skipped).
    pub fn is_empty(&self) -> bool {
        self.spreads.is_empty()
            && self.affinity.is_empty()
            && self.anti.is_empty()
            && self.existing_anti.is_empty()
            && self.preferred.is_empty()
    }
}
