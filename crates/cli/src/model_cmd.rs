//! `tessera model push|ls` and the model store's part of `tessera up`: starting the embedded
//! store (or taking an external endpoint), and publishing where it is as Secret
//! `kube-system/tessera-model-store` and `<data-dir>/model-store.env`.
//!
//! The store itself is `tessera-model-store`; keys, layouts and signatures are
//! `tessera-cache`'s. This module finds the store, walks a directory, hashes files and prints.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use clap::Subcommand;
use serde_json::json;
use sha2::{Digest, Sha256};
use tessera_api::Resource;
use tessera_api::write::{Part, WriteOptions};
use tessera_apiserver::Objects;
use tessera_cache::modelpack::{self, ModelRef};
use tessera_model_store::client::S3Client;
use tessera_model_store::connection::{self, Connection};
use tessera_model_store::{ModelStore, credentials};

use crate::client::ClusterArgs;

/// `tessera model …`.
#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Upload a local Hugging Face repository directory (what `huggingface-cli download
    /// --local-dir` leaves) to the model store as `<org>/<name>/<revision>/<path>`, skipping
    /// files the store already holds with the same sha256.
    Push(PushArgs),
    /// List the store's models and revisions, or one model's files with size and sha256; with
    /// --node, what a node's cache holds.
    Ls(LsArgs),
    /// Pre-pull a model onto nodes' caches ahead of a rollout, through the API server's
    /// `nodes/{name}/proxy` to each twin's cache.
    Pull(PullArgs),
    /// Write a synthetic Hugging Face repository (config.json, tokenizer.json, safetensors
    /// shards with valid headers) of about the given size, for labs and tests.
    Generate(GenerateArgs),
}

#[derive(clap::Args, Debug)]
pub struct PullArgs {
    /// The model, `org/name[@revision]`.
    pub model: String,
    /// A node to pull onto (repeatable).
    #[arg(long = "node", required_unless_present = "selector")]
    pub nodes: Vec<String>,
    /// The nodes to pull onto, by label selector.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// The directory to write (created when missing).
    pub dir: PathBuf,
    /// The model's id, `org/name` (named in config.json, and seeding the bytes).
    #[arg(long)]
    pub model: String,
    /// About how many bytes of weights (`300Mi`, `1G`, or bytes).
    #[arg(long, default_value = "300Mi", value_parser = crate::agent_cache::bytes)]
    pub size: u64,
    /// The largest shard's weights.
    #[arg(long, default_value = "128Mi", value_parser = crate::agent_cache::bytes)]
    pub shard_size: u64,
}

/// Where the store is: the cluster's Secret, else the data directory's env file, each field
/// overridable by a flag.
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The S3 endpoint (default: Secret kube-system/tessera-model-store of the cluster, else
    /// `<data-dir>/model-store.env`).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The access key id (default: the Secret's, or `$AWS_ACCESS_KEY_ID` with --endpoint).
    #[arg(long)]
    pub access_key_id: Option<String>,
    /// The secret access key (default: the Secret's, or `$AWS_SECRET_ACCESS_KEY` with
    /// --endpoint).
    #[arg(long)]
    pub secret_access_key: Option<String>,
    /// The region requests are signed for.
    #[arg(long)]
    pub region: Option<String>,
    /// The bucket holding the models.
    #[arg(long)]
    pub bucket: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct PushArgs {
    /// The repository directory.
    pub dir: PathBuf,
    /// The model's id, `org/name`.
    #[arg(long)]
    pub model: String,
    /// The revision (a branch, tag or commit).
    #[arg(long, default_value = "main")]
    pub revision: String,
    /// Files above this many bytes go up as multipart uploads of parts this size.
    #[arg(long, default_value_t = 64 << 20, hide = true)]
    pub part_size: u64,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// A model (`org/name`): list its files; without one, list models and revisions.
    pub model: Option<String>,
    /// List what this node's cache holds (models, then blobs) instead of the store.
    #[arg(long, conflicts_with = "model")]
    pub node: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub async fn run(command: &ModelCommand) -> anyhow::Result<()> {
    match command {
        ModelCommand::Push(args) => push(args).await,
        ModelCommand::Ls(args) => match &args.node {
            Some(node) => ls_node(&args.store.cluster, node).await,
            None => ls(args).await,
        },
        ModelCommand::Pull(args) => pull(args).await,
        ModelCommand::Generate(args) => generate(args),
    }
}

fn secrets() -> anyhow::Result<Resource> {
    Resource::find("", "v1", "secrets").ok_or_else(|| anyhow::anyhow!("secrets are not served"))
}

/// The Secret's decoded data.
async fn from_secret(cluster: &ClusterArgs) -> anyhow::Result<Connection> {
    let client = crate::client::connect(cluster).await?;
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client, connection::SECRET_NAMESPACE);
    let secret = secrets
        .get(connection::SECRET_NAME)
        .await
        .with_context(|| {
            format!(
                "read Secret {}/{}",
                connection::SECRET_NAMESPACE,
                connection::SECRET_NAME
            )
        })?;
    let data: BTreeMap<String, String> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
        .collect();
    Ok(Connection::from_map(
        &format!(
            "Secret {}/{}",
            connection::SECRET_NAMESPACE,
            connection::SECRET_NAME
        ),
        &data,
    )?)
}

fn from_env_file(data_dir: &Path) -> anyhow::Result<Connection> {
    let path = data_dir.join(connection::ENV_FILE);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    Ok(Connection::parse_env_file(
        &path.display().to_string(),
        &text,
    )?)
}

/// The store `args` name: flags over the cluster's Secret, else over the env file.
async fn connection(args: &StoreArgs) -> anyhow::Result<Connection> {
    let base = match &args.endpoint {
        Some(endpoint) => {
            let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
            let access_key_id = args
                .access_key_id
                .clone()
                .or_else(|| env(connection::ACCESS_KEY_KEY))
                .context("--endpoint needs --access-key-id (or $AWS_ACCESS_KEY_ID)")?;
            let secret_access_key = args
                .secret_access_key
                .clone()
                .or_else(|| env(connection::SECRET_KEY_KEY))
                .context("--endpoint needs --secret-access-key (or $AWS_SECRET_ACCESS_KEY)")?;
            Connection {
                endpoint: connection::check_endpoint(endpoint)?,
                region: connection::DEFAULT_REGION.to_owned(),
                access_key_id,
                secret_access_key,
                bucket: modelpack::BUCKET.to_owned(),
            }
        }
        None => match from_secret(&args.cluster).await {
            Ok(found) => found,
            Err(secret_error) => from_env_file(&args.cluster.data.data_dir).map_err(|file_error| {
                anyhow::anyhow!(
                    "no model store found: {secret_error:#}; and {file_error:#} (start one with \
                     `tessera up`, or pass --endpoint)"
                )
            })?,
        },
    };
    Ok(Connection {
        access_key_id: args.access_key_id.clone().unwrap_or(base.access_key_id),
        secret_access_key: args
            .secret_access_key
            .clone()
            .unwrap_or(base.secret_access_key),
        region: args.region.clone().unwrap_or(base.region),
        bucket: args.bucket.clone().unwrap_or(base.bucket),
        endpoint: base.endpoint,
    })
}

/// Every regular file under `dir` (symlinks followed), as (`/`-separated relative path,
/// absolute path), in path order; `.git/` and `.cache/` (`huggingface-cli`'s bookkeeping)
/// are skipped.
fn repository_files(dir: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries =
            std::fs::read_dir(&current).with_context(|| format!("read {}", current.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("read {}", current.display()))?;
            let path = entry.path();
            let metadata =
                std::fs::metadata(&path).with_context(|| format!("stat {}", path.display()))?;
            let relative = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            if metadata.is_dir() {
                if relative != ".git" && relative != ".cache" {
                    pending.push(path);
                }
            } else if metadata.is_file() {
                files.push((relative, path));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The sha256 (hex) and size of a file.
fn hash_file(path: &Path) -> anyhow::Result<(String, u64)> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let read = file
            .read(&mut buffer)
            .with_context(|| format!("read {}", path.display()))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        size += read as u64;
    }
    Ok((tessera_cache::hex(&hasher.finalize()), size))
}

async fn push(args: &PushArgs) -> anyhow::Result<()> {
    let model = ModelRef::new(&args.model, &args.revision)?;
    if !args.dir.is_dir() {
        anyhow::bail!("{} is not a directory", args.dir.display());
    }
    let files = repository_files(&args.dir)?;
    if files.is_empty() {
        anyhow::bail!("{} holds no files to push", args.dir.display());
    }
    // Every key is checked before anything is sent.
    let mut keyed = Vec::new();
    for (relative, path) in files {
        let key = modelpack::object_key(&model, &relative)
            .with_context(|| format!("{}", path.display()))?;
        keyed.push((relative, key, path));
    }
    let client = S3Client::new(connection(&args.store).await?)?;
    let (mut uploaded, mut unchanged, mut bytes) = (0usize, 0usize, 0u64);
    for (relative, key, path) in &keyed {
        let hashed = path.clone();
        let (sha256, size) = tokio::task::spawn_blocking(move || hash_file(&hashed))
            .await
            .context("hash a file")??;
        let held = client
            .head(key)
            .await
            .with_context(|| format!("look up {key}"))?;
        if held.is_some_and(|h| h.sha256.as_deref() == Some(sha256.as_str()) && h.size == size) {
            println!("unchanged  {relative}");
            unchanged += 1;
            continue;
        }
        client
            .put_file(key, path, &sha256, args.part_size)
            .await
            .with_context(|| format!("upload {}", path.display()))?;
        println!("uploaded   {relative}  {size} bytes  sha256:{sha256}");
        uploaded += 1;
        bytes += size;
    }
    println!(
        "Pushed {}:{} to {}/{}/{}: {} files, {uploaded} uploaded ({bytes} bytes), {unchanged} unchanged.",
        model.id(),
        model.revision,
        client.connection().endpoint,
        client.connection().bucket,
        model.prefix(),
        keyed.len()
    );
    Ok(())
}

async fn ls(args: &LsArgs) -> anyhow::Result<()> {
    let client = S3Client::new(connection(&args.store).await?)?;
    let prefix = match &args.model {
        Some(id) => {
            ModelRef::new(id, "main")?;
            format!("{id}/")
        }
        None => String::new(),
    };
    let listed = client.list(&prefix).await?;
    let mut models: BTreeMap<ModelRef, Vec<(String, u64, String)>> = BTreeMap::new();
    for object in listed {
        let Some((model, path)) = modelpack::split_object_key(&object.key) else {
            continue;
        };
        models
            .entry(model)
            .or_default()
            .push((path, object.size, object.key));
    }
    let text = match &args.model {
        None => {
            let rows: Vec<Vec<String>> = models
                .iter()
                .map(|(model, files)| {
                    vec![
                        model.id(),
                        model.revision.clone(),
                        files.len().to_string(),
                        files.iter().map(|f| f.1).sum::<u64>().to_string(),
                    ]
                })
                .collect();
            crate::output::table(&["MODEL", "REVISION", "FILES", "BYTES"], &rows)
        }
        Some(id) => {
            if models.is_empty() {
                anyhow::bail!("no model {id} in bucket {}", client.connection().bucket);
            }
            let mut rows = Vec::new();
            for (model, files) in &models {
                for (path, size, key) in files {
                    let sha256 = client
                        .head(key)
                        .await?
                        .and_then(|h| h.sha256)
                        .unwrap_or_else(|| "<unknown>".to_owned());
                    rows.push(vec![
                        model.revision.clone(),
                        path.clone(),
                        size.to_string(),
                        sha256,
                    ]);
                }
            }
            crate::output::table(&["REVISION", "PATH", "BYTES", "SHA256"], &rows)
        }
    };
    crate::output::emit(&text)
}

/// `GET /api/v1/nodes/<node>/proxy/cache/<path>` as JSON.
async fn cache_get(
    client: &kube::Client,
    node: &str,
    path: &str,
) -> anyhow::Result<serde_json::Value> {
    let uri = format!("/api/v1/nodes/{node}/proxy/cache/{path}");
    let request = http::Request::get(&uri)
        .body(Vec::new())
        .context("build a proxy request")?;
    let text = client
        .request_text(request)
        .await
        .with_context(|| format!("GET {uri}"))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("GET {uri}: not JSON: {text}"))?;
    if let Some(error) = value.get("error").and_then(|e| e.as_str()) {
        anyhow::bail!("node {node}: {error}");
    }
    Ok(value)
}

/// `org/name[@revision]`.
fn split_model(text: &str) -> anyhow::Result<(String, String)> {
    let (repo, revision) = text.split_once('@').unwrap_or((text, "main"));
    ModelRef::new(repo, revision).with_context(|| format!("model {text:?}"))?;
    Ok((repo.to_owned(), revision.to_owned()))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

async fn pull(args: &PullArgs) -> anyhow::Result<()> {
    use std::io::{IsTerminal, Write};
    let (repo, revision) = split_model(&args.model)?;
    let client = crate::client::connect(&args.cluster).await?;
    let mut nodes = args.nodes.clone();
    if let Some(selector) = &args.selector {
        let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
        let listed = api
            .list(&kube::api::ListParams::default().labels(selector))
            .await
            .with_context(|| format!("list nodes -l {selector}"))?;
        nodes.extend(listed.items.into_iter().filter_map(|n| n.metadata.name));
    }
    nodes.sort();
    nodes.dedup();
    if nodes.is_empty() {
        anyhow::bail!("no nodes match");
    }
    let query = format!(
        "pull?model={}&revision={revision}",
        repo.replace('/', "%2F")
    );
    // (node, digest) → (path, size) still to come.
    let mut files: Vec<(String, String, String, u64)> = Vec::new();
    for node in &nodes {
        let started = cache_get(&client, node, &query).await?;
        for file in started["files"].as_array().into_iter().flatten() {
            files.push((
                node.clone(),
                file["digest"].as_str().unwrap_or_default().to_owned(),
                file["path"].as_str().unwrap_or_default().to_owned(),
                file["size"].as_u64().unwrap_or_default(),
            ));
        }
    }
    let total: u64 = files.iter().map(|f| f.3).sum();
    let terminal = std::io::stdout().is_terminal();
    let started = std::time::Instant::now();
    let mut reported = std::collections::BTreeSet::new();
    loop {
        let mut done_bytes = 0u64;
        let mut finished: Vec<String> = Vec::new();
        let mut nodes_done = 0;
        for node in &nodes {
            let status = cache_get(&client, node, "status").await?;
            // Once the node says the model is pulled, its files count as done even if this
            // loop never saw one of them complete (a later eviction may have taken it).
            let mut node_pulled = false;
            for prepull in status["prepulls"].as_array().into_iter().flatten() {
                if prepull["model"] != repo.as_str() || prepull["revision"] != revision.as_str() {
                    continue;
                }
                if prepull["phase"] == "Failed" {
                    anyhow::bail!(
                        "pulling {repo}@{revision} onto {node} failed: {}",
                        prepull["message"].as_str().unwrap_or_default()
                    );
                }
                if prepull["phase"] == "Pulled" {
                    nodes_done += 1;
                    node_pulled = true;
                }
            }
            let held: std::collections::BTreeSet<&str> = status["blobs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["digest"].as_str())
                .collect();
            let partial: BTreeMap<&str, u64> = status["downloads"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| Some((d["digest"].as_str()?, d["bytes_verified"].as_u64()?)))
                .collect();
            let bare = |d: &str| d.trim_start_matches("sha256:").to_owned();
            for (file_node, digest, path, size) in &files {
                if file_node != node {
                    continue;
                }
                let hex = bare(digest);
                let complete = node_pulled || held.iter().any(|h| bare(h) == hex);
                if complete {
                    done_bytes += size;
                    if reported.insert((node.clone(), path.clone())) {
                        finished.push(format!("{node}  {path}  {}", mib(*size)));
                    }
                } else {
                    done_bytes += partial
                        .iter()
                        .find(|(d, _)| bare(d) == hex)
                        .map_or(0, |(_, b)| (*b).min(*size));
                }
            }
        }
        let mut out = std::io::stdout().lock();
        for line in &finished {
            if terminal {
                write!(out, "\r\x1b[K")?;
            }
            writeln!(out, "pulled  {line}")?;
        }
        if terminal {
            let width = 30usize;
            let filled = done_bytes
                .saturating_mul(width as u64)
                .checked_div(total)
                .map_or(width, |f| (f as usize).min(width));
            write!(
                out,
                "\r\x1b[K[{}{}] {} / {}",
                "#".repeat(filled),
                "-".repeat(width - filled.min(width)),
                mib(done_bytes),
                mib(total)
            )?;
        }
        out.flush()?;
        if reported.len() == files.len() && nodes_done == nodes.len() {
            if terminal {
                writeln!(out)?;
            }
            break;
        }
        drop(out);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "Pulled {repo}@{revision} onto {} node(s) ({} files, {} each) in {:.1}s.",
        nodes.len(),
        files.len() / nodes.len(),
        mib(total / nodes.len() as u64),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn ls_node(cluster: &ClusterArgs, node: &str) -> anyhow::Result<()> {
    let client = crate::client::connect(cluster).await?;
    let status = cache_get(&client, node, "status").await?;
    let models: Vec<Vec<String>> = status["models"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            vec![
                m["model"].as_str().unwrap_or_default().to_owned(),
                m["revision"].as_str().unwrap_or_default().to_owned(),
                m["files"].as_array().map_or(0, Vec::len).to_string(),
                m["size"].as_u64().unwrap_or_default().to_string(),
            ]
        })
        .collect();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let blobs: Vec<Vec<String>> = status["blobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            let last = b["last_used_ms"].as_u64().unwrap_or_default();
            vec![
                b["digest"].as_str().unwrap_or_default().to_owned(),
                b["size"].as_u64().unwrap_or_default().to_string(),
                b["pinned"].as_u64().unwrap_or_default().to_string(),
                tessera_model::time::human_duration(
                    i64::try_from(now_ms.saturating_sub(last) / 1000).unwrap_or(i64::MAX),
                ),
            ]
        })
        .collect();
    let mut text = format!(
        "Node {node}: {} of {} bytes used; {} bytes from the origin, {} from peers, {} served to peers.\n\n",
        status["used"],
        status["capacity"],
        status["origin_bytes"],
        status["peer_bytes"],
        status["uploaded_bytes"]
    );
    text.push_str(&crate::output::table(
        &["MODEL", "REVISION", "FILES", "BYTES"],
        &models,
    ));
    text.push('\n');
    text.push_str(&crate::output::table(
        &["BLOB", "BYTES", "PINNED", "LAST USED"],
        &blobs,
    ));
    crate::output::emit(&text)
}

/// A seeded xorshift stream, so a generated model's bytes depend only on its id.
struct Bytes64(u64);

impl Bytes64 {
    fn fill(&mut self, buffer: &mut [u8]) {
        for chunk in buffer.chunks_mut(8) {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            let bytes = x.to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// The safetensors header of one F16 tensor `name` of `elements` elements (8-byte length,
/// JSON padded with spaces to a multiple of 8, as the format allows).
fn safetensors_header(name: &str, elements: u64) -> Vec<u8> {
    let header = json!({
        "__metadata__": {"format": "pt"},
        name: {"dtype": "F16", "shape": [elements], "data_offsets": [0, elements * 2]},
    })
    .to_string();
    let mut header = header.into_bytes();
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out
}

fn generate(args: &GenerateArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let model = ModelRef::new(&args.model, "main")?;
    if args.shard_size < 2 {
        anyhow::bail!("--shard-size must be at least 2 bytes");
    }
    std::fs::create_dir_all(&args.dir).with_context(|| format!("create {}", args.dir.display()))?;
    let shards = args.size.div_ceil(args.shard_size).max(1);
    let seed = u64::from_le_bytes(
        Sha256::digest(model.id().as_bytes())[..8]
            .try_into()
            .unwrap_or([1; 8]),
    ) | 1;
    let mut random = Bytes64(seed);
    let mut weight_map = serde_json::Map::new();
    let mut remaining = args.size;
    let mut written = Vec::new();
    for shard in 1..=shards {
        let bytes = remaining.min(args.shard_size) & !1;
        remaining = remaining.saturating_sub(args.shard_size);
        let name = if shards == 1 {
            "model.safetensors".to_owned()
        } else {
            format!("model-{shard:05}-of-{shards:05}.safetensors")
        };
        let tensor = format!("model.layers.{}.weight", shard - 1);
        weight_map.insert(tensor.clone(), json!(name));
        let path = args.dir.join(&name);
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("create {}", path.display()))?,
        );
        file.write_all(&safetensors_header(&tensor, bytes / 2))?;
        let mut buffer = vec![0u8; 1 << 20];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(buffer.len() as u64) as usize;
            random.fill(&mut buffer[..n]);
            file.write_all(&buffer[..n])?;
            left -= n as u64;
        }
        file.flush()
            .with_context(|| format!("write {}", path.display()))?;
        written.push(name);
    }
    let config = json!({
        "_name_or_path": model.id(),
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": "float16",
        "hidden_size": 64, "num_hidden_layers": shards, "vocab_size": 256,
    });
    let tokenizer = json!({
        "version": "1.0",
        "model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1, "b": 2}, "merges": []},
    });
    let mut extra = vec![
        (
            "config.json".to_owned(),
            serde_json::to_string_pretty(&config)?,
        ),
        (
            "tokenizer.json".to_owned(),
            serde_json::to_string_pretty(&tokenizer)?,
        ),
    ];
    if shards > 1 {
        let index = json!({"metadata": {"total_size": args.size}, "weight_map": weight_map});
        extra.push((
            "model.safetensors.index.json".to_owned(),
            serde_json::to_string_pretty(&index)?,
        ));
    }
    for (name, text) in &extra {
        let path = args.dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        written.push(name.clone());
    }
    written.sort();
    println!(
        "Generated {} in {}: {} files ({} shards, about {}).",
        model.id(),
        args.dir.display(),
        written.len(),
        shards,
        mib(args.size)
    );
    Ok(())
}

/// What `tessera up` was asked to do about the model store.
pub enum UpStore {
    /// `--no-model-store`.
    Off,
    /// The embedded store on this address.
    Embedded(SocketAddr),
    /// An external endpoint.
    External(String),
}

/// Starts the embedded store (or takes the external endpoint) and publishes how to reach it;
/// with none, withdraws what an earlier start published. Returns the running store, kept
/// until shutdown, and the connection published.
pub async fn start_for_up(
    choice: UpStore,
    region: &str,
    bucket: &str,
    data_dir: &Path,
    objects: &Objects,
) -> anyhow::Result<(Option<ModelStore>, Option<Connection>)> {
    let (store, published) = match choice {
        UpStore::Off => (None, None),
        UpStore::Embedded(listen) => {
            let store = ModelStore::start(data_dir, listen)
                .await
                .context("start the model store")?;
            let connection = store.connection(region);
            (Some(store), Some(connection))
        }
        UpStore::External(endpoint) => {
            let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
            let missing = |name: &str| {
                format!("--model-store-endpoint needs ${name} (the store's credentials)")
            };
            let connection = Connection {
                endpoint: connection::check_endpoint(&endpoint)?,
                region: region.to_owned(),
                access_key_id: env(connection::ACCESS_KEY_KEY)
                    .with_context(|| missing(connection::ACCESS_KEY_KEY))?,
                secret_access_key: env(connection::SECRET_KEY_KEY)
                    .with_context(|| missing(connection::SECRET_KEY_KEY))?,
                bucket: bucket.to_owned(),
            };
            (None, Some(connection))
        }
    };
    publish(objects, data_dir, published.as_ref())?;
    Ok((store, published))
}

/// Writes (or, with `None`, removes) Secret `kube-system/tessera-model-store` and the env
/// file.
fn publish(objects: &Objects, data_dir: &Path, found: Option<&Connection>) -> anyhow::Result<()> {
    let secrets = secrets()?;
    let path = data_dir.join(connection::ENV_FILE);
    let namespace = Some(connection::SECRET_NAMESPACE);
    let Some(found) = found else {
        if path.exists() {
            std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
        }
        if objects
            .get(secrets, namespace, connection::SECRET_NAME)
            .is_ok()
        {
            objects
                .delete(
                    secrets,
                    namespace,
                    connection::SECRET_NAME,
                    &Default::default(),
                    false,
                )
                .map_err(|e| anyhow::anyhow!("delete the model store's Secret: {e}"))?;
        }
        return Ok(());
    };
    credentials::write_private(&path, found.env_file().as_bytes())?;
    let data: serde_json::Map<String, serde_json::Value> = found
        .pairs()
        .iter()
        .map(|(k, v)| {
            (
                (*k).to_owned(),
                json!(base64::engine::general_purpose::STANDARD.encode(v)),
            )
        })
        .collect();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": connection::SECRET_NAME,
            "labels": {"app.kubernetes.io/name": "tessera-model-store",
                "app.kubernetes.io/managed-by": "tessera"}},
        "type": "Opaque",
        "data": data,
    });
    if objects
        .get(secrets, namespace, connection::SECRET_NAME)
        .is_ok()
    {
        objects
            .update_with(
                secrets,
                namespace,
                connection::SECRET_NAME,
                Part::Main,
                |current| {
                    let mut next = current.clone();
                    next["data"] = secret["data"].clone();
                    next["type"] = secret["type"].clone();
                    Ok(next)
                },
            )
            .map_err(|e| anyhow::anyhow!("update the model store's Secret: {e}"))?;
    } else {
        objects
            .create(secrets, namespace, secret, &WriteOptions::default())
            .map_err(|e| anyhow::anyhow!("create the model store's Secret: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_files_skip_bookkeeping_and_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".cache/huggingface")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("onnx")).unwrap();
        std::fs::write(root.join(".cache/huggingface/x.metadata"), "m").unwrap();
        std::fs::write(root.join(".git/HEAD"), "h").unwrap();
        std::fs::write(root.join("config.json"), "{}").unwrap();
        std::fs::write(root.join("onnx/model.onnx"), "o").unwrap();
        std::os::unix::fs::symlink(root.join("config.json"), root.join("linked.json")).unwrap();
        let files: Vec<String> = repository_files(root)
            .unwrap()
            .into_iter()
            .map(|(relative, _)| relative)
            .collect();
        assert_eq!(files, ["config.json", "linked.json", "onnx/model.onnx"]);
        let (sha, size) = hash_file(&root.join("config.json")).unwrap();
        assert_eq!(sha, tessera_cache::sha256_hex(b"{}"));
        assert_eq!(size, 2);
    }

    #[test]
    fn generated_shards_have_valid_safetensors_headers() {
        let dir = tempfile::tempdir().unwrap();
        let args = GenerateArgs {
            dir: dir.path().join("m"),
            model: "org/tiny".into(),
            size: 3000,
            shard_size: 1024,
        };
        generate(&args).unwrap();
        let shard = std::fs::read(args.dir.join("model-00001-of-00003.safetensors")).unwrap();
        let len = u64::from_le_bytes(shard[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&shard[8..8 + len]).unwrap();
        let tensor = &header["model.layers.0.weight"];
        assert_eq!(tensor["dtype"], "F16");
        let end = tensor["data_offsets"][1].as_u64().unwrap() as usize;
        assert_eq!(shard.len(), 8 + len + end);
        assert_eq!(end, 1024);
        let index: serde_json::Value = serde_json::from_slice(
            &std::fs::read(args.dir.join("model.safetensors.index.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            index["weight_map"]["model.layers.2.weight"],
            "model-00003-of-00003.safetensors"
        );
        assert!(args.dir.join("config.json").exists());
        assert!(args.dir.join("tokenizer.json").exists());
        // The same id gives the same bytes.
        let again = GenerateArgs {
            dir: dir.path().join("n"),
            ..args
        };
        generate(&again).unwrap();
        assert_eq!(
            std::fs::read(again.dir.join("model-00002-of-00003.safetensors")).unwrap(),
            std::fs::read(dir.path().join("m/model-00002-of-00003.safetensors")).unwrap()
        );
    }

    #[test]
    fn model_names_split_at_the_revision() {
        assert_eq!(
            split_model("org/name@v1").unwrap(),
            ("org/name".to_owned(), "v1".to_owned())
        );
        assert_eq!(split_model("org/name").unwrap().1, "main");
        assert!(split_model("org/../x").is_err());
    }
}
