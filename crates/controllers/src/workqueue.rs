//! Feeds kube-controller-manager's work queue metrics
//! ([`tessera_metrics::controllers`], which documents what each metric means for a controller
//! without a queue) from the controllers' loops: [`Passes`] for the loops that run passes
//! ([`crate::shell::next_pass`] or a tick), [`counted`] around a kube-rs `Controller`'s
//! reconciler.
//!
//! Reads the controller's clock; decides nothing about the metrics' names or meaning.

use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use futures::future::BoxFuture;
use kube::runtime::controller::Action;
use tessera_metrics::components::Registries;
use tessera_metrics::controllers::{QueueMetrics, Work};
use tessera_model::clock::Clock;

use crate::shell::{Changes, ReconcileError, next_pass_observed};

/// The queue metrics of a controller that runs passes: changes are added as they arrive, a
/// pass takes them all. Without registries every method does nothing.
pub struct Passes {
    queues: Vec<QueueMetrics>,
    clock: Clock,
    /// When the first change not yet taken by a pass arrived, and how many there are.
    first: Option<SystemTime>,
    waiting: u64,
    running: Vec<Work>,
}

impl Passes {
    /// The queues `names` (one pass serves them all) of `metrics`, timed by `clock`.
    pub fn new(metrics: Option<&Registries>, names: &[&str], clock: Clock) -> Passes {
        let queues = metrics
            .map(|m| {
                names
                    .iter()
                    .map(|name| m.controller_manager.queue(name))
                    .collect()
            })
            .unwrap_or_default();
        Passes {
            queues,
            clock,
            first: None,
            waiting: 0,
            running: Vec::new(),
        }
    }

    /// A change (or resync tick) arrived: one add.
    pub fn changed(&mut self) {
        if self.queues.is_empty() {
            return;
        }
        self.first.get_or_insert_with(|| (self.clock)());
        self.waiting += 1;
        for queue in &self.queues {
            queue.add(1);
        }
    }

    /// A pass starts: it takes every change waiting (the previous pass, if any, ends).
    pub fn start(&mut self) {
        self.finish();
        if self.queues.is_empty() {
            return;
        }
        let now = (self.clock)();
        let (taken, first) = (std::mem::take(&mut self.waiting), self.first.take());
        self.running = self
            .queues
            .iter()
            .map(|queue| queue.get(taken, first, now))
            .collect();
    }

    /// The pass in progress ended.
    pub fn finish(&mut self) {
        if self.running.is_empty() {
            return;
        }
        let now = (self.clock)();
        for (queue, work) in self.queues.iter().zip(self.running.drain(..)) {
            queue.done(work, now);
        }
    }

    /// The pass's writes failed and the next pass will retry them.
    pub fn retry(&self) {
        for queue in &self.queues {
            queue.retry();
        }
    }

    /// [`crate::shell::next_pass`], recorded: ends the pass in progress, counts each change
    /// consumed while waiting, and starts the next pass when one is due.
    pub async fn next(
        &mut self,
        changes: &mut Changes,
        resync: &mut tokio::time::Interval,
    ) -> bool {
        self.finish();
        let due = next_pass_observed(changes, resync, || self.changed()).await;
        if due {
            self.start();
        }
        due
    }
}

/// `reconcile` as a kube-rs `Controller` runs it, each reconciliation recorded in `queue`
/// (of `metrics`, when there are any): an add taken at once, its run time, and a retry when
/// it fails (the error policy requeues every failure).
pub fn counted<K, C, F, Fut>(
    metrics: Option<&Registries>,
    queue: &str,
    clock: Clock,
    reconcile: F,
) -> impl FnMut(Arc<K>, Arc<C>) -> BoxFuture<'static, Result<Action, ReconcileError>> + use<K, C, F, Fut>
where
    K: Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    let queue = metrics.map(|m| m.controller_manager.queue(queue));
    move |object, context| {
        let reconciliation = reconcile(object, context);
        let (queue, clock) = (queue.clone(), clock.clone());
        Box::pin(async move {
            let Some(queue) = queue else {
                return reconciliation.await;
            };
            queue.add(1);
            let work = queue.get(1, None, clock());
            let result = reconciliation.await;
            queue.done(work, clock());
            if result.is_err() {
                queue.retry();
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use std::time::Duration;

    fn registries() -> Arc<Registries> {
        Arc::new(Registries::new().expect("metrics"))
    }

    fn value(registries: &Registries, series: &str) -> Option<f64> {
        let text =
            tessera_metrics::render(&[&registries.controller_manager.registry]).expect("render");
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[tokio::test]
    async fn a_burst_of_changes_is_added_and_taken_by_one_pass() {
        let registries = registries();
        let mut passes = Passes::new(
            Some(&registries),
            &["endpoint_slice", "endpoint"],
            Arc::new(SystemTime::now),
        );
        let burst = futures::stream::iter([(), (), ()]).boxed();
        let mut changes = futures::stream::select_all([burst]);
        let mut resync = tokio::time::interval(Duration::from_secs(3600));
        resync.tick().await;
        assert!(passes.next(&mut changes, &mut resync).await);
        for name in ["endpoint_slice", "endpoint"] {
            let series = |family: &str| value(&registries, &format!("{family}{{name=\"{name}\"}}"));
            assert_eq!(series("workqueue_adds_total"), Some(3.0), "{name}");
            assert_eq!(series("workqueue_depth"), Some(0.0), "{name}");
            assert_eq!(series("workqueue_queue_duration_seconds_count"), Some(1.0));
            assert_eq!(series("workqueue_work_duration_seconds_count"), Some(0.0));
        }
        passes.retry();
        // The stream has ended: no pass is due, and the one in progress is done.
        assert!(!passes.next(&mut changes, &mut resync).await);
        let series = |family: &str| value(&registries, &format!("{family}{{name=\"endpoint\"}}"));
        assert_eq!(series("workqueue_work_duration_seconds_count"), Some(1.0));
        assert_eq!(series("workqueue_retries_total"), Some(1.0));
    }

    #[tokio::test]
    async fn a_failed_reconciliation_is_a_retry() {
        let registries = registries();
        let mut reconcile = counted(
            Some(&registries),
            "job",
            Arc::new(SystemTime::now),
            |_: Arc<()>, fail: Arc<bool>| async move {
                if *fail {
                    Err(ReconcileError::Convert(serde::de::Error::custom("no")))
                } else {
                    Ok(Action::await_change())
                }
            },
        );
        assert!(reconcile(Arc::new(()), Arc::new(false)).await.is_ok());
        assert!(reconcile(Arc::new(()), Arc::new(true)).await.is_err());
        let series = |family: &str| value(&registries, &format!("{family}{{name=\"job\"}}"));
        assert_eq!(series("workqueue_adds_total"), Some(2.0));
        assert_eq!(series("workqueue_work_duration_seconds_count"), Some(2.0));
        assert_eq!(series("workqueue_retries_total"), Some(1.0));
        assert_eq!(series("workqueue_depth"), Some(0.0));
        assert_eq!(series("workqueue_queue_duration_seconds_count"), Some(0.0));
    }
}
