//! Reading the objects evaluation needs — Namespaces, Pods, NetworkPolicies and the
//! cluster-wide policies — from JSON values or a multi-document YAML text (lists and other
//! kinds are unwrapped or skipped), into the inputs of an [`Evaluator`]. Knows nothing of
//! where the values come from (a cluster, a file).

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cluster::{self, AdminNetworkPolicy, BaselineAdminNetworkPolicy, ClusterNetworkPolicy};
use crate::compile::Policy;
use crate::evaluator::Evaluator;
use crate::model::{Labels, PodInfo, namespace_info};

/// An object that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The YAML text does not parse.
    #[error("the objects do not parse as YAML: {0}")]
    Yaml(String),
    /// A known kind does not have its schema.
    #[error("{kind} {name}: {error}")]
    Invalid {
        /// Kind.
        kind: String,
        /// Name.
        name: String,
        /// What is wrong.
        error: String,
    },
}

/// The inputs of an evaluator.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// Namespaces and their labels.
    pub namespaces: Vec<(String, Labels)>,
    /// Pods.
    pub pods: Vec<PodInfo>,
    /// Compiled policies of every kind.
    pub policies: Vec<Policy>,
    /// How many objects of other kinds were skipped.
    pub skipped: usize,
}

impl Objects {
    /// Reads values (objects or lists of them).
    pub fn from_values(values: impl IntoIterator<Item = Value>) -> Result<Objects, ObjectError> {
        let mut objects = Objects::default();
        for value in values {
            objects.add(value)?;
        }
        Ok(objects)
    }

    /// Reads a multi-document YAML (or JSON) text.
    pub fn from_yaml(text: &str) -> Result<Objects, ObjectError> {
        let documents: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|e| ObjectError::Yaml(e.to_string()))?;
        Objects::from_values(documents.into_iter().filter(|d| !d.is_null()))
    }

    /// Adds one object (a list adds its items); namespaced objects without a namespace are in
    /// `default`, as kubectl would create them.
    pub fn add(&mut self, mut value: Value) -> Result<(), ObjectError> {
        if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
            for item in std::mem::take(items) {
                self.add(item)?;
            }
            return Ok(());
        }
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let group = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.rsplit_once('/').map(|(g, _)| g.to_string()))
            .unwrap_or_default();
        let namespaced = matches!(kind.as_str(), "Pod" | "NetworkPolicy");
        if namespaced
            && value.pointer("/metadata/namespace").is_none()
            && let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("namespace".into(), Value::from("default"));
        }
        match (group.as_str(), kind.as_str()) {
            ("", "Namespace") => {
                let ns: Namespace = parse(&kind, value)?;
                self.namespaces.push(namespace_info(&ns));
            }
            ("", "Pod") => self
                .pods
                .push(PodInfo::from_pod(&parse::<Pod>(&kind, value)?)),
            ("networking.k8s.io", "NetworkPolicy") => {
                self.policies
                    .push(Policy::from_network_policy(&parse::<NetworkPolicy>(
                        &kind, value,
                    )?))
            }
            (cluster::GROUP, "AdminNetworkPolicy") => {
                self.policies
                    .push(Policy::from_admin(&parse::<AdminNetworkPolicy>(
                        &kind, value,
                    )?))
            }
            (cluster::GROUP, "BaselineAdminNetworkPolicy") => {
                self.policies
                    .push(Policy::from_baseline(&parse::<BaselineAdminNetworkPolicy>(
                        &kind, value,
                    )?))
            }
            (cluster::GROUP, "ClusterNetworkPolicy") => {
                self.policies
                    .push(Policy::from_cluster(&parse::<ClusterNetworkPolicy>(
                        &kind, value,
                    )?))
            }
            _ => self.skipped += 1,
        }
        Ok(())
    }

    /// An evaluator over these objects.
    pub fn evaluator(self) -> Evaluator {
        Evaluator::build(self.namespaces, self.pods, self.policies)
    }
}

fn parse<T: DeserializeOwned>(kind: &str, value: Value) -> Result<T, ObjectError> {
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>")
        .to_string();
    serde_json::from_value(value).map_err(|e| ObjectError::Invalid {
        kind: kind.to_string(),
        name,
        error: e.to_string(),
    })
}
