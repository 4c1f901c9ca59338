//! Kueue's scheduler-performance generator configuration (`test/performance/scheduler/runner/
//! generator`: `generator.yaml`) and what it expands to: Cohorts of ClusterQueues, one
//! LocalQueue and namespace per ClusterQueue (named as the runner names them), and every
//! Workload with its class, request, priority, runtime and creation time — the k-th Workload of
//! a workload set is created at (k+1) × its creation interval, as the runner's generator sleeps
//! before each create. Kueue's own configurations are bundled ([`BASELINE`], [`LARGE_SCALE`],
//! [`TAS`]). A TAS configuration adds a Topology with its Nodes and a ResourceFlavor with a
//! topology (`queue_topology`), and Workloads of `podCount` pods whose PodSet asks for a
//! topology level; as the runner does, `podCount` counts only with a `tasLevel`.
//!
//! Knows nothing of queueing or time passing: `queue_timeline` replays what this describes.

use serde::Deserialize;
use tessera_model::quantity::Quantity;
use tessera_queue::amount::resource_value;
use tessera_queue::cluster_queue::PreemptionPolicy;

use crate::queue_topology::{
    FlavorConfig, FlavorSpec, NodePlan, PodSetTopology, TopologyConfig, TopologySpec,
};

/// Kueue's `configs/baseline/generator.yaml`.
pub const BASELINE: &str = include_str!("../../../data/kueue-performance/baseline/generator.yaml");
/// Kueue's `configs/large-scale/generator.yaml`.
pub const LARGE_SCALE: &str =
    include_str!("../../../data/kueue-performance/large-scale/generator.yaml");
/// Kueue's `configs/tas/generator.yaml`.
pub const TAS: &str = include_str!("../../../data/kueue-performance/tas/generator.yaml");

/// The only resource the generator requests (`corev1.ResourceCPU`).
pub const CPU: &str = "cpu";

/// What went wrong reading a generator configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScenarioError {
    /// Not YAML of the generator's schema.
    #[error("generator configuration: {0}")]
    Parse(String),
    /// A quantity that does not parse.
    #[error("{field}: {text:?} is not a quantity")]
    Quantity { field: &'static str, text: String },
    /// A preemption policy Kueue does not have.
    #[error("{field}: unknown preemption policy {text:?}")]
    Policy { field: &'static str, text: String },
    /// A TAS flavor whose Topology the configuration does not create (the runner would
    /// create it, and Kueue would keep its ClusterQueues inactive: nothing would run).
    #[error("resourceFlavor.topologyName: no topology {0:?} in the configuration")]
    MissingTopology(String),
}

/// A YAML scalar read as text, as `sigs.k8s.io/yaml` hands numbers to the runner's string
/// fields (`nominalQuota: 20` is the string "20").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Text(pub(crate) String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Text, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Scalar {
            Int(i64),
            Float(f64),
            String(String),
        }
        Ok(Text(match Scalar::deserialize(deserializer)? {
            Scalar::Int(value) => value.to_string(),
            Scalar::Float(value) => value.to_string(),
            Scalar::String(value) => value,
        }))
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkloadTemplateSpec {
    class_name: String,
    runtime_ms: u64,
    priority: i32,
    request: Text,
    #[serde(default)]
    pod_count: i32,
    #[serde(default)]
    tas_constraint: String,
    #[serde(default)]
    tas_level: String,
    #[serde(default)]
    slice_size: i32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkloadsSetSpec {
    count: usize,
    creation_interval_ms: u64,
    workloads: Vec<WorkloadTemplateSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueuesSetSpec {
    class_name: String,
    count: usize,
    nominal_quota: Text,
    #[serde(default)]
    borrowing_limit: Option<Text>,
    #[serde(default)]
    reclaim_within_cohort: Option<String>,
    #[serde(default)]
    within_cluster_queue: Option<String>,
    workloads_sets: Vec<WorkloadsSetSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CohortSetSpec {
    class_name: String,
    count: usize,
    queues_sets: Vec<QueuesSetSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigSpec {
    #[serde(default)]
    topology: Option<TopologySpec>,
    #[serde(default)]
    resource_flavor: Option<FlavorSpec>,
    #[serde(default)]
    cohorts: Vec<CohortSetSpec>,
}

/// One Workload class of a workload set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadTemplate {
    /// `className` (the runner's class label).
    pub class: String,
    /// `runtimeMs`: how long it runs once admitted.
    pub runtime_ms: u64,
    /// `priority`.
    pub priority: i32,
    /// `request` of CPU per pod, in milli-CPU.
    pub request_milli: i64,
    /// Pods of its one PodSet `main`: `podCount` (default 1) with a `tasLevel`, else 1.
    pub pod_count: i32,
    /// The PodSet's topology request (`tasConstraint` at `tasLevel`).
    pub topology: Option<PodSetTopology>,
}

impl WorkloadTemplate {
    /// The CPU of all its pods, milli-CPU.
    pub fn total_milli(&self) -> i64 {
        self.request_milli.saturating_mul(i64::from(self.pod_count))
    }
}

/// A workload set: `count` rounds of its templates, one creation every interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadsSet {
    /// `count`.
    pub count: usize,
    /// `creationIntervalMs`.
    pub creation_interval_ms: u64,
    /// `workloads`.
    pub templates: Vec<WorkloadTemplate>,
}

/// A ClusterQueue class: `count` ClusterQueues per Cohort with the same quota, policy and
/// workload sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuesSet {
    /// `className`.
    pub class: String,
    /// `count`.
    pub count: usize,
    /// `nominalQuota` of CPU, milli-CPU.
    pub nominal_milli: i64,
    /// `borrowingLimit` of CPU, milli-CPU (`None`: unlimited).
    pub borrowing_limit_milli: Option<i64>,
    /// `reclaimWithinCohort`.
    pub reclaim_within_cohort: PreemptionPolicy,
    /// `withinClusterQueue`.
    pub within_cluster_queue: PreemptionPolicy,
    /// `workloadsSets`.
    pub workloads_sets: Vec<WorkloadsSet>,
}

impl QueuesSet {
    /// How many Workloads each of its ClusterQueues gets.
    pub fn workloads_per_queue(&self) -> usize {
        self.workloads_sets
            .iter()
            .map(|w| w.count * w.templates.len())
            .sum()
    }
}

/// A Cohort class: `count` Cohorts, each with every queue set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CohortSet {
    /// `className`.
    pub class: String,
    /// `count`.
    pub count: usize,
    /// `queuesSets`.
    pub queues_sets: Vec<QueuesSet>,
}

/// A generator configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// `topology` (TAS configurations).
    pub topology: Option<TopologyConfig>,
    /// `resourceFlavor` (`rf` without topology when absent).
    pub flavor: FlavorConfig,
    /// `cohorts`.
    pub cohorts: Vec<CohortSet>,
}

fn milli_cpu(field: &'static str, text: &Text) -> Result<i64, ScenarioError> {
    let quantity: Quantity = text.0.parse().map_err(|_| ScenarioError::Quantity {
        field,
        text: text.0.clone(),
    })?;
    Ok(resource_value(CPU, &quantity))
}

fn policy(field: &'static str, text: Option<&str>) -> Result<PreemptionPolicy, ScenarioError> {
    match text.unwrap_or_default() {
        "" | "Never" => Ok(PreemptionPolicy::Never),
        "LowerPriority" => Ok(PreemptionPolicy::LowerPriority),
        "LowerOrNewerEqualPriority" => Ok(PreemptionPolicy::LowerOrNewerEqualPriority),
        "Any" => Ok(PreemptionPolicy::Any),
        other => Err(ScenarioError::Policy {
            field,
            text: other.to_owned(),
        }),
    }
}

impl GeneratorConfig {
    /// Reads a `generator.yaml`.
    pub fn parse(yaml: &str) -> Result<GeneratorConfig, ScenarioError> {
        let spec: ConfigSpec =
            serde_saphyr::from_str(yaml).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        if spec.cohorts.is_empty() {
            return Err(ScenarioError::Parse(
                "config must contain at least one cohort".into(),
            ));
        }
        let cohorts = spec
            .cohorts
            .into_iter()
            .map(|cohort| {
                let queues_sets = cohort
                    .queues_sets
                    .into_iter()
                    .map(queues_set)
                    .collect::<Result<_, _>>()?;
                Ok(CohortSet {
                    class: cohort.class_name,
                    count: cohort.count,
                    queues_sets,
                })
            })
            .collect::<Result<_, ScenarioError>>()?;
        let topology = spec.topology.map(TopologyConfig::parse).transpose()?;
        let flavor = FlavorConfig::parse(spec.resource_flavor)?;
        if let Some(name) = &flavor.topology_name
            && topology.as_ref().is_none_or(|t| t.name != *name)
        {
            return Err(ScenarioError::MissingTopology(name.clone()));
        }
        Ok(GeneratorConfig {
            topology,
            flavor,
            cohorts,
        })
    }

    /// The same configuration with every workload set's count scaled by `fraction` (rounded
    /// up, at least one): a smaller run of the same shape.
    pub fn scaled(&self, fraction: f64) -> GeneratorConfig {
        let mut scaled = self.clone();
        let sets = scaled
            .cohorts
            .iter_mut()
            .flat_map(|c| c.queues_sets.iter_mut())
            .flat_map(|q| q.workloads_sets.iter_mut());
        for set in sets {
            let count = (set.count as f64 * fraction.max(0.0)).ceil();
            set.count = (count as usize).clamp(1, set.count.max(1));
        }
        scaled
    }

    /// How many Workloads the runner creates.
    pub fn workloads(&self) -> usize {
        self.cohorts
            .iter()
            .map(|c| {
                c.count
                    * c.queues_sets
                        .iter()
                        .map(|q| q.count * q.workloads_per_queue())
                        .sum::<usize>()
            })
            .sum()
    }

    /// How many ClusterQueues the runner creates.
    pub fn cluster_queues(&self) -> usize {
        self.cohorts
            .iter()
            .map(|c| c.count * c.queues_sets.iter().map(|q| q.count).sum::<usize>())
            .sum()
    }

    /// The Workload classes in first-seen order.
    pub fn workload_classes(&self) -> Vec<String> {
        let mut classes: Vec<String> = Vec::new();
        let templates = self
            .cohorts
            .iter()
            .flat_map(|c| &c.queues_sets)
            .flat_map(|q| &q.workloads_sets)
            .flat_map(|w| &w.templates);
        for template in templates {
            if !classes.contains(&template.class) {
                classes.push(template.class.clone());
            }
        }
        classes
    }
}

/// A template as `generateWlSet` builds its Workload: with a `tasLevel`, one PodSet of
/// `podCount` pods (1 when unset) and the constraint's topology request; without, one pod.
fn workload_template(spec: WorkloadTemplateSpec) -> Result<WorkloadTemplate, ScenarioError> {
    let tas = !spec.tas_level.is_empty();
    if tas && spec.pod_count < 0 {
        return Err(ScenarioError::Parse(format!(
            "workload class {}: podCount {} is negative",
            spec.class_name, spec.pod_count
        )));
    }
    Ok(WorkloadTemplate {
        request_milli: milli_cpu("request", &spec.request)?,
        pod_count: if tas && spec.pod_count > 0 {
            spec.pod_count
        } else {
            1
        },
        topology: tas
            .then(|| {
                PodSetTopology::from_constraint(
                    &spec.tas_constraint,
                    &spec.tas_level,
                    spec.slice_size,
                )
            })
            .flatten(),
        class: spec.class_name,
        runtime_ms: spec.runtime_ms,
        priority: spec.priority,
    })
}

fn queues_set(spec: QueuesSetSpec) -> Result<QueuesSet, ScenarioError> {
    let workloads_sets = spec
        .workloads_sets
        .into_iter()
        .map(|set| {
            let templates = set
                .workloads
                .into_iter()
                .map(workload_template)
                .collect::<Result<_, _>>()?;
            Ok(WorkloadsSet {
                count: set.count,
                creation_interval_ms: set.creation_interval_ms,
                templates,
            })
        })
        .collect::<Result<_, ScenarioError>>()?;
    Ok(QueuesSet {
        nominal_milli: milli_cpu("nominalQuota", &spec.nominal_quota)?,
        borrowing_limit_milli: spec
            .borrowing_limit
            .as_ref()
            .map(|limit| milli_cpu("borrowingLimit", limit))
            .transpose()?,
        reclaim_within_cohort: policy(
            "reclaimWithinCohort",
            spec.reclaim_within_cohort.as_deref(),
        )?,
        within_cluster_queue: policy("withinClusterQueue", spec.within_cluster_queue.as_deref())?,
        class: spec.class_name,
        count: spec.count,
        workloads_sets,
    })
}

/// One ClusterQueue as the runner creates it (`generateQueue`), with its LocalQueue and
/// namespace of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterQueuePlan {
    /// `<class>-<queueSetIdx>-<queueIdx>-<cohort>`.
    pub name: String,
    /// `<cohortClass>-<cohortIdx>`.
    pub cohort: String,
    /// Its queue set (quota, policy, workload sets).
    pub set: QueuesSet,
}

/// One Workload as the runner creates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadPlan {
    /// Index of its ClusterQueue in [`Plan::cluster_queues`].
    pub cluster_queue: usize,
    /// `<class>-<workloadSetIdx>-<round>-<templateIdx>`.
    pub name: String,
    /// Milliseconds after the generator started.
    pub created_ms: u64,
    /// Class, request, priority, runtime.
    pub template: WorkloadTemplate,
}

/// The Topology object and its Nodes (TAS configurations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyPlan {
    /// The Topology's name.
    pub name: String,
    /// Its levels' node labels, top first.
    pub levels: Vec<String>,
    /// The Nodes, in the runner's order.
    pub nodes: Vec<NodePlan>,
}

/// Everything the runner creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The ResourceFlavor every ClusterQueue quotes.
    pub flavor: FlavorConfig,
    /// The Topology with its Nodes, when the configuration has one.
    pub topology: Option<TopologyPlan>,
    /// ClusterQueues in creation order.
    pub cluster_queues: Vec<ClusterQueuePlan>,
    /// Workloads by creation time (ties in ClusterQueue, then workload-set order).
    pub workloads: Vec<WorkloadPlan>,
}

impl GeneratorConfig {
    /// What the runner's generator creates from this configuration.
    pub fn plan(&self) -> Plan {
        let mut cluster_queues = Vec::new();
        let mut workloads = Vec::new();
        for cohort_set in &self.cohorts {
            for cohort_idx in 0..cohort_set.count {
                let cohort = format!("{}-{cohort_idx}", cohort_set.class);
                for (set_idx, set) in cohort_set.queues_sets.iter().enumerate() {
                    for queue_idx in 0..set.count {
                        let index = cluster_queues.len();
                        cluster_queues.push(ClusterQueuePlan {
                            name: format!("{}-{set_idx}-{queue_idx}-{cohort}", set.class),
                            cohort: cohort.clone(),
                            set: set.clone(),
                        });
                        workloads.extend(set_workloads(index, set));
                    }
                }
            }
        }
        workloads.sort_by_key(|w| w.created_ms);
        Plan {
            flavor: self.flavor.clone(),
            topology: self.topology.as_ref().map(|topology| TopologyPlan {
                name: topology.name.clone(),
                levels: topology.level_labels(),
                nodes: topology.nodes(),
            }),
            cluster_queues,
            workloads,
        }
    }
}

fn set_workloads(cluster_queue: usize, set: &QueuesSet) -> Vec<WorkloadPlan> {
    let mut workloads = Vec::new();
    for (set_idx, wl_set) in set.workloads_sets.iter().enumerate() {
        let mut created_ms = 0;
        for round in 0..wl_set.count {
            for (template_idx, template) in wl_set.templates.iter().enumerate() {
                created_ms += wl_set.creation_interval_ms;
                workloads.push(WorkloadPlan {
                    cluster_queue,
                    name: format!("{}-{set_idx}-{round}-{template_idx}", template.class),
                    created_ms,
                    template: template.clone(),
                });
            }
        }
    }
    workloads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kueue_configurations_expand_to_the_documented_sizes() {
        // (config, ClusterQueues, Workloads, classes, last creation ms)
        let cases: &[(&str, usize, usize, &[&str], u64)] = &[
            (BASELINE, 30, 15_000, &["small", "medium", "large"], 60_000),
            (
                LARGE_SCALE,
                1_000,
                50_000,
                &["small", "medium", "large"],
                3_300,
            ),
            (
                TAS,
                30,
                15_000,
                &[
                    "small-required-rack",
                    "small-preferred-rack",
                    "small-balanced-rack",
                    "medium-required-rack",
                    "medium-preferred-rack",
                    "medium-balanced-rack",
                    "large-required-rack",
                    "large-preferred-rack",
                    "large-balanced-rack",
                ],
                20_400,
            ),
        ];
        for (yaml, queues, count, classes, last) in cases {
            let config = GeneratorConfig::parse(yaml).unwrap();
            assert_eq!(config.cluster_queues(), *queues);
            assert_eq!(config.workloads(), *count);
            assert_eq!(config.workload_classes(), *classes);
            let plan = config.plan();
            assert_eq!(plan.cluster_queues.len(), *queues);
            assert_eq!(plan.workloads.len(), *count);
            assert_eq!(plan.workloads.last().map(|w| w.created_ms), Some(*last));
        }
    }

    #[test]
    fn baseline_reads_quotas_policies_and_classes_in_canonical_units() {
        let config = GeneratorConfig::parse(BASELINE).unwrap();
        let set = &config.cohorts[0].queues_sets[0];
        assert_eq!(set.nominal_milli, 20_000);
        assert_eq!(set.borrowing_limit_milli, Some(100_000));
        assert_eq!(set.reclaim_within_cohort, PreemptionPolicy::Any);
        assert_eq!(set.within_cluster_queue, PreemptionPolicy::LowerPriority);
        let large = &set.workloads_sets[2];
        assert_eq!((large.count, large.creation_interval_ms), (50, 1_200));
        assert_eq!(
            large.templates[0],
            WorkloadTemplate {
                class: "large".into(),
                runtime_ms: 1_000,
                priority: 200,
                request_milli: 20_000,
                pod_count: 1,
                topology: None,
            }
        );
        assert_eq!(config.flavor, FlavorConfig::default());
        assert_eq!(config.topology, None);
        let plan = config.plan();
        assert_eq!(plan.cluster_queues[7].name, "cq-0-1-cohort-1");
        assert_eq!(plan.cluster_queues[7].cohort, "cohort-1");
        let first = &plan.workloads[0];
        assert_eq!(
            (first.name.as_str(), first.created_ms, first.cluster_queue),
            ("small-0-0-0", 100, 0)
        );
    }

    #[test]
    fn tas_expands_to_kueues_topology_nodes_flavor_and_class_mix() {
        const RACK: &str = "cloud.provider.com/topology-rack";
        let config = GeneratorConfig::parse(TAS).unwrap();
        let plan = config.plan();
        let topology = plan.topology.as_ref().unwrap();
        assert_eq!(topology.name, "default-topology");
        assert_eq!(
            topology.levels,
            [
                "cloud.provider.com/topology-block",
                RACK,
                "kubernetes.io/hostname"
            ]
        );
        assert_eq!(topology.nodes.len(), 640);
        let racks: std::collections::BTreeSet<&str> = topology
            .nodes
            .iter()
            .map(|n| n.labels[RACK].as_str())
            .collect();
        assert_eq!(racks.len(), 10);
        let last = &topology.nodes[639];
        assert_eq!(topology.nodes[0].name, "node-b0-r0-n0");
        assert_eq!(last.name, "node-b0-r9-n63");
        let labels: Vec<(&str, &str)> = last
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                ("cloud.provider.com/topology-block", "block-0"),
                (RACK, "rack-9"),
                ("kubernetes.io/hostname", "node-63"),
                ("kueue.x-k8s.io/performance-scheduler-cleanup", "true"),
                ("tas-node-group", "tas"),
            ]
        );
        let allocatable: Vec<(&str, i64)> = last
            .allocatable
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(
            allocatable,
            [("cpu", 96_000), ("memory", 256 << 30), ("pods", 110)]
        );
        assert_eq!(plan.flavor.name, "tas-flavor");
        assert_eq!(
            plan.flavor.topology_name.as_deref(),
            Some("default-topology")
        );
        assert_eq!(
            plan.flavor.node_labels,
            [("tas-node-group".to_owned(), "tas".to_owned())].into()
        );
        // (class, Workloads, pods, milli-CPU per pod, topology request)
        let balanced = |size| PodSetTopology::Balanced {
            level: RACK.into(),
            slice_size: Some(size),
        };
        let required = || PodSetTopology::Required(RACK.into());
        let preferred = || PodSetTopology::Preferred(RACK.into());
        let mix = [
            ("small-required-rack", 3_600, 2, 500, required()),
            ("small-preferred-rack", 3_600, 2, 500, preferred()),
            ("small-balanced-rack", 3_300, 2, 500, balanced(1)),
            ("medium-required-rack", 1_020, 4, 1_250, required()),
            ("medium-preferred-rack", 990, 4, 1_250, preferred()),
            ("medium-balanced-rack", 990, 4, 1_250, balanced(2)),
            ("large-required-rack", 510, 8, 2_500, required()),
            ("large-preferred-rack", 510, 8, 2_500, preferred()),
            ("large-balanced-rack", 480, 8, 2_500, balanced(4)),
        ];
        for (class, count, pods, milli, topology) in mix {
            let members: Vec<&WorkloadTemplate> = plan
                .workloads
                .iter()
                .map(|w| &w.template)
                .filter(|t| t.class == class)
                .collect();
            assert_eq!(members.len(), count, "{class}");
            let template = members[0];
            assert_eq!(
                (
                    template.pod_count,
                    template.request_milli,
                    template.topology.as_ref()
                ),
                (pods, milli, Some(&topology)),
                "{class}"
            );
        }
    }

    #[test]
    fn pod_count_counts_only_with_a_tas_level() {
        let yaml = |template: &str| {
            format!(
                "cohorts: [{{className: c, count: 1, queuesSets: [{{className: q, count: 1, nominalQuota: 1, workloadsSets: [{{count: 1, creationIntervalMs: 1, workloads: [{{className: w, runtimeMs: 1, priority: 0, request: 250m, {template}}}]}}]}}]}}]"
            )
        };
        // (template fields, pods, topology)
        let cases: Vec<(&str, i32, Option<PodSetTopology>)> = vec![
            ("podCount: 4", 1, None),
            (
                "podCount: 4, tasConstraint: required, tasLevel: r",
                4,
                Some(PodSetTopology::Required("r".into())),
            ),
            (
                "tasConstraint: preferred, tasLevel: r",
                1,
                Some(PodSetTopology::Preferred("r".into())),
            ),
            ("podCount: 3, tasConstraint: any, tasLevel: r", 3, None),
        ];
        for (fields, pods, topology) in cases {
            let config = GeneratorConfig::parse(&yaml(fields)).unwrap();
            let template = &config.cohorts[0].queues_sets[0].workloads_sets[0].templates[0];
            assert_eq!(
                (template.pod_count, &template.topology),
                (pods, &topology),
                "{fields}"
            );
            assert_eq!(template.total_milli(), 250 * i64::from(pods));
        }
    }

    #[test]
    fn scaling_keeps_the_shape_with_at_least_one_round() {
        let config = GeneratorConfig::parse(BASELINE).unwrap();
        // (fraction, workloads per ClusterQueue: small + medium + large)
        let cases: &[(f64, usize)] = &[(1.0, 500), (0.1, 35 + 10 + 5), (0.01, 4 + 1 + 1), (0.0, 3)];
        for (fraction, per_queue) in cases {
            assert_eq!(
                config.scaled(*fraction).workloads(),
                30 * per_queue,
                "{fraction}"
            );
        }
    }

    #[test]
    fn malformed_configurations_are_errors() {
        let cases: &[(&str, &str)] = &[
            ("cohorts: []", "at least one cohort"),
            ("cohorts: 3", "generator configuration"),
            (
                "cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1, nominalQuota: lots, workloadsSets: []}]}]",
                "nominalQuota: \"lots\" is not a quantity",
            ),
            (
                "cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1, nominalQuota: 1, withinClusterQueue: Sometimes, workloadsSets: []}]}]",
                "withinClusterQueue: unknown preemption policy \"Sometimes\"",
            ),
            (
                "topology: {name: t, levels: [{name: rack, count: 2, nodeLabel: r}]}\ncohorts: [{className: c, count: 1, queuesSets: []}]",
                "topology must have at least 2 levels, got 1",
            ),
            (
                "topology: {name: t, levels: [{name: r, count: 1, nodeLabel: r}, {name: n, count: 1, nodeLabel: h, capacity: {cpu: many}}]}\ncohorts: [{className: c, count: 1, queuesSets: []}]",
                "capacity.cpu: \"many\" is not a quantity",
            ),
            (
                "resourceFlavor: {name: f, topologyName: t}\ncohorts: [{className: c, count: 1, queuesSets: []}]",
                "resourceFlavor.nodeLabel is required when TAS is enabled",
            ),
            (
                "resourceFlavor: {name: f, nodeLabel: g, topologyName: t}\ncohorts: [{className: c, count: 1, queuesSets: []}]",
                "no topology \"t\" in the configuration",
            ),
            (
                "cohorts: [{className: c, count: 1, queuesSets: [{className: q, count: 1, nominalQuota: 1, workloadsSets: [{count: 1, creationIntervalMs: 1, workloads: [{className: w, runtimeMs: 1, priority: 0, request: 1, podCount: -2, tasLevel: r}]}]}]}]",
                "podCount -2 is negative",
            ),
        ];
        for (yaml, message) in cases {
            let error = GeneratorConfig::parse(yaml).unwrap_err().to_string();
            assert!(error.contains(message), "{yaml}: {error}");
        }
    }
}
