//! A `MaintenancePlan`'s status as a controller would write it, and the stages read back from it:
//! the stages are recorded once, when the pre-flight passes, so that every later step (after a
//! restart too) is computed from the object and the nodes' labels alone. `phase`
//! (`Refused`, `Progressing`, `Paused`, `Halted`, `Succeeded`), the active stage, each node's
//! stage and state label, the halting reason, and a condition per phase in Kubernetes' shape.
//!
//! Pure JSON: the time of a condition's transition is an input (RFC 3339). Knows no API client.

use serde_json::{Value, json};

use crate::preflight::{Refused, Stage};
use crate::rollout::{Phase, Step};

fn condition(kind: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": "True", "reason": reason, "message": message,
           "lastTransitionTime": now})
}

/// The status of a plan the pre-flight refused.
pub fn refused(refusal: &Refused, now: &str) -> Value {
    let message = refusal.to_string();
    json!({"phase": "Refused", "reason": message,
           "conditions": [condition("Refused", "PreflightFailed", &message, now)]})
}

/// The status after `step` over `stages`.
pub fn progress(stages: &[Stage], step: &Step, now: &str) -> Value {
    let (reason, message, stage, halted) = match &step.phase {
        Phase::Progressing { stage } => (
            "StageInProgress",
            format!("stage {stage} in progress"),
            Some(stage.as_str()),
            None,
        ),
        Phase::Paused => ("Paused", "spec.paused is true".to_string(), None, None),
        Phase::Halted { reason } => ("ValidationFailed", reason.clone(), None, Some(reason)),
        Phase::Succeeded => ("AllNodesDone", "every node is done".to_string(), None, None),
    };
    let mut status = json!({
        "phase": step.phase.name(),
        "stages": stages.iter().map(|s| json!({"name": s.name, "nodes": s.nodes})).collect::<Vec<_>>(),
        "nodes": step.nodes.iter().map(|n| json!({"name": n.name, "stage": n.stage, "state": n.state})).collect::<Vec<_>>(),
        "conditions": [condition(step.phase.name(), reason, &message, now)],
    });
    if let Some(stage) = stage {
        status["stage"] = json!(stage);
    }
    if let Some(reason) = halted {
        status["reason"] = json!(reason);
    }
    status
}

/// Adds the printer columns' summary to a status: `kind` (the plan's kind) and `progress`
/// (`<done>/<nodes>`, a node counting as done once `upgrade-done` or removed by a rotation).
pub fn summarize(status: &mut Value, kind: &str) {
    let nodes = status.get("nodes").and_then(Value::as_array);
    let total = nodes.map_or(0, Vec::len);
    let done = nodes
        .into_iter()
        .flatten()
        .filter(|n| {
            matches!(
                n.get("state").and_then(Value::as_str),
                Some("upgrade-done" | "removed")
            )
        })
        .count();
    status["kind"] = json!(kind);
    status["progress"] = json!(format!("{done}/{total}"));
}

/// The stages recorded in a status, `None` when none were (the plan has not started).
pub fn stages(status: &Value) -> Option<Vec<Stage>> {
    status
        .get("stages")?
        .as_array()?
        .iter()
        .map(|s| {
            Some(Stage {
                name: s.get("name")?.as_str()?.to_string(),
                nodes: s
                    .get("nodes")?
                    .as_array()?
                    .iter()
                    .map(|n| n.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::Refusal;
    use crate::rollout::NodeProgress;

    fn stage(name: &str, nodes: &[&str]) -> Stage {
        Stage {
            name: name.into(),
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
        }
    }

    #[test]
    fn stages_round_trip_through_the_status() {
        let recorded = vec![stage("canary", &["a"]), stage("batch-1", &["b", "c"])];
        let step = Step {
            actions: Vec::new(),
            phase: Phase::Progressing {
                stage: "batch-1".into(),
            },
            nodes: vec![NodeProgress {
                name: "a".into(),
                stage: "canary".into(),
                state: "upgrade-done".into(),
            }],
        };
        let status = progress(&recorded, &step, "2026-12-02T16:00:00Z");
        assert_eq!(stages(&status), Some(recorded));
        assert_eq!(status["phase"], "Progressing");
        assert_eq!(status["stage"], "batch-1");
        assert_eq!(status["nodes"][0]["state"], "upgrade-done");
        assert_eq!(status["conditions"][0]["reason"], "StageInProgress");
        let mut summarized = status.clone();
        summarize(&mut summarized, "driver-upgrade");
        assert_eq!(summarized["kind"], "driver-upgrade");
        assert_eq!(summarized["progress"], "1/1");
        // Not started, or a malformed record: no stages.
        assert_eq!(stages(&json!({})), None);
        assert_eq!(
            stages(&json!({"stages": [{"name": "canary", "nodes": [1]}]})),
            None
        );
    }

    #[test]
    fn each_phase_has_its_condition() {
        let table = [
            (Phase::Paused, "Paused", "Paused", None),
            (
                Phase::Halted {
                    reason: "validation failed on node a in stage canary".into(),
                },
                "Halted",
                "ValidationFailed",
                Some("validation failed on node a in stage canary"),
            ),
            (Phase::Succeeded, "Succeeded", "AllNodesDone", None),
        ];
        for (phase, name, reason, halted) in table {
            let step = Step {
                actions: Vec::new(),
                phase,
                nodes: Vec::new(),
            };
            let status = progress(&[], &step, "t");
            assert_eq!(status["phase"], name);
            assert_eq!(status["conditions"][0]["type"], name);
            assert_eq!(status["conditions"][0]["reason"], reason);
            assert_eq!(status["reason"].as_str(), halted);
        }
        let r = refused(
            &Refused(vec![Refusal::EmptyPool {
                selector: "pool=tpu".into(),
            }]),
            "t",
        );
        assert_eq!(r["phase"], "Refused");
        assert_eq!(
            r["reason"],
            "no node matches the plan's nodeSelector pool=tpu"
        );
    }
}
