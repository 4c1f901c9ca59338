//! The blob store on disk, content addressed by sha256.
//!
//! ```text
//! <root>/blobs/sha256/<hex>      complete blobs, read-only, visible only once verified
//! <root>/meta/<hex>.json         a complete blob's piece length and per-piece CRC32s
//! <root>/partial/<hex>           a download in progress (the file at its full length)
//! <root>/partial/<hex>.state     its verified pieces with their CRC32s (write-temp-then-rename)
//! <root>/hf/models--org--name/…  the optional Hugging Face view (relative symlinks into blobs)
//! ```
//!
//! A blob enters `blobs/` only by renaming its partial file after the core's
//! [`Download::finish`] returned [`Verified`]; the meta file is written before the rename, the
//! state file removed after. A restart resumes from the state file and re-reads every piece it
//! records, keeping only those whose CRC32 still matches. Every method blocks (std::fs): the
//! daemon calls them on tokio's blocking pool.
//!
//! The store does not decide what is verified, what to evict or where bytes come from.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tessera_cache::hf_layout::{self, Repo};
use tessera_cache::is_lower_hex;
use tessera_cache::pieces::{Download, Layout, Verified, crc32};
use thiserror::Error;

/// A file operation that failed, naming the path.
#[derive(Debug, Clone, Error)]
#[error("{op} {path}: {message}")]
pub struct StoreError {
    pub op: &'static str,
    pub path: String,
    pub message: String,
    /// The disk is full (ENOSPC).
    pub full: bool,
}

fn fail<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |error| StoreError {
        op,
        path: path.display().to_string(),
        full: error.kind() == io::ErrorKind::StorageFull,
        message: if error.kind() == io::ErrorKind::StorageFull {
            format!("the cache disk is full ({error})")
        } else {
            error.to_string()
        },
    }
}

/// The record of a download's verified pieces, or of a complete blob's pieces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PieceRecord {
    pub sha256: String,
    pub size: u64,
    pub piece_length: u64,
    /// (piece, CRC32) of every verified piece, in order.
    pub pieces: Vec<(u64, u32)>,
}

/// A complete blob found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBlob {
    pub hex: String,
    pub size: u64,
    /// Last modification, in milliseconds since the epoch (the LRU's starting point).
    pub modified_ms: u64,
    pub record: Option<PieceRecord>,
}

/// The store rooted at a directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// Opens (creating) the store's directories under `root`.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        let store = Self {
            root: root.to_path_buf(),
        };
        for dir in [store.blobs_dir(), store.partial_dir(), store.meta_dir()] {
            fs::create_dir_all(&dir).map_err(fail("create", &dir))?;
        }
        Ok(store)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blobs_dir(&self) -> PathBuf {
        self.root.join("blobs").join("sha256")
    }

    fn partial_dir(&self) -> PathBuf {
        self.root.join("partial")
    }

    fn meta_dir(&self) -> PathBuf {
        self.root.join("meta")
    }

    /// Where the complete blob `hex` lives.
    pub fn blob_path(&self, hex: &str) -> PathBuf {
        self.blobs_dir().join(hex)
    }

    pub fn partial_path(&self, hex: &str) -> PathBuf {
        self.partial_dir().join(hex)
    }

    fn state_path(&self, hex: &str) -> PathBuf {
        self.partial_dir().join(format!("{hex}.state"))
    }

    fn meta_path(&self, hex: &str) -> PathBuf {
        self.meta_dir().join(format!("{hex}.json"))
    }

    /// The complete blobs on disk (files named by 64 hex digits; anything else is ignored).
    pub fn scan(&self) -> Result<Vec<StoredBlob>, StoreError> {
        let dir = self.blobs_dir();
        let mut blobs = Vec::new();
        for entry in fs::read_dir(&dir).map_err(fail("list", &dir))? {
            let entry = entry.map_err(fail("list", &dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_lower_hex(&name, 64) {
                continue;
            }
            let meta = entry.metadata().map_err(fail("stat", &entry.path()))?;
            let modified_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            let record = self.read_record(&self.meta_path(&name));
            blobs.push(StoredBlob {
                hex: name,
                size: meta.len(),
                modified_ms,
                record,
            });
        }
        blobs.sort_by(|a, b| a.hex.cmp(&b.hex));
        Ok(blobs)
    }

    fn read_record(&self, path: &Path) -> Option<PieceRecord> {
        let text = fs::read(path).ok()?;
        match serde_json::from_slice(&text) {
            Ok(record) => Some(record),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "ignoring an unreadable piece record");
                None
            }
        }
    }

    /// Starts or resumes the download of `hex`: the partial file at its full length and the
    /// pieces a previous run verified whose bytes still match their CRC32.
    pub fn begin(&self, layout: Layout, hex: &str) -> Result<Download, StoreError> {
        let fresh = || {
            Download::new(layout, hex).map_err(|e| StoreError {
                op: "start",
                path: hex.to_owned(),
                message: e.to_string(),
                full: false,
            })
        };
        let path = self.partial_path(hex);
        // A crash between `commit`'s chmod and its rename leaves a read-only partial file.
        if let Ok(meta) = fs::metadata(&path)
            && meta.permissions().readonly()
        {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644))
                .map_err(fail("chmod", &path))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(fail("open", &path))?;
        file.set_len(layout.size()).map_err(fail("size", &path))?;
        let state = self.state_path(hex);
        let Some(record) = self.read_record(&state) else {
            return fresh();
        };
        if record.sha256 != hex
            || record.size != layout.size()
            || record.piece_length != layout.piece_length()
        {
            tracing::warn!(
                digest = hex,
                "discarding a download state recorded for another layout"
            );
            return fresh();
        }
        let mut kept = Vec::new();
        for (index, crc) in record.pieces {
            let Ok(range) = layout.range(index) else {
                continue;
            };
            let mut bytes = vec![0; usize::try_from(range.len).unwrap_or(0)];
            if file.read_exact_at(&mut bytes, range.offset).is_ok() && crc32(&bytes) == crc {
                kept.push((index, crc));
            } else {
                tracing::warn!(
                    digest = hex,
                    piece = index,
                    "a recorded piece no longer matches its CRC32; fetching it again"
                );
            }
        }
        Download::resume(layout, hex, kept).map_err(|e| StoreError {
            op: "resume",
            path: state.display().to_string(),
            message: e.to_string(),
            full: false,
        })
    }

    /// Writes a piece's bytes at `offset` of the partial file.
    pub fn write_piece(&self, hex: &str, offset: u64, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.partial_path(hex);
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(fail("open", &path))?;
        file.write_all_at(bytes, offset)
            .map_err(fail("write", &path))
    }

    /// Records the verified pieces of `download` (write-temp-then-rename).
    pub fn save_state(&self, download: &Download) -> Result<(), StoreError> {
        let record = record_of(download);
        let path = self.state_path(&record.sha256);
        write_atomically(&path, &record)
    }

    /// Reads `len` bytes at `offset` of the partial file (`complete: false`) or the blob.
    pub fn read_range(
        &self,
        hex: &str,
        complete: bool,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, StoreError> {
        let blob = self.blob_path(hex);
        let (path, file) = if complete {
            let file = File::open(&blob);
            (blob, file)
        } else {
            let partial = self.partial_path(hex);
            match File::open(&partial) {
                // The download completed in between and its file was renamed into place: the
                // same verified bytes are read from there.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => match File::open(&blob) {
                    Ok(file) => (blob, Ok(file)),
                    Err(_) => (partial, Err(e)),
                },
                file => (partial, file),
            }
        };
        let file = file.map_err(fail("open", &path))?;
        let mut bytes = vec![0; usize::try_from(len).unwrap_or(0)];
        file.read_exact_at(&mut bytes, offset)
            .map_err(fail("read", &path))?;
        Ok(bytes)
    }

    /// The size and sha256 (lower-case hex) of the partial file.
    pub fn hash_partial(&self, hex: &str) -> Result<(u64, String), StoreError> {
        let path = self.partial_path(hex);
        let mut file = File::open(&path).map_err(fail("open", &path))?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0; 1 << 20];
        let mut size = 0u64;
        loop {
            let read = file.read(&mut buffer).map_err(fail("read", &path))?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
            size += u64::try_from(read).unwrap_or(0);
        }
        Ok((size, tessera_cache::hex(&hasher.finalize())))
    }

    /// Makes a verified download visible: the meta file, read-only permissions, the atomic
    /// rename into `blobs/`, then the state file removed. Takes the core's [`Verified`].
    pub fn commit(&self, verified: &Verified, download: &Download) -> Result<(), StoreError> {
        let hex = verified.sha256.as_str();
        let meta = self.meta_path(hex);
        write_atomically(&meta, &record_of(download))?;
        let partial = self.partial_path(hex);
        fs::set_permissions(&partial, fs::Permissions::from_mode(0o444))
            .map_err(fail("chmod", &partial))?;
        let blob = self.blob_path(hex);
        fs::rename(&partial, &blob).map_err(fail("rename", &partial))?;
        let state = self.state_path(hex);
        match fs::remove_file(&state) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(fail("remove", &state)(error)),
        }
    }

    /// Forgets a download: its partial and state files.
    pub fn discard_partial(&self, hex: &str) {
        for path in [self.partial_path(hex), self.state_path(hex)] {
            if let Err(error) = fs::remove_file(&path)
                && error.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), %error, "cannot remove");
            }
        }
    }

    /// Deletes a complete blob, its meta file and the Hugging Face links are left dangling
    /// (a reader then misses, as `huggingface_hub` does on a deleted blob).
    pub fn remove_blob(&self, hex: &str) -> Result<(), StoreError> {
        for path in [self.blob_path(hex), self.meta_path(hex)] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(fail("remove", &path)(error)),
            }
        }
        Ok(())
    }

    /// Links `hex` into the Hugging Face view: `hf/<repo folder>/blobs/<hex>` to the store's
    /// blob and `hf/<repo folder>/snapshots/<commit>/<path>` to that, both relative.
    pub fn link_hf(
        &self,
        repo: &Repo,
        commit: &str,
        file: &str,
        hex: &str,
    ) -> Result<PathBuf, String> {
        let hf = self.root.join("hf");
        let blob = hf.join(repo.blob(hex).map_err(|e| e.to_string())?);
        let snapshot = hf.join(repo.snapshot(commit, file).map_err(|e| e.to_string())?);
        let target = hf_layout::symlink_target(file, hex).map_err(|e| e.to_string())?;
        link(&blob, Path::new(&format!("../../../blobs/sha256/{hex}")))?;
        link(&snapshot, Path::new(&target))?;
        Ok(snapshot)
    }
}

fn link(path: &Path, target: &Path) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    }
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(format!("replace {}: {error}", path.display())),
    }
    std::os::unix::fs::symlink(target, path).map_err(|e| format!("link {}: {e}", path.display()))
}

fn record_of(download: &Download) -> PieceRecord {
    PieceRecord {
        sha256: download.expected_sha256().to_owned(),
        size: download.layout().size(),
        piece_length: download.layout().piece_length(),
        pieces: download.verified().collect(),
    }
}

fn write_atomically(path: &Path, record: &PieceRecord) -> Result<(), StoreError> {
    let temp = path.with_extension("tmp");
    let bytes = serde_json::to_vec(record).map_err(|e| StoreError {
        op: "encode",
        path: path.display().to_string(),
        message: e.to_string(),
        full: false,
    })?;
    let mut file = File::create(&temp).map_err(fail("create", &temp))?;
    file.write_all(&bytes).map_err(fail("write", &temp))?;
    drop(file);
    fs::rename(&temp, path).map_err(fail("rename", &temp))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store in a fresh directory and a download of `len` bytes (0, 1, 2, …) in pieces of
    /// 10, its first `pieces` written and recorded.
    fn written(
        len: u8,
        pieces: u64,
    ) -> (tempfile::TempDir, Store, Vec<u8>, String, Layout, Download) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let bytes: Vec<u8> = (0..len).collect();
        let hex = tessera_cache::sha256_hex(&bytes);
        let layout = Layout::with_piece_length(u64::from(len), 10).unwrap();
        let mut download = store.begin(layout, &hex).unwrap();
        for index in 0..pieces {
            let range = layout.range(index).unwrap();
            let slice = &bytes[range.offset as usize..(range.offset + range.len) as usize];
            store.write_piece(&hex, range.offset, slice).unwrap();
            download.record(index, slice, None).unwrap();
        }
        (dir, store, bytes, hex, layout, download)
    }

    #[test]
    fn resume_keeps_only_pieces_that_still_match_and_survives_a_read_only_partial() {
        let (dir, store, _, hex, layout, download) = written(40, 3);
        store.save_state(&download).unwrap();
        // Piece 1 is damaged on disk; the partial file is left read-only.
        store.write_piece(&hex, 12, b"xx").unwrap();
        let partial = store.partial_path(&hex);
        fs::set_permissions(&partial, fs::Permissions::from_mode(0o444)).unwrap();
        let resumed = store.begin(layout, &hex).unwrap();
        let kept: Vec<u64> = resumed.verified().map(|(i, _)| i).collect();
        assert_eq!(kept, vec![0, 2]);
        // A state recorded for another layout is ignored.
        let other = Layout::with_piece_length(40, 20).unwrap();
        assert_eq!(store.begin(other, &hex).unwrap().verified().count(), 0);
        // A garbled state file is ignored too.
        fs::write(
            dir.path().join(format!("partial/{hex}.state")),
            b"{not json",
        )
        .unwrap();
        assert_eq!(store.begin(layout, &hex).unwrap().verified().count(), 0);
    }

    #[test]
    fn a_piece_read_as_the_download_completes_is_read_from_the_blob() {
        let (_dir, store, bytes, hex, _, download) = written(20, 2);
        // A peer's request saw the download unfinished; its file is renamed before the read.
        let verified = download.finish(20, &hex).unwrap();
        store.commit(&verified, &download).unwrap();
        assert_eq!(store.read_range(&hex, false, 10, 10).unwrap(), &bytes[10..]);
        // Neither file there: the error names the partial file.
        let other = tessera_cache::sha256_hex(b"other");
        let error = store.read_range(&other, false, 0, 1).unwrap_err();
        assert_eq!(error.op, "open");
        assert!(error.path.contains("partial"), "{error}");
    }

    #[test]
    fn a_full_disk_is_named_and_nothing_becomes_visible() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let bytes = vec![7u8; 40];
        let hex = tessera_cache::sha256_hex(&bytes);
        let layout = Layout::with_piece_length(40, 10).unwrap();
        store.begin(layout, &hex).unwrap();
        // The kernel's own ENOSPC: every write to /dev/full fails with it.
        let partial = store.partial_path(&hex);
        fs::remove_file(&partial).unwrap();
        std::os::unix::fs::symlink("/dev/full", &partial).unwrap();
        let error = store.write_piece(&hex, 0, &bytes[..10]).unwrap_err();
        assert!(error.full, "{error}");
        assert_eq!(error.op, "write");
        assert!(
            error.to_string().contains("the cache disk is full"),
            "{error}"
        );
        assert_eq!(crate::CacheError::Store(error.clone()).http_status(), 507);
        let other = StoreError {
            full: false,
            ..error
        };
        assert_eq!(crate::CacheError::Store(other).http_status(), 500);
        assert!(store.scan().unwrap().is_empty(), "no blob became visible");
    }
}
