//! The indexed ledger (expiry queue, lazy deletion) against a straightforward reference that
//! scans every entry, on random sequences of charge, bind, forget and expire: same entries,
//! same shares, same per-node load and requests.

use crate::test_support::seeded;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::inflight::ledger::{Ledger, NodeExtra, PodLoad};
use crate::scheduler::{PodRequests, Resources};
use proptest::prelude::*;

const TTL: Duration = Duration::from_secs(90);
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
}

/// The ledger's behaviour written the simple way: per-node sums recomputed from every entry.
struct Reference {
    entries: HashMap<String, RefEntry>,
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
        self.entries.retain(|_, e| e.expires > now);
    }

    /// (cpu, network, milli_cpu, memory, pods, cpu variance) summed over every entry.
    fn extra(&self, node: &str) -> [f64; 6] {
        let mut sum = [0.0; 6];
        for e in self.entries.values() {
            for (n, p) in &e.shares {
                if n != node {
                    continue;
                }
                sum[0] += e.load.cpu_cores * p;
                sum[1] += e.load.network_bytes_per_second * p;
                if !e.bound {
                    sum[2] += e.requests.requested.milli_cpu as f64 * p;
                    sum[3] += e.requests.requested.memory as f64 * p;
                    sum[4] += p;
                }
                sum[5] += p * (1.0 - p) * e.load.cpu_cores.powi(2);
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
    fn indexed_ledger_matches_the_reference(ops in prop::collection::vec(op(), 1..80)) {
        let start = Instant::now();
        let mut ledger = Ledger::new(TTL);
        let mut reference = Reference { entries: HashMap::new() };
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
