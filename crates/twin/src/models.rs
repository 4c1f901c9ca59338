//! Models delivered to the twins' pods through a node cache per twin (issue 21, deliverable 4).
//!
//! Every twin node gets a `tessera_node_cache::Cache` (root `<cache_root>/<node>/`, its own
//! loopback listener serving the peer protocol, every other twin's cache as a peer with the
//! rack and zone from the node's labels). A pod bound to a twin that asks for models
//! (`tessera_storage::models::pod_models`) waits in ContainerCreating while a task resolves
//! each model's files through the store's ModelPack manifest, presigns a GET per file with the
//! store's credentials and pulls every file through the node's cache at once; the task reports
//! `Pulling`/`Pulled`/`Failed`/`BackOff` notices the twins' loop records as the pod's events,
//! and the loop reconciles the pod again when it ends. A running pod's blobs are pinned and
//! unpinned when it ends. The models a node holds are remembered in `<root>/<node>/models.json`
//! (kept across restarts) and listed in the node's `status.images`.
//!
//! Knows the caches, the store's manifest and the notices; which models a pod asks for and the
//! names nodes list them under are `tessera-storage`'s, downloads and eviction the cache's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tessera_model_store::Connection;
use tessera_model_store::client::S3Client;
use tessera_node::topology::NodeSpec;
use tessera_node_cache::{Cache, Config, PeerSpec, PullRequest};
use tessera_storage::models::{ModelRef, ModelRequest};
use tokio::sync::mpsc;

/// The zone label nodes carry.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The file a node's cache root keeps the models it holds in.
const HELD_FILE: &str = "models.json";
/// How long a presigned URL is valid.
const PRESIGN_SECS: u64 = 3600;
/// How long a failed pull waits before it is tried again (the kubelet's first image back-off).
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// How the twins' node caches run and where models come from.
#[derive(Clone)]
pub struct ModelConfig {
    /// Each node's cache lives under `<cache_root>/<node>/`.
    pub cache_root: PathBuf,
    /// Each node cache's byte budget.
    pub capacity: u64,
    /// Bytes a second each cache reads from the origin and serves to peers (none: unlimited).
    pub link_rate: Option<u64>,
    /// The model store (none: pods asking for models wait with a warning).
    pub origin: Option<Connection>,
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("cache_root", &self.cache_root)
            .field("capacity", &self.capacity)
            .field("link_rate", &self.link_rate)
            .field("origin", &self.origin)
            .finish()
    }
}

/// A file of a model, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFileEntry {
    pub path: String,
    /// `sha256:<hex>`.
    pub digest: String,
    pub size: u64,
}

/// A model a node holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Held {
    repo: String,
    revision: String,
    files: Vec<ModelFileEntry>,
}

/// Something the twins' loop records or acts on for a pod.
#[derive(Debug)]
pub(crate) struct Notice {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) node: String,
    /// An event to record: (type, reason, message).
    pub(crate) event: Option<(&'static str, &'static str, String)>,
    /// The pull ended (or its back-off did): reconcile the pod again.
    pub(crate) reconcile: bool,
    /// The node's models changed: post its `status.images`.
    pub(crate) images_changed: bool,
}

enum PodState {
    Pulling,
    Ready { node: String, digests: Vec<String> },
    Failed,
}

/// Per (repo, revision).
type ByModel<T> = BTreeMap<(String, String), T>;

/// The twins' caches and the pods' pulls.
pub struct Delivery {
    caches: BTreeMap<String, (Cache, String)>,
    origin: Option<Connection>,
    pods: Mutex<BTreeMap<String, PodState>>,
    held: Mutex<BTreeMap<String, ByModel<Held>>>,
    root: PathBuf,
    notices: mpsc::UnboundedSender<Notice>,
    prepulls: Mutex<BTreeMap<String, ByModel<Prepull>>>,
}

/// Where the twins and their containers find the delivery once it started.
pub type Slot = Arc<std::sync::OnceLock<Arc<Delivery>>>;

/// A pre-pull's state, as `/cache/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Prepull {
    pub model: String,
    pub revision: String,
    /// `Pulling`, `Pulled` or `Failed`.
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// What a pod's pull decided.
pub(crate) enum Readiness {
    /// No models, or all of them pulled: start the containers.
    Ready,
    /// Pulling, or backing off: wait.
    Waiting,
    /// A pull started now: the pod shows ContainerCreating.
    Started,
}

/// The commit a model revision's Hugging Face snapshot is named by: the revision itself when
/// it is a commit hash, else the first 40 hex digits of the sha256 over the repo, revision and
/// file digests (stable for the same files, so every node names it alike).
pub fn snapshot_commit(model: &ModelRef, files: &[ModelFileEntry]) -> String {
    if tessera_cache::is_lower_hex(&model.revision, 40) {
        return model.revision.clone();
    }
    let mut text = format!("{}@{}", model.repo, model.revision);
    for file in files {
        text.push_str(&format!("\n{} {}", file.path, file.digest));
    }
    tessera_cache::sha256_hex(text.as_bytes())[..40].to_owned()
}

/// `bytes` as kubectl-like text: `300.0 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The `status.images` entries of the models in `held`: the name
/// [`ModelRef::node_image_name`] and the model's bytes, largest first as the kubelet sorts.
fn images_of(held: &BTreeMap<(String, String), Held>) -> Vec<Value> {
    let mut images: Vec<(u64, String)> = held
        .values()
        .map(|h| {
            let name = ModelRef {
                repo: h.repo.clone(),
                revision: h.revision.clone(),
            }
            .node_image_name();
            (h.files.iter().map(|f| f.size).sum(), name)
        })
        .collect();
    images.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    images
        .into_iter()
        .map(|(size, name)| serde_json::json!({"names": [name], "sizeBytes": size}))
        .collect()
}

impl Delivery {
    /// Opens a cache per node and serves each on a loopback listener; the caches know each
    /// other as peers.
    pub(crate) async fn start(
        config: &ModelConfig,
        nodes: &[Arc<NodeSpec>],
    ) -> Result<(Arc<Delivery>, mpsc::UnboundedReceiver<Notice>), String> {
        let mut listeners = Vec::new();
        for spec in nodes {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|e| format!("node cache of {}: listen: {e}", spec.name))?;
            let address = listener
                .local_addr()
                .map_err(|e| format!("node cache of {}: {e}", spec.name))?;
            listeners.push((spec.clone(), listener, format!("http://{address}")));
        }
        let peer = |spec: &NodeSpec, url: &str| PeerSpec {
            name: spec.name.clone(),
            url: url.to_owned(),
            rack: spec.labels.get(tessera_node::hardware::RACK_LABEL).cloned(),
            zone: spec.labels.get(ZONE_LABEL).cloned(),
        };
        let peers: Vec<PeerSpec> = listeners
            .iter()
            .map(|(spec, _, url)| peer(spec, url))
            .collect();
        let mut caches = BTreeMap::new();
        let mut held = BTreeMap::new();
        for (spec, listener, url) in listeners {
            let root = config.cache_root.join(&spec.name);
            let mut cache_config = Config::new(&root, &spec.name);
            let me = peer(&spec, &url);
            cache_config.rack = me.rack;
            cache_config.zone = me.zone;
            cache_config.peers = peers
                .iter()
                .filter(|p| p.name != spec.name)
                .cloned()
                .collect();
            cache_config.capacity = config.capacity;
            cache_config.origin_rate = config.link_rate;
            cache_config.upload_rate = config.link_rate;
            let cache = Cache::open(cache_config)
                .map_err(|e| format!("node cache of {}: {e}", spec.name))?;
            let served = cache.clone();
            let name = spec.name.clone();
            tokio::spawn(async move {
                if let Err(error) = tessera_node_cache::server::serve(served, listener).await {
                    tracing::warn!(node = %name, %error, "node cache stopped serving");
                }
            });
            held.insert(spec.name.clone(), load_held(&root, &cache));
            caches.insert(spec.name.clone(), (cache, url));
        }
        let (notices, receiver) = mpsc::unbounded_channel();
        tracing::info!(nodes = caches.len(), "node caches serving");
        Ok((
            Arc::new(Delivery {
                caches,
                origin: config.origin.clone(),
                pods: Mutex::default(),
                held: Mutex::new(held),
                root: config.cache_root.clone(),
                notices,
                prepulls: Mutex::default(),
            }),
            receiver,
        ))
    }

    /// The cache of `node` and the URL it serves on.
    pub fn cache(&self, node: &str) -> Option<&(Cache, String)> {
        self.caches.get(node)
    }

    /// The `status.images` of `node`: the models it holds.
    pub(crate) fn images(&self, node: &str) -> Vec<Value> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(node).map(images_of).unwrap_or_default()
    }

    /// Whether the pod `uid` (on `node`, asking for `requests`) may start its containers;
    /// starts its pull when none has.
    pub(crate) fn readiness(
        self: &Arc<Self>,
        key: &(String, String),
        uid: &str,
        node: &str,
        requests: Vec<ModelRequest>,
    ) -> Readiness {
        if requests.is_empty() {
            return Readiness::Ready;
        }
        let mut pods = self.pods.lock().unwrap_or_else(|p| p.into_inner());
        match pods.get(uid) {
            Some(PodState::Ready { .. }) => return Readiness::Ready,
            Some(PodState::Pulling | PodState::Failed) => return Readiness::Waiting,
            None => {}
        }
        pods.insert(uid.to_owned(), PodState::Pulling);
        drop(pods);
        let delivery = self.clone();
        let (key, uid, node) = (key.clone(), uid.to_owned(), node.to_owned());
        tokio::spawn(async move { delivery.pull_pod(key, uid, node, requests).await });
        Readiness::Started
    }

    /// The pod `uid` ended or went away: its blobs are unpinned.
    pub(crate) fn release(&self, uid: &str) {
        let state = self
            .pods
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uid);
        if let Some(PodState::Ready { node, digests }) = state
            && let Some((cache, _)) = self.caches.get(&node)
        {
            for digest in digests {
                let _ = cache.unpin(&digest);
            }
        }
    }

    fn notify(&self, key: &(String, String), uid: &str, node: &str, notice: NoticeKind) {
        let (event, reconcile, images_changed) = match notice {
            NoticeKind::Event(kind, reason, message) => {
                (Some((kind, reason, message)), false, false)
            }
            NoticeKind::Done { images_changed } => (None, true, images_changed),
        };
        let _ = self.notices.send(Notice {
            namespace: key.0.clone(),
            name: key.1.clone(),
            uid: uid.to_owned(),
            node: node.to_owned(),
            event,
            reconcile,
            images_changed,
        });
    }

    /// The files of `model` as the store lists them (S3 ListObjectsV2 and HeadObject, so an
    /// external store serves as well as the embedded one), each with its recorded sha256.
    pub async fn resolve(&self, model: &ModelRef) -> Result<Vec<ModelFileEntry>, String> {
        let origin = self
            .origin
            .as_ref()
            .ok_or("no model store is configured (tessera up --no-model-store)")?;
        let client = S3Client::new(origin.clone()).map_err(|e| e.to_string())?;
        let reference = tessera_cache::modelpack::ModelRef::new(&model.repo, &model.revision)
            .map_err(|e| e.to_string())?;
        let listed = client
            .model_files(&reference)
            .await
            .map_err(|e| format!("cannot list model {model} in the store: {e}"))?;
        if listed.is_empty() {
            return Err(format!(
                "model {model} not found in the store (no objects under s3://{}/{})",
                origin.bucket,
                reference.prefix()
            ));
        }
        listed
            .into_iter()
            .map(|file| match file.sha256 {
                Some(hex) => Ok(ModelFileEntry {
                    path: file.path,
                    digest: format!("sha256:{hex}"),
                    size: file.size,
                }),
                None => Err(format!(
                    "file {} of model {model} has no recorded sha256 (x-amz-meta-sha256): upload it with `tessera model push`",
                    file.path
                )),
            })
            .collect()
    }

    /// Presigned GET URLs of `model`'s files.
    pub fn presign(&self, model: &ModelRef, path: &str) -> Result<String, String> {
        let origin = self.origin.as_ref().ok_or("no model store is configured")?;
        let client = S3Client::new(origin.clone()).map_err(|e| e.to_string())?;
        let key = tessera_cache::modelpack::ModelRef::new(&model.repo, &model.revision)
            .and_then(|m| tessera_cache::modelpack::object_key(&m, path))
            .map_err(|e| e.to_string())?;
        client
            .presign_get(&key, SystemTime::now(), PRESIGN_SECS)
            .map_err(|e| e.to_string())
    }

    async fn pull_pod(
        self: Arc<Self>,
        key: (String, String),
        uid: String,
        node: String,
        requests: Vec<ModelRequest>,
    ) {
        let mut digests = Vec::new();
        let mut images_changed = false;
        let mut failed = false;
        let models: BTreeSet<ModelRef> = requests.into_iter().map(|r| r.model).collect();
        for model in models {
            match self.pull_model(&key, &uid, &node, &model).await {
                Ok((pinned, new)) => {
                    digests.extend(pinned);
                    images_changed |= new;
                }
                Err(message) => {
                    self.notify(
                        &key,
                        &uid,
                        &node,
                        NoticeKind::Event(
                            "Warning",
                            "Failed",
                            format!("Failed to pull model {model}: {message}"),
                        ),
                    );
                    self.notify(
                        &key,
                        &uid,
                        &node,
                        NoticeKind::Event(
                            "Warning",
                            "BackOff",
                            format!("Back-off pulling model {model}"),
                        ),
                    );
                    failed = true;
                    break;
                }
            }
        }
        let unpin = |digests: &[String]| {
            if let Some((cache, _)) = self.caches.get(&node) {
                for digest in digests {
                    let _ = cache.unpin(digest);
                }
            }
        };
        if failed {
            unpin(&digests);
            {
                let mut pods = self.pods.lock().unwrap_or_else(|p| p.into_inner());
                // A pod that went away meanwhile (released) is not waited for.
                if !matches!(pods.get(&uid), Some(PodState::Pulling)) {
                    return;
                }
                pods.insert(uid.clone(), PodState::Failed);
            }
            tokio::time::sleep(RETRY_AFTER).await;
            let mut pods = self.pods.lock().unwrap_or_else(|p| p.into_inner());
            if !matches!(pods.get(&uid), Some(PodState::Failed)) {
                return;
            }
            pods.remove(&uid);
            drop(pods);
        } else {
            let mut pods = self.pods.lock().unwrap_or_else(|p| p.into_inner());
            if matches!(pods.get(&uid), Some(PodState::Pulling)) {
                pods.insert(
                    uid.clone(),
                    PodState::Ready {
                        node: node.clone(),
                        digests,
                    },
                );
            } else {
                // The pod ended or went away while its models were pulled: nothing to pin.
                drop(pods);
                unpin(&digests);
            }
        }
        // A pull may have evicted the blobs of models the node held before.
        images_changed |= self.forget_evicted(&node);
        self.notify(&key, &uid, &node, NoticeKind::Done { images_changed });
    }

    /// Pulls one model's files through `node`'s cache; answers the pinned digests and whether
    /// the node holds a model it did not before.
    async fn pull_model(
        &self,
        key: &(String, String),
        uid: &str,
        node: &str,
        model: &ModelRef,
    ) -> Result<(Vec<String>, bool), String> {
        let (cache, _) = self
            .caches
            .get(node)
            .ok_or_else(|| format!("node {node} has no cache"))?;
        let files = self.resolve(model).await?;
        let total: u64 = files.iter().map(|f| f.size).sum();
        self.notify(
            key,
            uid,
            node,
            NoticeKind::Event(
                "Normal",
                "Pulling",
                format!(
                    "Pulling model {model} ({} files, {})",
                    files.len(),
                    human_bytes(total)
                ),
            ),
        );
        let started = Instant::now();
        let commit = snapshot_commit(model, &files);
        let origin_before = self.origin_bytes();
        let mut pulls = tokio::task::JoinSet::new();
        for file in &files {
            let request = PullRequest {
                digest: file.digest.clone(),
                size: file.size,
                url: self.presign(model, &file.path)?,
                model: Some(model.repo.clone()),
                revision: Some(commit.clone()),
                file: Some(file.path.clone()),
                as_seed: false,
            };
            let cache = cache.clone();
            pulls.spawn(async move { cache.pull(request).await });
        }
        let mut cached = 0u64;
        let mut failure = None;
        while let Some(result) = pulls.join_next().await {
            match result {
                Ok(Ok(response)) => {
                    if response.cached {
                        cached += response.size;
                    }
                }
                Ok(Err(error)) => {
                    failure.get_or_insert(error.to_string());
                }
                Err(error) => {
                    failure.get_or_insert(error.to_string());
                }
            }
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        let elapsed = started.elapsed();
        let fetched = total.saturating_sub(cached);
        // The cluster's seed for a blob may be another node: what the origin served during
        // the pull, any cache reading it, counts as this pull's (pulls of other models at the
        // same time blur it).
        let origin = self
            .origin_bytes()
            .saturating_sub(origin_before)
            .min(fetched);
        let peers = fetched - origin;
        let mut pinned = Vec::new();
        for file in &files {
            if cache.pin(&file.digest).is_ok() {
                pinned.push(file.digest.clone());
            }
        }
        self.notify(
            key,
            uid,
            node,
            NoticeKind::Event(
                "Normal",
                "Pulled",
                format!(
                    "Successfully pulled model {model} in {:.3}s ({}: {} from the origin, {} from peers, {} already cached)",
                    elapsed.as_secs_f64(),
                    human_bytes(total),
                    human_bytes(origin),
                    human_bytes(peers),
                    human_bytes(cached)
                ),
            ),
        );
        link_hf_view(cache, model, &commit, &files);
        let new = self.remember(node, model, files);
        Ok((pinned, new))
    }

    /// The bytes every cache read from the origin so far.
    fn origin_bytes(&self) -> u64 {
        self.caches
            .values()
            .map(|(cache, _)| {
                cache
                    .stats()
                    .origin_bytes
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .sum()
    }

    /// Records that `node` holds `model`; whether it is new.
    fn remember(&self, node: &str, model: &ModelRef, files: Vec<ModelFileEntry>) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let models = held.entry(node.to_owned()).or_default();
        let key = (model.repo.clone(), model.revision.clone());
        let new = models.get(&key).is_none_or(|h| h.files != files);
        models.insert(
            key,
            Held {
                repo: model.repo.clone(),
                revision: model.revision.clone(),
                files,
            },
        );
        if new {
            self.save_held(node, models);
        }
        new
    }

    /// Whether `node` holds the model `key` (repo, revision) whole.
    fn holds(&self, node: &str, key: &(String, String)) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .is_some_and(|models| models.contains_key(key))
    }

    /// Forgets the models of `node` some of whose blobs its cache evicted (to make room for
    /// another pull); whether any was forgotten, so `status.images` is posted again.
    fn forget_evicted(&self, node: &str) -> bool {
        let Some((cache, _)) = self.caches.get(node) else {
            return false;
        };
        let present = present_digests(cache);
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let Some(models) = held.get_mut(node) else {
            return false;
        };
        let before = models.len();
        models.retain(|_, h| complete(h, &present));
        let forgot = models.len() != before;
        if forgot {
            self.save_held(node, models);
        }
        forgot
    }

    /// Writes the models `node` holds to its `models.json`; a failure is logged.
    fn save_held(&self, node: &str, models: &ByModel<Held>) {
        let list: Vec<&Held> = models.values().collect();
        let path = self.root.join(node).join(HELD_FILE);
        match serde_json::to_vec_pretty(&list) {
            Ok(text) => {
                if let Err(error) = std::fs::write(&path, text) {
                    tracing::warn!(path = %path.display(), %error, "cannot record the node's models");
                }
            }
            Err(error) => tracing::warn!(%error, "cannot record the node's models"),
        }
    }
}

impl Delivery {
    /// `GET /cache/status` of `node`: the cache's status, the models it holds and its
    /// pre-pulls.
    pub fn status_json(&self, node: &str) -> Option<Value> {
        let (cache, _) = self.caches.get(node)?;
        let mut status = serde_json::to_value(cache.status()).ok()?;
        let models: Vec<Value> = {
            let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            held.get(node)
                .map(|models| {
                    models
                        .values()
                        .map(|h| {
                            serde_json::json!({
                                "model": h.repo, "revision": h.revision,
                                "size": h.files.iter().map(|f| f.size).sum::<u64>(),
                                "files": h.files,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        status["models"] = Value::from(models);
        let prepulls: Vec<Prepull> = self
            .prepulls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(node)
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default();
        status["prepulls"] = serde_json::to_value(prepulls).unwrap_or_default();
        Some(status)
    }

    /// Starts pulling `model` onto `node` ahead of its pods (nothing pinned); answers the
    /// model's files at once.
    pub async fn prepull(
        self: &Arc<Self>,
        node: &str,
        model: &ModelRef,
    ) -> Result<Vec<ModelFileEntry>, String> {
        let (cache, _) = self
            .caches
            .get(node)
            .ok_or_else(|| format!("node {node} has no cache"))?;
        let files = self.resolve(model).await?;
        let commit = snapshot_commit(model, &files);
        let mut requests = Vec::new();
        for file in &files {
            requests.push(PullRequest {
                digest: file.digest.clone(),
                size: file.size,
                url: self.presign(model, &file.path)?,
                model: Some(model.repo.clone()),
                revision: Some(commit.clone()),
                file: Some(file.path.clone()),
                as_seed: false,
            });
        }
        let key = (model.repo.clone(), model.revision.clone());
        let set_phase = {
            let delivery = self.clone();
            let (node, key) = (node.to_owned(), key.clone());
            move |phase: &str, message: String| {
                delivery
                    .prepulls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(node.clone())
                    .or_default()
                    .insert(
                        key.clone(),
                        Prepull {
                            model: key.0.clone(),
                            revision: key.1.clone(),
                            phase: phase.to_owned(),
                            message,
                        },
                    );
            }
        };
        set_phase("Pulling", String::new());
        let delivery = self.clone();
        let cache = cache.clone();
        let (node, model, listed) = (node.to_owned(), model.clone(), files.clone());
        tokio::spawn(async move {
            let mut pulls = tokio::task::JoinSet::new();
            for request in requests {
                let cache = cache.clone();
                pulls.spawn(async move { cache.pull(request).await });
            }
            let mut failure = None;
            while let Some(result) = pulls.join_next().await {
                match result {
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => {
                        failure.get_or_insert(error.to_string());
                    }
                    Err(error) => {
                        failure.get_or_insert(error.to_string());
                    }
                }
            }
            match failure {
                Some(message) => set_phase("Failed", message),
                None => {
                    link_hf_view(&cache, &model, &commit, &listed);
                    let new = delivery.remember(&node, &model, listed);
                    let evicted = delivery.forget_evicted(&node);
                    if delivery.holds(&node, &key) {
                        set_phase("Pulled", String::new());
                    } else {
                        // Unpinned, the model's own files went at the next eviction: it does
                        // not fit under the cache's low watermark.
                        let capacity = cache.config().capacity;
                        set_phase(
                            "Failed",
                            format!(
                                "model {model} does not fit in the node's cache: its files were evicted as soon as they were pulled (capacity {}, evictions bring use down to {}%)",
                                human_bytes(capacity),
                                cache.config().watermarks.low_percent()
                            ),
                        );
                    }
                    let _ = delivery.notices.send(Notice {
                        namespace: String::new(),
                        name: String::new(),
                        uid: String::new(),
                        node,
                        event: None,
                        reconcile: false,
                        images_changed: new || evicted,
                    });
                }
            }
        });
        Ok(files)
    }

    /// `GET /cache/<path>` of `node` (the kubelet proxy's paths of the node's cache):
    /// `status`, and `pull?model=org/name&revision=rev`.
    pub async fn proxy_get(
        self: &Arc<Self>,
        node: &str,
        path: &str,
        query: Option<&str>,
    ) -> (u16, Value) {
        // A Status as well as the cache's `error`, so that clients reading the proxy's answer
        // as the API's find the message.
        let error = |code: u16, message: String| {
            (
                code,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": message, "code": code, "error": message}),
            )
        };
        match path {
            "status" => match self.status_json(node) {
                Some(status) => (200, status),
                None => error(404, format!("node {node} has no cache")),
            },
            "pull" => {
                let params: BTreeMap<String, String> = query
                    .unwrap_or_default()
                    .split('&')
                    .filter_map(|pair| pair.split_once('='))
                    .map(|(k, v)| (k.to_owned(), percent_decode(v)))
                    .collect();
                let Some(repo) = params.get("model") else {
                    return error(400, "query parameter model is required".into());
                };
                let revision = params
                    .get("revision")
                    .map_or(tessera_storage::models::DEFAULT_REVISION, String::as_str);
                let model = match ModelRef::new("model", repo, revision) {
                    Ok(model) => model,
                    Err(e) => return error(400, e.to_string()),
                };
                match self.prepull(node, &model).await {
                    Ok(files) => (
                        202,
                        serde_json::json!({"model": model.repo, "revision": model.revision,
                            "files": files}),
                    ),
                    Err(message) => error(404, message),
                }
            }
            _ => error(404, format!("no cache path /cache/{path}")),
        }
    }
}

/// `%XX` escapes and `+` decoded (a query parameter's value).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(text.get(i + 1..i + 3).unwrap_or(""), 16) {
                    Ok(byte) => {
                        out.push(byte);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

enum NoticeKind {
    Event(&'static str, &'static str, String),
    Done { images_changed: bool },
}

/// Writes `model`'s Hugging Face view in `cache` (`hf/models--org--name/`): every file linked
/// under `snapshots/<commit>/`, and `refs/<revision>` naming the commit, so a container with
/// `HF_HUB_OFFLINE=1` finds the revision. Failures are logged.
fn link_hf_view(cache: &Cache, model: &ModelRef, commit: &str, files: &[ModelFileEntry]) {
    let repo = match tessera_cache::hf_layout::Repo::model(&model.repo) {
        Ok(repo) => repo,
        Err(error) => {
            tracing::warn!(%model, %error, "no Hugging Face view");
            return;
        }
    };
    for file in files {
        let hex = file.digest.trim_start_matches("sha256:");
        if let Err(error) = cache.store().link_hf(&repo, commit, &file.path, hex) {
            tracing::warn!(%model, file = %file.path, %error, "cannot link into the Hugging Face view");
        }
    }
    match repo.reference(&model.revision) {
        Ok(reference) => {
            let path = cache.store().root().join("hf").join(reference);
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&path, commit));
            if let Err(error) = written {
                tracing::warn!(path = %path.display(), %error, "cannot write the revision's ref");
            }
        }
        Err(error) => tracing::warn!(%model, %error, "no ref for the revision"),
    }
}

/// The models recorded under `root` whose blobs are all still in `cache`.
fn load_held(root: &std::path::Path, cache: &Cache) -> BTreeMap<(String, String), Held> {
    let Ok(text) = std::fs::read(root.join(HELD_FILE)) else {
        return BTreeMap::new();
    };
    let list: Vec<Held> = match serde_json::from_slice(&text) {
        Ok(list) => list,
        Err(error) => {
            tracing::warn!(root = %root.display(), %error, "ignoring an unreadable models.json");
            return BTreeMap::new();
        }
    };
    let present = present_digests(cache);
    list.into_iter()
        .filter(|h| complete(h, &present))
        .map(|h| ((h.repo.clone(), h.revision.clone()), h))
        .collect()
}

/// The digests (lower-case hex) of the complete blobs in `cache`.
fn present_digests(cache: &Cache) -> BTreeSet<String> {
    cache
        .status()
        .blobs
        .into_iter()
        .map(|b| b.digest.trim_start_matches("sha256:").to_owned())
        .collect()
}

/// Whether every file of `held` is among the `present` blobs.
fn complete(held: &Held, present: &BTreeSet<String>) -> bool {
    held.files
        .iter()
        .all(|f| present.contains(f.digest.trim_start_matches("sha256:")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_commits_are_stable_hashes_or_the_commit() {
        let files = vec![ModelFileEntry {
            path: "config.json".into(),
            digest: "sha256:aa".into(),
            size: 2,
        }];
        let main = ModelRef {
            repo: "org/m".into(),
            revision: "main".into(),
        };
        let commit = snapshot_commit(&main, &files);
        assert!(tessera_cache::is_lower_hex(&commit, 40), "{commit}");
        assert_eq!(commit, snapshot_commit(&main, &files));
        let other = ModelFileEntry {
            digest: "sha256:bb".into(),
            ..files[0].clone()
        };
        assert_ne!(commit, snapshot_commit(&main, &[other]));
        let pinned = ModelRef {
            repo: "org/m".into(),
            revision: "0123456789abcdef0123456789abcdef01234567".into(),
        };
        assert_eq!(snapshot_commit(&pinned, &files), pinned.revision);
    }

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(percent_decode("org%2Fname"), "org/name");
        assert_eq!(percent_decode("a+b"), "a b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz1"), "%zz1");
    }

    #[test]
    fn human_bytes_picks_a_unit() {
        for (bytes, text) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (300 << 20, "300.0 MiB"),
            (3 << 30, "3.0 GiB"),
        ] {
            assert_eq!(human_bytes(bytes), text);
        }
    }

    #[test]
    fn images_list_models_largest_first() {
        let mut held = BTreeMap::new();
        for (repo, size) in [("org/small", 10u64), ("org/big", 99)] {
            held.insert(
                (repo.to_owned(), "main".to_owned()),
                Held {
                    repo: repo.to_owned(),
                    revision: "main".to_owned(),
                    files: vec![ModelFileEntry {
                        path: "w".into(),
                        digest: "sha256:00".into(),
                        size,
                    }],
                },
            );
        }
        let images = images_of(&held);
        assert_eq!(images[0]["names"][0], "model.tessera.dev/org/big:main");
        assert_eq!(images[0]["sizeBytes"], 99);
        assert_eq!(images[1]["names"][0], "model.tessera.dev/org/small:main");
    }
}
