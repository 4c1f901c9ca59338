//! `tessera maintain plan -f plan.yaml`: a dry run of a `MaintenancePlan` against a cluster. It
//! reads the plan (each mistake named with its file, line and field), lists the cluster's nodes,
//! pods and PodDisruptionBudgets and the API server's version, and prints what
//! `tessera_maintenance::preflight` decides: the pool, the stages (canary, then batches) and the
//! verdict — or every reason the plan would be refused (a budget by `namespace/name`, the
//! `maxUnavailable` limit, a MIG layout that does not fit, a kubelet version skew).
//!
//! `plan` reads only: nothing is cordoned, evicted or stored. `tessera maintain apply -f` stores
//! the plan as a `MaintenancePlan` object (checked first, with the same file:line:field errors),
//! which the maintenance controller (`tessera_controllers::maintenance`) runs; `status [NAME]`
//! prints what the controller recorded, `pause NAME` / `resume NAME` set `spec.paused`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::check::list_json;
use anyhow::Context;
use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;
use tessera_maintenance::{Plan, Refused, Rollout, facts, plan_from_document, preflight};

/// `tessera maintain` subcommands.
#[derive(Subcommand, Debug)]
pub enum MaintainCommand {
    /// Dry run: the plan's pool, stages and batches, and the pre-flight verdict.
    Plan(PlanArgs),
    /// Store the plan (create or update the MaintenancePlan); the controller runs it.
    Apply(PlanArgs),
    /// The plans' phases, or one plan's stages and nodes.
    Status(NamedArgs),
    /// Finish the nodes in progress and start no new one.
    Pause(NamedArgs),
    /// Let a paused plan go on.
    Resume(NamedArgs),
}

/// Arguments of `tessera maintain status|pause|resume`.
#[derive(Args, Debug)]
pub struct NamedArgs {
    /// The cluster to read.
    #[command(flatten)]
    pub cluster: crate::client::ClusterArgs,
    /// The plan's name (`status` without one lists every plan).
    pub name: Option<String>,
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
            // Only pools with VM hosts say how each model goes (bare metal is the default).
            if r.models.iter().any(|m| m.plan.machine.is_vm()) {
                for m in &r.models {
                    let _ = writeln!(
                        out,
                        "{} ({}): {}",
                        m.plan.machine.as_str(),
                        m.nodes.join(", "),
                        m.plan.steps.join(" → ")
                    );
                    if let Some(note) = &m.plan.note {
                        let _ = writeln!(out, "  {note}");
                    }
                }
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
    match command {
        MaintainCommand::Plan(args) => dry_run(args).await,
        MaintainCommand::Apply(args) => apply(args).await,
        MaintainCommand::Status(args) => show_status(args).await,
        MaintainCommand::Pause(args) => set_paused(args, true).await,
        MaintainCommand::Resume(args) => set_paused(args, false).await,
    }
}

fn plans(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &tessera_controllers::maintenance::plan_resource(),
    )
}

async fn apply(args: &PlanArgs) -> anyhow::Result<bool> {
    let plan = read_plan(&args.file)?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("read {}", args.file.display()))?;
    let doc: Value = serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not a YAML document: {e}", args.file.display()))?;
    let client = crate::client::connect(&args.cluster).await?;
    let api = plans(&client);
    let object: DynamicObject = serde_json::from_value(doc.clone())
        .with_context(|| format!("{}: not an object", args.file.display()))?;
    let verb = match api.get_opt(&plan.name).await? {
        None => {
            api.create(&PostParams::default(), &object).await?;
            "created"
        }
        Some(_) => {
            let patch = serde_json::json!({"spec": doc.get("spec")});
            api.patch(&plan.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            "configured"
        }
    };
    crate::output::emit(&format!(
        "maintenanceplan.tessera.dev/{} {verb}\n",
        plan.name
    ))?;
    Ok(true)
}

/// One plan's status as text: the phase line, then each stage's nodes and their states.
pub fn render_status(object: &Value) -> String {
    let text = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or("");
    let mut out = String::new();
    let phase = if text("/status/phase").is_empty() {
        "Pending"
    } else {
        text("/status/phase")
    };
    let _ = write!(
        out,
        "MaintenancePlan {} ({}): {phase}",
        text("/metadata/name"),
        text("/status/kind")
    );
    if !text("/status/progress").is_empty() {
        let _ = write!(out, ", {} node(s) done", text("/status/progress"));
    }
    if !text("/status/stage").is_empty() {
        let _ = write!(out, ", stage {}", text("/status/stage"));
    }
    out.push('\n');
    if !text("/status/reason").is_empty() {
        let _ = writeln!(out, "reason: {}", text("/status/reason"));
    }
    for node in object
        .pointer("/status/nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |k: &str| node.get(k).and_then(Value::as_str).unwrap_or("");
        let state = if field("state").is_empty() {
            "waiting"
        } else {
            field("state")
        };
        let _ = writeln!(out, "  {} {}: {state}", field("stage"), field("name"));
    }
    out
}

async fn show_status(args: &NamedArgs) -> anyhow::Result<bool> {
    let client = crate::client::connect(&args.cluster).await?;
    let api = plans(&client);
    let objects: Vec<DynamicObject> = match &args.name {
        Some(name) => vec![
            api.get_opt(name)
                .await?
                .ok_or_else(|| anyhow::anyhow!("maintenanceplan {name:?} not found"))?,
        ],
        None => api.list(&Default::default()).await?.items,
    };
    let mut out = String::new();
    for object in objects {
        out.push_str(&render_status(&serde_json::to_value(&object)?));
    }
    if out.is_empty() {
        out.push_str("No maintenance plans.\n");
    }
    crate::output::emit(&out)?;
    Ok(true)
}

async fn set_paused(args: &NamedArgs, paused: bool) -> anyhow::Result<bool> {
    let name = args
        .name
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("name the plan"))?;
    let client = crate::client::connect(&args.cluster).await?;
    let patch = serde_json::json!({"spec": {"paused": paused}});
    plans(&client)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("maintenanceplan {name}"))?;
    let verb = if paused { "paused" } else { "resumed" };
    crate::output::emit(&format!("maintenanceplan.tessera.dev/{name} {verb}\n"))?;
    Ok(true)
}

async fn dry_run(args: &PlanArgs) -> anyhow::Result<bool> {
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

#[cfg(test)]
mod tests {
    use super::render_status;
    use serde_json::json;

    #[test]
    fn status_renders_phase_progress_reason_and_nodes() {
        let table = [
            (
                json!({"metadata": {"name": "p"}}),
                "MaintenancePlan p (): Pending\n",
            ),
            (
                json!({"metadata": {"name": "p"}, "status": {"phase": "Progressing",
                    "kind": "driver-upgrade", "progress": "1/2", "stage": "batch-1",
                    "nodes": [{"name": "a", "stage": "canary", "state": "upgrade-done"},
                              {"name": "b", "stage": "batch-1", "state": ""}]}}),
                "MaintenancePlan p (driver-upgrade): Progressing, 1/2 node(s) done, stage batch-1\n  canary a: upgrade-done\n  batch-1 b: waiting\n",
            ),
            (
                json!({"metadata": {"name": "p"}, "status": {"phase": "Halted",
                    "kind": "driver-upgrade", "progress": "1/2",
                    "reason": "validation failed on node b in stage batch-1"}}),
                "MaintenancePlan p (driver-upgrade): Halted, 1/2 node(s) done\nreason: validation failed on node b in stage batch-1\n",
            ),
        ];
        for (object, want) in table {
            assert_eq!(render_status(&object), want);
        }
    }
}
