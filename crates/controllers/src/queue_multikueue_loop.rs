//! MultiKueue's controller loop on a manager, apart from the queue manager's admission rounds
//! (as Kueue's MultiKueue reconcilers are controllers of their own): a worker's change (its
//! copy of a Workload admitted, its Job's status) is answered after this loop's own short
//! settling, not after the admission round in progress and the settling that follows it.
//!
//! It watches the MultiKueueConfigs and MultiKueueClusters from the start, and the manager's
//! Workloads, AdmissionChecks, Jobs and JobSets only once a MultiKueueCluster or
//! MultiKueueConfig exists (a platform that uses no MultiKueue pays nothing for it). Each pass
//! hands the Workloads that name admission checks (its own Workload writes laid over the
//! watch until it shows them) to [`MultiKueueWatches::reconcile`]; what the ended writes
//! wrote here is also handed to the queue manager's overlay ([`Handoff`]).
//!
//! Decides nothing itself: [`crate::queue_multikueue`] carries out what
//! [`tessera_queue::api::multikueue::reconcile`] answers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::Value;
use tessera_model::address::{AddressMap, address_of};
use tessera_model::clock::Clock;
use tessera_queue::api::multikueue::OwnerKind;
use tessera_queue::api::objects;
use tessera_queue::config::Configuration;

use crate::pacing::{Changes, Pacing, next_paced_pass};
use crate::queue::{WrittenWorkloads, kueue_resource, values};
use crate::queue_multikueue::{KeyedWorkload, LocalOwners, MultiKueueWatches};
use crate::queue_multikueue_remote::owner_resource;
use crate::queue_multikueue_touched::Touched;
use crate::serialized::Serialized;

/// How often the loop runs without a change (Kueue's `RequeueAfter` answers wait for it).
const RESYNC: Duration = Duration::from_secs(5);

/// The Workloads MultiKueue's writes wrote on the manager, for the queue manager's overlay.
#[derive(Clone, Default)]
pub struct Handoff(Arc<Mutex<Vec<Arc<DynamicObject>>>>);

impl Handoff {
    fn give(&self, objects: &[Arc<DynamicObject>]) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(objects.iter().cloned());
    }

    /// The Workloads written since the last call.
    pub fn take(&self) -> Vec<Arc<DynamicObject>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The manager's objects the plans read.
struct Local {
    workloads: Store<DynamicObject>,
    admission_checks: Store<DynamicObject>,
    jobs: Store<Job>,
    jobsets: Store<DynamicObject>,
    jobset_resource: ApiResource,
}

impl Local {
    /// Starts the reflectors; their changes join `changes`.
    /// The Jobs' and JobSets' changes are marked in `touched` (a settled Workload whose
    /// owner changed is reconciled again); a Workload's own change shows in its JSON.
    fn watch(client: &Client, touched: &Touched, changes: &mut Changes) -> Local {
        let mut watch_all = |resource: &ApiResource| {
            let api = Api::<DynamicObject>::all_with(client.clone(), resource);
            let (store, stream) = crate::shell::watched_with(api, resource.clone());
            changes.push(stream);
            store
        };
        let workloads = watch_all(&kueue_resource("Workload", "workloads"));
        let admission_checks = watch_all(&kueue_resource("AdmissionCheck", "admissionchecks"));
        let writer = reflector::store::Writer::default();
        let jobs = writer.as_reader();
        let job_events = reflector::reflector(
            writer,
            watcher(Api::<Job>::all(client.clone()), watcher::Config::default()).default_backoff(),
        );
        let jobset_resource = owner_resource(OwnerKind::JobSet);
        let (jobsets, jobset_events) = crate::custom::reflected_once_installed(
            client,
            &jobset_resource,
            crate::custom::JOBSET.3,
            watcher::Config::default(),
        );
        changes.extend([touched.marking(job_events), touched.marking(jobset_events)]);
        Local {
            workloads,
            admission_checks,
            jobs,
            jobsets,
            jobset_resource,
        }
    }
}

/// What the loop keeps between passes.
#[derive(Default)]
struct Memory {
    /// Its Workload writes, until the watch shows them.
    written: WrittenWorkloads,
    /// The Workloads that name admission checks, as JSON by resourceVersion.
    workloads: Serialized,
    /// The key of each Workload's JSON of the last pass, by the JSON's address (the JSON
    /// held, so that no other takes its address meanwhile).
    keys: AddressMap<KeyedWorkload>,
}

impl Memory {
    /// The Workloads that name admission checks (the only ones MultiKueue plans for), its own
    /// writes laid over the watch's copies, with their keys.
    fn checked_workloads(&mut self, watched: Vec<Arc<DynamicObject>>) -> Vec<KeyedWorkload> {
        let checked: Vec<Arc<DynamicObject>> = self
            .written
            .over(watched)
            .into_iter()
            .filter(|workload| names_checks(&workload.data))
            .collect();
        let values = self.workloads.values(&checked);
        let mut keys = AddressMap::with_capacity_and_hasher(values.len(), Default::default());
        let keyed = values
            .into_iter()
            .map(|workload| {
                let address = address_of(&workload);
                let key = match self.keys.remove(&address) {
                    Some((key, _)) => key,
                    None => objects::key(&workload).into(),
                };
                keys.insert(address, (key.clone(), workload.clone()));
                (key, workload)
            })
            .collect();
        self.keys = keys;
        keyed
    }
}

/// Whether a Workload's status lists admission checks.
fn names_checks(data: &Value) -> bool {
    data.get("status")
        .and_then(|status| status.get("admissionChecks"))
        .and_then(Value::as_array)
        .is_some_and(|checks| !checks.is_empty())
}

/// Runs MultiKueue's loop until the task is dropped; the Workloads its writes wrote here are
/// handed to `handoff`.
pub async fn run(client: Client, clock: Clock, configuration: Configuration, handoff: Handoff) {
    let mut changes: Changes = futures::stream::select_all(Vec::new());
    let multikueue = MultiKueueWatches::start(&client, clock.clone(), &configuration, &mut changes);
    let mut local: Option<Local> = None;
    let mut memory = Memory::default();
    let mut resync = tokio::time::interval(RESYNC);
    let mut pacing = Pacing::default();
    while next_paced_pass(&mut changes, &mut resync, &mut pacing).await {
        if local.is_none() && !multikueue.in_use() {
            continue;
        }
        let local =
            local.get_or_insert_with(|| Local::watch(&client, multikueue.touched(), &mut changes));
        let ended = multikueue.take_written();
        handoff.give(&ended);
        for object in &ended {
            memory.written.remember(object);
        }
        let workloads = memory.checked_workloads(local.workloads.state());
        let checks = values(local.admission_checks.state());
        let owners = LocalOwners {
            jobs: &local.jobs,
            jobsets: &local.jobsets,
            jobset_resource: &local.jobset_resource,
        };
        multikueue
            .reconcile(&client, &checks, &workloads, &owners, clock())
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    fn workload(name: &str, version: &str, status: Value) -> Arc<DynamicObject> {
        let mut object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ml", "resourceVersion": version},
            "status": status,
        }))
        .expect("a Workload");
        object.metadata.namespace = Some("ml".into());
        Arc::new(object)
    }

    #[test]
    fn only_workloads_naming_checks_are_planned_with_its_own_writes_laid_over() {
        let checks = json!({"admissionChecks": [{"name": "mk", "state": "Pending"}]});
        let mut memory = Memory::default();
        // Its own write of `written` (version 9) is not shown by the watch yet (version 5).
        let ours = workload(
            "written",
            "9",
            json!({"admissionChecks": [{"name": "mk", "state": "Ready"}]}),
        );
        memory.written.remember(&ours);
        let watched = vec![
            workload("checked", "3", checks.clone()),
            workload("unchecked", "4", json!({})),
            workload("emptied", "6", json!({"admissionChecks": []})),
            workload("written", "5", checks),
        ];
        let planned: HashMap<Arc<str>, Arc<Value>> = memory
            .checked_workloads(watched.clone())
            .into_iter()
            .collect();
        let mut keys: Vec<&str> = planned.keys().map(|k| &**k).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["ml/checked", "ml/written"]);
        // The next pass over the same objects answers the same JSON under the same keys.
        let again: HashMap<Arc<str>, Arc<Value>> =
            memory.checked_workloads(watched).into_iter().collect();
        assert_eq!(again.len(), 2);
        for (key, workload) in &again {
            assert!(
                Arc::ptr_eq(workload, &planned[key]),
                "{key} serialized again"
            );
            assert_eq!(objects::key(workload), **key);
        }
        assert_eq!(
            planned["ml/written"].pointer("/status/admissionChecks/0/state"),
            Some(&json!("Ready")),
            "its own write stands in for the watch's older copy"
        );
        assert_eq!(
            planned["ml/written"].pointer("/metadata/resourceVersion"),
            Some(&json!("9"))
        );
    }
}
