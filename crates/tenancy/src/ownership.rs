//! Who owns a namespace: the decision whether a tenant may apply its bundle to a namespace
//! that may already exist, the spec a tenant's namespace records, and the one-line summary
//! `tenant list` prints of it.
//!
//! A namespace belongs to the tenant its `tessera.dev/tenant` label names; an existing
//! namespace without the label belongs to nobody a tenant may take it from. Knows nothing of
//! how namespaces were read.

use serde_json::Value;

use crate::bundle::{POD_SECURITY_PREFIX, SPEC_ANNOTATION, TENANT_LABEL};
use crate::spec::{SpecError, Tenant};

/// Why a tenant may not apply its bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// The namespace exists and no tenant owns it.
    #[error(
        "namespace {namespace:?} already exists and belongs to no tenant (it has no \
         {TENANT_LABEL} label); refusing to take it over: choose another spec.namespace"
    )]
    Unowned {
        /// The namespace.
        namespace: String,
    },
    /// The namespace belongs to another tenant.
    #[error(
        "namespace {namespace:?} belongs to tenant {owner:?} ({TENANT_LABEL}={owner}); \
         refusing to change it"
    )]
    OwnedByOther {
        /// The namespace.
        namespace: String,
        /// Its owner.
        owner: String,
    },
    /// The namespace is being deleted.
    #[error("namespace {namespace:?} is being deleted; create the tenant again once it is gone")]
    Terminating {
        /// The namespace.
        namespace: String,
    },
    /// The tenant already owns another namespace.
    #[error(
        "tenant {tenant:?} already owns namespace {namespace:?}; a tenant has one namespace \
         (delete the tenant first to move it)"
    )]
    Elsewhere {
        /// The tenant.
        tenant: String,
        /// The namespace it owns.
        namespace: String,
    },
}

fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.get("metadata")?.get("labels")?.get(key)?.as_str()
}

fn name(object: &Value) -> &str {
    tessera_model::json::text(object, "/metadata/name")
}

/// Whether `tenant` may apply its bundle, given its namespace as it is live (`None` when
/// absent) and the namespaces labelled as the tenant's.
pub fn claim(tenant: &Tenant, live: Option<&Value>, owned: &[Value]) -> Result<(), Conflict> {
    let namespace = tenant.namespace();
    if let Some(other) = owned.iter().map(name).find(|n| *n != namespace) {
        return Err(Conflict::Elsewhere {
            tenant: tenant.name().to_owned(),
            namespace: other.to_owned(),
        });
    }
    let Some(live) = live else {
        return Ok(());
    };
    match label(live, TENANT_LABEL) {
        None => Err(Conflict::Unowned {
            namespace: namespace.to_owned(),
        }),
        Some(owner) if owner != tenant.name() => Err(Conflict::OwnedByOther {
            namespace: namespace.to_owned(),
            owner: owner.to_owned(),
        }),
        Some(_) if live.pointer("/metadata/deletionTimestamp").is_some() => {
            Err(Conflict::Terminating {
                namespace: namespace.to_owned(),
            })
        }
        Some(_) => Ok(()),
    }
}

/// The spec a tenant's namespace records (its `tessera.dev/tenant-spec` annotation),
/// validated.
pub fn recorded(namespace: &Value) -> Result<Tenant, SpecError> {
    let invalid = |message: String| SpecError::Invalid {
        field: format!("metadata.annotations[{SPEC_ANNOTATION}]"),
        message,
        line: None,
    };
    let text = namespace
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(SPEC_ANNOTATION))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("namespace {:?} records no spec", name(namespace))))?;
    let tenant: Tenant = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    tenant.validate()?;
    Ok(tenant)
}

/// One row of `tenant list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The tenant (the ownership label).
    pub tenant: String,
    /// Its namespace.
    pub namespace: String,
    /// The enforced Pod Security level, as labelled live.
    pub pod_security: String,
    /// The quota's GPUs, CPU and memory, as recorded (`-` where unset).
    pub gpu: String,
    /// CPU.
    pub cpu: String,
    /// Memory.
    pub memory: String,
    /// The ClusterQueue, as recorded (`-` without one).
    pub cluster_queue: String,
}

impl Summary {
    /// The summary of a namespace labelled as a tenant's; an unreadable recorded spec shows
    /// as `?`.
    pub fn of(namespace: &Value) -> Summary {
        let recorded = recorded(namespace).ok();
        let quota = recorded.as_ref().and_then(|t| t.spec.quota.clone());
        let unset = if recorded.is_some() { "-" } else { "?" };
        let unknown = || unset.to_owned();
        let amount = |pick: fn(&crate::spec::Quota) -> &Option<crate::spec::Amount>| {
            quota
                .as_ref()
                .and_then(|q| pick(q).as_ref())
                .map_or_else(unknown, |a| a.0.clone())
        };
        Summary {
            tenant: label(namespace, TENANT_LABEL)
                .unwrap_or_default()
                .to_owned(),
            namespace: name(namespace).to_owned(),
            pod_security: label(namespace, &format!("{POD_SECURITY_PREFIX}enforce"))
                .unwrap_or("-")
                .to_owned(),
            gpu: amount(|q| &q.gpu),
            cpu: amount(|q| &q.cpu),
            memory: amount(|q| &q.memory),
            cluster_queue: recorded
                .as_ref()
                .and_then(|t| t.spec.cluster_queue.clone())
                .unwrap_or_else(unknown),
        }
    }

    /// The row's cells, in [`Summary::HEADERS`]' order.
    pub fn cells(&self) -> Vec<String> {
        vec![
            self.tenant.clone(),
            self.namespace.clone(),
            self.pod_security.clone(),
            self.gpu.clone(),
            self.cpu.clone(),
            self.memory.clone(),
            self.cluster_queue.clone(),
        ]
    }

    /// The table's headers.
    pub const HEADERS: [&str; 7] = [
        "NAME",
        "NAMESPACE",
        "POD SECURITY",
        "GPU",
        "CPU",
        "MEMORY",
        "CLUSTER QUEUE",
    ];
}
