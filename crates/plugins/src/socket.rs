//! gRPC over unix sockets, as the kubelet speaks it: serving a tonic router on a socket file
//! (replacing a stale one) until told to stop, dialing a socket file, and telling whether a
//! socket file is still the one that was bound (the kubelet wipes and recreates its
//! directories when it restarts).
//!
//! Knows nothing of which services run on the sockets.

use std::future::Future;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tokio::net::{UnixListener, UnixStream};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::Router;
use tonic::transport::{Channel, Endpoint, Uri};

/// A socket that could not be bound or dialed.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Binding the socket file failed.
    #[error("cannot listen on {path}: {source}")]
    Bind {
        /// The socket file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Dialing the socket file failed.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket file.
        path: PathBuf,
        /// Why.
        source: tonic::transport::Error,
    },
}

/// Which file a path names: device and inode, so a recreated file reads as different.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    dev: u64,
    ino: u64,
}

/// The identity of the file at `path`, or `None` when there is none.
pub fn identity(path: &Path) -> Option<FileIdentity> {
    std::fs::metadata(path).ok().map(|m| FileIdentity {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// Binds `path` (removing a stale file first, creating the directory) and returns the
/// listener with the identity of the new socket file.
pub fn bind(path: &Path) -> Result<(UnixListener, FileIdentity), SocketError> {
    let fail = |source| SocketError::Bind {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e)),
    }
    let listener = UnixListener::bind(path).map_err(fail)?;
    let id = identity(path).ok_or_else(|| fail(io::Error::other("socket file vanished")))?;
    Ok((listener, id))
}

/// Serves `router` on `listener` until `stop` resolves and open calls finish.
pub async fn serve(
    router: Router,
    listener: UnixListener,
    stop: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    router
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), stop)
        .await
}

/// Removes the socket file at `path` if it is still the one bound as `bound` (something
/// else may have been put there since).
pub fn remove_if_ours(path: &Path, bound: FileIdentity) {
    if identity(path) == Some(bound) {
        let _ = std::fs::remove_file(path);
    }
}

/// A gRPC channel to the socket at `path`.
pub async fn connect(path: &Path) -> Result<Channel, SocketError> {
    let target = path.to_path_buf();
    // The URI is required by tonic but unused: the connector dials the socket.
    let endpoint = Endpoint::from_static("http://[::]:0");
    endpoint
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let target = target.clone();
            async move { UnixStream::connect(target).await.map(TokioIo::new) }
        }))
        .await
        .map_err(|source| SocketError::Connect {
            path: path.to_path_buf(),
            source,
        })
}
