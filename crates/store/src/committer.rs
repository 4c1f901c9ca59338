//! The committer thread: writes queued changes for writers that wait asynchronously.
//!
//! Writers that wait on their own thread commit the queue themselves; those that wait as
//! tasks ([`crate::Pending::committed`]) leave it to this thread, so that the task's thread
//! decides further requests while SQLite writes, and a burst becomes one transaction. The
//! thread holds the store weakly and ends when the last handle to the store is dropped.

use std::sync::{Arc, Condvar, Mutex, Weak};

use crate::{Inner, Store, StoreError, lock};

/// Wakes the committer thread.
#[derive(Default)]
pub(crate) struct Signal {
    state: Mutex<Wake>,
    changed: Condvar,
}

#[derive(Default)]
struct Wake {
    /// Changes were queued since the thread last looked.
    queued: bool,
    /// The store is gone.
    shut_down: bool,
}

impl Signal {
    /// Tells the thread that changes are queued.
    pub(crate) fn wake(&self) {
        let mut wake = lock(&self.state);
        if !wake.queued {
            wake.queued = true;
            self.changed.notify_one();
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
            wake = self
                .changed
                .wait(wake)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        wake.queued = false;
        !wake.shut_down
    }
}

/// Starts the committer thread of a store.
pub(crate) fn start(store: &Store) -> Result<(), StoreError> {
    let signal = store.inner.committer.clone();
    let weak: Weak<Inner> = Arc::downgrade(&store.inner);
    std::thread::Builder::new()
        .name("store-committer".into())
        .spawn(move || {
            while signal.next() {
                let Some(inner) = weak.upgrade() else { return };
                let store = Store { inner };
                if let Err(error) = store.commit_queued() {
                    // The store is broken; waiters have been told.
                    tracing::error!(%error, "commit failed");
                }
            }
        })
        .map(drop)
        .map_err(|error| StoreError::Broken(format!("cannot start the committer thread: {error}")))
}
