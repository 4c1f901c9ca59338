//! The admission decisions of upstream's `admission/admission.go`: `ValidatePod` (create, and
//! updates that change an image or add an ephemeral container; ignored subresources),
//! `ValidatePodController` (the pod templates of Deployments, Jobs, … — warn and audit only),
//! `ValidateNamespace` (label validity; a tightened enforce level dry-runs the existing pods,
//! `EvaluatePodsInNamespace` with upstream's ordering, limit and per-pod lines), the exemptions
//! (namespace, user, runtime class) and `EvaluatePod`'s forbidden message, warnings and audit
//! annotations.
//!
//! Pure: the shell hands it the namespace's labels, the request's user, the objects as JSON and
//! the namespace's pods, and carries out the [`Decision`]. No deadline on the namespace's pod
//! check (upstream stops after a second; here the 3000-pod limit bounds it).

use std::collections::{BTreeMap, HashMap, HashSet};
use tessera_model::json::Pointer as _;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::api::{
    self, AUDIT_LEVEL_LABEL, AUDIT_VERSION_LABEL, AUDIT_VIOLATIONS_ANNOTATION, ENFORCE_LEVEL_LABEL,
    ENFORCE_VERSION_LABEL, ENFORCED_POLICY_ANNOTATION, EXEMPTION_REASON_ANNOTATION, LABEL_PREFIX,
    LabelError, Level, LevelVersion, Policy, WARN_LEVEL_LABEL, WARN_VERSION_LABEL, compare_levels,
    policy_to_evaluate,
};
use crate::config::PodSecurityConfiguration;
use crate::evaluator::{AggregateCheckResult, Evaluator};

/// Upstream's `defaultNamespaceMaxPodsToCheck`.
pub const NAMESPACE_MAX_PODS_TO_CHECK: usize = 3000;

/// Pod subresources upstream never evaluates.
const IGNORED_POD_SUBRESOURCES: [&str; 8] = [
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// Whether upstream's `ValidatePod` evaluates a pod write through `subresource` at all: the
/// ignored subresources (binding, status, exec, …) are allowed without reading the policy.
pub fn evaluates_pod_subresource(subresource: Option<&str>) -> bool {
    !subresource.is_some_and(|s| IGNORED_POD_SUBRESOURCES.contains(&s))
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// 403: `<resource> "<name>" is forbidden: <message>`.
    Forbidden(String),
    /// 422 on the namespace's labels.
    Invalid(Vec<LabelError>),
    /// 400: the object could not be read.
    BadRequest(String),
}

/// What Pod Security admission decided about one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// `None` when allowed.
    pub denial: Option<Denial>,
    /// Warnings for the client.
    pub warnings: Vec<String>,
    /// Audit annotations, keys without the `pod-security.kubernetes.io/` prefix.
    pub audit_annotations: BTreeMap<String, String>,
}

impl Decision {
    fn allowed() -> Decision {
        Decision::default()
    }

    fn annotated(key: &str, value: String) -> Decision {
        Decision {
            audit_annotations: BTreeMap::from([(key.to_string(), value)]),
            ..Decision::default()
        }
    }

    fn denied(denial: Denial) -> Decision {
        Decision {
            denial: Some(denial),
            ..Decision::default()
        }
    }

    /// The audit annotations as the API server records them: `pod-security.kubernetes.io/<key>`.
    pub fn prefixed_audit_annotations(&self) -> Vec<(String, String)> {
        self.audit_annotations
            .iter()
            .map(|(k, v)| (format!("{LABEL_PREFIX}{k}"), v.clone()))
            .collect()
    }
}

/// What a namespace write needs beyond its own decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceDecision {
    /// Warnings already known (an exempt namespace's).
    pub warnings: Vec<String>,
    /// The new enforce level the namespace's existing pods are to be checked against.
    pub check_pods: Option<LevelVersion>,
}

/// Pod Security admission with its configuration.
pub struct PodSecurity {
    configuration: PodSecurityConfiguration,
    evaluator: Evaluator,
    max_pods_to_check: usize,
}

/// A pod's metadata and spec as the checks read them.
struct PodParts {
    meta: ObjectMeta,
    spec: PodSpec,
}

fn read_parts(meta: Option<&Value>, spec: Option<&Value>) -> Result<PodParts, String> {
    let meta = match meta {
        Some(meta) => serde_json::from_value(meta.clone()).map_err(|e| e.to_string())?,
        None => ObjectMeta::default(),
    };
    let spec = match spec {
        Some(spec) => serde_json::from_value(spec.clone()).map_err(|e| e.to_string())?,
        None => PodSpec::default(),
    };
    Ok(PodParts { meta, spec })
}

fn read_pod(pod: &Value) -> Result<PodParts, String> {
    read_parts(pod.get("metadata"), pod.get("spec"))
}

/// Where a pod-template kind keeps its template (upstream's `DefaultPodSpecExtractor`), by
/// group and plural resource name.
pub fn pod_template_path(group: &str, resource: &str) -> Option<&'static str> {
    Some(match (group, resource) {
        ("", "podtemplates") => "/template",
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => "/spec/template",
        ("batch", "cronjobs") => "/spec/jobTemplate/spec/template",
        _ => return None,
    })
}

fn labels_of(namespace: &Value) -> BTreeMap<String, String> {
    namespace
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

impl PodSecurity {
    /// Admission with a configuration; `emulation` is the API server's own version, which
    /// caps what `latest` means.
    pub fn new(
        configuration: PodSecurityConfiguration,
        emulation: Option<api::Version>,
    ) -> PodSecurity {
        PodSecurity {
            configuration,
            evaluator: Evaluator::new(emulation),
            max_pods_to_check: NAMESPACE_MAX_PODS_TO_CHECK,
        }
    }

    /// This admission checking at most `limit` existing pods when a namespace's enforce level
    /// tightens.
    pub fn with_max_pods_to_check(mut self, limit: usize) -> PodSecurity {
        self.max_pods_to_check = limit;
        self
    }

    /// The evaluator.
    pub fn evaluator(&self) -> &Evaluator {
        &self.evaluator
    }

    fn defaults(&self) -> Policy {
        self.configuration.defaults
    }

    fn exempt_namespace(&self, namespace: &str) -> bool {
        !namespace.is_empty()
            && self
                .configuration
                .exemptions
                .namespaces
                .iter()
                .any(|n| n == namespace)
    }

    fn exempt_user(&self, user: &str) -> bool {
        !user.is_empty()
            && self
                .configuration
                .exemptions
                .usernames
                .iter()
                .any(|u| u == user)
    }

    fn exempt_runtime_class(&self, runtime_class: Option<&str>) -> bool {
        runtime_class.is_some_and(|rc| {
            !rc.is_empty()
                && self
                    .configuration
                    .exemptions
                    .runtime_classes
                    .iter()
                    .any(|c| c == rc)
        })
    }

    /// Upstream's first short cuts: an exempt namespace, then an exempt user.
    fn exempt_request(&self, namespace: &Value, user: &str) -> Option<Decision> {
        let name = namespace
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let reason = if self.exempt_namespace(name) {
            "namespace"
        } else if self.exempt_user(user) {
            "user"
        } else {
            return None;
        };
        Some(Decision::annotated(
            EXEMPTION_REASON_ANNOTATION,
            reason.into(),
        ))
    }

    /// The namespace's policy as its labels set it over the defaults.
    pub fn policy_of(&self, namespace: &Value) -> (Policy, Vec<LabelError>) {
        policy_to_evaluate(&labels_of(namespace), self.defaults())
    }

    /// Upstream's `ValidatePod`: a pod create or update (`old` set) in a namespace, by a user,
    /// through a subresource or none.
    pub fn validate_pod(
        &self,
        namespace: &Value,
        user: &str,
        subresource: Option<&str>,
        pod: &Value,
        old: Option<&Value>,
    ) -> Decision {
        if !evaluates_pod_subresource(subresource) {
            return Decision::allowed();
        }
        if let Some(exempt) = self.exempt_request(namespace, user) {
            return exempt;
        }
        let (policy, errors) = self.policy_of(namespace);
        if errors.is_empty() && policy.fully_privileged() {
            let privileged = LevelVersion::new(Level::Privileged, api::Version::Latest);
            return Decision::annotated(ENFORCED_POLICY_ANNOTATION, privileged.to_string());
        }
        let parts = match read_pod(pod) {
            Ok(parts) => parts,
            Err(_) => return Decision::denied(Denial::BadRequest("failed to decode pod".into())),
        };
        if let Some(old) = old {
            let Ok(old) = read_pod(old) else {
                return Decision::denied(Denial::BadRequest("failed to decode old pod".into()));
            };
            if !is_significant_pod_update(&parts.spec, &old.spec) {
                return Decision::allowed();
            }
        }
        self.evaluate_pod(policy, &errors, &parts, true)
    }

    /// Upstream's `ValidatePodController`: a write of a kind with a pod template (`group`,
    /// plural `resource`) — warn and audit only. Kinds without a template are allowed.
    pub fn validate_pod_controller(
        &self,
        namespace: &Value,
        user: &str,
        group: &str,
        resource: &str,
        subresource: Option<&str>,
        object: &Value,
    ) -> Decision {
        let Some(path) = pod_template_path(group, resource) else {
            return Decision::allowed();
        };
        if subresource.is_some() {
            return Decision::allowed();
        }
        if let Some(exempt) = self.exempt_request(namespace, user) {
            return exempt;
        }
        let (policy, errors) = self.policy_of(namespace);
        if errors.is_empty()
            && policy.warn.level == Level::Privileged
            && policy.audit.level == Level::Privileged
        {
            return Decision::allowed();
        }
        let Some(template) = object.at(path).filter(|t| !t.is_null()) else {
            return Decision::allowed();
        };
        match read_parts(template.get("metadata"), template.get("spec")) {
            Ok(parts) => self.evaluate_pod(policy, &errors, &parts, false),
            Err(error) => {
                Decision::annotated("error", format!("failed to extract pod template: {error}"))
            }
        }
    }

    /// Upstream's `EvaluatePod`.
    fn evaluate_pod(
        &self,
        policy: Policy,
        policy_errors: &[LabelError],
        parts: &PodParts,
        enforce: bool,
    ) -> Decision {
        if self.exempt_runtime_class(parts.spec.runtime_class_name.as_deref()) {
            return Decision::annotated(EXEMPTION_REASON_ANNOTATION, "runtimeClass".into());
        }
        let mut decision = Decision::default();
        if !policy_errors.is_empty() {
            decision.audit_annotations.insert(
                "error".into(),
                format!("Failed to parse policy: {}", api::aggregate(policy_errors)),
            );
        }
        let mut cached: HashMap<LevelVersion, AggregateCheckResult> = HashMap::new();
        let mut evaluate = |level: LevelVersion| {
            cached
                .entry(level)
                .or_insert_with(|| self.evaluator.aggregate(level, &parts.meta, &parts.spec))
                .clone()
        };
        if enforce {
            decision.audit_annotations.insert(
                ENFORCED_POLICY_ANNOTATION.into(),
                policy.enforce.to_string(),
            );
            let result = evaluate(policy.enforce);
            if !result.allowed {
                decision.denial = Some(Denial::Forbidden(format!(
                    "violates PodSecurity \"{}\": {}",
                    policy.enforce,
                    result.forbidden_detail()
                )));
            }
        }
        let audit = evaluate(policy.audit);
        if !audit.allowed {
            decision.audit_annotations.insert(
                AUDIT_VIOLATIONS_ANNOTATION.into(),
                format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.audit,
                    audit.forbidden_detail()
                ),
            );
        }
        if decision.denial.is_none() {
            let warn = evaluate(policy.warn);
            if !warn.allowed {
                decision.warnings.push(format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.warn,
                    warn.forbidden_detail()
                ));
            }
        }
        decision
    }

    /// Upstream's `ValidateNamespace` for a create (`old` is `None`) or update of a namespace:
    /// invalid labels are refused (on update only if they changed), an exempt namespace with a
    /// policy gets a warning, and a tightened enforce level asks for the existing pods to be
    /// checked ([`PodSecurity::evaluate_pods_in_namespace`]).
    pub fn validate_namespace(
        &self,
        namespace: &Value,
        old: Option<&Value>,
        subresource: Option<&str>,
    ) -> Result<NamespaceDecision, Denial> {
        if subresource.is_some() {
            return Ok(NamespaceDecision::default());
        }
        let name = namespace
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let labels = labels_of(namespace);
        let (policy, errors) = policy_to_evaluate(&labels, self.defaults());
        let exempt_warning = || {
            self.exempt_namespace(name)
                .then(|| self.exempt_namespace_warning(name, &policy, &labels))
                .flatten()
        };
        let Some(old) = old else {
            if !errors.is_empty() {
                return Err(Denial::Invalid(errors));
            }
            return Ok(NamespaceDecision {
                warnings: exempt_warning().into_iter().collect(),
                check_pods: None,
            });
        };
        let (old_policy, old_errors) = self.policy_of(old);
        if !errors.is_empty() && (old_errors.is_empty() || errors != old_errors) {
            return Err(Denial::Invalid(errors));
        }
        let unchanged = policy.enforce == old_policy.enforce;
        let relaxed = policy.enforce.version == old_policy.enforce.version
            && compare_levels(policy.enforce.level, old_policy.enforce.level)
                != std::cmp::Ordering::Greater;
        if unchanged || policy.enforce.level == Level::Privileged || relaxed {
            return Ok(NamespaceDecision::default());
        }
        if self.exempt_namespace(name) {
            return Ok(NamespaceDecision {
                warnings: exempt_warning().into_iter().collect(),
                check_pods: None,
            });
        }
        Ok(NamespaceDecision {
            warnings: Vec::new(),
            check_pods: Some(policy.enforce),
        })
    }

    /// Upstream's `exemptNamespaceWarning`.
    fn exempt_namespace_warning(
        &self,
        namespace: &str,
        policy: &Policy,
        labels: &BTreeMap<String, String>,
    ) -> Option<String> {
        if policy.fully_privileged() || policy.equivalent(&self.defaults()) {
            return None;
        }
        let mut parts = Vec::new();
        for (mode, level, level_label, version_label) in [
            (
                "enforce",
                policy.enforce,
                ENFORCE_LEVEL_LABEL,
                ENFORCE_VERSION_LABEL,
            ),
            (
                "audit",
                policy.audit,
                AUDIT_LEVEL_LABEL,
                AUDIT_VERSION_LABEL,
            ),
            ("warn", policy.warn, WARN_LEVEL_LABEL, WARN_VERSION_LABEL),
        ] {
            let labelled = labels.contains_key(level_label) || labels.contains_key(version_label);
            if level.level != Level::Privileged && labelled {
                parts.push(format!("{mode}={level}"));
            }
        }
        Some(format!(
            "namespace {} is exempt from Pod Security, and the policy ({}) will be ignored",
            crate::checks::go_quote(namespace),
            parts.join(", ")
        ))
    }

    /// Upstream's `EvaluatePodsInNamespace`: the namespace's pods against a new enforce level
    /// (runtime-class-exempt pods skipped, one pod per controller first, at most
    /// [`NAMESPACE_MAX_PODS_TO_CHECK`] by default), identical violations counted together.
    pub fn evaluate_pods_in_namespace(
        &self,
        namespace: &str,
        enforce: LevelVersion,
        pods: &[Value],
    ) -> Vec<String> {
        let mut parsed: Vec<(String, Option<String>, PodParts)> = pods
            .iter()
            .filter_map(|pod| {
                let parts = read_pod(pod).ok()?;
                let name = parts.meta.name.clone().unwrap_or_default();
                let controller = parts
                    .meta
                    .owner_references
                    .iter()
                    .flatten()
                    .find(|r| r.controller == Some(true))
                    .map(|r| r.uid.clone());
                Some((name, controller, parts))
            })
            .filter(|(_, _, parts)| {
                !self.exempt_runtime_class(parts.spec.runtime_class_name.as_deref())
            })
            .collect();
        // One pod per controller first, the rest of each controller's pods after.
        let mut seen = HashSet::new();
        let (mut first, duplicates): (Vec<_>, Vec<_>) = parsed
            .drain(..)
            .partition(|(_, c, _)| c.as_ref().is_none_or(|uid| seen.insert(uid.clone())));
        first.extend(duplicates);
        let total = first.len();
        first.truncate(self.max_pods_to_check);
        let checked = first.len();
        let mut order: Vec<String> = Vec::new();
        let mut counts: HashMap<String, (String, usize)> = HashMap::new();
        for (name, _, parts) in &first {
            let result = self.evaluator.aggregate(enforce, &parts.meta, &parts.spec);
            if result.allowed {
                continue;
            }
            let warning = result.forbidden_reason();
            match counts.get_mut(&warning) {
                Some((first_name, count)) => {
                    if name < first_name {
                        *first_name = name.clone();
                    }
                    *count += 1;
                }
                None => {
                    counts.insert(warning.clone(), (name.clone(), 1));
                    order.push(warning);
                }
            }
        }
        let mut warnings = Vec::new();
        if checked < total {
            warnings.push(format!(
                "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
            ));
        }
        if !order.is_empty() {
            warnings.push(format!(
                "existing pods in namespace {} violate the new PodSecurity enforce level \"{enforce}\"",
                crate::checks::go_quote(namespace)
            ));
        }
        let mut pod_warnings: Vec<String> = order
            .into_iter()
            .map(|warning| {
                let (name, count) = &counts[&warning];
                match count {
                    1 => format!("{name}: {warning}"),
                    2 => format!("{name} (and 1 other pod): {warning}"),
                    n => format!("{name} (and {} other pods): {warning}", n - 1),
                }
            })
            .collect();
        pod_warnings.sort();
        warnings.extend(pod_warnings);
        warnings
    }
}

/// Upstream's `isSignificantPodUpdate`: container counts, images, or an ephemeral container
/// added or changed.
fn is_significant_pod_update(pod: &PodSpec, old: &PodSpec) -> bool {
    let init = |spec: &PodSpec| spec.init_containers.clone().unwrap_or_default();
    let (new_init, old_init) = (init(pod), init(old));
    if pod.containers.len() != old.containers.len() || new_init.len() != old_init.len() {
        return true;
    }
    let image_changed = |a: &Container, b: &Container| a.image != b.image;
    if pod
        .containers
        .iter()
        .zip(&old.containers)
        .chain(new_init.iter().zip(&old_init))
        .any(|(a, b)| image_changed(a, b))
    {
        return true;
    }
    let old_ephemeral = old.ephemeral_containers.as_deref().unwrap_or_default();
    pod.ephemeral_containers.iter().flatten().any(|c| {
        old_ephemeral
            .iter()
            .find(|o| o.name == c.name)
            .is_none_or(|o| o.image != c.image)
    })
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
