//! The echoes of a controller's own writes: the watch change that shows an object at the
//! resourceVersion the controller's own write answered. A pass-running controller whose
//! pass has already taken its writes into account (laid over its watch cache) has nothing
//! new to learn from their echoes, so they need not start a pass; every other change to the
//! object — another writer's, or one the watch shows instead of the echo after a relist — still
//! does.
//!
//! A writer that runs apart from the watch's consumer (the queue manager's background status
//! writer) says what it sends before sending it: the watch may show the echo before the
//! write's answer names its version, so the changes shown meanwhile are held until it does.
//!
//! Knows nothing of what was written or why; only keys and resourceVersions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;
use kube::api::ObjectMeta;

use crate::shell::{ObjectKey, object_key};

/// What a watch is waiting on for one object.
#[derive(Debug)]
enum Awaited {
    /// A write sent, its answer not back yet: the changes shown meanwhile (their versions)
    /// are held until it is, since the echo may arrive before the answer that names it.
    InFlight { held: Vec<u64> },
    /// A write answered at this version; its echo not shown yet.
    Written(u64),
}

/// The writes awaiting their echo, by object. Shared between the writers (each says what it
/// sends and what it wrote) and the watch (which consumes the echoes). At most one entry per
/// object: a later write replaces an earlier one, whose echo is then news (a pass too many,
/// never one too few).
#[derive(Clone, Debug)]
pub struct OwnWrites {
    awaited: Arc<Mutex<HashMap<ObjectKey, Awaited>>>,
    /// Wakes the watch's stream for the held changes that turned out not to be echoes.
    wake: mpsc::UnboundedSender<()>,
    woken: Arc<Mutex<Option<mpsc::UnboundedReceiver<()>>>>,
}

impl Default for OwnWrites {
    fn default() -> OwnWrites {
        let (wake, woken) = mpsc::unbounded();
        OwnWrites {
            awaited: Arc::default(),
            wake,
            woken: Arc::new(Mutex::new(Some(woken))),
        }
    }
}

impl OwnWrites {
    /// Says that a write to `key` is being sent by a writer that runs apart from the watch's
    /// consumer (its echo may be shown before its answer comes back): the changes shown
    /// meanwhile wait for [`Self::record`] or [`Self::failed`].
    pub fn sending(&self, key: ObjectKey) {
        let previous = self.lock(|awaited| awaited.insert(key, Awaited::InFlight { held: vec![] }));
        if let Some(Awaited::InFlight { held }) = previous
            && !held.is_empty()
        {
            self.wake_watch();
        }
    }

    /// Records a write whose answer is `written` (its metadata as the API server answered).
    /// A version that is not a number (not one of this platform's store revisions) is not
    /// recorded: every change to that object then starts a pass.
    pub fn record(&self, written: &ObjectMeta) {
        let key = object_key(written);
        let Some(version) = revision(written) else {
            self.failed(key);
            return;
        };
        let news = self.lock(|awaited| match awaited.remove(&key) {
            Some(Awaited::InFlight { held }) => {
                if !held.contains(&version) {
                    awaited.insert(key, Awaited::Written(version));
                }
                held.iter().any(|&shown| shown != version)
            }
            _ => {
                awaited.insert(key, Awaited::Written(version));
                false
            }
        });
        if news {
            self.wake_watch();
        }
    }

    /// Says that the write [`Self::sending`] announced failed: the changes held for it are
    /// news.
    pub fn failed(&self, key: ObjectKey) {
        let held = self.lock(|awaited| match awaited.remove(&key) {
            Some(Awaited::InFlight { held }) => !held.is_empty(),
            _ => false,
        });
        if held {
            self.wake_watch();
        }
    }

    /// Whether the watch change showing `shown` is (or may be, while the write is in flight)
    /// the echo of a write. A change at the recorded version or past it ends the wait for
    /// that write: past it, another writer (or a relist that skipped the echo) changed the
    /// object, which is news.
    pub fn is_echo(&self, shown: &ObjectMeta) -> bool {
        let Some(version) = revision(shown) else {
            return false;
        };
        let key = object_key(shown);
        self.lock(|awaited| match awaited.get_mut(&key) {
            Some(Awaited::InFlight { held }) => {
                held.push(version);
                true
            }
            Some(Awaited::Written(written)) if version >= *written => {
                let echo = version == *written;
                awaited.remove(&key);
                echo
            }
            _ => false,
        })
    }

    /// How many writes still await their echo or their answer.
    pub fn awaited(&self) -> usize {
        self.lock(|awaited| awaited.len())
    }

    /// The stream that yields once for each held change found not to be an echo (taken once,
    /// by the watch; empty after).
    pub fn woken(&self) -> futures::stream::BoxStream<'static, ()> {
        use futures::StreamExt;
        let taken = self.woken.lock().ok().and_then(|mut woken| woken.take());
        match taken {
            Some(woken) => woken.boxed(),
            None => futures::stream::empty().boxed(),
        }
    }

    fn wake_watch(&self) {
        // The watch may have ended: nothing is waiting on it then.
        let _ = self.wake.unbounded_send(());
    }

    fn lock<T>(&self, f: impl FnOnce(&mut HashMap<ObjectKey, Awaited>) -> T) -> T {
        let mut awaited = match self.awaited.lock() {
            Ok(awaited) => awaited,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut awaited)
    }
}

fn revision(meta: &ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(namespace: &str, name: &str, version: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            name: Some(name.to_owned()),
            resource_version: Some(version.to_owned()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_the_change_at_the_written_version_is_an_echo() {
        // (written, the changes shown in order, which of them are echoes)
        let table: [(&str, &[&str], &[bool]); 6] = [
            ("12", &["12"], &[true]),
            // An older change arrives first (another writer's, before ours): news, and the
            // echo still follows.
            ("12", &["11", "12"], &[false, true]),
            // Another writer changed it after ours and the watch skipped our version.
            ("12", &["13"], &[false]),
            // The wait ends with the echo: a later change at the same version is news.
            ("12", &["12", "12"], &[true, false]),
            ("12", &["13", "12"], &[false, false]),
            // Versions that are not store revisions are never taken for echoes.
            ("a", &["a"], &[false]),
        ];
        for (written, shown, echoes) in table {
            let own = OwnWrites::default();
            own.record(&meta("team-a", "w", written));
            let got: Vec<bool> = shown
                .iter()
                .map(|version| own.is_echo(&meta("team-a", "w", version)))
                .collect();
            assert_eq!(got, echoes, "written {written}, shown {shown:?}");
        }
    }

    #[test]
    fn echoes_are_per_object() {
        let own = OwnWrites::default();
        own.record(&meta("team-a", "w", "7"));
        own.record(&meta("", "cq", "8"));
        assert!(!own.is_echo(&meta("team-b", "w", "7")), "another namespace");
        assert!(!own.is_echo(&meta("team-a", "v", "7")), "another name");
        assert_eq!(own.awaited(), 2);
        assert!(own.is_echo(&meta("", "cq", "8")));
        assert!(own.is_echo(&meta("team-a", "w", "7")));
        assert_eq!(own.awaited(), 0);
    }

    #[test]
    fn a_later_write_replaces_the_one_awaited() {
        let own = OwnWrites::default();
        own.record(&meta("team-a", "w", "7"));
        own.record(&meta("team-a", "w", "9"));
        assert!(!own.is_echo(&meta("team-a", "w", "7")));
        assert!(own.is_echo(&meta("team-a", "w", "9")));
    }

    /// What a writer apart from the watch does, in order.
    enum Step {
        /// Announces a write to `w`.
        Sending,
        /// The watch shows `w` at this version: whether it starts a pass now.
        Shown(&'static str, bool),
        /// The write answered at this version.
        Answered(&'static str),
        Failed,
    }

    #[test]
    fn changes_shown_while_a_write_is_in_flight_wait_for_its_answer() {
        use Step::*;
        // (the steps, how many held changes turn out to be news once the write answers)
        let table: [(&[Step], usize); 7] = [
            // The echo before the answer: held, then dropped as the echo.
            (&[Sending, Shown("5", false), Answered("5")], 0),
            // The answer first: the echo is recognised when it comes.
            (&[Sending, Answered("5"), Shown("5", false)], 0),
            // Another writer's change held with the echo: it is news once the answer comes.
            (
                &[Sending, Shown("4", false), Shown("5", false), Answered("5")],
                1,
            ),
            // Only another writer's change shown (ours not yet): news; the echo still comes.
            (
                &[Sending, Shown("4", false), Answered("5"), Shown("5", false)],
                1,
            ),
            // The write failed: what was held is news.
            (&[Sending, Shown("4", false), Failed], 1),
            (&[Sending, Failed, Shown("4", true)], 0),
            // A second write announced before the first answered: the first's held change
            // is news at once (a pass too many, never one too few).
            (
                &[
                    Sending,
                    Shown("4", false),
                    Sending,
                    Answered("6"),
                    Shown("6", false),
                ],
                1,
            ),
        ];
        for (index, (steps, news)) in table.into_iter().enumerate() {
            let own = OwnWrites::default();
            let mut woken = own.woken();
            let key = ("team-a".to_owned(), "w".to_owned());
            for step in steps {
                match step {
                    Sending => own.sending(key.clone()),
                    Shown(version, starts) => assert_eq!(
                        !own.is_echo(&meta("team-a", "w", version)),
                        *starts,
                        "case {index}: shown at {version}"
                    ),
                    Answered(version) => own.record(&meta("team-a", "w", version)),
                    Failed => own.failed(key.clone()),
                }
            }
            let mut woke = 0;
            while let Some(Some(())) =
                futures::FutureExt::now_or_never(futures::StreamExt::next(&mut woken))
            {
                woke += 1;
            }
            assert_eq!(woke, news, "case {index}");
            assert_eq!(own.awaited(), 0, "case {index}: nothing left awaited");
        }
    }

    #[test]
    fn the_wake_stream_is_taken_once() {
        let own = OwnWrites::default();
        let _first = own.woken();
        let mut second = own.woken();
        assert_eq!(
            futures::FutureExt::now_or_never(futures::StreamExt::next(&mut second)),
            Some(None),
            "a second taker gets an empty stream"
        );
    }
}
