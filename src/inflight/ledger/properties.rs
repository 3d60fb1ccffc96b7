//! The indexed ledger (expiry queue, lazy deletion) against a straightforward reference that
//! scans every entry, on random sequences of charge, bind, forget, expire, a pod's start and a
//! refresh's evidence, under the fixed ttl and under the evidence rule: same entries, same
//! shares, same per-node load and requests.

use crate::test_support::seeded;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use crate::inflight::ledger::handover::{Evidence, HandoverPolicy, Reading};
use crate::inflight::ledger::{Ledger, NodeExtra, PodLoad};
use crate::scheduler::{PodRequests, Resources};
use proptest::prelude::*;

const TTL: Duration = Duration::from_secs(90);
const WINDOW: Duration = Duration::from_secs(120);
const SCRAPE: Duration = Duration::from_secs(30);
const NODES: [&str; 5] = ["n0", "n1", "n2", "n3", "n4"];
/// Few pods, so that one is charged again after being forgotten or expired.
const PODS: u8 = 4;

#[derive(Debug, Clone)]
struct RefEntry {
    shares: Vec<(String, f64)>,
    load: PodLoad,
    requests: PodRequests,
    expires: Instant,
    bound: bool,
    /// The part of `load` still charged.
    charged: PodLoad,
    pod: Option<String>,
    started: Option<SystemTime>,
}

/// The ledger's behaviour written the simple way: per-node sums recomputed from every entry.
struct Reference {
    entries: HashMap<String, RefEntry>,
    on_evidence: bool,
}

impl Reference {
    fn charge(
        &mut self,
        id: &str,
        shares: &[(String, f64)],
        load: PodLoad,
        r: &PodRequests,
        at: Instant,
    ) {
        let total: f64 = shares.iter().map(|(_, p)| p.max(0.0)).sum();
        if shares.is_empty() || total.is_nan() || total <= 0.0 || self.entries.contains_key(id) {
            return;
        }
        let expires = at + TTL;
        if expires <= Instant::now() {
            return;
        }
        let shares = shares
            .iter()
            .filter(|(_, p)| *p > 0.0)
            .map(|(n, p)| (n.clone(), p / total))
            .collect();
        let entry = RefEntry {
            shares,
            load,
            requests: r.clone(),
            expires,
            bound: false,
            charged: load,
            pod: None,
            started: None,
        };
        self.entries.insert(id.to_string(), entry);
    }

    fn bind(&mut self, id: &str, node: &str) -> bool {
        let Some(e) = self.entries.get_mut(id) else {
            return false;
        };
        e.shares = vec![(node.to_string(), 1.0)];
        e.bound = true;
        true
    }

    fn forget(&mut self, id: &str) {
        self.entries.remove(id);
    }

    fn expire(&mut self, now: Instant) {
        let on_evidence = self.on_evidence;
        self.entries
            .retain(|_, e| e.expires > now || (on_evidence && e.bound));
    }

    /// A pod that ran keeps its first start through restarts (never stuck here).
    fn started(&mut self, id: &str, pod: &str, since: Option<SystemTime>) {
        if let Some(e) = self.entries.get_mut(id) {
            e.pod = Some(pod.to_string());
            e.started = e.started.or(since);
        }
    }

    /// Each bound pod charged what the window does not show of it yet: its estimate less its
    /// reading, or the unshown part of its estimate; dropped once the window covers its run.
    fn evidence(&mut self, taken_at: SystemTime, readings: &HashMap<String, f64>) {
        if !self.on_evidence {
            return;
        }
        self.entries.retain(|_, e| {
            if !e.bound {
                return true;
            }
            let ran = e.started.map_or(0.0, |s| {
                taken_at.duration_since(s).map_or(0.0, |d| d.as_secs_f64()) - SCRAPE.as_secs_f64()
            });
            let shown = (ran / WINDOW.as_secs_f64()).clamp(0.0, 1.0);
            if shown >= 1.0 {
                return false;
            }
            let read = e.pod.as_ref().and_then(|p| readings.get(p));
            e.charged = PodLoad {
                cpu_cores: read.map_or(e.load.cpu_cores * (1.0 - shown), |r| {
                    (e.load.cpu_cores - r).max(0.0)
                }),
                // Readings here have no network: the timing counts it.
                network_bytes_per_second: e.load.network_bytes_per_second * (1.0 - shown),
            };
            true
        });
    }

    /// (cpu, network, milli_cpu, memory, pods, cpu variance) summed over every entry.
    fn extra(&self, node: &str) -> [f64; 6] {
        let mut sum = [0.0; 6];
        for e in self.entries.values() {
            for (n, p) in &e.shares {
                if n != node {
                    continue;
                }
                sum[0] += e.charged.cpu_cores * p;
                sum[1] += e.charged.network_bytes_per_second * p;
                if !e.bound {
                    sum[2] += e.requests.requested.milli_cpu as f64 * p;
                    sum[3] += e.requests.requested.memory as f64 * p;
                    sum[4] += p;
                }
                sum[5] += p * (1.0 - p) * e.charged.cpu_cores.powi(2);
            }
        }
        sum
    }
}

fn fields(x: Option<NodeExtra>) -> [f64; 6] {
    x.map_or([0.0; 6], |x| {
        [
            x.cpu_cores,
            x.network_bytes_per_second,
            x.milli_cpu,
            x.memory,
            x.pods,
            x.cpu_variance,
        ]
    })
}

#[derive(Debug, Clone)]
enum Op {
    /// Pod index, (node index, weight) shares, cpu cores, seconds since steered.
    Charge(u8, Vec<(usize, f64)>, f64, i64),
    Bind(u8, usize),
    Forget(u8),
    /// Seconds after the start of the run (any order: callers need not be monotonic).
    Expire(u64),
    /// Pod index, seconds its containers have run (`None`: not running).
    Start(u8, Option<u64>),
    /// Seconds after the start of the run the refresh was taken; pod indexes and CPU read.
    Evidence(u64, Vec<(u8, f64)>),
}

fn op() -> impl Strategy<Value = Op> {
    // Ages well away from the TTL boundary, so the wall clock moving during a run cannot put
    // the two implementations on different sides of it.
    let age = prop_oneof![-30i64..80, 100i64..300];
    prop_oneof![
        4 => (0u8..PODS, prop::collection::vec((0..NODES.len(), 0.0f64..4.0), 0..4), 0.1f64..8.0, age)
            .prop_map(|(pod, shares, cpu, age)| Op::Charge(pod, shares, cpu, age)),
        2 => (0u8..PODS, 0..NODES.len()).prop_map(|(pod, node)| Op::Bind(pod, node)),
        1 => (0u8..PODS).prop_map(Op::Forget),
        2 => (0u64..200).prop_map(Op::Expire),
        2 => (0u8..PODS, prop::option::of(0u64..400)).prop_map(|(pod, ran)| Op::Start(pod, ran)),
        2 => (0u64..200, prop::collection::vec((0u8..PODS, 0.0f64..6.0), 0..3))
            .prop_map(|(at, read)| Op::Evidence(at, read)),
    ]
}

fn requests(cpu: f64) -> PodRequests {
    let milli = (cpu * 1000.0) as i64;
    PodRequests {
        requested: Resources {
            milli_cpu: milli,
            memory: milli << 20,
            ..Default::default()
        },
        non_zero_milli_cpu: milli,
        non_zero_memory: milli << 20,
    }
}

fn close(a: f64, b: f64) -> bool {
    close_at(a, b, 0.0)
}

/// Each field's largest amounts in these runs (cores, B/s, millicores, bytes, pods, cores²):
/// adding and removing ~1e10 bytes leaves residues of ~1e-6 where the reference has 0.
const FIELD_SCALE: [f64; 6] = [10.0, 1e9, 1e4, 1e11, 10.0, 100.0];

fn close_at(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-6 * (1.0 + a.abs().max(b.abs())) + 1e-12 * scale
}

proptest! {
    #![proptest_config(seeded::config(512))]

    #[test]
    fn indexed_ledger_matches_the_reference(
        ops in prop::collection::vec(op(), 1..80),
        on_evidence in any::<bool>(),
    ) {
        let start = Instant::now();
        let wall = SystemTime::now();
        let mut ledger = Ledger::new(TTL);
        if on_evidence {
            ledger = ledger.with_handover(HandoverPolicy::evidence(WINDOW, SCRAPE));
        }
        let mut reference = Reference { entries: HashMap::new(), on_evidence };
        for op in &ops {
            match op {
                Op::Charge(pod, shares, cpu, age) => {
                    let shares: Vec<(String, f64)> =
                        shares.iter().map(|(n, w)| (NODES[*n].to_string(), *w)).collect();
                    let at = if *age >= 0 {
                        start.checked_sub(Duration::from_secs(*age as u64))
                    } else {
                        start.checked_add(Duration::from_secs(age.unsigned_abs()))
                    };
                    let Some(at) = at else { continue };
                    let load = PodLoad { cpu_cores: *cpu, network_bytes_per_second: cpu * 1e6 };
                    let id = format!("p{pod}");
                    ledger.charge(&id, &shares, load, &requests(*cpu), at);
                    reference.charge(&id, &shares, load, &requests(*cpu), at);
                }
                Op::Bind(pod, node) => {
                    let id = format!("p{pod}");
                    prop_assert_eq!(ledger.bind(&id, NODES[*node]), reference.bind(&id, NODES[*node]));
                }
                Op::Forget(pod) => {
                    let id = format!("p{pod}");
                    ledger.forget(&id);
                    reference.forget(&id);
                }
                Op::Expire(secs) => {
                    let now = start + Duration::from_secs(*secs);
                    ledger.expire(now);
                    reference.expire(now);
                }
                Op::Start(pod, ran) => {
                    let (id, key) = (format!("p{pod}"), format!("flink/tm-{pod}"));
                    let since = ran.map(|ran| wall - Duration::from_secs(ran));
                    ledger.started(&id, &key, since, false);
                    reference.started(&id, &key, since);
                }
                Op::Evidence(at, read) => {
                    let taken_at = wall + Duration::from_secs(*at);
                    let readings: HashMap<String, f64> =
                        read.iter().map(|(pod, cpu)| (format!("flink/tm-{pod}"), *cpu)).collect();
                    let evidence = Evidence::at(
                        taken_at,
                        readings.iter().map(|(k, cpu)| {
                            (k.clone(), Reading { cpu_cores: *cpu, network_bytes_per_second: None })
                        }),
                    );
                    ledger.read_evidence(&evidence, start);
                    reference.evidence(taken_at, &readings);
                }
            }
            prop_assert_eq!(ledger.len(), reference.entries.len());
            for pod in 0u8..PODS {
                let id = format!("p{pod}");
                let want = reference.entries.get(&id).map(|e| e.shares.clone());
                let got = ledger.shares(&id);
                prop_assert_eq!(got.is_some(), want.is_some(), "{}", id);
                if let (Some(got), Some(want)) = (got, want) {
                    prop_assert_eq!(got.len(), want.len());
                    for ((gn, gp), (wn, wp)) in got.iter().zip(&want) {
                        prop_assert_eq!(gn, wn);
                        prop_assert!(close(*gp, *wp));
                    }
                }
            }
            for node in NODES {
                let (got, want) = (fields(ledger.extra(node)), reference.extra(node));
                for ((g, w), scale) in got.iter().zip(&want).zip(FIELD_SCALE) {
                    prop_assert!(close_at(*g, *w, scale), "{}: {:?} vs {:?} after {:?}", node, got, want, op);
                }
            }
        }
    }
}
