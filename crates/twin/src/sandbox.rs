//! The kubelet's sandbox step on the twins' nodes: a pod's RuntimeClass looked up (as the
//! kubelet's RuntimeClass manager does) and its handler asked of the node's runtime; a pod
//! whose sandbox cannot be created stays Pending (ContainerCreating) with
//! `FailedCreatePodSandBox` warnings — counted up by the twins' event recorder — and is tried
//! again after the pod worker's back-off.
//!
//! Knows the API calls and the timers; the decision, the messages and the back-off come from
//! `tessera_node::runtime_handlers`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tessera_node::pod_status;
use tessera_node::runtime_handlers::{
    ClassLookup, FAILED_CREATE_POD_SANDBOX, retry_after, sandbox_handler,
};
use tessera_node::topology::NodeSpec;
use tokio::sync::mpsc;

use crate::twins::{NodeTwins, PodRetry};

/// One pod's failed sandbox: how many tries failed, and whether a retry is pending (the pod's
/// watch events wait for it, as the kubelet's pod worker does).
#[derive(Debug, Default)]
struct Wait {
    failures: u32,
    armed: bool,
}

/// The pods whose sandbox failed, by UID, and where their retries are sent.
pub(crate) struct Sandboxes {
    waits: std::sync::Mutex<BTreeMap<String, Wait>>,
    retry: mpsc::UnboundedSender<PodRetry>,
}

impl Sandboxes {
    /// No failed sandboxes; retries come out of the returned receiver.
    pub(crate) fn new() -> (Sandboxes, mpsc::UnboundedReceiver<PodRetry>) {
        let (retry, receiver) = mpsc::unbounded_channel();
        let sandboxes = Sandboxes {
            waits: std::sync::Mutex::default(),
            retry,
        };
        (sandboxes, receiver)
    }

    fn waits(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Wait>> {
        self.waits.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A retry for `uid` is due: its next reconcile tries the sandbox again.
    pub(crate) fn due(&self, uid: &str) {
        if let Some(wait) = self.waits().get_mut(uid) {
            wait.armed = false;
        }
    }

    /// The pod `uid` went away.
    pub(crate) fn forget(&self, uid: &str) {
        self.waits().remove(uid);
    }
}

impl NodeTwins {
    /// Whether the pod's sandbox exists or was created now on `spec`'s node; when it cannot
    /// be, records the kubelet's `FailedCreatePodSandBox` warning, shows the pod
    /// ContainerCreating, and arms the retry.
    pub(crate) async fn sandbox_created(
        &self,
        pod: &Pod,
        spec: &NodeSpec,
        key: &(String, String),
        uid: &str,
    ) -> Result<bool, kube::Error> {
        let class = pod
            .spec
            .as_ref()
            .and_then(|s| s.runtime_class_name.as_deref())
            .filter(|name| !name.is_empty());
        let Some(class) = class else {
            return Ok(true);
        };
        if self
            .sandboxes
            .waits()
            .get(uid)
            .is_some_and(|wait| wait.armed)
        {
            return Ok(false);
        }
        let found = Api::<RuntimeClass>::all(self.client.clone())
            .get_opt(class)
            .await?;
        let lookup = match &found {
            Some(found) => ClassLookup::Handler(found.handler.as_str()),
            None => ClassLookup::Missing(class),
        };
        let message = match sandbox_handler(lookup, &spec.runtime_handlers) {
            Ok(_) => {
                self.sandboxes.forget(uid);
                return Ok(true);
            }
            Err(message) => message,
        };
        let failures = {
            let mut waits = self.sandboxes.waits();
            let wait = waits.entry(uid.to_string()).or_default();
            wait.armed = true;
            wait.failures += 1;
            wait.failures
        };
        self.event(
            pod,
            &spec.name,
            "Warning",
            FAILED_CREATE_POD_SANDBOX,
            &message,
            None,
        )
        .await;
        if failures == 1 {
            let status = pod_status::creating_status(pod, spec, (self.clock)());
            Api::<Pod>::namespaced(self.client.clone(), &key.0)
                .patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
        }
        let after = retry_after(uid, failures);
        let retry = PodRetry {
            namespace: key.0.clone(),
            name: key.1.clone(),
            uid: uid.to_string(),
        };
        let sender = self.sandboxes.retry.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = sender.send(retry);
        });
        Ok(false)
    }
}
