//! How a simulated container behaves, read from pod annotations (all optional):
//!
//! | annotation | meaning | default |
//! |---|---|---|
//! | `sim.tessera.dev/duration` | how long containers run before exiting (Go duration: `90s`, `1m30s`, `500ms`), or `forever` | `forever` when `restartPolicy: Always`, else `1s` |
//! | `sim.tessera.dev/exit-code` | the exit code when the run ends | `0` |
//! | `sim.tessera.dev/logs` | text each container prints at start (one log line per line) | a line naming the container and image |
//!
//! Pure parsing; knows nothing about the API.

use std::collections::BTreeMap;
use std::time::Duration;

/// Annotation: run time.
pub const DURATION: &str = "sim.tessera.dev/duration";
/// Annotation: exit code.
pub const EXIT_CODE: &str = "sim.tessera.dev/exit-code";
/// Annotation: log text.
pub const LOGS: &str = "sim.tessera.dev/logs";

/// What a pod's containers will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behaviour {
    /// How long each run lasts; `None` runs until deleted.
    pub duration: Option<Duration>,
    /// Exit code at the end of each run.
    pub exit_code: i32,
    /// Log lines printed at start; `None` prints the default line.
    pub logs: Option<Vec<String>>,
}

/// Why an annotation is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {annotation}: {message}")]
pub struct BehaviourError {
    /// The annotation.
    pub annotation: &'static str,
    /// What is wrong.
    pub message: String,
}

impl Behaviour {
    /// Reads a pod's behaviour from its annotations and restart policy.
    pub fn from_annotations(
        annotations: &BTreeMap<String, String>,
        restart_policy: &str,
    ) -> Result<Behaviour, BehaviourError> {
        let duration = match annotations.get(DURATION).map(String::as_str) {
            Some("forever") => None,
            Some(text) => Some(parse_duration(text).map_err(|message| BehaviourError {
                annotation: DURATION,
                message,
            })?),
            None if restart_policy == "Always" => None,
            None => Some(Duration::from_secs(1)),
        };
        let exit_code = match annotations.get(EXIT_CODE) {
            Some(text) => text.trim().parse::<i32>().map_err(|_| BehaviourError {
                annotation: EXIT_CODE,
                message: format!("{text:?} is not an integer exit code"),
            })?,
            None => 0,
        };
        let logs = annotations
            .get(LOGS)
            .map(|text| text.lines().map(str::to_string).collect());
        Ok(Behaviour {
            duration,
            exit_code,
            logs,
        })
    }
}

pub use tessera_model::time::parse_duration;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaviour_defaults_follow_restart_policy() {
        let none = BTreeMap::new();
        assert_eq!(
            Behaviour::from_annotations(&none, "Always")
                .unwrap()
                .duration,
            None
        );
        assert_eq!(
            Behaviour::from_annotations(&none, "Never")
                .unwrap()
                .duration,
            Some(Duration::from_secs(1))
        );
        let mut annotations = BTreeMap::new();
        annotations.insert(DURATION.to_string(), "2s".to_string());
        annotations.insert(EXIT_CODE.to_string(), "3".to_string());
        annotations.insert(LOGS.to_string(), "epoch 1\nepoch 2".to_string());
        let behaviour = Behaviour::from_annotations(&annotations, "Never").unwrap();
        assert_eq!(behaviour.duration, Some(Duration::from_secs(2)));
        assert_eq!(behaviour.exit_code, 3);
        assert_eq!(behaviour.logs.unwrap(), ["epoch 1", "epoch 2"]);
        annotations.insert(EXIT_CODE.to_string(), "three".to_string());
        let error = Behaviour::from_annotations(&annotations, "Never").unwrap_err();
        assert_eq!(error.annotation, EXIT_CODE);
    }
}
