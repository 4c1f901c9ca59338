//! The queue manager's ClusterQueue and LocalQueue status writes, carried out in the
//! background so that an admission round never waits on them (Kueue's ClusterQueue and
//! LocalQueue controllers write these statuses apart from its scheduler too).
//!
//! Each status a pass answers is whole (`tessera_queue::api::status`), so a newer one for the
//! same object replaces one not yet sent: the latest wins. A status just written is not
//! written again while the watch may not show it yet ([`REPEAT_AFTER`]). Each write is
//! recorded in its kind's [`OwnWrites`], so that its echo starts no pass of the queue
//! manager. Decides nothing about what a status says.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::ApiResource;
use serde_json::Value;
use tessera_queue::api::pass::StatusWrite;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::echoes::OwnWrites;

/// How long a status just written is taken as shown: the same status answered again within
/// it (by a pass that ran before the watch showed the write) is not sent again.
pub const REPEAT_AFTER: Duration = Duration::from_secs(1);

/// How many writes are in flight at once.
const CONCURRENT: usize = 16;

/// Which object a status is for: the resource's plural, namespace and name.
type Target = (String, String, String);

/// A status to write: the object's resource, the writes whose echoes are left out, the status.
type Sent = (ApiResource, OwnWrites, StatusWrite);

/// Sends statuses to the background writer.
#[derive(Clone)]
pub struct QueueStatusWriter {
    sender: mpsc::UnboundedSender<Sent>,
}

impl QueueStatusWriter {
    /// Starts the writer; it stops once every sender is dropped.
    pub fn start(client: Client) -> QueueStatusWriter {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(client, receiver));
        QueueStatusWriter { sender }
    }

    /// Queues `writes` of `resource`'s objects; each write done is recorded in `own`.
    pub fn send(&self, resource: &ApiResource, own: &OwnWrites, writes: Vec<StatusWrite>) {
        for write in writes {
            if self
                .sender
                .send((resource.clone(), own.clone(), write))
                .is_err()
            {
                tracing::debug!("queue manager: the status writer has stopped");
                return;
            }
        }
    }
}

/// The statuses last written, and when.
#[derive(Default)]
struct Written {
    by_target: HashMap<Target, (Value, Instant)>,
}

impl Written {
    /// Whether `status` was written to `target` within [`REPEAT_AFTER`] of `now`.
    fn just_written(&self, target: &Target, status: &Value, now: Instant) -> bool {
        self.by_target
            .get(target)
            .is_some_and(|(last, at)| last == status && now.duration_since(*at) < REPEAT_AFTER)
    }

    /// Records the statuses written at `now`; forgets those written long enough before.
    fn record(&mut self, written: impl IntoIterator<Item = (Target, Value)>, now: Instant) {
        self.by_target
            .retain(|_, (_, at)| now.duration_since(*at) < REPEAT_AFTER);
        for (target, status) in written {
            self.by_target.insert(target, (status, now));
        }
    }
}

/// The statuses due, the latest for each object.
#[derive(Default)]
struct Due {
    writes: BTreeMap<Target, Sent>,
}

impl Due {
    fn add(&mut self, (resource, own, write): Sent) {
        let target = (
            resource.plural.clone(),
            write.namespace.clone(),
            write.name.clone(),
        );
        self.writes.insert(target, (resource, own, write));
    }
}

async fn run(client: Client, mut receiver: mpsc::UnboundedReceiver<Sent>) {
    let mut written = Written::default();
    while let Some(first) = receiver.recv().await {
        let mut due = Due::default();
        due.add(first);
        while let Ok(more) = receiver.try_recv() {
            due.add(more);
        }
        let now = Instant::now();
        let sends: Vec<_> = due
            .writes
            .into_iter()
            .filter(|(target, (_, _, write))| !written.just_written(target, &write.status, now))
            .map(|(target, (resource, own, write))| {
                let client = client.clone();
                async move {
                    let status = write.status.clone();
                    let key = (write.namespace.clone(), write.name.clone());
                    own.sending(key.clone());
                    let Some(object) =
                        crate::queue::write_status(client, resource, write, None).await
                    else {
                        own.failed(key);
                        return None;
                    };
                    own.record(&object.metadata);
                    Some((target, status))
                }
            })
            .collect();
        let done: Vec<(Target, Value)> = futures::stream::iter(sends)
            .buffer_unordered(CONCURRENT)
            .filter_map(std::future::ready)
            .collect()
            .await;
        written.record(done, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(name: &str) -> Target {
        ("clusterqueues".into(), String::new(), name.into())
    }

    #[test]
    fn a_status_just_written_is_not_sent_again_until_it_may_have_been_missed() {
        let start = Instant::now();
        let mut written = Written::default();
        written.record([(target("a"), json!({"pendingWorkloads": 1}))], start);
        let cases = [
            // (object, status, after, not sent again)
            ("a", json!({"pendingWorkloads": 1}), Duration::ZERO, true),
            ("a", json!({"pendingWorkloads": 1}), REPEAT_AFTER / 2, true),
            ("a", json!({"pendingWorkloads": 1}), REPEAT_AFTER, false),
            ("a", json!({"pendingWorkloads": 2}), Duration::ZERO, false),
            ("b", json!({"pendingWorkloads": 1}), Duration::ZERO, false),
        ];
        for (name, status, after, skipped) in cases {
            assert_eq!(
                written.just_written(&target(name), &status, start + after),
                skipped,
                "{name} {status} after {after:?}"
            );
        }
    }

    #[test]
    fn the_latest_status_of_an_object_replaces_one_not_yet_sent() {
        let resource = crate::queue::kueue_resource("ClusterQueue", "clusterqueues");
        let write = |name: &str, pending: u64| StatusWrite {
            namespace: String::new(),
            name: name.into(),
            status: json!({"pendingWorkloads": pending}),
        };
        let mut due = Due::default();
        for (name, pending) in [("a", 1), ("b", 5), ("a", 2), ("a", 3)] {
            due.add((resource.clone(), OwnWrites::default(), write(name, pending)));
        }
        let statuses: Vec<(String, Value)> = due
            .writes
            .into_values()
            .map(|(_, _, write)| (write.name, write.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("a".to_owned(), json!({"pendingWorkloads": 3})),
                ("b".to_owned(), json!({"pendingWorkloads": 5})),
            ]
        );
    }
}
