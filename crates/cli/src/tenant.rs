//! `tessera tenant create|check|delete|list`: tenant bundles on a running cluster. `create`
//! reads a Tenant spec (`-f tenant.yaml`, or flags), asks the core (`tessera-tenancy`) for
//! the bundle and whether the namespace may be taken, applies every object by server-side
//! apply with one field manager (`tessera-tenant`; `--force-conflicts` takes fields other
//! managers own), then removes the tenant's objects the bundle no longer holds. `check` reads
//! the spec the namespace records and prints the core's drift findings (non-zero exit when
//! there are any); `delete` removes the tenant's namespace and waits for it to go; `list`
//! prints one row per tenant.
//!
//! A thin shell: it reads files and the cluster and writes; what the objects are, whether a
//! namespace may be taken and what counts as drift are the core's.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::{Api, Client};
use serde_json::Value;
use tessera_tenancy::bundle::{self, NAMESPACE, ObjectRef};
use tessera_tenancy::spec::{Amount, Defaults, Peer, Quota, Subject};
use tessera_tenancy::{FIELD_MANAGER, KINDS, Kind, TENANT_LABEL, Tenant, TenantSpec};

use crate::client::{self, ClusterArgs};
use crate::output::emit;

/// Options of `tessera tenant`.
#[derive(Args, Debug)]
pub struct TenantArgs {
    #[command(subcommand)]
    command: TenantCommand,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// `tessera tenant` subcommands.
#[derive(Subcommand, Debug)]
pub enum TenantCommand {
    /// Create a tenant, or bring an existing one back to its spec: its namespace, quota, limit
    /// defaults, LocalQueue, RoleBindings, NetworkPolicies and ServiceAccount, by server-side
    /// apply (field manager `tessera-tenant`).
    Create(Box<CreateArgs>),
    /// Compare a tenant's objects with the spec its namespace records; exits non-zero on
    /// drift.
    Check {
        /// The tenant.
        name: String,
    },
    /// Delete a tenant: its namespace and everything in it. Other tenants are untouched.
    Delete {
        /// The tenant.
        name: String,
        /// How long to wait for the namespace to go, in seconds (0: do not wait).
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
    /// List the tenants.
    List,
}

/// How `--dry-run` prints the bundle.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A YAML stream, one document per object.
    Yaml,
    /// A `v1` List.
    Json,
}

/// Options of `tessera tenant create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The tenant's name (with `-f`, optional; must match the file's `metadata.name`).
    name: Option<String>,
    /// A Tenant spec (`tessera.dev/v1alpha1`, kind `Tenant`); the flags below are for specs
    /// without a file.
    #[arg(short = 'f', long = "filename")]
    file: Option<PathBuf>,
    /// Print what would be applied; contact no cluster.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run: print the objects.
    #[arg(short = 'o', long, requires = "dry_run")]
    output: Option<Format>,
    /// Take over fields another field manager owns, as kubectl's --force-conflicts.
    #[arg(long)]
    force_conflicts: bool,
    #[command(flatten)]
    spec: SpecFlags,
}

/// A Tenant spec as flags.
#[derive(Args, Debug, Default)]
struct SpecFlags {
    /// The namespace (default: the tenant's name).
    #[arg(long = "namespace")]
    namespace: Option<String>,
    /// The enforced Pod Security Standard: restricted (default), baseline or privileged.
    #[arg(long)]
    pod_security: Option<String>,
    /// The Pod Security version: latest (default) or v1.N.
    #[arg(long)]
    pod_security_version: Option<String>,
    /// GPUs the namespace's pods may request in total (`requests.nvidia.com/gpu`).
    #[arg(long)]
    gpu: Option<String>,
    /// CPU they may request (`requests.cpu`).
    #[arg(long)]
    cpu: Option<String>,
    /// Memory they may request (`requests.memory`).
    #[arg(long)]
    memory: Option<String>,
    /// How many pods (`pods`).
    #[arg(long)]
    pods: Option<String>,
    /// The CPU request of a container that sets none (default 100m).
    #[arg(long)]
    default_cpu: Option<String>,
    /// The memory request of a container that sets none (default 128Mi).
    #[arg(long)]
    default_memory: Option<String>,
    /// The Kueue ClusterQueue of the tenant's LocalQueue.
    #[arg(long)]
    cluster_queue: Option<String>,
    /// The LocalQueue's name (default `default`).
    #[arg(long)]
    local_queue: Option<String>,
    /// An admin, `user:NAME` or `group:NAME` (repeatable).
    #[arg(long = "admin", value_parser = subject)]
    admins: Vec<Subject>,
    /// A member, `user:NAME` or `group:NAME` (repeatable).
    #[arg(long = "member", value_parser = subject)]
    members: Vec<Subject>,
    /// A namespace the tenant's pods may connect to (repeatable).
    #[arg(long)]
    egress_namespace: Vec<String>,
    /// An IPv4 block the tenant's pods may connect to (repeatable).
    #[arg(long)]
    egress_cidr: Vec<String>,
    /// A namespace whose pods may connect to the tenant's (repeatable).
    #[arg(long)]
    ingress_namespace: Vec<String>,
    /// Let the tenant's pods reach the platform's image registry
    /// (`registry.tessera-system.svc:5000`, NetworkPolicy `allow-registry`).
    #[arg(long)]
    registry: bool,
    /// The workload ServiceAccount's name (default `workload`).
    #[arg(long)]
    service_account: Option<String>,
}

fn subject(text: &str) -> Result<Subject, String> {
    tessera_tenancy::spec::Subject::from_flag(text)
}

impl SpecFlags {
    fn spec(&self) -> TenantSpec {
        let amount = |value: &Option<String>| value.clone().map(Amount);
        let quota = Quota {
            gpu: amount(&self.gpu),
            cpu: amount(&self.cpu),
            memory: amount(&self.memory),
            pods: amount(&self.pods),
        };
        let defaults = Defaults {
            cpu: amount(&self.default_cpu),
            memory: amount(&self.default_memory),
        };
        let namespaces = |names: &[String]| -> Vec<Peer> {
            names
                .iter()
                .map(|n| Peer {
                    namespace: Some(n.clone()),
                    ..Peer::default()
                })
                .collect()
        };
        let mut egress = namespaces(&self.egress_namespace);
        egress.extend(self.egress_cidr.iter().map(|c| Peer {
            cidr: Some(c.clone()),
            ..Peer::default()
        }));
        TenantSpec {
            namespace: self.namespace.clone(),
            pod_security: self.pod_security.clone(),
            pod_security_version: self.pod_security_version.clone(),
            quota: (quota != Quota::default()).then_some(quota),
            defaults: (defaults != Defaults::default()).then_some(defaults),
            cluster_queue: self.cluster_queue.clone(),
            local_queue: self.local_queue.clone(),
            admins: self.admins.clone(),
            members: self.members.clone(),
            egress,
            ingress: namespaces(&self.ingress_namespace),
            registry: self.registry,
            service_account: self.service_account.clone(),
        }
    }
}

/// The flag that set a spec field, for errors about a tenant built from flags.
const FLAGS: [(&str, &str); 18] = [
    ("metadata.name", "NAME"),
    ("spec.namespace", "--namespace"),
    ("spec.podSecurityVersion", "--pod-security-version"),
    ("spec.podSecurity", "--pod-security"),
    ("spec.quota.gpu", "--gpu"),
    ("spec.quota.cpu", "--cpu"),
    ("spec.quota.memory", "--memory"),
    ("spec.quota.pods", "--pods"),
    ("spec.defaults.cpu", "--default-cpu"),
    ("spec.defaults.memory", "--default-memory"),
    ("spec.clusterQueue", "--cluster-queue"),
    ("spec.localQueue", "--local-queue"),
    ("spec.admins", "--admin"),
    ("spec.members", "--member"),
    ("spec.egress", "--egress-namespace/--egress-cidr"),
    ("spec.ingress", "--ingress-namespace"),
    ("spec.serviceAccount", "--service-account"),
    ("spec", "flags"),
];

/// A spec error of a tenant built from flags, naming the flag beside the field.
fn flag_error(error: &tessera_tenancy::SpecError) -> String {
    let tessera_tenancy::SpecError::Invalid { field, message, .. } = error else {
        return error.to_string();
    };
    let flag = FLAGS
        .iter()
        .find(|(prefix, _)| field.starts_with(prefix))
        .map_or("flags", |(_, flag)| flag);
    format!("{flag}: {field}: {message}")
}

/// The tenant `create` was given: the file's, or the flags'.
fn tenant(args: &CreateArgs) -> anyhow::Result<Tenant> {
    let flags = args.spec.spec();
    let Some(path) = &args.file else {
        let name = args.name.as_deref().context(
            "name the tenant (`tessera tenant create NAME [flags]`) or give its spec (`-f tenant.yaml`)",
        )?;
        let tenant = Tenant::new(name, flags);
        tenant
            .validate()
            .map_err(|e| anyhow::anyhow!("invalid tenant {name:?}: {}", flag_error(&e)))?;
        return Ok(tenant);
    };
    if flags != TenantSpec::default() {
        bail!(
            "-f {} and spec flags (--gpu, --member, …) do not mix: put the settings in the file",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let tenant = Tenant::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if let Some(name) = &args.name
        && name != tenant.name()
    {
        bail!(
            "{}: metadata.name is {:?}, not {name:?} as the command line says",
            path.display(),
            tenant.name()
        );
    }
    Ok(tenant)
}

/// Runs a `tessera tenant` subcommand.
pub async fn run(args: &TenantArgs) -> anyhow::Result<()> {
    let connect = || client::connect(&args.cluster);
    match &args.command {
        TenantCommand::Create(create) => {
            // The spec is checked, and a dry run printed, before any cluster is contacted.
            let tenant = tenant(create)?;
            if create.dry_run {
                return dry_run(&tenant, create.output);
            }
            apply(&connect().await?, &tenant, create.force_conflicts).await
        }
        TenantCommand::Check { name } => {
            tessera_tenancy::spec::check_tenant_name(name).map_err(anyhow::Error::msg)?;
            check(&connect().await?, name).await
        }
        TenantCommand::Delete { name, timeout } => {
            tessera_tenancy::spec::check_tenant_name(name).map_err(anyhow::Error::msg)?;
            delete(&connect().await?, name, *timeout).await
        }
        TenantCommand::List => list(&connect().await?).await,
    }
}

fn dry_run(tenant: &Tenant, output: Option<Format>) -> anyhow::Result<()> {
    let objects = bundle::bundle(tenant);
    let text = match output {
        Some(Format::Yaml) => bundle::yaml_stream(&objects).context("render the bundle as YAML")?,
        Some(Format::Json) => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
            serde_json::to_string_pretty(&list)? + "\n"
        }
        None => objects
            .iter()
            .filter_map(ObjectRef::of)
            .map(|r| format!("{} serverside-applied (dry run)\n", r.kubectl_name()))
            .collect(),
    };
    emit(&text)
}

fn api(client: &Client, kind: Kind, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(kind.group, kind.version, kind.kind),
        kind.plural,
    );
    if kind.namespaced {
        Api::namespaced_with(client.clone(), namespace, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    }
}

fn namespaces(client: &Client) -> Api<Namespace> {
    Api::all(client.clone())
}

fn to_value(object: impl serde::Serialize) -> anyhow::Result<Value> {
    serde_json::to_value(object).context("encode object")
}

/// The namespaces labelled as `tenant`'s.
async fn owned_namespaces(client: &Client, tenant: &str) -> anyhow::Result<Vec<Value>> {
    let selector = format!("{TENANT_LABEL}={tenant}");
    namespaces(client)
        .list(&ListParams::default().labels(&selector))
        .await
        .with_context(|| format!("list namespaces labelled {selector}"))?
        .items
        .into_iter()
        .map(to_value)
        .collect()
}

/// The objects of the bundle's namespaced kinds in `namespace` labelled as `tenant`'s.
async fn labelled_objects(
    client: &Client,
    tenant: &str,
    namespace: &str,
) -> anyhow::Result<Vec<Value>> {
    let selector = format!("{TENANT_LABEL}={tenant}");
    let mut found = Vec::new();
    for kind in KINDS.into_iter().filter(|k| k.namespaced) {
        let list = api(client, kind, namespace)
            .list(&ListParams::default().labels(&selector))
            .await
            .with_context(|| format!("list {} in {namespace}", kind.plural))?;
        for mut object in list.items {
            // Lists leave each item's apiVersion and kind to the list.
            object.types = Some(kube::api::TypeMeta {
                api_version: kind.api_version(),
                kind: kind.kind.to_owned(),
            });
            found.push(to_value(object)?);
        }
    }
    Ok(found)
}

async fn apply(client: &Client, tenant: &Tenant, force: bool) -> anyhow::Result<()> {
    let live = namespaces(client)
        .get_opt(tenant.namespace())
        .await
        .with_context(|| format!("read namespace {}", tenant.namespace()))?
        .map(to_value)
        .transpose()?;
    let owned = owned_namespaces(client, tenant.name()).await?;
    tessera_tenancy::claim(tenant, live.as_ref(), &owned)
        .map_err(|e| anyhow::anyhow!("tenant {:?} not applied: {e}", tenant.name()))?;
    let objects = bundle::bundle(tenant);
    let pairs: Vec<(ObjectRef, &Value)> = objects
        .iter()
        .filter_map(|object| Some((ObjectRef::of(object)?, object)))
        .collect();
    let mut params = PatchParams::apply(FIELD_MANAGER);
    if force {
        params = params.force();
    }
    // Objects whose immutable fields the spec changes (a LocalQueue moved to another
    // ClusterQueue) are deleted and created again.
    let mut replace = BTreeSet::new();
    if live.is_some() {
        for (reference, object) in &pairs {
            if !tessera_tenancy::drift::has_immutable_fields(reference.kind.kind) {
                continue;
            }
            let found = api(client, reference.kind, &reference.namespace)
                .get_opt(&reference.name)
                .await
                .with_context(|| format!("read {reference}"))?;
            if let Some(found) = found
                && tessera_tenancy::drift::needs_replacement(object, &to_value(found)?).is_some()
            {
                replace.insert(reference.clone());
            }
        }
    }
    // Into an existing namespace, every object is first applied as a server-side dry run, so
    // a conflict or an invalid field refuses the whole bundle before anything changes. (A new
    // namespace holds nothing to conflict with, and a dry run there would find no namespace.)
    if live.is_some() {
        let dry_run = params.clone().dry_run();
        for (reference, object) in pairs.iter().filter(|(r, _)| !replace.contains(r)) {
            apply_one(client, reference, object, &dry_run).await?;
        }
    }
    let mut report = String::new();
    for (reference, object) in &pairs {
        let verb = if replace.contains(reference) {
            api(client, reference.kind, &reference.namespace)
                .delete(&reference.name, &DeleteParams::default())
                .await
                .with_context(|| format!("replace {}", reference.kubectl_name()))?;
            "replaced"
        } else {
            "serverside-applied"
        };
        apply_one(client, reference, object, &params).await?;
        report.push_str(&format!("{} {verb}\n", reference.kubectl_name()));
    }
    let wanted: BTreeSet<ObjectRef> = pairs.into_iter().map(|(reference, _)| reference).collect();
    let labelled = labelled_objects(client, tenant.name(), tenant.namespace()).await?;
    let labelled: Vec<ObjectRef> = labelled.iter().filter_map(ObjectRef::of).collect();
    for stale in tessera_tenancy::drift::stale(&labelled, &wanted) {
        api(client, stale.kind, &stale.namespace)
            .delete(&stale.name, &DeleteParams::default())
            .await
            .with_context(|| format!("remove {}", stale.kubectl_name()))?;
        report.push_str(&format!("{} pruned\n", stale.kubectl_name()));
    }
    emit(&report)
}

/// Server-side applies one object of the bundle; a conflict's error says how to force it.
async fn apply_one(
    client: &Client,
    reference: &ObjectRef,
    object: &Value,
    params: &PatchParams,
) -> anyhow::Result<()> {
    api(client, reference.kind, &reference.namespace)
        .patch(&reference.name, params, &Patch::Apply(object))
        .await
        .map_err(|error| match &error {
            kube::Error::Api(status) => {
                let hint = if status.code == 409 {
                    "; re-run with --force-conflicts to take these fields over"
                } else {
                    ""
                };
                anyhow::anyhow!(
                    "apply {}: {}{hint}",
                    reference.kubectl_name(),
                    status.message
                )
            }
            _ => anyhow::anyhow!("apply {}: {error}", reference.kubectl_name()),
        })?;
    Ok(())
}

async fn check(client: &Client, name: &str) -> anyhow::Result<()> {
    let owned = owned_namespaces(client, name).await?;
    if owned.is_empty() {
        bail!("no tenant {name:?}: no namespace is labelled {TENANT_LABEL}={name}");
    }
    let mut findings = Vec::new();
    let mut count = 0;
    for namespace in &owned {
        let tenant = tessera_tenancy::recorded(namespace).map_err(|e| {
            anyhow::anyhow!("tenant {name:?}: cannot read the spec its namespace records: {e}")
        })?;
        let desired = bundle::bundle(&tenant);
        let mut live = vec![namespace.clone()];
        for object in desired.iter().filter_map(ObjectRef::of) {
            if object.kind == NAMESPACE {
                continue;
            }
            let found = api(client, object.kind, &object.namespace)
                .get_opt(&object.name)
                .await
                .with_context(|| format!("read {object}"))?;
            if let Some(found) = found {
                live.push(to_value(found)?);
            }
        }
        live.extend(labelled_objects(client, name, tenant.namespace()).await?);
        count += desired.len();
        findings.extend(tessera_tenancy::drift(&desired, &live));
    }
    let mut report: String = findings.iter().map(|f| format!("{f}\n")).collect();
    if findings.is_empty() {
        report.push_str(&format!("tenant {name}: no drift ({count} objects)\n"));
        return emit(&report);
    }
    emit(&report)?;
    bail!(
        "tenant {name:?} has drifted from its spec ({} findings); `tessera tenant create` with \
         its spec applies it again",
        findings.len()
    )
}

async fn delete(client: &Client, name: &str, timeout: u64) -> anyhow::Result<()> {
    let owned = owned_namespaces(client, name).await?;
    if owned.is_empty() {
        bail!("no tenant {name:?}: no namespace is labelled {TENANT_LABEL}={name}");
    }
    let api = namespaces(client);
    for namespace in &owned {
        let namespace_name = tessera_model::json::text(namespace, "/metadata/name");
        let uid = tessera_model::json::text(namespace, "/metadata/uid");
        api.delete(namespace_name, &DeleteParams::default())
            .await
            .with_context(|| format!("delete namespace {namespace_name}"))?;
        emit(&format!("namespace \"{namespace_name}\" deleted\n"))?;
        if timeout == 0 {
            continue;
        }
        let gone = kube::runtime::wait::await_condition(
            api.clone(),
            namespace_name,
            kube::runtime::wait::conditions::is_deleted(uid),
        );
        tokio::time::timeout(Duration::from_secs(timeout), gone)
            .await
            .with_context(|| format!("namespace {namespace_name} was not gone after {timeout}s"))?
            .with_context(|| format!("wait for namespace {namespace_name} to go"))?;
    }
    Ok(())
}

async fn list(client: &Client) -> anyhow::Result<()> {
    let namespaces = namespaces(client)
        .list(&ListParams::default().labels(TENANT_LABEL))
        .await
        .context("list namespaces")?;
    let rows: Vec<Vec<String>> = namespaces
        .items
        .into_iter()
        .map(to_value)
        .collect::<anyhow::Result<Vec<_>>>()?
        .iter()
        .map(|namespace| tessera_tenancy::Summary::of(namespace).cells())
        .collect();
    if rows.is_empty() {
        eprintln!("No tenants found.");
        return Ok(());
    }
    emit(&crate::output::table(
        &tessera_tenancy::Summary::HEADERS,
        &rows,
    ))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        create: CreateArgs,
    }

    fn create(args: &[&str]) -> CreateArgs {
        Command::try_parse_from(std::iter::once("create").chain(args.iter().copied()))
            .expect("flags parse")
            .create
    }

    #[test]
    fn flags_make_the_same_tenant_as_a_file() {
        let flags = create(&[
            "team-a",
            "--gpu",
            "8",
            "--cpu",
            "64",
            "--memory",
            "256Gi",
            "--cluster-queue",
            "team-a-cq",
            "--admin",
            "user:alice",
            "--member",
            "group:team-a",
            "--egress-namespace",
            "model-store",
            "--egress-cidr",
            "10.0.0.0/8",
            "--ingress-namespace",
            "ingress",
            "--pod-security",
            "baseline",
        ]);
        let file = Tenant::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\nspec:\n  \
             podSecurity: baseline\n  quota: {gpu: 8, cpu: 64, memory: 256Gi}\n  \
             clusterQueue: team-a-cq\n  admins: [{kind: User, name: alice}]\n  \
             members: [{kind: Group, name: team-a}]\n  \
             egress: [{namespace: model-store}, {cidr: 10.0.0.0/8}]\n  \
             ingress: [{namespace: ingress}]\n",
        )
        .expect("valid");
        assert_eq!(tenant(&flags).expect("valid flags"), file);
        // No flags, no optional sections.
        let bare = tenant(&create(&["team-b"])).expect("valid");
        assert_eq!(bare.spec, TenantSpec::default());
    }

    #[test]
    fn errors_of_flag_specs_name_the_flag() {
        // (flags, the error)
        let table = [
            (
                vec!["team-x", "--gpu", "1.5"],
                "--gpu: spec.quota.gpu: \"1.5\" must be a whole number",
            ),
            (
                vec!["team-x", "--pod-security-version", "1.33"],
                "--pod-security-version: spec.podSecurityVersion: must be \"latest\" or \"v1.x\"",
            ),
            (
                vec!["team-x", "--pod-security", "strict"],
                "--pod-security: spec.podSecurity: must be one of privileged, baseline, restricted",
            ),
            (
                vec!["team-x", "--local-queue", "q"],
                "--local-queue: spec.localQueue: needs spec.clusterQueue",
            ),
            (
                vec!["kube-x"],
                "NAME: metadata.name: \"kube-x\" is one of the cluster's own namespaces",
            ),
        ];
        for (flags, want) in table {
            let error = tenant(&create(&flags)).expect_err("invalid").to_string();
            assert!(
                error.starts_with(&format!("invalid tenant {:?}: {want}", flags[0])),
                "{flags:?}: {error}"
            );
        }
    }

    #[test]
    fn output_needs_a_dry_run() {
        let parsed = Command::try_parse_from(["create", "team-a", "-o", "yaml"]).map(|_| "parsed");
        assert!(parsed.is_err());
    }
}
