//! `tessera netpol matrix` and `tessera netpol explain`: read Namespaces, Pods,
//! NetworkPolicies and the cluster-wide policies from a cluster (any kubeconfig) and/or a
//! YAML file (a what-if: the file's objects replace or add to the cluster's), and print what
//! the policy core (`tessera_netpol`) decides. With `--network NAMESPACE/NAME`, the same for
//! a secondary network: its attached pods and MultiNetworkPolicies
//! (`tessera_netpol::secondary`). No policy logic lives here.

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
    /// Evaluate a secondary network (`NAMESPACE/NAME` of its NetworkAttachmentDefinition):
    /// the pods attached to it and its MultiNetworkPolicies.
    #[arg(long, global = true)]
    network: Option<String>,
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
    let from_cluster = args.file.is_none() || args.cluster.kubeconfig.is_some();
    let text = match &args.file {
        Some(path) if path.as_os_str() == "-" => Some(std::io::read_to_string(std::io::stdin())?),
        Some(path) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        None => None,
    };
    let objects = match &args.network {
        Some(network) => {
            let mut values = Vec::new();
            if from_cluster {
                read_network_values(&args.cluster, &mut values).await?;
            }
            if let Some(text) = &text {
                values.extend(tessera_netpol::secondary::yaml_values(text)?);
            }
            tessera_netpol::secondary::network_objects(values, network)?
        }
        None => {
            let mut objects = Objects::default();
            if from_cluster {
                read_cluster(&args.cluster, &mut objects).await?;
            }
            if let Some(text) = &text {
                let overlay = Objects::from_yaml(text).context("the objects file")?;
                objects.namespaces.extend(overlay.namespaces);
                objects.pods.extend(overlay.pods);
                objects.policies.extend(overlay.policies);
            }
            objects
        }
    };
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

/// The Namespaces, Pods and MultiNetworkPolicies of a cluster, as values.
async fn read_network_values(
    cluster: &crate::client::ClusterArgs,
    values: &mut Vec<Value>,
) -> anyhow::Result<()> {
    let client = crate::client::connect(cluster).await?;
    let params = Default::default();
    for namespace in Api::<Namespace>::all(client.clone())
        .list(&params)
        .await?
        .items
    {
        let mut value = serde_json::to_value(&namespace)?;
        value["apiVersion"] = Value::from("v1");
        value["kind"] = Value::from("Namespace");
        values.push(value);
    }
    for pod in Api::<Pod>::all(client.clone()).list(&params).await?.items {
        let finished = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|phase| phase == "Succeeded" || phase == "Failed");
        if finished {
            continue;
        }
        let mut value = serde_json::to_value(&pod)?;
        value["apiVersion"] = Value::from("v1");
        value["kind"] = Value::from("Pod");
        values.push(value);
    }
    let gvk = GroupVersionKind::gvk("k8s.cni.cncf.io", "v1beta1", "MultiNetworkPolicy");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "multi-networkpolicies");
    for item in Api::<DynamicObject>::all_with(client.clone(), &resource)
        .list(&params)
        .await
        .context("listing multi-networkpolicies")?
        .items
    {
        let mut value = serde_json::to_value(&item)?;
        value["apiVersion"] = Value::from(resource.api_version.clone());
        value["kind"] = Value::from("MultiNetworkPolicy");
        values.push(value);
    }
    Ok(())
}
