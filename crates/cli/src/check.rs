//! `tessera check`: audits of a running cluster's configuration. `check rbac` lists the risky
//! grants the RBAC objects give (`tessera_api::rbac_risk` decides which), each with the binding
//! that gives it; it reads the embedded platform or any cluster the kubeconfig names.
//!
//! It reads only; what to do about a finding is the administrator's call.

use std::fmt::Write as _;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use tessera_api::rbac_risk::{Finding, RbacObjects, findings};

/// `tessera check` subcommands.
#[derive(Subcommand, Debug)]
pub enum CheckCommand {
    /// List risky RBAC grants: cluster-admin, wildcards, cluster-wide Secret reads,
    /// escalate/bind/impersonate, nodes/proxy, token minting — with the binding that gives each.
    Rbac(RbacArgs),
}

/// How findings are printed.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Columns, as kubectl prints tables.
    Table,
    /// One JSON object with a `findings` list.
    Json,
}

/// Arguments of `tessera check rbac`.
#[derive(Args, Debug)]
pub struct RbacArgs {
    /// The cluster to read.
    #[command(flatten)]
    pub cluster: crate::client::ClusterArgs,
    /// Also list the grants of Kubernetes' and Tessera's bootstrap bindings
    /// (`kubernetes.io/bootstrapping: rbac-defaults`), which are hidden by default.
    #[arg(long)]
    pub all: bool,
    /// Only grants to ServiceAccounts (workload identities).
    #[arg(long)]
    pub service_accounts: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Format,
    /// Exit with status 1 when anything is found (for CI gates).
    #[arg(long)]
    pub exit_code: bool,
}

/// Runs a `tessera check` subcommand; `Ok(false)` when `--exit-code` asks for failure.
pub async fn run(command: &CheckCommand) -> anyhow::Result<bool> {
    match command {
        CheckCommand::Rbac(args) => rbac(args).await,
    }
}

/// Every object of a kind, in every namespace, as JSON.
async fn list_json<K>(client: &kube::Client) -> anyhow::Result<Vec<Value>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let list = Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .with_context(|| format!("list {}", K::plural(&Default::default())))?;
    list.items
        .iter()
        .map(|item| serde_json::to_value(item).map_err(Into::into))
        .collect()
}

async fn rbac(args: &RbacArgs) -> anyhow::Result<bool> {
    let client = crate::client::connect(&args.cluster).await?;
    let objects = RbacObjects {
        cluster_roles: list_json::<ClusterRole>(&client).await?,
        roles: list_json::<Role>(&client).await?,
        cluster_role_bindings: list_json::<ClusterRoleBinding>(&client).await?,
        role_bindings: list_json::<RoleBinding>(&client).await?,
    };
    let shown: Vec<Finding> = findings(&objects)
        .into_iter()
        .filter(|f| args.all || !f.bootstrap)
        .filter(|f| !args.service_accounts || f.service_account)
        .collect();
    let text = match args.output {
        Format::Table => table(&shown),
        Format::Json => format!("{:#}\n", as_json(&shown)),
    };
    crate::output::emit(&text)?;
    Ok(!args.exit_code || shown.is_empty())
}

/// The findings as kubectl-style columns; a line saying so when there are none.
pub fn table(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "No risky RBAC grants found.\n".to_string();
    }
    let header = ["RISKS", "SUBJECT", "SCOPE", "BINDING", "ROLE", "RULE"];
    let rows: Vec<[String; 6]> = findings
        .iter()
        .map(|f| {
            [
                f.risks
                    .iter()
                    .map(|r| r.name())
                    .collect::<Vec<_>>()
                    .join(","),
                f.subject.clone(),
                f.scope.clone(),
                f.binding.clone(),
                f.role.clone(),
                f.rule.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let last = cells.len() - 1;
        for (i, cell) in cells.iter().enumerate() {
            if i == last {
                let _ = writeln!(out, "{cell}");
            } else {
                let _ = write!(out, "{cell:<width$}   ", width = widths[i]);
            }
        }
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    out
}

fn as_json(findings: &[Finding]) -> Value {
    let items: Vec<Value> = findings
        .iter()
        .map(|f| {
            json!({
                "risks": f.risks.iter().map(|r| r.name()).collect::<Vec<_>>(),
                "subject": f.subject,
                "serviceAccount": f.service_account,
                "scope": f.scope,
                "binding": f.binding,
                "role": f.role,
                "rule": f.rule,
                "bootstrap": f.bootstrap,
            })
        })
        .collect();
    json!({"findings": items})
}
