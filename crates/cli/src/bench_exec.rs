//! `tessera bench exec`: the `kubectl exec` round trip through the embedded API server —
//! the upgrade request, authorization, the WebSocket v5 session, the node twins' container
//! taking the cluster from its watch-fed snapshot, the probe with its network policy verdict,
//! and the streams back — as a client on
//! loopback sees it (plain HTTP/1.1: no TLS, so the figure is the server's own cost).
//!
//! The cluster is written straight into a temporary store: one node, `--pods` Running server
//! pods behind a Service with their EndpointSlice, and a client pod; every exec runs
//! `/agnhost connect web:80 --timeout=1s --protocol=tcp` in the client and must succeed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tessera_api::write::{Part, WriteOptions};
use tessera_apiserver::ApiServer;
use tessera_store::{Store, StoreOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

use crate::bench::{as_admin, bench_server, percentile};
use crate::bench_report::{CpuClock, Figure, Row};

/// Options of `tessera bench exec`.
#[derive(clap::Args, Debug, Clone)]
pub struct ExecBenchArgs {
    /// Exec round trips to time (one after the other).
    #[arg(long, default_value_t = 2_000)]
    pub execs: usize,
    /// Server pods behind the probed Service (all listed by every exec).
    #[arg(long, default_value_t = 100)]
    pub pods: usize,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

const TOPOLOGY: &str = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- {name: cpu, count: 1, capacity: {cpu: \"64\", memory: 256Gi, pods: \"1000\"}}\n";

const COMMAND: &str = "command=/agnhost&command=connect&command=web:80&command=--timeout=1s&command=--protocol=tcp&stdout=true&stderr=true";

/// Times exec round trips.
pub async fn exec(args: &ExecBenchArgs) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir().context("temporary directory")?;
    let store = Store::open(
        &dir.path().join("state.db"),
        StoreOptions {
            history: 10_000,
            fsync: false,
        },
    )?;
    let server = bench_server(store, dir.path())?;
    populate(&server, args.pods)?;
    let topology = tessera_node::topology::Topology::parse(TOPOLOGY)?;
    let client = kube::Client::new(as_admin(&server), "default");
    let twins = tessera_twin::NodeTwins::new(client, &topology, Default::default());
    server.register_container_runtime(Arc::new(crate::up::TwinRuntime(Arc::new(
        twins.containers(),
    ))));
    let address = serve(&server).await?;

    // One untimed exec warms the caches and checks the answer.
    round_trip(address).await?;
    let cpu = CpuClock::start();
    let mut latencies = Vec::with_capacity(args.execs);
    for _ in 0..args.execs {
        let started = Instant::now();
        round_trip(address).await?;
        latencies.push(started.elapsed());
    }
    let cpu_seconds = cpu.seconds();
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok(vec![Row {
        name: format!(
            "exec round trip: /agnhost connect web:80 (WebSocket v5, {} endpoints)",
            args.pods
        ),
        kind: "API server over loopback HTTP/1.1 (no TLS), node twins' containers".into(),
        items: args.execs as u64,
        cpu_seconds,
        figures: vec![
            Figure::new("p50", "ms", ms(percentile(&latencies, 0.5))),
            Figure::new("p99", "ms", ms(percentile(&latencies, 0.99))),
            Figure::new("max", "ms", ms(percentile(&latencies, 1.0))),
        ],
        anchor: "issue 18 goal: p99 < 20 ms".into(),
    }])
}

/// Writes the node's pods (Running, with IPs), the Service and its EndpointSlice.
fn populate(server: &Arc<ApiServer>, pods: usize) -> anyhow::Result<()> {
    let objects = server.objects();
    let options = WriteOptions::default();
    let find = |group: &str, version: &str, plural: &str| {
        tessera_api::Resource::find(group, version, plural)
            .ok_or_else(|| anyhow::anyhow!("{plural} not served"))
    };
    let pod_resource = find("", "v1", "pods")?;
    let ns = Some("default");
    let mut endpoints = Vec::new();
    for index in 0..=pods {
        let (name, labels) = if index == pods {
            ("client".to_string(), json!({}))
        } else {
            (format!("web-{index}"), json!({"app": "web"}))
        };
        let ip = format!("10.244.{}.{}", 1 + index / 250, 2 + index % 250);
        let pod = json!({"metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": "cpu-1", "containers": [{"name": "agnhost", "image": "agnhost",
                     "ports": [{"containerPort": 80}]}]}});
        objects.create(pod_resource, ns, pod, &options)?;
        let status = json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": "True"}]});
        objects.update_with(pod_resource, ns, &name, Part::Status, |current: &Value| {
            let mut next = current.clone();
            next["status"] = status.clone();
            Ok(next)
        })?;
        if index < pods {
            endpoints.push(json!({"addresses": [ip], "conditions": {"ready": true}}));
        }
    }
    let service = json!({"metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 80}]}});
    objects.create(find("", "v1", "services")?, ns, service, &options)?;
    let slice = json!({"metadata": {"name": "web-bench", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
        "endpoints": endpoints});
    objects.create(
        find("discovery.k8s.io", "v1", "endpointslices")?,
        ns,
        slice,
        &options,
    )?;
    Ok(())
}

/// Serves the admin router on a loopback port, HTTP/1.1 with upgrades.
async fn serve(server: &Arc<ApiServer>) -> anyhow::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let router = as_admin(server);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let router = router.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        router.clone().oneshot(request.map(axum::body::Body::new))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    Ok(address)
}

/// One exec: the upgrade, then the server's messages until it closes; checks success.
async fn round_trip(address: std::net::SocketAddr) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    let request = format!(
        "GET /api/v1/namespaces/default/pods/client/exec?{COMMAND} HTTP/1.1\r\nHost: {address}\r\n\
         Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut received = Vec::new();
    stream.read_to_end(&mut received).await?;
    let head_end = received
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no response head")?;
    if !received.starts_with(b"HTTP/1.1 101") {
        bail!(
            "upgrade refused: {}",
            String::from_utf8_lossy(&received[..head_end])
        );
    }
    let mut frames = &received[head_end + 4..];
    let mut error_channel = Vec::new();
    while frames.len() >= 2 {
        let (length, header) = match frames[1] & 0x7f {
            126 => (usize::from(u16::from_be_bytes([frames[2], frames[3]])), 4),
            127 => bail!("unexpectedly long message"),
            short => (usize::from(short), 2),
        };
        let payload = frames
            .get(header..header + length)
            .context("truncated frame")?;
        if frames[0] & 0x0f == 0x2 && payload.first() == Some(&3) {
            error_channel.extend(&payload[1..]);
        }
        frames = &frames[header + length..];
    }
    let status: Value = serde_json::from_slice(&error_channel).context("error channel")?;
    if status["status"] != "Success" {
        bail!("exec did not succeed: {status}");
    }
    Ok(())
}
