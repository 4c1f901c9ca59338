//! The sha256 index: for every object the store holds, the sha256 and size of its content as
//! computed when its write completed — never an ETag, which for a multipart upload is a hash
//! of part hashes. Kept beside the data as one JSON file (`<data-dir>/model-store-index.json`),
//! rewritten through a temporary file and a rename on every change, so a crash leaves the old
//! or the new index, never half of one.
//!
//! Knows nothing of S3 requests or of the ModelPack view; [`crate::indexed`] records into it
//! and [`crate::oci`] reads it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::StoreError;

/// What the index knows of one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Lower-case hex sha256 of the content.
    pub sha256: String,
    pub size: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    /// `<bucket>/<key>` → entry.
    objects: BTreeMap<String, Entry>,
}

/// The index, loaded in memory and written through on every change.
#[derive(Debug)]
pub struct Index {
    path: PathBuf,
    objects: Mutex<BTreeMap<String, Entry>>,
}

fn name(bucket: &str, key: &str) -> String {
    format!("{bucket}/{key}")
}

impl Index {
    /// The index kept in `path`; empty when the file does not exist yet.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let objects = match std::fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice::<File>(&bytes)
                    .map_err(|e| StoreError::Invalid {
                        path: path.to_path_buf(),
                        reason: e.to_string(),
                    })?
                    .objects
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(StoreError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            objects: Mutex::new(objects),
        })
    }

    fn change(&self, edit: impl FnOnce(&mut BTreeMap<String, Entry>)) -> Result<(), StoreError> {
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        edit(&mut objects);
        let bytes = serde_json::to_vec(&File {
            objects: objects.clone(),
        })
        .unwrap_or_default();
        // Written under the lock so that files land in the order the changes were made.
        crate::credentials::write_private(&self.path, &bytes)
    }

    /// Records `bucket/key` as holding content of `sha256` and `size`.
    pub fn record(&self, bucket: &str, key: &str, entry: Entry) -> Result<(), StoreError> {
        self.change(|objects| {
            objects.insert(name(bucket, key), entry);
        })
    }

    /// Drops `bucket/key`.
    pub fn remove(&self, bucket: &str, key: &str) -> Result<(), StoreError> {
        self.change(|objects| {
            objects.remove(&name(bucket, key));
        })
    }

    /// Drops every object of `bucket`.
    pub fn remove_bucket(&self, bucket: &str) -> Result<(), StoreError> {
        let prefix = format!("{bucket}/");
        self.change(|objects| objects.retain(|k, _| !k.starts_with(&prefix)))
    }

    /// Brings the index in line with the files under `root` (whose subdirectories are the
    /// buckets) after a crash between a write and its record, or files changed behind the
    /// store's back: an entry whose file is gone or has another size is dropped, a file
    /// without an entry (or with a dropped one) is hashed and recorded. A file rewritten in
    /// place at the same size is not noticed. Returns how many entries were (recorded,
    /// dropped).
    pub fn reconcile(&self, root: &Path) -> Result<(usize, usize), StoreError> {
        let mut on_disk = BTreeMap::new();
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        for bucket in std::fs::read_dir(root).map_err(io(root))? {
            let bucket = bucket.map_err(io(root))?;
            let name = bucket.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !bucket.file_type().map_err(io(root))?.is_dir() {
                continue;
            }
            let mut pending = vec![bucket.path()];
            while let Some(dir) = pending.pop() {
                for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
                    let entry = entry.map_err(io(&dir))?;
                    let kind = entry.file_type().map_err(io(&dir))?;
                    let path = entry.path();
                    if kind.is_dir() {
                        pending.push(path);
                    } else if kind.is_file() {
                        let size = entry.metadata().map_err(io(&path))?.len();
                        let key = path
                            .strip_prefix(root)
                            .unwrap_or(&path)
                            .components()
                            .map(|c| c.as_os_str().to_string_lossy().into_owned())
                            .collect::<Vec<_>>()
                            .join("/");
                        on_disk.insert(key, (path, size));
                    }
                }
            }
        }
        let current = self
            .objects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let dropped: Vec<String> = current
            .iter()
            .filter(|(k, e)| on_disk.get(*k).is_none_or(|(_, size)| *size != e.size))
            .map(|(k, _)| k.clone())
            .collect();
        let mut recorded = Vec::new();
        for (key, (path, size)) in &on_disk {
            if current.get(key).is_some_and(|e| e.size == *size) {
                continue;
            }
            recorded.push((key.clone(), hash_path(path)?));
        }
        if dropped.is_empty() && recorded.is_empty() {
            return Ok((0, 0));
        }
        let counts = (recorded.len(), dropped.len());
        self.change(|objects| {
            for key in &dropped {
                objects.remove(key);
            }
            objects.extend(recorded);
        })?;
        Ok(counts)
    }

    /// The entry of `bucket/key`.
    pub fn get(&self, bucket: &str, key: &str) -> Option<Entry> {
        let objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        objects.get(&name(bucket, key)).cloned()
    }

    /// Every `(key, entry)` of `bucket` whose key starts with `prefix`, in key order.
    pub fn list(&self, bucket: &str, prefix: &str) -> Vec<(String, Entry)> {
        let start = name(bucket, prefix);
        let strip = bucket.len() + 1;
        let objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        objects
            .range(start.clone()..)
            .take_while(|(k, _)| k.starts_with(&start))
            .map(|(k, v)| (k[strip..].to_owned(), v.clone()))
            .collect()
    }
}

/// The sha256 and size of the file at `path`.
fn hash_path(path: &Path) -> Result<Entry, StoreError> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let read = file.read(&mut buffer).map_err(io)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        size += read as u64;
    }
    Ok(Entry {
        sha256: tessera_cache::hex(&hasher.finalize()),
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(fill: char, size: u64) -> Entry {
        Entry {
            sha256: fill.to_string().repeat(64),
            size,
        }
    }

    #[test]
    fn the_index_survives_reopening_and_lists_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.json");
        let index = Index::open(&path).unwrap();
        index
            .record("models", "a/b/main/x.bin", entry('a', 3))
            .unwrap();
        index
            .record("models", "a/b/main/y.json", entry('b', 4))
            .unwrap();
        index
            .record("models", "a/bc/main/z", entry('c', 5))
            .unwrap();
        index
            .record("other", "a/b/main/x.bin", entry('d', 6))
            .unwrap();
        index
            .record("models", "a/b/main/x.bin", entry('e', 7))
            .unwrap();
        index.remove("models", "a/bc/main/z").unwrap();

        let reopened = Index::open(&path).unwrap();
        assert_eq!(
            reopened.list("models", "a/b/"),
            vec![
                ("a/b/main/x.bin".to_owned(), entry('e', 7)),
                ("a/b/main/y.json".to_owned(), entry('b', 4)),
            ]
        );
        assert_eq!(reopened.list("models", "a/bc/"), vec![]);
        assert_eq!(reopened.get("other", "a/b/main/x.bin"), Some(entry('d', 6)));
        reopened.remove_bucket("models").unwrap();
        assert_eq!(Index::open(&path).unwrap().list("models", ""), vec![]);
        assert_eq!(
            Index::open(&path).unwrap().get("other", "a/b/main/x.bin"),
            Some(entry('d', 6))
        );
        std::fs::write(&path, "not json").unwrap();
        let error = Index::open(&path).unwrap_err().to_string();
        assert!(error.contains("index.json"), "{error}");
    }

    #[test]
    fn reconciling_hashes_unindexed_files_and_drops_vanished_ones() {
        let data = tempfile::tempdir().unwrap();
        let root = data.path().join("store");
        std::fs::create_dir_all(root.join("models/a/b/main")).unwrap();
        std::fs::write(root.join("models/a/b/main/kept.bin"), b"kept").unwrap();
        std::fs::write(root.join("models/a/b/main/new.bin"), b"new!").unwrap();
        std::fs::write(root.join("models/a/b/main/resized.bin"), b"longer").unwrap();
        // s3s-fs's own files beside the buckets are not objects.
        std::fs::write(root.join(".bucket-bW9kZWxz.object-eA.metadata.json"), b"{}").unwrap();
        let index = Index::open(&data.path().join("index.json")).unwrap();
        let kept = Entry {
            sha256: tessera_cache::sha256_hex(b"kept"),
            size: 4,
        };
        index
            .record("models", "a/b/main/kept.bin", kept.clone())
            .unwrap();
        index
            .record("models", "a/b/main/gone.bin", entry('a', 3))
            .unwrap();
        index
            .record("models", "a/b/main/resized.bin", entry('b', 3))
            .unwrap();

        assert_eq!(index.reconcile(&root).unwrap(), (2, 2));
        assert_eq!(
            index.list("models", ""),
            vec![
                ("a/b/main/kept.bin".to_owned(), kept),
                (
                    "a/b/main/new.bin".to_owned(),
                    Entry {
                        sha256: tessera_cache::sha256_hex(b"new!"),
                        size: 4
                    }
                ),
                (
                    "a/b/main/resized.bin".to_owned(),
                    Entry {
                        sha256: tessera_cache::sha256_hex(b"longer"),
                        size: 6
                    }
                ),
            ]
        );
        assert_eq!(index.reconcile(&root).unwrap(), (0, 0));
        let reopened = Index::open(&data.path().join("index.json")).unwrap();
        assert_eq!(reopened.list("models", "").len(), 3);
    }
}
