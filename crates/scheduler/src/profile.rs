//! Scheduling profiles from a `KubeSchedulerConfiguration` file
//! (`kubescheduler.config.k8s.io/v1`), as kube-scheduler reads them: one profile per
//! `schedulerName`; score plugins disabled (`plugins.score.disabled`, `*` for all) or
//! re-weighted (`plugins.score.enabled[].weight`); NodeResourcesFit's `scoringStrategy`
//! (`LeastAllocated`, `MostAllocated`, `RequestedToCapacityRatio` with its `shape`, and
//! per-resource weights such as `nvidia.com/gpu`); and `percentageOfNodesToScore`. Unknown
//! fields and values are errors naming the field.
//!
//! Pure: text in, profiles out.

use std::collections::BTreeMap;

use serde::Deserialize;

/// How NodeResourcesFit scores.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Strategy {
    /// Prefer the emptiest node (spread).
    #[default]
    LeastAllocated,
    /// Prefer the fullest node (bin-packing).
    MostAllocated,
    /// A piecewise-linear function of utilization: (utilization 0–100, score 0–10) points.
    RequestedToCapacityRatio(Vec<(i64, i64)>),
}

/// One scheduling profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The `schedulerName` it serves.
    pub scheduler_name: String,
    /// NodeResourcesFit's strategy.
    pub strategy: Strategy,
    /// Resources NodeResourcesFit scores, with weights.
    pub resources: Vec<(String, i64)>,
    /// Score plugin weights by plugin name (0 = disabled).
    pub weights: BTreeMap<String, i64>,
    /// Upstream's percentageOfNodesToScore (`None`: adaptive).
    pub percentage_of_nodes_to_score: Option<u32>,
}

/// The score plugins and their default weights. ModelLocality (Tessera's, issue 21) weighs 3:
/// a node holding all of a pod's models scores 300 more than one holding none, which wins every
/// tie and outweighs a NodeResourcesFit or BalancedAllocation difference (each at most 100) and
/// a PreferNoSchedule taint's, but not a preferred node affinity term at its full weight
/// together with resource differences; disable it (`plugins.score.disabled: [{name:
/// ModelLocality}]`) or re-weight it like any other.
pub const SCORE_PLUGINS: [(&str, i64); 8] = [
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    ("NodeResourcesBalancedAllocation", 1),
    ("InterPodAffinity", 2),
    ("PodTopologySpread", 2),
    ("NodeResourceTopologyMatch", 1),
    ("ModelLocality", 3),
];

impl Default for Profile {
    fn default() -> Self {
        Profile {
            scheduler_name: "default-scheduler".into(),
            strategy: Strategy::default(),
            resources: vec![("cpu".into(), 1), ("memory".into(), 1)],
            weights: SCORE_PLUGINS
                .iter()
                .map(|(n, w)| (n.to_string(), *w))
                .collect(),
            percentage_of_nodes_to_score: None,
        }
    }
}

impl Profile {
    /// A plugin's weight.
    pub fn weight(&self, plugin: &str) -> i64 {
        self.weights.get(plugin).copied().unwrap_or(0)
    }
}

/// A configuration file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ProfileError {
    /// The field at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    api_version: String,
    kind: String,
    #[serde(default)]
    profiles: Vec<FileProfile>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<u32>,
    #[serde(default)]
    parallelism: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileProfile {
    #[serde(default)]
    scheduler_name: Option<String>,
    #[serde(default)]
    plugins: Option<Plugins>,
    #[serde(default)]
    plugin_config: Vec<PluginConfig>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Plugins {
    #[serde(default)]
    score: Option<PluginSet>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PluginSet {
    #[serde(default)]
    enabled: Vec<PluginRef>,
    #[serde(default)]
    disabled: Vec<PluginRef>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PluginRef {
    name: String,
    #[serde(default)]
    weight: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PluginConfig {
    name: String,
    #[serde(default)]
    args: Option<FitArgs>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FitArgs {
    #[serde(default)]
    scoring_strategy: Option<ScoringStrategy>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScoringStrategy {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    resources: Vec<ResourceWeight>,
    #[serde(default)]
    requested_to_capacity_ratio: Option<Ratio>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResourceWeight {
    name: String,
    #[serde(default = "one")]
    weight: i64,
}

fn one() -> i64 {
    1
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Ratio {
    shape: Vec<Point>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Point {
    utilization: i64,
    score: i64,
}

fn fail(field: impl Into<String>, message: impl Into<String>) -> ProfileError {
    ProfileError {
        field: field.into(),
        message: message.into(),
    }
}

/// Reads the profiles of a KubeSchedulerConfiguration document.
pub fn parse(text: &str) -> Result<Vec<Profile>, ProfileError> {
    let file: File = serde_saphyr::from_str(text).map_err(|e| fail("(document)", e.to_string()))?;
    if file.api_version != "kubescheduler.config.k8s.io/v1" {
        return Err(fail(
            "apiVersion",
            format!(
                "must be kubescheduler.config.k8s.io/v1, not {:?}",
                file.api_version
            ),
        ));
    }
    if file.kind != "KubeSchedulerConfiguration" {
        return Err(fail(
            "kind",
            format!("must be KubeSchedulerConfiguration, not {:?}", file.kind),
        ));
    }
    let _ = file.parallelism;
    let check_percentage = |field: &str, value: Option<u32>| match value {
        Some(p) if p > 100 => Err(fail(field, format!("must be at most 100, is {p}"))),
        other => Ok(other),
    };
    let global = check_percentage(
        "percentageOfNodesToScore",
        file.percentage_of_nodes_to_score,
    )?;
    let file_profiles = if file.profiles.is_empty() {
        vec![FileProfile {
            scheduler_name: None,
            plugins: None,
            plugin_config: Vec::new(),
            percentage_of_nodes_to_score: None,
        }]
    } else {
        file.profiles
    };
    let mut profiles: Vec<Profile> = Vec::new();
    for (i, fp) in file_profiles.into_iter().enumerate() {
        let at = |field: &str| format!("profiles[{i}].{field}");
        let mut profile = Profile {
            scheduler_name: fp
                .scheduler_name
                .unwrap_or_else(|| "default-scheduler".into()),
            percentage_of_nodes_to_score: check_percentage(
                &at("percentageOfNodesToScore"),
                fp.percentage_of_nodes_to_score,
            )?
            .or(global),
            ..Profile::default()
        };
        if profiles
            .iter()
            .any(|p| p.scheduler_name == profile.scheduler_name)
        {
            return Err(fail(
                at("schedulerName"),
                format!("{:?} is used by another profile", profile.scheduler_name),
            ));
        }
        let score = fp.plugins.and_then(|p| p.score).unwrap_or_default();
        for (j, disabled) in score.disabled.iter().enumerate() {
            if disabled.name == "*" {
                profile.weights.values_mut().for_each(|w| *w = 0);
            } else if profile.weights.contains_key(&disabled.name) {
                profile.weights.insert(disabled.name.clone(), 0);
            } else {
                return Err(fail(
                    at(&format!("plugins.score.disabled[{j}].name")),
                    format!("unknown score plugin {:?}", disabled.name),
                ));
            }
        }
        for (j, enabled) in score.enabled.iter().enumerate() {
            let Some(default) = SCORE_PLUGINS
                .iter()
                .find(|(n, _)| *n == enabled.name)
                .map(|(_, w)| *w)
            else {
                return Err(fail(
                    at(&format!("plugins.score.enabled[{j}].name")),
                    format!("unknown score plugin {:?}", enabled.name),
                ));
            };
            let weight = enabled.weight.unwrap_or(default);
            if !(1..=100).contains(&weight) {
                return Err(fail(
                    at(&format!("plugins.score.enabled[{j}].weight")),
                    format!("must be between 1 and 100, is {weight}"),
                ));
            }
            profile.weights.insert(enabled.name.clone(), weight);
        }
        for (j, config) in fp.plugin_config.into_iter().enumerate() {
            if config.name != "NodeResourcesFit" {
                continue;
            }
            let Some(strategy) = config.args.and_then(|a| a.scoring_strategy) else {
                continue;
            };
            let field = |f: &str| at(&format!("pluginConfig[{j}].args.scoringStrategy.{f}"));
            if !strategy.resources.is_empty() {
                for (k, r) in strategy.resources.iter().enumerate() {
                    if !(1..=100).contains(&r.weight) {
                        return Err(fail(
                            field(&format!("resources[{k}].weight")),
                            format!("must be between 1 and 100, is {}", r.weight),
                        ));
                    }
                }
                profile.resources = strategy
                    .resources
                    .iter()
                    .map(|r| (r.name.clone(), r.weight))
                    .collect();
            }
            profile.strategy = match strategy.kind.as_deref().unwrap_or("LeastAllocated") {
                "LeastAllocated" => Strategy::LeastAllocated,
                "MostAllocated" => Strategy::MostAllocated,
                "RequestedToCapacityRatio" => {
                    let Some(ratio) = strategy.requested_to_capacity_ratio else {
                        return Err(fail(
                            field("requestedToCapacityRatio"),
                            "required for RequestedToCapacityRatio",
                        ));
                    };
                    let mut points = Vec::new();
                    for (k, p) in ratio.shape.iter().enumerate() {
                        if !(0..=100).contains(&p.utilization) || !(0..=10).contains(&p.score) {
                            return Err(fail(
                                field(&format!("requestedToCapacityRatio.shape[{k}]")),
                                "utilization must be 0-100 and score 0-10",
                            ));
                        }
                        if points.last().is_some_and(|(u, _)| *u >= p.utilization) {
                            return Err(fail(
                                field(&format!("requestedToCapacityRatio.shape[{k}].utilization")),
                                "must increase",
                            ));
                        }
                        points.push((p.utilization, p.score));
                    }
                    if points.is_empty() {
                        return Err(fail(
                            field("requestedToCapacityRatio.shape"),
                            "needs at least one point",
                        ));
                    }
                    Strategy::RequestedToCapacityRatio(points)
                }
                other => {
                    return Err(fail(
                        field("type"),
                        format!("unknown scoring strategy {other:?}"),
                    ));
                }
            };
        }
        profiles.push(profile);
    }
    Ok(profiles)
}

/// The score of `utilization` (0–100) on a shape, interpolated, scaled to 0–100.
pub fn shape_score(shape: &[(i64, i64)], utilization: i64) -> i64 {
    let Some(first) = shape.first() else { return 0 };
    if utilization <= first.0 {
        return first.1 * 10;
    }
    for pair in shape.windows(2) {
        let ((u0, s0), (u1, s1)) = (pair[0], pair[1]);
        if utilization <= u1 {
            return (s0 * 10) + (s1 - s0) * 10 * (utilization - u0) / (u1 - u0).max(1);
        }
    }
    shape.last().map_or(0, |(_, s)| s * 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_read_like_kube_scheduler() {
        let text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 20\nprofiles:\n- schedulerName: default-scheduler\n- schedulerName: gpu-packer\n  plugins:\n    score:\n      disabled: [{name: NodeResourcesBalancedAllocation}]\n      enabled: [{name: NodeResourcesFit, weight: 5}]\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: RequestedToCapacityRatio\n        resources: [{name: nvidia.com/gpu, weight: 3}, {name: cpu, weight: 1}]\n        requestedToCapacityRatio:\n          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]\n";
        let profiles = parse(text).expect("valid");
        assert_eq!(profiles.len(), 2);
        assert_eq!(
            profiles[0],
            Profile {
                percentage_of_nodes_to_score: Some(20),
                ..Profile::default()
            }
        );
        let packer = &profiles[1];
        assert_eq!(packer.scheduler_name, "gpu-packer");
        assert_eq!(packer.weight("NodeResourcesBalancedAllocation"), 0);
        assert_eq!(packer.weight("NodeResourcesFit"), 5);
        assert_eq!(
            packer.resources,
            [("nvidia.com/gpu".to_string(), 3), ("cpu".to_string(), 1)]
        );
        assert_eq!(
            packer.strategy,
            Strategy::RequestedToCapacityRatio(vec![(0, 0), (100, 10)])
        );
        assert_eq!(shape_score(&[(0, 0), (100, 10)], 50), 50);
        assert_eq!(shape_score(&[(0, 10), (100, 0)], 25), 75);
    }

    #[test]
    fn model_locality_is_on_by_default_and_configurable() {
        assert_eq!(Profile::default().weight("ModelLocality"), 3);
        let text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: off\n  plugins:\n    score:\n      disabled: [{name: ModelLocality}]\n- schedulerName: heavy\n  plugins:\n    score:\n      enabled: [{name: ModelLocality, weight: 10}]\n";
        let profiles = parse(text).unwrap();
        assert_eq!(profiles[0].weight("ModelLocality"), 0);
        assert_eq!(profiles[1].weight("ModelLocality"), 10);
        assert_eq!(profiles[1].weight("TaintToleration"), 3);
    }

    #[test]
    fn bad_files_name_the_field() {
        let base = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
        let table = [
            (
                "apiVersion: v2\nkind: KubeSchedulerConfiguration\n",
                "apiVersion: must be kubescheduler.config.k8s.io/v1",
            ),
            (
                &format!("{base}percentageOfNodesToScore: 150\n"),
                "percentageOfNodesToScore: must be at most 100, is 150",
            ),
            (
                &format!("{base}profiles: [{{schedulerName: a}}, {{schedulerName: a}}]\n"),
                "profiles[1].schedulerName: \"a\" is used by another profile",
            ),
            (
                &format!(
                    "{base}profiles: [{{plugins: {{score: {{enabled: [{{name: Magic}}]}}}}}}]\n"
                ),
                "profiles[0].plugins.score.enabled[0].name: unknown score plugin \"Magic\"",
            ),
            (
                &format!(
                    "{base}profiles: [{{pluginConfig: [{{name: NodeResourcesFit, args: {{scoringStrategy: {{type: Random}}}}}}]}}]\n"
                ),
                "profiles[0].pluginConfig[0].args.scoringStrategy.type: unknown scoring strategy \"Random\"",
            ),
            (
                &format!(
                    "{base}profiles: [{{pluginConfig: [{{name: NodeResourcesFit, args: {{scoringStrategy: {{type: RequestedToCapacityRatio, requestedToCapacityRatio: {{shape: [{{utilization: 50, score: 1}}, {{utilization: 10, score: 2}}]}}}}}}}}]}}]\n"
                ),
                "shape[1].utilization: must increase",
            ),
            (&format!("{base}bogus: 1\n"), "unknown field"),
        ];
        for (text, want) in table {
            let error = parse(text).expect_err(want).to_string();
            assert!(error.contains(want), "{error} should contain {want}");
        }
    }
}
