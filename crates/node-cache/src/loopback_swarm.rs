//! A swarm of caches in one process for the model-distribution bench (`tessera bench models`)
//! and tests: N caches on loopback listeners, each behind a token-bucket upload link, racks of
//! 4 and zones of 16, pulling one blob from a rate-limited [`TestOrigin`] at once. They keep
//! no idle connections: all of them share this process's file descriptors.
//!
//! It reports what happened (each node's load time, the origin's bytes); it judges nothing and
//! knows nothing of bench reports.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::cache::{Cache, CacheError, Config, PeerSpec, PullRequest};
use crate::test_origin::TestOrigin;

/// What a swarm looks like.
#[derive(Debug, Clone)]
pub struct SwarmSpec {
    pub nodes: usize,
    /// Each node's upload link, bytes a second.
    pub link: u64,
    /// The origin's rate, bytes a second.
    pub origin_rate: u64,
    /// A fixed piece length (the core's rule when `None`).
    pub piece_length: Option<u64>,
    /// How often a node re-reads the swarm (the cache's default when `None`).
    pub poll_interval: Option<Duration>,
    /// Peers besides the seed whose piece maps a node reads when it polls peers (the cache's
    /// default when `None`).
    pub polled_peers: Option<usize>,
    /// Pieces each node uploads at once, and requests waiting (the cache's defaults when
    /// `None`).
    pub upload_slots: Option<usize>,
    pub upload_queue: Option<usize>,
}

/// What one pull at once gave.
#[derive(Debug, Clone)]
pub struct SwarmRun {
    /// Each node's load time from the common start, ascending.
    pub times: Vec<Duration>,
    /// Bytes the origin sent.
    pub origin_bytes: u64,
    /// Bytes all nodes together had uploaded to peers at the end of each
    /// [`SAMPLE_INTERVAL`] from the common start (the swarm's use of its links over time).
    pub uploaded: Vec<u64>,
}

/// How often [`SwarmRun::uploaded`] is sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// The swarm's failures.
#[derive(Debug, thiserror::Error)]
pub enum SwarmError {
    #[error("swarm set-up: {0}")]
    Io(#[from] std::io::Error),
    #[error("node {node}: {error}")]
    Pull { node: String, error: CacheError },
}

/// Starts `spec.nodes` fresh caches under `root` (which must be empty) and a fresh origin
/// holding `blob`, and pulls it on every cache at once.
pub async fn pull_at_once(
    root: &Path,
    spec: &SwarmSpec,
    blob: &[u8],
    digest: &str,
) -> Result<SwarmRun, SwarmError> {
    let origin = TestOrigin::start(Some(spec.origin_rate)).await?;
    let url = origin.put("/models/bench/model.safetensors", blob.to_vec());
    let size = u64::try_from(blob.len()).unwrap_or(u64::MAX);
    let caches = start(root, spec, size).await?;
    let request = PullRequest {
        digest: digest.to_owned(),
        size,
        url,
        model: None,
        revision: None,
        file: None,
        as_seed: false,
    };
    let start = Instant::now();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let sampler = {
        let caches = caches.clone();
        tokio::spawn(async move {
            let mut uploaded = Vec::new();
            let mut tick = tokio::time::interval(SAMPLE_INTERVAL);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => uploaded.push(
                        caches
                            .iter()
                            .map(|c| c.stats().uploaded_bytes.load(Ordering::Relaxed))
                            .sum(),
                    ),
                    _ = &mut stopped => return uploaded,
                }
            }
        })
    };
    let pulls = caches.iter().map(|cache| {
        let cache = cache.clone();
        let request = request.clone();
        async move {
            let node = cache.config().node.clone();
            match cache.pull(request).await {
                Ok(_) => Ok(start.elapsed()),
                Err(error) => Err(SwarmError::Pull { node, error }),
            }
        }
    });
    let mut times = futures::future::join_all(pulls)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    times.sort_unstable();
    let _ = stop.send(());
    let uploaded = sampler.await.unwrap_or_default();
    Ok(SwarmRun {
        times,
        origin_bytes: origin.bytes_sent(),
        uploaded,
    })
}

async fn start(root: &Path, spec: &SwarmSpec, size: u64) -> Result<Vec<Cache>, SwarmError> {
    let mut listeners = Vec::new();
    for _ in 0..spec.nodes {
        listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await?);
    }
    let mut peers = Vec::new();
    for (i, listener) in listeners.iter().enumerate() {
        peers.push(PeerSpec {
            name: format!("node-{i:03}"),
            url: format!("http://{}", listener.local_addr()?),
            rack: Some(format!("rack-{}", i / 4)),
            zone: Some(format!("zone-{}", i / 16)),
        });
    }
    let mut caches = Vec::new();
    for (me, listener) in peers.iter().zip(listeners) {
        let dir = root.join(&me.name);
        std::fs::create_dir_all(&dir)?;
        let mut config = Config::new(&dir, &me.name);
        config.rack = me.rack.clone();
        config.zone = me.zone.clone();
        config.peers = peers
            .iter()
            .filter(|p| p.name != me.name)
            .cloned()
            .collect();
        config.upload_rate = Some(spec.link);
        config.piece_length = spec.piece_length;
        if let Some(interval) = spec.poll_interval {
            config.poll_interval = interval.max(Duration::from_millis(1));
        }
        if let Some(polled) = spec.polled_peers {
            config.polled_peers = polled;
        }
        config.upload_slots = spec.upload_slots.unwrap_or(config.upload_slots);
        config.upload_queue = spec.upload_queue.unwrap_or(config.upload_queue);
        config.capacity = size.saturating_mul(4);
        // Every node's connections, both ends, share this process's descriptor table: with
        // idle connections kept to each of N-1 peers it fills up from ~100 nodes (kept for
        // only two poll intervals, at 512 nodes still).
        config.idle_connections_per_peer = 0;
        let cache = Cache::open(config).map_err(|e| SwarmError::Pull {
            node: me.name.clone(),
            error: e,
        })?;
        tokio::spawn(crate::server::serve(cache.clone(), listener));
        caches.push(cache);
    }
    Ok(caches)
}
