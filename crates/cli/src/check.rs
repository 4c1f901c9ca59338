//! `tessera check`: audits of a running cluster's configuration. `check rbac` lists the risky
//! grants the RBAC objects give (`tessera_api::rbac_risk` decides which), each with the binding
//! that gives it; `check compat` holds the API server's and nodes' versions (and the components'
//! versions given) against the compatibility matrix, as they are and after a planned change
//! (`tessera_compat` decides). Both read the embedded platform or any cluster the kubeconfig
//! names.
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
    /// Check versions against the compatibility matrix (drivers, CUDA, GPU architectures,
    /// Kubernetes skew, GPU operator, DRA, Kueue), as they are and after a planned change.
    Compat(CompatArgs),
}

/// Arguments of `tessera check compat`.
#[derive(Args, Debug)]
pub struct CompatArgs {
    /// The cluster to read.
    #[command(flatten)]
    pub cluster: crate::client::ClusterArgs,
    /// The installed GPU operator's version.
    #[arg(long, value_parser = version)]
    pub gpu_operator: Option<tessera_compat::Version>,
    /// The installed NVIDIA DRA driver's version.
    #[arg(long, value_parser = version)]
    pub dra_driver: Option<tessera_compat::Version>,
    /// The installed Kueue's version.
    #[arg(long, value_parser = version)]
    pub kueue: Option<tessera_compat::Version>,
    /// A planned change, `driver=VERSION`, `kubernetes=VERSION`, `gpu-operator=VERSION` or
    /// `kueue=VERSION`: the cluster is checked as it would be after it.
    #[arg(long, value_parser = planned_change)]
    pub plan: Option<tessera_compat::Change>,
    /// Exit with status 1 when a conflict is found (for CI gates).
    #[arg(long)]
    pub exit_code: bool,
}

fn version(text: &str) -> Result<tessera_compat::Version, String> {
    tessera_compat::Version::parse(text).map_err(|e| e.to_string())
}

fn planned_change(text: &str) -> Result<tessera_compat::Change, String> {
    use tessera_compat::Change;
    let (kind, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not KIND=VERSION"))?;
    let v = version(value)?;
    match kind {
        "driver" => Ok(Change::Driver(v)),
        "kubernetes" => Ok(Change::Kubernetes(v)),
        "gpu-operator" => Ok(Change::GpuOperator(v)),
        "kueue" => Ok(Change::Kueue(v)),
        other => Err(format!(
            "{other:?} is not one of driver, kubernetes, gpu-operator, kueue"
        )),
    }
}

async fn compat(args: &CompatArgs) -> anyhow::Result<bool> {
    use k8s_openapi::api::core::v1::Node;
    let client = crate::client::connect(&args.cluster).await?;
    let server = client
        .apiserver_version()
        .await
        .context("read the API server's version")?;
    let nodes = list_json::<Node>(&client).await?;
    let mut facts = tessera_compat::ClusterFacts::from_nodes(&server.git_version, &nodes)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    facts.gpu_operator = args.gpu_operator.clone();
    facts.dra_driver = args.dra_driver.clone();
    facts.kueue = args.kueue.clone();
    let conflicts = tessera_compat::check(&facts, args.plan.as_ref());
    let mut text = String::new();
    if conflicts.is_empty() {
        text.push_str("No compatibility conflicts found.\n");
    }
    for conflict in &conflicts {
        let _ = writeln!(text, "{conflict}");
    }
    crate::output::emit(&text)?;
    Ok(!args.exit_code || conflicts.is_empty())
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
        CheckCommand::Compat(args) => compat(args).await,
    }
}

/// Every object of a kind, in every namespace, as JSON.
pub(crate) async fn list_json<K>(client: &kube::Client) -> anyhow::Result<Vec<Value>>
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
    let headers = ["RISKS", "SUBJECT", "SCOPE", "BINDING", "ROLE", "RULE"];
    let rows: Vec<Vec<String>> = findings
        .iter()
        .map(|f| {
            vec![
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
    crate::output::table(&headers, &rows)
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
