//! DynamicResources verdicts remembered per node for pods whose unallocated claims ask for
//! the same thing — the pods of one Job or ReplicaSet, whose claims come from one
//! ResourceClaimTemplate. Upstream's opportunistic batching (KEP-5598) reuses filter results
//! across pods with one scheduling signature the same way, but leaves pods with DRA claims
//! out of signatures (kubernetes#134986); the device generation is what lets them in here.
//!
//! A verdict is keyed by the claims' shape (their specs, interned) and the node's device
//! generation: a number that changes whenever an allocation on a pool the node reaches is
//! booked or released, and is never reused (one counter for every scheduler), so a verdict
//! found under it was computed on exactly the devices in use now. The memo knows nothing of
//! what a shape means; the scheduler decides what may be remembered (feasibility without
//! freed claims, never an error that names a claim).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::resource::v1::ResourceClaim;

/// Hands out device generations, unique across schedulers and their clones.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

/// A device generation never handed out before.
pub(crate) fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, Ordering::Relaxed)
}

/// Shapes kept before the interning table starts over (their memo entries then miss).
const SHAPES_KEPT: usize = 4096;

/// Remembered verdicts and the shapes they are for.
#[derive(Debug, Default)]
pub(crate) struct ClaimMemo {
    /// Shape ids by the claims' serialized specs.
    shapes: HashMap<Vec<u8>, u64>,
    /// The next shape id (never reused, also after the table starts over).
    next_shape: u64,
    /// Per node position: (shape, device generation, whether the claims fit).
    verdicts: Vec<Option<(u64, u64, bool)>>,
}

impl ClaimMemo {
    /// The shape of `pending` (unallocated claims, in the pod's order); `None` when a spec
    /// cannot be serialized.
    pub(crate) fn shape(&mut self, pending: &[&ResourceClaim]) -> Option<u64> {
        let mut key = Vec::new();
        for claim in pending {
            serde_json::to_writer(&mut key, &claim.spec).ok()?;
            key.push(0);
        }
        if let Some(&id) = self.shapes.get(&key) {
            return Some(id);
        }
        if self.shapes.len() >= SHAPES_KEPT {
            self.shapes.clear();
        }
        let id = self.next_shape;
        self.next_shape += 1;
        self.shapes.insert(key, id);
        Some(id)
    }

    /// The verdict remembered for `shape` on the node at `position` in `generation`.
    pub(crate) fn verdict(&self, position: usize, shape: u64, generation: u64) -> Option<bool> {
        match self.verdicts.get(position) {
            Some(&Some((s, g, fits))) if s == shape && g == generation => Some(fits),
            _ => None,
        }
    }

    /// Remembers a verdict (one per node: the latest shape wins).
    pub(crate) fn remember(&mut self, position: usize, shape: u64, generation: u64, fits: bool) {
        if self.verdicts.len() <= position {
            self.verdicts.resize(position + 1, None);
        }
        self.verdicts[position] = Some((shape, generation, fits));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(class: &str, count: i64) -> ResourceClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("c-{class}-{count}")},
            "spec": {"devices": {"requests": [{"name": "gpu",
                "exactly": {"deviceClassName": class, "count": count}}]}}
        }))
        .expect("claim")
    }

    #[test]
    fn claims_alike_but_for_their_names_share_a_shape() {
        let mut memo = ClaimMemo::default();
        let (a, b) = (claim("gpu", 1), claim("gpu", 1));
        let mut b = b;
        b.metadata.name = Some("other".into());
        assert_eq!(memo.shape(&[&a]), memo.shape(&[&b]));
    }

    #[test]
    fn different_requests_or_orders_are_different_shapes() {
        let mut memo = ClaimMemo::default();
        let (one, two, mig) = (claim("gpu", 1), claim("gpu", 2), claim("mig", 1));
        let shapes = [
            memo.shape(&[&one]),
            memo.shape(&[&two]),
            memo.shape(&[&mig]),
            memo.shape(&[&one, &mig]),
            memo.shape(&[&mig, &one]),
            memo.shape(&[]),
        ];
        for (i, a) in shapes.iter().enumerate() {
            assert!(a.is_some());
            for b in &shapes[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn a_verdict_holds_only_for_its_shape_and_generation() {
        let mut memo = ClaimMemo::default();
        memo.remember(3, 7, 100, true);
        assert_eq!(memo.verdict(3, 7, 100), Some(true));
        assert_eq!(memo.verdict(3, 7, 101), None, "devices changed since");
        assert_eq!(memo.verdict(3, 8, 100), None, "another shape");
        assert_eq!(memo.verdict(2, 7, 100), None, "another node");
        memo.remember(3, 8, 100, false);
        assert_eq!(memo.verdict(3, 8, 100), Some(false));
        assert_eq!(memo.verdict(3, 7, 100), None, "one verdict per node");
    }

    #[test]
    fn shapes_stay_unique_after_the_table_starts_over() {
        let mut memo = ClaimMemo::default();
        let first = memo.shape(&[&claim("gpu", 1)]);
        for count in 2..=SHAPES_KEPT as i64 + 1 {
            memo.shape(&[&claim("gpu", count)]);
        }
        let again = memo.shape(&[&claim("gpu", 1)]);
        assert_ne!(first, again, "a shape id is never handed out twice");
    }

    #[test]
    fn generations_are_never_reused() {
        let a = next_generation();
        let b = next_generation();
        assert!(b > a);
    }
}
