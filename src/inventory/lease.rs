//! Leader Leases of schedulers, read-only, one Lease each:
//! - the scheduler that `spec.schedulerName` routes pods to: pods are sent to it only while
//!   its leader keeps renewing the Lease, so a stopped or crashed second scheduler never
//!   leaves pods Pending with nobody to bind them;
//! - the default scheduler's: when its leader took the Lease tells which nodes it listed at
//!   its start (in name order) and which joined later (appended in the order they joined).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use tracing::{debug, info, warn};

use super::client::WatchHealth;
use crate::config::LeaseRef;

/// What the Lease said last: when it was renewed, when this replica saw that renewal, and
/// for how long a renewal holds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Renewal {
    renewed: SystemTime,
    seen: SystemTime,
    valid_for: Duration,
}

/// The routed scheduler's liveness at a review, as its Lease tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// Renewed within the last renewal period (half a period of slack): pods are routed to it.
    Renewing,
    /// A renewal is late but the Lease has not lapsed: pods are still routed to it (a busy
    /// apiserver delays renewals too), though a crashed leader looks like this first, and what
    /// is routed now waits for a standby to take the Lease.
    Late,
    /// Lapsed, released or unknown: pods go to the default scheduler.
    Lapsed,
}

/// The routed scheduler's liveness, as its Lease tells it, and what this replica last said
/// of it in its log.
#[derive(Debug)]
pub(crate) struct SchedulerLease {
    last: ArcSwapOption<Renewal>,
    /// Lapsed after this long without a renewal, when sooner than the Lease's duration.
    lapses_after: Option<Duration>,
    /// Late after this long without a renewal (when the renewal period is known).
    late_after: Option<Duration>,
    /// The [`Liveness`] last recorded (as `u8`), so only changes are logged.
    recorded: AtomicU8,
    /// Pods routed while the current renewal is late.
    routed_late: AtomicU64,
}

impl Default for SchedulerLease {
    fn default() -> Self {
        SchedulerLease {
            last: ArcSwapOption::empty(),
            lapses_after: None,
            late_after: None,
            recorded: AtomicU8::new(Liveness::Lapsed as u8),
            routed_late: AtomicU64::new(0),
        }
    }
}

/// Renewals a leader may miss before its Lease counts as lapsed: client-go's leader renews
/// every `retryPeriod`, and gives up after `renewDeadline` (upstream 10 s of 2 s periods).
const MISSED_RENEWALS: u32 = 3;

impl SchedulerLease {
    /// Liveness of `lease`: lapsed once [`MISSED_RENEWALS`] of its renewals are missing (when
    /// it says how often it is renewed) or its duration has run out.
    pub(crate) fn of(lease: &LeaseRef) -> Self {
        SchedulerLease {
            lapses_after: lease.renewed_every.map(|every| every * MISSED_RENEWALS),
            late_after: lease.renewed_every.map(|every| every + every / 2),
            ..SchedulerLease::default()
        }
    }

    /// How long before `now` the last renewal was seen here; `None` when none is known.
    pub(crate) fn since_renewal(&self, now: SystemTime) -> Option<Duration> {
        let last = self.last.load();
        let seen = last.as_deref()?.seen;
        Some(now.duration_since(seen).unwrap_or_default())
    }

    /// The scheduler's [`Liveness`] at `now`: lapsed once the holder has not renewed the Lease
    /// within its `leaseDurationSeconds` (or missed renewals, see [`SchedulerLease::of`]),
    /// timed on this replica's clock from when the renewal was seen (as client-go's leader
    /// election times other candidates, so clock skew between machines does not count). An
    /// unknown Lease (not listed yet, missing, without a holder) has lapsed.
    pub(crate) fn liveness(&self, now: SystemTime) -> Liveness {
        let last = self.last.load();
        let Some(renewal) = last.as_deref() else {
            return Liveness::Lapsed;
        };
        // Seen "after" now (this replica's clock stepped back): fresh.
        let age = now.duration_since(renewal.seen).unwrap_or_default();
        let lapses_after = self
            .lapses_after
            .map_or(renewal.valid_for, |after| after.min(renewal.valid_for));
        if age > lapses_after {
            Liveness::Lapsed
        } else if self.late_after.is_some_and(|late_after| age > late_after) {
            Liveness::Late
        } else {
            Liveness::Renewing
        }
    }

    /// Records that a pod was steered at `now` while the scheduler was `liveness` (routed to
    /// it unless [`Liveness::Lapsed`]); logs when that changed since the last pod. Between a
    /// crash and the fallback every pod is routed to a scheduler that is gone: the log says how
    /// long after the last renewal the fallback came, and how many were routed late.
    pub(crate) fn record(&self, liveness: Liveness, now: SystemTime) {
        if liveness == Liveness::Late {
            self.routed_late.fetch_add(1, Ordering::Relaxed);
        }
        let before = self.recorded.swap(liveness as u8, Ordering::Relaxed);
        if before == liveness as u8 {
            return;
        }
        let since_renewal_ms = self
            .since_renewal(now)
            .map_or(-1, |age| i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
        match liveness {
            Liveness::Late => warn!(
                since_renewal_ms,
                "scheduler lease: renewal late; pods still routed to its scheduler"
            ),
            Liveness::Lapsed => {
                let routed_late = self.routed_late.swap(0, Ordering::Relaxed);
                warn!(
                    since_renewal_ms,
                    routed_late,
                    "scheduler lease lapsed: pods steered for the default scheduler until it is renewed"
                );
            }
            Liveness::Renewing => {
                let routed_late = self.routed_late.swap(0, Ordering::Relaxed);
                info!(
                    since_renewal_ms,
                    routed_late, "scheduler lease renewed: pods routed to its scheduler"
                );
            }
        }
    }

    /// Whether pods are routed to the scheduler at `now` (see [`SchedulerLease::liveness`]).
    #[cfg(test)]
    fn alive(&self, now: SystemTime) -> bool {
        self.liveness(now) != Liveness::Lapsed
    }

    /// Takes the Lease as listed or watched at `now` (`None`: it is gone).
    pub(crate) fn update(&self, lease: Option<&Lease>, now: SystemTime) {
        let last = self.last.load_full();
        let renewal = lease.and_then(|lease| {
            holder_of(Some(lease))?;
            let spec = lease.spec.as_ref()?;
            let renewed =
                SystemTime::from(spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?.0);
            let valid_for = Duration::from_secs(u64::try_from(spec.lease_duration_seconds?).ok()?);
            let seen = match last.as_deref() {
                Some(last) if last.renewed == renewed => last.seen,
                Some(_) => now,
                // First sight: no renewal seen yet to time from, so the holder's own time
                // (never later than now) says how old it is.
                None => renewed.min(now),
            };
            Some(Renewal {
                renewed,
                seen,
                valid_for,
            })
        });
        self.last.store(renewal.map(Arc::new));
    }
}

/// Who holds the Lease; `None` without a holder (an empty identity is none).
fn holder_of(lease: Option<&Lease>) -> Option<&str> {
    let holder = lease?.spec.as_ref()?.holder_identity.as_deref()?;
    Some(holder).filter(|h| !h.is_empty())
}

/// When the Lease's current holder took it (`acquireTime`); `None` without a holder.
pub fn acquired(lease: Option<&Lease>) -> Option<SystemTime> {
    holder_of(lease)?;
    let acquire_time = lease?.spec.as_ref()?.acquire_time.as_ref()?;
    Some(SystemTime::from(acquire_time.0))
}

/// Keeps the routed scheduler's `state` up to date from its Lease until `shutdown`; the
/// last renewal stands while the watch is down, and ages out by itself.
pub(crate) async fn follow_routed(
    client: Client,
    which: LeaseRef,
    state: Arc<SchedulerLease>,
    shutdown: impl Future<Output = ()> + Send,
) {
    let mut holder = None;
    watch_lease(client, which, shutdown, move |lease| {
        state.update(lease, SystemTime::now());
        let now_held_by = holder_of(lease);
        if holder.as_ref().map(Option::as_deref) != Some(now_held_by) {
            // A new holder after a crash is the standby taking over.
            info!(holder = now_held_by.unwrap_or(""), "scheduler lease holder");
            holder = Some(now_held_by.map(str::to_string));
        }
    })
    .await;
}

/// Hands when the default scheduler's leader took its Lease (see [`acquired`]) to `publish`
/// whenever it changes, until `shutdown`.
pub async fn follow_default(
    client: Client,
    which: LeaseRef,
    shutdown: impl Future<Output = ()> + Send,
    mut publish: impl FnMut(Option<SystemTime>) + Send,
) {
    let mut last = None;
    watch_lease(client, which, shutdown, move |lease| {
        let since = acquired(lease);
        if last != Some(since) {
            info!(since = ?since, "default scheduler's leader");
            publish(since);
            last = Some(since);
        }
    })
    .await;
}

/// Watches the one Lease `which` and hands it (`None`: gone) to `on_change` after every event,
/// until `shutdown`. Errors are retried with backoff.
#[tracing::instrument(name = "lease_watch", skip_all, fields(lease = %which))]
async fn watch_lease(
    client: Client,
    which: LeaseRef,
    shutdown: impl Future<Output = ()> + Send,
    mut on_change: impl FnMut(Option<&Lease>) + Send,
) {
    let api = Api::<Lease>::namespaced(client, &which.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", which.name));
    let (reader, writer) = reflector::store::<Lease>();
    let events = watcher::watcher(api, config)
        .default_backoff()
        .reflect(writer);
    let mut events = std::pin::pin!(events);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut health = WatchHealth::default();
    loop {
        tokio::select! {
            () = &mut shutdown => {
                debug!("lease watch stopped");
                return;
            }
            event = events.next() => match event {
                Some(Ok(_)) => {
                    health.ok("lease");
                    let lease = reader.state().into_iter().next();
                    on_change(lease.as_deref());
                }
                Some(Err(error)) => health.failed("lease", &error),
                None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: Option<&str>, renewed: SystemTime, seconds: i32) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                renew_time: Some(MicroTime(
                    k8s_openapi::jiff::Timestamp::try_from(renewed).expect("time"),
                )),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    /// The liveness of a Lease its holder renews `every` so often.
    fn renewed_every(every: Duration) -> SchedulerLease {
        SchedulerLease::of(&LeaseRef {
            renewed_every: Some(every),
            ..LeaseRef::named("ns", "s")
        })
    }

    #[test]
    fn alive_while_renewed_within_its_duration() {
        let state = SchedulerLease::default();
        let now = SystemTime::now();
        let secs = Duration::from_secs;
        assert!(!state.alive(now), "unknown");
        // First sight of a renewal 5 s old: 10 s left.
        state.update(Some(&lease(Some("s-1"), now - secs(5), 15)), now);
        assert!(state.alive(now + secs(10)));
        assert!(!state.alive(now + secs(11)), "stale");
        // Renewed again: timed from when it was seen here, whatever the holder's clock says.
        let later = now + secs(20);
        state.update(Some(&lease(Some("s-1"), now - secs(60), 15)), later);
        assert!(state.alive(later + secs(15)));
        assert!(!state.alive(later + secs(16)));
        // The same renewal seen again changes nothing.
        state.update(
            Some(&lease(Some("s-1"), now - secs(60), 15)),
            later + secs(14),
        );
        assert!(!state.alive(later + secs(16)));
        state.update(Some(&lease(None, now, 15)), now);
        assert!(!state.alive(now), "released: no holder");
        state.update(Some(&lease(Some("s-1"), now, 15)), now);
        state.update(None, now);
        assert!(!state.alive(now), "deleted");
    }

    /// A Lease renewed every 2 s lapses after three missed renewals, long before its 15 s run
    /// out; one renewed less often than its duration still lapses at its duration.
    #[test]
    fn a_lease_that_says_how_often_it_is_renewed_lapses_after_missed_renewals() {
        let now = SystemTime::now();
        let secs = Duration::from_secs;
        let state = renewed_every(secs(2));
        state.update(Some(&lease(Some("s-1"), now, 15)), now);
        assert!(state.alive(now + secs(6)));
        assert!(!state.alive(now + secs(7)), "three renewals missed");
        let slow = renewed_every(secs(10));
        slow.update(Some(&lease(Some("s-1"), now, 15)), now);
        assert!(slow.alive(now + secs(15)));
        assert!(!slow.alive(now + secs(16)), "its duration ran out first");
    }

    /// Renewed every 2 s: late past 3 s without a renewal, lapsed past 6 s; a new holder's
    /// renewal (a standby taking over) makes it renewing again.
    #[test]
    fn a_late_renewal_comes_before_the_lapse_and_pods_routed_meanwhile_are_counted() {
        let now = SystemTime::now();
        let secs = Duration::from_secs;
        let state = renewed_every(secs(2));
        assert_eq!(state.liveness(now), Liveness::Lapsed, "unknown");
        state.update(Some(&lease(Some("s-1"), now, 15)), now);
        assert_eq!(state.liveness(now + secs(3)), Liveness::Renewing);
        assert_eq!(
            state.liveness(now + Duration::from_millis(3_100)),
            Liveness::Late
        );
        assert_eq!(state.liveness(now + secs(6)), Liveness::Late);
        assert_eq!(state.liveness(now + secs(7)), Liveness::Lapsed);
        assert_eq!(state.since_renewal(now + secs(7)), Some(secs(7)));

        for _ in 0..5 {
            state.record(Liveness::Late, now + secs(4));
        }
        assert_eq!(state.routed_late.load(Ordering::Relaxed), 5);
        state.record(Liveness::Lapsed, now + secs(7));
        assert_eq!(
            state.routed_late.load(Ordering::Relaxed),
            0,
            "counted per late spell"
        );
        let standby = now + secs(16);
        state.update(Some(&lease(Some("s-2"), standby, 15)), standby);
        assert_eq!(state.liveness(standby), Liveness::Renewing);
    }
}
