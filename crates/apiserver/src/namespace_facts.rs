//! What creates read of their namespace ([`NamespaceFacts`]: terminating or not, the labels
//! Pod Security reads), parsed once per stored revision of the namespace rather than twice
//! for every create in it.
//!
//! Knows nothing of what the facts decide; `tessera_api::write` reads them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tessera_api::write::{NamespaceFacts, namespace_facts};
use tessera_store::Entry;

/// Namespaces remembered before the memory is emptied (deleted ones linger until then).
const REMEMBERED: usize = 4096;

/// Each namespace's key with the revision its facts were read at.
type ReadFacts = HashMap<Arc<str>, (u64, Arc<NamespaceFacts>)>;

/// The facts of each namespace at the revision they were read at.
#[derive(Debug, Default)]
pub struct NamespaceMemo {
    read: Mutex<ReadFacts>,
}

impl NamespaceMemo {
    /// The facts of the stored namespace `entry`, parsed when its revision is new here.
    pub fn facts(&self, entry: &Entry) -> Result<Arc<NamespaceFacts>, serde_json::Error> {
        let remembered = |read: &ReadFacts| {
            read.get(&entry.key)
                .filter(|(revision, _)| *revision == entry.revision)
                .map(|(_, facts)| facts.clone())
        };
        if let Some(facts) = remembered(&self.read.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(facts);
        }
        let facts = Arc::new(namespace_facts(&entry.value)?);
        let mut read = self.read.lock().unwrap_or_else(|p| p.into_inner());
        if read.len() >= REMEMBERED {
            read.clear();
        }
        read.insert(entry.key.clone(), (entry.revision, facts.clone()));
        Ok(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(revision: u64, json: &str) -> Entry {
        Entry {
            key: Arc::from("/core/namespaces/ml"),
            revision,
            value: bytes::Bytes::copy_from_slice(json.as_bytes()),
        }
    }

    #[test]
    fn facts_follow_the_namespaces_revision() {
        let memo = NamespaceMemo::default();
        let open = entry(3, r#"{"metadata":{"name":"ml","labels":{"a":"b"}}}"#);
        let facts = memo.facts(&open).unwrap();
        assert!(!facts.terminating);
        assert_eq!(facts.policy_view["metadata"]["labels"]["a"], "b");
        // The same revision is not parsed again: the value is not even looked at.
        let same = entry(3, "not JSON");
        assert_eq!(memo.facts(&same).unwrap(), facts);
        let deleting = entry(
            4,
            r#"{"metadata":{"name":"ml","deletionTimestamp":"2026-12-04T00:00:00Z"}}"#,
        );
        assert!(memo.facts(&deleting).unwrap().terminating);
        assert!(memo.facts(&entry(5, "{")).is_err());
    }
}
