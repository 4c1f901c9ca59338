//! Container runtime handlers: the handlers a node's runtime has (a topology pool's
//! `runtimeHandlers`, by default `runc` everywhere plus `nvidia` on GPU pools), what the Node
//! publishes of them (`status.runtimeHandlers`, as containerd reports them to the kubelet:
//! the default handler under the empty name first), the label kata-deploy gives nodes with
//! Kata Containers, the RuntimeClasses `tessera up` bundles (NVIDIA GPU Operator's `nvidia`,
//! a kata-deploy-style `kata`), and the kubelet's sandbox step for a pod: its RuntimeClass's
//! handler looked up (`runtimeclass.Manager.LookupRuntimeHandler`), the runtime asked for it
//! (containerd's `no runtime for … is configured`), the `FailedCreatePodSandBox` message and
//! the pod worker's retry period.
//!
//! Pure: the twins look the class up and carry the decision out. Knows nothing of the API
//! server, admission or scheduling (the RuntimeClass's overhead and node selector are
//! admission's, `tessera_api::runtime_class`).

use std::time::Duration;

use serde_json::{Value, json};

/// The handler every node's runtime has (containerd's default runtime).
pub const RUNC: &str = "runc";
/// NVIDIA Container Toolkit's handler, which the GPU Operator configures on GPU nodes.
pub const NVIDIA: &str = "nvidia";
/// Kata Containers' QEMU handler, as kata-deploy configures it.
pub const KATA_QEMU: &str = "kata-qemu";
/// The label kata-deploy puts on the nodes it installed Kata Containers on.
pub const KATA_LABEL: &str = "katacontainers.io/kata-runtime";
/// The kubelet's event reason when a pod's sandbox cannot be created.
pub const FAILED_CREATE_POD_SANDBOX: &str = "FailedCreatePodSandBox";
/// The kubelet's pod worker requeues a failed sync after this period (`backOffPeriod`),
/// jittered (see [`retry_after`]).
pub const BACKOFF_PERIOD: Duration = Duration::from_secs(10);

/// The handlers of a pool that lists none: `runc`, and `nvidia` where the nodes have GPUs.
pub fn default_handlers(has_gpus: bool) -> Vec<String> {
    let mut handlers = vec![RUNC.to_string()];
    if has_gpus {
        handlers.push(NVIDIA.to_string());
    }
    handlers
}

/// Whether `handler` is one of Kata Containers' (`kata`, `kata-qemu`, `kata-clh`, …).
pub fn is_kata(handler: &str) -> bool {
    handler == "kata" || handler.starts_with("kata-")
}

/// Labels a node with `handlers` carries: kata-deploy's `katacontainers.io/kata-runtime:
/// "true"` where one is Kata's.
pub fn labels(handlers: &[String]) -> Vec<(String, String)> {
    if handlers.iter().any(|h| is_kata(h)) {
        vec![(KATA_LABEL.to_string(), "true".to_string())]
    } else {
        Vec::new()
    }
}

/// A handler in `status.runtimeHandlers`: its name and the features the runtime reports
/// (runc-based handlers support recursive read-only mounts and user namespaces; Kata's VMs
/// report neither).
fn handler_entry(name: &str) -> Value {
    let supported = !is_kata(name);
    json!({"name": name, "features": {
        "recursiveReadOnlyMounts": supported,
        "userNamespaces": supported,
    }})
}

/// The node's `status.runtimeHandlers`: the default handler (the first of `handlers`) under
/// the empty name, then each handler by name, as containerd reports them.
pub fn node_status_handlers(handlers: &[String]) -> Value {
    let mut entries = Vec::new();
    if let Some(default) = handlers.first() {
        let mut entry = handler_entry(default);
        entry["name"] = json!("");
        entries.push(entry);
    }
    entries.extend(handlers.iter().map(|h| handler_entry(h)));
    Value::Array(entries)
}

/// The RuntimeClasses `tessera up` creates: `nvidia` (handler `nvidia`, as the GPU Operator
/// creates it) and `kata` (handler `kata-qemu`, with kata-deploy's overhead for QEMU and its
/// node selector).
pub fn bundled_classes() -> Vec<Value> {
    vec![
        json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "nvidia"}, "handler": NVIDIA}),
        json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "kata"}, "handler": KATA_QEMU,
            "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}},
            "scheduling": {"nodeSelector": {KATA_LABEL: "true"}}}),
    ]
}

/// What the kubelet found of a pod's RuntimeClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassLookup<'a> {
    /// The pod names no class: the runtime's default handler.
    NoClass,
    /// The class exists, with this handler.
    Handler(&'a str),
    /// The pod names a class the kubelet does not find.
    Missing(&'a str),
}

/// The sandbox step: the handler the pod's sandbox runs with (`""` for the default), or the
/// `FailedCreatePodSandBox` event message when it cannot be created on a node whose runtime
/// has `handlers`.
pub fn sandbox_handler<'a>(
    lookup: ClassLookup<'a>,
    handlers: &[String],
) -> Result<&'a str, String> {
    match lookup {
        ClassLookup::NoClass => Ok(""),
        ClassLookup::Missing(name) => Err(format!(
            "Failed to create pod sandbox: runtimeclass.node.k8s.io \"{name}\" not found"
        )),
        ClassLookup::Handler("") => Ok(""),
        ClassLookup::Handler(handler) if handlers.iter().any(|h| h == handler) => Ok(handler),
        ClassLookup::Handler(handler) => Err(format!(
            "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \"{handler}\" is configured"
        )),
    }
}

/// When the kubelet tries a failed sandbox again: [`BACKOFF_PERIOD`] jittered by up to half
/// of it (`wait.Jitter(backOffPeriod, 0.5)`), the jitter drawn from `seed` (the pod's UID and
/// attempt) so the same attempt always waits the same.
pub fn retry_after(seed: &str, attempt: u32) -> Duration {
    // FNV-1a over the seed and the attempt: a stable, evenly spread fraction.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.bytes().chain(attempt.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let half = BACKOFF_PERIOD.as_millis() as u64 / 2;
    BACKOFF_PERIOD + Duration::from_millis(hash % (half + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_kubelet_creates_a_sandbox_only_with_a_handler_its_runtime_has() {
        let gpu = default_handlers(true);
        let cpu = default_handlers(false);
        let kata = names(&[RUNC, KATA_QEMU]);
        let runtime = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for";
        // (lookup, node handlers, want)
        let cases: Vec<(ClassLookup, &Vec<String>, Result<&str, String>)> = vec![
            (ClassLookup::NoClass, &cpu, Ok("")),
            (ClassLookup::Handler(NVIDIA), &gpu, Ok(NVIDIA)),
            (
                ClassLookup::Handler(NVIDIA),
                &cpu,
                Err(format!("{runtime} \"nvidia\" is configured")),
            ),
            (ClassLookup::Handler(KATA_QEMU), &kata, Ok(KATA_QEMU)),
            (
                ClassLookup::Handler(KATA_QEMU),
                &gpu,
                Err(format!("{runtime} \"kata-qemu\" is configured")),
            ),
            (ClassLookup::Handler(RUNC), &cpu, Ok(RUNC)),
            (
                ClassLookup::Missing("gone"),
                &cpu,
                Err(
                    "Failed to create pod sandbox: runtimeclass.node.k8s.io \"gone\" not found"
                        .into(),
                ),
            ),
        ];
        for (lookup, handlers, want) in cases {
            assert_eq!(
                sandbox_handler(lookup.clone(), handlers),
                want,
                "{lookup:?} on {handlers:?}"
            );
        }
    }

    #[test]
    fn nodes_publish_their_handlers_with_the_default_first() {
        let status = node_status_handlers(&names(&[RUNC, NVIDIA, KATA_QEMU]));
        let listed: Vec<&str> = status
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h["name"].as_str())
            .collect();
        assert_eq!(listed, ["", RUNC, NVIDIA, KATA_QEMU]);
        assert_eq!(status[0]["features"]["userNamespaces"], true);
        assert_eq!(status[3]["features"]["recursiveReadOnlyMounts"], false);
        assert_eq!(node_status_handlers(&[]), json!([]));
    }

    #[test]
    fn kata_nodes_carry_kata_deploys_label() {
        // (handlers, labelled)
        let cases = [
            (names(&[RUNC]), false),
            (names(&[RUNC, NVIDIA]), false),
            (names(&[RUNC, KATA_QEMU]), true),
            (names(&["kata"]), true),
            (names(&["katana"]), false),
        ];
        for (handlers, labelled) in cases {
            let want = if labelled {
                vec![(KATA_LABEL.to_string(), "true".to_string())]
            } else {
                vec![]
            };
            assert_eq!(labels(&handlers), want, "{handlers:?}");
        }
    }

    #[test]
    fn the_bundled_kata_class_selects_kata_nodes_and_carries_overhead() {
        let classes = bundled_classes();
        let kata = classes
            .iter()
            .find(|c| c["metadata"]["name"] == "kata")
            .expect("kata");
        assert_eq!(kata["handler"], KATA_QEMU);
        assert_eq!(kata["scheduling"]["nodeSelector"][KATA_LABEL], "true");
        assert_eq!(kata["overhead"]["podFixed"]["memory"], "160Mi");
        let nvidia = classes
            .iter()
            .find(|c| c["metadata"]["name"] == "nvidia")
            .expect("nvidia");
        assert_eq!(nvidia["handler"], NVIDIA);
        // The kata nodes' label is what the class selects.
        assert_eq!(
            labels(&names(&[KATA_QEMU]))[0],
            (KATA_LABEL.to_string(), "true".to_string())
        );
    }

    #[test]
    fn retries_wait_the_pod_workers_jittered_back_off() {
        for attempt in 0..50 {
            let wait = retry_after("uid-1", attempt);
            assert!(
                wait >= BACKOFF_PERIOD && wait <= BACKOFF_PERIOD * 3 / 2,
                "{wait:?}"
            );
            assert_eq!(wait, retry_after("uid-1", attempt), "stable");
        }
        let spread: std::collections::BTreeSet<Duration> =
            (0..20).map(|a| retry_after("uid-1", a)).collect();
        assert!(spread.len() > 10, "{spread:?}");
    }
}
