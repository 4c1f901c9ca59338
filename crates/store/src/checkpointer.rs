//! The checkpointer thread: copies the WAL's pages into the database file beside the
//! committer, so that no commit waits for a checkpoint.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses its threshold: that
//! commit, and every writer waiting on it, waits while the WAL is flushed, tens of MiB of
//! pages are copied and the database file is flushed (tens of milliseconds in which the
//! whole server idles, measured with `tessera bench scheduler --api`). Here the writer's
//! connection only reports the WAL's size after each commit; past [`WAL_CHECKPOINT_PAGES`]
//! it wakes this thread, whose own connection checkpoints passively: it copies what was
//! committed when it began and never blocks the writer.
//!
//! A WAL starts again from its beginning only once every frame in it has been copied, and
//! frames keep coming while the thread copies. So when a pass ends, the writer copies the
//! few frames committed meanwhile itself (its catch-up: milliseconds, not the whole
//! checkpoint), and its next commit starts the log over. Should the thread fall far behind
//! (a slow disk), the writer checkpoints on its own past [`WAL_BACKSTOP_PAGES`], as SQLite
//! would have.
//!
//! Knows nothing of what the rows are; [`next_step`] is the decision, free of I/O.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::Connection;

use crate::{StoreError, lock};

/// WAL pages committed before the thread checkpoints (SQLite's default is 1,000, about
/// 4 MiB). A checkpoint copies each page once however often it changed since the last one;
/// a longer interval spares copies of the pages every commit touches (the table's last
/// leaf, the revision row) at the price of a larger WAL (about 32 MiB) to read back on
/// opening.
#[cfg(not(test))]
pub(crate) const WAL_CHECKPOINT_PAGES: u32 = 8192;
/// Small in tests, so that a few hundred writes cross it many times.
#[cfg(test)]
pub(crate) const WAL_CHECKPOINT_PAGES: u32 = 64;

/// WAL pages past which the writer checkpoints on its own, the thread having fallen behind.
pub(crate) const WAL_BACKSTOP_PAGES: u32 = 8 * WAL_CHECKPOINT_PAGES;

/// What the writer does after a commit that left the WAL at some size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing: the WAL is small, or the thread is at it.
    Nothing,
    /// Wake the thread.
    Wake,
    /// Copy, on the writer's connection, what was committed during the thread's pass, so the
    /// next commit can start the log over.
    CatchUp,
}

/// Where the thread stands, as the writer sees it after a commit.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Waiting to be woken.
    #[default]
    Idle,
    /// Woken, its pass not ended.
    Busy,
    /// A pass ended since the writer last caught up.
    Finished,
}

/// The writer's step after a commit that left `pages` frames in the WAL.
pub(crate) fn next_step(pages: u32, progress: Progress) -> Step {
    match progress {
        // The backstop: the thread has fallen far behind; the writer copies (and waits).
        Progress::Busy if pages >= WAL_BACKSTOP_PAGES => Step::CatchUp,
        Progress::Busy => Step::Nothing,
        Progress::Finished => Step::CatchUp,
        Progress::Idle if pages >= WAL_CHECKPOINT_PAGES => Step::Wake,
        Progress::Idle => Step::Nothing,
    }
}

#[derive(Debug, Default)]
struct State {
    progress: Progress,
    shut_down: bool,
}

/// The thread and what it shares with the writer.
pub(crate) struct Checkpointer {
    shared: Arc<(Mutex<State>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread on a connection of its own to `path` (already in WAL mode), with the
    /// writer's `synchronous` setting: a checkpoint flushes the WAL before it copies and the
    /// database file after.
    pub(crate) fn start(path: &Path, synchronous: &str) -> Result<Checkpointer, StoreError> {
        let error = crate::sqlite::error_at(path);
        let connection = Connection::open(path).map_err(&error)?;
        connection
            .execute_batch(&format!("PRAGMA synchronous = {synchronous};"))
            .map_err(&error)?;
        let shared: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("store-checkpointer".into())
                .spawn(move || run(&connection, &shared))
                .map_err(|error| {
                    StoreError::Broken(format!("cannot start the checkpointer thread: {error}"))
                })?
        };
        Ok(Checkpointer {
            shared,
            thread: Some(thread),
        })
    }

    /// The writer's step after a commit that left `pages` frames in the WAL; a wake is
    /// carried out here, a catch-up is the caller's (see [`Checkpointer::caught_up`]).
    pub(crate) fn after_commit(&self, pages: u32) -> Step {
        let (state, woken) = &*self.shared;
        let mut state = lock(state);
        let step = next_step(pages, state.progress);
        if step == Step::Wake {
            state.progress = Progress::Busy;
            woken.notify_one();
        }
        step
    }

    /// The writer has copied what the last pass left.
    pub(crate) fn caught_up(&self) {
        let mut state = lock(&self.shared.0);
        if state.progress == Progress::Finished {
            state.progress = Progress::Idle;
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let (state, woken) = &*self.shared;
        lock(state).shut_down = true;
        woken.notify_one();
        if let Some(thread) = self.thread.take() {
            // A pass in progress ends first; the thread cannot panic short of a bug.
            thread.join().ok();
        }
    }
}

fn run(connection: &Connection, shared: &(Mutex<State>, Condvar)) {
    let (state, woken) = shared;
    loop {
        {
            let mut state = lock(state);
            while state.progress != Progress::Busy && !state.shut_down {
                state = woken
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            if state.shut_down {
                return;
            }
        }
        if let Err(error) = checkpoint(connection) {
            // The frames stay in the WAL for the next pass (or the writer's backstop).
            tracing::warn!(%error, "WAL checkpoint failed");
        }
        let mut state = lock(state);
        state.progress = Progress::Finished;
    }
}

/// A passive checkpoint: copies the frames committed when it begins, waiting for no one
/// (SQLite answers BUSY rather than wait when another checkpoint runs).
pub(crate) fn checkpoint(connection: &Connection) -> rusqlite::Result<()> {
    connection
        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        .or_else(|error| match error.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy) => Ok(()),
            _ => Err(error),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_wakes_the_thread_once_and_catches_up_after_its_pass() {
        let (idle, busy, finished) = (Progress::Idle, Progress::Busy, Progress::Finished);
        // (case, WAL pages after the commit, progress, step)
        let cases = [
            ("a small WAL", 10, idle, Step::Nothing),
            (
                "just under the threshold",
                WAL_CHECKPOINT_PAGES - 1,
                idle,
                Step::Nothing,
            ),
            ("the threshold", WAL_CHECKPOINT_PAGES, idle, Step::Wake),
            (
                "the thread at it",
                WAL_BACKSTOP_PAGES - 1,
                busy,
                Step::Nothing,
            ),
            (
                "the thread far behind",
                WAL_BACKSTOP_PAGES,
                busy,
                Step::CatchUp,
            ),
            (
                "a pass ended",
                WAL_CHECKPOINT_PAGES + 9,
                finished,
                Step::CatchUp,
            ),
            (
                "a pass ended and the log started over",
                3,
                finished,
                Step::CatchUp,
            ),
        ];
        for (case, pages, progress, step) in cases {
            assert_eq!(next_step(pages, progress), step, "{case}");
        }
    }
}
