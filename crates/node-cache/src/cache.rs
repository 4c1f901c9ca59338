//! The node cache daemon's state and its downloads.
//!
//! [`Cache::pull`] is the one way a blob enters the cache. Per node, the core's
//! [`SingleFlight`] table keyed by digest makes many concurrent pulls of one blob one download,
//! and remembers a failure for a short TTL (its negative cache) so a failing origin is not asked
//! again by every caller. Per cluster, the blob's task id (the core's
//! [`key::request_task_id`] over the URL with presigned query parameters stripped) ranks the
//! nodes by rendezvous hashing: the first is the seed and the only node that reads the origin;
//! every other node asks the seed to pull (`POST /pull` with `as_seed`) and meanwhile fetches
//! pieces from whichever peers hold them (the seed's tracker names them, [`crate::tracker`];
//! [`fanout::assign`]: rarest first, node > rack > zone), checking each against the seed's
//! CRC32. A seed that cannot be reached, or declines because
//! the blob would evict its own ([`admission::admit_seed`]), hands the role to the next node in
//! the ranking.
//!
//! Origin pieces are ranged GETs through the origin token bucket; 403/404 fail at once,
//! 503/429/timeouts/short bodies are retried after the core's jittered [`Backoff`], and every
//! worker of the download waits out that delay (no retry storm). A blob becomes visible only
//! after every piece is verified and the core's [`Download::finish`] accepts the whole file's
//! size and sha256; a mismatch fetches the pieces again once (a seed from the origin; a peer
//! keeps only the pieces whose CRC32 matches the seed's verified blob) and otherwise fails.
//! Space is admitted by the core ([`admission::admit`]) before a download starts; pinned blobs
//! are never evicted.
//!
//! The decisions (single-flight, seed, parents, retry verdicts, admission, eviction, piece and
//! file verdicts) are the core's; this module does the I/O and keeps the state.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tessera_cache::admission;
use tessera_cache::eviction::{self, Blob, DiskUsage, Watermarks};
use tessera_cache::fanout::{self, Holder, Round, SeedShare};
use tessera_cache::hf_layout::Repo;
use tessera_cache::key::{self, QueryFilter};
use tessera_cache::pieces::{Download, Layout, PieceError, Verified};
use tessera_cache::placement::{self, Topology};
use tessera_cache::retry::{self, Verdict};
use tessera_cache::single_flight::{Backoff, Join, SingleFlight};
use tessera_cache::tracker::Bitfield;
use tessera_cache::{is_lower_hex, sha256_hex};
use thiserror::Error;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use crate::http::{FetchError, Http, Meter};
use crate::rate::{TokenBucket, UploadSlots};
use crate::store::{PieceRecord, Store, StoreError};
use crate::tracker::{self, Announce, Offer, Trackers};

/// Another cache this one fetches pieces from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSpec {
    pub name: String,
    /// Base URL, e.g. `http://10.0.0.2:4005`.
    pub url: String,
    pub rack: Option<String>,
    pub zone: Option<String>,
}

impl PeerSpec {
    /// Parses `NAME=URL[,rack[,zone]]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (name, rest) = text
            .split_once('=')
            .ok_or_else(|| format!("--peer {text:?}: expected NAME=URL[,rack[,zone]]"))?;
        let mut parts = rest.split(',');
        let url = parts.next().unwrap_or_default().trim_end_matches('/');
        if name.is_empty() || !url.starts_with("http://") {
            return Err(format!(
                "--peer {text:?}: expected NAME=URL[,rack[,zone]] with an http:// URL"
            ));
        }
        let mut label = || parts.next().filter(|s| !s.is_empty()).map(str::to_owned);
        let rack = label();
        let zone = label();
        Ok(Self {
            name: name.to_owned(),
            url: url.to_owned(),
            rack,
            zone,
        })
    }

    fn topology(&self) -> Topology {
        Topology {
            node: self.name.clone(),
            rack: self.rack.clone(),
            zone: self.zone.clone(),
        }
    }
}

/// How a cache runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub root: PathBuf,
    pub node: String,
    pub rack: Option<String>,
    pub zone: Option<String>,
    pub peers: Vec<PeerSpec>,
    /// The store's byte budget.
    pub capacity: u64,
    pub watermarks: Watermarks,
    /// Bytes a second read from the origin, all downloads together.
    pub origin_rate: Option<u64>,
    /// Bytes a second this cache serves to peers, all together.
    pub upload_rate: Option<u64>,
    /// Pieces served to peers at once, and how many more requests may wait for a slot (the
    /// rest are answered 503 and go to another holder).
    pub upload_slots: usize,
    pub upload_queue: usize,
    /// A fixed piece length (tests and benches); the core's rule when `None`.
    pub piece_length: Option<u64>,
    pub backoff: Backoff,
    /// How long a failed pull is remembered.
    pub error_ttl: Duration,
    /// Pieces fetched at once from the origin, per download.
    pub origin_concurrency: usize,
    /// Pieces fetched at once from peers, per download.
    pub peer_concurrency: usize,
    /// Pieces fetched at once from any one peer, per download.
    pub per_peer: usize,
    /// How long a peer that failed a piece (bad CRC, short body, refused) is not asked for
    /// that piece again.
    pub peer_retry_after: Duration,
    /// Peers besides the seed whose piece maps are read each poll (closest first, the rest in
    /// turn).
    pub polled_peers: usize,
    /// The longest wait for any part of an answer.
    pub idle_timeout: Duration,
    /// Unused connections kept open to each peer, and for how long. A node talks to many
    /// peers in turn: few, briefly (many caches in one process share one descriptor table).
    pub idle_connections_per_peer: usize,
    pub idle_connection_timeout: Duration,
    /// How often a node announces to its seed's tracker (or reads its peers' piece maps) for
    /// more work; after announcements that handed it nothing, a few times less often in a
    /// large swarm ([`fanout::idle_poll_intervals`]).
    pub poll_interval: Duration,
}

impl Config {
    /// Defaults: 100 GiB, 80 %/60 % watermarks, no rate limits, the core's backoff and 15 s
    /// negative cache, 4 origin and 16 peer pieces at once (at most 4 from one peer), 1
    /// upload slot with 1 more request waiting.
    pub fn new(root: &Path, node: &str) -> Self {
        Self {
            root: root.to_path_buf(),
            node: node.to_owned(),
            rack: None,
            zone: None,
            peers: Vec::new(),
            capacity: 100 << 30,
            watermarks: Watermarks::default(),
            origin_rate: None,
            upload_rate: None,
            upload_slots: 1,
            upload_queue: 1,
            piece_length: None,
            backoff: Backoff::default(),
            error_ttl: Duration::from_millis(tessera_cache::single_flight::DEFAULT_ERROR_TTL_MS),
            origin_concurrency: 4,
            peer_concurrency: 16,
            per_peer: 4,
            polled_peers: 8,
            peer_retry_after: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(30),
            idle_connections_per_peer: 1,
            idle_connection_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(50),
        }
    }
}

/// What `POST /pull` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    /// `sha256:<hex>` or `<hex>`.
    pub digest: String,
    pub size: u64,
    /// The origin URL (may be presigned).
    pub url: String,
    /// A Hugging Face repo id, with `revision` (a commit) and `file`, for the HF view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Set by a peer asking this node to be the seed: read the origin, do not forward.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub as_seed: bool,
}

/// What a successful pull answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullResponse {
    pub digest: String,
    pub size: u64,
    pub path: String,
    /// The blob was already here.
    pub cached: bool,
}

/// Why a pull failed. Every message names what failed.
#[derive(Debug, Clone, Error)]
pub enum CacheError {
    #[error("invalid {field}: {message}")]
    BadRequest {
        field: &'static str,
        message: String,
    },
    #[error("origin {url} answered {status}: {body}")]
    Origin {
        url: String,
        status: u16,
        body: String,
    },
    #[error("origin {url} unavailable after {attempts} attempts: {message}")]
    OriginUnavailable {
        url: String,
        attempts: u32,
        message: String,
    },
    #[error(transparent)]
    Space(#[from] admission::InsufficientSpace),
    #[error(transparent)]
    Declined(#[from] admission::SeedDeclined),
    #[error("sha256:{digest} failed verification: {message}; nothing was stored")]
    Corrupt { digest: String, message: String },
    #[error("cache store: {0}")]
    Store(#[from] StoreError),
    #[error("seed {seed} failed: {message}")]
    Seed { seed: String, message: String },
    #[error("peers: {0}")]
    Peer(String),
    #[error("{error} (failed recently; not retried for another {retry_in_ms} ms)")]
    Cached {
        error: Box<CacheError>,
        retry_in_ms: u64,
    },
}

impl CacheError {
    /// The HTTP status `POST /pull` answers with.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::BadRequest { .. } => 400,
            Self::Space(_) | Self::Declined(_) => 507,
            Self::Store(e) if e.full => 507,
            Self::Store(_) => 500,
            Self::Cached { error, .. } => error.http_status(),
            _ => 502,
        }
    }
}

/// Counters benches and `tessera model ls --node` read.
#[derive(Debug, Default)]
pub struct Stats {
    pub origin_bytes: AtomicU64,
    pub origin_requests: AtomicU64,
    pub peer_bytes: AtomicU64,
    pub uploaded_bytes: AtomicU64,
}

/// A download in flight.
#[derive(Debug)]
pub struct Job {
    pub hex: String,
    pub layout: Layout,
    download: Mutex<Download>,
    role: Mutex<String>,
    saving: tokio::sync::Mutex<()>,
}

impl Job {
    fn download(&self) -> MutexGuard<'_, Download> {
        self.download
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Verified pieces and CRC32s.
    pub fn verified(&self) -> Vec<(u64, u32)> {
        self.download().verified().collect()
    }

    pub fn piece_crc(&self, piece: u64) -> Option<u32> {
        self.download().piece_crc(piece)
    }
}

#[derive(Debug, Clone)]
struct BlobEntry {
    size: u64,
    last_used_ms: u64,
    record: Option<Arc<PieceRecord>>,
}

type Waiter = oneshot::Sender<Result<PullResponse, CacheError>>;

struct State {
    flights: SingleFlight<String, u64, CacheError>,
    waiters: HashMap<u64, Waiter>,
    fetchers: HashMap<String, u64>,
    next_id: u64,
    jobs: BTreeMap<String, Arc<Job>>,
    blobs: BTreeMap<String, BlobEntry>,
    pins: BTreeMap<String, u32>,
}

struct Inner {
    config: Config,
    me: Topology,
    /// The configured peers' places, in their order.
    peer_index: tracker::Peers,
    store: Store,
    http: Http,
    filter: QueryFilter,
    origin_bucket: Option<TokenBucket>,
    upload_bucket: Option<Arc<TokenBucket>>,
    upload_slots: UploadSlots,
    state: Mutex<State>,
    trackers: Mutex<Trackers>,
    stats: Stats,
    draws: AtomicU64,
    seed: u64,
}

/// The cache: cheap to clone, shared by the server and the downloads.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<Inner>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `sha256:<hex>` or `<hex>` → `<hex>`.
pub fn digest_hex(digest: &str) -> Result<String, CacheError> {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    if is_lower_hex(hex, 64) {
        Ok(hex.to_owned())
    } else {
        Err(CacheError::BadRequest {
            field: "digest",
            message: format!("{digest:?} is not sha256:<64 lower-case hex digits>"),
        })
    }
}

/// What a blob's pieces endpoint answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PieceMap {
    pub digest: String,
    pub size: u64,
    pub piece_length: u64,
    pub complete: bool,
    /// (piece, CRC32) of every verified piece.
    pub pieces: Vec<(u64, u32)>,
}

/// A download as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DownloadStatus {
    pub digest: String,
    pub size: u64,
    pub role: String,
    pub pieces: u64,
    pub pieces_verified: u64,
    pub bytes_verified: u64,
}

/// A blob as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobStatus {
    pub digest: String,
    pub size: u64,
    pub pinned: u32,
    pub last_used_ms: u64,
}

/// `GET /status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub node: String,
    pub capacity: u64,
    pub used: u64,
    pub blobs: Vec<BlobStatus>,
    pub downloads: Vec<DownloadStatus>,
    pub origin_bytes: u64,
    pub origin_requests: u64,
    pub peer_bytes: u64,
    pub uploaded_bytes: u64,
}

/// Where a range read is served from.
pub enum Source {
    Blob { size: u64, crc: Option<u32> },
    Partial { crc: u32 },
}

impl Cache {
    /// Opens the store (finding the complete blobs already there) and builds the cache.
    pub fn open(config: Config) -> Result<Self, CacheError> {
        let store = Store::open(&config.root)?;
        let mut blobs = BTreeMap::new();
        for blob in store.scan()? {
            blobs.insert(
                blob.hex.clone(),
                BlobEntry {
                    size: blob.size,
                    last_used_ms: blob.modified_ms,
                    record: blob.record.map(Arc::new),
                },
            );
        }
        let me = Topology {
            node: config.node.clone(),
            rack: config.rack.clone(),
            zone: config.zone.clone(),
        };
        let seed = u64::from_str_radix(&sha256_hex(config.node.as_bytes())[..16], 16).unwrap_or(0);
        let error_ttl = u64::try_from(config.error_ttl.as_millis()).unwrap_or(u64::MAX);
        Ok(Self {
            inner: Arc::new(Inner {
                origin_bucket: config.origin_rate.map(|r| TokenBucket::new(r, None)),
                upload_bucket: config
                    .upload_rate
                    .map(|r| Arc::new(TokenBucket::new(r, None))),
                upload_slots: UploadSlots::new(config.upload_slots, config.upload_queue),
                me,
                peer_index: tracker::Peers::new(
                    config.peers.iter().map(PeerSpec::topology).collect(),
                ),
                store,
                http: Http::with_idle(
                    config.idle_connections_per_peer,
                    config.idle_connection_timeout,
                ),
                filter: QueryFilter::default(),
                state: Mutex::new(State {
                    flights: SingleFlight::new(error_ttl),
                    waiters: HashMap::new(),
                    fetchers: HashMap::new(),
                    next_id: 0,
                    jobs: BTreeMap::new(),
                    blobs,
                    pins: BTreeMap::new(),
                }),
                trackers: Mutex::new(Trackers::new(
                    config.upload_slots,
                    config.upload_slots + config.upload_queue,
                )),
                stats: Stats::default(),
                draws: AtomicU64::new(0),
                seed,
                config,
            }),
        })
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    pub fn upload_bucket(&self) -> Option<Arc<TokenBucket>> {
        self.inner.upload_bucket.clone()
    }

    /// A slot to serve one piece in; `None`: too many peers wait already.
    pub async fn upload_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.inner.upload_slots.enter().await
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state()
    }

    /// Pulls a blob: answers at once when it is here, joins the download in flight, or starts
    /// one; answers when the blob is verified and visible, or with the failure.
    pub async fn pull(&self, request: PullRequest) -> Result<PullResponse, CacheError> {
        let hex = digest_hex(&request.digest)?;
        key::normalise_url(&request.url, &self.inner.filter).map_err(|e| {
            CacheError::BadRequest {
                field: "url",
                message: e.to_string(),
            }
        })?;
        let now = now_ms();
        let receiver = {
            let mut state = self.state();
            if let Some(blob) = state.blobs.get_mut(&hex) {
                if blob.size != request.size {
                    return Err(CacheError::BadRequest {
                        field: "size",
                        message: format!(
                            "sha256:{hex} is held with {} bytes, not {}",
                            blob.size, request.size
                        ),
                    });
                }
                blob.last_used_ms = now;
                return Ok(self.inner.response(&hex, request.size, true));
            }
            if request.as_seed && !state.flights.in_flight(&hex) {
                // Seeding for others must not evict this node's own blobs; declining is not
                // remembered as a failure, so this node's own pull of the blob is not refused.
                admission::admit_seed(
                    &self.inner.config.watermarks,
                    self.inner.config.capacity,
                    &state.blob_records(),
                    &state.pinned(),
                    &format!("sha256:{hex}"),
                    request.size,
                )?;
            }
            let id = state.next_id;
            state.next_id += 1;
            let (sender, receiver) = oneshot::channel();
            match state.flights.join(&hex, id, now) {
                Join::Fetch => {
                    state.waiters.insert(id, sender);
                    state.fetchers.insert(hex.clone(), id);
                    let inner = self.inner.clone();
                    let hex = hex.clone();
                    tokio::spawn(async move { inner.run(request, hex).await });
                }
                Join::Wait => {
                    state.waiters.insert(id, sender);
                }
                Join::Failed { error, retry_at_ms } => {
                    return Err(CacheError::Cached {
                        error: Box::new(error),
                        retry_in_ms: retry_at_ms.saturating_sub(now),
                    });
                }
            }
            receiver
        };
        receiver.await.unwrap_or_else(|_| {
            Err(CacheError::Peer(
                "the download ended without an answer".into(),
            ))
        })
    }

    /// Pins a blob (a pod uses it): never evicted while pinned. Counts pins.
    pub fn pin(&self, digest: &str) -> Result<u32, CacheError> {
        let hex = digest_hex(digest)?;
        let mut state = self.state();
        let count = state.pins.entry(hex).or_insert(0);
        *count += 1;
        Ok(*count)
    }

    /// Drops one pin.
    pub fn unpin(&self, digest: &str) -> Result<u32, CacheError> {
        let hex = digest_hex(digest)?;
        let mut state = self.state();
        let left = match state.pins.get_mut(&hex) {
            Some(count) => {
                *count = count.saturating_sub(1);
                *count
            }
            None => 0,
        };
        if left == 0 {
            state.pins.remove(&hex);
        }
        Ok(left)
    }

    /// The piece map of a blob held or downloading.
    pub fn piece_map(&self, hex: &str) -> Option<PieceMap> {
        let state = self.state();
        if let Some(blob) = state.blobs.get(hex) {
            let record = blob.record.as_ref()?;
            return Some(PieceMap {
                digest: format!("sha256:{hex}"),
                size: blob.size,
                piece_length: record.piece_length,
                complete: true,
                pieces: record.pieces.clone(),
            });
        }
        let job = state.jobs.get(hex)?.clone();
        drop(state);
        Some(PieceMap {
            digest: format!("sha256:{hex}"),
            size: job.layout.size(),
            piece_length: job.layout.piece_length(),
            complete: false,
            pieces: job.verified(),
        })
    }

    /// The tracker's answer to a node downloading `hex` from this seed (`None`: the blob is
    /// neither held nor downloading here); a malformed announcement is named in the error.
    pub fn announce(&self, hex: &str, announce: Announce) -> Option<Result<Offer, String>> {
        let map = self.piece_map(hex)?;
        let count = Layout::with_piece_length(map.size, map.piece_length)
            .ok()?
            .count();
        let mut trackers = self
            .inner
            .trackers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(trackers.announce(hex, count, &map.pieces, announce, now_ms()))
    }

    /// Whether `offset..offset+len` of `hex` may be served, and how to check it: any range of
    /// a complete blob; exactly one verified piece of a download.
    pub fn source(&self, hex: &str, offset: u64, len: u64) -> Result<Source, u16> {
        let mut state = self.state();
        if let Some(blob) = state.blobs.get_mut(hex) {
            if offset.checked_add(len).is_none_or(|end| end > blob.size) || len == 0 {
                return Err(416);
            }
            blob.last_used_ms = now_ms();
            let crc = blob.record.as_ref().and_then(|r| {
                let layout = Layout::with_piece_length(r.size, r.piece_length).ok()?;
                let piece = offset / r.piece_length;
                let range = layout.range(piece).ok()?;
                (range.offset == offset && range.len == len)
                    .then(|| r.pieces.iter().find(|(i, _)| *i == piece).map(|(_, c)| *c))
                    .flatten()
            });
            return Ok(Source::Blob {
                size: blob.size,
                crc,
            });
        }
        let Some(job) = state.jobs.get(hex).cloned() else {
            return Err(404);
        };
        drop(state);
        if offset
            .checked_add(len)
            .is_none_or(|end| end > job.layout.size())
            || len == 0
        {
            return Err(416);
        }
        let piece = offset / job.layout.piece_length();
        match (job.layout.range(piece), job.piece_crc(piece)) {
            (Ok(range), Some(crc)) if range.offset == offset && range.len == len => {
                Ok(Source::Partial { crc })
            }
            _ => Err(404),
        }
    }

    /// What `/status` shows.
    pub fn status(&self) -> Status {
        let state = self.state();
        let blobs: Vec<BlobStatus> = state
            .blobs
            .iter()
            .map(|(hex, b)| BlobStatus {
                digest: format!("sha256:{hex}"),
                size: b.size,
                pinned: state.pins.get(hex).copied().unwrap_or(0),
                last_used_ms: b.last_used_ms,
            })
            .collect();
        let jobs: Vec<Arc<Job>> = state.jobs.values().cloned().collect();
        let used = state.used();
        drop(state);
        let downloads = jobs
            .iter()
            .map(|job| {
                let verified = job.verified();
                let bytes = verified
                    .iter()
                    .filter_map(|(i, _)| job.layout.range(*i).ok())
                    .map(|r| r.len)
                    .sum();
                DownloadStatus {
                    digest: format!("sha256:{}", job.hex),
                    size: job.layout.size(),
                    role: job.role.lock().map(|r| r.clone()).unwrap_or_default(),
                    pieces: job.layout.count(),
                    pieces_verified: u64::try_from(verified.len()).unwrap_or(0),
                    bytes_verified: bytes,
                }
            })
            .collect();
        let stats = &self.inner.stats;
        Status {
            node: self.inner.config.node.clone(),
            capacity: self.inner.config.capacity,
            used,
            blobs,
            downloads,
            origin_bytes: stats.origin_bytes.load(Ordering::Relaxed),
            origin_requests: stats.origin_requests.load(Ordering::Relaxed),
            peer_bytes: stats.peer_bytes.load(Ordering::Relaxed),
            uploaded_bytes: stats.uploaded_bytes.load(Ordering::Relaxed),
        }
    }

    /// Runs the watermark plan now (also run after every completed download).
    pub async fn evict(&self) {
        self.inner.evict().await;
    }
}

impl State {
    fn used(&self) -> u64 {
        let blobs: u64 = self.blobs.values().map(|b| b.size).sum();
        let jobs: u64 = self.jobs.values().map(|j| j.layout.size()).sum();
        blobs + jobs
    }

    fn blob_records(&self) -> Vec<Blob> {
        let mut out: Vec<Blob> = self
            .blobs
            .iter()
            .map(|(hex, b)| Blob {
                digest: hex.clone(),
                size: b.size,
                last_used_ms: b.last_used_ms,
                downloading: false,
            })
            .collect();
        out.extend(self.jobs.values().map(|j| Blob {
            digest: j.hex.clone(),
            size: j.layout.size(),
            last_used_ms: u64::MAX,
            downloading: true,
        }));
        out
    }

    fn pinned(&self) -> BTreeSet<String> {
        self.pins
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(hex, _)| hex.clone())
            .collect()
    }
}

/// Where a download reads from.
enum Mode {
    Origin,
    Peers { seed: usize },
}

/// The seed's answer to this node's `POST /pull`, once it came.
type SeedAnswer = Option<Result<PullResponse, FetchError>>;

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn response(&self, hex: &str, size: u64, cached: bool) -> PullResponse {
        PullResponse {
            digest: format!("sha256:{hex}"),
            size,
            path: self.store.blob_path(hex).display().to_string(),
            cached,
        }
    }

    fn draw(&self) -> u64 {
        self.seed
            ^ self
                .draws
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// One download, from start to the answer handed to every waiter.
    async fn run(self: Arc<Self>, request: PullRequest, hex: String) {
        let result = self.download(&request, &hex).await;
        if let Err(error) = &result {
            tracing::warn!(digest = %hex, %error, "pull failed");
        }
        let senders: Vec<Waiter> = {
            let mut state = self.state();
            let job = state.jobs.remove(&hex);
            if let (Ok(_), Some(job)) = (&result, &job) {
                let record = PieceRecord {
                    sha256: hex.clone(),
                    size: job.layout.size(),
                    piece_length: job.layout.piece_length(),
                    pieces: job.verified(),
                };
                state.blobs.insert(
                    hex.clone(),
                    BlobEntry {
                        size: job.layout.size(),
                        last_used_ms: now_ms(),
                        record: Some(Arc::new(record)),
                    },
                );
            }
            let mut ids = state
                .flights
                .complete(&hex, &result, now_ms())
                .unwrap_or_default();
            ids.extend(state.fetchers.remove(&hex));
            ids.iter()
                .filter_map(|id| state.waiters.remove(id))
                .collect()
        };
        for sender in senders {
            let _ = sender.send(result.clone());
        }
        if result.is_ok() {
            self.evict().await;
        }
    }

    async fn download(
        self: &Arc<Self>,
        request: &PullRequest,
        hex: &str,
    ) -> Result<PullResponse, CacheError> {
        let layout = match self.config.piece_length {
            Some(length) => Layout::with_piece_length(request.size, length),
            None => Ok(Layout::new(request.size)),
        }
        .map_err(|e| CacheError::BadRequest {
            field: "size",
            message: e.to_string(),
        })?;
        let task = key::request_task_id(
            &request.url,
            request.revision.as_deref(),
            layout.piece_length(),
            &self.filter,
        )
        .map_err(|e| CacheError::BadRequest {
            field: "url",
            message: e.to_string(),
        })?;
        let fresh = Download::new(layout, hex).map_err(|e| CacheError::BadRequest {
            field: "size",
            message: e.to_string(),
        })?;
        let job = Arc::new(Job {
            hex: hex.to_owned(),
            layout,
            download: Mutex::new(fresh),
            role: Mutex::new(String::new()),
            saving: tokio::sync::Mutex::new(()),
        });
        // Admission: room for the whole blob, evicting only what nothing uses; the job
        // reserves its size in the same step.
        let evict = {
            let mut state = self.state();
            let admitted = admission::admit(
                &self.config.watermarks,
                self.config.capacity,
                &state.blob_records(),
                &state.pinned(),
                &format!("sha256:{hex}"),
                request.size,
            )?;
            state.jobs.insert(hex.to_owned(), job.clone());
            admitted.evict
        };
        self.remove_blobs(evict).await;
        let store = self.store.clone();
        let owned = hex.to_owned();
        let download = tokio::task::spawn_blocking(move || store.begin(layout, &owned))
            .await
            .map_err(|e| CacheError::Peer(format!("store task: {e}")))??;
        let resumed = download.verified().count();
        *job.download() = download;
        tracing::info!(digest = %hex, size = request.size, pieces = layout.count(), resumed, task = %task, "download started");

        // The seed ranking: every node computes the same one from the same node list.
        let mut names: Vec<&str> = vec![self.me.node.as_str()];
        names.extend(self.config.peers.iter().map(|p| p.name.as_str()));
        let ranking: Vec<String> = if request.as_seed {
            vec![self.me.node.clone()]
        } else {
            placement::seed_nodes(&task, &names, names.len())
                .into_iter()
                .map(str::to_owned)
                .collect()
        };
        let mut outcome = Err(CacheError::Peer("no seed could be reached".into()));
        for seed in &ranking {
            let mode = if *seed == self.me.node {
                Mode::Origin
            } else {
                match self.config.peers.iter().position(|p| &p.name == seed) {
                    Some(index) => Mode::Peers { seed: index },
                    None => continue,
                }
            };
            outcome = self.fetch_and_verify(&job, request, &mode).await;
            match &outcome {
                Err(CacheError::Seed { message, .. }) if message.starts_with("unreachable") => {
                    tracing::warn!(digest = %hex, seed = %seed, "seed unreachable; the next node in the ranking seeds");
                }
                Err(CacheError::Seed { message, .. })
                    if message.starts_with("declined to seed") =>
                {
                    tracing::info!(digest = %hex, seed = %seed, %message, "the next node in the ranking seeds");
                }
                _ => break,
            }
        }
        let verified = match outcome {
            Ok(verified) => verified,
            Err(error) => {
                if matches!(error, CacheError::Corrupt { .. }) {
                    self.store.discard_partial(hex);
                }
                return Err(error);
            }
        };
        let _saving = job.saving.lock().await;
        let store = self.store.clone();
        let snapshot = job.download().clone();
        tokio::task::spawn_blocking(move || store.commit(&verified, &snapshot))
            .await
            .map_err(|e| CacheError::Peer(format!("store task: {e}")))??;
        if let (Some(model), Some(revision), Some(file)) =
            (&request.model, &request.revision, &request.file)
        {
            match Repo::model(model) {
                Ok(repo) => match self.store.link_hf(&repo, revision, file, hex) {
                    Ok(path) => {
                        tracing::info!(path = %path.display(), "linked into the Hugging Face view")
                    }
                    Err(error) => tracing::warn!(%error, "cannot link into the Hugging Face view"),
                },
                Err(error) => tracing::warn!(%error, "cannot link into the Hugging Face view"),
            }
        }
        tracing::info!(digest = %hex, "blob verified and visible");
        Ok(self.response(hex, request.size, false))
    }

    /// Fetches every piece (from the origin or from peers), then checks the whole file; one
    /// more pass on a whole-file mismatch.
    async fn fetch_and_verify(
        self: &Arc<Self>,
        job: &Arc<Job>,
        request: &PullRequest,
        mode: &Mode,
    ) -> Result<Verified, CacheError> {
        let (answer_tx, answer_rx) = watch::channel::<SeedAnswer>(None);
        let mut seed_task = None;
        if let Mode::Peers { seed } = mode {
            *job.role
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = "peer".into();
            let peer = &self.config.peers[*seed];
            let url = format!("{}/pull", peer.url);
            let body = PullRequest {
                as_seed: true,
                ..request.clone()
            };
            let http = self.http.clone();
            seed_task = Some(tokio::spawn(async move {
                let answer = http.post_json::<_, PullResponse>(&url, &body, None).await;
                let _ = answer_tx.send(Some(answer));
            }));
        } else {
            *job.role
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = "seed".into();
        }
        let result = self.fetch_passes(job, request, mode, answer_rx).await;
        if let Some(task) = seed_task {
            task.abort();
        }
        result
    }

    async fn fetch_passes(
        self: &Arc<Self>,
        job: &Arc<Job>,
        request: &PullRequest,
        mode: &Mode,
        mut answer: watch::Receiver<SeedAnswer>,
    ) -> Result<Verified, CacheError> {
        let mut authority: Option<BTreeMap<u64, u32>> = None;
        for pass in 0..2 {
            match mode {
                Mode::Origin => self.origin_pieces(job, &request.url).await?,
                Mode::Peers { seed } => {
                    self.peer_pieces(job, *seed, &mut answer, authority.as_ref())
                        .await?
                }
            }
            let store = self.store.clone();
            let hex = job.hex.clone();
            let (size, sha) = tokio::task::spawn_blocking(move || store.hash_partial(&hex))
                .await
                .map_err(|e| CacheError::Peer(format!("store task: {e}")))??;
            let verdict = job.download().finish(size, &sha);
            match verdict {
                Ok(verified) => return Ok(verified),
                Err(PieceError::FileDigestMismatch { .. }) if pass == 0 => {
                    tracing::warn!(digest = %job.hex, "whole-file sha256 mismatch; fetching the pieces again");
                    match mode {
                        Mode::Origin => {
                            let fresh = Download::new(job.layout, &job.hex).map_err(|e| {
                                CacheError::Corrupt {
                                    digest: job.hex.clone(),
                                    message: e.to_string(),
                                }
                            })?;
                            *job.download() = fresh;
                        }
                        Mode::Peers { seed } => {
                            // The seed's verified blob is the authority on every piece's CRC32.
                            let seed_map = self.seed_verified_map(job, *seed, &mut answer).await?;
                            let keep: Vec<(u64, u32)> = job
                                .verified()
                                .into_iter()
                                .filter(|(i, c)| seed_map.get(i) == Some(c))
                                .collect();
                            let kept =
                                Download::resume(job.layout, &job.hex, keep).map_err(|e| {
                                    CacheError::Corrupt {
                                        digest: job.hex.clone(),
                                        message: e.to_string(),
                                    }
                                })?;
                            *job.download() = kept;
                            authority = Some(seed_map);
                        }
                    }
                    self.save(job).await?;
                }
                Err(error) => {
                    return Err(CacheError::Corrupt {
                        digest: job.hex.clone(),
                        message: error.to_string(),
                    });
                }
            }
        }
        Err(CacheError::Corrupt {
            digest: job.hex.clone(),
            message: "the pieces fetched again still do not hash to the digest".into(),
        })
    }

    /// Waits for the seed to finish, then reads its (verified) piece map.
    async fn seed_verified_map(
        &self,
        job: &Job,
        seed: usize,
        answer: &mut watch::Receiver<SeedAnswer>,
    ) -> Result<BTreeMap<u64, u32>, CacheError> {
        let peer = &self.config.peers[seed];
        loop {
            let current = answer.borrow().clone();
            match current {
                Some(Ok(_)) => break,
                Some(Err(error)) => return Err(seed_error(peer, &error)),
                None => {
                    if answer.changed().await.is_err() {
                        return Err(CacheError::Seed {
                            seed: peer.name.clone(),
                            message: "no answer".into(),
                        });
                    }
                }
            }
        }
        let url = format!("{}/blobs/sha256/{}/pieces", peer.url, job.hex);
        let map: PieceMap = self
            .http
            .get_json(&url, self.config.idle_timeout)
            .await
            .map_err(|e| seed_error(peer, &e))?;
        Ok(map.pieces.into_iter().collect())
    }

    async fn save(&self, job: &Arc<Job>) -> Result<(), CacheError> {
        let _saving = job.saving.lock().await;
        let snapshot = job.download().clone();
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.save_state(&snapshot))
            .await
            .map_err(|e| CacheError::Peer(format!("store task: {e}")))??;
        Ok(())
    }

    /// Checks, writes and records one piece, then persists the state.
    async fn store_piece(
        &self,
        job: &Arc<Job>,
        piece: u64,
        bytes: bytes::Bytes,
        expected_crc: Option<u32>,
    ) -> Result<(), PieceFailure> {
        let range = job
            .layout
            .check_piece(piece, &bytes, expected_crc)
            .and_then(|_| job.layout.range(piece))
            .map_err(PieceFailure::Piece)?;
        let store = self.store.clone();
        let hex = job.hex.clone();
        let data = bytes.clone();
        tokio::task::spawn_blocking(move || store.write_piece(&hex, range.offset, &data))
            .await
            .map_err(|e| PieceFailure::Fatal(CacheError::Peer(format!("store task: {e}"))))?
            .map_err(|e| PieceFailure::Fatal(e.into()))?;
        job.download()
            .record(piece, &bytes, expected_crc)
            .map_err(PieceFailure::Piece)?;
        self.save(job).await.map_err(PieceFailure::Fatal)
    }

    /// The seed's part: every missing piece from the origin, `origin_concurrency` at a time,
    /// all workers waiting out a failure's backoff.
    async fn origin_pieces(self: &Arc<Self>, job: &Arc<Job>, url: &str) -> Result<(), CacheError> {
        let order: VecDeque<u64> = job.download().fetch_order(&[], 0).into();
        if order.is_empty() {
            return Ok(());
        }
        let normalised = key::normalise_url(url, &self.filter).unwrap_or_else(|_| url.to_owned());
        let shared = Arc::new(OriginRun {
            queue: Mutex::new(order),
            failures: AtomicU32::new(0),
            pause_until: tokio::sync::Mutex::new(tokio::time::Instant::now()),
        });
        let mut workers = JoinSet::new();
        for _ in 0..self.config.origin_concurrency.max(1) {
            let inner = self.clone();
            let job = job.clone();
            let shared = shared.clone();
            let url = url.to_owned();
            let normalised = normalised.clone();
            workers
                .spawn(async move { inner.origin_worker(&job, &url, &normalised, &shared).await });
        }
        while let Some(joined) = workers.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    workers.abort_all();
                    return Err(error);
                }
                Err(error) => {
                    workers.abort_all();
                    return Err(CacheError::Peer(format!("origin worker: {error}")));
                }
            }
        }
        Ok(())
    }

    async fn origin_worker(
        &self,
        job: &Arc<Job>,
        url: &str,
        normalised: &str,
        run: &OriginRun,
    ) -> Result<(), CacheError> {
        loop {
            let Some(piece) = run.queue.lock().ok().and_then(|mut q| q.pop_front()) else {
                return Ok(());
            };
            let Ok(range) = job.layout.range(piece) else {
                continue;
            };
            loop {
                let until = *run.pause_until.lock().await;
                tokio::time::sleep_until(until).await;
                self.stats.origin_requests.fetch_add(1, Ordering::Relaxed);
                let whole = range.offset == 0 && range.len == job.layout.size();
                let fetched = self
                    .http
                    .get_range(
                        url,
                        Some((range.offset, range.offset + range.len - 1)),
                        range.len,
                        self.config.idle_timeout,
                        Meter {
                            bucket: self.origin_bucket.as_ref(),
                            counter: &self.stats.origin_bytes,
                        },
                    )
                    .await;
                let failure = match fetched {
                    Ok((status, bytes)) => match retry::classify_status(status, whole) {
                        Verdict::Success => match self.store_piece(job, piece, bytes, None).await {
                            Ok(()) => {
                                run.failures.store(0, Ordering::Relaxed);
                                break;
                            }
                            Err(PieceFailure::Fatal(error)) => return Err(error),
                            Err(PieceFailure::Piece(error)) => error.to_string(),
                            Err(PieceFailure::Refused(error)) => error,
                            Err(PieceFailure::Busy) => "busy".into(),
                        },
                        Verdict::Retry | Verdict::Fail => {
                            return Err(CacheError::Origin {
                                url: normalised.to_owned(),
                                status,
                                body: "the answer is not the range asked for".into(),
                            });
                        }
                    },
                    Err(FetchError::Status { status, body }) => {
                        match retry::classify_status(status, whole) {
                            Verdict::Retry => format!("answered {status}"),
                            _ => {
                                return Err(CacheError::Origin {
                                    url: normalised.to_owned(),
                                    status,
                                    body: body.chars().take(200).collect(),
                                });
                            }
                        }
                    }
                    Err(FetchError::Transport { failure, message }) => {
                        match retry::classify_transport(failure) {
                            Verdict::Retry => message,
                            Verdict::Success | Verdict::Fail => {
                                return Err(CacheError::OriginUnavailable {
                                    url: normalised.to_owned(),
                                    attempts: 1,
                                    message,
                                });
                            }
                        }
                    }
                    Err(FetchError::Invalid(message)) => {
                        return Err(CacheError::BadRequest {
                            field: "url",
                            message,
                        });
                    }
                };
                let attempt = run.failures.fetch_add(1, Ordering::Relaxed);
                let Some(delay) = self.config.backoff.delay_ms(attempt, self.draw()) else {
                    return Err(CacheError::OriginUnavailable {
                        url: normalised.to_owned(),
                        attempts: attempt + 1,
                        message: failure,
                    });
                };
                tracing::warn!(digest = %job.hex, piece, attempt, delay_ms = delay, error = %failure, "origin piece failed; backing off");
                let mut until = run.pause_until.lock().await;
                let next = tokio::time::Instant::now() + Duration::from_millis(delay);
                if next > *until {
                    *until = next;
                }
            }
        }
    }

    /// A peer's part: pieces from the holders (the seed streams each piece onward once
    /// verified), until every piece is verified or the seed fails.
    async fn peer_pieces(
        self: &Arc<Self>,
        job: &Arc<Job>,
        seed: usize,
        answer: &mut watch::Receiver<SeedAnswer>,
        authority: Option<&BTreeMap<u64, u32>>,
    ) -> Result<(), CacheError> {
        let peers = &self.config.peers;
        let mut workers: JoinSet<(u64, usize, Result<Duration, PieceFailure>)> = JoinSet::new();
        let mut busy = BTreeSet::new();
        let mut load = vec![0usize; peers.len()];
        let mut avoided: BTreeMap<(usize, u64), tokio::time::Instant> = BTreeMap::new();
        // Holders whose upload slots were all taken: skipped until a time that doubles with
        // each refusal in a row (a poll interval, two, four, … at most 16), so that many
        // nodes do not keep asking the one holder of a new piece.
        let mut full: BTreeMap<usize, (tokio::time::Instant, u32)> = BTreeMap::new();
        let mut seed_done = false;
        // Holders' maps, re-read at most once a poll interval however often pieces finish.
        let mut known: Option<(tokio::time::Instant, Known)> = None;
        // Rounds in a row whose announcement handed nothing new: the next one waits longer.
        let mut idle = 0u32;
        let wait = |idle: u32, in_flight: bool| {
            self.config.poll_interval * fanout::idle_poll_intervals(idle, peers.len(), in_flight)
        };
        let mut polls = 0u64;
        // A piece arrived since the last announcement: the seed's tracker hears of it now,
        // as BitTorrent's `have`, not a poll interval later.
        let mut fresh = false;
        // Since when the seed has held the whole blob, and the longest a piece took here.
        let mut seed_complete_since: Option<tokio::time::Instant> = None;
        let mut slowest_piece = Duration::ZERO;
        let rotation = self.seed;
        let names: Vec<&str> = std::iter::once(self.me.node.as_str())
            .chain(peers.iter().map(|p| p.name.as_str()))
            .collect();
        let share = SeedShare::of(&self.me.node, &names, &peers[seed].name, seed);
        // Since when nothing could be fetched although the seed had finished without holding
        // the whole blob any more (it evicted it): after a while the pull fails, not hangs.
        let mut orphaned: Option<tokio::time::Instant> = None;
        loop {
            if busy.is_empty() && job.download().is_complete() {
                // BitTorrent's `completed` event: the tracker hands pieces out from what its
                // members last announced, and this node, done, would not announce again. The
                // pieces it got since (the last ones, which everybody is still missing) would
                // be known to be here only by the seed, never handed out from here.
                if known.is_some() {
                    let _ = self
                        .known(job, seed, polls + 1, authority, (&busy, 0))
                        .await;
                }
                return Ok(());
            }
            let current = answer.borrow().clone();
            if let Some(Err(error)) = current {
                workers.abort_all();
                return Err(seed_error(&peers[seed], &error));
            }
            let free = self.config.peer_concurrency.saturating_sub(busy.len());
            if free > 0 && !job.download().is_complete() {
                let stale = known
                    .as_ref()
                    .is_none_or(|(at, _)| at.elapsed() >= wait(idle, !busy.is_empty()));
                let announced = stale || fresh;
                if announced {
                    fresh = false;
                    polls += 1;
                    let view = self.known(job, seed, polls, authority, (&busy, free)).await;
                    known = Some((tokio::time::Instant::now(), view));
                }
                let (holders, seed_complete): (&[Holder], bool) =
                    known.as_ref().map_or((&[], false), |(_, k)| {
                        (k.holders.as_slice(), k.seed_complete)
                    });
                // Super-seeding goes on for a while after the seed completes: its last pieces
                // are still its alone, and every node asking it for them at once would leave
                // the one each is meant for waiting in the crowd.
                let grace = (self.config.poll_interval * 10).max(slowest_piece * 4);
                let super_seeding = !seed_complete
                    || seed_complete_since
                        .get_or_insert_with(tokio::time::Instant::now)
                        .elapsed()
                        < grace;
                if !seed_complete {
                    seed_complete_since = None;
                }
                avoided.retain(|_, at| at.elapsed() < self.config.peer_retry_after);
                let avoid: BTreeSet<(usize, u64)> = avoided.keys().copied().collect();
                let now = tokio::time::Instant::now();
                let per_holder = self.config.per_peer.max(1);
                let load_now: Vec<usize> = load
                    .iter()
                    .enumerate()
                    .map(|(h, n)| {
                        if full.get(&h).is_some_and(|(until, _)| *until > now) {
                            per_holder
                        } else {
                            *n
                        }
                    })
                    .collect();
                let assignments = {
                    let download = job.download();
                    fanout::assign(
                        &download,
                        &self.me,
                        holders,
                        &Round {
                            busy: &busy,
                            load: &load_now,
                            per_holder,
                            avoid: &avoid,
                            limit: free,
                            rotation,
                            seed: self.draw(),
                            seed_share: share.filter(|_| super_seeding),
                        },
                    )
                };
                if announced {
                    idle = if assignments.is_empty() {
                        idle.saturating_add(1)
                    } else {
                        0
                    };
                }
                let seed_finished = matches!(&*answer.borrow(), Some(Ok(_)));
                let seed_answered = known.as_ref().is_some_and(|(_, k)| k.seed_answered);
                let seed_lost_it = seed_answered && !seed_complete;
                if seed_finished && seed_lost_it && busy.is_empty() && assignments.is_empty() {
                    let since = *orphaned.get_or_insert_with(tokio::time::Instant::now);
                    if since.elapsed() >= ORPHANED_AFTER {
                        workers.abort_all();
                        return Err(CacheError::Seed {
                            seed: peers[seed].name.clone(),
                            message: "it no longer holds the blob (evicted before this node had every piece) and no peer has the rest; pull again".into(),
                        });
                    }
                } else {
                    orphaned = None;
                }
                for assignment in assignments {
                    busy.insert(assignment.piece);
                    load[assignment.holder] += 1;
                    let inner = self.clone();
                    let job = job.clone();
                    let url = format!("{}/blobs/sha256/{}", peers[assignment.holder].url, job.hex);
                    workers.spawn(async move {
                        let at = tokio::time::Instant::now();
                        let result = inner.peer_piece(&job, &url, assignment).await;
                        (
                            assignment.piece,
                            assignment.holder,
                            result.map(|()| at.elapsed()),
                        )
                    });
                }
            }
            tokio::select! {
                Some(joined) = workers.join_next(), if !workers.is_empty() => {
                    match joined {
                        Ok((piece, holder, Ok(took))) => {
                            slowest_piece = slowest_piece.max(took);
                            busy.remove(&piece);
                            load[holder] = load[holder].saturating_sub(1);
                            full.remove(&holder);
                            fresh = true;
                        }
                        Ok((piece, holder, Err(PieceFailure::Busy))) => {
                            busy.remove(&piece);
                            load[holder] = load[holder].saturating_sub(1);
                            let strikes = full.get(&holder).map_or(0, |(_, s)| s + 1).min(4);
                            let until = tokio::time::Instant::now() + self.config.poll_interval * (1 << strikes);
                            full.insert(holder, (until, strikes));
                        }
                        Ok((piece, holder, Err(PieceFailure::Refused(error)))) => {
                            busy.remove(&piece);
                            load[holder] = load[holder].saturating_sub(1);
                            tracing::warn!(digest = %job.hex, piece, peer = %peers[holder].name, %error, "peer range failed; fetching it elsewhere");
                            avoided.insert((holder, piece), tokio::time::Instant::now());
                        }
                        Ok((piece, holder, Err(PieceFailure::Piece(error)))) => {
                            busy.remove(&piece);
                            load[holder] = load[holder].saturating_sub(1);
                            tracing::warn!(digest = %job.hex, piece, peer = %peers[holder].name, %error, "peer piece refused; fetching it elsewhere");
                            avoided.insert((holder, piece), tokio::time::Instant::now());
                        }
                        Ok((_, _, Err(PieceFailure::Fatal(error)))) => {
                            workers.abort_all();
                            return Err(error);
                        }
                        Err(error) => {
                            workers.abort_all();
                            return Err(CacheError::Peer(format!("peer worker: {error}")));
                        }
                    }
                }
                changed = answer.changed(), if !seed_done => {
                    if changed.is_err() {
                        seed_done = true;
                    }
                }
                () = tokio::time::sleep(wait(idle, !busy.is_empty())) => {}
            }
        }
    }

    /// Who holds which pieces: the seed's tracker answer to this node's announcement, or when
    /// the seed does not track the blob (it has not started it, or evicted it), the peers'
    /// piece maps.
    async fn known(
        &self,
        job: &Job,
        seed: usize,
        round: u64,
        authority: Option<&BTreeMap<u64, u32>>,
        fetching: (&BTreeSet<u64>, usize),
    ) -> Known {
        let count = job.layout.count();
        let peers = &self.config.peers;
        let (busy, free) = fetching;
        let announce = Announce {
            node: self.me.node.clone(),
            rack: self.me.rack.clone(),
            zone: self.me.zone.clone(),
            have: Bitfield::of(count, job.verified().into_iter().map(|(p, _)| p)).to_hex(),
            want: Some(free),
            fetching: Some(Bitfield::of(count, busy.iter().copied()).to_hex()),
        };
        let url = format!("{}/blobs/sha256/{}/swarm", peers[seed].url, job.hex);
        // A busy seed answers late rather than never: giving up early sends every node to
        // read its peers' maps instead, more work for a swarm already short of it.
        let timeout = self.config.poll_interval.max(ANNOUNCE_TIMEOUT);
        match self
            .http
            .post_json::<_, Offer>(&url, &announce, Some(timeout))
            .await
        {
            Ok(offer) => {
                let mut holders = tracker::holders(&offer, &self.peer_index, seed);
                if let Some(authority) = authority {
                    for holder in &mut holders {
                        holder.pieces.retain(|p, c| authority.get(p) == Some(c));
                    }
                }
                Known {
                    holders,
                    seed_complete: offer.complete,
                    seed_answered: true,
                }
            }
            Err(_) => {
                let (holders, seed_answered) = self.holders(&job.hex, seed, round, authority).await;
                let seed_complete = holders
                    .get(seed)
                    .is_some_and(|h| u64::try_from(h.pieces.len()).unwrap_or(u64::MAX) >= count);
                Known {
                    holders,
                    seed_complete,
                    seed_answered,
                }
            }
        }
    }

    /// The piece maps for `hex` of the peers [`fanout::peers_to_poll`] picks (the seed, the
    /// closest, the rest in turn), indexed as the configured peers: empty for a peer not asked,
    /// not answering or holding nothing; with an authority, only matching pieces.
    async fn holders(
        &self,
        hex: &str,
        seed: usize,
        round: u64,
        authority: Option<&BTreeMap<u64, u32>>,
    ) -> (Vec<Holder>, bool) {
        let timeout = self.config.poll_interval.max(Duration::from_millis(500));
        let peers = &self.config.peers;
        let topologies = self.peer_index.topologies();
        let asked = fanout::peers_to_poll(
            &self.me,
            topologies,
            Some(seed),
            self.config.polled_peers,
            round.wrapping_add(self.seed),
        );
        let maps = futures::future::join_all(asked.iter().map(|i| {
            let url = format!("{}/blobs/sha256/{hex}/pieces", peers[*i].url);
            let http = &self.http;
            async move { http.get_json::<PieceMap>(&url, timeout).await }
        }))
        .await;
        // The seed answered, if only that it does not hold the blob (not a timeout).
        let seed_answered = asked
            .iter()
            .zip(&maps)
            .any(|(i, map)| *i == seed && matches!(map, Ok(_) | Err(FetchError::Status { .. })));
        let mut holders: Vec<Holder> = topologies
            .iter()
            .map(|topology| Holder {
                topology: topology.clone(),
                free_upload: 1 << 30,
                pieces: BTreeMap::new(),
            })
            .collect();
        for (i, map) in asked.into_iter().zip(maps) {
            if let (Some(holder), Ok(map)) = (holders.get_mut(i), map) {
                holder.pieces = map
                    .pieces
                    .into_iter()
                    .filter(|(p, c)| authority.is_none_or(|a| a.get(p) == Some(c)))
                    .collect();
            }
        }
        (holders, seed_answered)
    }

    async fn peer_piece(
        &self,
        job: &Arc<Job>,
        url: &str,
        assignment: fanout::Assignment,
    ) -> Result<(), PieceFailure> {
        let range = job
            .layout
            .range(assignment.piece)
            .map_err(PieceFailure::Piece)?;
        let fetched = self
            .http
            .get_range(
                url,
                Some((range.offset, range.offset + range.len - 1)),
                range.len,
                self.config.idle_timeout,
                Meter {
                    bucket: None,
                    counter: &self.stats.peer_bytes,
                },
            )
            .await;
        match fetched {
            Ok((206, bytes)) => {
                self.store_piece(job, assignment.piece, bytes, Some(assignment.crc))
                    .await
            }
            Ok((status, _)) => Err(PieceFailure::Refused(format!(
                "answered {status} instead of 206 for piece {}",
                assignment.piece
            ))),
            Err(FetchError::Status { status: 503, .. }) => Err(PieceFailure::Busy),
            Err(error) => Err(PieceFailure::Refused(format!(
                "piece {}: {error}",
                assignment.piece
            ))),
        }
    }

    async fn remove_blobs(&self, digests: Vec<String>) {
        if digests.is_empty() {
            return;
        }
        {
            let mut state = self.state();
            for hex in &digests {
                state.blobs.remove(hex);
            }
        }
        {
            let mut trackers = self
                .trackers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for hex in &digests {
                trackers.forget(hex);
            }
        }
        for hex in digests {
            tracing::info!(digest = %hex, "evicting");
            let store = self.store.clone();
            let result = tokio::task::spawn_blocking(move || store.remove_blob(&hex)).await;
            if let Ok(Err(error)) = result {
                tracing::warn!(%error, "eviction failed");
            }
        }
    }

    async fn evict(&self) {
        let plan = {
            let state = self.state();
            eviction::plan(
                &self.config.watermarks,
                DiskUsage {
                    capacity: self.config.capacity,
                    used: state.used(),
                },
                &state.blob_records(),
                &state.pinned(),
            )
        };
        if let Some(problem) = &plan.problem {
            tracing::warn!(%problem, "eviction");
        }
        self.remove_blobs(plan.delete).await;
    }
}

/// What a peer knows of the swarm in one round.
struct Known {
    /// Indexed as the configured peers.
    holders: Vec<Holder>,
    /// The seed holds every piece (super-seeding is over).
    seed_complete: bool,
    /// The seed answered this round (its tracker, or its piece map, if only with a 404): a
    /// seed too busy to answer in time has not lost the blob.
    seed_answered: bool,
}

/// How long a node waits for its seed's tracker to answer an announcement.
const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a peer waits for pieces nobody holds once its seed finished without them.
const ORPHANED_AFTER: Duration = Duration::from_secs(3);

struct OriginRun {
    queue: Mutex<VecDeque<u64>>,
    failures: AtomicU32,
    pause_until: tokio::sync::Mutex<tokio::time::Instant>,
}

/// Why one piece was not stored.
#[derive(Debug)]
enum PieceFailure {
    /// The bytes were refused (short, long, CRC32): fetch the piece again.
    Piece(PieceError),
    /// The holder did not send the piece (an error status, a broken connection).
    Refused(String),
    /// Every upload slot of the holder is taken: ask another holder for a while.
    Busy,
    /// The download cannot go on (the store failed).
    Fatal(CacheError),
}

fn seed_error(peer: &PeerSpec, error: &FetchError) -> CacheError {
    let message = match error {
        FetchError::Transport { message, .. } => format!("unreachable: {message}"),
        FetchError::Status { body, .. } => body.clone(),
        FetchError::Invalid(message) => message.clone(),
    };
    CacheError::Seed {
        seed: peer.name.clone(),
        message,
    }
}
