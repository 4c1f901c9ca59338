//! `tessera model push|ls` and the model store's part of `tessera up`: starting the embedded
//! store (or taking an external endpoint), and publishing where it is as Secret
//! `kube-system/tessera-model-store` and `<data-dir>/model-store.env`.
//!
//! The store itself is `tessera-model-store`; keys, layouts and signatures are
//! `tessera-cache`'s. This module finds the store, walks a directory, hashes files and prints.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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
    /// List the store's models and revisions, or one model's files with size and sha256.
    Ls(LsArgs),
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
    #[command(flatten)]
    pub store: StoreArgs,
}

pub async fn run(command: &ModelCommand) -> anyhow::Result<()> {
    match command {
        ModelCommand::Push(args) => push(args).await,
        ModelCommand::Ls(args) => ls(args).await,
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
}
