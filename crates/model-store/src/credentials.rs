//! The store's one access key and secret: drawn from the operating system's entropy at first
//! start and kept, readable by their owner only (0600), in `<data-dir>/model-store-credentials.json`
//! so that clients configured once keep working across restarts.
//!
//! Knows nothing of how requests are signed or checked (s3s's SigV4 does that with them).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// An access key id and its secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Access key ids look like AWS's: 20 upper-case letters and digits, here `TSRA` then 16.
const KEY_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
/// Secrets are 40 characters of the base64 alphabet, like AWS's.
const SECRET_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn draw(alphabet: &[u8], len: usize) -> Result<String, StoreError> {
    let mut bytes = vec![0u8; len];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| StoreError::Entropy)?;
    // Both alphabets have a power-of-two length, so the modulo draws without bias.
    Ok(bytes
        .iter()
        .map(|b| char::from(alphabet[usize::from(*b) % alphabet.len()]))
        .collect())
}

impl Credentials {
    /// Fresh credentials from the operating system's entropy.
    pub fn generate() -> Result<Self, StoreError> {
        Ok(Self {
            access_key_id: format!("TSRA{}", draw(KEY_ALPHABET, 16)?),
            secret_access_key: draw(SECRET_ALPHABET, 40)?,
        })
    }

    /// The credentials kept in `path`, made and written there (0600) when the file is absent.
    /// A file that does not read, or that others may read, is an error naming it.
    pub fn load_or_create(path: &Path) -> Result<Self, StoreError> {
        let io = |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::read(path) {
            Ok(bytes) => {
                let mode = std::fs::metadata(path).map_err(io)?.permissions().mode();
                if mode & 0o077 != 0 {
                    return Err(StoreError::Invalid {
                        path: path.to_path_buf(),
                        reason: format!(
                            "mode {:o} lets other users read the secret; chmod 600 it",
                            mode & 0o777
                        ),
                    });
                }
                let credentials: Credentials =
                    serde_json::from_slice(&bytes).map_err(|e| StoreError::Invalid {
                        path: path.to_path_buf(),
                        reason: e.to_string(),
                    })?;
                if credentials.access_key_id.is_empty() || credentials.secret_access_key.is_empty()
                {
                    return Err(StoreError::Invalid {
                        path: path.to_path_buf(),
                        reason: "access_key_id and secret_access_key must not be empty".into(),
                    });
                }
                Ok(credentials)
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let credentials = Self::generate()?;
                let text = serde_json::to_vec_pretty(&credentials).unwrap_or_default();
                write_private(path, &text)?;
                Ok(credentials)
            }
            Err(error) => Err(io(error)),
        }
    }
}

/// s3s's auth trait over the one key: an unknown access key is S3's `InvalidAccessKeyId`; a
/// wrong signature is s3s's `SignatureDoesNotMatch`.
#[derive(Debug, Clone)]
pub struct Auth(pub Credentials);

#[async_trait::async_trait]
impl s3s::auth::S3Auth for Auth {
    async fn get_secret_key(&self, access_key: &str) -> s3s::S3Result<s3s::auth::SecretKey> {
        if access_key == self.0.access_key_id {
            Ok(s3s::auth::SecretKey::from(
                self.0.secret_access_key.as_str(),
            ))
        } else {
            Err(s3s::s3_error!(
                InvalidAccessKeyId,
                "The AWS Access Key Id you provided does not exist in our records."
            ))
        }
    }
}

/// Writes `contents` to `path` readable by its owner only, through a temporary file renamed
/// into place.
pub fn write_private(path: &Path, contents: &[u8]) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io)?;
    file.write_all(contents).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_made_once_and_kept_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials.json");
        let first = Credentials::load_or_create(&path).unwrap();
        assert_eq!(first.access_key_id.len(), 20);
        assert!(first.access_key_id.starts_with("TSRA"));
        assert_eq!(first.secret_access_key.len(), 40);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Credentials::load_or_create(&path).unwrap(), first);
        assert_ne!(Credentials::generate().unwrap(), first);
        assert!(!format!("{first:?}").contains(&first.secret_access_key));

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = Credentials::load_or_create(&path).unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "{").unwrap();
        let error = Credentials::load_or_create(&path).unwrap_err().to_string();
        assert!(error.contains("credentials.json"), "{error}");
    }
}
