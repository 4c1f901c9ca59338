//! The node lifecycle core, as upstream's node lifecycle and taint-eviction controllers
//! decide: a node whose Lease was not renewed for the grace period (50 s since 1.32) gets
//! its conditions set to Unknown ("Kubelet stopped posting node status."); Ready=False
//! taints it `node.kubernetes.io/not-ready`, Unknown `node.kubernetes.io/unreachable`
//! (NoSchedule and NoExecute); a pod on a node with a NoExecute taint it does not tolerate is
//! evicted at once, one that tolerates it for `tolerationSeconds` that long after the taint
//! was added, one that tolerates it without a limit stays.
//!
//! Pure: nodes, leases, pods and the time in; actions and the next time to look out.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tessera_model::taints::tolerates;

/// Taint of a node whose kubelet reports NotReady.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Taint of a node whose kubelet stopped posting status.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// A change to make.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Set the node's conditions to Unknown.
    MarkUnknown {
        /// The node.
        node: String,
    },
    /// Replace the node's taints.
    SetTaints {
        /// The node.
        node: String,
        /// All its taints.
        taints: Vec<Taint>,
    },
    /// Delete a pod because of a NoExecute taint.
    Evict {
        /// Namespace.
        namespace: String,
        /// Pod.
        pod: String,
        /// The node.
        node: String,
    },
}

/// When `pod` is evicted from a node with `taints`, by its tolerations of their `NoExecute`
/// ones: `now` for a taint it does not tolerate, `timeAdded + tolerationSeconds` for one it
/// tolerates for a while (the earliest), `None` when it tolerates every one for ever (or
/// there is none). A taint without `timeAdded` counts from `now`.
pub fn eviction_due(pod: &Pod, taints: &[Taint], now: SystemTime) -> Option<SystemTime> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let mut due: Option<SystemTime> = None;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        let at = if matching.is_empty() {
            Some(now)
        } else if matching.iter().any(|t| t.toleration_seconds.is_none()) {
            None
        } else {
            let seconds = matching
                .iter()
                .filter_map(|t| t.toleration_seconds)
                .min()
                .unwrap_or(0)
                .max(0);
            let added = taint.time_added.as_ref().map_or(now, to_system);
            Some(added + Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
        };
        if let Some(at) = at {
            due = Some(due.map_or(at, |d| d.min(at)));
        }
    }
    due
}

/// A Kubernetes timestamp as a `SystemTime` (before the epoch: the epoch).
pub fn to_system(time: &Time) -> SystemTime {
    let nanos = time.0.as_nanosecond();
    if nanos >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    } else {
        SystemTime::UNIX_EPOCH
    }
}

fn ready(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// The actions due at `now`, and when to look again (the next eviction due).
pub fn reconcile(
    nodes: &[Node],
    leases: &[Lease],
    pods: &[Pod],
    now: SystemTime,
    grace: Duration,
    started: SystemTime,
) -> (Vec<Action>, Option<SystemTime>) {
    let mut actions = Vec::new();
    let mut next: Option<SystemTime> = None;
    let renewed: BTreeMap<&str, SystemTime> = leases
        .iter()
        .filter_map(|l| {
            let renew = l.spec.as_ref()?.renew_time.as_ref()?;
            Some((l.metadata.name.as_deref()?, to_system(&Time(renew.0))))
        })
        .collect();
    let mut tainted: BTreeMap<String, Vec<Taint>> = BTreeMap::new();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        // The controller gives every node the grace period from its own start.
        let last = renewed
            .get(name.as_str())
            .copied()
            .unwrap_or(started)
            .max(started);
        let mut state = ready(node).unwrap_or("Unknown").to_string();
        if now.duration_since(last).unwrap_or_default() > grace && state != "Unknown" {
            actions.push(Action::MarkUnknown { node: name.clone() });
            state = "Unknown".into();
        }
        let wanted: &[&str] = match state.as_str() {
            "False" => &[NOT_READY],
            "True" => &[],
            _ => &[UNREACHABLE],
        };
        let current: Vec<Taint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let mut taints: Vec<Taint> = current
            .iter()
            .filter(|t| {
                (t.key != NOT_READY && t.key != UNREACHABLE) || wanted.contains(&t.key.as_str())
            })
            .cloned()
            .collect();
        for key in wanted {
            for effect in ["NoSchedule", "NoExecute"] {
                if !taints.iter().any(|t| t.key == *key && t.effect == effect) {
                    taints.push(Taint {
                        key: (*key).to_string(),
                        value: None,
                        effect: effect.into(),
                        time_added: (effect == "NoExecute").then(|| crate::meta_time(now)),
                    });
                }
            }
        }
        if taints != current {
            actions.push(Action::SetTaints {
                node: name.clone(),
                taints: taints.clone(),
            });
        }
        tainted.insert(name, taints);
    }
    for pod in pods {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if finished || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let taints = tainted.get(node).map(Vec::as_slice).unwrap_or_default();
        let due = eviction_due(pod, taints, now);
        match due {
            Some(at) if at <= now => actions.push(Action::Evict {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                pod: pod.metadata.name.clone().unwrap_or_default(),
                node: node.to_string(),
            }),
            Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
            None => {}
        }
    }
    (actions, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: u64 = 1_800_000_000;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + seconds)
    }

    fn node(name: &str, ready: &str, taints: serde_json::Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}),
        )
        .expect("node")
    }

    fn lease(name: &str, renewed: u64) -> Lease {
        let time = crate::meta_time(at(renewed));
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"renewTime": serde_json::to_value(&time).expect("time").as_str().expect("text").replace('Z', ".000000Z")}}))
        .expect("lease")
    }

    fn pod(name: &str, node: &str, tolerations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"namespace": "ml", "name": name},
            "spec": {"nodeName": node, "tolerations": tolerations, "containers": []}, "status": {"phase": "Running"}}))
        .expect("pod")
    }

    #[test]
    fn stale_leases_become_unknown_and_unreachable_taints() {
        let grace = Duration::from_secs(50);
        let nodes = [
            node("fresh", "True", json!([])),
            node("stale", "True", json!([])),
            node("sick", "False", json!([])),
        ];
        let leases = [lease("fresh", 95), lease("stale", 40), lease("sick", 99)];
        let (actions, _) = reconcile(&nodes, &leases, &[], at(100), grace, at(0));
        let summary: Vec<String> = actions
            .iter()
            .map(|a| match a {
                Action::MarkUnknown { node } => format!("{node}: unknown"),
                Action::SetTaints { node, taints } => format!(
                    "{node}: {}",
                    taints
                        .iter()
                        .map(|t| format!("{}:{}", t.key, t.effect))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Action::Evict { pod, .. } => format!("evict {pod}"),
            })
            .collect();
        assert_eq!(
            summary,
            [
                "stale: unknown",
                "stale: node.kubernetes.io/unreachable:NoSchedule,node.kubernetes.io/unreachable:NoExecute",
                "sick: node.kubernetes.io/not-ready:NoSchedule,node.kubernetes.io/not-ready:NoExecute",
            ]
        );
        // A controller that just started gives every node the grace period first.
        let (actions, _) = reconcile(&nodes[1..2], &leases[1..2], &[], at(100), grace, at(90));
        assert!(actions.is_empty(), "{actions:?}");
        // Recovery removes the condition taints and keeps others.
        let recovered = node(
            "n",
            "True",
            json!([{"key": UNREACHABLE, "effect": "NoExecute"}, {"key": "gpu", "effect": "NoSchedule"}]),
        );
        let (actions, _) = reconcile(&[recovered], &[lease("n", 99)], &[], at(100), grace, at(0));
        assert!(
            matches!(&actions[..], [Action::SetTaints { taints, .. }] if taints.len() == 1 && taints[0].key == "gpu")
        );
    }

    #[test]
    fn no_execute_taints_evict_by_toleration() {
        let added = serde_json::to_value(crate::meta_time(at(0))).expect("time");
        let nodes = [node(
            "n",
            "False",
            json!([
            {"key": NOT_READY, "effect": "NoSchedule"},
            {"key": NOT_READY, "effect": "NoExecute", "timeAdded": added}]),
        )];
        let leases = [lease("n", 299)];
        let default_seconds = json!([{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]);
        let pods = [
            pod("plain", "n", json!([])),
            pod("default", "n", default_seconds),
            pod("forever", "n", json!([{"operator": "Exists"}])),
            pod("elsewhere", "m", json!([])),
        ];
        let (actions, next) = reconcile(
            &nodes,
            &leases,
            &pods,
            at(299),
            Duration::from_secs(50),
            at(0),
        );
        let evicted: Vec<&str> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Evict { pod, .. } => Some(pod.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(evicted, ["plain"]);
        assert_eq!(
            next,
            Some(at(300)),
            "the default-tolerating pod is due at 300 s"
        );
        let (actions, _) = reconcile(
            &nodes,
            &[lease("n", 300)],
            &pods[1..],
            at(300),
            Duration::from_secs(50),
            at(0),
        );
        assert!(
            matches!(&actions[..], [Action::Evict { pod, .. }] if pod == "default"),
            "{actions:?}"
        );
    }
}
