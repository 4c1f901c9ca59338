//! A container's environment as the kubelet builds it: the image's `PATH`, `HOSTNAME`, the
//! container's own `env` (literal values and the pod fields `fieldRef` names), the Service
//! links of the pod's namespace (`<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT`, Docker's
//! `<NAME>_PORT_<port>_<PROTO>…`, after kubelet's `envvars.FromServices`), the device plugin's
//! `NVIDIA_VISIBLE_DEVICES`, and `HOME`. Knows no Secrets or ConfigMaps (`valueFrom` of
//! those is left out).

use serde_json::Value;
use tessera_model::json::text;

use crate::Session;

/// The kubelet's master-service namespace: its `kubernetes` Service is linked into every pod.
const MASTER_NAMESPACE: &str = "default";

/// The container's environment, in order, a later entry of a name replacing none before it.
pub fn environment(session: &Session<'_>) -> Vec<(String, String)> {
    let pod = session.pod;
    let container = container_spec(pod, session.container);
    let mut env = vec![
        (
            "PATH".to_string(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        ),
        ("HOSTNAME".to_string(), hostname(pod)),
    ];
    let mut own: Vec<(String, String)> = Vec::new();
    for var in container
        .and_then(|c| c.get("env"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = text(var, "/name").to_string();
        let value = match var.get("value") {
            Some(value) => value.as_str().unwrap_or_default().to_string(),
            None => match field_ref(pod, text(var, "/valueFrom/fieldRef/fieldPath")) {
                Some(value) => value,
                None => continue,
            },
        };
        own.push((name, value));
    }
    let links = service_links(pod, &session.cluster.services);
    for (name, value) in links {
        if !own.iter().any(|(n, _)| *n == name) {
            env.push((name, value));
        }
    }
    env.extend(own);
    if !session.gpus.is_empty() {
        let visible: Vec<&str> = session
            .gpus
            .iter()
            .map(|g| {
                g.mig
                    .as_ref()
                    .map_or(g.uuid.as_str(), |(_, uuid)| uuid.as_str())
            })
            .collect();
        env.push(("NVIDIA_VISIBLE_DEVICES".to_string(), visible.join(",")));
    }
    env.push(("HOME".to_string(), "/root".to_string()));
    env
}

/// The container's spec in its pod.
pub(crate) fn container_spec<'a>(pod: &'a Value, name: &str) -> Option<&'a Value> {
    ["/spec/containers", "/spec/initContainers"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .find(|c| text(c, "/name") == name)
}

/// The pod's host name: `spec.hostname`, else its name (at most 63 characters).
pub fn hostname(pod: &Value) -> String {
    let explicit = text(pod, "/spec/hostname");
    let name = if explicit.is_empty() {
        text(pod, "/metadata/name")
    } else {
        explicit
    };
    name.chars().take(63).collect()
}

fn field_ref(pod: &Value, path: &str) -> Option<String> {
    let pointer = match path {
        "metadata.name" => "/metadata/name",
        "metadata.namespace" => "/metadata/namespace",
        "metadata.uid" => "/metadata/uid",
        "spec.nodeName" => "/spec/nodeName",
        "spec.serviceAccountName" => "/spec/serviceAccountName",
        "status.podIP" => "/status/podIP",
        "status.hostIP" => "/status/hostIP",
        _ => return None,
    };
    Some(text(pod, pointer).to_string())
}

/// The Service environment variables of a pod: its namespace's Services with a ClusterIP
/// (when `enableServiceLinks` is not false) and the master `kubernetes` Service, by name.
pub fn service_links(pod: &Value, services: &[Value]) -> Vec<(String, String)> {
    let namespace = text(pod, "/metadata/namespace");
    let links = pod
        .pointer("/spec/enableServiceLinks")
        .and_then(Value::as_bool)
        != Some(false);
    let mut chosen: Vec<&Value> = services
        .iter()
        .filter(|s| {
            let ip = text(s, "/spec/clusterIP");
            !ip.is_empty() && ip != "None"
        })
        .filter(|s| {
            let (ns, name) = (text(s, "/metadata/namespace"), text(s, "/metadata/name"));
            (ns == MASTER_NAMESPACE && name == "kubernetes") || (links && ns == namespace)
        })
        .collect();
    chosen.sort_by_key(|s| {
        (
            text(s, "/metadata/name"),
            text(s, "/metadata/namespace") != namespace,
        )
    });
    chosen.dedup_by_key(|s| text(s, "/metadata/name"));
    chosen.into_iter().flat_map(service_variables).collect()
}

fn variable_name(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

fn service_variables(service: &Value) -> Vec<(String, String)> {
    let prefix = variable_name(text(service, "/metadata/name"));
    let ip = text(service, "/spec/clusterIP").to_string();
    let ports: Vec<&Value> = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let Some(first) = ports.first() else {
        return Vec::new();
    };
    let number = |p: &Value| {
        p.get("port")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            .to_string()
    };
    let mut vars = vec![
        (format!("{prefix}_SERVICE_HOST"), ip.clone()),
        (format!("{prefix}_SERVICE_PORT"), number(first)),
    ];
    for port in &ports {
        let name = text(port, "/name");
        if !name.is_empty() {
            vars.push((
                format!("{prefix}_SERVICE_PORT_{}", variable_name(name)),
                number(port),
            ));
        }
    }
    for (i, port) in ports.iter().enumerate() {
        let protocol = match text(port, "/protocol") {
            "" => "TCP",
            other => other,
        };
        let lower = protocol.to_ascii_lowercase();
        let url = format!("{lower}://{ip}:{}", number(port));
        if i == 0 {
            vars.push((format!("{prefix}_PORT"), url.clone()));
        }
        let port_prefix = format!(
            "{prefix}_PORT_{}_{}",
            number(port),
            protocol.to_ascii_uppercase()
        );
        vars.push((port_prefix.clone(), url));
        vars.push((format!("{port_prefix}_PROTO"), lower));
        vars.push((format!("{port_prefix}_PORT"), number(port)));
        vars.push((format!("{port_prefix}_ADDR"), ip.clone()));
    }
    vars
}
