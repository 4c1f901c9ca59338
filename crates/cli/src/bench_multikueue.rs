//! `tessera bench multikueue`: MultiKueue's dispatch latency, the time from a manager's
//! Workload reserving quota to its Job existing on the worker that admitted it.
//!
//! One process holds a manager and `--workers` embedded platforms
//! ([`crate::bench_queue_api::Platform`]), each with its queue manager
//! ([`tessera_controllers::queue::run`]); the workers also serve their API over TLS on loopback
//! and the manager reaches them through their kubeconfigs in Secrets, as it reaches any
//! cluster. The manager's ClusterQueue requires a MultiKueue check over every worker; every
//! queue has quota for all the Jobs. `--jobs` one-pod Jobs (`spec.managedBy:
//! kueue.x-k8s.io/multikueue`) are created on the manager at `--rate` a second (all at once
//! at 0); a watch of the manager's Workloads books when each first shows `QuotaReserved=True`,
//! a watch of each worker's Jobs when the Job's copy first appears, and the difference is the
//! Job's dispatch latency. Watches of the workers' Workloads book when the Workload's first
//! copy appears on a worker and when a worker first reserves quota for it: the median of
//! each stage is reported beside the latency (where the time goes). CPU is the whole
//! process's (all platforms and the watches).
//!
//! Decides nothing about dispatching: the queue managers do; this sets up, creates, watches
//! and measures.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tessera_queue::api::status::QUOTA_RESERVED;

use crate::bench::percentile;
use crate::bench_queue_api::{Platform, condition_true, kueue};
use crate::bench_report::{CpuClock, Figure, Row};

/// Options of `tessera bench multikueue`.
#[derive(clap::Args, Debug, Clone)]
pub struct MultiKueueBenchArgs {
    /// How many Jobs to dispatch.
    #[arg(long, default_value_t = 200)]
    pub jobs: usize,
    /// How many worker platforms (the first to admit a Job wins it).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub workers: u32,
    /// Jobs created a second on the manager; 0 creates them all at once.
    #[arg(long, default_value_t = 50)]
    pub rate: u32,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

/// The namespace, queues and check every platform gets (names as Kueue's MultiKueue sample).
const NAMESPACE: &str = "default";
const LOCAL_QUEUE: &str = "user-queue";
const CLUSTER_QUEUE: &str = "cluster-queue";
const FLAVOR: &str = "default-flavor";
const CHECK: &str = "sample-multikueue";
/// Where the manager's queue manager reads kubeconfig Secrets (Kueue's namespace).
const KUEUE_NAMESPACE: &str = "kueue-system";
/// How long set-up and a run may take before it is abandoned.
const SETUP_LIMIT: Duration = Duration::from_secs(60);
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// When each Job's Workload reserved quota on the manager and when its copy appeared on a
/// worker, by Job name; when the Workload's first copy appeared on a worker and when a worker
/// first reserved quota for it, by Workload name.
#[derive(Default)]
struct Record {
    reserved: HashMap<String, Instant>,
    dispatched: HashMap<String, Instant>,
    /// The manager's Workload of each Job.
    workload_of: HashMap<String, String>,
    copied: HashMap<String, Instant>,
    reserved_on_worker: HashMap<String, Instant>,
}

impl Record {
    /// Each dispatched Job's latency; its stages (reserved → copied → reserved on a worker →
    /// dispatched) where all were seen.
    fn latencies(&self) -> anyhow::Result<(Vec<Duration>, [Vec<Duration>; 3])> {
        let mut latencies = Vec::new();
        let mut stages: [Vec<Duration>; 3] = Default::default();
        for (name, dispatched) in &self.dispatched {
            let Some(reserved) = self.reserved.get(name) else {
                bail!("Job {name} reached a worker before its quota was seen reserved");
            };
            latencies.push(dispatched.saturating_duration_since(*reserved));
            let workload = self.workload_of.get(name);
            let copied = workload.and_then(|w| self.copied.get(w));
            let on_worker = workload.and_then(|w| self.reserved_on_worker.get(w));
            if let (Some(copied), Some(on_worker)) = (copied, on_worker) {
                let marks = [reserved, copied, on_worker, dispatched];
                for (stage, pair) in stages.iter_mut().zip(marks.windows(2)) {
                    stage.push(pair[1].saturating_duration_since(*pair[0]));
                }
            }
        }
        latencies.sort();
        for stage in &mut stages {
            stage.sort();
        }
        Ok((latencies, stages))
    }
}

/// One run of `tessera bench multikueue`: its row.
pub async fn multikueue(args: &MultiKueueBenchArgs) -> anyhow::Result<Vec<Row>> {
    let manager = Platform::start()?;
    let mut workers = Vec::new();
    for _ in 0..args.workers {
        let worker = Platform::start()?;
        create_queues(&worker, args.jobs, None).await?;
        let kubeconfig = worker.serve_tls().await?;
        worker.start_queue_manager();
        workers.push((worker, kubeconfig));
    }
    let names: Vec<String> = (1..=workers.len()).map(|i| format!("worker{i}")).collect();
    connect_manager(&manager, &names, &workers).await?;
    create_queues(&manager, args.jobs, Some(CHECK)).await?;
    manager.start_queue_manager();
    wait_for_active_check(&manager).await?;

    let record = Arc::new(Mutex::new(Record::default()));
    let mut watches = vec![follow_reservations(&manager, record.clone())];
    for (worker, _) in &workers {
        watches.push(follow_dispatches(worker, record.clone()));
        watches.push(follow_copies(worker, record.clone()));
    }

    let cpu = CpuClock::start();
    let started = Instant::now();
    let jobs = manager.api(&ApiResource::erase::<Job>(&()), NAMESPACE);
    for index in 0..args.jobs {
        if args.rate > 0 {
            let due = started + Duration::from_secs_f64(index as f64 / f64::from(args.rate));
            tokio::time::sleep_until(due.into()).await;
        }
        let object: DynamicObject = serde_json::from_value(job(index))?;
        jobs.create(&Default::default(), &object)
            .await
            .with_context(|| format!("creating Job {index}"))?;
    }
    wait_for_dispatch(&record, args.jobs, started).await?;
    let cpu_seconds = cpu.seconds();
    for watch in watches {
        watch.abort();
    }

    let (latencies, stages) = record
        .lock()
        .map_err(|_| anyhow::anyhow!("record poisoned"))?
        .latencies()?;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let stage = |stage: &[Duration]| (!stage.is_empty()).then(|| ms(percentile(stage, 0.5)));
    let pace = match args.rate {
        0 => "all at once".to_owned(),
        rate => format!("at {rate}/s"),
    };
    let worker_count = match args.workers {
        1 => "1 worker".to_owned(),
        count => format!("{count} workers"),
    };
    Ok(vec![Row {
        name: format!(
            "MultiKueue dispatch: manager QuotaReserved → Job on the worker ({} Jobs {pace}, {worker_count})",
            args.jobs
        ),
        kind: "manager and workers embedded in one process; manager → workers over loopback TLS"
            .into(),
        items: args.jobs as u64,
        cpu_seconds,
        figures: vec![
            Figure::new("p50", "ms", ms(percentile(&latencies, 0.5))),
            Figure::new("p99", "ms", ms(percentile(&latencies, 0.99))),
            Figure::new("max", "ms", ms(percentile(&latencies, 1.0))),
            Figure::new("p50 to the copies", "ms", stage(&stages[0])),
            Figure::new("then to a worker's reservation", "ms", stage(&stages[1])),
            Figure::new("then to the Job", "ms", stage(&stages[2])),
        ],
        anchor: "issue 17 goal: p99 < 200 ms on loopback".into(),
    }])
}

/// ResourceFlavor, ClusterQueue (quota for `jobs` one-CPU Jobs; requiring the MultiKueue
/// check `check` on the manager) and the LocalQueue.
async fn create_queues(
    platform: &Platform,
    jobs: usize,
    check: Option<&str>,
) -> anyhow::Result<()> {
    platform
        .create(
            &kueue("ResourceFlavor", "resourceflavors"),
            "",
            json!({"metadata": {"name": FLAVOR}}),
        )
        .await?;
    let mut spec = json!({
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": FLAVOR,
            "resources": [{"name": "cpu", "nominalQuota": jobs.to_string()},
                          {"name": "memory", "nominalQuota": format!("{jobs}Gi")}]}]}],
    });
    if let Some(check) = check {
        spec["admissionChecksStrategy"] = json!({"admissionChecks": [{"name": check}]});
    }
    platform
        .create(
            &kueue("ClusterQueue", "clusterqueues"),
            "",
            json!({"metadata": {"name": CLUSTER_QUEUE}, "spec": spec}),
        )
        .await?;
    platform
        .create(
            &kueue("LocalQueue", "localqueues"),
            NAMESPACE,
            json!({"metadata": {"name": LOCAL_QUEUE, "namespace": NAMESPACE},
                "spec": {"clusterQueue": CLUSTER_QUEUE}}),
        )
        .await
}

/// The manager's kubeconfig Secrets, MultiKueueClusters, MultiKueueConfig and AdmissionCheck.
async fn connect_manager(
    manager: &Platform,
    names: &[String],
    workers: &[(Platform, String)],
) -> anyhow::Result<()> {
    manager
        .create(
            &ApiResource::erase::<Namespace>(&()),
            "",
            json!({"metadata": {"name": KUEUE_NAMESPACE}}),
        )
        .await?;
    for (name, (_, kubeconfig)) in names.iter().zip(workers) {
        let secret = format!("{name}-secret");
        manager
            .create(
                &ApiResource::erase::<Secret>(&()),
                KUEUE_NAMESPACE,
                json!({"metadata": {"name": secret, "namespace": KUEUE_NAMESPACE},
                    "stringData": {"kubeconfig": kubeconfig}}),
            )
            .await?;
        manager
            .create(
                &kueue("MultiKueueCluster", "multikueueclusters"),
                "",
                json!({"metadata": {"name": name}, "spec": {"clusterSource":
                    {"kubeConfig": {"locationType": "Secret", "location": secret}}}}),
            )
            .await?;
    }
    manager
        .create(
            &kueue("MultiKueueConfig", "multikueueconfigs"),
            "",
            json!({"metadata": {"name": "bench"}, "spec": {"clusters": names}}),
        )
        .await?;
    manager
        .create(
            &kueue("AdmissionCheck", "admissionchecks"),
            "",
            json!({"metadata": {"name": CHECK}, "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "bench"}}}),
        )
        .await
}

/// Waits until the manager's MultiKueue check is Active (every worker reached).
async fn wait_for_active_check(manager: &Platform) -> anyhow::Result<()> {
    let checks = manager.api(&kueue("AdmissionCheck", "admissionchecks"), "");
    let deadline = Instant::now() + SETUP_LIMIT;
    loop {
        let check = checks.get(CHECK).await?;
        let value = serde_json::to_value(&check)?;
        if condition_true(&value, "Active") {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the MultiKueue check did not turn Active: {}",
                value["status"]
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Job `index`: one one-CPU pod, suspended, left to MultiKueue.
fn job(index: usize) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job_name(index), "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": LOCAL_QUEUE}},
        "spec": {
            "managedBy": "kueue.x-k8s.io/multikueue",
            "parallelism": 1, "completions": 1, "suspend": true,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "registry.example/trainer:1.0",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}},
        },
    })
}

fn job_name(index: usize) -> String {
    format!("mk-{index:06}")
}

/// Books when each of the manager's Workloads (by its Job's name) first shows quota reserved.
fn follow_reservations(
    manager: &Platform,
    record: Arc<Mutex<Record>>,
) -> tokio::task::JoinHandle<()> {
    let api = manager.api(&kueue("Workload", "workloads"), "");
    follow(api, record, |value, record, now| {
        let owner = value
            .pointer("/metadata/ownerReferences/0/name")
            .and_then(Value::as_str);
        let Some(owner) = owner else {
            return;
        };
        if let Some(name) = value.pointer("/metadata/name").and_then(Value::as_str) {
            record.workload_of.insert(owner.to_owned(), name.to_owned());
        }
        if condition_true(value, QUOTA_RESERVED) {
            record.reserved.entry(owner.to_owned()).or_insert(now);
        }
    })
}

/// Books when each Workload's first copy appears on a worker and when a worker first
/// reserves quota for it.
fn follow_copies(worker: &Platform, record: Arc<Mutex<Record>>) -> tokio::task::JoinHandle<()> {
    let api = worker.api(&kueue("Workload", "workloads"), NAMESPACE);
    follow(api, record, |value, record, now| {
        let Some(name) = value.pointer("/metadata/name").and_then(Value::as_str) else {
            return;
        };
        record.copied.entry(name.to_owned()).or_insert(now);
        if condition_true(value, QUOTA_RESERVED) {
            record
                .reserved_on_worker
                .entry(name.to_owned())
                .or_insert(now);
        }
    })
}

/// Books when each Job's copy first appears on a worker.
fn follow_dispatches(worker: &Platform, record: Arc<Mutex<Record>>) -> tokio::task::JoinHandle<()> {
    let api = worker.api(&ApiResource::erase::<Job>(&()), NAMESPACE);
    follow(api, record, |value, record, now| {
        if let Some(name) = value.pointer("/metadata/name").and_then(Value::as_str) {
            record.dispatched.entry(name.to_owned()).or_insert(now);
        }
    })
}

/// Watches `api`, booking each object it shows (as JSON) at the time the watch shows it.
fn follow(
    api: kube::Api<DynamicObject>,
    record: Arc<Mutex<Record>>,
    book: fn(&Value, &mut Record, Instant),
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            let now = Instant::now();
            let Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) = event
            else {
                continue;
            };
            let Ok(value) = serde_json::to_value(&object) else {
                continue;
            };
            let Ok(mut record) = record.lock() else {
                return;
            };
            book(&value, &mut record, now);
        }
    })
}

/// Waits until every Job has reached a worker.
async fn wait_for_dispatch(
    record: &Mutex<Record>,
    jobs: usize,
    started: Instant,
) -> anyhow::Result<()> {
    loop {
        let (reserved, dispatched) = {
            let record = record
                .lock()
                .map_err(|_| anyhow::anyhow!("record poisoned"))?;
            (record.reserved.len(), record.dispatched.len())
        };
        if dispatched >= jobs {
            return Ok(());
        }
        if started.elapsed() > RUN_LIMIT {
            bail!(
                "{dispatched} of {jobs} Jobs reached a worker ({reserved} reserved) within {RUN_LIMIT:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
