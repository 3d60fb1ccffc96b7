//! Handover on evidence: a bound pod's charge lasts until the node's metrics show its load, and
//! only the part they do not show yet is charged.
//!
//! A node's CPU and network are read as rates over a window W, from samples up to one scrape
//! interval S old. A pod that started running at `s` is therefore shown, at a refresh taken at
//! `t`, for the fraction `f = clamp((t - S - s) / W, 0, 1)` of the window. Each refresh:
//! - `f = 1`: the window covers the pod's whole run; the metrics show what it really uses,
//!   whatever was estimated. The charge ends (the handover).
//! - the refresh has the pod's own reading `r` (its containers' rate over the same window, which
//!   reads low for a young series exactly as the node's rate does): `max(0, estimate - r)` per
//!   resource is charged, Koordinator's rule, so nothing is counted twice.
//! - no reading of the pod (Prometheus shows no pods, or not this one yet): `estimate x (1 - f)`.
//!
//! A bound pod that is starting (its image pulling, its init containers running) is shown
//! nowhere and keeps its whole charge. One that is stuck (its containers waiting with a reason
//! that says they will not start by themselves: an image that cannot be pulled, a bad config,
//! a crash loop; or not started `not_started_after` after it was steered) loads its node with
//! nothing, and its charge is set aside until it starts, when it is charged whole again and
//! handed over as any other. Deleted, a pod loses its charge at once. Between refreshes nothing
//! else changes: what the metrics show is what the last refresh read.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use crate::config::{Config, HandoverRule};
use crate::hashing::HashMap;
use crate::snapshot::LoadSnapshot;

use super::{Ledger, PodLoad};

/// When a bound pod's charge ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HandoverPolicy {
    rule: HandoverRule,
    /// The rate window of the node and pod queries.
    window: Duration,
    /// How old the newest sample a refresh reads may be.
    scrape: Duration,
    /// A bound pod not started this long after it was steered is stuck.
    not_started_after: Duration,
}

impl HandoverPolicy {
    /// Every charge ends `ttl` after the pod was steered.
    pub(crate) const FIXED_TTL: HandoverPolicy = HandoverPolicy {
        rule: HandoverRule::Ttl,
        window: Duration::from_secs(120),
        scrape: Duration::from_secs(30),
        not_started_after: Duration::from_secs(600),
    };

    /// The evidence rule over a `window` read from samples up to `scrape` old.
    #[cfg(test)]
    pub(crate) fn evidence(window: Duration, scrape: Duration) -> Self {
        HandoverPolicy {
            rule: HandoverRule::Evidence,
            window,
            scrape,
            ..Self::FIXED_TTL
        }
    }

    /// The configured rule, with the Prometheus rate window when Prometheus is the source.
    pub(crate) fn of(config: &Config) -> Self {
        let handover = &config.inflight.handover;
        HandoverPolicy {
            rule: handover.rule,
            window: config
                .prometheus
                .as_ref()
                .map_or(Self::FIXED_TTL.window, |p| p.rate_window),
            scrape: handover.scrape_interval,
            not_started_after: handover.not_started_after,
        }
    }

    /// Builder: a bound pod not started `after` it was steered is stuck.
    #[cfg(test)]
    pub(crate) fn not_started_after(mut self, after: Duration) -> Self {
        self.not_started_after = after;
        self
    }

    pub(crate) fn on_evidence(&self) -> bool {
        self.rule == HandoverRule::Evidence
    }

    /// The fraction of the rate window a refresh taken at `taken_at` shows of a pod running
    /// since `started`: 0 when it has not started.
    fn shown_fraction(&self, started: Option<SystemTime>, taken_at: SystemTime) -> f64 {
        self.shown_over(self.window, started, taken_at)
    }

    /// The fraction of a node's readings over the last `span` that a pod running since
    /// `started` makes up, at a refresh taken at `taken_at`: 0 when it has not started, 1 when
    /// it ran through the whole span.
    fn shown_over(&self, span: Duration, started: Option<SystemTime>, taken_at: SystemTime) -> f64 {
        let Some(started) = started else {
            return 0.0;
        };
        let ran = taken_at
            .duration_since(started)
            .unwrap_or(Duration::ZERO)
            .saturating_sub(self.scrape);
        (ran.as_secs_f64() / span.as_secs_f64().max(1e-3)).clamp(0.0, 1.0)
    }

    /// What a node's readings span, from the `samples` its exporter's series holds over the
    /// window: the whole window, unless the series is younger (a node that just joined, an
    /// exporter or Prometheus restarted). Its CPU and network are then read by their slope over
    /// that span (`deriv()`), and so are its pods here. One missed scrape does not make a
    /// series young.
    fn span(&self, samples: Option<f64>) -> Duration {
        let scrape = self.scrape.as_secs_f64().max(1e-3);
        match samples {
            Some(n) if n + 1.0 < self.window.as_secs_f64() / scrape => {
                self.window.min(self.scrape.mul_f64(n.max(1.0)))
            }
            _ => self.window,
        }
    }
}

/// Which rule ended the charges at the last refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum InForce {
    /// Evidence, with the pods' own readings.
    PodReadings,
    /// Evidence from the timing alone: the refresh had no pod readings.
    Timing,
    /// The fixed ttl (`handover.rule: ttl`).
    Ttl,
}

impl InForce {
    /// Its name, the metrics label: the one list is telemetry's.
    pub(crate) fn as_str(self) -> &'static str {
        let at = match self {
            InForce::PodReadings => 0,
            InForce::Timing => 1,
            InForce::Ttl => 2,
        };
        crate::telemetry::HANDOVER_RULES[at]
    }
}

/// One pod's own reading in a refresh.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Reading {
    pub(crate) cpu_cores: f64,
    pub(crate) network_bytes_per_second: Option<f64>,
}

/// What one refresh says of the pods: when it was taken, and each pod's reading by
/// `namespace/name`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Evidence {
    taken_at: Option<SystemTime>,
    pods: HashMap<String, Reading>,
    /// Samples each node's exporter series holds over the rate window, by node name.
    window_samples: BTreeMap<String, f64>,
}

impl Evidence {
    /// A refresh taken at `taken_at` with these readings, by `namespace/name`.
    #[cfg(test)]
    pub(crate) fn at(
        taken_at: SystemTime,
        pods: impl IntoIterator<Item = (String, Reading)>,
    ) -> Self {
        Evidence {
            taken_at: Some(taken_at),
            pods: pods.into_iter().collect(),
            window_samples: BTreeMap::new(),
        }
    }

    /// When the refresh was taken.
    pub(crate) fn taken_at(&self) -> Option<SystemTime> {
        self.taken_at
    }

    /// Builder: the node `node`'s series held `samples` over the rate window.
    #[cfg(test)]
    pub(crate) fn with_samples(mut self, node: &str, samples: f64) -> Self {
        self.window_samples.insert(node.into(), samples);
        self
    }

    pub(crate) fn of(snapshot: &LoadSnapshot) -> Self {
        Evidence {
            taken_at: snapshot.taken_at,
            pods: snapshot
                .pods
                .iter()
                .map(|p| {
                    (
                        pod_key(&p.namespace, &p.pod),
                        Reading {
                            cpu_cores: p.cpu_cores,
                            network_bytes_per_second: p.network_bytes_per_second,
                        },
                    )
                })
                .collect(),
            window_samples: snapshot.window_samples.clone(),
        }
    }
}

/// The key a pod's readings are found by.
pub(crate) fn pod_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What a refresh's evidence did to the charges.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Handover {
    pub(crate) in_force: InForce,
    /// How long after it was steered each charge that ended here had lasted.
    pub(crate) ages: Vec<Duration>,
    /// Load charged now, over every pod in flight.
    pub(crate) charged: PodLoad,
    /// Load both charged and shown by the metrics: a bound pod's charge plus what the refresh
    /// shows of it, beyond its estimate.
    pub(crate) counted_twice: PodLoad,
    /// The same two by node, for the nodes with either, in name order: a node's figures are
    /// what a decision reads there.
    pub(crate) by_node: Vec<NodeHandover>,
    /// How long ago the oldest pod still charged something was steered (zero: none).
    pub(crate) oldest: Duration,
}

/// One node's part of a [`Handover`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeHandover {
    pub(crate) node: Box<str>,
    /// What the ledger counts there after the refresh, bound or still pending.
    pub(crate) charged: PodLoad,
    pub(crate) counted_twice: PodLoad,
}

/// How much of `estimate` is still charged for a pod shown for `fraction` of the rate window,
/// with its own `reading` if the refresh has one; `None` once the window covers its run.
pub(crate) fn still_charged(
    estimate: PodLoad,
    fraction: f64,
    reading: Option<Reading>,
) -> Option<PodLoad> {
    if fraction >= 1.0 {
        return None;
    }
    let unshown = |estimate: f64, read: Option<f64>| match read {
        Some(read) => (estimate - read).max(0.0),
        None => estimate * (1.0 - fraction),
    };
    Some(PodLoad {
        cpu_cores: unshown(estimate.cpu_cores, reading.map(|r| r.cpu_cores)),
        network_bytes_per_second: unshown(
            estimate.network_bytes_per_second,
            reading.and_then(|r| r.network_bytes_per_second),
        ),
    })
}

/// What the metrics show of a pod: its reading, else its estimate times the fraction shown.
fn shown(estimate: PodLoad, fraction: f64, reading: Option<Reading>) -> PodLoad {
    PodLoad {
        cpu_cores: reading.map_or(estimate.cpu_cores * fraction, |r| r.cpu_cores),
        network_bytes_per_second: reading
            .and_then(|r| r.network_bytes_per_second)
            .unwrap_or(estimate.network_bytes_per_second * fraction),
    }
}

impl Ledger {
    /// Builder: the handover `policy`.
    pub(crate) fn with_handover(mut self, policy: HandoverPolicy) -> Self {
        self.handover = policy;
        self
    }

    /// The bound pod `id` is `namespace/name` and its containers started at `started` (`None`:
    /// not running), or are `stuck` (see the module's doc): a pod that becomes stuck loses its
    /// charge at once, and one that starts after being stuck is charged whole again, from that
    /// start. A pod that ran keeps its first start through a container's restart (and the
    /// moment between the crash and it): the node's window still shows what it ran, so the
    /// restart does not make its load new again. Its own reading, where the refresh has one,
    /// shows what it stopped.
    pub(crate) fn started(
        &mut self,
        id: &str,
        pod: &str,
        started: Option<SystemTime>,
        stuck: bool,
    ) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        if entry.pod.as_deref() != Some(pod) {
            entry.pod = Some(pod.into());
        }
        entry.started = match (entry.started, started) {
            (Some(first), _) if !stuck && !entry.stuck => Some(first),
            _ => started,
        };
        let was = entry.stuck;
        entry.stuck = stuck && started.is_none();
        if entry.bound && was != entry.stuck {
            let charged = if entry.stuck {
                PodLoad::default()
            } else {
                entry.load
            };
            self.recharge(id, charged);
        }
    }

    /// A bound pod met in a listing (a replica starting, a relist) that was steered before the
    /// ttl, running since `started` (`None`: not yet): under the evidence rule it is charged,
    /// whatever its age, while the metrics cannot show its whole run at `now` (the next refresh
    /// hands it over as any other, or sets it aside if it is stuck); a pod they show whole is
    /// not. False when it was not charged.
    pub(crate) fn charge_unshown(
        &mut self,
        id: &str,
        node: &str,
        (load, requests): (PodLoad, &crate::scheduler::PodRequests),
        steered_at: Instant,
        (started, now): (Option<SystemTime>, SystemTime),
    ) -> bool {
        if !self.handover.on_evidence() || self.handover.shown_fraction(started, now) >= 1.0 {
            return false;
        }
        let expires = Instant::now() + self.ttl;
        let shares = [(node.to_string(), 1.0)];
        self.insert(id, &shares, (load, requests), steered_at, expires);
        self.entries.contains_key(id)
    }

    /// Reads a refresh: each bound pod is charged what the metrics do not show yet, and a pod
    /// whose run they cover is handed over to them.
    pub(crate) fn read_evidence(&mut self, evidence: &Evidence, now: Instant) -> Handover {
        let taken_at = evidence.taken_at.unwrap_or_else(SystemTime::now);
        let in_force = match (self.handover.rule, evidence.pods.is_empty()) {
            (HandoverRule::Ttl, _) => InForce::Ttl,
            (HandoverRule::Evidence, true) => InForce::Timing,
            (HandoverRule::Evidence, false) => InForce::PodReadings,
        };
        let mut report = Handover {
            in_force,
            ages: Vec::new(),
            charged: PodLoad::default(),
            counted_twice: PodLoad::default(),
            by_node: Vec::new(),
            oldest: Duration::ZERO,
        };
        let mut twice_by_node: HashMap<u32, PodLoad> = HashMap::default();
        let mut changed: Vec<(String, Option<PodLoad>)> = Vec::new();
        for (id, entry) in &self.entries {
            if !entry.bound {
                report.charged.add(entry.charged);
                continue;
            }
            // A bound entry's one share is its node. Its readings span the window, or less on
            // a young series: the pod's reading, a rate over the whole window, is read over the
            // same span, so the node and the pod show it alike.
            let node = entry.shares.first().map(|share| share.parts().0);
            let samples = node
                .and_then(|n| self.node_names.get(usize::try_from(n).ok()?))
                .and_then(|name| evidence.window_samples.get(&**name))
                .copied();
            let span = self.handover.span(samples);
            let scale = self.handover.window.as_secs_f64() / span.as_secs_f64().max(1e-3);
            let reading = entry
                .pod
                .as_deref()
                .and_then(|k| evidence.pods.get(k))
                .map(|r| Reading {
                    cpu_cores: r.cpu_cores * scale,
                    network_bytes_per_second: r.network_bytes_per_second.map(|b| b * scale),
                });
            let fraction = self.handover.shown_over(span, entry.started, taken_at);
            let not_started = entry.started.is_none()
                && now.saturating_duration_since(entry.steered_at)
                    >= self.handover.not_started_after;
            let charged = if !self.handover.on_evidence() {
                Some(entry.charged)
            } else if entry.stuck || not_started {
                // Set aside, not ended: a pod that starts after all is charged again.
                Some(PodLoad::default())
            } else {
                still_charged(entry.load, fraction, reading)
            };
            if let Some(charged) = charged {
                report.charged.add(charged);
                let shown = shown(entry.load, fraction, reading);
                let twice = PodLoad {
                    cpu_cores: (charged.cpu_cores + shown.cpu_cores - entry.load.cpu_cores)
                        .max(0.0),
                    network_bytes_per_second: (charged.network_bytes_per_second
                        + shown.network_bytes_per_second
                        - entry.load.network_bytes_per_second)
                        .max(0.0),
                };
                report.counted_twice.add(twice);
                if let Some(node) = node {
                    twice_by_node.entry(node).or_default().add(twice);
                }
            }
            if charged != Some(entry.charged) {
                changed.push((id.clone(), charged));
            }
        }
        for (id, charged) in changed {
            match charged {
                Some(charged) => self.recharge(&id, charged),
                None => {
                    if let Some(entry) = self.entries.get(&id) {
                        report
                            .ages
                            .push(now.saturating_duration_since(entry.steered_at));
                    }
                    self.forget(&id);
                }
            }
        }
        report.by_node = self.by_node(&twice_by_node);
        report.oldest = (self.entries.values())
            .filter(|e| e.charged.cpu_cores > 0.0 || e.charged.network_bytes_per_second > 0.0)
            .map(|e| now.saturating_duration_since(e.steered_at))
            .max()
            .unwrap_or_default();
        report
    }

    /// Each node's charge and `twice`, for the nodes with either.
    fn by_node(&self, twice: &HashMap<u32, PodLoad>) -> Vec<NodeHandover> {
        let mut nodes: Vec<NodeHandover> = self
            .per_node
            .iter()
            .enumerate()
            .filter_map(|(number, extra)| {
                let counted_twice = u32::try_from(number)
                    .ok()
                    .and_then(|n| twice.get(&n))
                    .copied()
                    .unwrap_or_default();
                let charged = PodLoad {
                    cpu_cores: extra.cpu_cores,
                    network_bytes_per_second: extra.network_bytes_per_second,
                };
                let any = |l: PodLoad| l.cpu_cores > 0.0 || l.network_bytes_per_second > 0.0;
                if !any(charged) && !any(counted_twice) {
                    return None;
                }
                Some(NodeHandover {
                    node: self.node_names.get(number)?.clone(),
                    charged,
                    counted_twice,
                })
            })
            .collect();
        nodes.sort_by(|a, b| a.node.cmp(&b.node));
        nodes
    }

    /// Charges `charged` for the pod `id` instead of what it charged so far.
    fn recharge(&mut self, id: &str, charged: PodLoad) {
        let Some(mut entry) = self.entries.remove(id) else {
            return;
        };
        self.apply(&entry, -1.0);
        entry.charged = charged;
        self.apply(&entry, 1.0);
        self.entries.insert(id.to_string(), entry);
    }
}

impl PodLoad {
    fn add(&mut self, other: PodLoad) {
        self.cpu_cores += other.cpu_cores;
        self.network_bytes_per_second += other.network_bytes_per_second;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::{PodRequests, Resources};

    const TWO_CPU: PodLoad = PodLoad {
        cpu_cores: 2.0,
        network_bytes_per_second: 1000.0,
    };

    fn policy() -> HandoverPolicy {
        HandoverPolicy::evidence(Duration::from_secs(120), Duration::from_secs(30))
    }

    fn requests() -> PodRequests {
        let requested = Resources::parse(&[("cpu", "2")]).expect("quantities");
        PodRequests {
            non_zero_milli_cpu: requested.milli_cpu,
            non_zero_memory: requested.memory,
            requested,
        }
    }

    /// A ledger with pod `p` steered now and bound to node `a`, started `started` ago.
    fn bound(policy: HandoverPolicy, started: Option<Duration>) -> (Ledger, SystemTime) {
        let mut l = Ledger::new(Duration::from_secs(90)).with_handover(policy);
        l.charge(
            "p",
            &[("a".to_string(), 1.0)],
            TWO_CPU,
            &requests(),
            Instant::now(),
        );
        assert!(l.bind("p", "a"));
        let now = SystemTime::now();
        l.started("p", "flink/tm-1", started.map(|ago| now - ago), false);
        (l, now)
    }

    fn evidence(taken_at: SystemTime, reading: Option<Reading>) -> Evidence {
        Evidence::at(taken_at, reading.map(|r| ("flink/tm-1".to_string(), r)))
    }

    fn cpu_on_a(l: &Ledger) -> f64 {
        l.extra("a").map_or(0.0, |x| x.cpu_cores)
    }

    #[test]
    fn the_charge_shrinks_by_the_pods_own_reading_and_ends_once_the_window_covers_it() {
        let (mut l, now) = bound(policy(), Some(Duration::from_secs(90)));
        // 60 s of a 120 s window shown: the pod's reading is half its use.
        let read = |cpu| Reading {
            cpu_cores: cpu,
            network_bytes_per_second: Some(500.0),
        };
        let report = l.read_evidence(&evidence(now, Some(read(1.0))), Instant::now());
        assert_eq!(report.in_force, InForce::PodReadings);
        assert_eq!(cpu_on_a(&l), 1.0);
        assert_eq!(report.charged.network_bytes_per_second, 500.0);
        assert_eq!(report.counted_twice, PodLoad::default());
        assert_eq!(report.by_node.len(), 1);
        assert_eq!(
            (&*report.by_node[0].node, report.by_node[0].charged),
            ("a", report.charged)
        );
        // A pod that uses less than estimated keeps the rest charged until the window covers it.
        l.read_evidence(&evidence(now, Some(read(0.5))), Instant::now());
        assert_eq!(cpu_on_a(&l), 1.5);
        let later = now + Duration::from_secs(60);
        let report = l.read_evidence(&evidence(later, Some(read(1.0))), Instant::now());
        assert_eq!((l.len(), cpu_on_a(&l)), (0, 0.0));
        assert_eq!(report.ages.len(), 1);
        assert_eq!(
            report.by_node,
            [],
            "a node with nothing charged is left out"
        );
    }

    #[test]
    fn on_a_young_series_the_pod_is_read_over_the_span_its_node_is_read_over() {
        // Window 120 s, scrapes every 30 s: the node's series holds 2 samples (Prometheus
        // restarted a minute ago), so its CPU is its slope over 60 s.
        let read = |cpu| Reading {
            cpu_cores: cpu,
            network_bytes_per_second: None,
        };
        // Running since before the restart: the node's slope shows it whole (over a full
        // window, 90 s of its 120 s run would be shown), so its charge ends.
        let (mut l, now) = bound(policy(), Some(Duration::from_secs(120)));
        let young = evidence(now, Some(read(1.0))).with_samples("a", 2.0);
        let report = l.read_evidence(&young, Instant::now());
        assert_eq!((l.len(), report.counted_twice), (0, PodLoad::default()));
        // Running for 60 s, 30 s of it scraped: half the 60 s span shows it, and its own rate
        // over 120 s reads a quarter of its use; read over the node's span, half. Charged and
        // shown add up to the estimate.
        let (mut l, now) = bound(policy(), Some(Duration::from_secs(60)));
        let young = evidence(now, Some(read(0.5))).with_samples("a", 2.0);
        let report = l.read_evidence(&young, Instant::now());
        assert!((cpu_on_a(&l) - 1.0).abs() < 1e-9, "{}", cpu_on_a(&l));
        assert_eq!(report.counted_twice.cpu_cores, 0.0);
        // Without the pod's reading, the part of the span it ran is shown.
        let (mut l, now) = bound(policy(), Some(Duration::from_secs(60)));
        l.read_evidence(&evidence(now, None).with_samples("a", 2.0), Instant::now());
        assert!((cpu_on_a(&l) - 1.0).abs() < 1e-9, "{}", cpu_on_a(&l));
        // A series with the window's samples but one (a missed scrape) spans the window.
        let (mut l, now) = bound(policy(), Some(Duration::from_secs(60)));
        l.read_evidence(&evidence(now, None).with_samples("a", 3.0), Instant::now());
        assert!((cpu_on_a(&l) - 1.5).abs() < 1e-9, "{}", cpu_on_a(&l));
    }

    #[test]
    fn without_pod_readings_the_unshown_part_of_the_window_is_charged() {
        let (mut l, now) = bound(policy(), Some(Duration::from_secs(60)));
        let report = l.read_evidence(&evidence(now, None), Instant::now());
        assert_eq!(report.in_force, InForce::Timing);
        // 60 s run, 30 s of it not scraped yet: a quarter of the window shown.
        assert!((cpu_on_a(&l) - 1.5).abs() < 1e-6, "{}", cpu_on_a(&l));
        l.read_evidence(
            &evidence(now + Duration::from_secs(90), None),
            Instant::now(),
        );
        assert!(l.is_empty());
    }

    #[test]
    fn a_pod_starting_keeps_its_whole_charge_past_the_ttl_until_it_is_set_aside_as_not_started() {
        let policy = policy().not_started_after(Duration::from_secs(600));
        let (mut l, now) = bound(policy, None);
        // Pulling its image for five minutes: past the ttl, still charged whole.
        let steered = Instant::now();
        l.read_evidence(
            &evidence(now + Duration::from_secs(300), None),
            steered + Duration::from_secs(300),
        );
        l.expire(steered + Duration::from_secs(300));
        assert_eq!(cpu_on_a(&l), 2.0);
        let report = l.read_evidence(
            &evidence(now + Duration::from_secs(300), None),
            steered + Duration::from_secs(300),
        );
        assert!(
            report.oldest >= Duration::from_secs(300),
            "{:?}",
            report.oldest
        );
        // Not started ten minutes after it was steered: it loads its node with nothing.
        let late = steered + Duration::from_secs(601);
        let report = l.read_evidence(&evidence(now + Duration::from_secs(601), None), late);
        assert_eq!((cpu_on_a(&l), report.charged), (0.0, PodLoad::default()));
        assert_eq!(l.len(), 1, "set aside, not ended");
        // It starts after all: charged whole again, then handed over as any pod.
        l.started(
            "p",
            "flink/tm-1",
            Some(now + Duration::from_secs(601)),
            false,
        );
        l.read_evidence(&evidence(now + Duration::from_secs(620), None), late);
        assert_eq!(cpu_on_a(&l), 2.0);
        l.forget("p");
        assert_eq!(l.extra("a"), None);
    }

    #[test]
    fn a_stuck_pod_loses_its_charge_at_once_and_gets_it_back_when_it_starts() {
        let (mut l, now) = bound(policy(), None);
        assert_eq!(cpu_on_a(&l), 2.0);
        // ImagePullBackOff: nothing on the node from the moment the watch says so.
        l.started("p", "flink/tm-1", None, true);
        assert_eq!(cpu_on_a(&l), 0.0);
        let report = l.read_evidence(&evidence(now, None), Instant::now());
        assert_eq!(report.charged, PodLoad::default());
        assert_eq!(
            report.oldest,
            Duration::ZERO,
            "nothing charged: no oldest charge"
        );
        assert_eq!(cpu_on_a(&l), 0.0);
        // The image is fixed and the container runs: its whole estimate, at once.
        l.started("p", "flink/tm-1", Some(now), false);
        assert_eq!(cpu_on_a(&l), 2.0);
        // A crash loop after it ran is stuck too (the watch reports no running container).
        l.started("p", "flink/tm-1", None, true);
        assert_eq!(cpu_on_a(&l), 0.0);
    }

    #[test]
    fn a_restarted_container_is_not_charged_anew_but_one_back_from_a_crash_loop_is() {
        // Running for 90 s of a 120 s window (30 s scrapes): half shown, 1 of 2 cores charged.
        let (mut l, now) = bound(policy(), Some(Duration::from_secs(90)));
        let refresh = |l: &mut Ledger| l.read_evidence(&evidence(now, None), Instant::now());
        refresh(&mut l);
        assert!((cpu_on_a(&l) - 1.0).abs() < 1e-9, "{}", cpu_on_a(&l));
        // Its container crashes and the kubelet restarts it at once: between the two, and
        // after, it is charged as it was.
        l.started("p", "flink/tm-1", None, false);
        refresh(&mut l);
        assert!((cpu_on_a(&l) - 1.0).abs() < 1e-9, "{}", cpu_on_a(&l));
        l.started("p", "flink/tm-1", Some(now - Duration::from_secs(5)), false);
        refresh(&mut l);
        assert!((cpu_on_a(&l) - 1.0).abs() < 1e-9, "{}", cpu_on_a(&l));
        // A crash loop sets it aside; once it runs again it is new: charged whole from then.
        l.started("p", "flink/tm-1", None, true);
        assert_eq!(cpu_on_a(&l), 0.0);
        l.started("p", "flink/tm-1", Some(now - Duration::from_secs(5)), false);
        refresh(&mut l);
        assert_eq!(cpu_on_a(&l), 2.0);
    }

    #[test]
    fn the_fixed_ttl_keeps_the_whole_charge_and_counts_what_is_shown_twice() {
        let (mut l, now) = bound(HandoverPolicy::FIXED_TTL, Some(Duration::from_secs(90)));
        let reading = Reading {
            cpu_cores: 1.0,
            network_bytes_per_second: None,
        };
        let report = l.read_evidence(&evidence(now, Some(reading)), Instant::now());
        assert_eq!(report.in_force, InForce::Ttl);
        assert_eq!(cpu_on_a(&l), 2.0);
        assert_eq!(report.counted_twice.cpu_cores, 1.0);
        assert_eq!(
            report.by_node,
            [NodeHandover {
                node: "a".into(),
                charged: TWO_CPU,
                // No network reading: half the window shown of its estimate.
                counted_twice: PodLoad {
                    cpu_cores: 1.0,
                    network_bytes_per_second: 500.0,
                },
            }]
        );
        l.expire(Instant::now() + Duration::from_secs(91));
        assert!(l.is_empty());
    }

    #[test]
    fn each_rule_has_a_name_of_its_own() {
        let names: std::collections::BTreeSet<&str> =
            [InForce::PodReadings, InForce::Timing, InForce::Ttl]
                .map(InForce::as_str)
                .into();
        assert_eq!(names.len(), 3);
    }

    #[test]
    fn the_shown_fraction_rises_over_the_window_after_the_scrape_delay() {
        let p = policy();
        let t = SystemTime::now();
        let started = |ago: u64| Some(t - Duration::from_secs(ago));
        assert_eq!(p.shown_fraction(None, t), 0.0);
        assert_eq!(p.shown_fraction(started(20), t), 0.0);
        assert_eq!(p.shown_fraction(started(90), t), 0.5);
        assert_eq!(p.shown_fraction(started(400), t), 1.0);
        // A refresh taken before the pod started shows none of it.
        assert_eq!(p.shown_fraction(Some(t + Duration::from_secs(5)), t), 0.0);
    }
}
