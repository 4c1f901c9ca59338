//! Kueue's visibility API (`visibility.kueue.x-k8s.io`, `pkg/visibility/storage`): the
//! pending Workloads of a ClusterQueue or a LocalQueue in the order the queue manager tries
//! them, with their positions in both queues, priority, LocalQueue and creation time, paged
//! by `limit` and `offset` as Kueue's `pendingworkloads` subresources answer, and the
//! `PendingWorkloadsSummary` document they answer with.
//!
//! The order is the queues' own (`ClusterQueueQueue::snapshot` over the queues `pass`
//! rebuilds from the stored objects): active and inadmissible Workloads together, sorted by
//! the heap order the cycle pops by. Knows nothing about HTTP or discovery; the sticky
//! preemptor a running queue manager remembers is not in the stored objects, so a rebuilt
//! queue does not put it first.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Value, json};

use crate::api::objects::{self, Objects};
use crate::api::pass;
use crate::queue::QueuedWorkload;

/// The API group of Kueue's visibility server.
pub const GROUP: &str = "visibility.kueue.x-k8s.io";
/// The versions it serves, preferred first.
pub const VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];
/// The subresource of `clusterqueues` and `localqueues` it serves.
pub const SUBRESOURCE: &str = "pendingworkloads";
/// `constants.DefaultPendingWorkloadsLimit`.
pub const DEFAULT_LIMIT: i64 = 1000;
/// `constants.MaxPendingWorkloadsLimit`.
pub const MAX_LIMIT: i64 = 100_000;

/// Why a visibility request is not answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VisibilityError {
    /// The ClusterQueue or LocalQueue is unknown (`NewNotFound(Resource(kind), name)`).
    #[error("{resource}.{GROUP} \"{name}\" not found")]
    NotFound {
        /// `clusterqueue` or `localqueue`.
        resource: &'static str,
        /// The name asked for.
        name: String,
    },
    /// A query parameter is not an integer.
    #[error("invalid value for {parameter}: {value:?} is not an integer")]
    BadParameter {
        /// `limit` or `offset`.
        parameter: &'static str,
        /// What was sent.
        value: String,
    },
}

/// `PendingWorkloadOptions`, bounded as Kueue bounds them (`boundedLimitOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// How many Workloads at most, 0 ..= [`MAX_LIMIT`].
    pub limit: usize,
    /// How many to skip, at least 0.
    pub offset: usize,
}

impl Default for Page {
    fn default() -> Page {
        Page::bounded(DEFAULT_LIMIT, 0)
    }
}

impl Page {
    /// A page from the raw values: a negative limit is 0, a larger one than [`MAX_LIMIT`] is
    /// [`MAX_LIMIT`], a negative offset is 0.
    pub fn bounded(limit: i64, offset: i64) -> Page {
        let limit = limit.clamp(0, MAX_LIMIT);
        Page {
            limit: usize::try_from(limit).unwrap_or(0),
            offset: usize::try_from(offset.max(0)).unwrap_or(usize::MAX),
        }
    }

    /// A page from the `limit` and `offset` query parameters (absent: 1000 and 0).
    pub fn from_query(limit: Option<&str>, offset: Option<&str>) -> Result<Page, VisibilityError> {
        let parse = |parameter: &'static str, value: Option<&str>, default: i64| match value {
            None | Some("") => Ok(default),
            Some(text) => text
                .trim()
                .parse::<i64>()
                .map_err(|_| VisibilityError::BadParameter {
                    parameter,
                    value: text.to_owned(),
                }),
        };
        Ok(Page::bounded(
            parse("limit", limit, DEFAULT_LIMIT)?,
            parse("offset", offset, 0)?,
        ))
    }
}

/// One pending Workload as the visibility API shows it (`PendingWorkload`).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingWorkload {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The owner references (apiVersion, kind, name, uid of each).
    pub owner_references: Vec<Value>,
    /// `metadata.creationTimestamp`, as stored.
    pub creation_timestamp: Value,
    /// The effective priority.
    pub priority: i32,
    /// `spec.queueName`.
    pub local_queue: String,
    /// Its position in its ClusterQueue, from 0.
    pub position_in_cluster_queue: usize,
    /// Its position in its LocalQueue, from 0.
    pub position_in_local_queue: usize,
}

impl PendingWorkload {
    fn new(
        workload: &QueuedWorkload,
        stored: Option<&Value>,
        position_in_cluster_queue: usize,
        position_in_local_queue: usize,
    ) -> PendingWorkload {
        let stored = stored.unwrap_or(&Value::Null);
        let owner_references = stored
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(|owners| {
                owners
                    .iter()
                    .map(|owner| {
                        json!({"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                               "name": owner["name"], "uid": owner["uid"]})
                    })
                    .collect()
            })
            .unwrap_or_default();
        PendingWorkload {
            namespace: workload.info.workload.namespace.clone(),
            name: workload.info.workload.name.clone(),
            owner_references,
            creation_timestamp: stored
                .pointer("/metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null),
            priority: workload.info.workload.priority,
            local_queue: workload.local_queue.clone(),
            position_in_cluster_queue,
            position_in_local_queue,
        }
    }

    /// The `PendingWorkload` JSON.
    pub fn to_json(&self) -> Value {
        let mut metadata = json!({"name": self.name, "namespace": self.namespace,
                                  "creationTimestamp": self.creation_timestamp});
        if !self.owner_references.is_empty() {
            metadata["ownerReferences"] = json!(self.owner_references);
        }
        json!({
            "metadata": metadata,
            "priority": self.priority,
            "localQueueName": self.local_queue,
            "positionInClusterQueue": self.position_in_cluster_queue,
            "positionInLocalQueue": self.position_in_local_queue,
        })
    }
}

/// The pending Workloads of a ClusterQueue in order (`PendingWorkloadsInfo`) with their
/// stored objects, or `None` when the ClusterQueue is unknown.
fn in_order<'o>(
    objects: &'o Objects,
    cluster_queue: &str,
    now: SystemTime,
) -> Option<Vec<(QueuedWorkload, Option<&'o Value>)>> {
    // Ordered as without a Configuration: the API server does not read the queue manager's.
    let queues = pass::queues_of(objects, &pass::Settings::default(), now);
    let stored: BTreeMap<String, &Value> = objects
        .workloads
        .iter()
        .map(|object| (objects::key(object), object.as_ref()))
        .collect();
    let ordered = queues.pending_workloads_info(cluster_queue)?;
    Some(
        ordered
            .into_iter()
            .map(|workload| {
                let object = stored.get(&workload.key()).copied();
                (workload.clone(), object)
            })
            .collect(),
    )
}

/// Every pending Workload of a ClusterQueue in the order the queue manager tries them, with
/// positions, or `None` when the ClusterQueue is unknown.
pub fn cluster_queue_order(
    objects: &Objects,
    cluster_queue: &str,
    now: SystemTime,
) -> Option<Vec<PendingWorkload>> {
    let all = Page::bounded(i64::MAX, 0);
    pending_in_cluster_queue(objects, cluster_queue, all, now).ok()
}

/// `GET clusterqueues/<name>/pendingworkloads` (`pendingWorkloadsInCqREST.Get`).
pub fn pending_in_cluster_queue(
    objects: &Objects,
    cluster_queue: &str,
    page: Page,
    now: SystemTime,
) -> Result<Vec<PendingWorkload>, VisibilityError> {
    let ordered = in_order(objects, cluster_queue, now).ok_or(VisibilityError::NotFound {
        resource: "clusterqueue",
        name: cluster_queue.to_owned(),
    })?;
    let mut local_positions: BTreeMap<String, usize> = BTreeMap::new();
    let mut items = Vec::new();
    let end = page.offset.saturating_add(page.limit);
    for (index, (workload, object)) in ordered.iter().enumerate().take(end) {
        let position = local_positions
            .entry(workload.local_queue_key())
            .or_default();
        let in_local_queue = *position;
        *position += 1;
        if index >= page.offset {
            items.push(PendingWorkload::new(
                workload,
                *object,
                index,
                in_local_queue,
            ));
        }
    }
    Ok(items)
}

/// `GET namespaces/<namespace>/localqueues/<name>/pendingworkloads`
/// (`pendingWorkloadsInLqREST.Get`): the LocalQueue's share of its ClusterQueue's order.
pub fn pending_in_local_queue(
    objects: &Objects,
    namespace: &str,
    local_queue: &str,
    page: Page,
    now: SystemTime,
) -> Result<Vec<PendingWorkload>, VisibilityError> {
    let not_found = || VisibilityError::NotFound {
        resource: "localqueue",
        name: local_queue.to_owned(),
    };
    let cluster_queue = objects
        .local_queues
        .iter()
        .filter(|lq| objects::namespace(lq) == namespace && objects::name(lq) == local_queue)
        .find_map(objects::local_queue)
        .map(|(cluster_queue, _)| cluster_queue)
        .ok_or_else(not_found)?;
    let ordered = in_order(objects, &cluster_queue, now).unwrap_or_default();
    let mut skipped = 0;
    let mut items = Vec::new();
    for (index, (workload, object)) in ordered.iter().enumerate() {
        if items.len() >= page.limit {
            break;
        }
        let info = &workload.info.workload;
        if info.namespace != namespace || workload.local_queue != local_queue {
            continue;
        }
        if skipped < page.offset {
            skipped += 1;
            continue;
        }
        let position = items.len() + page.offset;
        items.push(PendingWorkload::new(workload, *object, index, position));
    }
    Ok(items)
}

/// The `PendingWorkloadsSummary` document in `version`.
pub fn summary(items: &[PendingWorkload], version: &str) -> Value {
    let items: Vec<Value> = items.iter().map(PendingWorkload::to_json).collect();
    json!({
        "kind": "PendingWorkloadsSummary",
        "apiVersion": format!("{GROUP}/{version}"),
        "metadata": {"creationTimestamp": null},
        "items": items,
    })
}

#[cfg(test)]
#[path = "visibility_tests.rs"]
mod tests;
