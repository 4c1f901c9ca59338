//! Kueue's Configuration file (`config.kueue.x-k8s.io/v1beta2`, and `v1beta1` converted to
//! it as Kueue converts it) as the queue manager reads it: the fields it acts on
//! (`manageJobsWithoutQueueName`, `managedJobsNamespaceSelector`, `waitForPodsReady`,
//! `fairSharing`, `admissionFairSharing`, `integrations.frameworks`,
//! `resources.deviceClassMappings`, `multiKueue.origin` and `workerLostTimeout`, the
//! `SchedulingEquivalenceHashing` gate of `featureGates`) with upstream's defaults
//! (`SetDefaults_Configuration`) and validation (`pkg/config/validation.go`, `validation`),
//! errors naming the field path and, where it can be found, the line. Tessera's Beyond-Kueue
//! options ride in their own section, `beyondKueue`, off by default.
//!
//! Fields of Kueue's schema Tessera does not act on (webhook, metrics, leader election, …)
//! are accepted and listed in [`Configuration::ignored`] for the shell to log;
//! fields outside Kueue's schema are errors, as Kueue's strict decoding makes them. Knows
//! nothing about files, logging, or how the settings reach the queue manager.

mod device_classes;
mod validation;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::preemption::FairSharingStrategy;
use crate::queue::RequeuingTimestamp;

pub use device_classes::{CounterSource, DeviceClassMapping};
pub use validation::{FieldError, FieldErrorKind};

/// The API group and kind.
pub const GROUP: &str = "config.kueue.x-k8s.io";
/// The kind.
pub const KIND: &str = "Configuration";
/// Kueue's namespace when the file names none (`DefaultNamespace`).
pub const DEFAULT_NAMESPACE: &str = "kueue-system";
/// The Job integration's framework name, the one enabled by default.
pub const JOB_FRAMEWORK: &str = "batch/job";
/// The Pod integration's name (Deployments, StatefulSets and LeaderWorkerSets go through it).
pub const POD_FRAMEWORK: &str = "pod";

/// The integrations Tessera runs without a configuration file: every one it implements (Kueue's
/// own default is `batch/job` alone; its shipped file lists JobSet too and leaves the pod-based
/// ones commented out, but a platform without a file should queue every kind it can).
pub const TESSERA_FRAMEWORKS: &[&str] = &[
    JOB_FRAMEWORK,
    "jobset.x-k8s.io/jobset",
    POD_FRAMEWORK,
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
];

/// Kueue's built-in integrations (`integrations.frameworks` accepts only these).
pub const FRAMEWORKS: &[&str] = &[
    "batch/job",
    "deployment",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "pod",
    "ray.io/raycluster",
    "ray.io/rayjob",
    "sparkoperator.k8s.io/sparkapplication",
    "statefulset",
    "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper",
];

/// Top-level fields of Kueue's schema the queue manager accepts and does not act on.
const IGNORED_FIELDS: &[&str] = &[
    "clientConnection",
    "controller",
    "health",
    "internalCertManagement",
    "leaderElection",
    "metrics",
    "objectRetentionPolicies",
    "pprofBindAddress",
    "tls",
    "visibilityServer",
    "webhook",
];

/// The queue manager's settings from Kueue's Configuration, defaulted and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Configuration {
    /// `namespace`: Kueue's own namespace (kept out of the managed namespaces by default).
    pub namespace: String,
    /// `manageJobsWithoutQueueName`.
    pub manage_jobs_without_queue_name: bool,
    /// `managedJobsNamespaceSelector` (a `metav1.LabelSelector` as JSON).
    pub managed_jobs_namespace_selector: Value,
    /// `waitForPodsReady`; `None` when off.
    pub wait_for_pods_ready: Option<WaitForPodsReady>,
    /// `fairSharing`; `None` when off.
    pub fair_sharing: Option<FairSharing>,
    /// `admissionFairSharing`; `None` when off.
    pub admission_fair_sharing: Option<AdmissionFairSharing>,
    /// `integrations.frameworks`.
    pub frameworks: Vec<String>,
    /// `resources.deviceClassMappings`: the quota resources DRA devices count as.
    pub device_class_mappings: Vec<DeviceClassMapping>,
    /// Tessera's `beyondKueue` section.
    pub beyond_kueue: BeyondKueue,
    /// `multiKueue`, defaulted.
    pub multi_kueue: MultiKueue,
    /// `featureGates`: the gates the queue manager acts on, defaulted as Kueue's.
    pub feature_gates: FeatureGates,
    /// Fields of Kueue's schema present in the file that Tessera accepts and ignores.
    pub ignored: Vec<String>,
}

/// `multiKueue`, defaulted (`SetDefaults_Configuration`: origin `multikueue`, a 15-minute
/// `workerLostTimeout`). `gcInterval`, `dispatcherName` (only the all-at-once dispatcher
/// runs), `externalFrameworks` and `clusterProfile` are accepted and not acted on.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiKueue {
    /// `origin`: the value of the origin label on what is created on workers.
    pub origin: String,
    /// `workerLostTimeout`: how long an admitting worker may be unreachable before its
    /// Workload is retried.
    pub worker_lost_timeout: Duration,
}

impl Default for MultiKueue {
    fn default() -> MultiKueue {
        MultiKueue {
            origin: crate::api::multikueue::DEFAULT_ORIGIN.to_owned(),
            worker_lost_timeout: crate::api::multikueue::DEFAULT_WORKER_LOST_TIMEOUT,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawMultiKueue {
    gc_interval: Option<String>,
    origin: Option<String>,
    worker_lost_timeout: Option<String>,
    dispatcher_name: Option<String>,
    external_frameworks: Option<Value>,
    cluster_profile: Option<Value>,
}

/// `waitForPodsReady`, defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitForPodsReady {
    /// `timeout`: how long an admitted Workload may take to reach `PodsReady=True`.
    pub timeout: Duration,
    /// `blockAdmission`: nothing else is admitted while an admitted Workload is not ready.
    pub block_admission: bool,
    /// `recoveryTimeout`: how long a running Workload may stay `PodsReady=False`; `None`
    /// (`0s`) disables it.
    pub recovery_timeout: Option<Duration>,
    /// `requeuingStrategy`.
    pub requeuing: RequeuingStrategy,
}

/// `waitForPodsReady.requeuingStrategy`, defaulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequeuingStrategy {
    /// `timestamp`: which time orders a requeued Workload.
    pub timestamp: RequeuingTimestamp,
    /// `backoffLimitCount`: requeues before the Workload is deactivated; `None` is endless.
    pub backoff_limit_count: Option<i32>,
    /// `backoffBaseSeconds`.
    pub backoff_base_seconds: i32,
    /// `backoffMaxSeconds`.
    pub backoff_max_seconds: i32,
}

/// `fairSharing`, present when fair sharing is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairSharing {
    /// `preemptionStrategies`.
    pub strategies: Vec<FairSharingStrategy>,
}

/// `admissionFairSharing`, defaulted.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionFairSharing {
    /// `usageHalfLifeTime`.
    pub usage_half_life: Duration,
    /// `usageSamplingInterval` (default 5m).
    pub usage_sampling_interval: Duration,
    /// `resourceWeights` (a resource not named weighs 1).
    pub resource_weights: BTreeMap<String, f64>,
}

/// Tessera's Beyond-Kueue options (`beyondKueue`), each off by default.
#[derive(Debug, Clone, PartialEq)]
pub struct BeyondKueue {
    /// `headsPerClusterQueue`: heads per ClusterQueue per scheduling cycle (Kueue: 1).
    pub heads_per_cluster_queue: usize,
    /// `preventFlapping`: fair sharing's S2-a refuses at equal shares.
    pub prevent_flapping: bool,
    /// `minRuntimeBeforePreemption`: Workloads reserved more recently are not preempted from
    /// other ClusterQueues.
    pub min_runtime_before_preemption: Option<Duration>,
    /// `topologyAwarePreemption`: when no domain of a PodSet's required topology level has
    /// room even after Kueue's preemption targets, preempt the lower-priority holders of the
    /// domain whose clearing costs least.
    pub topology_aware_preemption: bool,
}

/// The feature gates of Kueue's `featureGates` map that change what the queue manager does;
/// the others are accepted and not acted on (Tessera has their behaviour or lacks it whatever
/// they say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates {
    /// `SchedulingEquivalenceHashing` (beta, on by default).
    pub scheduling_equivalence_hashing: bool,
}

impl Default for FeatureGates {
    fn default() -> FeatureGates {
        FeatureGates {
            scheduling_equivalence_hashing: true,
        }
    }
}

impl Default for BeyondKueue {
    fn default() -> BeyondKueue {
        BeyondKueue {
            heads_per_cluster_queue: 1,
            prevent_flapping: false,
            min_runtime_before_preemption: None,
            topology_aware_preemption: false,
        }
    }
}

/// Tessera's behaviour without a configuration file: Kueue's defaults, except that
/// waitForPodsReady is off (as Kueue's shipped configuration leaves it).
impl Default for Configuration {
    fn default() -> Configuration {
        Configuration {
            namespace: DEFAULT_NAMESPACE.to_owned(),
            manage_jobs_without_queue_name: false,
            managed_jobs_namespace_selector: default_namespace_selector(DEFAULT_NAMESPACE),
            wait_for_pods_ready: None,
            fair_sharing: None,
            admission_fair_sharing: None,
            frameworks: TESSERA_FRAMEWORKS.iter().map(|f| (*f).to_owned()).collect(),
            device_class_mappings: Vec::new(),
            beyond_kueue: BeyondKueue::default(),
            multi_kueue: MultiKueue::default(),
            feature_gates: FeatureGates::default(),
            ignored: Vec::new(),
        }
    }
}

impl Configuration {
    /// Whether the integration named `framework` (`batch/job`, `pod`, …) is enabled.
    pub fn runs(&self, framework: &str) -> bool {
        self.frameworks.iter().any(|f| f == framework)
    }

    /// Whether a Job without a queue name in a namespace with these labels is managed
    /// (`manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`).
    pub fn manages_without_queue_name(&self, namespace_labels: &BTreeMap<String, String>) -> bool {
        self.manage_jobs_without_queue_name
            && tessera_model::selector::matches(
                Some(&self.managed_jobs_namespace_selector),
                namespace_labels,
            )
    }
}

/// The default `managedJobsNamespaceSelector`: every namespace but `kube-system` and Kueue's.
fn default_namespace_selector(namespace: &str) -> Value {
    json!({"matchExpressions": [{
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", namespace],
    }]})
}

/// Why a configuration file is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Not YAML (the parser's message carries the line).
    #[error("not a YAML document: {0}")]
    Syntax(String),
    /// Fields with invalid values, each with its path (Kueue's `field.ErrorList`).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<FieldError>),
}

/// The API versions read, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1beta1,
    V1beta2,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawWaitForPodsReady {
    enable: Option<bool>,
    timeout: Option<String>,
    block_admission: Option<bool>,
    requeuing_strategy: Option<RawRequeuingStrategy>,
    recovery_timeout: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawRequeuingStrategy {
    timestamp: Option<String>,
    backoff_limit_count: Option<i32>,
    backoff_base_seconds: Option<i32>,
    backoff_max_seconds: Option<i32>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawFairSharing {
    enable: Option<bool>,
    preemption_strategies: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawAdmissionFairSharing {
    usage_half_life_time: Option<String>,
    usage_sampling_interval: Option<String>,
    resource_weights: Option<BTreeMap<String, f64>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawIntegrations {
    frameworks: Option<Vec<String>>,
    external_frameworks: Option<Vec<String>>,
    label_keys_to_copy: Option<Vec<String>>,
    pod_options: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawBeyondKueue {
    heads_per_cluster_queue: Option<usize>,
    prevent_flapping: Option<bool>,
    min_runtime_before_preemption: Option<String>,
    topology_aware_preemption: Option<Value>,
}

/// A signed Go duration (`-1s` is read, to be refused by validation), in seconds.
fn signed_seconds(text: &str) -> Result<f64, String> {
    let (sign, magnitude) = match text.trim().strip_prefix('-') {
        Some(rest) => (-1.0, rest),
        None => (1.0, text.trim().trim_start_matches('+')),
    };
    tessera_model::time::parse_duration(magnitude).map(|d| sign * d.as_secs_f64())
}

/// Reads the file's errors as they are found.
struct Reader<'t> {
    text: &'t str,
    errors: Vec<FieldError>,
}

impl Reader<'_> {
    fn fail(&mut self, path: &str, kind: FieldErrorKind) {
        // `resourceWeights[cpu]` is the key `cpu` in the file.
        let lookup = path.replace('[', ".[");
        let lookup: Vec<String> = lookup
            .split('.')
            .map(
                |part| match part.strip_prefix('[').and_then(|p| p.strip_suffix(']')) {
                    Some(key) if key.parse::<usize>().is_err() => key.to_owned(),
                    _ => part.to_owned(),
                },
            )
            .collect();
        let lookup = lookup.join(".").replace(".[", "[");
        let line = tessera_model::yaml_location::line_of(self.text, &lookup);
        self.errors.push(FieldError {
            path: path.to_owned(),
            kind,
            line,
        });
    }

    /// A section read into its raw type; a malformed one is an error at its path.
    fn section<T: DeserializeOwned + Default>(&mut self, path: &str, value: Option<&Value>) -> T {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return T::default();
        };
        match serde_json::from_value(value.clone()) {
            Ok(raw) => raw,
            Err(error) => {
                self.fail(path, FieldErrorKind::Malformed(error.to_string()));
                T::default()
            }
        }
    }

    /// A duration field; `None` when absent or unreadable (an error then).
    fn seconds(&mut self, path: &str, text: Option<&String>) -> Option<f64> {
        let text = text?;
        match signed_seconds(text) {
            Ok(seconds) => Some(seconds),
            Err(message) => {
                self.fail(path, FieldErrorKind::Malformed(message));
                None
            }
        }
    }

    /// `enable`, which only `v1beta1` has.
    fn enable(&mut self, path: &str, version: Version, enable: Option<bool>) -> bool {
        match (version, enable) {
            (Version::V1beta1, enable) => enable.unwrap_or(false),
            (Version::V1beta2, None) => true,
            (Version::V1beta2, Some(_)) => {
                self.fail(&format!("{path}.enable"), FieldErrorKind::Unknown);
                true
            }
        }
    }
}

/// Parses, defaults and validates a Configuration file.
pub fn parse(text: &str) -> Result<Configuration, ConfigError> {
    let document: Value =
        serde_saphyr::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
    let mut reader = Reader {
        text,
        errors: Vec::new(),
    };
    let Some(fields) = document.as_object() else {
        reader.fail(
            "(document)",
            FieldErrorKind::Malformed("not a mapping".into()),
        );
        return Err(ConfigError::Invalid(reader.errors));
    };
    let api_version = fields.get("apiVersion").and_then(Value::as_str);
    let version = match api_version {
        Some("config.kueue.x-k8s.io/v1beta2") => Version::V1beta2,
        Some("config.kueue.x-k8s.io/v1beta1") => Version::V1beta1,
        other => {
            reader.fail(
                "apiVersion",
                FieldErrorKind::NotSupported(
                    json!(other.unwrap_or_default()),
                    vec![format!("{GROUP}/v1beta2"), format!("{GROUP}/v1beta1")],
                ),
            );
            return Err(ConfigError::Invalid(reader.errors));
        }
    };
    if fields.get("kind").and_then(Value::as_str) != Some(KIND) {
        let kind = fields.get("kind").cloned().unwrap_or(json!(""));
        reader.fail(
            "kind",
            FieldErrorKind::NotSupported(kind, vec![KIND.into()]),
        );
    }
    let mut ignored = Vec::new();
    for key in fields.keys() {
        match key.as_str() {
            "apiVersion"
            | "kind"
            | "namespace"
            | "manageJobsWithoutQueueName"
            | "managedJobsNamespaceSelector"
            | "waitForPodsReady"
            | "fairSharing"
            | "admissionFairSharing"
            | "integrations"
            | "resources"
            | "multiKueue"
            | "featureGates"
            | "beyondKueue" => {}
            // The schema's other fields: accepted, named for the shell to log.
            known if IGNORED_FIELDS.contains(&known) => ignored.push(known.to_owned()),
            unknown => reader.fail(unknown, FieldErrorKind::Unknown),
        }
    }
    let (device_class_mappings, ignored_resources) =
        device_classes::read_resources(&mut reader, version, fields);
    ignored.extend(ignored_resources);
    ignored.sort();
    let namespace = match fields.get("namespace") {
        None | Some(Value::Null) => DEFAULT_NAMESPACE.to_owned(),
        Some(Value::String(namespace)) if !namespace.is_empty() => namespace.clone(),
        Some(Value::String(_)) => DEFAULT_NAMESPACE.to_owned(),
        Some(other) => {
            reader.fail(
                "namespace",
                FieldErrorKind::Malformed(format!("{other} is not a string")),
            );
            DEFAULT_NAMESPACE.to_owned()
        }
    };
    let manage_jobs_without_queue_name = match fields.get("manageJobsWithoutQueueName") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(on)) => *on,
        Some(other) => {
            reader.fail(
                "manageJobsWithoutQueueName",
                FieldErrorKind::Malformed(format!("{other} is not a boolean")),
            );
            false
        }
    };
    let managed_jobs_namespace_selector = match fields.get("managedJobsNamespaceSelector") {
        None | Some(Value::Null) => default_namespace_selector(&namespace),
        Some(selector) => selector.clone(),
    };
    let wait_for_pods_ready = read_wait_for_pods_ready(&mut reader, version, fields);
    let fair_sharing = read_fair_sharing(&mut reader, version, fields);
    let admission_fair_sharing = read_admission_fair_sharing(&mut reader, fields);
    let integrations: RawIntegrations = reader.section("integrations", fields.get("integrations"));
    let _ = (
        integrations.external_frameworks,
        integrations.label_keys_to_copy,
        integrations.pod_options,
    );
    let frameworks = integrations
        .frameworks
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| vec![JOB_FRAMEWORK.to_owned()]);
    let beyond_kueue = read_beyond_kueue(&mut reader, fields);
    let multi_kueue = read_multi_kueue(&mut reader, fields);
    let feature_gates = read_feature_gates(&mut reader, fields);
    let configuration = Configuration {
        namespace,
        manage_jobs_without_queue_name,
        managed_jobs_namespace_selector,
        wait_for_pods_ready,
        fair_sharing,
        admission_fair_sharing,
        frameworks,
        device_class_mappings,
        beyond_kueue,
        multi_kueue,
        feature_gates,
        ignored,
    };
    validation::validate(&configuration, &mut reader);
    if reader.errors.is_empty() {
        Ok(configuration)
    } else {
        Err(ConfigError::Invalid(reader.errors))
    }
}

/// `featureGates`: a map of gate names to booleans.
fn read_feature_gates(
    reader: &mut Reader<'_>,
    fields: &serde_json::Map<String, Value>,
) -> FeatureGates {
    let gates: BTreeMap<String, bool> = reader.section("featureGates", fields.get("featureGates"));
    let defaults = FeatureGates::default();
    FeatureGates {
        scheduling_equivalence_hashing: gates
            .get("SchedulingEquivalenceHashing")
            .copied()
            .unwrap_or(defaults.scheduling_equivalence_hashing),
    }
}

/// `multiKueue`, defaulted.
fn read_multi_kueue(
    reader: &mut Reader<'_>,
    fields: &serde_json::Map<String, Value>,
) -> MultiKueue {
    const PATH: &str = "multiKueue";
    let raw: RawMultiKueue = reader.section(PATH, fields.get(PATH));
    let _ = (
        raw.dispatcher_name,
        raw.external_frameworks,
        raw.cluster_profile,
    );
    let _ = reader.seconds("multiKueue.gcInterval", raw.gc_interval.as_ref());
    let defaults = MultiKueue::default();
    let worker_lost_timeout = reader
        .seconds(
            "multiKueue.workerLostTimeout",
            raw.worker_lost_timeout.as_ref(),
        )
        .map_or(defaults.worker_lost_timeout, |seconds| {
            Duration::from_secs_f64(seconds.max(0.0))
        });
    MultiKueue {
        origin: raw
            .origin
            .filter(|o| !o.is_empty())
            .unwrap_or(defaults.origin),
        worker_lost_timeout,
    }
}

/// `waitForPodsReady`: always on in `v1beta2` (Kueue defaults it), on with `enable` in
/// `v1beta1` (whose timeout defaults to 5m and `blockAdmission` to true).
fn read_wait_for_pods_ready(
    reader: &mut Reader<'_>,
    version: Version,
    fields: &serde_json::Map<String, Value>,
) -> Option<WaitForPodsReady> {
    const PATH: &str = "waitForPodsReady";
    let raw: RawWaitForPodsReady = reader.section(PATH, fields.get(PATH));
    if !reader.enable(PATH, version, raw.enable) {
        return None;
    }
    let default_timeout = match version {
        Version::V1beta1 => 5.0 * 60.0,
        Version::V1beta2 => 30.0 * 60.0,
    };
    let timeout = reader
        .seconds("waitForPodsReady.timeout", raw.timeout.as_ref())
        .filter(|t| *t != 0.0)
        .unwrap_or(default_timeout);
    let recovery = reader
        .seconds(
            "waitForPodsReady.recoveryTimeout",
            raw.recovery_timeout.as_ref(),
        )
        .unwrap_or(timeout);
    let strategy = raw.requeuing_strategy.unwrap_or_default();
    let timestamp = match strategy.timestamp.as_deref() {
        None | Some("Eviction") => RequeuingTimestamp::Eviction,
        Some("Creation") => RequeuingTimestamp::Creation,
        Some(other) => {
            reader.fail(
                "waitForPodsReady.requeuingStrategy.timestamp",
                FieldErrorKind::NotSupported(
                    json!(other),
                    vec!["Creation".into(), "Eviction".into()],
                ),
            );
            RequeuingTimestamp::Eviction
        }
    };
    let recovery_text = raw.recovery_timeout.or_else(|| raw.timeout.clone());
    let negatives = [
        ("waitForPodsReady.timeout", Some(timeout), raw.timeout),
        (
            "waitForPodsReady.recoveryTimeout",
            Some(recovery),
            recovery_text,
        ),
    ];
    for (path, seconds, text) in negatives {
        if seconds.is_some_and(|s| s < 0.0) {
            reader.fail(
                path,
                FieldErrorKind::Negative(json!(text.unwrap_or_default())),
            );
        }
    }
    let counts = [
        ("backoffLimitCount", strategy.backoff_limit_count),
        ("backoffBaseSeconds", strategy.backoff_base_seconds),
        ("backoffMaxSeconds", strategy.backoff_max_seconds),
    ];
    for (field, value) in counts {
        if let Some(value) = value.filter(|v| *v < 0) {
            let path = format!("waitForPodsReady.requeuingStrategy.{field}");
            reader.fail(&path, FieldErrorKind::Negative(json!(value)));
        }
    }
    let block_admission = match version {
        Version::V1beta1 => raw.block_admission.unwrap_or(true),
        Version::V1beta2 => raw.block_admission.unwrap_or(false),
    };
    Some(WaitForPodsReady {
        timeout: Duration::from_secs_f64(timeout.max(0.0)),
        block_admission,
        recovery_timeout: (recovery > 0.0).then(|| Duration::from_secs_f64(recovery)),
        requeuing: RequeuingStrategy {
            timestamp,
            backoff_limit_count: strategy.backoff_limit_count,
            backoff_base_seconds: strategy.backoff_base_seconds.unwrap_or(60),
            backoff_max_seconds: strategy.backoff_max_seconds.unwrap_or(3600),
        },
    })
}

/// `fairSharing`: on when present in `v1beta2`, with `enable` in `v1beta1` (whose strategies
/// default to both).
fn read_fair_sharing(
    reader: &mut Reader<'_>,
    version: Version,
    fields: &serde_json::Map<String, Value>,
) -> Option<FairSharing> {
    const PATH: &str = "fairSharing";
    let value = fields.get(PATH).filter(|v| !v.is_null())?;
    let raw: RawFairSharing = reader.section(PATH, Some(value));
    if !reader.enable(PATH, version, raw.enable) {
        return None;
    }
    let mut names = raw.preemption_strategies.unwrap_or_default();
    if version == Version::V1beta1 && names.is_empty() {
        names = vec![
            "LessThanOrEqualToFinalShare".into(),
            "LessThanInitialShare".into(),
        ];
    }
    let strategies = validation::fair_sharing_strategies(reader, &names);
    Some(FairSharing { strategies })
}

fn read_admission_fair_sharing(
    reader: &mut Reader<'_>,
    fields: &serde_json::Map<String, Value>,
) -> Option<AdmissionFairSharing> {
    const PATH: &str = "admissionFairSharing";
    let value = fields.get(PATH).filter(|v| !v.is_null())?;
    let raw: RawAdmissionFairSharing = reader.section(PATH, Some(value));
    let half_life = reader
        .seconds(
            "admissionFairSharing.usageHalfLifeTime",
            raw.usage_half_life_time.as_ref(),
        )
        .unwrap_or(0.0);
    let sampling = reader
        .seconds(
            "admissionFairSharing.usageSamplingInterval",
            raw.usage_sampling_interval.as_ref(),
        )
        .filter(|s| *s != 0.0)
        .unwrap_or(300.0);
    if half_life < 0.0 {
        let text = raw.usage_half_life_time.clone().unwrap_or_default();
        reader.fail(
            "admissionFairSharing.usageHalfLifeTime",
            FieldErrorKind::Negative(json!(text)),
        );
    }
    if sampling <= 0.0 {
        // Kueue reports the half-life's value here.
        let text = raw.usage_half_life_time.unwrap_or_default();
        reader.fail(
            "admissionFairSharing.usageSamplingInterval",
            FieldErrorKind::Invalid(json!(text), "must be greater than 0".into()),
        );
    }
    let resource_weights = raw.resource_weights.unwrap_or_default();
    for (resource, weight) in &resource_weights {
        if *weight < 0.0 {
            let path = format!("admissionFairSharing.resourceWeights[{resource}]");
            reader.fail(&path, FieldErrorKind::Negative(json!(weight)));
        }
    }
    Some(AdmissionFairSharing {
        usage_half_life: Duration::from_secs_f64(half_life.max(0.0)),
        usage_sampling_interval: Duration::from_secs_f64(sampling.max(0.0)),
        resource_weights,
    })
}

fn read_beyond_kueue(
    reader: &mut Reader<'_>,
    fields: &serde_json::Map<String, Value>,
) -> BeyondKueue {
    const PATH: &str = "beyondKueue";
    let raw: RawBeyondKueue = reader.section(PATH, fields.get(PATH));
    let min_runtime = reader.seconds(
        "beyondKueue.minRuntimeBeforePreemption",
        raw.min_runtime_before_preemption.as_ref(),
    );
    if min_runtime.is_some_and(|s| s < 0.0) {
        let text = raw.min_runtime_before_preemption.unwrap_or_default();
        reader.fail(
            "beyondKueue.minRuntimeBeforePreemption",
            FieldErrorKind::Negative(json!(text)),
        );
    }
    let heads = raw.heads_per_cluster_queue.unwrap_or(1);
    if heads == 0 {
        reader.fail(
            "beyondKueue.headsPerClusterQueue",
            FieldErrorKind::Invalid(json!(0), "must be greater than 0".into()),
        );
    }
    let topology_aware_preemption = match raw.topology_aware_preemption {
        None | Some(Value::Null) => false,
        Some(Value::Bool(on)) => on,
        Some(other) => {
            reader.fail(
                "beyondKueue.topologyAwarePreemption",
                FieldErrorKind::Invalid(other, "must be true or false".into()),
            );
            false
        }
    };
    BeyondKueue {
        heads_per_cluster_queue: heads.max(1),
        prevent_flapping: raw.prevent_flapping.unwrap_or(false),
        min_runtime_before_preemption: min_runtime
            .filter(|s| *s > 0.0)
            .map(Duration::from_secs_f64),
        topology_aware_preemption,
    }
}

#[cfg(test)]
mod tests;
