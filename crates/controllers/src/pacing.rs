//! When a pass-running controller's next pass is due: after a watch change, once the burst
//! of changes it belongs to has settled (quiet for a while, or going on for its longest), or
//! at the resync tick. [`next_pass`] settles every burst alike (20 ms quiet, 200 ms at most);
//! [`Pacing`] scales both with what the controller's last pass took, so a controller whose
//! passes are cheap answers a change within milliseconds even under steady churn, and one
//! whose passes are expensive still batches a burst into one pass. Either way a pass starts
//! only once the changes that have already arrived are taken, so it reads the watch caches
//! as current as the watches' arrivals.
//!
//! Knows nothing of what a pass does or what the changes are.

use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};

/// The merged watch changes a pass-running controller waits on.
pub type Changes = futures::stream::SelectAll<futures::stream::BoxStream<'static, ()>>;

/// How a burst of changes settles before the pass it makes: `quiet` without a change, or
/// `longest` after its first change, whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settle {
    pub quiet: Duration,
    pub longest: Duration,
}

/// How long a burst of changes may keep postponing a pass: under steady churn (a scheduler
/// binding thousands of pods) a pass still runs this often.
pub const LONGEST_BURST: Duration = Duration::from_millis(200);

/// The settling of [`next_pass`]: 20 ms without a change, at most [`LONGEST_BURST`].
pub const SETTLE: Settle = Settle {
    quiet: Duration::from_millis(20),
    longest: LONGEST_BURST,
};

/// The shortest quiet a paced burst waits for: changes one write makes (its object, then
/// the events and statuses that follow it) arrive within about this of each other.
const SHORTEST_QUIET: Duration = Duration::from_millis(2);

/// How many of its last pass's durations a paced burst may last: under steady churn a
/// controller spends at most about half its time in passes (a pass's time is mostly its
/// writes' round trips, not CPU). Measured with `tessera bench multikueue`: a burst of four
/// passes' time kept the dispatch latency's p99 at 310 ms, one at 272 ms.
const BURST_PER_PASS: u32 = 1;

/// The settling of a controller whose last pass took `took`: quiet for as long as that pass
/// took (between [`SHORTEST_QUIET`] and [`SETTLE`]'s quiet), a burst at most
/// [`BURST_PER_PASS`] times it (between that quiet and [`LONGEST_BURST`]). Kueue's
/// controllers reconcile a change at once; a pass here does all of a controller's work, so
/// the wait before it is what bounds the share of time passes take.
pub fn settle_after(took: Duration) -> Settle {
    let quiet = took.clamp(SHORTEST_QUIET, SETTLE.quiet);
    Settle {
        quiet,
        longest: (took * BURST_PER_PASS).clamp(quiet, LONGEST_BURST),
    }
}

/// A pass-running controller's pacing: what its last pass took, measured between
/// [`next_paced_pass`] calls.
#[derive(Debug, Default)]
pub struct Pacing {
    started: Option<Instant>,
    took: Duration,
}

impl Pacing {
    /// How the next burst settles.
    pub fn settle(&self) -> Settle {
        settle_after(self.took)
    }
}

/// Waits until the next reconciliation pass is due: a change (after letting a burst of
/// changes settle as [`SETTLE`] says, so a burst makes one pass) or the resync tick. False
/// once the watches have ended.
pub async fn next_pass(changes: &mut Changes, resync: &mut tokio::time::Interval) -> bool {
    settled(changes, resync, SETTLE, || {}).await
}

/// [`next_pass`], calling `consumed` for each change it takes and for a resync tick (what
/// `crate::workqueue::Passes` counts as adds).
pub async fn next_pass_observed(
    changes: &mut Changes,
    resync: &mut tokio::time::Interval,
    consumed: impl FnMut(),
) -> bool {
    settled(changes, resync, SETTLE, consumed).await
}

/// [`next_pass`] settled by `pacing`: ends the pass in progress (its duration paces the next
/// burst) and starts the next one when it is due.
pub async fn next_paced_pass(
    changes: &mut Changes,
    resync: &mut tokio::time::Interval,
    pacing: &mut Pacing,
) -> bool {
    if let Some(started) = pacing.started.take() {
        pacing.took = started.elapsed();
        tracing::trace!(took = ?pacing.took, "pass");
    }
    let due = settled(changes, resync, pacing.settle(), || {}).await;
    if due {
        pacing.started = Some(Instant::now());
    }
    due
}

async fn settled(
    changes: &mut Changes,
    resync: &mut tokio::time::Interval,
    settle: Settle,
    mut consumed: impl FnMut(),
) -> bool {
    tokio::select! {
        change = changes.next() => {
            if change.is_none() {
                return false;
            }
            consumed();
            tracing::trace!(?settle, "pacing: a burst of changes began");
            let until = tokio::time::Instant::now() + settle.longest;
            loop {
                let left = until.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                match tokio::time::timeout(settle.quiet.min(left), changes.next()).await {
                    Ok(Some(())) => consumed(),
                    _ => break,
                }
            }
            take_arrived(changes, &mut consumed);
            true
        }
        _ = resync.tick() => {
            consumed();
            take_arrived(changes, &mut consumed);
            true
        }
    }
}

/// How many changes that have already arrived [`take_arrived`] takes at most.
const ARRIVED_AT_MOST: usize = 100_000;

/// Takes the changes that have already arrived, without waiting: the watch caches are
/// brought up to them only as the stream is polled, so a burst cut short at its longest
/// would otherwise leave the pass reading caches behind what the watches have sent — and
/// deciding on objects already changed (its writes refused as conflicts), pass after pass.
fn take_arrived(changes: &mut Changes, consumed: &mut impl FnMut()) {
    for _ in 0..ARRIVED_AT_MOST {
        match changes.next().now_or_never() {
            Some(Some(())) => consumed(),
            _ => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn settling_scales_with_the_last_pass_within_its_bounds() {
        // (last pass took, quiet, longest burst)
        let table = [
            (ms(0), ms(2), ms(2)),
            (Duration::from_micros(300), ms(2), ms(2)),
            (ms(1), ms(2), ms(2)),
            (ms(5), ms(5), ms(5)),
            (ms(20), ms(20), ms(20)),
            (ms(40), ms(20), ms(40)),
            (ms(199), ms(20), ms(199)),
            (ms(250), ms(20), ms(200)),
            (ms(3000), ms(20), ms(200)),
        ];
        for (took, quiet, longest) in table {
            assert_eq!(
                settle_after(took),
                Settle { quiet, longest },
                "a last pass of {took:?}"
            );
        }
        assert_eq!(Pacing::default().settle(), settle_after(Duration::ZERO));
    }

    #[test]
    fn an_expensive_pass_settles_as_the_fixed_rule() {
        assert_eq!(settle_after(Duration::from_secs(1)), SETTLE);
    }

    #[tokio::test]
    async fn steady_changes_cannot_postpone_a_pass_forever() {
        // A change every 5 ms, without end: the burst never settles for 20 ms, yet a pass is
        // due once the burst has lasted its longest.
        let ticking = futures::stream::unfold((), |()| async {
            tokio::time::sleep(ms(5)).await;
            Some(((), ()))
        })
        .boxed();
        let mut changes = futures::stream::select_all([ticking]);
        let mut resync = tokio::time::interval(Duration::from_secs(3600));
        resync.tick().await;
        let due = tokio::time::timeout(
            Duration::from_secs(10),
            next_pass(&mut changes, &mut resync),
        )
        .await;
        assert_eq!(due.ok(), Some(true));
        let mut pacing = Pacing::default();
        for _ in 0..3 {
            let due = tokio::time::timeout(
                Duration::from_secs(10),
                next_paced_pass(&mut changes, &mut resync, &mut pacing),
            )
            .await;
            assert_eq!(due.ok(), Some(true));
        }
    }

    #[tokio::test]
    async fn a_pass_starts_with_every_change_already_arrived() {
        // 1,000 changes arrived at once, then none: a burst cut at once (its longest zero)
        // still takes them all before the pass, as a resync tick does.
        let arrived = || {
            futures::stream::iter(vec![(); 1000])
                .chain(futures::stream::pending())
                .boxed()
        };
        let cut_at_once = Settle {
            quiet: ms(1),
            longest: Duration::ZERO,
        };
        let mut resync = tokio::time::interval(Duration::from_secs(3600));
        resync.tick().await;
        let mut changes = futures::stream::select_all([arrived()]);
        let mut taken = 0;
        assert!(settled(&mut changes, &mut resync, cut_at_once, || taken += 1).await);
        assert_eq!(taken, 1000);
        let mut changes = futures::stream::select_all([arrived()]);
        let mut resync = tokio::time::interval(Duration::from_secs(3600));
        let mut taken = 0;
        // The first tick of an interval is due at once.
        assert!(settled(&mut changes, &mut resync, cut_at_once, || taken += 1).await);
        assert!(taken >= 1000, "{taken}");
    }

    #[tokio::test]
    async fn no_pass_is_due_once_the_watches_have_ended() {
        let mut changes: Changes = futures::stream::select_all(Vec::new());
        let mut resync = tokio::time::interval(Duration::from_secs(3600));
        resync.tick().await;
        assert!(!next_pass(&mut changes, &mut resync).await);
        let mut pacing = Pacing::default();
        assert!(!next_paced_pass(&mut changes, &mut resync, &mut pacing).await);
    }
}
