//! How fast the keeper may write: at most `writes_per_second` node writes (a rate limiter), a
//! node whose write failed (a 5xx, a timeout) tried again after a backoff with jitter, and every
//! write held while the apiserver asks for a pause (429, its Retry-After honoured). Every Node
//! write reaches every Node watcher in the cluster: a writer that retried on the next tick
//! without backoff would turn an apiserver brown-out into a storm.

use std::num::NonZeroU32;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use governor::clock::DefaultClock;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use tokio::time::Instant;

use crate::hashing::HashMap;

/// The first wait after a failure; it doubles up to [`LONGEST_WAIT`], with jitter.
const FIRST_WAIT: Duration = Duration::from_millis(500);
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// What the apiserver said of one write, as far as pacing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Written,
    /// 429: the apiserver sheds load; `Retry-After` when it gave one.
    TooMany(Option<Duration>),
    /// A 5xx or a timeout: this node's write is tried again later.
    Failed,
}

/// One backoff in progress: when the next try may go, and the waits after it.
struct Waiting {
    until: Instant,
    waits: ExponentialBackoff,
}

impl Waiting {
    fn after(now: Instant, asked: Option<Duration>) -> Self {
        let mut waits = backoff();
        let wait = waits.next().unwrap_or(LONGEST_WAIT);
        Waiting {
            until: now + asked.unwrap_or(wait),
            waits,
        }
    }

    fn again(&mut self, now: Instant, asked: Option<Duration>) {
        let wait = self.waits.next().unwrap_or(LONGEST_WAIT);
        self.until = now + asked.unwrap_or(wait);
    }
}

fn backoff() -> ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(FIRST_WAIT)
        .with_max_delay(LONGEST_WAIT)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

/// The keeper's pace (see the module's doc).
pub(crate) struct Pace {
    limiter: RateLimiter<NotKeyed, InMemoryState, DefaultClock>,
    /// Every write held (429).
    paused: Option<Waiting>,
    nodes: HashMap<String, Waiting>,
}

impl Pace {
    /// At most `per_second` writes a second, a second's worth at once.
    pub(crate) fn new(per_second: NonZeroU32) -> Self {
        Pace {
            limiter: RateLimiter::direct(Quota::per_second(per_second)),
            paused: None,
            nodes: HashMap::default(),
        }
    }

    /// Whether every write is held now (the apiserver asked for a pause).
    pub(crate) fn paused(&self, now: Instant) -> bool {
        self.paused.as_ref().is_some_and(|p| now < p.until)
    }

    /// Whether `node` waits out a backoff now.
    pub(crate) fn waits(&self, node: &str, now: Instant) -> bool {
        self.nodes.get(node).is_some_and(|w| now < w.until)
    }

    /// Takes one write from the cap; false when the second's writes are spent.
    pub(crate) fn take(&self) -> bool {
        self.limiter.check().is_ok()
    }

    /// Records what became of `node`'s write.
    pub(crate) fn answered(&mut self, node: &str, answer: Answer, now: Instant) {
        match answer {
            Answer::Written => {
                self.nodes.remove(node);
                self.paused = None;
            }
            Answer::TooMany(asked) => match &mut self.paused {
                Some(paused) => paused.again(now, asked),
                None => self.paused = Some(Waiting::after(now, asked)),
            },
            Answer::Failed => match self.nodes.get_mut(node) {
                Some(waiting) => waiting.again(now, None),
                None => {
                    self.nodes
                        .insert(node.to_string(), Waiting::after(now, None));
                }
            },
        }
    }

    /// Forgets backoffs of nodes that are no longer to be written.
    pub(crate) fn keep_only(&mut self, wanted: impl Fn(&str) -> bool) {
        self.nodes.retain(|node, _| wanted(node));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(per_second: u32) -> Pace {
        Pace::new(NonZeroU32::new(per_second).expect("non-zero"))
    }

    #[test]
    fn the_cap_allows_a_seconds_writes_at_once_and_no_more() {
        let pace = pace(5);
        let allowed = (0..20).filter(|_| pace.take()).count();
        assert_eq!(allowed, 5);
    }

    #[test]
    fn a_failed_node_waits_longer_each_time_within_the_longest_wait_and_a_write_ends_it() {
        let mut pace = pace(100);
        let now = Instant::now();
        pace.answered("a", Answer::Failed, now);
        assert!(pace.waits("a", now));
        assert!(!pace.waits("b", now), "only the node that failed");
        assert!(!pace.paused(now));
        let mut last = Duration::ZERO;
        let mut grew = false;
        for _ in 0..12 {
            pace.answered("a", Answer::Failed, now);
            let wait = pace.nodes["a"].until - now;
            assert!(
                wait <= LONGEST_WAIT * 2,
                "jitter adds at most the wait: {wait:?}"
            );
            grew |= wait > last;
            last = wait;
        }
        assert!(grew && last >= LONGEST_WAIT, "{last:?}");
        assert!(!pace.waits("a", now + LONGEST_WAIT * 3));
        pace.answered("a", Answer::Written, now);
        assert!(!pace.waits("a", now));
        assert!(pace.nodes.is_empty());
    }

    #[test]
    fn too_many_requests_hold_every_write_for_what_the_apiserver_asked() {
        let mut pace = pace(100);
        let now = Instant::now();
        pace.answered("a", Answer::TooMany(Some(Duration::from_secs(7))), now);
        assert!(pace.paused(now + Duration::from_secs(6)));
        assert!(!pace.paused(now + Duration::from_secs(7)));
        // Without a Retry-After: the backoff's first wait, with jitter.
        let mut pace = self::pace(100);
        pace.answered("a", Answer::TooMany(None), now);
        assert!(pace.paused(now));
        assert!(!pace.paused(now + FIRST_WAIT * 2 + Duration::from_millis(1)));
    }
}
