//! Durable, revisioned key-value store for API objects, on an embedded SQLite file.
//!
//! One global revision counts every change; each key remembers the revision of its last
//! change (its resourceVersion). Writes are read-modify-write transactions decided against the
//! latest value of their key (committed or not) under that key's lock, so compare-and-swap
//! needs no retry loop, and writes to different keys decide in parallel; the revision is given
//! when the change is queued (a value may leave a place for it, as a resourceVersion inside
//! the object's bytes). Each is committed to SQLite (WAL journal) before it is acknowledged or seen. Commits are
//! grouped: while one commit is written, writers decide and queue their changes, and the next
//! commit writes all of them in one transaction (as etcd batches its backend commits) — so
//! readers never wait for the disk, and a burst of writers pays for one commit, not one each.
//! A writer either waits on its thread ([`Pending::wait`], which commits the queue itself if
//! no one else is) or asynchronously ([`Pending::committed`]): then the store's committer
//! thread writes the queue, and the task's thread goes on deciding other requests meanwhile.
//! All committed values are also held in memory, which serves gets, consistent lists and a
//! bounded history of recent changes for watches; a watch that starts before the history is
//! answered with [`StoreError::Gone`]. A commit that fails breaks the store: every later
//! write fails, as etcd stops on a failed WAL write, since writes decided after it may rest on
//! it.
//!
//! Values may be transformed where they reach SQLite (encryption at rest, [`transform`]):
//! the stored form is written by the committer and read at open, and nothing else sees it.
//!
//! Knows keys, revisions and opaque byte values: nothing about Kubernetes, JSON or HTTP.

mod checkpointer;
mod committer;
mod history;
mod sqlite;
pub mod transform;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;

use committer::Signal;
use history::History;
pub use history::Watcher;
use sqlite::Database;
pub use transform::{FromStorage, ValueTransformer};

/// A stored value and the revision that last changed it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key.
    pub key: Arc<str>,
    /// The revision of the last change to this key.
    pub revision: u64,
    /// The value's bytes.
    pub value: Bytes,
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The key did not exist before.
    Created,
    /// The key existed and got a new value.
    Updated,
    /// The key was removed; the event's value is its final form.
    Deleted,
}

/// One change, as watches see it.
#[derive(Debug, Clone)]
pub struct Event {
    /// The kind of change.
    pub kind: EventKind,
    /// The entry after the change (for deletions: the final form, at the deletion revision).
    pub entry: Entry,
    /// The value before the change, if the key existed.
    pub previous: Option<Bytes>,
}

/// What a transaction decides to do with its key.
pub enum Mutation {
    /// Store this value.
    Put(NewValue),
    /// Remove the key; the value is its final form, which watchers receive.
    Delete(NewValue),
    /// Change nothing.
    Keep,
}

/// The bytes a change stores, and where the change's revision goes in them.
///
/// A transaction is decided before its revision is known; a value that must carry its own
/// revision (an object's resourceVersion) leaves a place for it, and the store writes the
/// revision there, in decimal, when it queues the change.
#[derive(Debug, Clone)]
pub struct NewValue {
    /// The bytes, without the revision.
    pub bytes: Bytes,
    /// The offset in `bytes` where the revision's digits are inserted.
    pub revision_at: Option<usize>,
}

impl From<Bytes> for NewValue {
    fn from(bytes: Bytes) -> NewValue {
        NewValue {
            bytes,
            revision_at: None,
        }
    }
}

impl NewValue {
    /// The bytes with the revision written in its place.
    fn with_revision(self, revision: u64) -> Bytes {
        let Some(at) = self.revision_at.filter(|at| *at <= self.bytes.len()) else {
            return self.bytes;
        };
        let digits = revision.to_string();
        let mut bytes = Vec::with_capacity(self.bytes.len() + digits.len());
        bytes.extend_from_slice(&self.bytes[..at]);
        bytes.extend_from_slice(digits.as_bytes());
        bytes.extend_from_slice(&self.bytes[at..]);
        bytes.into()
    }
}

/// A consistent view of a range of keys.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The revision the view was taken at.
    pub revision: u64,
    /// The entries in key order.
    pub entries: Arc<[Entry]>,
}

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened, read or written.
    #[error("database {path}: {source}")]
    Database {
        /// The database file.
        path: String,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The database file could not be opened for this store alone.
    #[error("database {path}: {reason}")]
    Held {
        /// The database file.
        path: String,
        /// Why: another store holds it, or the file could not be opened.
        reason: String,
    },
    /// An earlier commit failed; the store takes no more writes.
    #[error("the store is unusable after a failed commit: {0}")]
    Broken(String),
    /// A value could not be transformed to or from its stored form.
    #[error("stored value of {key}: {message}")]
    Transform {
        /// The key of the value.
        key: String,
        /// What the transformer said.
        message: String,
    },
    /// A watch asked for changes older than the kept history.
    #[error("too old resource version: {requested} ({oldest})")]
    Gone {
        /// The revision asked for.
        requested: u64,
        /// The oldest revision a watch can still start from.
        oldest: u64,
    },
}

/// Tunables of a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How many recent changes are kept for watches to start from or catch up with.
    pub history: usize,
    /// Whether every commit is flushed to the device (`synchronous=FULL`) rather than only
    /// handed to the operating system (`NORMAL`, which survives a crash of the process but not
    /// of the machine).
    pub fsync: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            history: 100_000,
            fsync: false,
        }
    }
}

/// The store. Cheap to clone: clones share one database and one state.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    database: Mutex<Database>,
    /// How values are stored; `None`: as they are.
    transformer: Option<Arc<dyn ValueTransformer>>,
    /// Writers of one key decide one at a time; a key's lock is `key_locks[hash % len]`.
    key_locks: Box<[Mutex<()>]>,
    state: RwLock<State>,
    history: Arc<History>,
    /// Wakes the committer thread when changes are queued.
    committer: Arc<Signal>,
    /// Tasks waiting for a revision to be committed, by revision: each commit wakes only
    /// those it satisfies.
    waiters: Mutex<BTreeMap<u64, Vec<tokio::sync::oneshot::Sender<()>>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.committer.shut_down();
    }
}

/// A change decided and queued: its outcome, to be acknowledged once it is committed.
#[must_use = "a change is acknowledged only once it is committed"]
pub struct Pending<T> {
    store: Store,
    /// The revision that must be committed before the outcome may be acted on.
    revision: u64,
    outcome: T,
}

impl<T, E> Pending<Result<T, E>> {
    /// Splits off a refused transaction: it changed nothing, so there is nothing to wait for.
    pub fn transpose(self) -> Result<Pending<T>, E> {
        let Pending {
            store,
            revision,
            outcome,
        } = self;
        outcome.map(|outcome| Pending {
            store,
            revision,
            outcome,
        })
    }
}

impl<T> Pending<T> {
    /// Waits on this thread until the change is committed, committing everything queued
    /// itself if no other writer is.
    pub fn wait(self) -> Result<T, StoreError> {
        self.store.commit_through(self.revision)?;
        Ok(self.outcome)
    }

    /// Waits without blocking the thread: the committer thread writes the change (with
    /// whatever else is queued by then).
    pub async fn committed(self) -> Result<T, StoreError> {
        let woken = {
            // Checked and registered under the waiters' lock, which the committer takes after
            // advancing the revision: no commit can slip between the two.
            let mut waiters = lock(&self.store.inner.waiters);
            let state = read(&self.store.inner.state);
            if state.revision >= self.revision {
                return Ok(self.outcome);
            }
            if let Some(reason) = &state.broken {
                return Err(StoreError::Broken(reason.clone()));
            }
            let (wake, woken) = tokio::sync::oneshot::channel();
            waiters.entry(self.revision).or_default().push(wake);
            woken
        };
        // Woken when its revision is committed, or when the store breaks (or is dropped).
        let _ = woken.await;
        let state = read(&self.store.inner.state);
        if state.revision >= self.revision {
            return Ok(self.outcome);
        }
        Err(StoreError::Broken(
            state
                .broken
                .clone()
                .unwrap_or_else(|| "the store was closed".into()),
        ))
    }

    /// The revision of the change (for a `Keep`, of the entry answered with; 0 for none).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Changes the outcome; the commit waited for stays the same.
    pub fn map<U>(self, change: impl FnOnce(T) -> U) -> Pending<U> {
        Pending {
            store: self.store,
            revision: self.revision,
            outcome: change(self.outcome),
        }
    }
}

struct State {
    /// The last committed revision.
    revision: u64,
    /// Committed entries.
    entries: BTreeMap<Arc<str>, Entry>,
    /// The latest decided revision (committed or queued).
    decided: u64,
    /// The latest decided value of keys with queued changes (`None`: deleted).
    overlay: std::collections::HashMap<Arc<str>, Option<Entry>>,
    /// Changes decided and not yet committed, in revision order.
    queue: Vec<Event>,
    /// Why the store broke, if a commit failed.
    broken: Option<String>,
    /// Committed keys whose stored form is stale (see [`transform`]).
    stale: std::collections::HashSet<Arc<str>>,
}

impl State {
    /// The latest decided value of a key.
    fn latest(&self, key: &str) -> Option<&Entry> {
        match self.overlay.get(key) {
            Some(pending) => pending.as_ref(),
            None => self.entries.get(key),
        }
    }
}

impl Store {
    /// The stored form of `key`'s value as the file holds it, read on the store's own
    /// connection (which keeps the file locked while it is open).
    #[cfg(test)]
    pub(crate) fn stored_form(&self, key: &str) -> Option<Vec<u8>> {
        lock(&self.inner.database).stored_form(key)
    }

    /// Opens (creating if needed) the store in the given database file.
    pub fn open(path: &Path, options: StoreOptions) -> Result<Store, StoreError> {
        Store::open_with_transformer(path, options, None)
    }

    /// Opens the store with values transformed where they reach the file (encryption at
    /// rest): every stored value is read back through `transformer` now, and a value it
    /// cannot read stops the opening, naming the key, with nothing changed.
    pub fn open_with_transformer(
        path: &Path,
        options: StoreOptions,
        transformer: Option<Arc<dyn ValueTransformer>>,
    ) -> Result<Store, StoreError> {
        let database = Database::open(path, options.fsync, transformer.is_some())?;
        let (revision, rows) = database.load()?;
        let mut entries = BTreeMap::new();
        let mut stale = std::collections::HashSet::new();
        let mut unreadable: Vec<StoreError> = Vec::new();
        for (key, revision, value) in rows {
            let key: Arc<str> = key.into();
            let value = match &transformer {
                None => value,
                Some(transformer) => match transformer.transform_from_storage(&key, &value) {
                    Ok(read) => {
                        if read.stale {
                            stale.insert(key.clone());
                        }
                        read.value.unwrap_or(value)
                    }
                    Err(message) => {
                        unreadable.push(StoreError::Transform {
                            key: key.to_string(),
                            message,
                        });
                        continue;
                    }
                },
            };
            let entry = Entry {
                key: key.clone(),
                revision,
                value: value.into(),
            };
            entries.insert(key, entry);
        }
        if let Some(first) = unreadable.first() {
            tracing::error!(count = unreadable.len(), path = %path.display(), "stored values cannot be read");
            if unreadable.len() > 1 {
                return Err(StoreError::Transform {
                    key: format!("{} and {} more", key_of(first), unreadable.len() - 1),
                    message: message_of(first),
                });
            }
            return Err(unreadable.swap_remove(0));
        }
        if !stale.is_empty() {
            tracing::info!(
                stale = stale.len(),
                "stored values written by an older provider or key; rewritten on their next update"
            );
        }
        tracing::debug!(revision, path = %path.display(), "store opened");
        let store = Store {
            inner: Arc::new(Inner {
                database: Mutex::new(database),
                transformer,
                key_locks: (0..KEY_LOCKS).map(|_| Mutex::new(())).collect(),
                state: RwLock::new(State {
                    revision,
                    entries,
                    decided: revision,
                    overlay: Default::default(),
                    queue: Vec::new(),
                    broken: None,
                    stale,
                }),
                history: Arc::new(History::new(options.history, revision)),
                committer: Arc::new(Signal::default()),
                waiters: Mutex::default(),
            }),
        };
        committer::start(&store)?;
        Ok(store)
    }

    /// The current revision.
    pub fn revision(&self) -> u64 {
        read(&self.inner.state).revision
    }

    /// The entry stored under a key.
    pub fn get(&self, key: &str) -> Option<Entry> {
        read(&self.inner.state).entries.get(key).cloned()
    }

    /// How many keys start with the prefix.
    pub fn count(&self, prefix: &str) -> usize {
        let state = read(&self.inner.state);
        range(&state.entries, prefix).count()
    }

    /// Every entry whose key starts with the prefix, at one revision.
    pub fn list(&self, prefix: &str) -> Snapshot {
        let state = read(&self.inner.state);
        Snapshot {
            revision: state.revision,
            entries: range(&state.entries, prefix).cloned().collect(),
        }
    }

    /// Runs a read-modify-write transaction on one key and waits on this thread until it is
    /// committed ([`Store::decide`], then [`Pending::wait`]).
    ///
    /// A returned `Ok` means the change is committed to the database.
    pub fn mutate<E>(
        &self,
        key: &str,
        decide: impl FnOnce(Option<&Entry>) -> Result<Mutation, E>,
    ) -> Result<Result<Option<Entry>, E>, StoreError> {
        self.decide(key, decide)?.wait()
    }

    /// Decides a read-modify-write transaction on one key and queues the change.
    ///
    /// `decide` sees the latest entry (if any; committed or queued) and returns what to do or
    /// an error that aborts the transaction with nothing changed. Transactions on one key are
    /// serialised; on different keys they decide in parallel, and the change gets its revision
    /// when it is queued. The change is acknowledged once the returned [`Pending`] is
    /// committed; the outcome is the entry as stored (`None` for a deletion). `decide` runs
    /// under the key's lock and must not write to the store itself.
    pub fn decide<E>(
        &self,
        key: &str,
        decide: impl FnOnce(Option<&Entry>) -> Result<Mutation, E>,
    ) -> Result<Pending<Result<Option<Entry>, E>>, StoreError> {
        let pending = |revision, outcome| Pending {
            store: self.clone(),
            revision,
            outcome,
        };
        let _key_lock = lock(&self.inner.key_locks[key_lock_index(key)]);
        let current = {
            let state = read(&self.inner.state);
            if let Some(reason) = &state.broken {
                return Err(StoreError::Broken(reason.clone()));
            }
            state.latest(key).cloned()
        };
        // Only writers of this key change its latest value, and they wait for its lock.
        let mutation = match decide(current.as_ref()) {
            Ok(mutation) => mutation,
            Err(error) => return Ok(pending(0, Err(error))),
        };
        let (kind, value) = match mutation {
            Mutation::Keep => {
                if current.is_some() {
                    self.refresh_if_stale(key)?;
                }
                // Answer only once what it answers with is committed.
                let revision = current.as_ref().map_or(0, |e| e.revision);
                return Ok(pending(revision, Ok(current)));
            }
            Mutation::Put(value) if current.is_some() => (EventKind::Updated, value),
            Mutation::Put(value) => (EventKind::Created, value),
            Mutation::Delete(_) if current.is_none() => return Ok(pending(0, Ok(None))),
            Mutation::Delete(value) => (EventKind::Deleted, value),
        };
        let mut state = write(&self.inner.state);
        if let Some(reason) = &state.broken {
            return Err(StoreError::Broken(reason.clone()));
        }
        let next_revision = state.decided + 1;
        let value = value.with_revision(next_revision);
        let previous = current.as_ref().map(|entry| entry.value.clone());
        let key: Arc<str> = current.map_or_else(|| key.into(), |entry| entry.key);
        let entry = Entry {
            key: key.clone(),
            revision: next_revision,
            value,
        };
        state.decided = next_revision;
        state
            .overlay
            .insert(key, (kind != EventKind::Deleted).then(|| entry.clone()));
        state.queue.push(Event {
            kind,
            entry: entry.clone(),
            previous,
        });
        drop(state);
        self.inner.committer.wake();
        Ok(pending(
            next_revision,
            Ok((kind != EventKind::Deleted).then_some(entry)),
        ))
    }

    /// Returns once `revision` is committed: commits everything queued if no other writer has.
    fn commit_through(&self, revision: u64) -> Result<(), StoreError> {
        if read(&self.inner.state).revision >= revision {
            return Ok(());
        }
        let mut database = lock(&self.inner.database);
        let batch = {
            let mut state = write(&self.inner.state);
            if state.revision >= revision {
                return Ok(());
            }
            if let Some(reason) = &state.broken {
                return Err(StoreError::Broken(reason.clone()));
            }
            std::mem::take(&mut state.queue)
        };
        if batch.is_empty() {
            return Ok(());
        }
        // Readers and other deciders proceed while the batch is written.
        let written = database.write_batch(&batch, self.inner.transformer.as_deref());
        let mut state = write(&self.inner.state);
        if let Err(error) = written {
            // Later decisions may rest on these changes: none of them can stand.
            state.broken = Some(error.to_string());
            state.queue.clear();
            state.overlay.clear();
            state.decided = state.revision;
            drop(state);
            // Wake those waiting for a commit that will not come.
            self.wake_waiters(u64::MAX);
            return Err(error);
        }
        for event in &batch {
            let key = event.entry.key.clone();
            // Written with the current writer: no longer stale.
            state.stale.remove(&key);
            if event.kind == EventKind::Deleted {
                state.entries.remove(&key);
            } else {
                state.entries.insert(key.clone(), event.entry.clone());
            }
            let newest_pending = state
                .overlay
                .get(&key)
                .map(|e| e.as_ref().map_or(event.entry.revision, |e| e.revision));
            if newest_pending == Some(event.entry.revision) {
                state.overlay.remove(&key);
            }
            state.revision = event.entry.revision;
        }
        let committed = state.revision;
        self.inner.history.push_all(batch);
        drop(state);
        drop(database);
        self.wake_waiters(committed);
        Ok(())
    }

    /// Rewrites the stored form of a committed key read by an older provider or key, with
    /// its revision and plain value unchanged (a compare-and-swap on the revision in the
    /// file). A key with a queued change is left alone: that change is written fresh.
    /// Called under the key's lock; takes the database's lock, as commits do, so the
    /// committed entry is the file's.
    fn refresh_if_stale(&self, key: &str) -> Result<(), StoreError> {
        let Some(transformer) = self.inner.transformer.as_deref() else {
            return Ok(());
        };
        if !read(&self.inner.state).stale.contains(key) {
            return Ok(());
        }
        let database = lock(&self.inner.database);
        let entry = {
            let state = read(&self.inner.state);
            if state.overlay.contains_key(key) || !state.stale.contains(key) {
                return Ok(());
            }
            match state.entries.get(key) {
                Some(entry) => entry.clone(),
                None => return Ok(()),
            }
        };
        let stored = transformer
            .transform_to_storage(key, &entry.value)
            .map_err(|message| StoreError::Transform {
                key: key.into(),
                message,
            })?;
        let stored = stored.as_deref().unwrap_or(&entry.value);
        database.rewrite(key, entry.revision, stored)?;
        write(&self.inner.state).stale.remove(key);
        drop(database);
        tracing::debug!(key, "stale stored value rewritten");
        Ok(())
    }

    /// How many committed keys have a stale stored form.
    pub fn stale_count(&self) -> usize {
        read(&self.inner.state).stale.len()
    }

    /// Wakes the tasks waiting for revisions up to `revision`.
    fn wake_waiters(&self, revision: u64) {
        let woken = {
            let mut waiters = lock(&self.inner.waiters);
            let later = waiters.split_off(&revision.saturating_add(1));
            std::mem::replace(&mut *waiters, later)
        };
        for wake in woken.into_values().flatten() {
            // A waiter that gave up has nothing to be told.
            wake.send(()).ok();
        }
    }

    /// Commits whatever is queued now (the committer thread's work).
    fn commit_queued(&self) -> Result<(), StoreError> {
        let decided = read(&self.inner.state).decided;
        self.commit_through(decided)
    }

    /// Watches keys starting with `prefix` for changes after `revision`.
    ///
    /// Fails with [`StoreError::Gone`] when changes after `revision` are no longer kept.
    pub fn watch(&self, prefix: &str, revision: u64) -> Result<Watcher, StoreError> {
        self.inner.history.watch(prefix, revision)
    }

    /// Starts a watch at the current revision together with a snapshot at that revision, so
    /// that no change is missed or seen twice between them.
    pub fn list_and_watch(&self, prefix: &str) -> (Snapshot, Watcher) {
        let state = read(&self.inner.state);
        let snapshot = Snapshot {
            revision: state.revision,
            entries: range(&state.entries, prefix).cloned().collect(),
        };
        let watcher = self
            .inner
            .history
            .watch(prefix, state.revision)
            .expect("the current revision is always within the history");
        (snapshot, watcher)
    }

    /// The oldest revision a watch can start from.
    pub fn oldest_watchable_revision(&self) -> u64 {
        self.inner.history.oldest()
    }
}

fn key_of(error: &StoreError) -> String {
    match error {
        StoreError::Transform { key, .. } => key.clone(),
        other => other.to_string(),
    }
}

fn message_of(error: &StoreError) -> String {
    match error {
        StoreError::Transform { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// How many locks the keys share.
const KEY_LOCKS: usize = 64;

fn key_lock_index(key: &str) -> usize {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let hash =
        BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(key);
    (hash % KEY_LOCKS as u64) as usize
}

fn range<'a>(
    entries: &'a BTreeMap<Arc<str>, Entry>,
    prefix: &'a str,
) -> impl Iterator<Item = &'a Entry> + 'a {
    entries
        .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
        .take_while(move |(key, _)| key.starts_with(prefix))
        .map(|(_, entry)| entry)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
