//! Reviews sent on to the deciding replica.
//!
//! The apiserver spreads reviews over the replicas per TCP connection, in any split, and a
//! replica hears of another's pods only through the pod watch, tens of milliseconds late. So
//! every replica sends the reviews it receives to one replica (the lowest-named ready member of
//! the webhook's Service, the same on every replica that knows the same members), which decides
//! them all with one ledger. A replica that gets no answer in time decides itself, and keeps
//! deciding itself for `forward.retry_after`; the decider never forwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::config::ForwardConfig;
use crate::inventory::replicas::Member;
use crate::server::tls::{ServerTls, TlsError};

/// Marks a review one replica sent to another: it is decided where it arrives.
pub(crate) const FORWARDED_BY: &str = "x-placement-webhook-forwarded-by";

/// Where this replica's reviews are decided.
pub(crate) struct Forwarder {
    me: String,
    client: reqwest::Client,
    settings: ForwardConfig,
    decider: ArcSwapOption<Peer>,
    /// Milliseconds after `epoch` until which this replica decides itself (after a failure).
    resting_until: AtomicU64,
    epoch: Instant,
}

#[derive(Debug)]
struct Peer {
    name: String,
    mutate: String,
}

/// What became of a review sent on.
#[derive(Debug)]
pub(crate) enum Forwarded {
    /// The decider's answer, passed on as it is (a 4xx included: it is what this replica
    /// would answer to the same body).
    Answered {
        status: StatusCode,
        content_type: Option<HeaderValue>,
        body: Bytes,
    },
    /// Not sent: this replica is the decider, or knows none.
    NotSent,
    /// Not sent: a forward failed less than `forward.retry_after` ago.
    Resting,
    /// No usable answer in time: this replica decides, and rests.
    Failed(ForwardError),
}

/// Why a forward got no usable answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwardError {
    #[error("the deciding replica could not be reached: {0}")]
    Request(#[from] reqwest::Error),
    #[error("the deciding replica answered {0}")]
    Status(StatusCode),
    #[error("the apiserver's remaining budget leaves no time to forward")]
    NoTime,
}

/// Why the forwarding client could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwarderError {
    #[error("TLS for forwarding: {0}")]
    Tls(#[from] TlsError),
    #[error("HTTP client for forwarding: {0}")]
    Client(#[from] reqwest::Error),
}

impl Forwarder {
    /// A forwarder for replica `me` that trusts peers serving the same certificate as `tls`.
    pub(crate) fn new(
        me: &str,
        tls: &ServerTls,
        settings: ForwardConfig,
    ) -> Result<Self, ForwarderError> {
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls.peer_client_config()?)
            .http1_only()
            .no_proxy()
            .tcp_nodelay(true)
            .connect_timeout(settings.timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            .build()?;
        Ok(Forwarder {
            me: me.to_string(),
            client,
            settings,
            decider: ArcSwapOption::empty(),
            resting_until: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    /// Follows the current members: forwards to their decider unless that is this replica.
    pub(crate) fn follow(&self, members: &[Member]) {
        let peer = Member::decider(members)
            .filter(|d| d.name != self.me)
            .and_then(|d| {
                Some(Peer {
                    name: d.name.clone(),
                    mutate: format!("{}/mutate", d.url.as_ref()?),
                })
            });
        let changed =
            self.decider.load().as_ref().map(|p| &p.name) != peer.as_ref().map(|p| &p.name);
        if changed {
            // `here`: this replica decides (it is the decider, or knows no other).
            info!(
                decider = peer.as_ref().map(|p| p.name.as_str()),
                here = peer.is_none(),
                "deciding replica changed"
            );
            // A new decider gets its chance at once.
            self.resting_until.store(0, Ordering::Relaxed);
        }
        self.decider.store(peer.map(Arc::new));
    }

    /// Whether this replica takes its own decisions now (it is the decider, or knows none).
    #[cfg(test)]
    pub(crate) fn decides_here(&self) -> bool {
        self.decider.load().is_none()
    }

    /// Sends `body` to the decider and waits at most `forward.timeout`, and at most half of
    /// what is left until `until`.
    pub(crate) async fn forward(&self, body: Bytes, until: Instant) -> Forwarded {
        let Some(peer) = self.decider.load_full() else {
            return Forwarded::NotSent;
        };
        let now = Instant::now();
        if self.millis(now) < self.resting_until.load(Ordering::Relaxed) {
            return Forwarded::Resting;
        }
        let budget = self
            .settings
            .timeout
            .min(until.saturating_duration_since(now) / 2);
        if budget < Duration::from_millis(1) {
            return Forwarded::Failed(ForwardError::NoTime);
        }
        let sent = self
            .client
            .post(&peer.mutate)
            .query(&[("timeout", format!("{}ms", budget.as_millis()))])
            .header(FORWARDED_BY, self.me.as_str())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .timeout(budget)
            .send()
            .await;
        let outcome = match sent {
            Ok(response) if response.status().is_server_error() => {
                Err(ForwardError::Status(response.status()))
            }
            Ok(response) => {
                let status = response.status();
                let content_type = response
                    .headers()
                    .get(reqwest::header::CONTENT_TYPE)
                    .cloned();
                response
                    .bytes()
                    .await
                    .map(|body| Forwarded::Answered {
                        status,
                        content_type,
                        body,
                    })
                    .map_err(ForwardError::from)
            }
            Err(e) => Err(ForwardError::from(e)),
        };
        outcome.unwrap_or_else(|error| {
            warn!(decider = %peer.name, %error, rest = ?self.settings.retry_after, "forwarding failed: deciding here");
            let until = self.millis(Instant::now() + self.settings.retry_after);
            self.resting_until.store(until, Ordering::Relaxed);
            Forwarded::Failed(error)
        })
    }

    fn millis(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX)
    }
}
