//! Kueue's job framework (`pkg/controller/jobframework`): the one reconcile every integrated
//! kind of job shares. A kind is a table of functions ([`Integration`], Kueue's `GenericJob`):
//! its PodSets, whether it finished, whether pods are active, how PodSet infos (node selector,
//! tolerations) go into its pod templates, and how partial admission scales it.
//!
//! A job labelled `kueue.x-k8s.io/queue-name` is suspended until its Workload is admitted.
//! From a job, the Workload it owns (if any), the flavors and the priority classes,
//! [`reconcile`] says what to write, in Kueue's order: a finished job finishes its Workload; a
//! job without one gets it (`GetWorkloadNameForOwnerWithGVK`, owner reference, the `job-uid`
//! label, the kind's PodSets, the priority of its WorkloadPriorityClass label or of the first
//! PodSet template's PriorityClass); an evicted Workload's job is suspended with its templates
//! restored, and its quota released once no pod is active; an admitted Workload's suspended
//! job is started with the flavors' node labels and tolerations injected into each PodSet's
//! template, with the PodSet label, the Workload annotation and, for a PodSet placed by
//! Topology-Aware Scheduling, the `kueue.x-k8s.io/topology` scheduling gate (the topology
//! ungater, `api::tas::ungate`, lifts it pod by pod); a running job whose Workload is not
//! admitted is suspended. A PodSet's `topologyRequest` is built from its template's
//! annotations ([`topology_request`]).
//!
//! Knows no kind itself: batch/v1 Job is [`crate::api::job`], JobSet [`crate::api::jobset`].
//! Kueue's webhook defaulting (created suspended) is `tessera-api`'s admission. Not modelled:
//! the `resource-in-use` finalizer (the Workload goes with its job through its owner
//! reference), the `stopping` annotation's two-step stop, label and annotation propagation,
//! queue-name changes, a job no longer equivalent to its Workload, reclaimable pods,
//! waitForPodsReady, and podSetUpdates of admission checks.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use tessera_model::kueue::workload::{POD_PRIORITY_CLASS, WORKLOAD_PRIORITY_CLASS};
use tessera_model::{conditions, json as json_read};

use crate::api::status::{self, Event};
use crate::flavor::ResourceFlavorSpec;

pub use tessera_model::kueue::{
    PRIORITY_CLASS_LABEL as PRIORITY_CLASS, QUEUE_NAME_LABEL as QUEUE_NAME,
};
/// The label of a Workload naming its job's UID.
pub const JOB_UID: &str = "kueue.x-k8s.io/job-uid";

/// One PodSet of a job, as its kind computes it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSet {
    /// The PodSet's name.
    pub name: String,
    /// The pod template.
    pub template: Value,
    /// How many pods.
    pub count: i32,
    /// The fewest pods partial admission may settle for.
    pub min_count: Option<i32>,
    /// `topologyRequest` (`PodSetTopologyRequest`), built from the template's annotations
    /// and the kind's index labels.
    pub topology_request: Option<Value>,
}

/// `batch.kubernetes.io/job-completion-index`: a Job pod's index (the TAS rank).
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// Kueue's `podSetTopologyRequestBuilder.Build` over a pod template's annotations: the
/// required, preferred or unconstrained level and the slice layers; the index labels the
/// kind reads ranks from (`PodIndexLabel`, `SubGroup`); the PodSet group only with a level.
/// `None` when nothing is asked, or when the annotations are invalid (Kueue's webhook refuses
/// such a job; here its Workload simply does not ask for TAS).
pub fn topology_request(
    template: &Value,
    pod_index_label: Option<&str>,
    sub_group: Option<(&str, i32)>,
) -> Option<Value> {
    use tessera_model::kueue::topology::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION as UNCONSTRAINED;
    let annotations: BTreeMap<String, String> = template
        .pointer("/metadata/annotations")
        .and_then(|a| serde_json::from_value(a.clone()).ok())
        .unwrap_or_default();
    let annotated = crate::tas::annotations::topology_from_annotations(&annotations).ok()?;
    if annotated.is_none() && pod_index_label.is_none() && sub_group.is_none() {
        return None;
    }
    let mut request = Map::new();
    if let Some(annotated) = annotated {
        let asked = &annotated.request;
        if let Some(level) = &asked.required {
            request.insert("required".into(), json!(level));
        } else if let Some(level) = &asked.preferred {
            request.insert("preferred".into(), json!(level));
        } else if annotations.contains_key(UNCONSTRAINED) {
            request.insert("unconstrained".into(), json!(asked.unconstrained));
        }
        let constraints = crate::tas::annotations::PODSET_SLICE_CONSTRAINTS_ANNOTATION;
        if annotations.contains_key(constraints) {
            let layers: Vec<Value> = asked
                .slices
                .iter()
                .map(|s| json!({"topology": s.topology, "size": s.size}))
                .collect();
            request.insert(
                "podsetSliceRequiredTopologyConstraints".into(),
                json!(layers),
            );
        } else if let Some(slice) = asked.slices.first() {
            request.insert("podSetSliceRequiredTopology".into(), json!(slice.topology));
            request.insert("podSetSliceSize".into(), json!(slice.size));
        }
        if let Some(group) = annotated.group {
            request.insert("podSetGroupName".into(), json!(group));
        }
    }
    if let Some(label) = pod_index_label {
        request.insert("podIndexLabel".into(), json!(label));
    }
    if let Some((label, count)) = sub_group {
        request.insert("subGroupIndexLabel".into(), json!(label));
        request.insert("subGroupCount".into(), json!(count));
    }
    Some(Value::Object(request))
}

/// What Kueue puts into (or restores in) one PodSet's pod template (`podset.PodSetInfo`):
/// the node selector, tolerations, labels, annotations and scheduling gates, whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSetInfo {
    /// The whole node selector.
    pub node_selector: Map<String, Value>,
    /// The whole toleration list.
    pub tolerations: Vec<Value>,
    /// The template's labels.
    pub labels: Map<String, Value>,
    /// The template's annotations.
    pub annotations: Map<String, Value>,
    /// The whole scheduling gate list.
    pub scheduling_gates: Vec<Value>,
}

fn object_at(value: Option<&Value>, field: &str) -> Map<String, Value> {
    value
        .and_then(|v| v.get(field))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

impl PodSetInfo {
    /// A pod template's own node selector, tolerations, labels, annotations and gates.
    fn of_template(template: &Value) -> PodSetInfo {
        let metadata = template.get("metadata");
        PodSetInfo {
            labels: object_at(metadata, "labels"),
            annotations: object_at(metadata, "annotations"),
            scheduling_gates: template
                .pointer("/spec/schedulingGates")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            ..PodSetInfo::of_pod_spec(template.get("spec"))
        }
    }

    /// What `getPodSetsInfoFromStatus` adds for an admitted PodSet with TAS on: the
    /// `kueue.x-k8s.io/podset` label and `kueue.x-k8s.io/workload` annotation, and for a
    /// PodSet with a topology assignment the `kueue.x-k8s.io/topology` scheduling gate (and
    /// the unconstrained annotation when its topology request was implied).
    fn add_admission(&mut self, workload: &Value, assignment: &Value, pod_set: Option<&Value>) {
        use crate::api::tas::{POD_SET_LABEL, TOPOLOGY_SCHEDULING_GATE, WORKLOAD_ANNOTATION};
        use tessera_model::kueue::topology::PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION;
        let name = assignment
            .get("name")
            .cloned()
            .unwrap_or_else(|| json!("main"));
        self.labels.insert(POD_SET_LABEL.into(), name);
        self.annotations.insert(
            WORKLOAD_ANNOTATION.into(),
            json!(json_read::text(workload, "/metadata/name")),
        );
        if assignment
            .get("topologyAssignment")
            .is_none_or(Value::is_null)
        {
            return;
        }
        let request = pod_set.and_then(|p| p.get("topologyRequest"));
        let explicit = ["required", "preferred", "unconstrained"]
            .iter()
            .any(|key| request.and_then(|r| r.get(*key)).is_some());
        if !explicit {
            self.annotations.insert(
                PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION.into(),
                json!("true"),
            );
        }
        let gate = json!({"name": TOPOLOGY_SCHEDULING_GATE});
        if !self.scheduling_gates.contains(&gate) {
            self.scheduling_gates.push(gate);
        }
    }

    /// A pod spec's own node selector and tolerations.
    fn of_pod_spec(pod_spec: Option<&Value>) -> PodSetInfo {
        PodSetInfo {
            node_selector: object_at(pod_spec, "nodeSelector"),
            tolerations: pod_spec
                .and_then(|s| s.get("tolerations"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            ..PodSetInfo::default()
        }
    }

    /// `podset.FromUpdate` merged in for every admission check's `podSetUpdates` entry naming
    /// this PodSet (`getPodSetsInfoFromStatus`): its labels, annotations and node selector
    /// set, its tolerations appended (each once).
    fn add_check_updates(&mut self, workload: &Value, pod_set: &str) {
        let updates = workload
            .pointer("/status/admissionChecks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|check| check.get("podSetUpdates").and_then(Value::as_array))
            .flatten()
            .filter(|update| update.get("name").and_then(Value::as_str) == Some(pod_set));
        for update in updates {
            let some = Some(update);
            self.labels.extend(object_at(some, "labels"));
            self.annotations.extend(object_at(some, "annotations"));
            self.node_selector.extend(object_at(some, "nodeSelector"));
            for toleration in list(update.get("tolerations")) {
                if !self.tolerations.contains(toleration) {
                    self.tolerations.push(toleration.clone());
                }
            }
        }
    }

    /// `podset.Merge` of the assignment's flavors: their node labels into the node
    /// selector, their tolerations appended (each once).
    fn add_flavors(&mut self, assignment: &Value, flavors: &BTreeMap<String, ResourceFlavorSpec>) {
        let mut seen = Vec::new();
        for flavor in assignment
            .get("flavors")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(_, f)| f.as_str())
        {
            if seen.contains(&flavor) {
                continue;
            }
            seen.push(flavor);
            let Some(spec) = flavors.get(flavor) else {
                continue;
            };
            for (key, value) in &spec.node_labels {
                self.node_selector.insert(key.clone(), json!(value));
            }
            for toleration in &spec.tolerations {
                let toleration = serde_json::to_value(toleration).unwrap_or_default();
                if !self.tolerations.contains(&toleration) {
                    self.tolerations.push(toleration);
                }
            }
        }
    }
}

/// `podset.Merge` of a PodSet assignment into a pod spec: the flavors' node labels merged into
/// its nodeSelector and their tolerations appended. Answers `{nodeSelector, tolerations?}`.
pub(crate) fn flavored_pod_spec(
    pod_spec: Option<&Value>,
    assignment: &Value,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
) -> Value {
    let mut info = PodSetInfo::of_pod_spec(pod_spec);
    info.add_flavors(assignment, flavors);
    let mut pod_spec = json!({"nodeSelector": info.node_selector});
    if !info.tolerations.is_empty() {
        pod_spec["tolerations"] = Value::Array(info.tolerations);
    }
    pod_spec
}

/// One kind of job Kueue integrates: Kueue's `GenericJob` as a table of functions.
#[derive(Debug, Clone, Copy)]
pub struct Integration {
    /// Its name in the Configuration's `integrations.frameworks` (`batch/job`, …).
    pub framework: &'static str,
    /// The kind's `apiVersion`.
    pub api_version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The component its events are recorded as (`<framework>-kueue-controller`).
    pub component: &'static str,
    /// `PodSets`: the Workload's PodSets from the job.
    pub pod_sets: fn(&Value) -> Vec<PodSet>,
    /// `Finished`: success and the condition's message, once finished.
    pub finished: fn(&Value) -> Option<(bool, String)>,
    /// `IsActive`: whether any pod is active.
    pub active: fn(&Value) -> bool,
    /// `PodsReady`: whether all its pods are ready or have succeeded (waitForPodsReady).
    pub pods_ready: fn(&Value) -> bool,
    /// `RunWithPodSetsInfo` / `RestorePodSetsInfo`: the merge patch of `spec` fields putting
    /// one info per PodSet (as many as `pod_sets` answers) into the pod templates.
    pub pod_set_infos_patch: fn(&Value, &[PodSetInfo]) -> Map<String, Value>,
    /// Partial admission: sets the fields following the PodSets' counts in the whole patch.
    pub scale: fn(&Value, &[Option<i64>], &mut Value),
}

impl Integration {
    /// The API group of the kind.
    pub fn group(&self) -> &'static str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    fn event(&self, job: &Value, reason: &str, message: &str) -> JobWrite {
        JobWrite::Event(Event::about(
            job,
            (self.api_version, self.kind),
            ("Normal", reason),
            message,
        ))
    }
}

/// A job's LocalQueue, if it has one.
pub fn queue_name(job: &Value) -> Option<&str> {
    job.pointer("/metadata/labels")
        .and_then(|labels| labels.get(QUEUE_NAME))
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
}

/// `GetWorkloadNameForOwnerWithGVK`: `<lowercased kind>-<name>` (truncated to 247
/// characters) and the first five hex digits of a SHA-1 over kind, group, name and UID.
pub fn workload_name(owner_name: &str, owner_uid: &str, (group, kind): (&str, &str)) -> String {
    tessera_model::kueue::workload_name(kind, group, owner_name, owner_uid)
}

/// Priority classes by name: WorkloadPriorityClasses and PriorityClasses (with the latter's
/// `globalDefault`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Priorities {
    /// WorkloadPriorityClass values.
    pub workload: BTreeMap<String, i32>,
    /// PriorityClass values.
    pub pod: BTreeMap<String, i32>,
    /// The PriorityClass marked `globalDefault`, if any.
    pub pod_default: Option<String>,
}

impl Priorities {
    /// From WorkloadPriorityClass and PriorityClass objects.
    pub fn read(workload_classes: &[Value], pod_classes: &[Value]) -> Priorities {
        let value = |o: &Value| {
            let name = json_read::text(o, "/metadata/name").to_owned();
            let value = json_read::int(o, "/value")
                .and_then(|v| i32::try_from(v).ok())
                .unwrap_or(0);
            (name, value)
        };
        Priorities {
            workload: workload_classes.iter().map(value).collect(),
            pod: pod_classes.iter().map(value).collect(),
            pod_default: pod_classes
                .iter()
                .find(|o| o.get("globalDefault") == Some(&json!(true)))
                .map(|o| json_read::text(o, "/metadata/name").to_owned()),
        }
    }

    /// `ExtractPriority`: the WorkloadPriorityClass of the label if set (value 0 when it does
    /// not exist), else the first PodSet template's PriorityClass (or the global default),
    /// else 0.
    pub(crate) fn of(&self, job: &Value, pod_sets: &[PodSet]) -> (Option<Value>, i32) {
        let named = pod_sets
            .iter()
            .map(|p| json_read::text(&p.template, "/spec/priorityClassName"))
            .find(|name| !name.is_empty());
        self.of_named(job, named)
    }

    /// The WorkloadPriorityClass the object's label names when no such class exists: Kueue
    /// then makes no Workload (`ExtractPriority`'s NotFound) until it does.
    pub fn missing_workload_class<'a>(&self, object: &'a Value) -> Option<&'a str> {
        object
            .pointer("/metadata/labels")
            .and_then(|l| l.get(PRIORITY_CLASS))
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty() && !self.workload.contains_key(*name))
    }

    /// Kueue's warning about the object naming a missing WorkloadPriorityClass.
    pub fn missing_class_event(
        object: &Value,
        (api_version, kind): (&str, &str),
        class: &str,
    ) -> Event {
        Event::about(
            object,
            (api_version, kind),
            ("Warning", "WorkloadPriorityClassNotFound"),
            &format!("WorkloadPriorityClass {class:?} not found"),
        )
    }

    /// `ExtractPriority` for an object whose pod spec is at `pod_spec` (a Pod: `/spec`).
    pub(crate) fn of_pod(&self, object: &Value, pod_spec: &str) -> (Option<Value>, i32) {
        let named = json_read::text(object, &format!("{pod_spec}/priorityClassName"));
        self.of_named(object, Some(named).filter(|name| !name.is_empty()))
    }

    /// The WorkloadPriorityClass of the object's label, else the PriorityClass `named` (or
    /// the global default), else 0.
    fn of_named(&self, job: &Value, named: Option<&str>) -> (Option<Value>, i32) {
        let label = job
            .pointer("/metadata/labels")
            .and_then(|l| l.get(PRIORITY_CLASS))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        if let Some(name) = label {
            let reference = class_reference(WORKLOAD_PRIORITY_CLASS, name);
            return (
                Some(reference),
                self.workload.get(name).copied().unwrap_or(0),
            );
        }
        let name = named.or(self.pod_default.as_deref());
        match name.and_then(|n| Some((n, self.pod.get(n)?))) {
            Some((name, value)) => (Some(class_reference(POD_PRIORITY_CLASS, name)), *value),
            None => (None, 0),
        }
    }
}

/// `spec.priorityClassRef` naming a class of `(group, kind)`.
fn class_reference((group, kind): (&str, &str), name: &str) -> Value {
    json!({"group": group, "kind": kind, "name": name})
}

/// One write the integration asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum JobWrite {
    /// Create this Workload.
    CreateWorkload(Value),
    /// Merge-patch the job.
    PatchJob(Value),
    /// Merge-patch the Workload's status.
    WorkloadStatus(Value),
    /// Record an event about the job.
    Event(Event),
}

/// The Workload a job names with `kueue.x-k8s.io/prebuilt-workload-name` (as MultiKueue's
/// copies on a worker do), `namespace/name`: the job's Workload is that one rather than one
/// it owns (`PrebuiltWorkloadFor`).
pub fn prebuilt_workload(job: &Value) -> Option<String> {
    let key = format!(
        "/metadata/labels/{}",
        tessera_model::kueue::pod::PREBUILT_WORKLOAD.replace('/', "~1")
    );
    let name = json_read::text(job, &key);
    (!name.is_empty()).then(|| format!("{}/{name}", json_read::text(job, "/metadata/namespace")))
}

/// `namespace/name` of an object.
pub(crate) fn key_of(object: &Value) -> String {
    format!(
        "{}/{}",
        json_read::text(object, "/metadata/namespace"),
        json_read::text(object, "/metadata/name")
    )
}

/// The Workload Kueue constructs for a job (`ConstructWorkload`, `PrepareWorkloadPriority`).
pub fn workload_for(kind: &Integration, job: &Value, priorities: &Priorities) -> Value {
    let name = json_read::text(job, "/metadata/name");
    let uid = json_read::text(job, "/metadata/uid");
    let pod_sets = (kind.pod_sets)(job);
    let (reference, priority) = priorities.of(job, &pod_sets);
    let pod_set_values: Vec<Value> = pod_sets
        .into_iter()
        .map(|p| {
            let mut value = json!({"name": p.name, "template": p.template, "count": p.count});
            if let Some(min) = p.min_count {
                value["minCount"] = json!(min);
            }
            if let Some(request) = p.topology_request {
                value["topologyRequest"] = request;
            }
            value
        })
        .collect();
    let mut spec = json!({"podSets": pod_set_values, "priority": priority});
    // A job managed without a queue name: Kueue's empty `queueName` is omitted.
    if let Some(queue) = queue_name(job) {
        spec["queueName"] = json!(queue);
    }
    if let Some(reference) = reference {
        spec["priorityClassRef"] = reference;
    }
    let mut workload = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(name, uid, (kind.group(), kind.kind)),
            "namespace": json_read::text(job, "/metadata/namespace"),
            "labels": {JOB_UID: uid},
            "ownerReferences": [{"apiVersion": kind.api_version, "kind": kind.kind, "name": name,
                "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": spec,
    });
    // `NewWorkload`: the job's ProvisioningRequest parameters travel with its Workload.
    let parameters: Map<String, Value> = job
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(crate::api::provisioning::PARAMETER_ANNOTATION_PREFIX))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if !parameters.is_empty() {
        workload["metadata"]["annotations"] = Value::Object(parameters);
    }
    workload
}

fn suspended(job: &Value) -> bool {
    job.pointer("/spec/suspend") == Some(&json!(true))
}

/// `{"spec": {"suspend": suspend, ..fields}}`.
fn spec_patch(suspend: bool, fields: Map<String, Value>) -> Value {
    let mut spec = fields;
    spec.insert("suspend".into(), json!(suspend));
    json!({ "spec": spec })
}

fn list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The patch starting an admitted job (`RunWithPodSetsInfo`): unsuspended, each PodSet's
/// template with its assigned flavors' node labels merged into its nodeSelector and their
/// tolerations appended, and the kind's partial-admission scaling. `None` when the
/// admission does not have one assignment per PodSet (Kueue's `BadPodSetsInfoLenError`).
fn start_patch(
    kind: &Integration,
    job: &Value,
    workload: &Value,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
) -> Option<Value> {
    let pod_sets = (kind.pod_sets)(job);
    let assignments = list(workload.pointer("/status/admission/podSetAssignments"));
    if assignments.len() != pod_sets.len() {
        return None;
    }
    let recorded = list(workload.pointer("/spec/podSets"));
    let infos: Vec<PodSetInfo> = pod_sets
        .iter()
        .zip(assignments)
        .enumerate()
        .map(|(index, (pod_set, assignment))| {
            let mut info = PodSetInfo::of_template(&pod_set.template);
            info.add_flavors(assignment, flavors);
            info.add_admission(workload, assignment, recorded.get(index));
            info.add_check_updates(workload, &pod_set.name);
            info
        })
        .collect();
    let mut patch = spec_patch(false, (kind.pod_set_infos_patch)(job, &infos));
    let counts: Vec<Option<i64>> = assignments
        .iter()
        .map(|a| a.get("count").and_then(Value::as_i64))
        .collect();
    (kind.scale)(job, &counts, &mut patch);
    Some(patch)
}

/// The patch stopping a job (`Suspend` and `RestorePodSetsInfo`): suspended, each PodSet's
/// template's nodeSelector and tolerations as the Workload's PodSet had them, and the counts
/// back to the PodSets' under partial admission. Only suspended when the Workload does not
/// have one PodSet per the job's (as Kueue skips the restore).
fn stop_patch(kind: &Integration, job: &Value, workload: Option<&Value>) -> Value {
    let recorded = list(workload.and_then(|w| w.pointer("/spec/podSets")));
    if recorded.is_empty() || recorded.len() != (kind.pod_sets)(job).len() {
        return spec_patch(true, Map::new());
    }
    let infos: Vec<PodSetInfo> = recorded
        .iter()
        .map(|p| PodSetInfo::of_template(p.get("template").unwrap_or(&Value::Null)))
        .collect();
    let mut patch = spec_patch(true, (kind.pod_set_infos_patch)(job, &infos));
    let counts: Vec<Option<i64>> = recorded
        .iter()
        .map(|p| p.get("count").and_then(Value::as_i64))
        .collect();
    (kind.scale)(job, &counts, &mut patch);
    patch
}

/// What to write for a job of `kind` labelled with a queue name, given the Workload it owns
/// (if any), the ResourceFlavors by name, the priority classes and the time (the generic
/// reconciler's steps). Empty for a job without a queue name.
pub fn reconcile(
    kind: &Integration,
    job: &Value,
    workload: Option<&Value>,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
    priorities: &Priorities,
    now: SystemTime,
) -> Vec<JobWrite> {
    let options = Options::default();
    reconcile_with(kind, job, workload, (flavors, priorities), options, now)
}

/// The parts of Kueue's Configuration the job reconciler reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// The job is managed without a queue name (`manageJobsWithoutQueueName` and its
    /// namespace matching `managedJobsNamespaceSelector`).
    pub managed_without_queue_name: bool,
    /// waitForPodsReady is on: the Workload's `PodsReady` condition is kept (step 5).
    pub wait_for_pods_ready: bool,
}

/// [`reconcile`] with the Configuration's options: a job without a queue name is managed
/// when `options` say so, and with waitForPodsReady a change of the Workload's `PodsReady`
/// condition is written first, alone, as Kueue's reconciler returns after it.
pub fn reconcile_with(
    kind: &Integration,
    job: &Value,
    workload: Option<&Value>,
    (flavors, priorities): (&BTreeMap<String, ResourceFlavorSpec>, &Priorities),
    options: Options,
    now: SystemTime,
) -> Vec<JobWrite> {
    let managed = queue_name(job).is_some() || options.managed_without_queue_name;
    if !managed || job.pointer("/metadata/deletionTimestamp").is_some() {
        return Vec::new();
    }
    if workload.is_some_and(|w| conditions::is_true(w, status::FINISHED)) {
        return Vec::new();
    }
    if let Some((succeeded, message)) = (kind.finished)(job) {
        let Some(workload) = workload else {
            return Vec::new();
        };
        let Some(status) = status::finished(workload, succeeded, &message, now) else {
            return Vec::new();
        };
        let declared = format!("Workload '{}' is declared finished", key_of(workload));
        return vec![
            JobWrite::WorkloadStatus(status),
            kind.event(job, "FinishedWorkload", &declared),
        ];
    }
    let Some(workload) = workload else {
        let mut writes = Vec::new();
        if !suspended(job) {
            writes.push(JobWrite::PatchJob(stop_patch(kind, job, None)));
            writes.push(kind.event(job, "Stopped", "missing workload"));
        }
        if prebuilt_workload(job).is_some() {
            // A job naming a prebuilt Workload waits for it; none is constructed.
            return writes;
        }
        if let Some(class) = priorities.missing_workload_class(job) {
            let event = Priorities::missing_class_event(job, (kind.api_version, kind.kind), class);
            writes.push(JobWrite::Event(event));
            return writes;
        }
        let created = workload_for(kind, job, priorities);
        let message = format!("Created Workload: {}", key_of(&created));
        writes.push(JobWrite::CreateWorkload(created));
        writes.push(kind.event(job, "CreatedWorkload", &message));
        return writes;
    };
    if options.wait_for_pods_ready {
        let ready = (kind.pods_ready)(job);
        if let Some(status) = crate::api::pods_ready::pods_ready_status(workload, ready, now) {
            return vec![JobWrite::WorkloadStatus(status)];
        }
    }
    let reserved = conditions::is_true(workload, status::QUOTA_RESERVED);
    if let Some(evicted) =
        conditions::find(workload, status::EVICTED).filter(|c| c["status"] == "True")
    {
        let mut writes = Vec::new();
        if !suspended(job) {
            let message = evicted["message"].as_str().unwrap_or_default();
            writes.push(JobWrite::PatchJob(stop_patch(kind, job, Some(workload))));
            writes.push(kind.event(job, "Stopped", message));
        }
        if reserved
            && !(kind.active)(job)
            && let Some(status) = status::released(workload, now)
        {
            writes.push(JobWrite::WorkloadStatus(status));
        }
        return writes;
    }
    let admitted = conditions::is_true(workload, status::ADMITTED) && reserved;
    match (suspended(job), admitted) {
        (true, true) => {
            let Some(patch) = start_patch(kind, job, workload, flavors) else {
                return Vec::new();
            };
            let cluster_queue = json_read::text(workload, "/status/admission/clusterQueue");
            vec![
                JobWrite::PatchJob(patch),
                kind.event(
                    job,
                    "Started",
                    &format!("Admitted by clusterQueue {cluster_queue}"),
                ),
            ]
        }
        (false, false) => vec![
            JobWrite::PatchJob(stop_patch(kind, job, Some(workload))),
            kind.event(job, "Stopped", "Not admitted by cluster queue"),
        ],
        _ => Vec::new(),
    }
}

/// Whether a condition of `types` is True, with success (the first type) and its message:
/// a `Finished` over the kind's terminal conditions.
pub fn finished_by_condition(
    job: &Value,
    (succeeded, failed): (&str, &str),
) -> Option<(bool, String)> {
    list(job.pointer("/status/conditions"))
        .iter()
        .find(|c| (c["type"] == succeeded || c["type"] == failed) && c["status"] == "True")
        .map(|c| {
            (
                c["type"] == succeeded,
                c["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_names_follow_kueues_generate_workload_name() {
        // Kueue's TestGenerateWorkloadNameWithExtra (no extra, long names).
        let long = "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-social-media-engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-senior-architect-validation-checked-approved-by-legal-and-ops-dept";
        let cases = [
            ("name", "uid", ("batch", "Job"), "job-name-ef3a1".to_owned()),
            (
                long,
                "uid",
                ("batch", "Job"),
                format!("job-{}-218b8", &long[..243]),
            ),
        ];
        for (name, uid, gvk, want) in cases {
            assert_eq!(workload_name(name, uid, gvk), want, "{name}");
        }
        // The kind and group take part: a JobSet's name differs from a Job's of the same name.
        let jobset = workload_name("name", "uid", ("jobset.x-k8s.io", "JobSet"));
        assert!(jobset.starts_with("jobset-name-"), "{jobset}");
        assert_ne!(
            &jobset["jobset-".len()..],
            &"job-name-ef3a1"["job-".len()..]
        );
        assert_eq!(workload_name(&"é".repeat(200), "u", ("", "Job")).len(), 252);
    }

    #[test]
    fn terminal_conditions_finish_with_their_message() {
        let cases = [
            (json!([]), None),
            (
                json!([{"type": "Completed", "status": "True", "message": "done"}]),
                Some((true, "done")),
            ),
            (
                json!([{"type": "Failed", "status": "True", "message": "boom"}]),
                Some((false, "boom")),
            ),
            (json!([{"type": "Failed", "status": "False"}]), None),
        ];
        for (conditions, want) in cases {
            let job = json!({"status": {"conditions": conditions}});
            let got = finished_by_condition(&job, ("Completed", "Failed"));
            assert_eq!(
                got.as_ref().map(|(s, m)| (*s, m.as_str())),
                want,
                "{conditions}"
            );
        }
    }
}
