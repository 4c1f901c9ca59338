//! `tessera bench crash-drill`: cycles of concurrent writers through the HTTPS API, a
//! `kill -9` of the server at a seeded random moment, and a restart; after each restart every
//! write the server acknowledged must be there with its content, and the store must open.
//!
//! Runs the platform as a child process (this same binary's `up`) on a temporary data
//! directory; knows nothing of the store's internals — it judges only by what clients see.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::bench_report::{Figure, Row};

/// Options of `tessera bench crash-drill`.
#[derive(clap::Args, Debug, Clone)]
pub struct CrashDrillArgs {
    /// Kill-and-restart cycles.
    #[arg(long, default_value_t = 100)]
    pub cycles: usize,
    /// Concurrent writers per cycle.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Seed of the kill moments (a run is repeatable up to the scheduler's timing).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The longest a cycle writes before the kill, in milliseconds (the kill comes at a
    /// uniformly random moment up to this).
    #[arg(long, default_value_t = 600)]
    pub max_write_ms: u64,
    /// Flush every commit to the device (`tessera up --fsync`).
    #[arg(long)]
    pub fsync: bool,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

/// What one writer knows about one object: the last content the server acknowledged, and
/// the content of a write that was sent but never answered (the kill may or may not have
/// let it commit).
#[derive(Debug, Clone, Default)]
struct Known {
    acknowledged: Option<String>,
    in_flight: Option<String>,
}

/// Every object the writers touched, by name.
type Ledger = Arc<Mutex<BTreeMap<String, Known>>>;

/// The drill's outcome.
#[derive(Debug, Default)]
struct Report {
    cycles: usize,
    acknowledged_writes: u64,
    objects_checked: usize,
    lost: Vec<String>,
    wrong_content: Vec<String>,
    /// Milliseconds from process start to a served request, per restart.
    restart_ms: Vec<u64>,
}

impl Report {
    fn median_restart_ms(&self) -> u64 {
        let mut sorted = self.restart_ms.clone();
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied().unwrap_or_default()
    }
}

/// Runs the drill once and reports it as a bench row; fails when a write was lost or changed.
pub async fn rows(args: &CrashDrillArgs) -> anyhow::Result<Vec<Row>> {
    let report = drill(args).await?;
    if !report.lost.is_empty() || !report.wrong_content.is_empty() {
        bail!(
            "acknowledged writes lost {:?} or changed {:?}",
            report.lost,
            report.wrong_content
        );
    }
    Ok(vec![Row {
        name: format!(
            "crash drill: {} cycles of {} writers, kill -9, restart",
            report.cycles, args.writers
        ),
        kind: "end-to-end (HTTPS, server in a child process)".into(),
        items: report.cycles as u64,
        // The work is the server's, in other processes.
        cpu_seconds: None,
        figures: vec![
            Figure::new(
                "restart to first served request",
                "ms",
                report.median_restart_ms() as f64,
            ),
            Figure::new("acknowledged writes", "", report.acknowledged_writes as f64),
            Figure::new(
                "acknowledged objects checked",
                "",
                report.objects_checked as f64,
            ),
            Figure::new("lost or changed", "", 0.0),
        ],
        anchor: "none: the bar is zero lost writes (etcd's guarantee for acknowledged writes)"
            .into(),
    }])
}

async fn drill(args: &CrashDrillArgs) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir().context("temporary data directory")?;
    let port = free_port()?;
    let mut rng = fastrand::Rng::with_seed(args.seed);
    let ledger: Ledger = Arc::default();
    let mut report = Report::default();
    for cycle in 0..args.cycles {
        let started = Instant::now();
        let mut server = Server::start(dir.path(), port, args.fsync)?;
        let client = server.ready().await?;
        report.restart_ms.push(started.elapsed().as_millis() as u64);
        verify(&client, &ledger, &mut report).await?;

        let writers: Vec<_> = (0..args.writers)
            .map(|writer| tokio::spawn(write(client.clone(), ledger.clone(), cycle, writer)))
            .collect();
        let kill_after = Duration::from_millis(rng.u64(0..=args.max_write_ms.max(1)));
        tokio::time::sleep(kill_after).await;
        server.kill();
        for writer in writers {
            report.acknowledged_writes += writer.await.unwrap_or_default();
        }
        report.cycles += 1;
    }
    // The last cycle's writes are checked after one more restart.
    let started = Instant::now();
    let mut server = Server::start(dir.path(), port, args.fsync)?;
    let client = server.ready().await?;
    report.restart_ms.push(started.elapsed().as_millis() as u64);
    verify(&client, &ledger, &mut report).await?;
    server.stop();
    Ok(report)
}

/// One writer's cycle: creates a new object and updates its own counter object, recording
/// every acknowledgement, until the server dies. Returns the writes acknowledged.
async fn write(client: kube::Client, ledger: Ledger, cycle: usize, writer: usize) -> u64 {
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let counter = format!("counter-{writer}");
    let mut acknowledged = 0;
    for i in 0.. {
        let name = format!("w{writer}-c{cycle}-{i}");
        let content = format!("{cycle}/{i}");
        if !record(&api, &ledger, &name, &content, Write::Create).await {
            break;
        }
        acknowledged += 1;
        if !record(&api, &ledger, &counter, &content, Write::Upsert).await {
            break;
        }
        acknowledged += 1;
    }
    acknowledged
}

#[derive(Clone, Copy)]
enum Write {
    Create,
    Upsert,
}

/// Sends one write and records what was sent and whether it was acknowledged.
async fn record(
    api: &Api<ConfigMap>,
    ledger: &Ledger,
    name: &str,
    content: &str,
    kind: Write,
) -> bool {
    lock(ledger).entry(name.to_string()).or_default().in_flight = Some(content.to_string());
    let object: ConfigMap =
        match serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": content}})) {
            Ok(object) => object,
            Err(_) => return false,
        };
    let result = match kind {
        Write::Create => api.create(&PostParams::default(), &object).await.map(drop),
        Write::Upsert => {
            let patch = kube::api::Patch::Apply(&object);
            let params = kube::api::PatchParams::apply("crash-drill").force();
            api.patch(name, &params, &patch).await.map(drop)
        }
    };
    if result.is_err() {
        return false;
    }
    let mut ledger = lock(ledger);
    let known = ledger.entry(name.to_string()).or_default();
    known.acknowledged = Some(content.to_string());
    known.in_flight = None;
    true
}

fn lock(ledger: &Ledger) -> std::sync::MutexGuard<'_, BTreeMap<String, Known>> {
    ledger
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Checks every acknowledged object against the restarted server: present, with the last
/// acknowledged content (or the unanswered write's, which may have committed). Afterwards the
/// ledger holds what the server holds, so the next cycle starts from the truth.
async fn verify(client: &kube::Client, ledger: &Ledger, report: &mut Report) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let stored: BTreeMap<String, String> = api
        .list(&ListParams::default())
        .await
        .context("list after restart")?
        .items
        .into_iter()
        .map(|cm| {
            let content = cm
                .data
                .as_ref()
                .and_then(|d| d.get("v"))
                .cloned()
                .unwrap_or_default();
            (cm.name_any(), content)
        })
        .collect();
    let mut ledger = lock(ledger);
    for (name, known) in ledger.iter_mut() {
        let found = stored.get(name);
        if let Some(acknowledged) = &known.acknowledged {
            report.objects_checked += 1;
            match found {
                None => report.lost.push(name.clone()),
                Some(content)
                    if content != acknowledged && Some(content) != known.in_flight.as_ref() =>
                {
                    report.wrong_content.push(format!(
                        "{name}: {content:?}, acknowledged {acknowledged:?}"
                    ));
                }
                Some(_) => {}
            }
        }
        known.acknowledged = found.cloned();
        known.in_flight = None;
    }
    Ok(())
}

/// The platform as a child process.
struct Server {
    child: Option<Child>,
    kubeconfig: PathBuf,
    port: u16,
}

impl Server {
    fn start(dir: &Path, port: u16, fsync: bool) -> anyhow::Result<Server> {
        let kubeconfig = dir.join("kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("server.log"))?;
        let mut command = Command::new(std::env::current_exe()?);
        command
            .arg("up")
            .arg("--data-dir")
            .arg(dir)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log);
        if fsync {
            command.arg("--fsync");
        }
        let child = command.spawn().context("start tessera up")?;
        Ok(Server {
            child: Some(child),
            kubeconfig,
            port,
        })
    }

    /// Waits until the server answers a request, and returns a client over HTTPS.
    async fn ready(&mut self) -> anyhow::Result<kube::Client> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!("tessera up exited during start-up ({status}); the store did not open");
            }
            if self.kubeconfig.exists()
                && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && let Ok(client) =
                    crate::client::connect_to(&crate::client::Source::Flag(self.kubeconfig.clone()))
                        .await
            {
                let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
                if api.list(&ListParams::default().limit(1)).await.is_ok() {
                    return Ok(client);
                }
            }
            if Instant::now() > deadline {
                bail!("tessera up did not serve within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
