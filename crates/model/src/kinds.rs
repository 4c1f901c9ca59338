//! The catalog of kinds Tessera serves: group, version, kind, REST names, scope, short names,
//! categories, subresources and the OpenAPI definition that describes each.
//!
//! Built from k8s-openapi's `Resource` metadata so names match upstream exactly. Knows nothing
//! about how objects are stored or served.

use std::any::TypeId;
use std::sync::LazyLock;

use k8s_openapi::api::{
    apps::v1 as apps, authentication::v1 as authentication, authorization::v1 as authorization,
    autoscaling::v1 as autoscaling_v1, autoscaling::v2 as autoscaling_v2, batch::v1 as batch,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, networking::v1 as networking, node::v1 as node, policy::v1 as policy,
    rbac::v1 as rbac, resource::v1 as resource, resource::v1beta1 as resource_v1beta1,
    resource::v1beta2 as resource_v1beta2, scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::{NamespaceResourceScope, Resource};
use schemars::{JsonSchema, Schema, SchemaGenerator};

/// A subresource a kind serves beside the object itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// `/status`: replaces only `.status`.
    Status,
    /// `/scale`: an `autoscaling/v1` Scale view of `.spec.replicas`.
    Scale,
    /// `pods/log`: container output as text.
    Log,
    /// `pods/binding`: binds a pod to a node.
    Binding,
    /// `pods/eviction`: a `policy/v1` Eviction.
    Eviction,
    /// `pods/exec`: a command run in a container over an upgraded (SPDY or WebSocket) stream.
    Exec,
    /// `serviceaccounts/token`: an `authentication.k8s.io/v1` TokenRequest.
    Token,
    /// `pods/proxy`, `nodes/proxy`, `services/proxy`: requests passed on to the object's
    /// server (a container port, the kubelet, a Service's endpoint).
    Proxy,
    /// Kueue's visibility API: `clusterqueues/pendingworkloads` and
    /// `localqueues/pendingworkloads`, a `PendingWorkloadsSummary` (the owner kind exists
    /// only to hang it on, with no verbs of its own).
    PendingWorkloads,
}

impl Subresource {
    /// The path segment after the object name.
    pub fn name(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Log => "log",
            Subresource::Binding => "binding",
            Subresource::Eviction => "eviction",
            Subresource::Exec => "exec",
            Subresource::Token => "token",
            Subresource::Proxy => "proxy",
            Subresource::PendingWorkloads => "pendingworkloads",
        }
    }

    /// The (group, version, kind) the subresource answers with.
    pub fn response_kind(self, owner: &KindInfo) -> (&str, &str, &str) {
        match self {
            Subresource::Status | Subresource::Log => (owner.group, owner.version, owner.kind),
            Subresource::Scale => ("autoscaling", "v1", "Scale"),
            Subresource::Binding => ("", "v1", "Binding"),
            Subresource::Eviction => ("policy", "v1", "Eviction"),
            Subresource::Exec => ("", "v1", "PodExecOptions"),
            Subresource::Token => ("authentication.k8s.io", "v1", "TokenRequest"),
            Subresource::Proxy => match owner.kind {
                "Node" => ("", "v1", "NodeProxyOptions"),
                "Service" => ("", "v1", "ServiceProxyOptions"),
                _ => ("", "v1", "PodProxyOptions"),
            },
            Subresource::PendingWorkloads => {
                (owner.group, owner.version, "PendingWorkloadsSummary")
            }
        }
    }

    /// The verbs the subresource supports.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Subresource::Status | Subresource::Scale => &["get", "patch", "update"],
            Subresource::Log | Subresource::PendingWorkloads => &["get"],
            Subresource::Binding | Subresource::Eviction | Subresource::Token => &["create"],
            Subresource::Exec => &["create", "get"],
            Subresource::Proxy => &["create", "delete", "get", "patch", "update"],
        }
    }
}

/// One served kind.
#[derive(Debug, Clone)]
pub struct KindInfo {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// API version within the group.
    pub version: &'static str,
    /// Kind, e.g. `Pod`.
    pub kind: &'static str,
    /// Resource (plural) name, e.g. `pods`.
    pub plural: &'static str,
    /// Singular name, e.g. `pod`.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names kubectl accepts, e.g. `po`.
    pub short_names: &'static [&'static str],
    /// Categories, e.g. `all`.
    pub categories: &'static [&'static str],
    /// Subresources served.
    pub subresources: &'static [Subresource],
    /// The OpenAPI definition name, e.g. `io.k8s.api.core.v1.Pod`.
    pub definition: String,
    /// Adds a built-in kind's schema (and everything it refers to) to a generator.
    pub schema: Option<fn(&mut SchemaGenerator) -> Schema>,
    /// What a CustomResourceDefinition says of a custom kind.
    pub custom: Option<CustomKind>,
    /// Whether the kind is a create-only request (reviews) that is answered, never stored.
    pub create_only: bool,
}

/// A kind served from a CustomResourceDefinition version.
#[derive(Debug, Clone)]
pub struct CustomKind {
    /// The CRD's name (`<plural>.<group>`).
    pub crd: String,
    /// The version objects are stored in.
    pub storage_version: String,
    /// The version's `openAPIV3Schema`.
    pub schema: serde_json::Value,
    /// `additionalPrinterColumns` of the version.
    pub printer_columns: Vec<PrinterColumn>,
    /// The scale subresource's paths, if served.
    pub scale: Option<ScalePaths>,
    /// Whether the CRD is being deleted (no new objects are accepted).
    pub terminating: bool,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    /// Column name.
    pub name: String,
    /// OpenAPI type (`string`, `integer`, `number`, `boolean`, `date`).
    pub kind: String,
    /// Format hint.
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 shows by default; higher only with `-o wide`.
    pub priority: i64,
    /// The JSONPath of the value (`.spec.replicas`).
    pub json_path: String,
}

/// The JSON paths of a custom kind's scale subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    /// `.spec.replicas`-like path.
    pub spec_replicas: String,
    /// `.status.replicas`-like path.
    pub status_replicas: String,
    /// Optional `.status.selector`-like path.
    pub label_selector: Option<String>,
}

impl KindInfo {
    /// `group/version`, or just `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether the kind serves a subresource.
    pub fn has(&self, subresource: Subresource) -> bool {
        self.subresources.contains(&subresource)
    }

    /// Whether a name (plural, singular, kind or short name, any case) refers to this kind.
    pub fn answers_to(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        name == self.plural
            || name == self.singular
            || name == self.kind.to_ascii_lowercase()
            || self.short_names.contains(&name.as_str())
    }
}

fn info<K>(
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    subresources: &'static [Subresource],
) -> KindInfo
where
    K: Resource + JsonSchema + 'static,
{
    KindInfo {
        group: K::GROUP,
        version: K::VERSION,
        kind: K::KIND,
        plural: K::URL_PATH_SEGMENT,
        singular: K::KIND.to_ascii_lowercase(),
        namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        short_names,
        categories,
        subresources,
        definition: K::schema_name().into_owned(),
        schema: Some(|generator| generator.subschema_for::<K>()),
        custom: None,
        create_only: false,
    }
}

fn review<K>() -> KindInfo
where
    K: Resource + JsonSchema + 'static,
{
    KindInfo {
        create_only: true,
        ..info::<K>(&[], &[], &[])
    }
}

use Subresource::{Binding, Eviction, Exec, Log, Proxy, Scale, Status};

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];
const STATUS: &[Subresource] = &[Status];
const SCALABLE: &[Subresource] = &[Status, Scale];

static BUILTIN: LazyLock<Vec<KindInfo>> = LazyLock::new(|| {
    vec![
        // core/v1
        info::<core::Pod>(&["po"], ALL, &[Status, Log, Binding, Eviction, Exec, Proxy]),
        info::<core::Node>(&["no"], NONE, &[Status, Proxy]),
        info::<core::Namespace>(&["ns"], NONE, STATUS),
        info::<core::Service>(&["svc"], ALL, &[Status, Proxy]),
        info::<core::Endpoints>(&["ep"], NONE, NONE_SUB),
        info::<core::ConfigMap>(&["cm"], NONE, NONE_SUB),
        info::<core::Secret>(NONE, NONE, NONE_SUB),
        info::<core::ServiceAccount>(&["sa"], NONE, &[Subresource::Token]),
        info::<core::Event>(&["ev"], NONE, NONE_SUB),
        info::<core::PersistentVolume>(&["pv"], NONE, STATUS),
        info::<core::PersistentVolumeClaim>(&["pvc"], NONE, STATUS),
        info::<core::ResourceQuota>(&["quota"], NONE, STATUS),
        info::<core::LimitRange>(&["limits"], NONE, NONE_SUB),
        info::<core::PodTemplate>(NONE, NONE, NONE_SUB),
        info::<core::ReplicationController>(&["rc"], ALL, SCALABLE),
        // apps/v1
        info::<apps::Deployment>(&["deploy"], ALL, SCALABLE),
        info::<apps::ReplicaSet>(&["rs"], ALL, SCALABLE),
        info::<apps::StatefulSet>(&["sts"], ALL, SCALABLE),
        info::<apps::DaemonSet>(&["ds"], ALL, STATUS),
        info::<apps::ControllerRevision>(NONE, NONE, NONE_SUB),
        // batch/v1
        info::<batch::Job>(NONE, ALL, STATUS),
        info::<batch::CronJob>(&["cj"], ALL, STATUS),
        // autoscaling/v2 (stored) and autoscaling/v1, converted (`tessera_api::convert`)
        info::<autoscaling_v2::HorizontalPodAutoscaler>(&["hpa"], ALL, STATUS),
        info::<autoscaling_v1::HorizontalPodAutoscaler>(&["hpa"], ALL, STATUS),
        // policy/v1
        info::<policy::PodDisruptionBudget>(&["pdb"], NONE, STATUS),
        // scheduling.k8s.io/v1
        info::<scheduling::PriorityClass>(&["pc"], NONE, NONE_SUB),
        // networking.k8s.io/v1
        info::<networking::NetworkPolicy>(&["netpol"], NONE, NONE_SUB),
        info::<networking::Ingress>(&["ing"], NONE, STATUS),
        info::<networking::IngressClass>(NONE, NONE, NONE_SUB),
        // discovery.k8s.io/v1
        info::<discovery::EndpointSlice>(NONE, NONE, NONE_SUB),
        // node.k8s.io/v1
        info::<node::RuntimeClass>(NONE, NONE, NONE_SUB),
        // rbac.authorization.k8s.io/v1
        info::<rbac::Role>(NONE, NONE, NONE_SUB),
        info::<rbac::ClusterRole>(NONE, NONE, NONE_SUB),
        info::<rbac::RoleBinding>(NONE, NONE, NONE_SUB),
        info::<rbac::ClusterRoleBinding>(NONE, NONE, NONE_SUB),
        // storage.k8s.io/v1
        info::<storage::StorageClass>(&["sc"], NONE, NONE_SUB),
        info::<storage::CSIDriver>(NONE, NONE, NONE_SUB),
        info::<storage::CSINode>(NONE, NONE, NONE_SUB),
        info::<storage::VolumeAttachment>(NONE, NONE, STATUS),
        info::<storage::CSIStorageCapacity>(NONE, NONE, NONE_SUB),
        // coordination.k8s.io/v1
        info::<coordination::Lease>(NONE, NONE, NONE_SUB),
        // resource.k8s.io/v1
        info::<resource::DeviceClass>(NONE, NONE, NONE_SUB),
        info::<resource::ResourceClaim>(NONE, NONE, STATUS),
        info::<resource::ResourceClaimTemplate>(NONE, NONE, NONE_SUB),
        info::<resource::ResourceSlice>(NONE, NONE, NONE_SUB),
        // resource.k8s.io/v1beta2 and v1beta1: stored as v1, converted (`tessera_api::convert`)
        info::<resource_v1beta2::DeviceClass>(NONE, NONE, NONE_SUB),
        info::<resource_v1beta2::ResourceClaim>(NONE, NONE, STATUS),
        info::<resource_v1beta2::ResourceClaimTemplate>(NONE, NONE, NONE_SUB),
        info::<resource_v1beta2::ResourceSlice>(NONE, NONE, NONE_SUB),
        info::<resource_v1beta1::DeviceClass>(NONE, NONE, NONE_SUB),
        info::<resource_v1beta1::ResourceClaim>(NONE, NONE, STATUS),
        info::<resource_v1beta1::ResourceClaimTemplate>(NONE, NONE, NONE_SUB),
        info::<resource_v1beta1::ResourceSlice>(NONE, NONE, NONE_SUB),
        // events.k8s.io/v1
        info::<events::Event>(&["ev"], NONE, NONE_SUB),
        // apiextensions.k8s.io/v1
        info::<apiextensions::CustomResourceDefinition>(&["crd", "crds"], NONE, STATUS),
        // authorization.k8s.io/v1 and authentication.k8s.io/v1: reviews, answered not stored
        review::<authorization::SelfSubjectAccessReview>(),
        review::<authorization::SelfSubjectRulesReview>(),
        review::<authorization::SubjectAccessReview>(),
        review::<authorization::LocalSubjectAccessReview>(),
        review::<authentication::SelfSubjectReview>(),
        review::<authentication::TokenReview>(),
        // core/v1 `bindings`: the legacy form of `pods/<name>/binding` (the pod named by the
        // Binding's own name), answered not stored.
        review::<core::Binding>(),
    ]
});

const NONE_SUB: &[Subresource] = &[];

/// Every built-in kind Tessera serves. A kind served in several versions is listed with the
/// version it is stored in first (`tessera_api::convert` maps the others to it).
pub fn builtin() -> &'static [KindInfo] {
    &BUILTIN
}

/// The built-in kind served at a group, version and plural resource name.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static KindInfo> {
    builtin()
        .iter()
        .find(|k| k.plural == plural && k.group == group && k.version == version)
}

/// The built-in kind with a group, version and kind.
pub fn find_kind(group: &str, version: &str, kind: &str) -> Option<&'static KindInfo> {
    builtin()
        .iter()
        .find(|k| k.group == group && k.version == version && k.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_scopes_follow_upstream() {
        let pod = find("", "v1", "pods").unwrap();
        assert_eq!(
            (pod.kind, pod.namespaced, pod.singular.as_str()),
            ("Pod", true, "pod")
        );
        assert_eq!(pod.definition, "io.k8s.api.core.v1.Pod");
        let node = find("", "v1", "nodes").unwrap();
        assert!(!node.namespaced);
        let claim = find("resource.k8s.io", "v1", "resourceclaims").unwrap();
        assert_eq!(claim.kind, "ResourceClaim");
        let pc = find_kind("scheduling.k8s.io", "v1", "PriorityClass").unwrap();
        assert!(!pc.namespaced);
        assert_eq!(pc.plural, "priorityclasses");
        assert!(
            find("apps", "v1", "deployments")
                .unwrap()
                .answers_to("deploy")
        );
    }

    #[test]
    fn plurals_are_unique_within_a_group_version() {
        let mut seen = std::collections::BTreeSet::new();
        for kind in builtin() {
            assert!(
                seen.insert((kind.group, kind.version, kind.plural)),
                "duplicate {}/{}/{}",
                kind.group,
                kind.version,
                kind.plural
            );
        }
    }
}
