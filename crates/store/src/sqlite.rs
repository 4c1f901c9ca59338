//! The SQLite file behind the store: one table of current values and the global revision.
//!
//! Values are kilobytes of JSON, so `objects` is an ordinary rowid table with the key as its
//! unique index: a `WITHOUT ROWID` table keeps whole rows in its key b-tree, which suits rows
//! far smaller than a page (SQLite's own advice) and here cost the committer a third more
//! CPU. Files created with the earlier `WITHOUT ROWID` table work unchanged: the statements
//! are the same. A 64 MiB page cache keeps the hot pages of a lab-sized store in memory.
//!
//! The store is the file's only writer: it holds an exclusive `flock` on the file while open,
//! so that a second store (or process) that opens the same file while a server writes it is
//! refused ("database is locked") instead of writing beside it. The WAL is checkpointed by
//! [`crate::checkpointer`] on a second connection, beside the commits rather than inside one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rusqlite::{Connection, OptionalExtension, params};

use crate::StoreError;
use crate::checkpointer::{self, Checkpointer, Step};
use crate::transform::ValueTransformer;

pub(crate) struct Database {
    path: PathBuf,
    /// Dropped first: the thread's connection closes before the writer's, whose closing
    /// checkpoints what is left and removes the WAL.
    checkpointer: Checkpointer,
    connection: Connection,
    /// Frames in the WAL after the last commit (the connection's WAL hook sets it).
    wal_pages: Arc<AtomicU32>,
    /// The file, held with an exclusive `flock` while the store is open.
    _held: std::fs::File,
}

impl Database {
    /// Opens the file; `secure_delete` overwrites freed space with zeros, so a value's
    /// earlier stored form (plain, or under a retired key) does not linger in the file once
    /// it is rewritten.
    pub(crate) fn open(
        path: &Path,
        fsync: bool,
        secure_delete: bool,
    ) -> Result<Database, StoreError> {
        let error = error_at(path);
        let held = hold(path)?;
        let mut connection = Connection::open(path).map_err(&error)?;
        let synchronous = if fsync { "FULL" } else { "NORMAL" };
        // Only asked for: without it, SQLite's own default stands.
        let secure_delete = if secure_delete {
            "PRAGMA secure_delete = ON;"
        } else {
            ""
        };
        connection
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = {synchronous};
                 {secure_delete}
                 PRAGMA cache_size = -65536;
                 PRAGMA journal_size_limit = {WAL_SIZE_LIMIT};
                 CREATE TABLE IF NOT EXISTS objects (
                     key TEXT PRIMARY KEY NOT NULL,
                     revision INTEGER NOT NULL,
                     value BLOB NOT NULL
                 );
                 CREATE TABLE IF NOT EXISTS meta (
                     name TEXT PRIMARY KEY NOT NULL,
                     value INTEGER NOT NULL
                 );
                 INSERT OR IGNORE INTO meta (name, value) VALUES ('revision', 0);"
            ))
            .map_err(&error)?;
        // The hook replaces SQLite's automatic checkpoint: commits only report the WAL's size.
        let wal_pages = Arc::new(AtomicU32::new(0));
        let reported = wal_pages.clone();
        connection
            .wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages: i32| {
                reported.store(u32::try_from(pages).unwrap_or(0), Ordering::Relaxed);
                Ok(())
            }))
            .map_err(&error)?;
        let checkpointer = Checkpointer::start(path, synchronous)?;
        Ok(Database {
            path: path.to_path_buf(),
            checkpointer,
            connection,
            wal_pages,
            _held: held,
        })
    }

    /// After a commit: wakes the checkpointer, or copies what its last pass left. A copy that
    /// fails is logged, not returned: the commit stands, and the frames stay in the WAL for
    /// the next pass.
    fn after_commit(&self) {
        let pages = self.wal_pages.load(Ordering::Relaxed);
        if self.checkpointer.after_commit(pages) == Step::CatchUp {
            if let Err(error) = checkpointer::checkpoint(&self.connection) {
                tracing::warn!(path = %self.path.display(), %error, "WAL checkpoint failed");
            }
            self.checkpointer.caught_up();
        }
    }

    fn error(&self, source: rusqlite::Error) -> StoreError {
        error_at(&self.path)(source)
    }

    /// The stored revision and every (key, revision, value) row in key order.
    #[allow(clippy::type_complexity)]
    pub(crate) fn load(&self) -> Result<(u64, Vec<(String, u64, Vec<u8>)>), StoreError> {
        let revision: Option<i64> = self
            .connection
            .query_row(
                "SELECT value FROM meta WHERE name = 'revision'",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| self.error(e))?;
        let mut statement = self
            .connection
            .prepare("SELECT key, revision, value FROM objects ORDER BY key")
            .map_err(|e| self.error(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, i64>(1)? as u64,
                    row.get::<_, Vec<u8>>(2)?,
                ))
            })
            .map_err(|e| self.error(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.error(e))?;
        Ok((revision.unwrap_or(0) as u64, rows))
    }

    /// Writes a batch of changes (in revision order) in one transaction, each value in the
    /// stored form `transformer` gives it.
    pub(crate) fn write_batch(
        &mut self,
        batch: &[crate::Event],
        transformer: Option<&dyn ValueTransformer>,
    ) -> Result<(), StoreError> {
        let Some(last) = batch.last() else {
            return Ok(());
        };
        // Transformed before the transaction: a refusal writes nothing.
        let mut stored: Vec<Option<Vec<u8>>> = Vec::with_capacity(batch.len());
        for event in batch {
            let entry = &event.entry;
            let form = match transformer {
                Some(t) if event.kind != crate::EventKind::Deleted => t
                    .transform_to_storage(&entry.key, &entry.value)
                    .map_err(|message| StoreError::Transform {
                        key: entry.key.to_string(),
                        message,
                    })?,
                _ => None,
            };
            stored.push(form);
        }
        let result = (|| {
            let tx = self.connection.transaction()?;
            {
                let mut upsert = tx.prepare_cached(
                    "INSERT INTO objects (key, revision, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET revision = ?2, value = ?3",
                )?;
                let mut remove = tx.prepare_cached("DELETE FROM objects WHERE key = ?1")?;
                for (event, form) in batch.iter().zip(&stored) {
                    let entry = &event.entry;
                    if event.kind == crate::EventKind::Deleted {
                        remove.execute(params![&*entry.key])?;
                    } else {
                        let value = form.as_deref().unwrap_or(&entry.value[..]);
                        upsert.execute(params![&*entry.key, entry.revision as i64, value])?;
                    }
                }
            }
            tx.prepare_cached("UPDATE meta SET value = ?1 WHERE name = 'revision'")?
                .execute(params![last.entry.revision as i64])?;
            tx.commit()
        })();
        result.map_err(|e| self.error(e))?;
        self.after_commit();
        Ok(())
    }

    /// The `value` column of `key` as the file holds it (its stored form).
    #[cfg(test)]
    pub(crate) fn stored_form(&self, key: &str) -> Option<Vec<u8>> {
        self.connection
            .query_row("SELECT value FROM objects WHERE key = ?1", [key], |row| {
                row.get(0)
            })
            .optional()
            .ok()
            .flatten()
    }

    /// Replaces the stored form of a key's value if the key is still at `revision`.
    pub(crate) fn rewrite(
        &self,
        key: &str,
        revision: u64,
        stored: &[u8],
    ) -> Result<(), StoreError> {
        self.connection
            .prepare_cached("UPDATE objects SET value = ?3 WHERE key = ?1 AND revision = ?2")
            .and_then(|mut update| update.execute(params![key, revision as i64, stored]))
            .map(drop)
            .map_err(|e| self.error(e))?;
        self.after_commit();
        Ok(())
    }
}

/// What SQLite said of the file at `path`, as a store error naming it.
pub(crate) fn error_at(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Database {
        path: path.display().to_string(),
        source,
    }
}

/// A WAL that grew past this (the checkpointer behind a burst) is cut back to it once it
/// starts over.
const WAL_SIZE_LIMIT: u64 = 64 << 20;

/// Opens `path` (creating it, readable by its owner only) and takes an exclusive `flock` on
/// it, refusing when another store holds it. SQLite's own locks are `fcntl` locks, which
/// neither see nor disturb this one.
fn hold(path: &Path) -> Result<std::fs::File, StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |reason: String| StoreError::Held {
        path: path.display().to_string(),
        reason,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| failed(e.to_string()))?;
    // As SQLite's busy timeout: a store of this process that is closing lets go within it.
    let deadline = std::time::Instant::now() + HOLD_TIMEOUT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(failed(
                    "database is locked: another store has it open".to_string(),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(failed(e.to_string())),
        }
    }
}

/// How long an opening waits for another store to let go of the file (rusqlite's default
/// busy timeout, which bounded the wait when SQLite's own locks held the file).
const HOLD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
