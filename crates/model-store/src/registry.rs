//! The image registry `tessera up` serves: the OCI distribution spec's pull and push API on a
//! listener of its own, kept in `<data-dir>/registry/` so that pushed images survive
//! restarts.
//!
//! - `GET /v2/`; manifests by tag or digest (`GET`/`HEAD`/`PUT`, with their media type,
//!   `Docker-Content-Digest` and `Location`); blobs (`GET`/`HEAD`); uploads
//!   (`POST /v2/<name>/blobs/uploads/` — monolithic with `?digest=`, a cross-repository mount
//!   with `?mount=&from=`, or a session — then `PATCH` chunks, `PUT ?digest=` to finish, `GET`
//!   its progress, `DELETE` it); `GET /v2/<name>/tags/list` with `n`/`last` paging.
//! - Every request needs the registry's one generated credential as HTTP Basic (what
//!   `docker login`, `crane auth login`, `skopeo --creds` and a `.dockerconfigjson` send);
//!   without it `401 UNAUTHORIZED` with a `Basic` challenge.
//! - On disk, content-addressed: `blobs/sha256/<hex>` (layers, configs and manifests alike),
//!   `uploads/<id>` (with `<id>.repository`, the repository it was started in: another one does
//!   not know it), and per repository `repositories/<name>/_layers/<hex>` (the blobs linked
//!   into it), `_manifests/revisions/<hex>` (holding the manifest's media type) and
//!   `_manifests/tags/<tag>` (holding the digest). Files are written to a temporary name and
//!   renamed into place.
//!
//! [`Storage::lookup`] answers the node twins' pulls from the same files. Routes, names,
//! digests, manifests, chunks, pages and error codes are `tessera_cache::distribution`'s;
//! this module keeps files and speaks HTTP. It knows nothing of Kubernetes objects.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use s3s::Body;
use tessera_cache::distribution::{self, ErrorCode, Reference, RegistryError, Route, query_param};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::{Credentials, StoreError};

/// The registry's directory in the data directory.
pub const REGISTRY_DIR: &str = "registry";
/// The registry's credential in the data directory (`access_key_id` is the user name,
/// `secret_access_key` the password).
pub const CREDENTIALS_FILE: &str = "registry-credentials.json";
/// The realm of the `WWW-Authenticate` challenge.
pub const REALM: &str = "tessera-registry";

/// What a pull of `name:reference` finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// No such repository.
    NameUnknown,
    /// The repository has no such tag or manifest.
    ManifestUnknown,
    /// The manifest's digest and the bytes its image's config and layers take (for an index,
    /// those of the entry for the platform asked).
    Found { digest: String, size: u64 },
}

/// The registry's files.
#[derive(Debug)]
pub struct Storage {
    root: PathBuf,
    /// Makes temporary names unique within the process.
    counter: AtomicU64,
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn internal(error: std::io::Error) -> RegistryError {
    tracing::error!(%error, "registry storage");
    RegistryError::new(ErrorCode::Unknown, format!("storage error: {error}"))
}

impl Storage {
    /// The registry under `data_dir`, its directories made (private to the owner) when
    /// missing.
    pub fn open(data_dir: &Path) -> Result<Storage, StoreError> {
        let root = data_dir.join(REGISTRY_DIR);
        crate::create_private_dir(&root)?;
        for sub in ["blobs/sha256", "uploads", "repositories"] {
            let dir = root.join(sub);
            std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        }
        Ok(Storage {
            root,
            counter: AtomicU64::new(0),
        })
    }

    /// The directory the registry keeps its files in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.root.join("blobs/sha256").join(hex)
    }

    fn repository(&self, name: &str) -> PathBuf {
        self.root.join("repositories").join(name)
    }

    fn layer_link(&self, name: &str, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.repository(name).join("_layers").join(hex)
    }

    fn revision_link(&self, name: &str, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.repository(name).join("_manifests/revisions").join(hex)
    }

    fn tag_link(&self, name: &str, tag: &str) -> PathBuf {
        self.repository(name).join("_manifests/tags").join(tag)
    }

    fn upload_path(&self, id: &str) -> PathBuf {
        self.root.join("uploads").join(id)
    }

    /// The file naming the repository an upload was started in.
    fn upload_owner(&self, id: &str) -> PathBuf {
        self.root.join("uploads").join(format!("{id}.repository"))
    }

    /// Forgets an upload.
    fn drop_upload(&self, id: &str) {
        let _ = std::fs::remove_file(self.upload_path(id));
        let _ = std::fs::remove_file(self.upload_owner(id));
    }

    fn repository_exists(&self, name: &str) -> bool {
        self.repository(name).join("_layers").is_dir()
            || self.repository(name).join("_manifests").is_dir()
    }

    fn has_blob(&self, name: &str, digest: &str) -> bool {
        self.layer_link(name, digest).is_file() && self.blob_path(digest).is_file()
    }

    /// Writes `contents` to `path` through a temporary file renamed into place.
    fn write_atomic(&self, path: &Path, contents: &[u8]) -> std::io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
        std::fs::write(&tmp, contents)?;
        std::fs::rename(&tmp, path)
    }

    fn link_blob(&self, name: &str, digest: &str) -> std::io::Result<()> {
        self.write_atomic(&self.layer_link(name, digest), b"")
    }

    /// The manifest `reference` names in `name`: its digest, media type and bytes.
    fn manifest(
        &self,
        name: &str,
        reference: &Reference,
    ) -> Result<(String, String, Vec<u8>), RegistryError> {
        if !self.repository_exists(name) {
            return Err(RegistryError::new(
                ErrorCode::NameUnknown,
                format!("repository name not known to registry: {name}"),
            ));
        }
        let unknown = || {
            RegistryError::new(
                ErrorCode::ManifestUnknown,
                format!("manifest unknown: {name}:{}", reference.as_str()),
            )
        };
        let digest = match reference {
            Reference::Digest(digest) => digest.clone(),
            Reference::Tag(tag) => std::fs::read_to_string(self.tag_link(name, tag))
                .map_err(|_| unknown())?
                .trim()
                .to_owned(),
        };
        let media_type =
            std::fs::read_to_string(self.revision_link(name, &digest)).map_err(|_| unknown())?;
        let bytes = std::fs::read(self.blob_path(&digest)).map_err(|_| unknown())?;
        Ok((digest, media_type.trim().to_owned(), bytes))
    }

    /// Stores a pushed manifest under `reference`; its digest.
    fn put_manifest(
        &self,
        name: &str,
        reference: &Reference,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<String, RegistryError> {
        let manifest = distribution::inspect_manifest(content_type, body)?;
        let digest = distribution::digest_of(body);
        if let Reference::Digest(given) = reference
            && *given != digest
        {
            return Err(RegistryError::new(
                ErrorCode::DigestInvalid,
                format!("the manifest's digest is {digest}, not {given}"),
            ));
        }
        for blob in &manifest.blobs {
            if !self.has_blob(name, blob) {
                return Err(RegistryError::new(
                    ErrorCode::ManifestBlobUnknown,
                    format!("blob unknown to registry: {blob}"),
                ));
            }
        }
        for (child, _) in &manifest.manifests {
            if !self.revision_link(name, child).is_file() {
                return Err(RegistryError::new(
                    ErrorCode::ManifestBlobUnknown,
                    format!("manifest unknown to registry: {child}"),
                ));
            }
        }
        self.write_atomic(&self.blob_path(&digest), body)
            .map_err(internal)?;
        self.write_atomic(
            &self.revision_link(name, &digest),
            manifest.media_type.as_bytes(),
        )
        .map_err(internal)?;
        if let Reference::Tag(tag) = reference {
            self.write_atomic(&self.tag_link(name, tag), digest.as_bytes())
                .map_err(internal)?;
        }
        Ok(digest)
    }

    /// The tags of `name` (none when it does not exist).
    fn tags(&self, name: &str) -> Vec<String> {
        std::fs::read_dir(self.repository(name).join("_manifests/tags"))
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|tag| !tag.contains(".tmp-"))
            .collect()
    }

    /// What a node of `platform` (`linux/amd64`) pulling `name:reference` finds.
    pub fn lookup(&self, name: &str, reference: &str, platform: &str) -> Lookup {
        let Ok(reference) = distribution::parse_reference(reference) else {
            return Lookup::ManifestUnknown;
        };
        if distribution::check_name(name).is_err() {
            return Lookup::NameUnknown;
        }
        let (digest, bytes) = match self.manifest(name, &reference) {
            Ok((digest, _, bytes)) => (digest, bytes),
            Err(error) if error.code == ErrorCode::NameUnknown => return Lookup::NameUnknown,
            Err(_) => return Lookup::ManifestUnknown,
        };
        let Ok(manifest) = distribution::inspect_manifest(None, &bytes) else {
            return Lookup::ManifestUnknown;
        };
        let size = match distribution::platform_entry(&manifest.manifests, platform) {
            Some(child) => self
                .manifest(name, &Reference::Digest(child.to_owned()))
                .ok()
                .and_then(|(_, _, bytes)| distribution::inspect_manifest(None, &bytes).ok())
                .map_or(manifest.size, |child| child.size),
            None => manifest.size,
        };
        Lookup::Found { digest, size }
    }

    /// A fresh upload id (128 random bits as hex) in repository `name`.
    fn new_upload(&self, name: &str) -> Result<String, RegistryError> {
        use ring::rand::{SecureRandom, SystemRandom};
        let mut bytes = [0u8; 16];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| RegistryError::new(ErrorCode::Unknown, "the entropy source failed"))?;
        let id = tessera_cache::hex(&bytes);
        std::fs::write(self.upload_path(&id), b"").map_err(internal)?;
        std::fs::write(self.upload_owner(&id), name).map_err(internal)?;
        Ok(id)
    }

    /// Moves a finished upload into the blob store after checking it hashes to `digest`.
    async fn finish_upload(&self, name: &str, id: &str, digest: &str) -> Result<(), RegistryError> {
        let path = self.upload_path(id);
        let hashed = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || sha256_file(&path))
                .await
                .map_err(|e| internal(std::io::Error::other(e)))?
                .map_err(internal)?
        };
        if hashed != digest {
            self.drop_upload(id);
            return Err(RegistryError::new(
                ErrorCode::DigestInvalid,
                format!("the uploaded content's digest is {hashed}, not {digest}"),
            ));
        }
        let target = self.blob_path(digest);
        if !target.is_file() {
            std::fs::rename(&path, &target).map_err(internal)?;
        }
        self.drop_upload(id);
        self.link_blob(name, digest).map_err(internal)
    }
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 256 * 1024];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(format!("sha256:{}", tessera_cache::hex(&hasher.finalize())))
}

/// A running registry.
#[derive(Debug)]
pub struct Registry {
    address: SocketAddr,
    credentials: Credentials,
    storage: Arc<Storage>,
    task: tokio::task::JoinHandle<()>,
}

impl Registry {
    /// Starts the registry on `listen` over `data_dir`: its directories and credential made
    /// when missing.
    pub async fn start(data_dir: &Path, listen: SocketAddr) -> Result<Registry, StoreError> {
        let storage = Arc::new(Storage::open(data_dir)?);
        let credentials = Credentials::load_or_create(&data_dir.join(CREDENTIALS_FILE))?;
        let (listener, address) = crate::bind(listen).await?;
        let task = tokio::spawn(serve(
            listener,
            storage.clone(),
            Arc::new(credentials.clone()),
        ));
        tracing::info!(%address, root = %storage.root.display(), "image registry listening");
        Ok(Registry {
            address,
            credentials,
            storage,
            task,
        })
    }

    /// The address the registry listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The user name and password clients log in with.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The registry's files, for the twins' pulls.
    pub fn storage(&self) -> Arc<Storage> {
        self.storage.clone()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, storage: Arc<Storage>, credentials: Arc<Credentials>) {
    loop {
        let (socket, _) = match listener.accept().await {
            Ok(connection) => connection,
            Err(error) => {
                tracing::warn!(%error, "registry: accept");
                continue;
            }
        };
        let (storage, credentials) = (storage.clone(), credentials.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let (storage, credentials) = (storage.clone(), credentials.clone());
                async move {
                    Ok::<_, std::convert::Infallible>(handle(&storage, &credentials, request).await)
                }
            });
            if let Err(error) = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), service)
                .await
            {
                tracing::debug!(%error, "registry connection");
            }
        });
    }
}

fn error_response(error: &RegistryError, head: bool) -> Response<Body> {
    let status =
        StatusCode::from_u16(error.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = error.body();
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, body.len())
        .header("Docker-Distribution-API-Version", "registry/2.0");
    if error.code == ErrorCode::Unauthorized {
        response = response.header(header::WWW_AUTHENTICATE, format!("Basic realm=\"{REALM}\""));
    }
    response
        .body(if head {
            Body::empty()
        } else {
            Body::from(body)
        })
        .unwrap_or_default()
}

fn header_text(request: &http::Request<Incoming>, name: header::HeaderName) -> Option<&str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Answers one request.
pub async fn handle(
    storage: &Storage,
    credentials: &Credentials,
    request: http::Request<Incoming>,
) -> Response<Body> {
    let head = request.method() == Method::HEAD;
    let route = match distribution::parse_path(request.uri().path()) {
        None => {
            let error = RegistryError::new(
                ErrorCode::NameUnknown,
                "this registry serves the distribution API under /v2/",
            );
            return error_response(&error, head);
        }
        Some(route) => route,
    };
    if !crate::oci::authorized(header_text(&request, header::AUTHORIZATION), credentials) {
        return error_response(
            &RegistryError::new(
                ErrorCode::Unauthorized,
                "authentication required: the registry's user name and password as Basic credentials",
            ),
            head,
        );
    }
    let route = match route {
        Ok(route) => route,
        Err(error) => return error_response(&error, head),
    };
    match answer(storage, route, request).await {
        Ok(response) => response,
        Err(error) => error_response(&error, head),
    }
}

fn unsupported(method: &Method) -> RegistryError {
    RegistryError::new(
        ErrorCode::Unsupported,
        format!("method {method} is not supported here"),
    )
}

fn empty(status: StatusCode) -> http::response::Builder {
    Response::builder()
        .status(status)
        .header(header::CONTENT_LENGTH, 0)
        .header("Docker-Distribution-API-Version", "registry/2.0")
}

fn upload_response(name: &str, id: &str, have: u64, status: StatusCode) -> Response<Body> {
    empty(status)
        .header(header::LOCATION, format!("/v2/{name}/blobs/uploads/{id}"))
        .header(header::RANGE, distribution::upload_range(have))
        .header("Docker-Upload-UUID", id)
        .body(Body::empty())
        .unwrap_or_default()
}

fn created_blob(name: &str, digest: &str) -> Response<Body> {
    empty(StatusCode::CREATED)
        .header(header::LOCATION, format!("/v2/{name}/blobs/{digest}"))
        .header("Docker-Content-Digest", digest)
        .body(Body::empty())
        .unwrap_or_default()
}

/// Appends a request body to the upload file; the file's new length.
async fn append(path: &Path, body: Incoming) -> Result<u64, RegistryError> {
    let mut file = tokio::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .await
        .map_err(internal)?;
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            RegistryError::new(
                ErrorCode::BlobUploadInvalid,
                format!("the request body broke off: {e}"),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            file.write_all(&data).await.map_err(internal)?;
        }
    }
    file.flush().await.map_err(internal)?;
    file.sync_all().await.map_err(internal)?;
    Ok(file.metadata().await.map_err(internal)?.len())
}

/// The bytes an upload of repository `name` holds; unknown when it was started elsewhere.
fn upload_len(storage: &Storage, name: &str, id: &str) -> Result<u64, RegistryError> {
    let unknown = || {
        RegistryError::new(
            ErrorCode::BlobUploadUnknown,
            format!("blob upload unknown to registry: {id}"),
        )
    };
    let owner = std::fs::read_to_string(storage.upload_owner(id)).map_err(|_| unknown())?;
    if owner != name {
        return Err(unknown());
    }
    std::fs::metadata(storage.upload_path(id))
        .map(|m| m.len())
        .map_err(|_| unknown())
}

fn digest_param(query: Option<&str>) -> Result<String, RegistryError> {
    let digest = query_param(query, "digest").ok_or_else(|| {
        RegistryError::new(
            ErrorCode::DigestInvalid,
            "the digest query parameter is required to finish an upload",
        )
    })?;
    distribution::check_digest(&digest)?;
    Ok(digest)
}

async fn answer(
    storage: &Storage,
    route: Route,
    request: http::Request<Incoming>,
) -> Result<Response<Body>, RegistryError> {
    let method = request.method().clone();
    let head = method == Method::HEAD;
    let query = request.uri().query().map(str::to_owned);
    let query = query.as_deref();
    match route {
        Route::Ping => {
            if method != Method::GET && !head {
                return Err(unsupported(&method));
            }
            Ok(Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .header("Docker-Distribution-API-Version", "registry/2.0")
                .body(if head {
                    Body::empty()
                } else {
                    Body::from("{}".to_owned())
                })
                .unwrap_or_default())
        }
        Route::Manifest { name, reference } => match method {
            Method::GET | Method::HEAD => {
                let (digest, media_type, bytes) = storage.manifest(&name, &reference)?;
                Ok(Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, media_type)
                    .header(header::CONTENT_LENGTH, bytes.len())
                    .header("Docker-Content-Digest", &digest)
                    .header(header::ETAG, format!("\"{digest}\""))
                    .body(if head {
                        Body::empty()
                    } else {
                        Body::from(Bytes::from(bytes))
                    })
                    .unwrap_or_default())
            }
            Method::PUT => {
                let content_type = header_text(&request, header::CONTENT_TYPE).map(str::to_owned);
                let body = http_body_util::Limited::new(
                    request.into_body(),
                    distribution::MANIFEST_MAX_BYTES,
                )
                .collect()
                .await
                .map_err(|e| {
                    RegistryError::new(
                        ErrorCode::SizeInvalid,
                        format!("the manifest could not be read: {e}"),
                    )
                })?
                .to_bytes();
                let digest =
                    storage.put_manifest(&name, &reference, content_type.as_deref(), &body)?;
                Ok(empty(StatusCode::CREATED)
                    .header(header::LOCATION, format!("/v2/{name}/manifests/{digest}"))
                    .header("Docker-Content-Digest", &digest)
                    .body(Body::empty())
                    .unwrap_or_default())
            }
            _ => Err(unsupported(&method)),
        },
        Route::Blob { name, digest } => {
            if method != Method::GET && !head {
                return Err(unsupported(&method));
            }
            if !storage.has_blob(&name, &digest) {
                return Err(RegistryError::new(
                    ErrorCode::BlobUnknown,
                    format!("blob unknown to registry: {digest}"),
                ));
            }
            let path = storage.blob_path(&digest);
            let len = std::fs::metadata(&path).map_err(internal)?.len();
            let body = if head {
                Body::empty()
            } else {
                crate::oci::file_body(&path, 0, len)
                    .await
                    .map_err(internal)?
            };
            Ok(Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/octet-stream")
                .header(header::CONTENT_LENGTH, len)
                .header("Docker-Content-Digest", &digest)
                .body(body)
                .unwrap_or_default())
        }
        Route::StartUpload { name } => {
            if method != Method::POST {
                return Err(unsupported(&method));
            }
            if let (Some(mount), Some(from)) =
                (query_param(query, "mount"), query_param(query, "from"))
                && distribution::check_digest(&mount).is_ok()
                && distribution::check_name(&from).is_ok()
                && storage.has_blob(&from, &mount)
            {
                storage.link_blob(&name, &mount).map_err(internal)?;
                return Ok(created_blob(&name, &mount));
            }
            let id = storage.new_upload(&name)?;
            if query_param(query, "digest").is_some() {
                let digest = digest_param(query)?;
                append(&storage.upload_path(&id), request.into_body()).await?;
                storage.finish_upload(&name, &id, &digest).await?;
                return Ok(created_blob(&name, &digest));
            }
            Ok(upload_response(&name, &id, 0, StatusCode::ACCEPTED))
        }
        Route::Upload { name, id } => {
            let have = upload_len(storage, &name, &id)?;
            match method {
                Method::GET => Ok(upload_response(&name, &id, have, StatusCode::NO_CONTENT)),
                Method::PATCH => {
                    distribution::check_chunk(header_text(&request, header::CONTENT_RANGE), have)?;
                    let have = append(&storage.upload_path(&id), request.into_body()).await?;
                    Ok(upload_response(&name, &id, have, StatusCode::ACCEPTED))
                }
                Method::PUT => {
                    let digest = digest_param(query)?;
                    append(&storage.upload_path(&id), request.into_body()).await?;
                    storage.finish_upload(&name, &id, &digest).await?;
                    Ok(created_blob(&name, &digest))
                }
                Method::DELETE => {
                    storage.drop_upload(&id);
                    Ok(empty(StatusCode::NO_CONTENT)
                        .body(Body::empty())
                        .unwrap_or_default())
                }
                _ => Err(unsupported(&method)),
            }
        }
        Route::Tags { name } => {
            if method != Method::GET {
                return Err(unsupported(&method));
            }
            if !storage.repository_exists(&name) {
                return Err(RegistryError::new(
                    ErrorCode::NameUnknown,
                    format!("repository name not known to registry: {name}"),
                ));
            }
            let (tags, link) = distribution::tag_page(
                &name,
                storage.tags(&name),
                query_param(query, "n").as_deref(),
                query_param(query, "last").as_deref(),
            )?;
            let body = serde_json::json!({"name": name, "tags": tags}).to_string();
            let mut response = Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_LENGTH, body.len());
            if let Some(link) = link.and_then(|l| HeaderValue::from_str(&l).ok()) {
                response = response.header(header::LINK, link);
            }
            Ok(response.body(Body::from(body)).unwrap_or_default())
        }
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
