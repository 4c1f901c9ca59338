//! `tessera bench api`: the control plane's performance, measured in-process.
//!
//! Drives the API server's router directly (no sockets, no TLS: the numbers are the server's
//! own cost) over a store in a temporary directory: N pods created while W watchers follow
//! every change, full lists of all pods, single-object write latency at a fixed request rate
//! (open loop; each latency counted from the request's due time, so a sender that falls
//! behind cannot hide queueing), and resident memory per stored object. Also `tessera bench
//! rbac` (authorization decisions) and `tessera bench apply` (custom-object validation and
//! server-side apply). Each returns rows for [`crate::bench_report`], which repeats runs and
//! prints the medians.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Body;
use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::json;
use tessera_api::authn::UserInfo;
use tessera_apiserver::authn::{Identified, IdentityLayer};
use tessera_apiserver::{ApiServer, Objects, ServerConfig};
use tessera_store::{Store, StoreOptions};
use tower::ServiceExt;

use crate::bench_report::{CpuClock, Figure, Row};

/// What the rows of `tessera bench api`, `rbac` and `apply` measure.
const IN_PROCESS: &str = "API server in-process (router, no sockets or TLS)";

/// The router as an admin client sees it.
type Router = Identified<axum::Router>;

/// Options of `tessera bench api`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// How many pods to create.
    #[arg(long, default_value_t = 100_000)]
    pub pods: usize,
    /// How many watchers follow every pod change.
    #[arg(long, default_value_t = 50)]
    pub watchers: usize,
    /// Request rate of the latency phase (requests per second).
    #[arg(long, default_value_t = 200)]
    pub rate: u64,
    /// Length of the latency phase, in seconds.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Flush every commit to the device.
    #[arg(long)]
    pub fsync: bool,
    /// How many recent changes the store keeps for watches (as `tessera up --watch-history`).
    #[arg(long, default_value_t = 100_000)]
    pub history: usize,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn pod(index: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("bench-{index:06}"), "labels": {"app": "bench", "shard": (index % 16).to_string()}},
        "spec": {"containers": [{"name": "main", "image": "registry.example/trainer:1.0",
                                  "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                                "limits": {"cpu": "1", "memory": "1Gi"}}}]}
    })
}

async fn send(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<&serde_json::Value>,
) -> anyhow::Result<(u16, bytes::Bytes)> {
    let mut request = http::Request::builder().method(method).uri(uri);
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let body = body.map_or_else(Body::empty, |b| {
        Body::from(serde_json::to_vec(b).unwrap_or_default())
    });
    let response = router.clone().oneshot(request.body(body)?).await?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    Ok((status, bytes))
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// An API server on `store` with the system objects, served to an in-process client acting as
/// a cluster admin (so authorization is measured too).
pub(crate) fn admin_router(store: Store, dir: &std::path::Path) -> anyhow::Result<Router> {
    Ok(as_admin(&bench_server(store, dir)?))
}

/// An API server on `store` with the system objects.
pub(crate) fn bench_server(store: Store, dir: &std::path::Path) -> anyhow::Result<Arc<ApiServer>> {
    let objects = Objects::new(store);
    crate::bootstrap::ensure_system_objects(&objects)?;
    Ok(ApiServer::new(
        objects,
        ServerConfig {
            log_dir: dir.join("logs"),
            bookmark_interval: Duration::from_secs(30),
            token_secret: b"bench".to_vec(),
            static_tokens: Default::default(),
            advertise_address: "127.0.0.1:6443".into(),
        },
    ))
}

/// The server's router as a cluster admin reaches it in-process.
pub(crate) fn as_admin(server: &Arc<ApiServer>) -> Router {
    tower::ServiceBuilder::new()
        .layer(IdentityLayer::new(UserInfo::new(
            "bench",
            &["system:masters"],
        )))
        .service(server.router())
}

/// One run of `tessera bench api`: its rows.
pub async fn api(args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir().context("temporary directory")?;
    let rss_start = resident_bytes();
    let store = Store::open(
        &dir.path().join("state.db"),
        StoreOptions {
            history: args.history,
            fsync: args.fsync,
        },
    )?;
    let router = admin_router(store.clone(), dir.path())?;

    // Watchers follow every pod change from the current revision.
    let revision = store.revision();
    let received = Arc::new(
        (0..args.watchers)
            .map(|_| AtomicU64::new(0))
            .collect::<Vec<_>>(),
    );
    let mut watcher_tasks = Vec::new();
    for w in 0..args.watchers {
        let router = router.clone();
        let received = received.clone();
        let uri = format!("/api/v1/pods?watch=true&resourceVersion={revision}");
        watcher_tasks.push(tokio::spawn(async move {
            let request = http::Request::get(uri)
                .body(Body::empty())
                .expect("request");
            let Ok(response) = router.oneshot(request).await;
            let mut stream = response.into_body().into_data_stream();
            while let Some(Ok(chunk)) = stream.next().await {
                let events = chunk.iter().filter(|b| **b == b'\n').count() as u64;
                if chunk.windows(7).any(|w| w == b"\"ERROR\"") {
                    return false;
                }
                received[w].fetch_add(events, Ordering::Relaxed);
            }
            true
        }));
    }

    // Create the pods from 4 concurrent clients.
    let create_cpu = CpuClock::start();
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for _ in 0..4 {
        let router = router.clone();
        let next = next.clone();
        let total = args.pods as u64;
        writers.push(tokio::spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= total {
                    return Ok::<(), anyhow::Error>(());
                }
                let (status, body) = send(
                    &router,
                    "POST",
                    "/api/v1/namespaces/default/pods",
                    Some(&pod(index as usize)),
                )
                .await?;
                if status != 201 {
                    bail!(
                        "create failed ({status}): {}",
                        String::from_utf8_lossy(&body)
                    );
                }
            }
        }));
    }
    for writer in writers {
        writer.await??;
    }
    let create_elapsed = started.elapsed();
    let create_cpu = create_cpu.seconds();

    // Every watcher must see every creation.
    let deadline = Instant::now() + Duration::from_secs(120);
    let behind = loop {
        let behind = received
            .iter()
            .filter(|r| r.load(Ordering::Relaxed) < args.pods as u64)
            .count();
        if behind == 0 || Instant::now() > deadline {
            break behind;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let fan_out_elapsed = started.elapsed();
    for task in &watcher_tasks {
        task.abort();
    }
    let rss_loaded = resident_bytes();
    let json_bytes: usize = store
        .list("/core/pods/")
        .entries
        .iter()
        .map(|e| e.value.len())
        .sum();

    // Full lists.
    let list_cpu = CpuClock::start();
    let mut list_times = Vec::new();
    let mut list_bytes = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let (status, body) = send(&router, "GET", "/api/v1/pods", None).await?;
        if status != 200 {
            bail!("list failed ({status})");
        }
        list_times.push(t.elapsed());
        list_bytes = body.len();
    }
    list_times.sort();
    let list_cpu = list_cpu.seconds();
    let selector_cpu = CpuClock::start();
    let t = Instant::now();
    let (_, selected) = send(&router, "GET", "/api/v1/pods?labelSelector=shard%3D3", None).await?;
    let selector_list = t.elapsed();
    let selector_cpu = selector_cpu.seconds();
    let selected_items = serde_json::from_slice::<serde_json::Value>(&selected)?["items"]
        .as_array()
        .map_or(0, Vec::len);

    // Latency of single-object writes at a fixed rate (open loop). Each request's clock starts
    // at the time it was due to be sent, not when it was sent: a sender that falls behind
    // (coordinated omission) shows as latency instead of hiding the queueing.
    let rate = args.rate.max(1) as f64;
    let total = args.rate * args.seconds;
    // The pods patched: the first 1,000 (all of them when fewer were created).
    let targets = args.pods.clamp(1, 1000);
    let mut tasks = Vec::new();
    let writes_cpu = CpuClock::start();
    let phase_start = tokio::time::Instant::now();
    let mut send_lag = Duration::ZERO;
    for i in 0..total {
        let due = phase_start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due).await;
        send_lag = send_lag.max(due.elapsed());
        let router = router.clone();
        tasks.push(tokio::spawn(async move {
            let patch = json!({"metadata": {"labels": {"touched": i.to_string()}}});
            let request = http::Request::patch(format!(
                "/api/v1/namespaces/default/pods/bench-{:06}",
                i as usize % targets
            ))
            .header("content-type", "application/merge-patch+json")
            .body(Body::from(patch.to_string()))
            .expect("request");
            let Ok(response) = router.oneshot(request).await;
            let ok = response.status() == 200;
            let _ = response.into_body().collect().await;
            (due.elapsed(), ok)
        }));
    }
    let mut latencies = Vec::new();
    let mut failures = 0;
    for task in tasks {
        let (latency, ok) = task.await?;
        if !ok {
            failures += 1;
        }
        latencies.push(latency);
    }
    latencies.sort();
    let writes_cpu = writes_cpu.seconds();

    let pods = args.pods as f64;
    let rss_per_object = (rss_loaded.saturating_sub(rss_start)) as f64 / pods;
    let json_per_object = json_bytes as f64 / pods;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let row = |name: String, items: u64, cpu_seconds, figures, anchor: &str| Row {
        name,
        kind: IN_PROCESS.into(),
        items,
        cpu_seconds,
        figures,
        anchor: anchor.into(),
    };
    Ok(vec![
        row(
            format!("create {} pods (4 clients)", args.pods),
            args.pods as u64,
            create_cpu,
            vec![
                Figure::new(
                    "rate",
                    "pods/s",
                    pods / create_elapsed.as_secs_f64().max(1e-9),
                ),
                Figure::new("time", "s", create_elapsed.as_secs_f64()),
            ],
            "–",
        ),
        row(
            format!("{} watchers receive every creation", args.watchers),
            received.iter().map(|r| r.load(Ordering::Relaxed)).sum(),
            None,
            vec![
                Figure::new("watchers behind", "", behind as f64),
                Figure::new(
                    "all caught up after the first write",
                    "s",
                    fan_out_elapsed.as_secs_f64(),
                ),
            ],
            "–",
        ),
        row(
            format!("full list of {} pods", args.pods),
            list_times.len() as u64,
            list_cpu,
            vec![
                Figure::new("median", "ms", ms(percentile(&list_times, 0.5))),
                Figure::new("max", "ms", ms(percentile(&list_times, 1.0))),
                Figure::new("size", "MiB", list_bytes as f64 / 1_048_576.0),
            ],
            "Kubernetes SLO: cluster-scoped LIST p99 ≤ 30 s",
        ),
        row(
            format!("label-selected list (shard=3 of {} pods)", args.pods),
            1,
            selector_cpu,
            vec![
                Figure::new("time", "ms", ms(selector_list)),
                Figure::new("pods selected", "", selected_items as f64),
            ],
            "–",
        ),
        row(
            format!(
                "single-object writes at {} req/s for {} s (open loop, latency from the due time)",
                args.rate, args.seconds
            ),
            latencies.len() as u64,
            writes_cpu,
            vec![
                Figure::new("p50", "ms", ms(percentile(&latencies, 0.5))),
                Figure::new("p99", "ms", ms(percentile(&latencies, 0.99))),
                Figure::new("max", "ms", ms(percentile(&latencies, 1.0))),
                Figure::new("failed", "", failures as f64),
                Figure::new("sender's worst lag behind schedule", "ms", ms(send_lag)),
            ],
            "Kubernetes SLO: mutating API calls p99 ≤ 1 s",
        ),
        row(
            format!("resident memory at {} pods", args.pods),
            args.pods as u64,
            None,
            vec![
                Figure::new("per object", "B", rss_per_object),
                Figure::new("of which JSON", "B", json_per_object),
                Figure::new("overhead", "B", rss_per_object - json_per_object),
                Figure::new("total", "MiB", rss_loaded as f64 / 1_048_576.0),
            ],
            "–",
        ),
    ])
}

/// Options of `tessera bench rbac`.
#[derive(clap::Args, Debug, Clone)]
pub struct RbacBenchArgs {
    /// Roles (half ClusterRoles, half namespaced Roles).
    #[arg(long, default_value_t = 1_000)]
    pub roles: usize,
    /// Bindings (a fifth ClusterRoleBindings, the rest RoleBindings).
    #[arg(long, default_value_t = 5_000)]
    pub bindings: usize,
    /// Authorization decisions to time.
    #[arg(long, default_value_t = 200_000)]
    pub decisions: usize,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

/// Times RBAC authorization decisions over a large policy.
pub async fn rbac(args: &RbacBenchArgs) -> anyhow::Result<Vec<Row>> {
    use tessera_api::rbac::{Attributes, Rbac};
    use tessera_api::write::WriteOptions;
    let dir = tempfile::tempdir().context("temporary directory")?;
    let store = Store::open(
        &dir.path().join("state.db"),
        StoreOptions {
            history: 1_000,
            fsync: false,
        },
    )?;
    let objects = Objects::new(store);
    let find = |plural: &str| {
        tessera_api::Resource::find("rbac.authorization.k8s.io", "v1", plural)
            .ok_or_else(|| anyhow::anyhow!("{plural} not served"))
    };
    let namespaces = 50;
    let resources = [
        "pods",
        "configmaps",
        "secrets",
        "services",
        "deployments",
        "jobs",
        "leases",
        "events",
    ];
    let rules = |i: usize| {
        json!((0..5).map(|r| json!({"apiGroups": ["", "apps", "batch"], "resources": [resources[(i + r) % resources.len()]],
            "verbs": ["get", "list", "watch"]})).collect::<Vec<_>>())
    };
    let options = WriteOptions::default();
    let namespace_resource = tessera_api::Resource::find("", "v1", "namespaces")
        .ok_or_else(|| anyhow::anyhow!("namespaces not served"))?;
    for n in 0..namespaces {
        objects
            .create(
                namespace_resource,
                None,
                json!({"metadata": {"name": format!("ns-{n}")}}),
                &options,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    for i in 0..args.roles {
        if i % 2 == 0 {
            objects
                .create(
                    find("clusterroles")?,
                    None,
                    json!({"metadata": {"name": format!("role-{i}")}, "rules": rules(i)}),
                    &options,
                )
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        } else {
            let ns = format!("ns-{}", i % namespaces);
            objects
                .create(
                    find("roles")?,
                    Some(&ns),
                    json!({"metadata": {"name": format!("role-{i}")}, "rules": rules(i)}),
                    &options,
                )
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    let users = 1_000;
    for b in 0..args.bindings {
        let subject = if b % 3 == 0 {
            json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": format!("group-{}", b % 100)})
        } else {
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": format!("user-{}", b % users)})
        };
        if b % 5 == 0 {
            let role = format!("role-{}", (b * 2) % args.roles.max(2) / 2 * 2);
            objects.create(find("clusterrolebindings")?, None, json!({"metadata": {"name": format!("binding-{b}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}, "subjects": [subject]}), &options)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        } else {
            let ns = format!("ns-{}", b % namespaces);
            objects.create(find("rolebindings")?, Some(&ns), json!({"metadata": {"name": format!("binding-{b}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("role-{}", (b % (args.roles / 2).max(1)) * 2)},
                "subjects": [subject]}), &options)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    let rbac = Rbac::new(objects.rbac_generation());
    let attributes = |i: usize| Attributes {
        verb: ["get", "list", "delete"][i % 3].into(),
        resource_request: true,
        group: String::new(),
        resource: resources[i % resources.len()].into(),
        namespace: format!("ns-{}", i % namespaces),
        name: "x".into(),
        ..Attributes::default()
    };
    let user = |i: usize| {
        UserInfo::new(
            format!("user-{}", i % users),
            &[&format!("group-{}", i % 100)],
        )
    };
    let _ = rbac.authorize(&objects, &user(0), &attributes(0));
    let cases: Vec<(UserInfo, Attributes)> = (0..args.decisions)
        .map(|i| (user(i * 7), attributes(i * 13)))
        .collect();
    let mut timings = Vec::with_capacity(args.decisions);
    let mut allowed = 0usize;
    let cpu = CpuClock::start();
    for (u, a) in &cases {
        let t = Instant::now();
        let decision = rbac.authorize(&objects, u, a);
        let elapsed = t.elapsed();
        timings.push(elapsed);
        allowed += usize::from(decision.allowed);
    }
    let cpu_seconds = cpu.seconds();
    timings.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Ok(vec![Row {
        name: format!(
            "RBAC decision, {} roles, {} bindings",
            args.roles, args.bindings
        ),
        kind: "authorizer in-process".into(),
        items: args.decisions as u64,
        cpu_seconds,
        figures: vec![
            Figure::new("p50", "µs", us(percentile(&timings, 0.5))),
            Figure::new("p99", "µs", us(percentile(&timings, 0.99))),
            Figure::new("max", "µs", us(percentile(&timings, 1.0))),
            Figure::new("allowed", "", allowed as f64),
        ],
        anchor: "– (kube-apiserver publishes no per-decision latency)".into(),
    }])
}

/// Options of `tessera bench apply`.
#[derive(clap::Args, Debug, Clone)]
pub struct ApplyBenchArgs {
    /// How many objects each phase writes.
    #[arg(long, default_value_t = 10_000)]
    pub objects: usize,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

/// Throughput of custom-object validation (schema and CEL) and of server-side apply.
pub async fn apply(args: &ApplyBenchArgs) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir().context("temporary directory")?;
    let store = Store::open(
        &dir.path().join("state.db"),
        StoreOptions {
            history: 100_000,
            fsync: false,
        },
    )?;
    let router = admin_router(store, dir.path())?;
    let spec_schema = json!({
        "type": "object", "required": ["queue", "workers"],
        "x-kubernetes-validations": [{"rule": "self.workers <= self.maxWorkers", "message": "workers may not exceed maxWorkers"}],
        "properties": {
            "queue": {"type": "string", "pattern": "^[a-z0-9-]+$", "maxLength": 63},
            "priority": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"},
            "workers": {"type": "integer", "minimum": 1},
            "maxWorkers": {"type": "integer", "minimum": 1, "default": 64},
            "resources": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}},
            "tolerations": {"type": "array", "maxItems": 16, "items": {"type": "object", "properties": {
                "key": {"type": "string"}, "operator": {"type": "string", "enum": ["Equal", "Exists"]},
                "effect": {"type": "string"}}}}
        }
    });
    let version = json!({"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}}});
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "trainings.bench.tessera.dev"},
        "spec": {"group": "bench.tessera.dev", "scope": "Namespaced",
            "names": {"plural": "trainings", "kind": "Training"}, "versions": [version]}
    });
    let (status, body) = send(
        &router,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&crd),
    )
    .await?;
    if status != 201 {
        bail!("CRD: {status} {}", String::from_utf8_lossy(&body));
    }
    let validated_cpu = CpuClock::start();
    let started = Instant::now();
    for i in 0..args.objects {
        let training = json!({"apiVersion": "bench.tessera.dev/v1", "kind": "Training", "metadata": {"name": format!("t-{i:05}")},
            "spec": {"queue": "team-a", "workers": 8, "resources": {"nvidia.com/gpu": 8, "cpu": "64"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}});
        let (status, body) = send(
            &router,
            "POST",
            "/apis/bench.tessera.dev/v1/namespaces/default/trainings",
            Some(&training),
        )
        .await?;
        if status != 201 {
            bail!("custom object: {status} {}", String::from_utf8_lossy(&body));
        }
    }
    let validated = started.elapsed();
    let validated_cpu = validated_cpu.seconds();

    let deployment = |i: usize, image: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": format!("d-{i:05}"), "labels": {"app": "bench"}},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "bench"}},
                        "template": {"metadata": {"labels": {"app": "bench"}},
                                     "spec": {"containers": [{"name": "app", "image": image, "ports": [{"containerPort": 8080}]}]}}}})
    };
    let apply_all = |image: &'static str| {
        let router = router.clone();
        async move {
            let cpu = CpuClock::start();
            let started = Instant::now();
            for i in 0..args.objects {
                let request = http::Request::patch(format!("/apis/apps/v1/namespaces/default/deployments/d-{i:05}?fieldManager=bench&force=true"))
                    .header("content-type", "application/apply-patch+yaml")
                    .body(Body::from(deployment(i, image).to_string()))?;
                let response = router.clone().oneshot(request).await?;
                let status = response.status().as_u16();
                if status != 200 && status != 201 {
                    let body = response.into_body().collect().await?.to_bytes();
                    bail!("apply: {status} {}", String::from_utf8_lossy(&body));
                }
            }
            Ok::<(Duration, Option<f64>), anyhow::Error>((started.elapsed(), cpu.seconds()))
        }
    };
    let created = apply_all("app:1").await?;
    let updated = apply_all("app:2").await?;
    let row = |name: String, (elapsed, cpu_seconds): (Duration, Option<f64>), unit: &str| Row {
        name,
        kind: IN_PROCESS.into(),
        items: args.objects as u64,
        cpu_seconds,
        figures: vec![
            Figure::new(
                "rate",
                unit,
                args.objects as f64 / elapsed.as_secs_f64().max(1e-9),
            ),
            Figure::new("time", "s", elapsed.as_secs_f64()),
        ],
        anchor: "Kubernetes SLO: mutating API calls p99 ≤ 1 s (per request)".into(),
    };
    Ok(vec![
        row(
            format!(
                "create {} custom objects (schema, defaults, CEL rule)",
                args.objects
            ),
            (validated, validated_cpu),
            "objects/s",
        ),
        row(
            format!("server-side apply, {} Deployments created", args.objects),
            created,
            "applies/s",
        ),
        row(
            format!("server-side apply, {} Deployments changed", args.objects),
            updated,
            "applies/s",
        ),
    ])
}
