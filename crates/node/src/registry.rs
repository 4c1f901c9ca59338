//! The platform's image registry as the cluster sees it: the host images name
//! (`registry.tessera-system.svc:5000`), the objects `tessera up` publishes for it — namespace
//! `tessera-system`, the selector-less Service `registry` on port 5000, its EndpointSlice at
//! an address of the pod range no node is given (the range's last usable one), the ConfigMap
//! with the addresses and the `kubernetes.io/dockerconfigjson` pull Secret — the registry as
//! the pod NetworkPolicy sees behind that endpoint (namespace `tessera-system`, labels
//! `app.kubernetes.io/name: tessera-registry`, port 5000), and the kubelet's verdict on a
//! pull from it: dropped on the way (containerd's `dial tcp …: i/o timeout`), refused
//! credentials, unknown repository or tag (`not found`), or the image's size from its
//! manifest.
//!
//! Pure: the registry's contents, the network's verdict and the pod's credentials are
//! inputs. Knows nothing of the registry's files or HTTP, or of how policy is evaluated.

use std::net::Ipv4Addr;

use serde_json::{Value, json};
use tessera_model::net::Ipv4Cidr;

use crate::images::{ImageRef, PullError};

/// The namespace the registry's objects live in.
pub const NAMESPACE: &str = "tessera-system";
/// The registry's Service (and EndpointSlice, ConfigMap) name.
pub const SERVICE: &str = "registry";
/// The port the Service and the registry listen on.
pub const PORT: u16 = 5000;
/// The host (with port) images name to be pulled from the registry.
pub const HOST: &str = "registry.tessera-system.svc:5000";
/// The label that marks the registry to NetworkPolicy selectors.
pub const APP_LABEL: &str = "app.kubernetes.io/name";
/// [`APP_LABEL`]'s value.
pub const APP: &str = "tessera-registry";
/// The registry's name as a pod behind the Service.
pub const POD_NAME: &str = "tessera-registry";
/// The EndpointSlice's `endpointslice.kubernetes.io/managed-by` (the endpoint controller
/// leaves it alone).
pub const MANAGED_BY: &str = "registry.tessera.dev";
/// The pull Secret's name (in [`NAMESPACE`]; copy it where pods pull).
pub const PULL_SECRET: &str = "registry-pull";
/// The ConfigMap key of the in-cluster host.
pub const HOST_KEY: &str = "host";
/// The ConfigMap key of the pull Secret's name.
pub const PULL_SECRET_KEY: &str = "pullSecret";

/// The address the registry holds on the pod network: the pod range's last usable address
/// (nodes are given `/24`s from the start of the range).
pub fn endpoint_address(pod_cidr: Ipv4Cidr) -> Ipv4Addr {
    let size = u32::try_from(pod_cidr.size()).unwrap_or(u32::MAX);
    pod_cidr.address(size.saturating_sub(2))
}

/// Namespace `tessera-system`.
pub fn namespace() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"kubernetes.io/metadata.name": NAMESPACE}}})
}

fn labels() -> Value {
    json!({APP_LABEL: APP, "app.kubernetes.io/managed-by": "tessera"})
}

/// The selector-less Service `tessera-system/registry`, port 5000/TCP.
pub fn service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": labels()},
        "spec": {"type": "ClusterIP", "sessionAffinity": "None",
            "ports": [{"name": "registry", "port": PORT, "protocol": "TCP", "targetPort": PORT}]}})
}

/// The Service's EndpointSlice: one ready endpoint at `address`.
pub fn endpoint_slice(address: Ipv4Addr) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": {
            "kubernetes.io/service-name": SERVICE,
            "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
            APP_LABEL: APP}},
        "addressType": "IPv4",
        "ports": [{"name": "registry", "port": PORT, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address.to_string()],
            "conditions": {"ready": true, "serving": true, "terminating": false}}]})
}

/// The registry as a pod at `address`, as the dataplane and NetworkPolicy see it.
pub fn host_pod(address: Ipv4Addr) -> Value {
    let address = address.to_string();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": NAMESPACE, "name": POD_NAME, "labels": labels()},
        "spec": {"containers": [{"name": "registry",
            "ports": [{"name": "registry", "containerPort": PORT, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "podIP": address, "podIPs": [{"ip": address}]}})
}

/// The registry pods behind the registry's EndpointSlices among `slices` (none when
/// `tessera up` publishes no registry).
pub fn host_pods(slices: &[Value]) -> Vec<Value> {
    slices
        .iter()
        .filter(|s| {
            s.pointer("/metadata/namespace").and_then(Value::as_str) == Some(NAMESPACE)
                && s.pointer("/metadata/labels/endpointslice.kubernetes.io~1managed-by")
                    .and_then(Value::as_str)
                    == Some(MANAGED_BY)
        })
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
        .flat_map(|e| e["addresses"].as_array().into_iter().flatten())
        .filter_map(|a| a.as_str()?.parse().ok())
        .map(host_pod)
        .collect()
}

/// A `.dockerconfigjson` with `user`/`password` for [`HOST`] (and any other `hosts`).
pub fn docker_config_json(hosts: &[&str], user: &str, password: &str) -> String {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let auths: serde_json::Map<String, Value> = hosts
        .iter()
        .map(|host| {
            (
                (*host).to_string(),
                json!({"username": user, "password": password, "auth": auth}),
            )
        })
        .collect();
    json!({"auths": auths}).to_string()
}

/// The pull Secret `name` in `namespace` holding `config` (a `.dockerconfigjson`).
pub fn pull_secret(namespace: &str, name: &str, config: &str) -> Value {
    use base64::Engine;
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels()},
        "type": crate::images::DOCKER_CONFIG_JSON_TYPE,
        "data": {crate::images::DOCKER_CONFIG_JSON_KEY:
            base64::engine::general_purpose::STANDARD.encode(config)}})
}

/// The ConfigMap that says how to reach the registry in the cluster: [`HOST_KEY`] and the
/// pull Secret's name ([`PULL_SECRET_KEY`]). (The machine's endpoint changes with each start
/// on a free port; `tessera up` writes it to a file instead.)
pub fn config_map() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "labels": labels()},
        "data": {HOST_KEY: HOST, PULL_SECRET_KEY: PULL_SECRET}})
}

/// Whether `image` is pulled from the platform's registry.
pub fn is_registry_image(image: &ImageRef) -> bool {
    image.registry == HOST
}

/// How the node's connection to the registry fared on the simulated network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// It connected.
    Connected,
    /// It was dropped on the way to `address` (the Service's address as dialled).
    Dropped { address: Ipv4Addr },
    /// The registry's Service does not exist: the name does not resolve.
    NoService,
}

/// What the registry holds under the image's repository and tag or digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// The image, of this many bytes (config and layers).
    Found(u64),
    /// No such repository, tag or digest.
    Unknown,
}

/// The manifest URL containerd asks for `image` (plain HTTP: the registry serves no TLS).
pub fn manifest_url(image: &ImageRef) -> String {
    let object = image
        .digest
        .clone()
        .or_else(|| image.tag.clone())
        .unwrap_or_else(|| crate::images::DEFAULT_TAG.to_string());
    format!(
        "http://{}/v2/{}/manifests/{object}",
        image.registry, image.repository
    )
}

/// The kubelet's pull of `image` from the registry: the network first, then the
/// credentials (`credentials`: the pairs the pod's pull secrets hold for the host;
/// `expected`: the registry's), then the contents.
pub fn pull_verdict(
    image: &ImageRef,
    reach: Reach,
    credentials: &[(String, String)],
    expected: (&str, &str),
    contents: Contents,
) -> Result<u64, PullError> {
    let reference = image.canonical();
    match reach {
        Reach::Connected => {}
        Reach::Dropped { address } => {
            return Err(PullError::Timeout {
                reference,
                url: manifest_url(image),
                address: format!("{address}:{PORT}"),
            });
        }
        Reach::NoService => {
            return Err(PullError::unreachable(image));
        }
    }
    if credentials.is_empty() {
        return Err(PullError::Unauthorized { reference });
    }
    if !credentials
        .iter()
        .any(|(user, password)| user == expected.0 && password == expected.1)
    {
        return Err(PullError::Denied {
            reference,
            url: manifest_url(image),
        });
    }
    match contents {
        Contents::Found(size) => Ok(size),
        Contents::Unknown => Err(PullError::NotFound { reference }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(text: &str) -> ImageRef {
        ImageRef::parse(text).unwrap()
    }

    #[test]
    fn the_registry_takes_the_last_address_of_the_pod_range() {
        let cidr: Ipv4Cidr = "10.244.0.0/16".parse().unwrap();
        assert_eq!(
            endpoint_address(cidr),
            "10.244.255.254".parse::<Ipv4Addr>().unwrap()
        );
        let slice = endpoint_slice(endpoint_address(cidr));
        let pods = host_pods(&[slice.clone(), json!({"metadata": {"namespace": "x"}})]);
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0]["status"]["podIP"], "10.244.255.254");
        assert_eq!(pods[0]["metadata"]["labels"][APP_LABEL], APP);
        assert_eq!(
            pods[0]["spec"]["containers"][0]["ports"][0]["containerPort"],
            PORT
        );
        // A slice of the same name the endpoint controller manages is not the registry.
        let mut other = slice;
        other["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] =
            json!("endpointslice-controller.k8s.io");
        assert!(host_pods(&[other]).is_empty());
        assert_eq!(service()["spec"].get("selector"), None);
    }

    #[test]
    fn the_pull_secret_carries_the_credential_the_kubelet_reads() {
        let config = docker_config_json(&[HOST], "TSRAUSER", "pa:ss");
        let secret = pull_secret("default", "regcred", &config);
        assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
        let found = crate::images::secrets_credentials(
            &[config.into_bytes()],
            &image(&format!("{HOST}/team/app:v1")),
        );
        assert_eq!(found, [("TSRAUSER".to_string(), "pa:ss".to_string())]);
        assert!(
            crate::images::secrets_credentials(
                &[docker_config_json(&["other:5000"], "u", "p").into_bytes()],
                &image(&format!("{HOST}/team/app:v1"))
            )
            .is_empty()
        );
    }

    #[test]
    fn pulls_fail_as_containerd_reports_them() {
        let app = image(&format!("{HOST}/team/app:v1"));
        let right = vec![("u".to_string(), "p".to_string())];
        let wrong = vec![("u".to_string(), "x".to_string())];
        let address: Ipv4Addr = "10.96.0.42".parse().unwrap();
        type Case<'a> = (
            Reach,
            &'a [(String, String)],
            Contents,
            Result<u64, &'a str>,
        );
        let cases: Vec<Case> = vec![
            (Reach::Connected, &right, Contents::Found(7), Ok(7)),
            (
                Reach::Dropped { address },
                &right,
                Contents::Found(7),
                Err(
                    "failed to do request: Head \"http://registry.tessera-system.svc:5000/v2/team/app/manifests/v1\": dial tcp 10.96.0.42:5000: i/o timeout",
                ),
            ),
            (
                Reach::NoService,
                &right,
                Contents::Found(7),
                Err("dial tcp: lookup registry.tessera-system.svc: i/o timeout"),
            ),
            (
                Reach::Connected,
                &[],
                Contents::Found(7),
                Err("pull access denied"),
            ),
            (
                Reach::Connected,
                &wrong,
                Contents::Found(7),
                Err(
                    "unexpected status from HEAD request to http://registry.tessera-system.svc:5000/v2/team/app/manifests/v1: 401 Unauthorized",
                ),
            ),
            (
                Reach::Connected,
                &right,
                Contents::Unknown,
                Err(
                    "code = NotFound desc = failed to pull and unpack image \"registry.tessera-system.svc:5000/team/app:v1\": failed to resolve reference \"registry.tessera-system.svc:5000/team/app:v1\": registry.tessera-system.svc:5000/team/app:v1: not found",
                ),
            ),
        ];
        for (reach, credentials, contents, want) in cases {
            let got = pull_verdict(&app, reach, credentials, ("u", "p"), contents)
                .map_err(|e| e.message());
            match (got, want) {
                (Ok(size), Ok(want)) => assert_eq!(size, want),
                (Err(message), Err(want)) => {
                    assert!(message.contains(want), "{message} lacks {want}")
                }
                (got, want) => panic!("{reach:?}: {got:?} vs {want:?}"),
            }
        }
        assert!(is_registry_image(&app));
        assert!(!is_registry_image(&image("nginx")));
    }
}
