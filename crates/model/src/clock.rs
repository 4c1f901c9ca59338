//! Time as an input: cores take a `SystemTime`; shells hold a [`Clock`] — the host's
//! (`Arc::new(SystemTime::now)`, built by the shell) or a fixed one in tests.

use std::sync::Arc;
use std::time::SystemTime;

/// Where a shell reads the current time.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// A clock that always reads `at`, for tests and replays.
pub fn fixed(at: SystemTime) -> Clock {
    Arc::new(move || at)
}
