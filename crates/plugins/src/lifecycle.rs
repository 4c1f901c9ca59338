//! Keeping plugins registered with a kubelet that may restart.
//!
//! Device plugin: wait for the kubelet's `kubelet.sock`, serve the plugin on
//! `<dir>/<name>.sock`, call `Register`; when `kubelet.sock` is recreated (a restarted kubelet
//! wipes the directory) or the plugin's own socket disappears, serve again and re-register —
//! what NVIDIA's plugin does on the socket's create event. A registration the kubelet refuses
//! ends the plugin, as the API asks.
//!
//! DRA plugin: serve `pluginregistration.Registration` on
//! `<registry>/<driver>-reg.sock` (GetInfo names the driver and its `dra.sock`;
//! NotifyRegistrationStatus reports the kubelet's verdict) and both DRAPlugin versions on
//! `<plugins>/<driver>/dra.sock`; a socket removed under it is served again, so a restarted
//! kubelet's plugin watcher finds it and registers it anew.
//!
//! Polls at an interval instead of watching the filesystem: one `stat` per interval.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tonic::transport::Server;
use tonic::{Request, Response, Status};

use crate::device_plugin::{self, GpuDevicePlugin};
use crate::dra_plugin::{ClaimSource, DraKubeletPlugin};
use crate::proto::deviceplugin::{
    RegisterRequest, device_plugin_server::DevicePluginServer,
    registration_client::RegistrationClient,
};
use crate::proto::pluginregistration::{
    self as registration, InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
    registration_server::RegistrationServer,
};
use crate::proto::{dra_v1, dra_v1beta1};
use crate::socket::{self, FileIdentity, SocketError};

/// The kubelet's registration socket in the device-plugin directory.
pub const KUBELET_SOCKET: &str = "kubelet.sock";
/// The plugin type DRA plugins register as.
pub const DRA_PLUGIN_TYPE: &str = "DRAPlugin";
/// The DRA API versions served, newest first.
pub const DRA_VERSIONS: [&str; 2] = ["v1.DRAPlugin", "v1beta1.DRAPlugin"];

/// Why a plugin stopped.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// A socket could not be served or dialed.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// The kubelet refused the registration.
    #[error("the kubelet refused to register {resource}: {message}")]
    Refused {
        /// The resource name.
        resource: String,
        /// The kubelet's reason.
        message: String,
    },
    /// The gRPC server failed.
    #[error("gRPC server on {path}: {source}")]
    Serve {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: tonic::transport::Error,
    },
}

/// Where a device plugin lives.
#[derive(Debug, Clone)]
pub struct DevicePluginEndpoint {
    /// The kubelet's device-plugin directory (`/var/lib/kubelet/device-plugins`).
    pub dir: PathBuf,
    /// The plugin's socket file name in it (`nvidia-gpu.sock`).
    pub socket_name: String,
    /// How often sockets are checked.
    pub poll: Duration,
}

/// How long open calls may run once a server is told to stop.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// A running server and how to stop it.
struct Serving {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    path: PathBuf,
    bound: FileIdentity,
}

impl Serving {
    fn start(router: tonic::transport::server::Router, path: PathBuf) -> Result<Self, PluginError> {
        let (listener, bound) = socket::bind(&path)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(socket::serve(router, listener, async {
            let _ = stopped.await;
        }));
        Ok(Serving {
            stop,
            task,
            path,
            bound,
        })
    }

    fn intact(&self) -> bool {
        socket::identity(&self.path) == Some(self.bound) && !self.task.is_finished()
    }

    /// Stops serving: open calls get [`SHUTDOWN_GRACE`] to finish (a `ListAndWatch` stream
    /// never does), then the server is dropped and its socket file removed.
    async fn finish(mut self) -> Result<(), PluginError> {
        let _ = self.stop.send(());
        let result = match tokio::time::timeout(SHUTDOWN_GRACE, &mut self.task).await {
            Ok(Ok(Err(source))) => Err(PluginError::Serve {
                path: self.path.clone(),
                source,
            }),
            Ok(_) => Ok(()),
            Err(_) => {
                self.task.abort();
                Ok(())
            }
        };
        socket::remove_if_ours(&self.path, self.bound);
        result
    }
}

/// Serves `plugin` and keeps it registered until `shutdown` resolves.
pub async fn run_device_plugin(
    plugin: GpuDevicePlugin,
    endpoint: DevicePluginEndpoint,
    shutdown: impl Future<Output = ()>,
) -> Result<(), PluginError> {
    let kubelet = endpoint.dir.join(KUBELET_SOCKET);
    let own = endpoint.dir.join(&endpoint.socket_name);
    tokio::pin!(shutdown);
    loop {
        // Wait for a kubelet.
        let kubelet_id = loop {
            if let Some(id) = socket::identity(&kubelet) {
                break id;
            }
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                () = tokio::time::sleep(endpoint.poll) => {}
            }
        };
        let router = Server::builder().add_service(DevicePluginServer::new(plugin.clone()));
        let serving = Serving::start(router, own.clone())?;
        match register(&kubelet, &endpoint.socket_name, plugin.resource_name()).await {
            Ok(()) => tracing::info!(
                resource = plugin.resource_name(),
                "registered with the kubelet"
            ),
            Err(RegisterFailure::Refused(message)) => {
                serving.finish().await?;
                return Err(PluginError::Refused {
                    resource: plugin.resource_name().to_string(),
                    message,
                });
            }
            Err(RegisterFailure::Unreachable(error)) => {
                // The kubelet went away between stat and dial: start over.
                tracing::warn!(%error, "kubelet unreachable; retrying");
                serving.finish().await?;
                tokio::time::sleep(endpoint.poll).await;
                continue;
            }
        }
        // Serve until the kubelet restarts or our socket goes.
        loop {
            tokio::select! {
                () = &mut shutdown => return serving.finish().await,
                () = tokio::time::sleep(endpoint.poll) => {}
            }
            if socket::identity(&kubelet) != Some(kubelet_id) || !serving.intact() {
                tracing::info!("kubelet restarted or plugin socket removed; registering again");
                serving.finish().await?;
                break;
            }
        }
    }
}

enum RegisterFailure {
    Refused(String),
    Unreachable(String),
}

async fn register(
    kubelet: &Path,
    socket_name: &str,
    resource: &str,
) -> Result<(), RegisterFailure> {
    let channel = socket::connect(kubelet)
        .await
        .map_err(|e| RegisterFailure::Unreachable(e.to_string()))?;
    RegistrationClient::new(channel)
        .register(RegisterRequest {
            version: device_plugin::API_VERSION.into(),
            endpoint: socket_name.into(),
            resource_name: resource.into(),
            options: Some(device_plugin::options()),
        })
        .await
        .map(|_| ())
        .map_err(|status| match status.code() {
            tonic::Code::Unavailable => RegisterFailure::Unreachable(status.message().into()),
            _ => RegisterFailure::Refused(status.message().into()),
        })
}

/// Where a DRA plugin lives.
#[derive(Debug, Clone)]
pub struct DraEndpoint {
    /// The kubelet's plugin registry (`/var/lib/kubelet/plugins_registry`).
    pub registry_dir: PathBuf,
    /// The plugin's own directory (`/var/lib/kubelet/plugins/<driver>`).
    pub plugin_dir: PathBuf,
    /// How often sockets are checked.
    pub poll: Duration,
}

/// The registration service a DRA plugin offers the kubelet's plugin watcher.
#[derive(Clone)]
pub struct RegistrationService {
    info: PluginInfo,
    status: watch::Sender<Option<RegistrationStatus>>,
}

impl RegistrationService {
    /// Registration of DRA driver `driver` served at `endpoint`.
    pub fn dra(driver: &str, endpoint: &Path) -> Self {
        RegistrationService {
            info: PluginInfo {
                r#type: DRA_PLUGIN_TYPE.into(),
                name: driver.into(),
                endpoint: endpoint.display().to_string(),
                supported_versions: DRA_VERSIONS.iter().map(|v| v.to_string()).collect(),
            },
            status: watch::Sender::new(None),
        }
    }

    /// The kubelet's latest verdict, if any.
    pub fn status(&self) -> watch::Receiver<Option<RegistrationStatus>> {
        self.status.subscribe()
    }
}

#[tonic::async_trait]
impl registration::registration_server::Registration for RegistrationService {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        if status.plugin_registered {
            tracing::info!(driver = %self.info.name, "registered with the kubelet");
        } else {
            tracing::error!(driver = %self.info.name, error = %status.error, "the kubelet refused the registration");
        }
        self.status.send_replace(Some(status));
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// The socket paths a DRA plugin serves: (registration, plugin).
pub fn dra_sockets(driver: &str, endpoint: &DraEndpoint) -> (PathBuf, PathBuf) {
    (
        endpoint.registry_dir.join(format!("{driver}-reg.sock")),
        endpoint.plugin_dir.join("dra.sock"),
    )
}

/// Serves `plugin` and its registration until `shutdown` resolves, serving a socket again
/// whenever it is removed.
pub async fn run_dra_plugin<S: ClaimSource>(
    plugin: DraKubeletPlugin<S>,
    registration: RegistrationService,
    driver: &str,
    endpoint: DraEndpoint,
    shutdown: impl Future<Output = ()>,
) -> Result<(), PluginError> {
    let (registration_path, plugin_path) = dra_sockets(driver, &endpoint);
    tokio::pin!(shutdown);
    loop {
        let serve_plugin = Server::builder()
            .add_service(dra_v1::dra_plugin_server::DraPluginServer::new(
                plugin.clone(),
            ))
            .add_service(dra_v1beta1::dra_plugin_server::DraPluginServer::new(
                plugin.clone(),
            ));
        let plugin_serving = Serving::start(serve_plugin, plugin_path.clone())?;
        let serve_registration =
            Server::builder().add_service(RegistrationServer::new(registration.clone()));
        let registration_serving = Serving::start(serve_registration, registration_path.clone())?;
        loop {
            tokio::select! {
                () = &mut shutdown => {
                    registration_serving.finish().await?;
                    return plugin_serving.finish().await;
                }
                () = tokio::time::sleep(endpoint.poll) => {}
            }
            if !plugin_serving.intact() || !registration_serving.intact() {
                tracing::info!(driver, "a plugin socket was removed; serving again");
                registration_serving.finish().await?;
                plugin_serving.finish().await?;
                break;
            }
        }
    }
}
