//! The data directory of `tessera up`: created private to its owner (0700), and held by one
//! server at a time through an exclusive lock on `<data-dir>/tessera.lock`, which records the
//! holder's PID so a second server can say who holds it.
//!
//! Knows nothing of what lives inside (store, PKI, kubeconfig, logs): their writers set their
//! own file modes.

use std::fs::{DirBuilder, File, OpenOptions, Permissions, TryLockError};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;

/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "tessera.lock";

/// Creates `dir` (and missing parents) readable only by its owner, and tightens an existing
/// directory to 0700: it holds the cluster's keys and every stored object.
pub fn create_private(dir: &Path) -> anyhow::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("create data directory {}", dir.display()))?;
    std::fs::set_permissions(dir, Permissions::from_mode(0o700))
        .with_context(|| format!("make data directory {} private (0700)", dir.display()))
}

/// The data directory held for the life of the process; dropping it releases the lock.
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// Takes the data directory's exclusive lock, or explains which process holds it.
pub fn hold(dir: &Path) -> anyhow::Result<Held> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            let holder = holder.trim();
            let holder = if holder.is_empty() { "unknown" } else { holder };
            anyhow::bail!(
                "data directory {} is in use by another tessera (PID {holder}); stop it, or \
                 choose another --data-dir",
                dir.display()
            );
        }
        Err(TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("lock {}", path.display()));
        }
    }
    file.set_len(0)
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .with_context(|| format!("record this process in {}", path.display()))?;
    Ok(Held { _file: file })
}

/// The PID of the tessera holding `dir`, or `None` when no server holds it (or none ever ran
/// there).
pub fn holder(dir: &Path) -> anyhow::Result<Option<u32>> {
    let path = dir.join(LOCK_FILE);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error).with_context(|| format!("open {}", path.display())),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(None),
        Err(TryLockError::WouldBlock) => {
            let pid = std::fs::read_to_string(&path)
                .with_context(|| format!("read {}", path.display()))?;
            let pid = pid.trim();
            pid.parse()
                .map(Some)
                .with_context(|| format!("{} names no PID ({pid:?})", path.display()))
        }
        Err(TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("lock {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_directory_never_used_has_no_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(holder(dir.path()).expect("holder"), None);
    }

    #[test]
    fn the_directory_is_private_new_or_existing() {
        let root = tempfile::tempdir().expect("tempdir");
        let fresh = root.path().join("a/b");
        create_private(&fresh).expect("create");
        assert_eq!(mode(&fresh), 0o700);

        let existing = root.path().join("old");
        std::fs::create_dir(&existing).expect("create");
        std::fs::set_permissions(&existing, Permissions::from_mode(0o755)).expect("chmod");
        create_private(&existing).expect("tighten");
        assert_eq!(mode(&existing), 0o700);
    }

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let held = hold(dir.path()).expect("first holder");
        assert_eq!(mode(&dir.path().join(LOCK_FILE)), 0o600);
        let refused = hold(dir.path()).expect_err("second holder");
        let message = refused.to_string();
        assert!(
            message.contains(&format!("PID {}", std::process::id())),
            "{message}"
        );
        assert!(message.contains("in use by another tessera"), "{message}");
        assert_eq!(
            holder(dir.path()).expect("holder"),
            Some(std::process::id())
        );
        drop(held);
        assert_eq!(holder(dir.path()).expect("holder"), None);
        let again = hold(dir.path()).expect("free once released");
        drop(again);
    }
}
