//! The DRA kubelet plugin service (`v1.DRAPlugin`, and `v1beta1.DRAPlugin` for kubelets
//! 1.32–1.33): NodePrepareResources reads each claim, checks its allocation against this node
//! ([`tessera_node::dra_claims::plan`]), writes a CDI spec per claim and answers the CDI device IDs;
//! NodeUnprepareResources removes the spec. Prepared claims are checkpointed to a file so
//! both calls stay idempotent across plugin restarts. Per-claim failures travel in the
//! response's `error`, as the kubelet expects, never as a failed call.
//!
//! Knows nothing of sockets or registration ([`crate::lifecycle`]), nor of how claims are
//! fetched ([`ClaimSource`]: the API server in the agent, a table in tests).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;
use prost::Message;
use tokio::sync::Mutex;
use tonic::{Request, Response, Status};

use crate::cdi;
use crate::proto::{dra_v1 as v1, dra_v1beta1 as v1beta1};
use tessera_node::dra_claims::{self, Checkpoint, PreparedClaim};

/// Where a plugin reads ResourceClaims from.
pub trait ClaimSource: Send + Sync + 'static {
    /// The claim `namespace/name`, or why it cannot be read.
    fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<ResourceClaim, String>> + Send;
}

/// Claims read from an API server.
#[derive(Clone)]
pub struct ApiClaims(pub kube::Client);

impl ClaimSource for ApiClaims {
    async fn claim(&self, namespace: &str, name: &str) -> Result<ResourceClaim, String> {
        kube::Api::<ResourceClaim>::namespaced(self.0.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| format!("cannot read claim {namespace}/{name}: {e}"))
    }
}

/// A device the plugin can prepare, and what a container that gets it sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraDevice {
    /// Its name in the node's ResourceSlice (`gpu-0`).
    pub name: String,
    /// The container edits its CDI device carries.
    pub edits: cdi::ContainerEdits,
}

/// What the plugin serves.
#[derive(Debug, Clone)]
pub struct DraPluginSpec {
    /// The driver name (`gpu.nvidia.com`).
    pub driver: String,
    /// This node's name, the pool of its devices.
    pub node_name: String,
    /// Where CDI specs go (`/var/run/cdi`).
    pub cdi_dir: PathBuf,
    /// The checkpoint of prepared claims.
    pub checkpoint_path: PathBuf,
    /// The devices it publishes.
    pub devices: Vec<DraDevice>,
}

/// The DRA kubelet plugin; clones share state.
pub struct DraKubeletPlugin<S> {
    spec: Arc<DraPluginSpec>,
    claims: Arc<S>,
    prepared: Arc<Mutex<Checkpoint>>,
}

impl<S> Clone for DraKubeletPlugin<S> {
    fn clone(&self) -> Self {
        DraKubeletPlugin {
            spec: self.spec.clone(),
            claims: self.claims.clone(),
            prepared: self.prepared.clone(),
        }
    }
}

impl<S: ClaimSource> DraKubeletPlugin<S> {
    /// A plugin resuming from its checkpoint; an unreadable checkpoint is moved aside and
    /// reported as a warning (claims prepared before then must be cleaned up by hand).
    pub fn new(spec: DraPluginSpec, claims: S) -> (Self, Option<String>) {
        let (checkpoint, warning) = match std::fs::read(&spec.checkpoint_path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Checkpoint::default(), None),
            Err(e) => (
                Checkpoint::default(),
                Some(format!(
                    "cannot read checkpoint {}: {e}",
                    spec.checkpoint_path.display()
                )),
            ),
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(checkpoint) => (checkpoint, None),
                Err(e) => {
                    let aside = spec.checkpoint_path.with_extension("corrupt");
                    let _ = std::fs::rename(&spec.checkpoint_path, &aside);
                    (
                        Checkpoint::default(),
                        Some(format!(
                            "checkpoint {} is not valid ({e}); moved to {}",
                            spec.checkpoint_path.display(),
                            aside.display()
                        )),
                    )
                }
            },
        };
        let plugin = DraKubeletPlugin {
            spec: Arc::new(spec),
            claims: Arc::new(claims),
            prepared: Arc::new(Mutex::new(checkpoint)),
        };
        (plugin, warning)
    }

    /// The claims prepared now, by UID.
    pub async fn prepared(&self) -> Checkpoint {
        self.prepared.lock().await.clone()
    }

    fn spec_path(&self, uid: &str) -> PathBuf {
        cdi::spec_path(
            &self.spec.cdi_dir,
            &dra_claims::claim_cdi_kind(&self.spec.driver),
            uid,
        )
    }

    fn save(&self, checkpoint: &Checkpoint) -> Result<(), String> {
        let path = &self.spec.checkpoint_path;
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let temporary = path.with_extension("tmp");
            std::fs::write(&temporary, serde_json::to_vec(checkpoint)?)?;
            std::fs::rename(&temporary, path)
        };
        write().map_err(|e| format!("cannot write checkpoint {}: {e}", path.display()))
    }

    fn answer(&self, claim: &PreparedClaim) -> v1::NodePrepareResourceResponse {
        let kind = dra_claims::claim_cdi_kind(&self.spec.driver);
        v1::NodePrepareResourceResponse {
            devices: claim
                .devices
                .iter()
                .map(|d| v1::Device {
                    request_names: d.requests.clone(),
                    pool_name: d.pool.clone(),
                    device_name: d.device.clone(),
                    cdi_device_ids: vec![cdi::qualified_name(&kind, &d.cdi_name)],
                    share_id: None,
                })
                .collect(),
            error: String::new(),
        }
    }

    async fn prepare_one(
        &self,
        claim: &v1::Claim,
    ) -> Result<v1::NodePrepareResourceResponse, String> {
        if let Some(done) = self.prepared.lock().await.claims.get(&claim.uid) {
            return Ok(self.answer(done));
        }
        let object = self.claims.claim(&claim.namespace, &claim.name).await?;
        let known: Vec<&str> = self.spec.devices.iter().map(|d| d.name.as_str()).collect();
        let planned = dra_claims::plan(
            &object,
            &claim.uid,
            &self.spec.driver,
            &self.spec.node_name,
            &known,
        )?;
        let spec = cdi::Spec {
            cdi_version: cdi::CDI_VERSION.into(),
            kind: dra_claims::claim_cdi_kind(&self.spec.driver),
            devices: planned
                .devices
                .iter()
                .map(|d| cdi::Device {
                    name: d.cdi_name.clone(),
                    container_edits: self
                        .spec
                        .devices
                        .iter()
                        .find(|known| known.name == d.device)
                        .map(|known| known.edits.clone())
                        .unwrap_or_default(),
                })
                .collect(),
        };
        let path = self.spec_path(&claim.uid);
        cdi::write(&path, &spec)
            .map_err(|e| format!("cannot write CDI spec {}: {e}", path.display()))?;
        let mut prepared = self.prepared.lock().await;
        prepared.claims.insert(claim.uid.clone(), planned.clone());
        self.save(&prepared)?;
        Ok(self.answer(&planned))
    }

    async fn unprepare_one(&self, claim: &v1::Claim) -> Result<(), String> {
        let path = self.spec_path(&claim.uid);
        cdi::remove(&path)
            .map_err(|e| format!("cannot remove CDI spec {}: {e}", path.display()))?;
        let mut prepared = self.prepared.lock().await;
        if prepared.claims.remove(&claim.uid).is_some() {
            self.save(&prepared)?;
        }
        Ok(())
    }

    /// NodePrepareResources: every claim gets an entry, with devices or an error.
    pub async fn prepare(&self, claims: Vec<v1::Claim>) -> v1::NodePrepareResourcesResponse {
        let mut answers = HashMap::new();
        for claim in claims {
            let answer = self.prepare_one(&claim).await.unwrap_or_else(|error| {
                tracing::warn!(claim = %claim.name, namespace = %claim.namespace, %error, "prepare failed");
                v1::NodePrepareResourceResponse {
                    devices: Vec::new(),
                    error,
                }
            });
            answers.insert(claim.uid, answer);
        }
        v1::NodePrepareResourcesResponse { claims: answers }
    }

    /// NodeUnprepareResources: every claim gets an entry, empty or with an error.
    pub async fn unprepare(&self, claims: Vec<v1::Claim>) -> v1::NodeUnprepareResourcesResponse {
        let mut answers = HashMap::new();
        for claim in claims {
            let error = self.unprepare_one(&claim).await.err().unwrap_or_default();
            answers.insert(claim.uid, v1::NodeUnprepareResourceResponse { error });
        }
        v1::NodeUnprepareResourcesResponse { claims: answers }
    }
}

#[tonic::async_trait]
impl<S: ClaimSource> v1::dra_plugin_server::DraPlugin for DraKubeletPlugin<S> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        Ok(Response::new(
            self.prepare(request.into_inner().claims).await,
        ))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        Ok(Response::new(
            self.unprepare(request.into_inner().claims).await,
        ))
    }
}

/// The v1beta1 messages are the v1 messages on the wire (less `share_id`, which v1beta1
/// kubelets never read), so the older API is served by re-encoding.
fn convert<From: Message, To: Message + Default>(message: &From) -> Result<To, Status> {
    To::decode(message.encode_to_vec().as_slice())
        .map_err(|e| Status::internal(format!("cannot convert between DRA API versions: {e}")))
}

#[tonic::async_trait]
impl<S: ClaimSource> v1beta1::dra_plugin_server::DraPlugin for DraKubeletPlugin<S> {
    async fn node_prepare_resources(
        &self,
        request: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        let request: v1::NodePrepareResourcesRequest = convert(request.get_ref())?;
        let response = self.prepare(request.claims).await;
        Ok(Response::new(convert(&response)?))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodeUnprepareResourcesResponse>, Status> {
        let request: v1::NodeUnprepareResourcesRequest = convert(request.get_ref())?;
        let response = self.unprepare(request.claims).await;
        Ok(Response::new(convert(&response)?))
    }
}
