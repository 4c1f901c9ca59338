//! All-or-nothing placement of a pod group (scheduler-plugins' Coscheduling semantics, the
//! `scheduling.x-k8s.io/pod-group` label): the members are placed one by one on a scratch copy
//! of the snapshot, each seeing the ones before; only if at least `minMember` of them fit
//! (and, with a topology key, all within one domain of it — one rack, one block) is anything
//! returned, so no partial group ever holds resources or devices. Domains are tried in name
//! order; the first where the group fits wins.
//!
//! Pure.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::node_info::NodeInfo;
use crate::schedule::{Decision, FitError, Scheduler};

/// Why a group cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupError {
    /// Members that fit before one did not.
    pub placed: usize,
    /// The minimum that must fit.
    pub min_member: usize,
    /// The first member that did not fit, and why.
    pub first_failure: Option<(String, FitError)>,
}

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "only {} of {} required members fit",
            self.placed, self.min_member
        )?;
        if let Some((pod, error)) = &self.first_failure {
            write!(f, "; {pod}: {error}")?;
        }
        Ok(())
    }
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

impl Scheduler {
    /// Places a group: each member with its claims, at least `min_member` of them, within one
    /// domain of `topology_key` when given. On success the decisions (member order) and the
    /// scheduler with them booked.
    pub fn schedule_group(
        &self,
        members: &[(&Pod, Vec<ResourceClaim>)],
        min_member: usize,
        topology_key: Option<&str>,
    ) -> Result<(Vec<Decision>, Scheduler), GroupError> {
        let domains: Vec<Option<String>> = match topology_key {
            None => vec![None],
            Some(key) => self
                .nodes()
                .iter()
                .filter_map(|n| n.labels.get(key).cloned())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(Some)
                .collect(),
        };
        let mut best: Option<GroupError> = None;
        for domain in domains {
            let mut scratch = self.clone();
            if let (Some(key), Some(value)) = (topology_key, &domain) {
                scratch.retain_nodes(|n: &NodeInfo| n.labels.get(key) == Some(value));
            }
            let mut decisions = Vec::new();
            let mut failure = None;
            for (pod, claims) in members {
                match scratch.schedule(pod, claims) {
                    Ok(decision) => {
                        scratch.assume(pod, &decision, claims);
                        decisions.push(decision);
                    }
                    Err(error) => {
                        failure = Some((name(pod), error));
                        break;
                    }
                }
            }
            if failure.is_none() && decisions.len() >= min_member {
                // Decisions name nodes; book them on the full snapshot.
                let mut booked = self.clone();
                for ((pod, claims), decision) in members.iter().zip(&decisions) {
                    booked.assume(pod, decision, claims);
                }
                return Ok((decisions, booked));
            }
            let error = GroupError {
                placed: decisions.len(),
                min_member,
                first_failure: failure,
            };
            if best.as_ref().is_none_or(|b| error.placed > b.placed) {
                best = Some(error);
            }
        }
        Err(best.unwrap_or(GroupError {
            placed: 0,
            min_member,
            first_failure: None,
        }))
    }
}
