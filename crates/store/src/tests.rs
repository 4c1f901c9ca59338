use super::*;
use std::convert::Infallible;

fn open(dir: &tempfile::TempDir, history: usize) -> Store {
    Store::open(
        &dir.path().join("state.db"),
        StoreOptions {
            history,
            fsync: false,
        },
    )
    .expect("open store")
}

fn put(store: &Store, key: &str, value: &str) -> u64 {
    let value = Bytes::from(value.to_string());
    store
        .mutate::<Infallible>(key, |_| Ok(Mutation::Put(value.into())))
        .expect("commit")
        .expect("decided")
        .expect("stored")
        .revision
}

fn delete(store: &Store, key: &str) {
    store
        .mutate::<Infallible>(key, |current| {
            Ok(current.map_or(Mutation::Keep, |e| Mutation::Delete(e.value.clone().into())))
        })
        .expect("commit")
        .expect("decided");
}

#[test]
fn revisions_are_global_and_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 100);
    assert_eq!(store.revision(), 0);
    assert_eq!(put(&store, "/pods/a", "1"), 1);
    assert_eq!(put(&store, "/pods/b", "2"), 2);
    assert_eq!(put(&store, "/pods/a", "3"), 3);
    assert_eq!(store.get("/pods/a").unwrap().revision, 3);
    assert_eq!(store.get("/pods/b").unwrap().revision, 2);
    assert_eq!(store.revision(), 3);
}

#[test]
fn compare_and_swap_aborts_without_changing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 100);
    put(&store, "/k", "v1");
    let stale = 0u64;
    let outcome = store
        .mutate("/k", |current| {
            if current.map(|e| e.revision) != Some(stale) {
                return Err("conflict");
            }
            Ok(Mutation::Put(Bytes::from_static(b"v2").into()))
        })
        .unwrap();
    assert_eq!(outcome.unwrap_err(), "conflict");
    assert_eq!(store.get("/k").unwrap().value, Bytes::from_static(b"v1"));
    assert_eq!(store.revision(), 1);
}

#[test]
fn lists_are_prefix_scoped_and_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 100);
    put(&store, "/pods/ns1/b", "b");
    put(&store, "/pods/ns1/a", "a");
    put(&store, "/pods/ns2/c", "c");
    put(&store, "/podsx/ns1/z", "z");
    let snapshot = store.list("/pods/ns1/");
    let keys: Vec<_> = snapshot.entries.iter().map(|e| &*e.key).collect();
    assert_eq!(keys, ["/pods/ns1/a", "/pods/ns1/b"]);
    assert_eq!(snapshot.revision, 4);
    assert_eq!(store.count("/pods/"), 3);
}

#[test]
fn values_and_revision_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(&dir, 100);
        put(&store, "/a", "1");
        put(&store, "/b", "2");
        delete(&store, "/a");
    }
    let store = open(&dir, 100);
    assert_eq!(store.revision(), 3);
    assert!(store.get("/a").is_none());
    assert_eq!(store.get("/b").unwrap().value, Bytes::from_static(b"2"));
    assert_eq!(put(&store, "/c", "3"), 4);
}

#[tokio::test]
async fn watch_sees_changes_after_its_revision_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 100);
    put(&store, "/pods/a", "1");
    let mut watcher = store.watch("/pods/", 1).unwrap();
    put(&store, "/nodes/x", "n");
    put(&store, "/pods/a", "2");
    delete(&store, "/pods/a");
    let batch = watcher.next_batch(10).await.unwrap();
    let seen: Vec<_> = batch
        .iter()
        .map(|e| (e.kind, e.entry.revision, e.previous.is_some()))
        .collect();
    assert_eq!(
        seen,
        [(EventKind::Updated, 3, true), (EventKind::Deleted, 4, true)]
    );
}

#[tokio::test]
async fn watch_waits_for_a_later_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 100);
    let mut watcher = store.watch("/", 0).unwrap();
    let writer = store.clone();
    let task = tokio::spawn(async move {
        tokio::task::yield_now().await;
        put(&writer, "/x", "1");
    });
    let batch = watcher.next_batch(10).await.unwrap();
    task.await.unwrap();
    assert_eq!(batch[0].kind, EventKind::Created);
    assert_eq!(&*batch[0].entry.key, "/x");
}

#[test]
fn watch_before_the_history_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 3);
    for i in 0..10 {
        put(&store, "/k", &i.to_string());
    }
    assert_eq!(store.oldest_watchable_revision(), 7);
    assert!(matches!(
        store.watch("/", 5),
        Err(StoreError::Gone {
            requested: 5,
            oldest: 7
        })
    ));
    let mut watcher = store.watch("/", 7).unwrap();
    assert_eq!(watcher.poll(10).unwrap().len(), 3);
}

#[test]
fn a_watcher_that_falls_behind_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 2);
    let mut watcher = store.watch("/", 0).unwrap();
    for i in 0..5 {
        put(&store, "/k", &i.to_string());
    }
    assert!(matches!(watcher.poll(10), Err(StoreError::Gone { .. })));
}

#[test]
fn reopened_store_watches_only_from_its_revision() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(&dir, 100);
        put(&store, "/a", "1");
        put(&store, "/a", "2");
    }
    let store = open(&dir, 100);
    assert!(store.watch("/", 1).is_err());
    let (snapshot, mut watcher) = store.list_and_watch("/");
    assert_eq!(snapshot.revision, 2);
    assert!(watcher.poll(10).unwrap().is_empty());
}

#[test]
fn concurrent_writers_are_grouped_without_losing_or_reordering_anything() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 100_000);
    let (_, mut watcher) = store.list_and_watch("/");
    // Eight threads increment one counter (read-modify-write on the latest value, committed
    // or queued) and write keys of their own.
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..250 {
                    let entry = store
                        .mutate::<Infallible>("/counter", |current| {
                            let n: u64 = current
                                .map(|e| std::str::from_utf8(&e.value).unwrap().parse().unwrap())
                                .unwrap_or(0);
                            Ok(Mutation::Put(Bytes::from((n + 1).to_string()).into()))
                        })
                        .expect("commit")
                        .expect("decided")
                        .expect("stored");
                    // Acknowledged means committed: readers see it (or something newer).
                    assert!(store.get("/counter").unwrap().revision >= entry.revision);
                    put(&store, &format!("/own/{t}/{i}"), "x");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(&store.get("/counter").unwrap().value[..], b"2000");
    assert_eq!(store.revision(), 4000);
    assert_eq!(store.count("/own/"), 2000);
    // Watchers saw every revision once, in order.
    let mut seen = 0;
    for event in watcher.poll(10_000).expect("within the history") {
        seen += 1;
        assert_eq!(event.entry.revision, seen);
    }
    assert_eq!(seen, 4000);
    drop(store);
    let reopened = open(&dir, 100);
    assert_eq!(reopened.revision(), 4000);
    assert_eq!(&reopened.get("/counter").unwrap().value[..], b"2000");
}

#[test]
fn changes_awaited_as_tasks_are_committed_by_the_committer_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 1000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // One thread decides every change and no task commits: only the committer thread can.
    let entries = runtime.block_on(async {
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let value = Bytes::from(i.to_string());
                    store
                        .decide::<Infallible>(&format!("/k/{i}"), |_| {
                            Ok(Mutation::Put(value.into()))
                        })
                        .expect("decided")
                        .committed()
                        .await
                        .expect("committed")
                        .expect("stored")
                        .expect("an entry")
                })
            })
            .collect();
        let mut entries = Vec::new();
        for task in tasks {
            entries.push(task.await.unwrap());
        }
        entries
    });
    for entry in &entries {
        // Acknowledged means committed: readers see it.
        assert_eq!(store.get(&entry.key).unwrap().revision, entry.revision);
    }
    assert_eq!(store.revision(), 200);
    drop(store);
    assert_eq!(open(&dir, 10).count("/k/"), 200);
}

#[test]
fn a_refused_change_needs_no_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 10);
    let refused = store
        .decide("/k", |_| Err::<Mutation, _>("no"))
        .unwrap()
        .transpose();
    assert!(matches!(refused, Err("no")));
    assert_eq!(store.revision(), 0);
}

#[test]
fn a_value_gets_its_revision_in_the_place_it_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 10);
    put(&store, "/a", "x");
    let template = Bytes::from_static(br#"{"rv":""}"#);
    let entry = store
        .mutate::<Infallible>("/b", |_| {
            Ok(Mutation::Put(NewValue {
                bytes: template.clone(),
                revision_at: Some(7),
            }))
        })
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(entry.revision, 2);
    assert_eq!(&store.get("/b").unwrap().value[..], br#"{"rv":"2"}"#);
    // An offset past the end leaves the bytes as they are.
    store
        .mutate::<Infallible>("/c", |_| {
            Ok(Mutation::Put(NewValue {
                bytes: template.clone(),
                revision_at: Some(99),
            }))
        })
        .unwrap()
        .unwrap();
    assert_eq!(&store.get("/c").unwrap().value[..], br#"{"rv":""}"#);
}

#[test]
fn a_waiting_watcher_sees_every_change_committed_by_another_thread() {
    // Changes are logged by whichever thread commits them (the committer, or a writer); a
    // watcher between reading the log and waiting must still be woken by each of them.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 100_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut watcher = store.watch("/w/", 0).unwrap();
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            for i in 0..2000 {
                put(&store, &format!("/w/{i}"), "x");
            }
        })
    };
    let seen = runtime.block_on(async move {
        let mut seen = 0;
        while seen < 2000 {
            let batch =
                tokio::time::timeout(std::time::Duration::from_secs(10), watcher.next_batch(100))
                    .await
                    .expect("a committed change is always delivered")
                    .unwrap();
            seen += batch.len();
        }
        seen
    });
    writer.join().unwrap();
    assert_eq!(seen, 2000);
}

/// A transformer for tests: stores `enc:<generation>:` + the value reversed; reads every
/// generation up to its own, and marks older ones stale.
struct Reverse {
    generation: u8,
}

impl ValueTransformer for Reverse {
    fn transform_to_storage(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>, String> {
        if key.starts_with("/plain/") {
            return Ok(None);
        }
        let mut out = format!("enc:{}:", self.generation).into_bytes();
        out.extend(value.iter().rev());
        Ok(Some(out))
    }

    fn transform_from_storage(&self, key: &str, stored: &[u8]) -> Result<FromStorage, String> {
        if key.starts_with("/plain/") {
            return Ok(FromStorage {
                value: None,
                stale: false,
            });
        }
        let text = stored
            .strip_prefix(b"enc:")
            .ok_or("no matching prefix found")?;
        let generation = text[0] - b'0';
        if generation > self.generation {
            return Err(format!("no key for generation {generation}"));
        }
        Ok(FromStorage {
            value: Some(text[2..].iter().rev().copied().collect()),
            stale: generation != self.generation,
        })
    }
}

fn open_transformed(dir: &tempfile::TempDir, generation: u8) -> Result<Store, StoreError> {
    Store::open_with_transformer(
        &dir.path().join("state.db"),
        StoreOptions::default(),
        Some(Arc::new(Reverse { generation })),
    )
}

/// The raw `value` column of a key, as the file holds it.
fn raw(store: &Store, key: &str) -> Vec<u8> {
    store.stored_form(key).expect("a stored row")
}

#[test]
fn a_second_opening_of_a_file_in_use_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = Store::open(&path, StoreOptions::default()).unwrap();
    put(&store, "/a", "1");
    let error = Store::open(&path, StoreOptions::default())
        .err()
        .expect("the file is held by the first store");
    let message = error.to_string();
    assert!(
        message.contains(&path.display().to_string()) && message.contains("locked"),
        "{message}"
    );
    // The first store goes on unharmed, and the file opens again once it is closed.
    put(&store, "/b", "2");
    drop(store);
    let store = Store::open(&path, StoreOptions::default()).unwrap();
    assert_eq!(&store.get("/b").unwrap().value[..], b"2");
}

#[test]
fn values_are_transformed_only_where_they_reach_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_transformed(&dir, 1).unwrap();
    put(&store, "/secrets/a", "hunter2");
    put(&store, "/plain/b", "visible");
    // Memory (gets, lists, watches) keeps plain values; the file has the stored form.
    assert_eq!(&store.get("/secrets/a").unwrap().value[..], b"hunter2");
    assert_eq!(raw(&store, "/secrets/a"), b"enc:1:2retnuh");
    assert_eq!(raw(&store, "/plain/b"), b"visible");
    drop(store);
    let store = open_transformed(&dir, 1).unwrap();
    assert_eq!(&store.get("/secrets/a").unwrap().value[..], b"hunter2");
    assert_eq!(store.stale_count(), 0);
}

#[test]
fn a_stale_value_is_rewritten_when_kept_with_its_revision_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_transformed(&dir, 1).unwrap();
    let revision = put(&store, "/secrets/a", "hunter2");
    put(&store, "/secrets/b", "swordfish");
    drop(store);
    let store = open_transformed(&dir, 2).unwrap();
    assert_eq!(store.stale_count(), 2);
    let kept = store
        .mutate::<Infallible>("/secrets/a", |_| Ok(Mutation::Keep))
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(kept.revision, revision);
    assert_eq!(store.revision(), 2, "a rewrite is not a change");
    assert_eq!(raw(&store, "/secrets/a"), b"enc:2:2retnuh");
    assert_eq!(store.stale_count(), 1);
    // An update writes the current form too.
    put(&store, "/secrets/b", "swordfish");
    assert_eq!(raw(&store, "/secrets/b"), b"enc:2:hsifdrows");
    assert_eq!(store.stale_count(), 0);
    drop(store);
    // Generation 1 can no longer read anything: all was rewritten.
    let error = open_transformed(&dir, 1).err().expect("unreadable");
    assert!(error.to_string().contains("and 1 more"), "{error}");
}

#[test]
fn an_unreadable_value_stops_the_opening_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_transformed(&dir, 2).unwrap();
    put(&store, "/secrets/a", "hunter2");
    drop(store);
    let error = open_transformed(&dir, 1).err().expect("unreadable");
    assert_eq!(
        error.to_string(),
        "stored value of /secrets/a: no key for generation 2"
    );
    // Nothing was changed: the right transformer still reads it.
    let store = open_transformed(&dir, 2).unwrap();
    assert_eq!(&store.get("/secrets/a").unwrap().value[..], b"hunter2");
}

#[test]
fn a_kept_key_with_a_queued_change_is_left_to_that_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_transformed(&dir, 1).unwrap();
    put(&store, "/secrets/a", "old");
    drop(store);
    let store = open_transformed(&dir, 2).unwrap();
    assert_eq!(store.stale_count(), 1);
    // A concurrent writer's change is queued (maybe not committed yet) when a rewrite keeps
    // the key: the rewrite must not put the older value back.
    let queued = store
        .decide::<Infallible>("/secrets/a", |_| {
            Ok(Mutation::Put(Bytes::from_static(b"new").into()))
        })
        .unwrap();
    let kept = store
        .decide::<Infallible>("/secrets/a", |_| Ok(Mutation::Keep))
        .unwrap();
    queued.wait().unwrap().unwrap();
    kept.wait().unwrap().unwrap();
    assert_eq!(&store.get("/secrets/a").unwrap().value[..], b"new");
    assert_eq!(raw(&store, "/secrets/a"), b"enc:2:wen");
    assert_eq!(store.stale_count(), 0);
}

#[test]
fn the_wal_is_checkpointed_beside_the_commits_and_starts_over() {
    use crate::checkpointer::WAL_BACKSTOP_PAGES;
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir, 10);
    let wal = dir.path().join("state.db-wal");
    // Without checkpoints these commits leave some 10,000 frames (40 MiB) in the WAL; the
    // thread's passes and the writer's catch-ups let the log start over again and again.
    let value = "x".repeat(3000);
    let mut largest = 0;
    for i in 0..3000 {
        put(&store, &format!("/k/{i:05}"), &format!("{i}{value}"));
        largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
    }
    // The log starts over once a checkpoint has copied it all; while the thread's pass is
    // still copying (a busy machine: the suite runs beside a build), the writer's catch-up
    // cannot restart it and it grows past the backstop for a while. Twice the backstop is
    // still a tenth of what the commits leave without checkpoints.
    let frame = 4096 + 24;
    assert!(
        largest <= u64::from(2 * WAL_BACKSTOP_PAGES) * frame,
        "the WAL grew to {largest} bytes"
    );
    drop(store);
    let store = open(&dir, 10);
    assert_eq!(store.revision(), 3000);
    for i in [0, 1499, 2999] {
        let entry = store.get(&format!("/k/{i:05}")).expect("kept");
        assert!(entry.value.starts_with(format!("{i}x").as_bytes()));
    }
}
