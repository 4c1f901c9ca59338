//! The bounded log of recent changes that watches read from.
//!
//! Every change gets the next revision, so the log is contiguous in revisions and a watcher's
//! position is just the last revision it has seen. Watchers that fall behind the log's start
//! are told they are gone rather than silently skipping changes.

use std::collections::VecDeque;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::{Event, StoreError, read, write};

pub(crate) struct History {
    log: RwLock<Log>,
    latest: watch::Sender<u64>,
}

struct Log {
    capacity: usize,
    /// Revision of `events[0]`; when empty, the next revision to be logged.
    first: u64,
    events: VecDeque<Arc<Event>>,
}

impl History {
    pub(crate) fn new(capacity: usize, revision: u64) -> History {
        History {
            log: RwLock::new(Log {
                capacity: capacity.max(1),
                first: revision + 1,
                events: VecDeque::new(),
            }),
            latest: watch::Sender::new(revision),
        }
    }

    /// Logs committed changes (in revision order) and wakes watchers once.
    pub(crate) fn push_all(&self, events: Vec<Event>) {
        let Some(revision) = events.last().map(|e| e.entry.revision) else {
            return;
        };
        {
            let mut log = write(&self.log);
            for event in events {
                if log.events.len() == log.capacity {
                    log.events.pop_front();
                    log.first += 1;
                }
                if log.events.is_empty() {
                    log.first = event.entry.revision;
                }
                log.events.push_back(Arc::new(event));
            }
        }
        self.latest.send_replace(revision);
    }

    /// The oldest revision a watch may start from (it then sees changes after it).
    pub(crate) fn oldest(&self) -> u64 {
        read(&self.log).first - 1
    }

    pub(crate) fn watch(
        self: &Arc<Self>,
        prefix: &str,
        revision: u64,
    ) -> Result<Watcher, StoreError> {
        let oldest = self.oldest();
        if revision < oldest {
            return Err(StoreError::Gone {
                requested: revision,
                oldest,
            });
        }
        Ok(Watcher {
            history: self.clone(),
            prefix: prefix.to_string(),
            position: revision,
            latest: self.latest.subscribe(),
        })
    }
}

/// A cursor over the changes to keys with one prefix.
pub struct Watcher {
    history: Arc<History>,
    prefix: String,
    position: u64,
    latest: watch::Receiver<u64>,
}

impl Watcher {
    /// The revision of the last change this watcher has passed.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Waits for the next changes (at most `max`), in revision order.
    ///
    /// Fails with [`StoreError::Gone`] when the changes after this watcher's position have
    /// left the history (the watcher fell too far behind).
    pub async fn next_batch(&mut self, max: usize) -> Result<Vec<Arc<Event>>, StoreError> {
        loop {
            let batch = self.poll(max)?;
            if !batch.is_empty() {
                return Ok(batch);
            }
            if self.latest.changed().await.is_err() {
                // The store is gone: no change will ever come.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The changes available now (at most `max`), without waiting.
    pub fn poll(&mut self, max: usize) -> Result<Vec<Arc<Event>>, StoreError> {
        // Marked seen before the log is read: a change logged from here on wakes the next
        // wait, so none can slip between this read and that wait.
        self.latest.mark_unchanged();
        let log = read(&self.history.log);
        if self.position + 1 < log.first {
            return Err(StoreError::Gone {
                requested: self.position,
                oldest: log.first - 1,
            });
        }
        let start = usize::try_from(self.position + 1 - log.first).unwrap_or(usize::MAX);
        let mut batch = Vec::new();
        for event in log.events.range(start.min(log.events.len())..) {
            self.position = event.entry.revision;
            if event.entry.key.starts_with(&self.prefix) {
                batch.push(event.clone());
                if batch.len() == max {
                    break;
                }
            }
        }
        Ok(batch)
    }
}
