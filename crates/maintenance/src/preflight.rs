//! Pre-flight and staging: which nodes of the pool a plan touches, in which stages (a canary,
//! then batches), and whether it may start at all. A plan is refused before it starts when a
//! stage would evict more pods of a PodDisruptionBudget at once than the budget's
//! `disruptionsAllowed`, when its batches cannot fit under `maxUnavailable`, when the MIG layout
//! does not fit a node's GPU model (`tessera-devices`' planner), or when the kubelet version would
//! break the version-skew policy (`tessera-compat`).
//!
//! Pure: the shell passes the nodes, the budgets (with the pods each selects, as the disruption
//! controller computes them) and the API server version. Knows no label-selector evaluation
//! beyond the plan's `matchLabels`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use tessera_compat::{ClusterFacts, Rule, Version};
use tessera_devices::Catalog;

use crate::plan::{NodeFacts, Plan, PlanKind, applied, mig_profiles_for};
use crate::state::PodRef;
use crate::worker::{WorkerPlan, worker_plan};

/// A PodDisruptionBudget as the disruption controller last computed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub namespace: String,
    pub name: String,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i64,
    /// The pods its selector matches in its namespace.
    pub pods: BTreeSet<PodRef>,
}

/// One stage of the rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// `canary`, `batch-1`, `batch-2`, …
    pub name: String,
    pub nodes: Vec<String>,
}

/// An accepted plan's rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollout {
    pub stages: Vec<Stage>,
    /// Nodes per batch after the canary.
    pub batch_size: usize,
    /// `maxUnavailable` scaled against the pool.
    pub max_unavailable: i64,
    /// Pool nodes that already have the change (no stage).
    pub already_applied: Vec<String>,
    /// What the change is on each worker model of the pool (bare metal, passthrough or vGPU
    /// hosts), with the nodes of each, in node order.
    pub models: Vec<ModelPlan>,
}

/// The nodes of one worker model in a rollout and what the plan does on each of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPlan {
    pub nodes: Vec<String>,
    pub plan: WorkerPlan,
}

/// Why a plan may not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no node matches the plan's nodeSelector {selector}")]
    EmptyPool { selector: String },
    #[error(
        "stage {stage} would evict {pods} pod(s) covered by PodDisruptionBudget {budget} at once (nodes {nodes}), but it allows {allowed} disruption(s){hint}"
    )]
    Budget {
        /// `namespace/name`.
        budget: String,
        stage: String,
        nodes: String,
        pods: usize,
        allowed: i64,
        /// Advice on the batch size, or empty.
        hint: String,
    },
    #[error(
        "{what} of {wanted} node(s) would exceed maxUnavailable {max_unavailable} ({unavailable} node(s) of the pool are unavailable already)"
    )]
    MaxUnavailable {
        /// `batchSize` or `canary`.
        what: String,
        wanted: usize,
        max_unavailable: i64,
        unavailable: i64,
    },
    #[error("node {node}: {message}")]
    Node { node: String, message: String },
    #[error("{0}")]
    Plan(String),
}

/// A refused plan: every reason found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub Vec<Refusal>);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Refused {}

/// The MIG profiles the plan gives `node` (`None` for other kinds or a node without a GPU
/// model); an error names the model and why the layout does not fit.
pub fn target_mig(
    plan: &Plan,
    catalog: &Catalog,
    node: &NodeFacts,
) -> Option<Result<Vec<String>, String>> {
    let PlanKind::MigRepartition { layout } = &plan.kind else {
        return None;
    };
    let Some(model_name) = &node.gpu_model else {
        return Some(Err("has no GPU model; MIG needs one".to_string()));
    };
    let Some(model) = catalog.gpu(model_name) else {
        return Some(Err(format!("GPU model {model_name} is not in the catalog")));
    };
    Some(mig_profiles_for(layout, model).map_err(|e| format!("{model_name}: {e}")))
}

/// The pool's nodes (selected, not a rotation's replacement), sorted by name.
pub fn pool<'n>(plan: &Plan, nodes: &'n [NodeFacts]) -> Vec<&'n NodeFacts> {
    let mut pool: Vec<&NodeFacts> = nodes
        .iter()
        .filter(|n| plan.selects(&n.labels) && !n.is_replacement())
        .collect();
    pool.sort_by(|a, b| a.name.cmp(&b.name));
    pool
}

/// Plans the rollout and runs every pre-flight check. `api_server` (its `gitVersion`) is needed
/// for a `kubernetes-version` plan.
pub fn preflight(
    plan: &Plan,
    nodes: &[NodeFacts],
    budgets: &[Budget],
    catalog: &Catalog,
    api_server: Option<&str>,
) -> Result<Rollout, Refused> {
    let mut refusals = Vec::new();
    let pool = pool(plan, nodes);
    if pool.is_empty() {
        let selector = plan
            .node_selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        return Err(Refused(vec![Refusal::EmptyPool { selector }]));
    }

    // The kind's own checks, and which nodes need the change.
    let mut todo = Vec::new();
    let mut already_applied = Vec::new();
    for n in &pool {
        let target = match target_mig(plan, catalog, n) {
            Some(Err(message)) => {
                refusals.push(Refusal::Node {
                    node: n.name.clone(),
                    message,
                });
                continue;
            }
            Some(Ok(t)) => Some(t),
            None => None,
        };
        if applied(&plan.kind, n, target.as_deref()) {
            already_applied.push(n.name.clone());
        } else {
            todo.push(*n);
        }
    }
    if let PlanKind::KubernetesVersion { version } = &plan.kind {
        refusals.extend(skew_refusals(version, api_server, &todo));
    }
    // What each node's worker model allows, and how it goes.
    let mut models: Vec<ModelPlan> = Vec::new();
    for n in &todo {
        match worker_plan(&plan.kind, n) {
            Err(message) => refusals.push(Refusal::Node {
                node: n.name.clone(),
                message,
            }),
            Ok(p) => match models.iter_mut().find(|m| m.plan == p) {
                Some(m) => m.nodes.push(n.name.clone()),
                None => models.push(ModelPlan {
                    nodes: vec![n.name.clone()],
                    plan: p,
                }),
            },
        }
    }

    // Batch size under maxUnavailable.
    let total = pool.len() as i64;
    let max_unavailable = plan.policy.max_unavailable_of(total);
    let unavailable = pool.iter().filter(|n| n.unschedulable || !n.ready).count() as i64;
    let room = usize::try_from(max_unavailable - unavailable).unwrap_or(0);
    let parallel = match usize::try_from(plan.policy.max_parallel_upgrades) {
        Ok(0) | Err(_) => pool.len(),
        Ok(p) => p,
    };
    let needs_slot = todo.iter().any(|n| !n.unschedulable);
    let mut exceeds = |what: &str, wanted: usize| {
        refusals.push(Refusal::MaxUnavailable {
            what: what.to_string(),
            wanted,
            max_unavailable,
            unavailable,
        })
    };
    let batch_size = match plan.batch_size {
        Some(b) => {
            if b > room && needs_slot {
                exceeds("batchSize", b);
            }
            b
        }
        None => {
            if room == 0 && needs_slot {
                exceeds("a batch", 1);
            }
            parallel.min(room).max(1)
        }
    };
    if plan.canary > room && needs_slot && room > 0 {
        exceeds("canary", plan.canary);
    }

    let stages = stages(&todo, plan.canary, batch_size);
    refusals.extend(budget_refusals(&stages, &todo, budgets));
    if refusals.is_empty() {
        Ok(Rollout {
            stages,
            batch_size,
            max_unavailable,
            already_applied,
            models,
        })
    } else {
        Err(Refused(refusals))
    }
}

/// Splits `todo` (sorted) into a canary stage and batches.
fn stages(todo: &[&NodeFacts], canary: usize, batch: usize) -> Vec<Stage> {
    let names: Vec<String> = todo.iter().map(|n| n.name.clone()).collect();
    let canary = canary.min(names.len());
    let mut stages = Vec::new();
    if canary > 0 {
        stages.push(Stage {
            name: "canary".to_string(),
            nodes: names[..canary].to_vec(),
        });
    }
    for (i, chunk) in names[canary..].chunks(batch.max(1)).enumerate() {
        stages.push(Stage {
            name: format!("batch-{}", i + 1),
            nodes: chunk.to_vec(),
        });
    }
    stages
}

/// Every (stage, budget) where the stage's nodes hold more of the budget's pods than it allows.
/// Linear in the pods on the staged nodes (each pod looked up once per budget it is in).
fn budget_refusals(stages: &[Stage], todo: &[&NodeFacts], budgets: &[Budget]) -> Vec<Refusal> {
    let mut budgets_of: BTreeMap<&PodRef, Vec<usize>> = BTreeMap::new();
    for (i, b) in budgets.iter().enumerate() {
        for p in &b.pods {
            budgets_of.entry(p).or_default().push(i);
        }
    }
    let by_name: BTreeMap<&str, &NodeFacts> = todo.iter().map(|n| (n.name.as_str(), *n)).collect();
    let mut out = Vec::new();
    for stage in stages {
        // Per budget: pods on the stage, and the most on one node.
        let mut counts: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        for name in &stage.nodes {
            let mut on_node: BTreeMap<usize, usize> = BTreeMap::new();
            for p in by_name.get(name.as_str()).map_or(&[][..], |n| &n.pods[..]) {
                for &b in budgets_of.get(&p.pod).map_or(&[][..], Vec::as_slice) {
                    *on_node.entry(b).or_default() += 1;
                }
            }
            for (b, n) in on_node {
                let c = counts.entry(b).or_default();
                c.0 += n;
                c.1 = c.1.max(n);
            }
        }
        for (b, (pods, worst)) in counts {
            let budget = &budgets[b];
            let allowed = budget.disruptions_allowed.max(0);
            if pods as i64 <= allowed {
                continue;
            }
            let hint = if worst as i64 <= allowed && stage.nodes.len() > 1 {
                "; a smaller batchSize would spread them over more stages".to_string()
            } else {
                String::new()
            };
            out.push(Refusal::Budget {
                budget: format!("{}/{}", budget.namespace, budget.name),
                stage: stage.name.clone(),
                nodes: stage.nodes.join(","),
                pods,
                allowed,
                hint,
            });
        }
    }
    out
}

/// The kubelet version skew after the plan, checked with `tessera-compat`'s matrix.
fn skew_refusals(version: &str, api_server: Option<&str>, todo: &[&NodeFacts]) -> Vec<Refusal> {
    let Some(api_server) = api_server else {
        return vec![Refusal::Plan(
            "a kubernetes-version plan needs the API server's version".to_string(),
        )];
    };
    let (Ok(api), Ok(kubelet)) = (Version::parse(api_server), Version::parse(version)) else {
        return vec![Refusal::Plan(format!(
            "cannot compare kubelet {version} with API server {api_server}"
        ))];
    };
    let facts = ClusterFacts {
        api_server: api,
        kubectl: None,
        nodes: todo
            .iter()
            .map(|n| tessera_compat::NodeFacts {
                name: n.name.clone(),
                kubelet: kubelet.clone(),
                driver: None,
                cuda_driver: None,
                gpu_product: None,
                gpu_family: None,
            })
            .collect(),
        gpu_operator: None,
        device_plugin: None,
        dra_driver: None,
        kueue: None,
        dra_apis: Vec::new(),
        containers: Vec::new(),
    };
    tessera_compat::check(&facts, None)
        .into_iter()
        .filter(|c| {
            matches!(
                c.rule,
                Rule::KubeletNewerThanApiServer | Rule::KubeletTooOld
            )
        })
        .map(|c| Refusal::Plan(format!("version skew: {c}")))
        .collect()
}
