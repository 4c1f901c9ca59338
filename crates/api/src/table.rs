//! Server-side `Table` output (`meta.k8s.io/v1`) with upstream's default columns per kind,
//! which `kubectl get` prints (`-o wide` adds the columns of priority 1).
//!
//! Pure functions of objects and the current time; knows nothing about storage or HTTP.

use std::time::SystemTime;
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};

use tessera_model::json::{int_or_zero, text};

use crate::meta::{meta_str, parse_timestamp};

type Cell = fn(&Value, SystemTime) -> Value;

/// One column: name, type, priority (1 = wide only) and how to compute its cell.
struct Column {
    name: &'static str,
    kind: &'static str,
    priority: u8,
    cell: Cell,
}

const fn col(name: &'static str, priority: u8, cell: Cell) -> Column {
    Column {
        name,
        kind: "string",
        priority,
        cell,
    }
}

const fn int_col(name: &'static str, priority: u8, cell: Cell) -> Column {
    Column {
        name,
        kind: "integer",
        priority,
        cell,
    }
}

/// An IntOrString field as text: a number as its digits, "" when absent.
fn int_or_string(value: &Value, pointer: &str) -> String {
    match value.at(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// upstream's `listWithMoreString` over at most three items: `a,b,c + 2 more...`, or
/// `<unset>` when there are none.
fn first_three(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    let shown = items.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    if items.len() > 3 {
        format!("{shown} + {} more...", items.len() - 3)
    } else if shown.is_empty() {
        "<unset>".into()
    } else {
        shown
    }
}

/// A boolean field as kubectl prints it: `true` or `false`, absent read as false.
fn flag(object: &Value, pointer: &str) -> Value {
    let set = object.at(pointer).and_then(Value::as_bool) == Some(true);
    json!(set.to_string())
}

/// The length of the array at `pointer` (0 when absent), for count columns.
fn count(object: &Value, pointer: &str) -> Value {
    json!(
        object
            .at(pointer)
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    )
}

fn or_none(text: impl Into<String> + AsRef<str>) -> Value {
    if text.as_ref().is_empty() {
        json!("<none>")
    } else {
        json!(text.into())
    }
}

fn name(object: &Value, _: SystemTime) -> Value {
    json!(meta_str(object, "name").unwrap_or_default())
}

fn age(object: &Value, now: SystemTime) -> Value {
    json!(since(meta_str(object, "creationTimestamp"), now))
}

/// Upstream's `HumanDuration` of the time since a timestamp.
fn since(timestamp: Option<&str>, now: SystemTime) -> String {
    let Some(then) = timestamp.and_then(parse_timestamp) else {
        return "<unknown>".into();
    };
    match now.duration_since(then) {
        Ok(elapsed) => human_duration(elapsed.as_secs() as i64),
        Err(early) => human_duration(-(early.duration().as_secs() as i64)),
    }
}

pub use tessera_model::time::human_duration;

fn containers_of(template_spec: Option<&Value>) -> Vec<&Value> {
    template_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .map(|c| c.iter().collect())
        .unwrap_or_default()
}

fn template_containers(object: &Value, _: SystemTime) -> Value {
    let names: Vec<&str> = containers_of(object.at("/spec/template/spec"))
        .iter()
        .map(|c| text(c, "/name"))
        .collect();
    json!(names.join(","))
}

fn template_images(object: &Value, _: SystemTime) -> Value {
    let images: Vec<&str> = containers_of(object.at("/spec/template/spec"))
        .iter()
        .map(|c| text(c, "/image"))
        .collect();
    json!(images.join(","))
}

fn selector(object: &Value, _: SystemTime) -> Value {
    let Some(selector) = object.at("/spec/selector") else {
        return json!("<none>");
    };
    let mut parts = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    if let Some(expressions) = selector.get("matchExpressions").and_then(Value::as_array) {
        for e in expressions {
            let values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|v| {
                    v.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let op = text(e, "/operator");
            let key = text(e, "/key");
            parts.push(match op {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                "DoesNotExist" => format!("!{key}"),
                _ => format!("{key} {op}"),
            });
        }
    }
    if parts.is_empty()
        && selector.get("matchLabels").is_none()
        && selector.get("matchExpressions").is_none()
    {
        // Services: a plain map.
        if let Some(map) = selector.as_object() {
            for (k, v) in map {
                parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
            }
        }
    }
    or_none(parts.join(","))
}

/// The STATUS of a pod as kubectl prints it.
pub fn pod_status(pod: &Value) -> String {
    let mut reason = text(pod, "/status/phase").to_string();
    let status_reason = text(pod, "/status/reason");
    if !status_reason.is_empty() {
        reason = status_reason.to_string();
    }
    let statuses = |list: &str| -> Vec<Value> {
        pod.at(&format!("/status/{list}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut initializing = false;
    let init_count = pod
        .at("/spec/initContainers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    for (index, status) in statuses("initContainerStatuses").iter().enumerate() {
        let terminated_ok = status
            .at("/state/terminated/exitCode")
            .and_then(Value::as_i64)
            == Some(0);
        if terminated_ok {
            continue;
        }
        if let Some(terminated) = status.at("/state/terminated") {
            let r = text(terminated, "/reason");
            reason = if r.is_empty() {
                format!("Init:ExitCode:{}", int_or_zero(terminated, "/exitCode"))
            } else {
                format!("Init:{r}")
            };
        } else if let Some(waiting) = status.at("/state/waiting")
            && !text(waiting, "/reason").is_empty()
            && text(waiting, "/reason") != "PodInitializing"
        {
            reason = format!("Init:{}", text(waiting, "/reason"));
        } else {
            reason = format!("Init:{index}/{init_count}");
        }
        initializing = true;
        break;
    }
    if !initializing {
        let mut has_running = false;
        for status in statuses("containerStatuses").iter().rev() {
            if let Some(waiting) = status.at("/state/waiting")
                && !text(waiting, "/reason").is_empty()
            {
                reason = text(waiting, "/reason").to_string();
            } else if let Some(terminated) = status.at("/state/terminated") {
                let r = text(terminated, "/reason");
                reason = if !r.is_empty() {
                    r.to_string()
                } else if int_or_zero(terminated, "/signal") != 0 {
                    format!("Signal:{}", int_or_zero(terminated, "/signal"))
                } else {
                    format!("ExitCode:{}", int_or_zero(terminated, "/exitCode"))
                };
            } else if status.get("ready").and_then(Value::as_bool) == Some(true)
                && status.at("/state/running").is_some()
            {
                has_running = true;
            }
        }
        if reason == "Completed" && has_running {
            reason = "Running".into();
        }
    }
    if meta_str(pod, "deletionTimestamp").is_some() {
        reason = if text(pod, "/status/reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

fn pod_ready(pod: &Value, _: SystemTime) -> Value {
    let total = pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = pod
        .at("/status/containerStatuses")
        .and_then(Value::as_array)
        .map_or(0, |s| {
            s.iter()
                .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                .count()
        });
    json!(format!("{ready}/{total}"))
}

fn pod_restarts(pod: &Value, _: SystemTime) -> Value {
    let restarts: i64 = pod
        .at("/status/containerStatuses")
        .and_then(Value::as_array)
        .map_or(0, |s| {
            s.iter().map(|c| int_or_zero(c, "/restartCount")).sum()
        });
    json!(restarts.to_string())
}

fn node_status(node: &Value, _: SystemTime) -> Value {
    let ready = node
        .at("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|c| text(c, "/status"));
    let mut status = match ready {
        Some("True") => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if node.at("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    json!(status)
}

fn node_roles(node: &Value, _: SystemTime) -> Value {
    let mut roles: Vec<String> = node
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                        Some(role.to_string())
                    } else if k == "kubernetes.io/role" {
                        v.as_str().map(str::to_string)
                    } else {
                        None
                    }
                })
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    or_none(roles.join(","))
}

fn node_address(node: &Value, kind: &str) -> Value {
    let address = node
        .at("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|a| a["type"] == kind))
        .map(|a| text(a, "/address"))
        .unwrap_or_default();
    or_none(address)
}

fn service_ports(service: &Value, _: SystemTime) -> Value {
    let ports: Vec<String> = service
        .at("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    match p.get("nodePort").and_then(Value::as_i64) {
                        Some(node_port) => {
                            format!("{}:{node_port}/{protocol}", int_or_zero(p, "/port"))
                        }
                        None => format!("{}/{protocol}", int_or_zero(p, "/port")),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    or_none(ports.join(","))
}

fn data_count(object: &Value, _: SystemTime) -> Value {
    let count = ["data", "binaryData", "stringData"]
        .iter()
        .filter_map(|f| object.get(*f).and_then(Value::as_object))
        .map(|m| m.len())
        .sum::<usize>();
    json!(count)
}

fn event_object(event: &Value, _: SystemTime) -> Value {
    json!(format!(
        "{}/{}",
        text(event, "/involvedObject/kind").to_lowercase(),
        text(event, "/involvedObject/name")
    ))
}

fn event_last_seen(event: &Value, now: SystemTime) -> Value {
    let last = event
        .get("lastTimestamp")
        .and_then(Value::as_str)
        .or_else(|| event.get("eventTime").and_then(Value::as_str))
        .or_else(|| meta_str(event, "creationTimestamp"));
    json!(since(last, now))
}

fn event_first_seen(event: &Value, now: SystemTime) -> Value {
    let first = event
        .get("firstTimestamp")
        .and_then(Value::as_str)
        .or_else(|| event.get("eventTime").and_then(Value::as_str))
        .or_else(|| meta_str(event, "creationTimestamp"));
    json!(since(first, now))
}

fn job_status(job: &Value, _: SystemTime) -> Value {
    let conditions = job
        .at("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let holds = |kind: &str| {
        conditions
            .iter()
            .any(|c| c["type"] == kind && c["status"] == "True")
    };
    let status = if holds("Complete") {
        "Complete"
    } else if holds("Failed") {
        "Failed"
    } else if holds("FailureTarget") {
        "FailureTarget"
    } else if holds("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if holds("Suspended") {
        "Suspended"
    } else {
        "Running"
    };
    json!(status)
}

fn job_completions(job: &Value, _: SystemTime) -> Value {
    let succeeded = int_or_zero(job, "/status/succeeded");
    match job.at("/spec/completions").and_then(Value::as_i64) {
        Some(completions) => json!(format!("{succeeded}/{completions}")),
        None => {
            let parallelism = job
                .at("/spec/parallelism")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if parallelism > 1 {
                json!(format!("{succeeded}/1 of {parallelism}"))
            } else {
                json!(format!("{succeeded}/1"))
            }
        }
    }
}

fn job_duration(job: &Value, now: SystemTime) -> Value {
    let Some(start) = job
        .at("/status/startTime")
        .and_then(Value::as_str)
        .and_then(parse_timestamp)
    else {
        return json!("");
    };
    let end = job
        .at("/status/completionTime")
        .and_then(Value::as_str)
        .and_then(parse_timestamp)
        .unwrap_or(now);
    json!(human_duration(
        end.duration_since(start).map_or(0, |d| d.as_secs() as i64)
    ))
}

/// The `I`th cell of `kubectl get pvc`'s row (`tessera_storage::printer`).
fn claim_cell<const I: usize>(claim: &Value, now: SystemTime) -> Value {
    let mut row = tessera_storage::printer::claim_row(claim, now);
    json!(std::mem::take(&mut row[I]))
}

/// The `I`th cell of `kubectl get pv`'s row (`tessera_storage::printer`).
fn volume_cell<const I: usize>(volume: &Value, now: SystemTime) -> Value {
    let mut row = tessera_storage::printer::volume_row(volume, now);
    json!(std::mem::take(&mut row[I]))
}

/// Columns named by `names` (name, priority), their cells computed by `cells`, in order.
fn named_columns(names: &[(&'static str, u8)], cells: &[Cell]) -> Vec<Column> {
    names
        .iter()
        .zip(cells)
        .map(|(&(name, priority), &cell)| col(name, priority, cell))
        .collect()
}

fn columns(group: &str, kind: &str) -> Vec<Column> {
    use tessera_storage::printer::{CLAIM_COLUMNS, VOLUME_COLUMNS};
    match (group, kind) {
        ("", "PersistentVolumeClaim") => named_columns(
            &CLAIM_COLUMNS,
            &[
                claim_cell::<0>,
                claim_cell::<1>,
                claim_cell::<2>,
                claim_cell::<3>,
                claim_cell::<4>,
                claim_cell::<5>,
                claim_cell::<6>,
                claim_cell::<7>,
                claim_cell::<8>,
            ],
        ),
        ("", "PersistentVolume") => named_columns(
            &VOLUME_COLUMNS,
            &[
                volume_cell::<0>,
                volume_cell::<1>,
                volume_cell::<2>,
                volume_cell::<3>,
                volume_cell::<4>,
                volume_cell::<5>,
                volume_cell::<6>,
                volume_cell::<7>,
                volume_cell::<8>,
                volume_cell::<9>,
                volume_cell::<10>,
            ],
        ),
        ("", "Pod") => vec![
            col("Name", 0, name),
            col("Ready", 0, pod_ready),
            col("Status", 0, |p, _| json!(pod_status(p))),
            col("Restarts", 0, pod_restarts),
            col("Age", 0, age),
            col("IP", 1, |p, _| or_none(text(p, "/status/podIP"))),
            col("Node", 1, |p, _| or_none(text(p, "/spec/nodeName"))),
            col("Nominated Node", 1, |p, _| {
                or_none(text(p, "/status/nominatedNodeName"))
            }),
            col("Readiness Gates", 1, |p, _| {
                let gates = p
                    .at("/spec/readinessGates")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                if gates == 0 {
                    json!("<none>")
                } else {
                    json!(format!("0/{gates}"))
                }
            }),
        ],
        ("", "Node") => vec![
            col("Name", 0, name),
            col("Status", 0, node_status),
            col("Roles", 0, node_roles),
            col("Age", 0, age),
            col("Version", 0, |n, _| {
                json!(text(n, "/status/nodeInfo/kubeletVersion"))
            }),
            col("Internal-IP", 1, |n, _| node_address(n, "InternalIP")),
            col("External-IP", 1, |n, _| node_address(n, "ExternalIP")),
            col("OS-Image", 1, |n, _| {
                json!(text(n, "/status/nodeInfo/osImage"))
            }),
            col("Kernel-Version", 1, |n, _| {
                json!(text(n, "/status/nodeInfo/kernelVersion"))
            }),
            col("Container-Runtime", 1, |n, _| {
                json!(text(n, "/status/nodeInfo/containerRuntimeVersion"))
            }),
        ],
        ("", "Namespace") => vec![
            col("Name", 0, name),
            col("Status", 0, |n, _| json!(text(n, "/status/phase"))),
            col("Age", 0, age),
        ],
        ("", "Service") => vec![
            col("Name", 0, name),
            col("Type", 0, |s, _| json!(text(s, "/spec/type"))),
            col("Cluster-IP", 0, |s, _| or_none(text(s, "/spec/clusterIP"))),
            col("External-IP", 0, |s, _| {
                let ips: Vec<String> = s
                    .at("/spec/externalIPs")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                or_none(ips.join(","))
            }),
            col("Port(s)", 0, service_ports),
            col("Age", 0, age),
            col("Selector", 1, selector),
        ],
        ("", "ConfigMap") => vec![
            col("Name", 0, name),
            int_col("Data", 0, data_count),
            col("Age", 0, age),
        ],
        ("", "Secret") => vec![
            col("Name", 0, name),
            col("Type", 0, |s, _| json!(text(s, "/type"))),
            int_col("Data", 0, data_count),
            col("Age", 0, age),
        ],
        ("", "ServiceAccount") => vec![
            col("Name", 0, name),
            int_col("Secrets", 0, |s, _| count(s, "/secrets")),
            col("Age", 0, age),
        ],
        ("", "Event") => vec![
            col("Last Seen", 0, event_last_seen),
            col("Type", 0, |e, _| json!(text(e, "/type"))),
            col("Reason", 0, |e, _| json!(text(e, "/reason"))),
            col("Object", 0, event_object),
            col("Subobject", 1, |e, _| {
                json!(text(e, "/involvedObject/fieldPath"))
            }),
            col("Source", 1, |e, _| {
                let component = text(e, "/source/component");
                let host = text(e, "/source/host");
                json!(if host.is_empty() {
                    component.to_string()
                } else {
                    format!("{component}, {host}")
                })
            }),
            col("Message", 0, |e, _| {
                json!(text(e, "/message").trim().to_string())
            }),
            col("First Seen", 1, event_first_seen),
            int_col("Count", 1, |e, _| json!(int_or_zero(e, "/count"))),
            col("Name", 1, name),
        ],
        ("apps", "Deployment") => vec![
            col("Name", 0, name),
            col("Ready", 0, |d, _| {
                json!(format!(
                    "{}/{}",
                    int_or_zero(d, "/status/readyReplicas"),
                    int_or_zero(d, "/spec/replicas")
                ))
            }),
            int_col("Up-to-date", 0, |d, _| {
                json!(int_or_zero(d, "/status/updatedReplicas"))
            }),
            int_col("Available", 0, |d, _| {
                json!(int_or_zero(d, "/status/availableReplicas"))
            }),
            col("Age", 0, age),
            col("Containers", 1, template_containers),
            col("Images", 1, template_images),
            col("Selector", 1, selector),
        ],
        ("apps", "ReplicaSet") => vec![
            col("Name", 0, name),
            int_col("Desired", 0, |r, _| json!(int_or_zero(r, "/spec/replicas"))),
            int_col("Current", 0, |r, _| {
                json!(int_or_zero(r, "/status/replicas"))
            }),
            int_col("Ready", 0, |r, _| {
                json!(int_or_zero(r, "/status/readyReplicas"))
            }),
            col("Age", 0, age),
            col("Containers", 1, template_containers),
            col("Images", 1, template_images),
            col("Selector", 1, selector),
        ],
        ("apps", "StatefulSet") => vec![
            col("Name", 0, name),
            col("Ready", 0, |s, _| {
                json!(format!(
                    "{}/{}",
                    int_or_zero(s, "/status/readyReplicas"),
                    int_or_zero(s, "/spec/replicas")
                ))
            }),
            col("Age", 0, age),
            col("Containers", 1, template_containers),
            col("Images", 1, template_images),
        ],
        ("apps", "DaemonSet") => vec![
            col("Name", 0, name),
            int_col("Desired", 0, |d, _| {
                json!(int_or_zero(d, "/status/desiredNumberScheduled"))
            }),
            int_col("Current", 0, |d, _| {
                json!(int_or_zero(d, "/status/currentNumberScheduled"))
            }),
            int_col("Ready", 0, |d, _| {
                json!(int_or_zero(d, "/status/numberReady"))
            }),
            int_col("Up-to-date", 0, |d, _| {
                json!(int_or_zero(d, "/status/updatedNumberScheduled"))
            }),
            int_col("Available", 0, |d, _| {
                json!(int_or_zero(d, "/status/numberAvailable"))
            }),
            col("Node Selector", 0, |d, _| {
                let pairs: Vec<String> = d
                    .at("/spec/template/spec/nodeSelector")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                            .collect()
                    })
                    .unwrap_or_default();
                or_none(pairs.join(","))
            }),
            col("Age", 0, age),
            col("Containers", 1, template_containers),
            col("Images", 1, template_images),
            col("Selector", 1, selector),
        ],
        ("batch", "Job") => vec![
            col("Name", 0, name),
            col("Status", 0, job_status),
            col("Completions", 0, job_completions),
            col("Duration", 0, job_duration),
            col("Age", 0, age),
            col("Containers", 1, template_containers),
            col("Images", 1, template_images),
            col("Selector", 1, selector),
        ],
        ("batch", "CronJob") => vec![
            col("Name", 0, name),
            col("Schedule", 0, |c, _| json!(text(c, "/spec/schedule"))),
            col("Timezone", 0, |c, _| or_none(text(c, "/spec/timeZone"))),
            col("Suspend", 0, |c, _| {
                json!(
                    c.at("/spec/suspend")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                        .to_string()
                        .to_lowercase()
                )
            }),
            int_col("Active", 0, |c, _| count(c, "/status/active")),
            col("Last Schedule", 0, |c, now| {
                match c.at("/status/lastScheduleTime").and_then(Value::as_str) {
                    Some(t) => json!(since(Some(t), now)),
                    None => json!("<none>"),
                }
            }),
            col("Age", 0, age),
        ],
        ("policy", "PodDisruptionBudget") => vec![
            col("Name", 0, name),
            col("Min Available", 0, |p, _| {
                json!(if p.at("/spec/minAvailable").is_some() {
                    int_or_string(p, "/spec/minAvailable")
                } else {
                    "N/A".into()
                })
            }),
            col("Max Unavailable", 0, |p, _| {
                json!(if p.at("/spec/maxUnavailable").is_some() {
                    int_or_string(p, "/spec/maxUnavailable")
                } else {
                    "N/A".into()
                })
            }),
            int_col("Allowed Disruptions", 0, |p, _| {
                json!(int_or_zero(p, "/status/disruptionsAllowed"))
            }),
            col("Age", 0, age),
        ],
        ("scheduling.k8s.io", "PriorityClass") => vec![
            col("Name", 0, name),
            int_col("Value", 0, |p, _| json!(int_or_zero(p, "/value"))),
            col("Global-Default", 0, |p, _| {
                json!(
                    p.get("globalDefault")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                        .to_string()
                )
            }),
            col("Age", 0, age),
            col("Preemption Policy", 0, |p, _| {
                json!(
                    p.get("preemptionPolicy")
                        .and_then(Value::as_str)
                        .unwrap_or("PreemptLowerPriority")
                )
            }),
        ],
        ("node.k8s.io", "RuntimeClass") => vec![
            col("Name", 0, name),
            col("Handler", 0, |c, _| json!(text(c, "/handler"))),
            col("Age", 0, age),
        ],
        ("coordination.k8s.io", "Lease") => vec![
            col("Name", 0, name),
            col("Holder", 0, |l, _| json!(text(l, "/spec/holderIdentity"))),
            col("Age", 0, age),
        ],
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => vec![
            col("Name", 0, name),
            col("Role", 0, |b, _| {
                json!(format!(
                    "{}/{}",
                    text(b, "/roleRef/kind"),
                    text(b, "/roleRef/name")
                ))
            }),
            col("Age", 0, age),
        ],
        ("networking.k8s.io", "NetworkPolicy") => vec![
            col("Name", 0, name),
            col("Pod-Selector", 0, |n, _| {
                let pairs: Vec<String> = n
                    .at("/spec/podSelector/matchLabels")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                            .collect()
                    })
                    .unwrap_or_default();
                or_none(pairs.join(","))
            }),
            col("Age", 0, age),
        ],
        // Upstream's printers for the CSI kinds.
        ("storage.k8s.io", "CSIStorageCapacity") => vec![
            col("Name", 0, name),
            col("StorageClassName", 0, |c, _| {
                json!(text(c, "/storageClassName"))
            }),
            col("Capacity", 0, |c, _| json!(text(c, "/capacity"))),
            col("Age", 0, age),
        ],
        ("storage.k8s.io", "CSINode") => vec![
            col("Name", 0, name),
            int_col("Drivers", 0, |n, _| count(n, "/spec/drivers")),
            col("Age", 0, age),
        ],
        ("storage.k8s.io", "CSIDriver") => vec![
            col("Name", 0, name),
            col("AttachRequired", 0, |d, _| {
                json!(
                    d.at("/spec/attachRequired")
                        .and_then(Value::as_bool)
                        .unwrap_or(true)
                        .to_string()
                )
            }),
            col("PodInfoOnMount", 0, |d, _| flag(d, "/spec/podInfoOnMount")),
            col("StorageCapacity", 0, |d, _| {
                flag(d, "/spec/storageCapacity")
            }),
            col("TokenRequests", 0, |d, _| {
                let audiences: Vec<&str> = d
                    .at("/spec/tokenRequests")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|t| text(t, "/audience"))
                    .collect();
                if audiences.is_empty() {
                    json!("<unset>")
                } else {
                    json!(audiences.join(","))
                }
            }),
            col("RequiresRepublish", 0, |d, _| {
                flag(d, "/spec/requiresRepublish")
            }),
            col("Modes", 0, |d, _| {
                let modes: Vec<&str> = d
                    .at("/spec/volumeLifecycleModes")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                or_none(modes.join(","))
            }),
            col("Age", 0, age),
        ],
        ("storage.k8s.io", "StorageClass") => vec![
            // Upstream's printer marks the default class (either annotation) after its name.
            col("Name", 0, |s, _| {
                let default = [
                    "storageclass.kubernetes.io/is-default-class",
                    "storageclass.beta.kubernetes.io/is-default-class",
                ]
                .iter()
                .any(|key| {
                    s.at("/metadata/annotations")
                        .and_then(|a| a.get(*key))
                        .and_then(Value::as_str)
                        == Some("true")
                });
                let name = text(s, "/metadata/name");
                if default {
                    json!(format!("{name} (default)"))
                } else {
                    json!(name)
                }
            }),
            col("Provisioner", 0, |s, _| json!(text(s, "/provisioner"))),
            col("ReclaimPolicy", 0, |s, _| {
                json!(
                    s.get("reclaimPolicy")
                        .and_then(Value::as_str)
                        .unwrap_or("Delete")
                )
            }),
            col("VolumeBindingMode", 0, |s, _| {
                json!(
                    s.get("volumeBindingMode")
                        .and_then(Value::as_str)
                        .unwrap_or("Immediate")
                )
            }),
            col("AllowVolumeExpansion", 0, |s, _| {
                json!(
                    s.get("allowVolumeExpansion")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                        .to_string()
                )
            }),
            col("Age", 0, age),
        ],
        ("autoscaling", "HorizontalPodAutoscaler") => vec![
            col("Name", 0, name),
            col("Reference", 0, |h, _| {
                json!(format!(
                    "{}/{}",
                    text(h, "/spec/scaleTargetRef/kind"),
                    text(h, "/spec/scaleTargetRef/name")
                ))
            }),
            col("Targets", 0, |h, _| json!(hpa_targets(h))),
            col("MinPods", 0, |h, _| {
                json!(
                    h.at("/spec/minReplicas")
                        .and_then(Value::as_i64)
                        .map_or_else(|| "<unset>".to_string(), |n| n.to_string())
                )
            }),
            // Upstream declares these "string" and fills them with integers.
            col("MaxPods", 0, |h, _| {
                json!(int_or_zero(h, "/spec/maxReplicas"))
            }),
            col("Replicas", 0, |h, _| {
                json!(int_or_zero(h, "/status/currentReplicas"))
            }),
            col("Age", 0, age),
        ],
        ("resource.k8s.io", "ResourceClaim") => vec![
            col("Name", 0, name),
            col("State", 0, |c, _| {
                let allocated = c.at("/status/allocation").is_some();
                let reserved = c
                    .at("/status/reservedFor")
                    .and_then(Value::as_array)
                    .is_some_and(|r| !r.is_empty());
                json!(match (allocated, reserved) {
                    (true, true) => "allocated,reserved",
                    (true, false) => "allocated",
                    _ => "pending",
                })
            }),
            col("Age", 0, age),
        ],
        ("resource.k8s.io", "ResourceSlice") => vec![
            col("Name", 0, name),
            col("Node", 0, |s, _| or_none(text(s, "/spec/nodeName"))),
            col("Driver", 0, |s, _| json!(text(s, "/spec/driver"))),
            col("Pool", 0, |s, _| json!(text(s, "/spec/pool/name"))),
            col("Age", 0, age),
        ],
        ("discovery.k8s.io", "EndpointSlice") => vec![
            col("Name", 0, name),
            col("AddressType", 0, |s, _| json!(text(s, "/addressType"))),
            col("Ports", 0, |s, _| {
                let ports = s
                    .get("ports")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                let shown = ports.map(|p| {
                    match (
                        p.get("port").and_then(Value::as_i64),
                        p.get("name").and_then(Value::as_str),
                    ) {
                        (Some(port), _) => port.to_string(),
                        (None, Some(name)) => name.to_string(),
                        (None, None) => "*".to_string(),
                    }
                });
                json!(first_three(shown))
            }),
            col("Endpoints", 0, |s, _| {
                let endpoints = s
                    .get("endpoints")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                let addresses = endpoints
                    .flat_map(|e| {
                        e.get("addresses")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                    })
                    .map(|a| a.as_str().unwrap_or_default().to_string());
                json!(first_three(addresses))
            }),
            col("Age", 0, age),
        ],
        ("", "Endpoints") => vec![
            col("Name", 0, name),
            col("Endpoints", 0, |e, _| {
                let mut out = Vec::new();
                for subset in e
                    .get("subsets")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    for address in subset
                        .get("addresses")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        for port in subset
                            .get("ports")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            out.push(format!(
                                "{}:{}",
                                text(address, "/ip"),
                                int_or_zero(port, "/port")
                            ));
                        }
                    }
                }
                or_none(out.join(","))
            }),
            col("Age", 0, age),
        ],
        ("rbac.authorization.k8s.io", _) | ("", "LimitRange") | ("apiextensions.k8s.io", _) => {
            vec![
                col("Name", 0, name),
                col("Created At", 0, |o, _| {
                    json!(meta_str(o, "creationTimestamp").unwrap_or_default())
                }),
            ]
        }
        _ => vec![col("Name", 0, name), col("Age", 0, age)],
    }
}

/// The TARGETS cell of an `autoscaling/v2` HorizontalPodAutoscaler: each metric's current
/// value over its target, at most two and a count of the rest, as upstream's
/// `formatHPAMetrics` prints them.
fn hpa_targets(hpa: &Value) -> String {
    let specs = hpa
        .at("/spec/metrics")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = hpa
        .at("/status/currentMetrics")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    const MAXIMUM: usize = 2;
    let mut list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let kind = text(spec, "/type");
            let field = match kind {
                "External" => "external",
                "Pods" => "pods",
                "Object" => "object",
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                _ => return "<unknown type>".to_string(),
            };
            let source = spec.get(field).unwrap_or(&Value::Null);
            let current = statuses
                .get(i)
                .and_then(|s| s.get(field))
                .filter(|s| !s.is_null());
            let reading = |name: &str| {
                current
                    .and_then(|c| c.at(&format!("/current/{name}")))
                    .map(quantity_text)
            };
            let target = |name: &str| source.at(&format!("/target/{name}"));
            let unknown = || "<unknown>".to_string();
            match field {
                "external" | "object" => match target("averageValue") {
                    Some(average) => format!(
                        "{}/{} (avg)",
                        reading("averageValue").unwrap_or_else(unknown),
                        quantity_text(average)
                    ),
                    None => format!(
                        "{}/{}",
                        current.map_or_else(unknown, |_| reading("value")
                            .unwrap_or_else(|| "0".into())),
                        target("value").map_or_else(|| "0".into(), quantity_text)
                    ),
                },
                "pods" => format!(
                    "{}/{}",
                    current.map_or_else(unknown, |_| reading("averageValue")
                        .unwrap_or_else(|| "0".into())),
                    target("averageValue").map_or_else(|| "0".into(), quantity_text)
                ),
                _ => {
                    let name = text(source, "/name");
                    match target("averageValue") {
                        Some(average) => format!(
                            "{name}: {}/{}",
                            current.map_or_else(unknown, |_| reading("averageValue")
                                .unwrap_or_else(|| "0".into())),
                            quantity_text(average)
                        ),
                        None => {
                            let percent = |v: Option<&Value>| {
                                v.and_then(Value::as_i64).map(|n| format!("{n}%"))
                            };
                            let now =
                                percent(current.and_then(|c| c.at("/current/averageUtilization")))
                                    .unwrap_or_else(unknown);
                            let goal = percent(target("averageUtilization"))
                                .unwrap_or_else(|| "<auto>".into());
                            format!("{name}: {now}/{goal}")
                        }
                    }
                }
            }
        })
        .collect();
    let count = list.len();
    if count > MAXIMUM {
        list.truncate(MAXIMUM);
        return format!("{} + {} more...", list.join(", "), count - MAXIMUM);
    }
    list.join(", ")
}

/// A quantity as JSON holds it (a string, or a bare number).
fn quantity_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The columns' definitions, as the first Table of a response carries them.
fn column_definitions(columns: &[Column]) -> Vec<Value> {
    columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.kind,
                "format": if c.name == "Name" { "name" } else { "" },
                "description": "",
                "priority": c.priority,
            })
        })
        .collect()
}

/// What each row of a Table carries (the `includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// No object.
    None,
    /// The object's metadata as a `PartialObjectMetadata` (upstream's default).
    #[default]
    Metadata,
    /// The whole object (kubectl asks for it with `--sort-by` and custom columns).
    Object,
}

impl IncludeObject {
    /// Parses `includeObject`; an unknown value is upstream's field error.
    pub fn parse(value: Option<&str>) -> Result<IncludeObject, crate::error::ApiError> {
        match value {
            None | Some("" | "Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(crate::error::ApiError::bad_request(format!(
                "includeObject: Unsupported value: {other:?}: supported values: \"Metadata\", \"None\", \"Object\""
            ))),
        }
    }

    /// A row's `object` for one object, if it carries one.
    fn row_object(self, object: &Value) -> Option<Value> {
        match self {
            IncludeObject::None => None,
            IncludeObject::Metadata => Some(partial_metadata(object)),
            IncludeObject::Object => Some(object.clone()),
        }
    }
}

/// A Table row: its cells and the object it carries.
fn row(cells: Vec<Value>, object: &Value, include: IncludeObject) -> Value {
    let mut row = json!({"cells": cells});
    if let Some(carried) = include.row_object(object) {
        row["object"] = carried;
    }
    row
}

/// The `PartialObjectMetadata` a row carries.
pub fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A cell of a CRD's printer column, as upstream's table convertor renders it.
fn printer_cell(column: &tessera_model::PrinterColumn, object: &Value, now: SystemTime) -> Value {
    let Some(value) = crate::jsonpath::select(object, &column.json_path)
        .into_iter()
        .next()
    else {
        return Value::Null;
    };
    match column.kind.as_str() {
        "date" => json!(since(value.as_str(), now)),
        "integer" => value.as_i64().map_or(Value::Null, |n| json!(n)),
        "number" => value.as_f64().map_or(Value::Null, |n| json!(n)),
        "boolean" => value.as_bool().map_or(Value::Null, |b| json!(b)),
        _ => match value {
            Value::String(text) => json!(text),
            other => json!(other.to_string()),
        },
    }
}

/// A Table of objects of one resource.
pub fn table(
    resource: crate::resource::Resource,
    objects: &[Value],
    now: SystemTime,
    resource_version: &str,
    continue_token: Option<&str>,
    with_headers: bool,
    include: IncludeObject,
) -> Value {
    if let Some(custom) = &resource.info.custom {
        let mut printer = custom.printer_columns.clone();
        if printer.is_empty() {
            printer.push(tessera_model::PrinterColumn {
                name: "Age".into(),
                kind: "date".into(),
                format: String::new(),
                description: String::new(),
                priority: 0,
                json_path: ".metadata.creationTimestamp".into(),
            });
        }
        let rows: Vec<Value> = objects
            .iter()
            .map(|object| {
                let mut cells = vec![name(object, now)];
                cells.extend(printer.iter().map(|c| printer_cell(c, object, now)));
                row(cells, object, include)
            })
            .collect();
        let mut definitions = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}),
        ];
        definitions.extend(printer.iter().map(|c| {
            json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority})
        }));
        return assemble(
            rows,
            definitions,
            resource_version,
            continue_token,
            with_headers,
        );
    }
    let columns = columns(resource.group(), resource.kind());
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            // Cells read the storage version's form, whichever version is served.
            let stored = crate::convert::in_storage_version(resource, object);
            let cells: Vec<Value> = columns.iter().map(|c| (c.cell)(&stored, now)).collect();
            row(cells, object, include)
        })
        .collect();
    assemble(
        rows,
        column_definitions(&columns),
        resource_version,
        continue_token,
        with_headers,
    )
}

fn assemble(
    rows: Vec<Value>,
    definitions: Vec<Value>,
    resource_version: &str,
    continue_token: Option<&str>,
    with_headers: bool,
) -> Value {
    let mut metadata = json!({"resourceVersion": resource_version});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    let mut table = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "rows": rows,
    });
    if with_headers {
        table["columnDefinitions"] = json!(definitions);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;
    use std::time::Duration;

    #[test]
    fn pod_rows_follow_kubectl() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_100);
        let pod = json!({
            "metadata": {"name": "p", "creationTimestamp": "2023-11-14T22:13:20Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        let table = table(
            Resource::find("", "v1", "pods").unwrap(),
            &[pod],
            now,
            "7",
            None,
            true,
            IncludeObject::Metadata,
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "p",
                "1/2",
                "CrashLoopBackOff",
                "3",
                "100s",
                "10.0.0.5",
                "n1",
                "<none>",
                "<none>"
            ])
        );
        let headers: Vec<_> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["priority"] == 0)
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(headers, ["Name", "Ready", "Status", "Restarts", "Age"]);
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }

    #[test]
    fn runtime_class_rows_follow_kubectl() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_100);
        let class = json!({"metadata": {"name": "kata", "creationTimestamp": "2023-11-14T22:13:20Z"},
            "handler": "kata-qemu"});
        let table = table(
            Resource::find("node.k8s.io", "v1", "runtimeclasses").unwrap(),
            &[class],
            now,
            "7",
            None,
            true,
            IncludeObject::Metadata,
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["kata", "kata-qemu", "100s"])
        );
        let headers: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(headers, ["Name", "Handler", "Age"]);
    }

    #[test]
    fn rows_carry_the_object_include_object_asks_for() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}});
        let pods = Resource::find("", "v1", "pods").unwrap();
        let cases = [
            (
                None,
                Some(
                    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "p", "namespace": "ns"}}),
                ),
            ),
            (Some("Metadata"), Some(partial_metadata(&pod))),
            (Some("Object"), Some(pod.clone())),
            (Some("None"), None),
        ];
        for (query, expected) in cases {
            let include = IncludeObject::parse(query).unwrap();
            let table = table(
                pods,
                std::slice::from_ref(&pod),
                SystemTime::UNIX_EPOCH,
                "1",
                None,
                true,
                include,
            );
            assert_eq!(
                table["rows"][0].get("object").cloned(),
                expected,
                "includeObject={query:?}"
            );
        }
        let error = IncludeObject::parse(Some("Everything")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("includeObject: Unsupported value: \"Everything\""),
            "{error}"
        );
    }

    #[test]
    fn pod_status_reasons() {
        let table = [
            (json!({"status": {"phase": "Pending"}}), "Pending"),
            (
                json!({"status": {"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]}}),
                "Completed",
            ),
            (
                json!({"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}}),
                "ExitCode:3",
            ),
            (
                json!({"metadata": {"deletionTimestamp": "2023-01-01T00:00:00Z"}, "status": {"phase": "Running"}}),
                "Terminating",
            ),
        ];
        for (pod, want) in table {
            assert_eq!(pod_status(&pod), want, "{pod}");
        }
    }

    #[test]
    fn claim_and_volume_rows_follow_kubectl_get_pvc_and_pv() {
        let claim = json!({"metadata": {"name": "data", "namespace": "ml",
                "creationTimestamp": "1970-01-01T00:00:00Z"},
            "spec": {"volumeName": "pv-1", "storageClassName": "local", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce", "ReadWriteMany"]}});
        let volume = json!({"metadata": {"name": "pv-1",
                "creationTimestamp": "1970-01-01T00:00:00Z"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "local",
                "claimRef": {"namespace": "ml", "name": "data"}, "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}});
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(300);
        let render = |plural: &str, object: Value| {
            table(
                Resource::find("", "v1", plural).unwrap(),
                &[object],
                now,
                "1",
                None,
                true,
                IncludeObject::Metadata,
            )
        };
        let pvc = render("persistentvolumeclaims", claim);
        let names: Vec<&str> = pvc["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "Name",
                "Status",
                "Volume",
                "Capacity",
                "Access Modes",
                "StorageClass",
                "VolumeAttributesClass",
                "Age",
                "VolumeMode"
            ]
        );
        assert_eq!(
            pvc["rows"][0]["cells"],
            json!([
                "data",
                "Bound",
                "pv-1",
                "10Gi",
                "RWO,RWX",
                "local",
                "<unset>",
                "5m",
                "Filesystem"
            ])
        );
        let pv = render("persistentvolumes", volume);
        assert_eq!(
            pv["rows"][0]["cells"],
            json!([
                "pv-1",
                "10Gi",
                "RWO",
                "Delete",
                "Bound",
                "ml/data",
                "local",
                "<unset>",
                "",
                "5m",
                "Filesystem"
            ])
        );
        // VolumeMode is a wide column, as upstream's.
        assert_eq!(pv["columnDefinitions"][10]["priority"], 1);
    }

    #[test]
    fn storage_rows_mark_the_default_class_and_show_csi_capacity() {
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(300);
        let cells = |plural: &str, object: Value| {
            table(
                Resource::find("storage.k8s.io", "v1", plural).unwrap(),
                &[object],
                now,
                "1",
                None,
                true,
                IncludeObject::Metadata,
            )["rows"][0]["cells"]
                .clone()
        };
        let class = |annotations: Value| {
            json!({"metadata": {"name": "fast", "annotations": annotations,
                    "creationTimestamp": "1970-01-01T00:00:00Z"},
                "provisioner": "local.csi.tessera.dev", "volumeBindingMode": "WaitForFirstConsumer"})
        };
        let table = [
            (
                json!({"storageclass.kubernetes.io/is-default-class": "true"}),
                "fast (default)",
            ),
            (
                json!({"storageclass.beta.kubernetes.io/is-default-class": "true"}),
                "fast (default)",
            ),
            (
                json!({"storageclass.kubernetes.io/is-default-class": "false"}),
                "fast",
            ),
            (json!({}), "fast"),
        ];
        for (annotations, name) in table {
            assert_eq!(
                cells("storageclasses", class(annotations)),
                json!([
                    name,
                    "local.csi.tessera.dev",
                    "Delete",
                    "WaitForFirstConsumer",
                    "false",
                    "5m"
                ])
            );
        }
        let capacity = json!({"metadata": {"name": "csisc-1", "namespace": "kube-system",
                "creationTimestamp": "1970-01-01T00:00:00Z"},
            "storageClassName": "fast", "capacity": "100Gi"});
        assert_eq!(
            cells("csistoragecapacities", capacity),
            json!(["csisc-1", "fast", "100Gi", "5m"])
        );
        let node = json!({"metadata": {"name": "n1", "creationTimestamp": "1970-01-01T00:00:00Z"},
            "spec": {"drivers": [{"name": "a", "nodeID": "n1"}, {"name": "b", "nodeID": "n1"}]}});
        assert_eq!(cells("csinodes", node), json!(["n1", 2, "5m"]));
    }

    #[test]
    fn node_rows() {
        let node = json!({"metadata": {"name": "gpu-1", "labels": {"node-role.kubernetes.io/worker": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.34.1"}}});
        let cells = &table(
            Resource::find("", "v1", "nodes").unwrap(),
            &[node],
            SystemTime::UNIX_EPOCH,
            "1",
            None,
            false,
            IncludeObject::Metadata,
        )["rows"][0]["cells"];
        assert_eq!(cells[1], "Ready,SchedulingDisabled");
        assert_eq!(cells[2], "worker");
        assert_eq!(cells[4], "v1.34.1");
    }
}
