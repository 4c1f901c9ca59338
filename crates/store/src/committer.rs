//! The committer thread: writes queued changes for writers that wait asynchronously.
//!
//! Writers that wait on their own thread commit the queue themselves; those that wait as
//! tasks ([`crate::Pending::committed`]) leave it to this thread, so that the task's thread
//! decides further requests while SQLite writes, and a burst becomes one transaction. The
//! thread holds the store weakly and ends when the last handle to the store is dropped.
//!
//! Group commit: a transaction costs SQLite about as much for one small write as for ten
//! (the same b-tree pages and the revision row go to the WAL), and a stream of writes from
//! concurrent clients arrives one at a time, each faster than the last commit ends. So
//! while writes stream in from more than one writer (the last commit held several and
//! ended under [`STREAM`] ago), the thread lets them gather for [`GATHER`] before it
//! commits. A lone writer's writes, one after another, are committed at once.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::{Inner, Store, StoreError, lock};

/// Wakes the committer thread.
#[derive(Default)]
pub(crate) struct Signal {
    state: Mutex<Wake>,
    changed: Condvar,
}

/// Writes whose wake comes within this of the last commit's end are a stream.
const STREAM: Duration = Duration::from_millis(2);

/// How long a stream's writes gather before the thread commits them. Measured with
/// `tessera bench scheduler --api`: without it, nine in ten transactions held one write.
const GATHER: Duration = Duration::from_micros(500);

#[derive(Default)]
struct Wake {
    /// Changes were queued since the thread last looked.
    queued: bool,
    /// The thread waits on the condition variable (else a wake needs no notification).
    waiting: bool,
    /// The store is gone.
    shut_down: bool,
}

impl Signal {
    /// Tells the thread that changes are queued.
    pub(crate) fn wake(&self) {
        let mut wake = lock(&self.state);
        if !wake.queued {
            wake.queued = true;
            if wake.waiting {
                self.changed.notify_one();
            }
        }
    }

    /// Tells the thread to end.
    pub(crate) fn shut_down(&self) {
        lock(&self.state).shut_down = true;
        self.changed.notify_one();
    }

    /// Waits for queued changes; `false` once the store is gone.
    fn next(&self) -> bool {
        let mut wake = lock(&self.state);
        while !wake.queued && !wake.shut_down {
            wake.waiting = true;
            wake = self
                .changed
                .wait(wake)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            wake.waiting = false;
        }
        wake.queued = false;
        !wake.shut_down
    }
}

/// Whether the next commit waits for [`GATHER`]: writes stream in from several writers.
#[derive(Debug, Default)]
struct GroupCommit {
    /// When the last commit ended, if it held more than one write.
    last_shared: Option<Instant>,
}

impl GroupCommit {
    /// Whether a commit woken at `now` lets writes gather first.
    fn gathers(&self, now: Instant) -> bool {
        self.last_shared
            .is_some_and(|ended| now.saturating_duration_since(ended) < STREAM)
    }

    /// A commit of `writes` ended at `now`.
    fn committed(&mut self, writes: u64, now: Instant) {
        self.last_shared = (writes > 1).then_some(now);
    }
}

/// Starts the committer thread of a store.
pub(crate) fn start(store: &Store) -> Result<(), StoreError> {
    let signal = store.inner.committer.clone();
    let weak: Weak<Inner> = Arc::downgrade(&store.inner);
    std::thread::Builder::new()
        .name("store-committer".into())
        .spawn(move || {
            let mut group = GroupCommit::default();
            while signal.next() {
                if group.gathers(Instant::now()) {
                    std::thread::sleep(GATHER);
                }
                let Some(inner) = weak.upgrade() else { return };
                let store = Store { inner };
                let before = store.revision();
                if let Err(error) = store.commit_queued() {
                    // The store is broken; waiters have been told.
                    tracing::error!(%error, "commit failed");
                }
                group.committed(store.revision().saturating_sub(before), Instant::now());
            }
        })
        .map(drop)
        .map_err(|error| StoreError::Broken(format!("cannot start the committer thread: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stream_from_several_writers_gathers() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        // (case, the last commit's writes and end, when the next wake comes, gathers)
        let cases = [
            ("nothing committed yet", None, ms(0), false),
            ("a lone writer's last write", Some((1, ms(0))), ms(1), false),
            (
                "several writes, the next at once",
                Some((12, ms(0))),
                ms(1),
                true,
            ),
            (
                "several writes, the next after a pause",
                Some((12, ms(0))),
                ms(5),
                false,
            ),
            (
                "a commit that wrote nothing",
                Some((0, ms(0))),
                ms(0),
                false,
            ),
        ];
        for (case, last, wake, gathers) in cases {
            let mut group = GroupCommit::default();
            if let Some((writes, ended)) = last {
                group.committed(writes, ended);
            }
            assert_eq!(group.gathers(wake), gathers, "{case}");
        }
    }
}
