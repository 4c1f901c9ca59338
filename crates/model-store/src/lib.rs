//! tessera-model-store: the S3-compatible model store `tessera up` serves (issue 21,
//! deliverable 2).
//!
//! One TCP listener answers two protocols:
//!
//! - S3 (path-style), by `s3s` over `s3s-fs` serving `<data-dir>/model-store/`, every request
//!   checked by SigV4 against one access key and secret ([`credentials`]) made at first start;
//!   object writes and deletes keep a sha256 index beside the data ([`index`], [`indexed`]).
//!   Bucket `models` is made at first start; a model is a Hugging Face repository's files
//!   under `<org>/<name>/<revision>/<path>` (`tessera_cache::modelpack`'s layout).
//! - A read-only OCI distribution endpoint under `/v2/` serving each model revision as a
//!   ModelPack artifact built from the index ([`oci`]).
//!
//! [`registry`] is the image registry `tessera up` serves beside the store (its own listener,
//! push and pull, `<data-dir>/registry/`), sharing the credential and file helpers.
//!
//! [`connection`] is how clients find the store (the Secret's and env file's keys) and
//! [`client`] a light S3 client signing with `tessera_cache::sigv4`. The decisions — the
//! layout, manifests, ranges, signatures — live in the `tessera-cache` core; this crate does
//! the I/O. It knows nothing of Kubernetes objects.

pub mod client;
pub mod connection;
pub mod credentials;
pub mod index;
pub mod indexed;
pub mod oci;
pub mod registry;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{Body, HttpError};
use thiserror::Error;
use tokio::net::TcpListener;

pub use connection::Connection;
pub use credentials::Credentials;

/// The store's directory under the data directory (its buckets are its subdirectories).
pub const STORE_DIR: &str = "model-store";
/// The credentials file in the data directory.
pub const CREDENTIALS_FILE: &str = "model-store-credentials.json";
/// The sha256 index in the data directory.
pub const INDEX_FILE: &str = "model-store-index.json";

/// Why the store cannot start or a file of it cannot be used, naming the file.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("the operating system's entropy source failed")]
    Entropy,
    #[error("listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("the S3 file system at {}: {reason}", path.display())]
    FileSystem { path: PathBuf, reason: String },
}

/// A running store.
#[derive(Debug)]
pub struct ModelStore {
    address: SocketAddr,
    credentials: Credentials,
    root: PathBuf,
    index: Arc<index::Index>,
    task: tokio::task::JoinHandle<()>,
}

/// Makes `dir` (and parents) private to its owner.
fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let io = |source| StoreError::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)
}

impl ModelStore {
    /// Starts the store on `listen` over `data_dir`: makes the store directory, bucket
    /// `models`, the credentials and the index when missing, and serves until dropped or
    /// stopped.
    pub async fn start(data_dir: &Path, listen: SocketAddr) -> Result<Self, StoreError> {
        let root = data_dir.join(STORE_DIR);
        create_private_dir(&root)?;
        let bucket = root.join(tessera_cache::modelpack::BUCKET);
        std::fs::create_dir_all(&bucket).map_err(|source| StoreError::Io {
            path: bucket.clone(),
            source,
        })?;
        let credentials = Credentials::load_or_create(&data_dir.join(CREDENTIALS_FILE))?;
        let index = Arc::new(index::Index::open(&data_dir.join(INDEX_FILE))?);
        let fs = s3s_fs::FileSystem::new(&root).map_err(|e| StoreError::FileSystem {
            path: root.clone(),
            reason: format!("{e:?}"),
        })?;
        // s3s-fs canonicalises its root; the index hashes files under the same path.
        let root = root.canonicalize().map_err(|source| StoreError::Io {
            path: root.clone(),
            source,
        })?;
        let reconciling = index.clone();
        let walked = root.clone();
        let (recorded, dropped) =
            tokio::task::spawn_blocking(move || reconciling.reconcile(&walked))
                .await
                .map_err(|e| StoreError::FileSystem {
                    path: root.clone(),
                    reason: format!("reconcile the index: {e}"),
                })??;
        if recorded + dropped > 0 {
            tracing::info!(
                recorded,
                dropped,
                "model store: index reconciled with the files"
            );
        }
        let mut builder =
            S3ServiceBuilder::new(indexed::IndexedFs::new(fs, root.clone(), index.clone()));
        builder.set_auth(credentials::Auth(credentials.clone()));
        let s3 = builder.build();
        let (listener, address) = bind(listen).await?;
        let task = tokio::spawn(serve(
            listener,
            s3,
            index.clone(),
            root.clone(),
            Arc::new(credentials.clone()),
        ));
        tracing::info!(%address, root = %root.display(), "model store listening");
        Ok(Self {
            address,
            credentials,
            root,
            index,
            task,
        })
    }

    /// The address the store listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://<address>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The directory served (its subdirectories are the buckets).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The sha256 index.
    pub fn index(&self) -> &index::Index {
        &self.index
    }

    /// How clients reach this store, for `region`.
    pub fn connection(&self, region: &str) -> Connection {
        Connection {
            endpoint: self.endpoint(),
            region: region.to_owned(),
            access_key_id: self.credentials.access_key_id.clone(),
            secret_access_key: self.credentials.secret_access_key.clone(),
            bucket: tessera_cache::modelpack::BUCKET.to_owned(),
        }
    }

    /// Stops accepting connections.
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for ModelStore {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A listener on `listen`, and the address it got (the port chosen when `listen`'s is 0).
pub(crate) async fn bind(listen: SocketAddr) -> Result<(TcpListener, SocketAddr), StoreError> {
    let failed = |source| StoreError::Listen {
        address: listen,
        source,
    };
    let listener = TcpListener::bind(listen).await.map_err(failed)?;
    let address = listener.local_addr().map_err(failed)?;
    Ok((listener, address))
}

/// Accepts connections and serves each with HTTP/1.1 or HTTP/2.
async fn serve(
    listener: TcpListener,
    s3: S3Service,
    index: Arc<index::Index>,
    root: PathBuf,
    credentials: Arc<Credentials>,
) {
    loop {
        let (socket, _) = match listener.accept().await {
            Ok(connection) => connection,
            Err(error) => {
                tracing::warn!(%error, "model store: accept");
                continue;
            }
        };
        let (s3, index, root, credentials) =
            (s3.clone(), index.clone(), root.clone(), credentials.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                dispatch(
                    s3.clone(),
                    index.clone(),
                    root.clone(),
                    credentials.clone(),
                    request,
                )
            });
            if let Err(error) = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), service)
                .await
            {
                tracing::debug!(%error, "model store connection");
            }
        });
    }
}

/// `/v2/…` to the OCI view, everything else to S3.
async fn dispatch(
    s3: S3Service,
    index: Arc<index::Index>,
    root: PathBuf,
    credentials: Arc<Credentials>,
    request: http::Request<Incoming>,
) -> Result<http::Response<Body>, HttpError> {
    let range = request
        .headers()
        .get(http::header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(answer) = oci::answer(
        &index,
        &root,
        request.method(),
        request.uri().path(),
        range.as_deref(),
        oci::authorized(
            request
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok()),
            &credentials,
        ),
    )
    .await
    {
        return Ok(answer);
    }
    s3.call(request.map(Body::from)).await
}
