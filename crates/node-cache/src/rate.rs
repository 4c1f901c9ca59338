//! A byte-rate token bucket on tokio's clock: the origin rate limit and per-node upload limits.
//!
//! Takers queue in FIFO order on an async mutex; a taker subtracts what it takes (going into
//! debt if needed) and sleeps, still holding the queue, until the debt is paid at `rate` bytes
//! a second. The bucket holds at most `burst` bytes of credit. It knows nothing of what the
//! bytes are.

use std::time::Duration;

use tokio::sync::Mutex;
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
