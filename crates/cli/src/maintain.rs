//! `tessera maintain plan -f plan.yaml`: a dry run of a `MaintenancePlan` against a cluster. It
//! reads the plan (each mistake named with its file, line and field), lists the cluster's nodes,
//! pods and PodDisruptionBudgets and the API server's version, and prints what
//! `tessera_maintenance::preflight` decides: the pool, the stages (canary, then batches) and the
//! verdict — or every reason the plan would be refused (a budget by `namespace/name`, the
//! `maxUnavailable` limit, a MIG layout that does not fit, a kubelet version skew).
//!
//! It reads only: nothing is cordoned, evicted or stored. Running a plan (the `MaintenancePlan`
//! custom resource and its controller) is not here yet.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::check::list_json;
use anyhow::Context;
use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::Value;
use tessera_maintenance::{Plan, Refused, Rollout, facts, plan_from_document, preflight};

/// `tessera maintain` subcommands.
#[derive(Subcommand, Debug)]
pub enum MaintainCommand {
    /// Dry run: the plan's pool, stages and batches, and the pre-flight verdict.
    Plan(PlanArgs),
}

/// Arguments of `tessera maintain plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The cluster to read.
    #[command(flatten)]
    pub cluster: crate::client::ClusterArgs,
    /// The MaintenancePlan file (YAML).
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
}

/// Reads and checks a plan file; errors carry the file, the line and the field.
pub fn read_plan(path: &Path) -> anyhow::Result<Plan> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let doc: Value = serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not a YAML document: {e}", path.display()))?;
    plan_from_document(&doc).map_err(|errors| {
        let lines: Vec<String> = errors
            .iter()
            .map(|e| {
                let line = tessera_model::yaml_location::line_of(&text, &e.field)
                    .map_or(String::new(), |l| format!(":{l}"));
                format!("{}{line}: {e}", path.display())
            })
            .collect();
        anyhow::anyhow!("invalid MaintenancePlan:\n{}", lines.join("\n"))
    })
}

/// The dry run's text: the plan's stages, or every refusal.
pub fn render(plan: &Plan, verdict: &Result<Rollout, Refused>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "MaintenancePlan {} ({})", plan.name, plan.kind.name());
    match verdict {
        Ok(r) => {
            let nodes: usize = r.stages.iter().map(|s| s.nodes.len()).sum();
            let _ = writeln!(
                out,
                "{nodes} node(s) to maintain in {} stage(s), batches of {}, maxUnavailable {}",
                r.stages.len(),
                r.batch_size,
                r.max_unavailable
            );
            if !r.already_applied.is_empty() {
                let _ = writeln!(out, "already done: {}", r.already_applied.join(", "));
            }
            for s in &r.stages {
                let _ = writeln!(out, "stage {}: {}", s.name, s.nodes.join(", "));
            }
            out.push_str("pre-flight: passed\n");
        }
        Err(Refused(reasons)) => {
            out.push_str("pre-flight: refused\n");
            for r in reasons {
                let _ = writeln!(out, "  {r}");
            }
        }
    }
    out
}

/// Runs a `tessera maintain` subcommand; `Ok(false)` when the plan is refused.
pub async fn run(command: &MaintainCommand) -> anyhow::Result<bool> {
    let MaintainCommand::Plan(args) = command;
    let plan = read_plan(&args.file)?;
    let client = crate::client::connect(&args.cluster).await?;
    let version = client
        .apiserver_version()
        .await
        .context("read the API server's version")?;
    let nodes = list_json::<Node>(&client).await?;
    let pods = list_json::<Pod>(&client).await?;
    let pdbs = list_json::<PodDisruptionBudget>(&client).await?;
    let catalog = tessera_devices::Catalog::built_in().context("the built-in GPU catalog")?;
    let objects = facts::Objects::index(&nodes, &pods);
    let node_facts = objects.node_facts(&plan, &catalog);
    let budgets: Vec<_> = pdbs.iter().map(|p| facts::budget(p, &objects)).collect();
    let verdict = preflight(
        &plan,
        &node_facts,
        &budgets,
        &catalog,
        Some(&version.git_version),
    );
    crate::output::emit(&render(&plan, &verdict))?;
    Ok(verdict.is_ok())
}
