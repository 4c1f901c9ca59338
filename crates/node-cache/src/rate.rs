//! A byte-rate token bucket on tokio's clock (the origin rate limit and per-node upload
//! limits), and the upload slots that decide how many pieces share a node's upload at once.
//!
//! Takers queue in FIFO order on an async mutex; a taker subtracts what it takes (going into
//! debt if needed) and sleeps, still holding the queue, until the debt is paid at `rate` bytes
//! a second. The bucket holds at most `burst` bytes of credit. It knows nothing of what the
//! bytes are.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// A token bucket of bytes.
#[derive(Debug)]
pub struct TokenBucket {
    rate: u64,
    burst: u64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// `rate` bytes a second (at least 1), credit capped at `burst` bytes (a twentieth of a
    /// second's worth, at least 64 KiB, when `None`).
    pub fn new(rate: u64, burst: Option<u64>) -> Self {
        let rate = rate.max(1);
        let burst = burst.unwrap_or((rate / 20).max(64 << 10));
        Self {
            rate,
            burst,
            state: Mutex::new((burst as f64, Instant::now())),
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Waits until `bytes` may pass.
    pub async fn take(&self, bytes: u64) {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        let elapsed = now.duration_since(state.1).as_secs_f64();
        let tokens = (state.0 + elapsed * self.rate as f64).min(self.burst as f64) - bytes as f64;
        *state = (tokens, now);
        if tokens < 0.0 {
            let wait = Duration::from_secs_f64(-tokens / self.rate as f64);
            tokio::time::sleep(wait).await;
        }
    }
}

/// Pieces a node uploads at once, and how many more may wait: BitTorrent's upload slots.
///
/// A piece sent alone at the link's full rate reaches its requester, which can relay it, in
/// one piece-time; pieces sharing the link all arrive late. A requester finding every slot
/// taken and the queue full is told to go elsewhere (`None`), so requesters spread over the
/// holders instead of queueing on the first.
#[derive(Debug)]
pub struct UploadSlots {
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    queue: usize,
}

impl UploadSlots {
    /// `slots` pieces at once (at least 1), `queue` more waiting in FIFO order.
    pub fn new(slots: usize, queue: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(slots.max(1))),
            waiting: AtomicUsize::new(0),
            queue,
        }
    }

    /// A slot, held until the permit is dropped; `None` when the queue is full.
    pub async fn enter(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            return Some(permit);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let permit = self.permits.clone().acquire_owned().await.ok();
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        permit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_queue_then_refuse() {
        let slots = UploadSlots::new(1, 1);
        let first = slots.enter().await.expect("a free slot");
        let queued = {
            let slots = &slots;
            async move { slots.enter().await.is_some() }
        };
        tokio::pin!(queued);
        // The second waits in the queue; a third finds the queue full.
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut queued)
                .await
                .is_err()
        );
        assert!(slots.enter().await.is_none());
        drop(first);
        assert!(queued.await);
        assert!(slots.enter().await.is_some());
    }
}
