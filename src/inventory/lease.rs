//! The leader Lease of the scheduler that `spec.schedulerName` routes pods to (read-only, that
//! one Lease): pods are sent to it only while its leader keeps renewing the Lease, so a stopped
//! or crashed second scheduler never leaves pods Pending with nobody to bind them.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use tracing::{debug, info};

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

/// The routed scheduler's liveness, as its Lease tells it.
#[derive(Debug, Default)]
pub struct SchedulerLease {
    last: ArcSwapOption<Renewal>,
}

impl SchedulerLease {
    /// Whether the Lease's holder renewed it less than its `leaseDurationSeconds` before `now`,
    /// timed on this replica's clock from when the renewal was seen (as client-go's leader
    /// election times other candidates, so clock skew between machines does not count). An
    /// unknown Lease (not listed yet, missing, without a holder) is not alive.
    pub fn alive(&self, now: SystemTime) -> bool {
        self.last.load().as_deref().is_some_and(|r| {
            now.duration_since(r.seen)
                .map_or(true, |age| age <= r.valid_for)
        })
    }

    /// Takes the Lease as listed or watched at `now` (`None`: it is gone).
    pub fn update(&self, lease: Option<&Lease>, now: SystemTime) {
        let last = self.last.load_full();
        let renewal = lease.and_then(|lease| {
            let spec = lease.spec.as_ref()?;
            spec.holder_identity.as_ref().filter(|h| !h.is_empty())?;
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

/// Watches the one Lease `which` and keeps `state` up to date until `shutdown`. Errors are
/// retried with backoff; meanwhile the last renewal stands, and ages out by itself.
#[tracing::instrument(name = "lease_watch", skip_all, fields(lease = %which))]
pub async fn watch_lease(
    client: Client,
    which: LeaseRef,
    state: Arc<SchedulerLease>,
    shutdown: impl Future<Output = ()> + Send,
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
    let mut was_alive = None;
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
                    state.update(lease.as_deref(), SystemTime::now());
                    let alive = state.alive(SystemTime::now());
                    if was_alive != Some(alive) {
                        info!(alive, "scheduler lease");
                        was_alive = Some(alive);
                    }
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
}
