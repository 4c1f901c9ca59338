//! Container ports, as upstream's `validateContainerPorts`, `checkHostPortConflicts` and
//! `validatePodHostNetworkDeps` check them: valid and (per container) unique IANA names,
//! port numbers in range, a supported protocol, no host port taken twice, and host ports
//! equal to container ports on the host network.
//!
//! Runs before defaulting: an absent protocol is TCP.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{formats, items, text};
use crate::error::Cause;

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

fn number(port: &Value, key: &str) -> i64 {
    port.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// One container's `ports`.
pub fn check_ports(container: &Value, at: &str, causes: &mut Vec<Cause>) {
    let mut names = BTreeSet::new();
    for (index, port) in items(container, "ports").iter().enumerate() {
        let entry = format!("{at}.ports[{index}]");
        if let Some(name) = text(port, "name").filter(|n| !n.is_empty()) {
            let name_path = format!("{entry}.name");
            let problems = formats::port_name(name);
            if !problems.is_empty() {
                causes.extend(
                    problems
                        .into_iter()
                        .map(|problem| Cause::invalid(&name_path, &json!(name), problem)),
                );
            } else if !names.insert(name) {
                causes.push(Cause::duplicate(name_path, &json!(name)));
            }
        }
        match port
            .get("containerPort")
            .map(|_| number(port, "containerPort"))
        {
            // Absent: the schema walk reports it.
            None => {}
            Some(0) => causes.push(Cause::required(format!("{entry}.containerPort"))),
            Some(value) => causes.extend(formats::port_number(value).into_iter().map(|problem| {
                Cause::invalid(format!("{entry}.containerPort"), &json!(value), problem)
            })),
        }
        let host_port = number(port, "hostPort");
        if host_port != 0 {
            causes.extend(formats::port_number(host_port).into_iter().map(|problem| {
                Cause::invalid(format!("{entry}.hostPort"), &json!(host_port), problem)
            }));
        }
        match text(port, "protocol") {
            None => {}
            Some("") => causes.push(Cause::required(format!("{entry}.protocol"))),
            Some(protocol) if !PROTOCOLS.contains(&protocol) => causes.push(Cause::not_supported(
                format!("{entry}.protocol"),
                &json!(protocol),
                PROTOCOLS,
            )),
            Some(_) => {}
        }
    }
}

/// Host ports used twice (same protocol, host IP and port) among `containers`, which upstream
/// numbers from 0 under `list_path` (so an init container, checked on its own, is always
/// `[0]` there, as upstream reports it).
pub fn check_host_port_conflicts(containers: &[Value], list_path: &str, causes: &mut Vec<Cause>) {
    let mut taken = BTreeSet::new();
    for (container_index, container) in containers.iter().enumerate() {
        for (port_index, port) in items(container, "ports").iter().enumerate() {
            let host_port = number(port, "hostPort");
            if host_port == 0 {
                continue;
            }
            let key = format!(
                "{}/{}/{host_port}",
                text(port, "protocol").unwrap_or("TCP"),
                text(port, "hostIP").unwrap_or_default()
            );
            if taken.contains(&key) {
                causes.push(Cause::duplicate(
                    format!("{list_path}[{container_index}].ports[{port_index}].hostPort"),
                    &json!(key),
                ));
            } else {
                taken.insert(key);
            }
        }
    }
}

/// On the host network a host port, when given, must equal its container port (a pod's
/// absent host port defaults to it).
pub fn check_host_network(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    if spec.get("hostNetwork").and_then(Value::as_bool) != Some(true) {
        return;
    }
    for (container_index, container) in items(spec, "containers").iter().enumerate() {
        for (port_index, port) in items(container, "ports").iter().enumerate() {
            let (host, container_port) = (number(port, "hostPort"), number(port, "containerPort"));
            if host != 0 && host != container_port {
                causes.push(Cause::invalid(
                    format!("{path}.containers[{container_index}].ports[{port_index}].hostPort"),
                    &json!(host),
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
}
