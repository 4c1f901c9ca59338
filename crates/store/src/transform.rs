//! The seam where values are transformed on their way to and from SQLite (encryption at
//! rest): the store calls a [`ValueTransformer`] when it writes a committed batch and when it
//! reads the file at open, and nowhere else — its memory, its watch history and every reader
//! keep the plain values. A value read by a provider other than the writing one is *stale*:
//! the store remembers it and rewrites its stored form (same revision, same plain value)
//! when a transaction on that key decides to keep it, as kube-apiserver rewrites a stale
//! object on an unchanged update.
//!
//! Knows no cipher and no configuration: the shell hands in the transformer.

/// Transforms stored values; implemented by the shell over `tessera-encryption`.
pub trait ValueTransformer: Send + Sync {
    /// The stored form of `value` under `key`; `None` stores the value as it is.
    fn transform_to_storage(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>, String>;

    /// The value of a stored form.
    fn transform_from_storage(&self, key: &str, stored: &[u8]) -> Result<FromStorage, String>;
}

/// A value read from its stored form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromStorage {
    /// The plain value; `None` when the stored form is the value.
    pub value: Option<Vec<u8>>,
    /// Stored by a provider or key other than the one that writes: rewrite it.
    pub stale: bool,
}
