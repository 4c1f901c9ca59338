//! Encryption at rest as kube-apiserver does it (`--encryption-provider-config`): the
//! `EncryptionConfiguration` file and its validation ([`config`]), the provider list of each
//! resource and the value transforms in etcd's exact stored format ([`transform`]), and which
//! resource a Tessera store key belongs to ([`resource_of_key`]).
//!
//! A core: nonces and IVs are inputs, nothing is read from files, the clock or the OS. The
//! shell (`tessera up`) reads the file, draws the randomness and applies the transforms where
//! values reach SQLite; the store's memory, its watch history and everything above keep
//! plain values. Knows nothing of SQLite, HTTP or Kubernetes objects.

pub mod config;
pub mod transform;

pub use config::{ConfigError, EncryptionConfig, FieldError, GroupResource};
pub use transform::{Random, Read, TransformError, Transformer};

/// The (group, resource) a Tessera store key belongs to: keys are
/// `/<group>/<resource>/[<namespace>/]<name>`, with `core` for the core group (see
/// `tessera_api::resource::Resource::prefix`). `None` for a key of another shape.
pub fn resource_of_key(key: &str) -> Option<(&str, &str)> {
    let mut parts = key.strip_prefix('/')?.splitn(3, '/');
    let group = parts.next()?;
    let resource = parts.next()?;
    parts.next()?;
    if group.is_empty() || resource.is_empty() {
        return None;
    }
    Some((if group == "core" { "" } else { group }, resource))
}

impl EncryptionConfig {
    /// The transformer of the resource a store key belongs to (identity for keys of no
    /// resource).
    pub fn transformer_for_key(&self, key: &str) -> &Transformer {
        match resource_of_key(key) {
            Some((group, resource)) => self.transformer(group, resource),
            None => self.transformer("", ""),
        }
    }
}

#[cfg(test)]
mod tests;
