//! A Kubernetes workload for the timeline: the manifests users apply to the live platform,
//! unchanged, plus two optional annotations that say when and for how long.
//!
//! | annotation | on | meaning | default |
//! |---|---|---|---|
//! | `sim.tessera.dev/arrival` | the object (Pod, Job, Deployment…) | when it is created, from the start (Go duration: `90s`, `2h`) | `0s` |
//! | `sim.tessera.dev/duration` | the pod (template) | how long containers run, as node twins read it | `1s`, or forever with `restartPolicy: Always` |
//! | `sim.tessera.dev/lifetime` | the object | when it is deleted, from its arrival (its pods leave) | never |
//!
//! Kinds: Pods; Jobs (`completions` pods, `parallelism` at a time — each next pod arrives as
//! one ends); Deployments, ReplicaSets and StatefulSets (`replicas` pods that run until the
//! object's lifetime ends); ResourceClaims, ResourceClaimTemplates (a claim per pod, named
//! `<pod>-<claim>`), DeviceClasses and PriorityClasses (pods get their priority, as admission
//! gives it); PodGroups (`scheduling.x-k8s.io`: `minMember`, the `tessera.dev/gang-topology`
//! annotation) for pods labelled `scheduling.x-k8s.io/pod-group`; Namespaces and `List`s. Anything else is an error naming the file, document
//! and line.
//!
//! The pods and claims are those the platform's controllers would create: the workload cores
//! (`tessera-workloads`) make them — a Job's pods with their labels, completion indexes,
//! finalizer and owner; a Deployment's ReplicaSet (`pod-template-hash`) and its pods; a
//! StatefulSet's named pods; a ResourceClaim per pod claim from its template, owned by the
//! pod. What the API server would generate stands in deterministically: names `<object>-<i>`
//! for pods the cores leave to `generateName` (a StatefulSet's are the core's own) and
//! `<pod>-<claim>` for template claims; UIDs `sim-<namespace>-<name>`. When and for how long
//! (the annotations above, a Job's waves) is the simulator's own.
//!
//! Pure: text in, pods out. Knows nothing about placement.

use std::collections::BTreeMap;

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use tessera_model::json::text;
use tessera_node::runtime::{Behaviour, parse_duration};
use tessera_scheduler::preemption::pod_group;
use tessera_workloads::resource_claim::claim_from_template;
use tessera_workloads::{deployment, job, replicaset, statefulset};

use crate::timeline::TimedPod;

/// Annotation: when an object arrives.
pub const ARRIVAL: &str = "sim.tessera.dev/arrival";
/// Annotation: when an object is deleted, from its arrival.
pub const LIFETIME: &str = "sim.tessera.dev/lifetime";

/// A pod as the scheduling core takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SimPod {
    /// The pod (namespace, name, priority set).
    pub pod: Pod,
    /// The claims it uses, by name in its namespace.
    pub claims: Vec<String>,
    /// Pods of equal shape are judged alike: namespace, labels and spec, without the name.
    pub shape: String,
    /// Whether it has required or preferred pod (anti-)affinity, so another pod's placement
    /// may change its verdict.
    pub pod_affinity: bool,
    /// What its claims request, for the fragmentation measure.
    pub requests: Vec<DeviceAsk>,
    /// The pod group it belongs to.
    pub group: Option<PodGroup>,
}

/// A gang: pods labelled `scheduling.x-k8s.io/pod-group`, placed all or nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroup {
    /// `namespace/name`.
    pub key: String,
    /// The PodGroup's `spec.minMember`, or every pod of the workload carrying the label.
    pub min_member: usize,
    /// All members within one domain of this node label (`tessera.dev/gang-topology`).
    pub topology_key: Option<String>,
}

/// One request of a pod's claims, roughly: how many devices, and whether they are MIG
/// partitions (by device class name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceAsk {
    /// Devices (`count`; 1 for `All`).
    pub count: u32,
    /// Whether the class is a MIG class.
    pub mig: bool,
}

/// The requests of a claim spec (`firstAvailable`: its first choice).
fn asks(claim_spec: &Value) -> Vec<DeviceAsk> {
    claim_spec
        .pointer("/devices/requests")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|request| {
            let exact = request
                .get("exactly")
                .or_else(|| request.pointer("/firstAvailable/0"))?;
            let class = exact.get("deviceClassName").and_then(Value::as_str)?;
            let count = match exact.get("allocationMode").and_then(Value::as_str) {
                Some("All") => 1,
                _ => exact
                    .get("count")
                    .and_then(Value::as_u64)
                    .and_then(|c| u32::try_from(c).ok())
                    .unwrap_or(1),
            };
            Some(DeviceAsk {
                count,
                mig: class.contains("mig"),
            })
        })
        .collect()
}

/// A parsed workload.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// The pods, in manifest order (a Job's later pods follow its earlier ones).
    pub pods: Vec<TimedPod<SimPod>>,
    /// Every claim: those given and one per template use.
    pub claims: Vec<ResourceClaim>,
    /// DeviceClasses the workload brings.
    pub classes: Vec<DeviceClass>,
}

/// Why a workload cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: document {document}: {message}")]
pub struct WorkloadError {
    /// The file.
    pub file: String,
    /// The document's first line.
    pub line: usize,
    /// The document (from 1).
    pub document: usize,
    /// What is wrong.
    pub message: String,
}

/// Where an object came from.
#[derive(Clone)]
struct Origin {
    file: String,
    line: usize,
    document: usize,
}

impl Origin {
    fn error(&self, message: impl Into<String>) -> WorkloadError {
        WorkloadError {
            file: self.file.clone(),
            line: self.line,
            document: self.document,
            message: message.into(),
        }
    }
}

/// The YAML documents of a text, each with its first line (documents are separated by lines
/// that are `---`).
fn documents(text: &str) -> Vec<(usize, String)> {
    let mut documents = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        if line.trim_end() == "---" || line.starts_with("--- ") {
            documents.push((start, std::mem::take(&mut current)));
            start = i + 2;
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    documents.push((start, current));
    documents
}

fn seconds(text: &str) -> Result<i64, String> {
    let duration = parse_duration(text)?;
    // Whole seconds, rounded up: the timeline's clock ticks in seconds.
    Ok(i64::try_from(duration.as_millis().div_ceil(1000)).unwrap_or(i64::MAX))
}

fn annotation<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// The UID the simulator gives an object (none is generated: runs are deterministic).
fn uid(namespace: &str, name: &str) -> String {
    format!("sim-{namespace}-{name}")
}

/// A ResourceClaimTemplate with `spec.spec` made `{}` where it is missing, as the simulator
/// has always read one.
fn with_claim_spec(mut template: Value) -> Value {
    if let Some(template) = template.as_object_mut() {
        let spec = template.entry("spec").or_insert_with(|| json!({}));
        if spec.is_null() {
            *spec = json!({});
        }
        if let Some(spec) = spec.as_object_mut() {
            let claim = spec.entry("spec").or_insert_with(|| json!({}));
            if claim.is_null() {
                *claim = json!({});
            }
        }
    }
    template
}

fn str_at<'v>(object: &'v Value, pointer: &str) -> Option<&'v str> {
    object.pointer(pointer).and_then(Value::as_str)
}

fn int_at(object: &Value, pointer: &str, origin: &Origin) -> Result<Option<i64>, WorkloadError> {
    match object.pointer(pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_i64().filter(|n| *n >= 0) {
            Some(n) => Ok(Some(n)),
            None => Err(origin.error(format!(
                "{}: {value} is not a non-negative integer",
                pointer.trim_start_matches('/').replace('/', ".")
            ))),
        },
    }
}

/// An object of the workload, before pods are made.
struct Source {
    origin: Origin,
    object: Value,
}

/// What the workload's objects say, gathered before pods are made.
#[derive(Default)]
struct Gathered {
    workloads: Vec<Source>,
    templates: BTreeMap<(String, String), Value>,
    claims: Vec<ResourceClaim>,
    classes: Vec<DeviceClass>,
    priorities: BTreeMap<String, i32>,
    default_priority: i32,
    /// PodGroups by (namespace, name): minMember and topology key.
    groups: BTreeMap<(String, String), (Option<usize>, Option<String>)>,
}

fn gather(
    gathered: &mut Gathered,
    object: Value,
    origin: &Origin,
    namespace: &str,
) -> Result<(), WorkloadError> {
    if object.is_null() {
        return Ok(());
    }
    let kind = str_at(&object, "/kind").unwrap_or_default().to_string();
    let api_version = str_at(&object, "/apiVersion").unwrap_or_default();
    let name = str_at(&object, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let object_namespace = str_at(&object, "/metadata/namespace")
        .unwrap_or(namespace)
        .to_string();
    let named = |what: &str| -> Result<(), WorkloadError> {
        if name.is_empty() {
            Err(origin.error(format!("{what} has no metadata.name")))
        } else {
            Ok(())
        }
    };
    match kind.as_str() {
        "List" => {
            let items = object
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for item in items {
                gather(gathered, item, origin, namespace)?;
            }
        }
        "Pod" | "Job" | "Deployment" | "ReplicaSet" | "StatefulSet" => {
            named(&kind)?;
            let mut object = object;
            if str_at(&object, "/metadata/uid").is_none() {
                object["metadata"]["uid"] = json!(uid(&object_namespace, &name));
            }
            object["metadata"]["namespace"] = json!(object_namespace);
            gathered.workloads.push(Source {
                origin: origin.clone(),
                object,
            });
        }
        "ResourceClaimTemplate" => {
            named(&kind)?;
            gathered.templates.insert((object_namespace, name), object);
        }
        "ResourceClaim" => {
            named(&kind)?;
            let mut object = object;
            object["metadata"]["namespace"] = json!(object_namespace);
            let claim: ResourceClaim = serde_json::from_value(object)
                .map_err(|e| origin.error(format!("ResourceClaim {name}: {e}")))?;
            gathered.claims.push(claim);
        }
        "DeviceClass" => {
            named(&kind)?;
            let class: DeviceClass = serde_json::from_value(object)
                .map_err(|e| origin.error(format!("DeviceClass {name}: {e}")))?;
            gathered.classes.push(class);
        }
        "PriorityClass" => {
            named(&kind)?;
            let value = object
                .get("value")
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(|| {
                    origin.error(format!(
                        "PriorityClass {name}: value must be a 32-bit integer"
                    ))
                })?;
            if object.get("globalDefault").and_then(Value::as_bool) == Some(true) {
                gathered.default_priority = value;
            }
            gathered.priorities.insert(name, value);
        }
        "PodGroup" => {
            named(&kind)?;
            let min = int_at(&object, "/spec/minMember", origin)?
                .map(|m| usize::try_from(m).unwrap_or(usize::MAX));
            let topology = annotation(&object, "tessera.dev/gang-topology").map(String::from);
            gathered
                .groups
                .insert((object_namespace, name), (min, topology));
        }
        "Namespace" => {}
        "" => return Err(origin.error("the document has no kind")),
        other => {
            return Err(origin.error(format!(
                "kind {other} ({api_version}) is not simulated: give Pods, Jobs, Deployments, \
                 ReplicaSets, StatefulSets, ResourceClaims, ResourceClaimTemplates, \
                 DeviceClasses, PriorityClasses, PodGroups or Namespaces"
            )));
        }
    }
    Ok(())
}

/// One pod to make of a workload object.
struct PodPlan {
    /// The pod as its controller's core makes it (the object itself for a Pod).
    pod: Value,
    /// Its name: the core's, or the simulator's stand-in for a generated one.
    name: String,
    arrival: i64,
    follows: Option<usize>,
    lifetime: Option<i64>,
}

impl Gathered {
    fn make_pod(
        &self,
        plan: PodPlan,
        namespace: &str,
        origin: &Origin,
        claims: &mut Vec<ResourceClaim>,
    ) -> Result<TimedPod<SimPod>, WorkloadError> {
        let mut pod = plan.pod;
        pod["apiVersion"] = json!("v1");
        pod["kind"] = json!("Pod");
        let metadata = pod
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
            .ok_or_else(|| origin.error("the pod template is not a mapping"))?;
        metadata["name"] = json!(plan.name);
        metadata["namespace"] = json!(namespace);
        metadata["uid"] = json!(uid(namespace, &plan.name));
        let pod_name = plan.name.clone();
        let spec = pod
            .get_mut("spec")
            .filter(|s| s.is_object())
            .ok_or_else(|| origin.error(format!("pod {pod_name}: spec is missing")))?;
        // Priority, as admission gives it.
        let priority = match spec.get("priorityClassName").and_then(Value::as_str) {
            Some(class) => *self.priorities.get(class).ok_or_else(|| {
                origin.error(format!(
                    "pod {pod_name}: no PriorityClass with name {class} was found"
                ))
            })?,
            None => self.default_priority,
        };
        spec["priority"] = json!(priority);
        // Claims: named ones must exist; templates give the pod its own.
        let mut claim_names = Vec::new();
        let mut requests = Vec::new();
        let entries = spec
            .get("resourceClaims")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for entry in entries {
            let entry_name = str_at(&entry, "/name").unwrap_or_default();
            if let Some(claim) = str_at(&entry, "/resourceClaimName") {
                let known = claims.iter().find(|c| {
                    c.metadata.namespace.as_deref() == Some(namespace)
                        && c.metadata.name.as_deref() == Some(claim)
                });
                let Some(known) = known else {
                    return Err(origin.error(format!(
                        "pod {pod_name}: resourceclaim {namespace}/{claim} is not in the workload"
                    )));
                };
                requests.extend(asks(&serde_json::to_value(&known.spec).unwrap_or_default()));
                claim_names.push(claim.to_string());
            } else if let Some(template) = str_at(&entry, "/resourceClaimTemplateName") {
                let key = (namespace.to_string(), template.to_string());
                let template = self.templates.get(&key).ok_or_else(|| {
                    origin.error(format!(
                        "pod {pod_name}: resourceclaimtemplate {namespace}/{template} is not in the workload"
                    ))
                })?;
                let claim_name = format!("{pod_name}-{entry_name}");
                let template = with_claim_spec(template.clone());
                requests.extend(asks(template.pointer("/spec/spec").unwrap_or(&Value::Null)));
                let template: ResourceClaimTemplate =
                    serde_json::from_value(template).map_err(|e| {
                        origin.error(format!("pod {pod_name}: claim from template: {e}"))
                    })?;
                // The resource claim core makes the claim (owned by the pod, the template's
                // labels and annotations); the name stands in for the generated one.
                let owner = Pod {
                    metadata: ObjectMeta {
                        name: Some(pod_name.clone()),
                        namespace: Some(namespace.to_string()),
                        uid: Some(uid(namespace, &pod_name)),
                        ..ObjectMeta::default()
                    },
                    ..Pod::default()
                };
                let mut claim = claim_from_template(&template, &owner, entry_name);
                claim.metadata.name = Some(claim_name.clone());
                claims.push(claim);
                claim_names.push(claim_name);
            } else {
                return Err(origin.error(format!(
                    "pod {pod_name}: resourceClaims entry {entry_name:?} names neither a claim nor a template"
                )));
            }
        }
        let restart_policy = str_at(&pod, "/spec/restartPolicy")
            .unwrap_or("Always")
            .to_string();
        let annotations: BTreeMap<String, String> = pod
            .pointer("/metadata/annotations")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        let behaviour = Behaviour::from_annotations(&annotations, &restart_policy)
            .map_err(|e| origin.error(format!("pod {pod_name}: {e}")))?;
        // A pod restarted in place (restartPolicy Always) holds its node until deleted.
        let runs = match (restart_policy.as_str(), behaviour.duration) {
            ("Always", _) | (_, None) => None,
            (_, Some(duration)) => {
                Some(i64::try_from(duration.as_millis().div_ceil(1000)).unwrap_or(i64::MAX))
            }
        };
        let duration = match (runs, plan.lifetime) {
            (Some(runs), Some(lifetime)) => Some(runs.min(lifetime)),
            (runs, lifetime) => runs.or(lifetime),
        };
        let pod_affinity = [
            "/spec/affinity/podAffinity",
            "/spec/affinity/podAntiAffinity",
        ]
        .iter()
        .any(|p| pod.pointer(p).is_some_and(|v| !v.is_null()));
        let shape = json!({
            "namespace": namespace,
            "labels": pod.pointer("/metadata/labels"),
            "spec": pod.get("spec"),
        })
        .to_string();
        let pod: Pod = serde_json::from_value(pod)
            .map_err(|e| origin.error(format!("pod {pod_name}: {e}")))?;
        Ok(TimedPod {
            namespace: namespace.to_string(),
            name: pod_name,
            arrival: plan.arrival,
            follows: plan.follows,
            duration,
            priority,
            work: SimPod {
                pod,
                claims: claim_names,
                shape,
                pod_affinity,
                requests,
                group: None,
            },
        })
    }

    /// The pods of one workload object.
    fn pods_of(
        &self,
        source: &Source,
        first: usize,
        claims: &mut Vec<ResourceClaim>,
    ) -> Result<Vec<TimedPod<SimPod>>, WorkloadError> {
        let object = &source.object;
        let origin = &source.origin;
        let kind = str_at(object, "/kind").unwrap_or_default();
        let name = str_at(object, "/metadata/name").unwrap_or_default();
        let namespace = str_at(object, "/metadata/namespace").unwrap_or("default");
        let when = |key: &str| -> Result<Option<i64>, WorkloadError> {
            annotation(object, key)
                .map(|text| {
                    seconds(text).map_err(|e| origin.error(format!("annotation {key}: {e}")))
                })
                .transpose()
        };
        let arrival = when(ARRIVAL)?.unwrap_or(0);
        let lifetime = when(LIFETIME)?;
        let template = || -> Result<&Value, WorkloadError> {
            let template = object
                .pointer("/spec/template")
                .ok_or_else(|| origin.error(format!("{kind} {name}: spec.template is missing")))?;
            // What the cores take for granted of a template (the API validates it upstream).
            if !template.is_object()
                || !template
                    .get("metadata")
                    .is_none_or(|m| m.is_object() || m.is_null())
            {
                return Err(origin.error("the pod template is not a mapping"));
            }
            Ok(template)
        };
        // The pod named `pod_name`, as a core makes it from a checked template.
        let from_template = |template: &Value, pod_name: &str, pod: &dyn Fn() -> Value| {
            if template.get("spec").is_some_and(Value::is_object) {
                Ok(pod())
            } else {
                Err(origin.error(format!("pod {pod_name}: spec is missing")))
            }
        };
        let plan = |pod, name: String, follows| PodPlan {
            pod,
            name,
            arrival,
            follows,
            lifetime,
        };
        let mut pods = Vec::new();
        match kind {
            "Pod" => {
                pods.push(self.make_pod(
                    plan(object.clone(), name.to_string(), None),
                    namespace,
                    origin,
                    claims,
                )?);
            }
            "Job" => {
                let template = template()?;
                let parallelism = int_at(object, "/spec/parallelism", origin)?.unwrap_or(1);
                let completions =
                    int_at(object, "/spec/completions", origin)?.unwrap_or(parallelism.max(1));
                let indexed = str_at(object, "/spec/completionMode") == Some("Indexed");
                for i in 0..completions {
                    // The pod that ends to make room for this one, `parallelism` before it.
                    let follows = (parallelism > 0 && i >= parallelism)
                        .then(|| first + (i - parallelism) as usize);
                    if parallelism == 0 {
                        break;
                    }
                    // The Job core's pod (labels, index, finalizer, owner); the name stands in
                    // for the one the API server generates.
                    let pod_name = format!("{name}-{i}");
                    let pod = from_template(template, &pod_name, &|| {
                        job::pod_for(object, indexed.then_some(i))
                    })?;
                    pods.push(self.make_pod(
                        plan(pod, pod_name, follows),
                        namespace,
                        origin,
                        claims,
                    )?);
                }
            }
            _ => {
                let template = template()?;
                let replicas = int_at(object, "/spec/replicas", origin)?.unwrap_or(1);
                // A Deployment's pods come from the ReplicaSet its core makes for the template
                // (at the object's arrival on the simulator's clock).
                let owner = match kind {
                    "Deployment" => {
                        if !object
                            .pointer("/spec/selector")
                            .is_none_or(|s| s.is_object() || s.is_null())
                        {
                            return Err(origin.error(format!(
                                "Deployment {name}: spec.selector is not a mapping"
                            )));
                        }
                        let at = SystemTime::UNIX_EPOCH
                            + Duration::from_secs(u64::try_from(arrival).unwrap_or(0));
                        let mut replica_set =
                            deployment::plan(object, &[], at).create.ok_or_else(|| {
                                origin.error(format!("Deployment {name}: no ReplicaSet planned"))
                            })?;
                        let set_name = str_at(&replica_set, "/metadata/name")
                            .unwrap_or_default()
                            .to_string();
                        replica_set["metadata"]["namespace"] = json!(namespace);
                        replica_set["metadata"]["uid"] = json!(uid(namespace, &set_name));
                        Some(replica_set)
                    }
                    _ => None,
                };
                for i in 0..replicas {
                    // The StatefulSet core names its pods; for the others the name stands in
                    // for the one the API server generates.
                    let pod_name = format!("{name}-{i}");
                    let pod = from_template(template, &pod_name, &|| match (kind, &owner) {
                        ("StatefulSet", _) => statefulset::pod_for(object, i),
                        (_, Some(replica_set)) => replicaset::pod_from_template(
                            replica_set,
                            "apps/v1",
                            "ReplicaSet",
                            &format!("{}-", text(replica_set, "/metadata/name")),
                        ),
                        _ => replicaset::pod_from_template(
                            object,
                            "apps/v1",
                            "ReplicaSet",
                            &format!("{name}-"),
                        ),
                    })?;
                    let pod_name = str_at(&pod, "/metadata/name").map_or(pod_name, str::to_string);
                    pods.push(self.make_pod(
                        plan(pod, pod_name, None),
                        namespace,
                        origin,
                        claims,
                    )?);
                }
            }
        }
        Ok(pods)
    }
}

/// Reads a workload from manifest files (name, text).
pub fn parse(files: &[(String, String)]) -> Result<Workload, WorkloadError> {
    let mut gathered = Gathered::default();
    for (file, text) in files {
        for (document, (line, body)) in documents(text).into_iter().enumerate() {
            let origin = Origin {
                file: file.clone(),
                line,
                document: document + 1,
            };
            if body.trim().is_empty() {
                continue;
            }
            let object: Value =
                serde_saphyr::from_str(&body).map_err(|e| origin.error(e.to_string()))?;
            gather(&mut gathered, object, &origin, "default")?;
        }
    }
    let mut claims = std::mem::take(&mut gathered.claims);
    let mut pods = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for source in &gathered.workloads {
        for pod in gathered.pods_of(source, pods.len(), &mut claims)? {
            if !seen.insert((pod.namespace.clone(), pod.name.clone())) {
                return Err(source
                    .origin
                    .error(format!("pod {}/{} is made twice", pod.namespace, pod.name)));
            }
            pods.push(pod);
        }
    }
    // Groups: the PodGroup's minMember, or every labelled pod of the workload.
    let mut labelled: BTreeMap<(String, String), usize> = BTreeMap::new();
    for pod in &pods {
        if let Some(group) = pod_group(&pod.work.pod) {
            *labelled
                .entry((pod.namespace.clone(), group.to_string()))
                .or_insert(0) += 1;
        }
    }
    for pod in &mut pods {
        let Some(group) = pod_group(&pod.work.pod).map(str::to_string) else {
            continue;
        };
        let id = (pod.namespace.clone(), group);
        let (min, topology_key) = gathered.groups.get(&id).cloned().unwrap_or_default();
        pod.work.group = Some(PodGroup {
            key: format!("{}/{}", id.0, id.1),
            min_member: min.unwrap_or_else(|| labelled.get(&id).copied().unwrap_or(0)),
            topology_key,
        });
    }
    Ok(Workload {
        pods,
        claims,
        classes: gathered.classes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;

    fn read(text: &str) -> Result<Workload, WorkloadError> {
        parse(&[("w.yaml".into(), text.into())])
    }

    const JOB: &str = "apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: team-a
  annotations:
    sim.tessera.dev/arrival: 2m
spec:
  completions: 5
  parallelism: 2
  completionMode: Indexed
  template:
    metadata:
      annotations:
        sim.tessera.dev/duration: 30m
    spec:
      restartPolicy: Never
      priorityClassName: high
      containers:
      - name: c
        image: trainer
        resources:
          limits:
            nvidia.com/gpu: 1
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high
value: 1000
";

    #[test]
    fn jobs_become_waves_of_pods_with_times_and_priority() {
        let workload = read(JOB).expect("reads");
        let pods = &workload.pods;
        assert_eq!(pods.len(), 5);
        type Row<'a> = (&'a str, i64, Option<usize>, Option<i64>, i32);
        let summary: Vec<Row> = pods
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.arrival,
                    p.follows,
                    p.duration,
                    p.priority,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("train-0", 120, None, Some(1800), 1000),
                ("train-1", 120, None, Some(1800), 1000),
                ("train-2", 120, Some(0), Some(1800), 1000),
                ("train-3", 120, Some(1), Some(1800), 1000),
                ("train-4", 120, Some(2), Some(1800), 1000),
            ]
        );
        let pod = &pods[3].work.pod;
        assert_eq!(pod.metadata.namespace.as_deref(), Some("team-a"));
        let labels = pod.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels["batch.kubernetes.io/job-completion-index"], "3");
        assert_eq!(pod.spec.as_ref().and_then(|s| s.priority), Some(1000));
        // Indexed pods differ only by their index label.
        assert_ne!(pods[0].work.shape, pods[1].work.shape);
    }

    #[test]
    fn template_claims_are_made_per_pod_and_deployments_run_forever() {
        let text = "apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: serve
  annotations: {sim.tessera.dev/lifetime: 1h}
spec:
  replicas: 2
  selector: {matchLabels: {app: serve}}
  template:
    metadata: {labels: {app: serve}}
    spec:
      containers: [{name: c, image: vllm}]
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
";
        let workload = read(text).expect("reads");
        assert_eq!(workload.pods.len(), 2);
        assert_eq!(
            workload.pods[0].duration,
            Some(3600),
            "until the lifetime ends"
        );
        assert_eq!(workload.pods[1].work.claims, ["serve-1-gpu"]);
        assert_eq!(workload.pods[0].work.shape, workload.pods[1].work.shape);
        let names: Vec<_> = workload
            .claims
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["serve-0-gpu", "serve-1-gpu"]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
            let _ = read(&text);
        }

        /// A valid Job with one value replaced by arbitrary text or a number: read or refused
        /// with a located error, never a panic.
        #[test]
        fn mangled_manifests_are_read_or_refused(
            field in 0usize..8,
            value in proptest::prop_oneof![
                "[a-z0-9.:-]{0,12}".prop_map(|s| format!("{s:?}")),
                (-5i64..100_000).prop_map(|n| n.to_string()),
                proptest::strategy::Just("[]".to_string()),
                proptest::strategy::Just("{}".to_string()),
                proptest::strategy::Just("null".to_string()),
            ],
        ) {
            let targets = [
                "completions: 5",
                "parallelism: 2",
                "completionMode: Indexed",
                "sim.tessera.dev/arrival: 2m",
                "sim.tessera.dev/duration: 30m",
                "restartPolicy: Never",
                "priorityClassName: high",
                "value: 1000",
            ];
            let target = targets[field];
            let (key, _) = target.split_once(": ").expect("a key");
            let text = JOB.replacen(target, &format!("{key}: {value}"), 1);
            match read(&text) {
                Ok(workload) => {
                    for pod in &workload.pods {
                        proptest::prop_assert!(pod.follows.is_none_or(|f| f < workload.pods.len()));
                        proptest::prop_assert!(pod.duration.is_none_or(|d| d >= 0));
                    }
                }
                Err(error) => proptest::prop_assert!(error.to_string().starts_with("w.yaml:"), "{error}"),
            }
        }
    }

    #[test]
    fn bad_workloads_name_file_document_and_line() {
        let cases = [
            (
                "kind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n---\nkind: Service\napiVersion: v1\nmetadata: {name: s}\n",
                "w.yaml:5: document 2: kind Service (v1) is not simulated",
            ),
            (
                "kind: Pod\nmetadata:\n  name: a\n  annotations: {sim.tessera.dev/arrival: soon}\nspec: {containers: []}\n",
                "w.yaml:1: document 1: annotation sim.tessera.dev/arrival: \"soon\"",
            ),
            (
                "kind: Pod\nmetadata: {name: a}\nspec:\n  priorityClassName: gold\n  containers: []\n",
                "no PriorityClass with name gold was found",
            ),
            (
                "kind: Pod\nmetadata: {name: a}\nspec:\n  containers: []\n  resourceClaims: [{name: g, resourceClaimName: missing}]\n",
                "resourceclaim default/missing is not in the workload",
            ),
            (
                "kind: Job\nmetadata: {name: j}\nspec: {parallelism: -1, template: {spec: {containers: []}}}\n",
                "spec.parallelism: -1 is not a non-negative integer",
            ),
            ("kind: Pod\nmetadata: {name: a}\n", "pod a: spec is missing"),
            ("kind: Pod\nmetadata: {name: [\n", "w.yaml:1: document 1:"),
            (
                "kind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n---\nkind: Pod\nmetadata: {name: a}\nspec: {containers: []}\n",
                "pod default/a is made twice",
            ),
        ];
        for (text, expected) in cases {
            let error = read(text).expect_err(text).to_string();
            assert!(
                error.contains(expected),
                "{text}\n→ {error}\nwanted {expected}"
            );
        }
    }
}
