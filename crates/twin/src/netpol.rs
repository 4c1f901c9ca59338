//! Network policy in the simulated dataplane: a [`PolicyVerdict`] over `tessera-netpol`'s
//! evaluator. The dataplane asks about pod objects and addresses (after Service translation);
//! this adapter turns them into the evaluator's pods and endpoints and answers with the
//! evaluator's verdict, egress of the source and ingress of the destination.
//!
//! Kept current by whoever feeds it changes (the watch cache in `world.rs`); a pod the
//! dataplane names that the index has not seen yet (or saw in an older state) is taken as
//! the dataplane gives it. Decides nothing itself and knows nothing of watches or the API.

use std::net::IpAddr;
use std::sync::RwLock;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::Value;
use tessera_exec::{Peer, PolicyVerdict, Protocol};
use tessera_netpol::model::{PodInfo, namespace_info};
use tessera_netpol::{Endpoint, Evaluator, Policy, PolicyRef, Verdict};

/// The cluster's policies, namespaces and pods, indexed for verdicts.
#[derive(Default)]
pub struct PolicyIndex {
    evaluator: RwLock<Evaluator>,
}

impl PolicyIndex {
    /// An index over nothing: every connection is allowed until policies arrive.
    pub fn new() -> PolicyIndex {
        PolicyIndex::default()
    }

    /// An index over a set of objects read at once.
    pub fn from_objects(objects: tessera_netpol::Objects) -> PolicyIndex {
        PolicyIndex {
            evaluator: RwLock::new(objects.evaluator()),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Evaluator> {
        self.evaluator.write().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Evaluator> {
        self.evaluator.read().unwrap_or_else(|p| p.into_inner())
    }

    /// A namespace was added or changed (its labels).
    pub fn apply_namespace(&self, namespace: &Namespace) {
        let (name, labels) = namespace_info(namespace);
        self.write().upsert_namespace(&name, &labels);
    }

    /// A namespace is gone.
    pub fn remove_namespace(&self, name: &str) {
        self.write().remove_namespace(name);
    }

    /// A pod was added or changed; a finished pod holds no address and leaves the index.
    pub fn apply_pod(&self, pod: &Pod) {
        let finished = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|phase| phase == "Succeeded" || phase == "Failed");
        let info = PodInfo::from_pod(pod);
        let mut evaluator = self.write();
        if finished {
            evaluator.remove_pod(&info.namespace, &info.name);
        } else {
            evaluator.upsert_pod(info);
        }
    }

    /// A pod is gone.
    pub fn remove_pod(&self, namespace: &str, name: &str) {
        self.write().remove_pod(namespace, name);
    }

    /// A policy of any kind was added or changed.
    pub fn apply_policy(&self, policy: Policy) {
        self.write().upsert_policy(policy);
    }

    /// A policy is gone.
    pub fn remove_policy(&self, policy: &PolicyRef) {
        self.write().remove_policy(policy);
    }

    /// The evaluator's verdict on `from` opening `to` on `port`/`protocol`; `None` when
    /// `from` (or a destination pod) is not a pod object.
    pub fn verdict(
        &self,
        from: &Value,
        to: Peer<'_>,
        port: u16,
        protocol: Protocol,
    ) -> Option<Verdict> {
        let source = pod_info(from)?;
        let destination = match to {
            Peer::Pod(pod) => Some(pod_info(pod)?),
            Peer::Address(_) => None,
        };
        // The dataplane's pods are at least as new as the index's: take them as given.
        for pod in [Some(&source), destination.as_ref()].into_iter().flatten() {
            let known = {
                let evaluator = self.read();
                evaluator
                    .pod_id(&pod.namespace, &pod.name)
                    .and_then(|id| evaluator.pod(id))
                    == Some(pod)
            };
            if !known {
                self.write().upsert_pod(pod.clone());
            }
        }
        let evaluator = self.read();
        let endpoint = |pod: &PodInfo| {
            evaluator
                .pod_id(&pod.namespace, &pod.name)
                .map(Endpoint::Pod)
        };
        let from = endpoint(&source)?;
        let to = match (to, &destination) {
            (Peer::Address(address), _) => Endpoint::Address(IpAddr::V4(address)),
            (Peer::Pod(_), Some(pod)) => endpoint(pod)?,
            (Peer::Pod(_), None) => return None,
        };
        Some(evaluator.verdict(from, to, port, netpol_protocol(protocol)))
    }
}

impl PolicyVerdict for PolicyIndex {
    fn allowed(&self, from: &Value, to: Peer<'_>, port: u16, protocol: Protocol) -> bool {
        let Some(verdict) = self.verdict(from, to, port, protocol) else {
            // Not a pod the API would hold: nothing selects it.
            return true;
        };
        if !verdict.allowed {
            let (direction, decision) = verdict.decided_by();
            tracing::debug!(
                from = %pod_name(from),
                port,
                protocol = protocol.api_name(),
                direction = direction.as_str(),
                tier = decision.tier.as_str(),
                policy = ?decision.policy.as_ref().map(ToString::to_string),
                rule = ?decision.rule.as_ref().map(|r| r.index),
                "connection dropped by network policy"
            );
        }
        verdict.allowed
    }
}

fn pod_info(pod: &Value) -> Option<PodInfo> {
    serde_json::from_value::<Pod>(pod.clone())
        .ok()
        .map(|pod| PodInfo::from_pod(&pod))
}

fn pod_name(pod: &Value) -> String {
    format!(
        "{}/{}",
        tessera_model::json::text(pod, "/metadata/namespace"),
        tessera_model::json::text(pod, "/metadata/name")
    )
}

pub(crate) fn netpol_protocol(protocol: Protocol) -> tessera_netpol::Protocol {
    match protocol {
        Protocol::Tcp => tessera_netpol::Protocol::Tcp,
        Protocol::Udp => tessera_netpol::Protocol::Udp,
        Protocol::Sctp => tessera_netpol::Protocol::Sctp,
    }
}

#[cfg(test)]
mod tests;
