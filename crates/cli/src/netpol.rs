//! `tessera netpol matrix` and `tessera netpol explain`: read Namespaces, Pods,
//! NetworkPolicies and the cluster-wide policies from a cluster (any kubeconfig) and/or a
//! YAML file (a what-if: the file's objects replace or add to the cluster's), and print what
//! the policy core (`tessera_netpol`) decides. No policy logic lives here.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;
use tessera_netpol::model::{EndpointName, PodInfo, namespace_info, parse_port};
use tessera_netpol::{Objects, Policy, table};

/// Options of `tessera netpol`.
#[derive(Args, Debug)]
pub struct NetpolArgs {
    #[command(subcommand)]
    command: NetpolCommand,
    #[command(flatten)]
    cluster: crate::client::ClusterArgs,
    /// Objects to evaluate from a YAML file (`-` for stdin): alone, or — with
    /// `--kubeconfig` — laid over the cluster's objects as a what-if.
    #[arg(short = 'f', long = "filename", global = true)]
    file: Option<PathBuf>,
}

/// `tessera netpol` subcommands.
#[derive(Subcommand, Debug)]
enum NetpolCommand {
    /// The pod-to-pod truth table for one port (`.` allowed, `X` blocked), cyclonus's layout.
    Matrix {
        /// Only the pods of these namespaces (repeatable; all when absent).
        #[arg(short = 'n', long = "namespace")]
        namespaces: Vec<String>,
        /// The port and protocol, e.g. `80/TCP`.
        #[arg(long)]
        port: String,
    },
    /// Which tier, policy and rule decide one connection.
    Explain {
        /// The source: `NAMESPACE/POD` or an IP address.
        #[arg(long)]
        from: String,
        /// The destination: `NAMESPACE/POD:PORT/PROTO` or `IP:PORT/PROTO`.
        #[arg(long)]
        to: String,
    },
}

/// Runs `tessera netpol`.
pub async fn run(args: &NetpolArgs) -> anyhow::Result<()> {
    let mut objects = Objects::default();
    if args.file.is_none() || args.cluster.kubeconfig.is_some() {
        read_cluster(&args.cluster, &mut objects).await?;
    }
    if let Some(path) = &args.file {
        let text = if path.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())?
        } else {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
        };
        let overlay = Objects::from_yaml(&text).with_context(|| path.display().to_string())?;
        objects.namespaces.extend(overlay.namespaces);
        objects.pods.extend(overlay.pods);
        objects.policies.extend(overlay.policies);
    }
    let evaluator = objects.evaluator();
    let report = match &args.command {
        NetpolCommand::Matrix { namespaces, port } => {
            let (port, protocol) = parse_port(port).map_err(anyhow::Error::msg)?;
            table::matrix_report(&evaluator, namespaces, port, protocol)
        }
        NetpolCommand::Explain { from, to } => {
            let from = EndpointName::parse(from).map_err(anyhow::Error::msg)?;
            let (to, port, protocol) =
                EndpointName::parse_with_port(to).map_err(anyhow::Error::msg)?;
            table::explain_report(&evaluator, &from, &to, port, protocol)
                .map_err(anyhow::Error::msg)?
        }
    };
    print!("{report}");
    Ok(())
}

async fn read_cluster(
    cluster: &crate::client::ClusterArgs,
    objects: &mut Objects,
) -> anyhow::Result<()> {
    let client = crate::client::connect(cluster).await?;
    let params = Default::default();
    for namespace in Api::<Namespace>::all(client.clone())
        .list(&params)
        .await?
        .items
    {
        objects.namespaces.push(namespace_info(&namespace));
    }
    for pod in Api::<Pod>::all(client.clone()).list(&params).await?.items {
        let finished = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|phase| phase == "Succeeded" || phase == "Failed");
        if !finished {
            objects.pods.push(PodInfo::from_pod(&pod));
        }
    }
    for policy in Api::<NetworkPolicy>::all(client.clone())
        .list(&params)
        .await?
        .items
    {
        objects.policies.push(Policy::from_network_policy(&policy));
    }
    // The cluster-wide kinds exist only where their CRDs are installed.
    for (version, kind, plural) in [
        ("v1alpha1", "AdminNetworkPolicy", "adminnetworkpolicies"),
        (
            "v1alpha1",
            "BaselineAdminNetworkPolicy",
            "baselineadminnetworkpolicies",
        ),
        ("v1alpha2", "ClusterNetworkPolicy", "clusternetworkpolicies"),
    ] {
        let gvk = GroupVersionKind::gvk(tessera_netpol::cluster::GROUP, version, kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
        let items = match Api::<DynamicObject>::all_with(client.clone(), &resource)
            .list(&params)
            .await
        {
            Ok(list) => list.items,
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(e) => return Err(e).with_context(|| format!("listing {plural}")),
        };
        for item in items {
            let mut value = serde_json::to_value(&item)?;
            value["apiVersion"] = Value::from(resource.api_version.clone());
            value["kind"] = Value::from(kind);
            objects.add(value)?;
        }
    }
    Ok(())
}
