//! The closed loop: bursts of Flink TaskManagers through the real admission path, several
//! reviews in flight at once, placed by the scheduler model (its node order as the scheduler
//! cache lists it, zones round-robin with late joiners appended, and above 100 nodes a run of
//! that order from a rotating start that begins anywhere), with the pod watch feeding
//! "created" and "bound" events back to the webhook. Compared with ideal water-filling, with
//! water-filling inside each pod's sample, with every pod sent to the coolest node, and with
//! no webhook at all, on generated clusters. Modes: 1, 2 and 3 replicas, forwarding every review
//! to the deciding replica as installed, and with that replica gone ("decider gone": each
//! decides what it receives); reviews split round robin, 80/20 and 100/0; a replica that joins
//! halfway; binds 10 ms after each pod and only after the burst (the watch reports each pod
//! created 10 ms after its review either way). Beyond those: two replicas whose watch reports
//! nothing at all until the burst is over.
//!
//! Targets, in every scenario and mode: the hottest node that receives a pod is at most one
//! TaskManager hotter than the bound's, and no more than the bound's count + 2 pods land on
//! nodes already at or above 70%. The bound is ideal water-filling where the scheduler scores
//! every feasible node; under default sampling no steering can beat water-filling inside each
//! pod's sample, so the bound is the worse of the two (both are printed). Run with
//! `--nocapture` to see the table.
//!
//! Three scenarios put pod-level constraints and pods already running in the way (zone spread,
//! preferred anti-affinity between a job's TaskManagers, required anti-affinity to noisy
//! neighbours): every method's placement is checked against the hard ones, and ideal
//! water-filling honours them too (the preferences as the scheduler scores them). The webhook
//! models them; its rows are guarded as everywhere else, except under preferred anti-affinity
//! with several replicas (see `Setup::loose`).
//!
//! `CLOSED_LOOP_SEED=k` generates other clusters of each kind (every scenario's seed shifted),
//! to look beyond the gate's clusters; the gate runs without it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::config::Config;
use crate::simulate::{Burst, Cluster, Figures, Method, Outcome, Timing, figures, run};
use crate::snapshot::{LoadSnapshot, NodeLoad, PodReading};
use crate::test_support::rng;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

const BUSY: f64 = 0.70;
/// 10 GbE, in bytes per second.
const NIC: f64 = 1.25e9;

/// The scenarios' generator (splitmix64).
pub(super) struct Rng(rng::Rng);

impl Rng {
    /// The scenario's generator; `CLOSED_LOOP_SEED=k` shifts every scenario's seed by `k` to
    /// try other clusters of the same kind outside the gate (unset: the gate's clusters).
    pub(super) fn seeded(seed: u64) -> Self {
        // A value that does not parse stops the run: it would otherwise rerun the gate's
        // clusters under the name of others.
        let shift = std::env::var("CLOSED_LOOP_SEED").map_or(0, |s| {
            s.parse::<u64>()
                .unwrap_or_else(|_| panic!("CLOSED_LOOP_SEED must be a whole number, not {s:?}"))
        });
        Rng(rng::Rng(seed.wrapping_add(shift.wrapping_mul(1000))))
    }

    fn next(&mut self) -> f64 {
        self.0.unit()
    }

    pub(super) fn range(&mut self, lo: f64, hi: f64) -> f64 {
        self.0.between(lo, hi)
    }
}

/// One generated node: size, real load and what its pods already request.
pub(super) struct Spec {
    pub(super) cores: u32,
    pub(super) cpu: f64,
    pub(super) nic: f64,
    pub(super) requested_cores: f64,
    /// Zone index, when the cluster spreads over zones.
    pub(super) zone: Option<usize>,
}

pub(super) fn snapshot(specs: &[Spec]) -> LoadSnapshot {
    // Names are a permutation of positions, so name order says nothing about load.
    let n = specs.len();
    let stride = (1..n)
        .rev()
        .find(|s| gcd(*s, n) == 1 && *s > n / 3)
        .unwrap_or(1);
    LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes: specs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let name = format!("worker-{:05}", (i * stride) % n);
                let mut node = NodeLoad::new(name.clone(), s.cpu);
                node.cpu_capacity_cores = Some(f64::from(s.cores));
                node.network_bytes_per_second = Some(s.nic * NIC);
                node.network_capacity_bytes_per_second = Some(NIC);
                node.labels = Arc::new(BTreeMap::from([
                    ("kubernetes.io/hostname".to_string(), name),
                    ("node-pool".to_string(), "flink".to_string()),
                ]));
                if let Some(zone) = s.zone {
                    Arc::make_mut(&mut node.labels)
                        .insert("topology.kubernetes.io/region".into(), "eu-west".into());
                    Arc::make_mut(&mut node.labels).insert(
                        "topology.kubernetes.io/zone".into(),
                        format!("eu-west-{}", ["a", "b", "c"][zone % 3]),
                    );
                }
                (node.allocatable, node.requested) =
                    crate::test_support::node_resources::node_resources(
                        s.cores,
                        s.requested_cores,
                        4,
                    );
                node
            })
            .collect(),
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A native-mode TaskManager after apiserver defaulting: a log sidecar before
/// `flink-main-container`, requests equal to limits.
fn taskmanager() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "clickstream-taskmanager-1",
            "namespace": "flink-jobs",
            "labels": {"app": "clickstream", "component": "taskmanager",
                       "type": "flink-native-kubernetes"}
        },
        "spec": {
            "restartPolicy": "Never",
            "schedulerName": "default-scheduler",
            "nodeSelector": {"node-pool": "flink"},
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "containers": [
                {"name": "log-shipper", "image": "fluent/fluent-bit:3.1",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                               "limits": {"cpu": "100m", "memory": "64Mi"}}},
                {"name": "flink-main-container", "image": "flink:1.20",
                 "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                               "limits": {"cpu": "2", "memory": "4Gi"}}}
            ]
        }
    })
}

pub(super) fn burst(count: usize, network: f64) -> Burst {
    Burst {
        pod: taskmanager(),
        count,
        cpu_cores: 2.0,
        network_bytes_per_second: network,
        configured_network: None,
    }
}

/// The replica modes every scenario runs.
fn modes() -> Vec<Timing> {
    let typical = Timing::typical;
    let after_burst = |replicas| Timing {
        binds_after_burst: true,
        ..typical(replicas)
    };
    let silent = |replicas| Timing {
        watch_lag: None,
        ..typical(replicas)
    };
    let share = |replicas, share| Timing {
        first_share: Some(share),
        ..typical(replicas)
    };
    let joins = |replicas| Timing {
        join_at: Some(usize::MAX),
        ..typical(replicas)
    };
    // The deciding replica gone: each replica decides what it receives.
    let alone = |timing: Timing| Timing {
        forwarding: false,
        ..timing
    };
    vec![
        after_burst(1),
        typical(1),
        // The default install: every review forwarded to one deciding replica.
        typical(2),
        share(2, 0.8),
        typical(3),
        joins(3),
        // Beyond the burst's modes: a watch that reports nothing until the burst is over.
        silent(2),
        // Without the deciding replica.
        alone(typical(2)),
        alone(share(2, 0.8)),
        alone(share(2, 1.0)),
        alone(after_burst(2)),
        alone(silent(2)),
        alone(typical(3)),
        alone(joins(3)),
    ]
}

fn row(name: &str, f: &Figures) -> String {
    format!(
        "{name:<22} {:<50} {:>7.3} {:>7} {:>6} {:>5} {:>5} {:>8} {:>8}",
        f.method,
        f.hottest_cpu,
        f.hottest_nic.map_or("-".into(), |n| format!("{n:.3}")),
        f.onto_busy,
        f.nodes_used,
        f.most_pods_on_one_node,
        f.preferred_outside_sample
            .map_or("-".into(), |s| format!("{:.1}%", s * 100.0)),
        f.landed_as_predicted
            .map_or("-".into(), |s| format!("{:.0}%", s * 100.0)),
    ) + &f.landings.map_or(String::new(), |l| format!(" {l:?}"))
}

/// A hard constraint every method's placement must satisfy: what it breaks, if anything.
type Hard = fn(&Cluster, &Outcome) -> Option<String>;

/// How a scenario is set up besides its nodes and its burst.
#[derive(Default)]
struct Setup {
    /// Nodes (indexes) that joined after the scheduler started, in join order.
    late: Vec<usize>,
    /// The exact path: a profile that scores every feasible node.
    exact: bool,
    /// Running pods of the burst's job, as the metrics report them.
    siblings: Vec<PodReading>,
    /// Pods already running, each on the node of that spec index.
    pods: Vec<(usize, Value)>,
    namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    hard: Option<Hard>,
    /// Guarded only against leaving pods Pending that ideal places and against heating the
    /// hottest node by more than two TaskManagers over no webhook; the usual guards are
    /// printed, not enforced. For preferred anti-affinity between a job's TaskManagers: a
    /// replica does not hear of the other replicas' last few pods, names a node one of them
    /// just took, and the scheduler's anti-affinity score sends the pod elsewhere (today two
    /// replicas end one TaskManager above no webhook).
    loose: bool,
}

/// Runs every method on the scenario, prints the table and checks it.
///
/// Hard guards (the test fails), today's figures: at most two TaskManagers above the bound
/// (four under default sampling), the bound's count + 5 onto busy nodes (+ 10 under
/// sampling), no NIC pushed past the hot threshold when ideal keeps them under it, nothing
/// left Pending that ideal places, and better than no webhook. The targets (one TaskManager,
/// count + 2) are checked too: each miss is printed with its figure, and the test fails on them
/// when `CLOSED_LOOP_STRICT` is set.
/// Each method's figures on `cluster`, and what it broke of the scenario's hard constraints,
/// in the order of `methods`. Measured side by side on the machine's cores: each run is seeded
/// and shares nothing with the others, so the figures are those of running them one by one,
/// and a 5,000-node scenario's seventeen runs do not wait for each other on one core.
fn measure_all(
    cluster: &Cluster,
    config: &Config,
    burst: &Burst,
    methods: &[Method],
    hard: Option<Hard>,
) -> Vec<(Figures, Option<String>)> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(methods.len());
    let one = || {
        let mut mine = Vec::new();
        loop {
            let at = next.fetch_add(1, Ordering::Relaxed);
            let Some(&method) = methods.get(at) else {
                return mine;
            };
            let outcome = run(cluster, config, burst, method, 1);
            let broken = hard
                .and_then(|hard| hard(cluster, &outcome))
                .map(|text| format!("{}: {text}", method.label()));
            mine.push((at, (figures(cluster, burst, &outcome, BUSY), broken)));
        }
    };
    let mut all: Vec<(usize, (Figures, Option<String>))> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..workers).map(|_| scope.spawn(one)).collect();
        workers
            .into_iter()
            .flat_map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e))
            })
            .collect()
    });
    all.sort_by_key(|(at, _)| *at);
    all.into_iter().map(|(_, result)| result).collect()
}

fn check(name: &str, specs: &[Spec], burst: &Burst, setup: Setup) {
    let mut config = Config::default();
    if setup.exact {
        config.scheduler.percentage_of_nodes_to_score = 100;
    }
    let mut snap = snapshot(specs);
    snap.pods = setup.siblings;
    let running: Vec<Pod> = setup
        .pods
        .iter()
        .map(|(node, pod)| {
            let mut pod = pod.clone();
            pod["spec"]["nodeName"] = json!(snap.nodes[*node].name);
            serde_json::from_value(pod).expect("running pod")
        })
        .collect();
    let cluster = Cluster::new(snap, &config)
        .with_late_joiners(&setup.late)
        .with_pods(running)
        .with_namespace_labels(setup.namespace_labels);
    let sampled = cluster.nodes.len() > 100 && !setup.exact;
    // Every method's outcome first, measured side by side; the checks below read them in order.
    let timings: Vec<Timing> = modes()
        .into_iter()
        .map(|mut timing| {
            if std::env::var_os("CLOSED_LOOP_NO_MEMBERSHIP").is_some() {
                timing.membership = false;
            }
            if timing.join_at == Some(usize::MAX) {
                timing.join_at = Some(burst.count / 2);
            }
            timing
        })
        .collect();
    let mut methods = vec![Method::Ideal];
    if sampled {
        methods.push(Method::IdealInSample);
    }
    methods.extend([Method::NoWebhook, Method::CoolestForAll]);
    methods.extend(timings.iter().map(|&timing| Method::Webhook(timing)));
    let mut broken = Vec::new();
    let mut measured = measure_all(&cluster, &config, burst, &methods, setup.hard)
        .into_iter()
        .map(|(figures, hard_broken)| {
            broken.extend(hard_broken);
            figures
        })
        .collect::<Vec<_>>()
        .into_iter();
    let mut measure = |_: Method| measured.next().expect("one outcome per method");
    let ideal = measure(Method::Ideal);
    let in_sample = sampled.then(|| measure(Method::IdealInSample));
    let alone = measure(Method::NoWebhook);
    let coolest = measure(Method::CoolestForAll);
    // The bound: what steering can reach at all.
    let (bound_hot, bound_busy) = match &in_sample {
        Some(s) => (
            ideal.hottest_cpu.max(s.hottest_cpu),
            ideal.onto_busy.max(s.onto_busy),
        ),
        None => (ideal.hottest_cpu, ideal.onto_busy),
    };
    let mut rows = vec![ideal.clone()];
    rows.extend(in_sample.clone());
    rows.extend([alone.clone(), coolest]);
    let mut failures = Vec::new();
    let mut missed = Vec::new();
    for timing in timings {
        let f = measure(Method::Webhook(timing));
        let mut guards = Vec::new();
        // Replicas that hear nothing of each other until the burst is over cannot avoid each
        // other's choices but by their partition: guarded only against doing harm.
        let blind = timing.replicas > 1 && timing.watch_lag.is_none() && !timing.one_decider();
        let one_pod = f.one_pod_on_hottest;
        let target_hot = bound_hot + one_pod + 1e-9;
        // Regression guards: two TaskManagers where the scheduler scores every node, four
        // under default sampling (today's figures, docs/design.md, "Limits").
        let guard_hot = bound_hot + if sampled { 4.0 } else { 2.0 } * one_pod + 1e-9;
        if f.hottest_cpu > guard_hot && !blind {
            guards.push(format!(
                "{}: hottest node {:.3} > bound {bound_hot:.3} + {:.0} TaskManagers",
                f.method,
                f.hottest_cpu,
                (guard_hot - bound_hot) / one_pod
            ));
        }
        if f.hottest_cpu > target_hot {
            missed.push(format!(
                "target missed: {}: hottest node {:.3} > bound {bound_hot:.3} + one TaskManager {one_pod:.3}",
                f.method, f.hottest_cpu
            ));
        }
        if f.onto_busy > bound_busy + if sampled { 10 } else { 5 } && !blind {
            guards.push(format!(
                "{}: {} pods onto nodes >= {BUSY} (bound {bound_busy})",
                f.method, f.onto_busy
            ));
        }
        if f.onto_busy > bound_busy + 2 {
            missed.push(format!(
                "target missed: {}: {} pods onto nodes >= {BUSY} (bound {bound_busy})",
                f.method, f.onto_busy
            ));
        }
        // Whatever the mode: better than the default scheduler alone, on the hottest CPU or,
        // where the NICs bind, on the hottest NIC; where the scheduler alone already puts no
        // node hotter than ideal does, as hot as ideal is as cool as steering gets.
        let cooler = f.hottest_cpu < alone.hottest_cpu
            || f.hottest_cpu <= bound_hot + 1e-9
            || matches!((f.hottest_nic, alone.hottest_nic), (Some(a), Some(b)) if a < b - 1e-9);
        if !cooler || f.onto_busy > alone.onto_busy {
            let text = format!("{}: no better than no webhook", f.method);
            if blind {
                missed.push(format!("target missed: {text}"));
            } else {
                guards.push(text);
            }
        }
        // A NIC is not pushed past the hot threshold when ideal keeps them all under it (by
        // more than one pod's traffic when another replica may be adding one unseen).
        let hot_nic = config.placement.hot.network;
        let nic_pod = burst.network_bytes_per_second / NIC;
        let nic_slack = if timing.replicas > 1 && !timing.one_decider() {
            nic_pod
        } else {
            0.0
        };
        if let (Some(ideal_nic), Some(nic)) = (ideal.hottest_nic, f.hottest_nic)
            && ideal_nic < hot_nic
            && nic >= hot_nic
        {
            let text = format!(
                "{}: a NIC pushed to {nic:.3}, past the hot threshold",
                f.method
            );
            if nic >= hot_nic + nic_slack {
                guards.push(text);
            } else {
                missed.push(format!("target missed: {text}"));
            }
        }
        if f.pending > ideal.pending {
            failures.push(format!("{}: {} pods left Pending", f.method, f.pending));
        }
        if cluster.nodes.len() >= 5000
            && let Some(outside) = f.preferred_outside_sample
            && outside > 0.01
        {
            guards.push(format!(
                "{}: {:.1}% of pods had no preferred node in the sample",
                f.method,
                outside * 100.0
            ));
        }
        if setup.loose {
            if f.hottest_cpu > alone.hottest_cpu + 2.0 * one_pod + 1e-9 {
                failures.push(format!(
                    "{}: hottest node {:.3} > no webhook {:.3} + 2 TaskManagers",
                    f.method, f.hottest_cpu, alone.hottest_cpu
                ));
            }
            missed.extend(guards.into_iter().map(|g| format!("not guarded yet: {g}")));
        } else {
            failures.extend(guards);
        }
        rows.push(f);
    }
    // Whatever the method: the scheduler model enforces these, so a break is the loop's
    // bookkeeping.
    failures.extend(broken);
    println!(
        "\n{:<22} {:<50} {:>7} {:>7} {:>6} {:>5} {:>5} {:>8} {:>8} landings [first, other, elsewhere]",
        "scenario", "method", "hot CPU", "hot NIC", ">=70%", "nodes", "most", "outside", "as pred"
    );
    for f in &rows {
        println!("{}", row(name, f));
    }
    for m in &missed {
        println!("{name}: {m}");
    }
    if std::env::var_os("CLOSED_LOOP_STRICT").is_some() {
        failures.extend(missed);
    }
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}

/// 40 x 16 cores, about half requested, skewed load: a few busy nodes with few requests,
/// nearly idle nodes whose pods over-request.
#[test]
fn skewed_load_half_requested() {
    let mut rng = Rng::seeded(11);
    let specs: Vec<Spec> = (0..40)
        .map(|i| {
            let (cpu, requested) = match i {
                0..4 => (0.70 + 0.03 * i as f64, 4.0),
                4..30 => (rng.range(0.30, 0.62), rng.range(6.0, 10.0)),
                _ => (rng.range(0.03, 0.15), rng.range(11.0, 13.0)),
            };
            Spec {
                cores: 16,
                cpu,
                nic: rng.range(0.05, 0.3),
                requested_cores: requested,
                zone: None,
            }
        })
        .collect();
    check("skewed-40", &specs, &burst(100, 0.0), Setup::default());
}

/// Room for 3 TaskManagers per node by requests.
#[test]
fn request_tight() {
    let mut rng = Rng::seeded(12);
    let specs: Vec<Spec> = (0..40)
        .map(|_| Spec {
            cores: 16,
            cpu: rng.range(0.05, 0.65),
            nic: rng.range(0.05, 0.3),
            requested_cores: 9.5,
            zone: None,
        })
        .collect();
    check("request-tight", &specs, &burst(80, 0.0), Setup::default());
}

/// 60 nodes of 8 to 64 cores, real load unrelated to requests.
#[test]
fn mixed_node_sizes() {
    let mut rng = Rng::seeded(13);
    let specs: Vec<Spec> = (0..60)
        .map(|i| {
            let cores = [8, 16, 32, 64][i % 4];
            Spec {
                cores,
                cpu: rng.range(0.05, 0.75),
                nic: rng.range(0.05, 0.3),
                requested_cores: f64::from(cores) * rng.range(0.2, 0.7),
                zone: None,
            }
        })
        .collect();
    check("mixed-sizes", &specs, &burst(120, 0.0), Setup::default());
}

/// NICs near saturation on idle-CPU nodes; each TaskManager moves 50 MB/s.
#[test]
fn nics_near_saturation() {
    let mut rng = Rng::seeded(14);
    let specs: Vec<Spec> = (0..40)
        .map(|i| {
            let (cpu, nic) = if i % 3 == 0 {
                (rng.range(0.03, 0.15), rng.range(0.74, 0.82))
            } else {
                (rng.range(0.30, 0.60), rng.range(0.10, 0.30))
            };
            Spec {
                cores: 16,
                cpu,
                nic,
                requested_cores: rng.range(4.0, 8.0),
                zone: None,
            }
        })
        .collect();
    check("nic-saturated", &specs, &burst(80, 5e7), Setup::default());
}

/// `count` nodes over three zones; `late` of them (every `count / late`-th) joined after the
/// scheduler started.
fn large(count: usize, seed: u64) -> Vec<Spec> {
    let mut rng = Rng::seeded(seed);
    (0..count)
        .map(|i| {
            let cores = if rng.next() < 0.5 { 16 } else { 32 };
            // Most nodes moderately busy, a tail of hot ones and of idle ones.
            let u = rng.next();
            let cpu = if u < 0.1 {
                rng.range(0.75, 0.95)
            } else if u < 0.3 {
                rng.range(0.02, 0.2)
            } else {
                rng.range(0.3, 0.65)
            };
            Spec {
                cores,
                cpu,
                nic: rng.range(0.05, 0.5),
                requested_cores: f64::from(cores) * rng.range(0.3, 0.75),
                zone: Some(i % 3),
            }
        })
        .collect()
}

/// One node in 25 joined after the scheduler started (in reverse name order).
fn late_joiners(count: usize) -> Vec<usize> {
    (0..count).rev().step_by(25).collect()
}

#[test]
fn five_hundred_nodes_default_sampling() {
    let setup = Setup {
        late: late_joiners(500),
        ..Setup::default()
    };
    check("500-nodes", &large(500, 15), &burst(1000, 0.0), setup);
}

#[test]
fn five_hundred_nodes_exact_profile() {
    let setup = Setup {
        late: late_joiners(500),
        exact: true,
        ..Setup::default()
    };
    check("500-nodes exact", &large(500, 15), &burst(1000, 0.0), setup);
}

#[test]
fn five_thousand_nodes_default_sampling() {
    let setup = Setup {
        late: late_joiners(5000),
        ..Setup::default()
    };
    check("5000-nodes", &large(5000, 16), &burst(2000, 0.0), setup);
}

#[test]
fn five_thousand_nodes_exact_profile() {
    let setup = Setup {
        late: late_joiners(5000),
        exact: true,
        ..Setup::default()
    };
    check(
        "5000-nodes exact",
        &large(5000, 16),
        &burst(2000, 0.0),
        setup,
    );
}

/// A burst bigger than the cool capacity: network-heavy TaskManagers whose load the webhook
/// knows only from the job's 24 running ones (100 MB/s each), on 40 nodes whose NICs fill
/// before their CPUs do. Once every node is past a threshold, steering goes on (least bad
/// first) instead of leaving the pods to request scores.
#[test]
fn burst_beyond_cool_capacity() {
    let mut rng = Rng::seeded(17);
    let specs: Vec<Spec> = (0..40)
        .map(|_| Spec {
            cores: 16,
            cpu: rng.range(0.2, 0.45),
            nic: rng.range(0.5, 0.72),
            requested_cores: rng.range(2.0, 5.0),
            zone: None,
        })
        .collect();
    let siblings = (0..24)
        .map(|i| PodReading {
            namespace: "flink-jobs".into(),
            pod: format!("clickstream-taskmanager-1-{}", 200 + i),
            cpu_cores: 2.0,
            network_bytes_per_second: Some(1e8),
            labels: BTreeMap::from([
                ("app".to_string(), "clickstream".to_string()),
                ("component".to_string(), "taskmanager".to_string()),
            ]),
            owner: None,
            running_secs: Some(3600.0),
            node: None,
            steered: false,
        })
        .collect();
    let mut heavy = burst(100, 1e8);
    // The operator configured no network estimate: only the siblings tell.
    heavy.configured_network = Some(0.0);
    let setup = Setup {
        siblings,
        ..Setup::default()
    };
    check("beyond-cool-capacity", &specs, &heavy, setup);
}

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

/// The labels of the burst's job (its TaskManagers, running or new, carry them all).
fn job_labels() -> Value {
    taskmanager()["metadata"]["labels"].clone()
}

/// The TaskManager with preferred anti-affinity to its job's other TaskManagers, per node.
fn taskmanager_apart() -> Value {
    let mut tm = taskmanager();
    tm["spec"]["affinity"] = json!({"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {
                "topologyKey": HOSTNAME,
                "labelSelector": {"matchLabels": job_labels()}
            }
        }]
    }});
    tm
}

/// `template` running as pod `name` on the node of spec index `node`.
fn running(template: &Value, name: &str, node: usize) -> (usize, Value) {
    let mut pod = template.clone();
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["uid"] = json!(format!("running-{name}"));
    (node, pod)
}

/// Spec indexes of the `count` nodes with the lowest real CPU.
fn coolest(specs: &[Spec], count: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..specs.len()).collect();
    order.sort_by(|&a, &b| specs[a].cpu.total_cmp(&specs[b].cpu));
    order.truncate(count);
    order
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The job's TaskManagers (running and of the burst) over the zones differ by at most one.
fn zone_skew_within_one(cluster: &Cluster, outcome: &Outcome) -> Option<String> {
    let zone = |k: usize| cluster.nodes[k].labels.get(ZONE).map(String::as_str);
    let mut per_zone: BTreeMap<&str, usize> = (0..cluster.nodes.len())
        .filter_map(|k| zone(k).map(|z| (z, 0)))
        .collect();
    let job = |pod: &Pod| {
        pod.metadata.namespace.as_deref() == Some("flink-jobs")
            && label(pod, "app") == Some("clickstream")
    };
    let running = cluster.bound_pods().filter(|(p, _)| job(p)).map(|(_, k)| k);
    for k in running.chain(outcome.landed.iter().flatten().copied()) {
        *per_zone.entry(zone(k)?).or_insert(0) += 1;
    }
    let max = per_zone.values().max()?;
    let min = per_zone.values().min()?;
    (max - min > 1).then(|| format!("zone skew {} > 1: {per_zone:?}", max - min))
}

/// No TaskManager of the burst on a node where a noisy pod runs.
fn none_beside_noisy(cluster: &Cluster, outcome: &Outcome) -> Option<String> {
    let noisy: BTreeSet<usize> = cluster
        .bound_pods()
        .filter(|(p, _)| label(p, "app") == Some("noisy"))
        .map(|(_, k)| k)
        .collect();
    let beside: Vec<&str> = outcome
        .landed
        .iter()
        .flatten()
        .filter(|k| noisy.contains(k))
        .map(|&k| cluster.nodes[k].name.as_str())
        .collect();
    (!beside.is_empty()).then(|| format!("TaskManagers beside noisy pods on {beside:?}"))
}

/// 48 nodes over three zones, the coolest mostly in one; the TaskManagers must spread evenly
/// over the zones (DoNotSchedule, maxSkew 1), and two of the job's run in the hottest zone.
#[test]
fn zone_spread() {
    let mut rng = Rng::seeded(18);
    let specs: Vec<Spec> = (0..48)
        .map(|i| {
            let zone = i % 3;
            let cpu = if zone == 0 || i % 8 == 1 {
                rng.range(0.05, 0.30)
            } else {
                rng.range(0.35, 0.65)
            };
            Spec {
                cores: 16,
                cpu,
                nic: rng.range(0.05, 0.3),
                requested_cores: rng.range(4.0, 8.0),
                zone: Some(zone),
            }
        })
        .collect();
    let mut tm = taskmanager();
    tm["spec"]["topologySpreadConstraints"] = json!([{
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": job_labels()}
    }]);
    let mut spread = burst(36, 0.0);
    spread.pod = tm.clone();
    let setup = Setup {
        pods: vec![
            running(&tm, "clickstream-taskmanager-0-1", 2),
            running(&tm, "clickstream-taskmanager-0-2", 5),
        ],
        hard: Some(zone_skew_within_one),
        loose: false,
        ..Setup::default()
    };
    check("zone-spread", &specs, &spread, setup);
}

/// 40 nodes; the TaskManagers prefer (weight 100) not to share a node with one another, and
/// eight of the job's run already, one on each of the eight coolest nodes.
#[test]
fn taskmanager_anti_affinity() {
    let mut rng = Rng::seeded(19);
    let specs: Vec<Spec> = (0..40)
        .map(|_| Spec {
            cores: 16,
            cpu: rng.range(0.05, 0.65),
            nic: rng.range(0.05, 0.3),
            requested_cores: rng.range(4.0, 8.0),
            zone: None,
        })
        .collect();
    let tm = taskmanager_apart();
    let mut apart = burst(40, 0.0);
    apart.pod = tm.clone();
    let setup = Setup {
        pods: coolest(&specs, 8)
            .into_iter()
            .enumerate()
            .map(|(i, k)| running(&tm, &format!("clickstream-taskmanager-0-{}", i + 1), k))
            .collect(),
        loose: true,
        ..Setup::default()
    };
    check("tm-anti-affinity", &specs, &apart, setup);
}

/// 500 nodes; a long-running job already has a TaskManager on four nodes in five, and the
/// burst's TaskManagers prefer not to share a node with the job's others: the anti-affinity
/// score favours the hundred nodes without one, while under default sampling the scheduler
/// still samples among every feasible node.
fn anti_affinity_at_scale(name: &str, exact: bool) {
    let specs = large(500, 23);
    let tm = taskmanager_apart();
    let mut apart = burst(150, 0.0);
    apart.pod = tm.clone();
    let setup = Setup {
        pods: (0..specs.len())
            .filter(|k| k % 5 != 0)
            .enumerate()
            .map(|(i, k)| running(&tm, &format!("clickstream-taskmanager-0-{}", i + 1), k))
            .collect(),
        exact,
        loose: true,
        ..Setup::default()
    };
    check(name, &specs, &apart, setup);
}

#[test]
fn anti_affinity_500_nodes_default_sampling() {
    anti_affinity_at_scale("anti-affinity-500", false);
}

#[test]
fn anti_affinity_500_nodes_exact_profile() {
    anti_affinity_at_scale("anti-affinity-500 exact", true);
}

/// 40 nodes; batch pods (`app: noisy`, in a namespace labelled `tier: batch`) run on eight of
/// the ten coolest, and the TaskManagers must not share a node with them (required
/// anti-affinity through a namespaceSelector).
#[test]
fn noisy_neighbour() {
    let mut rng = Rng::seeded(20);
    let specs: Vec<Spec> = (0..40)
        .map(|_| Spec {
            cores: 16,
            cpu: rng.range(0.05, 0.65),
            nic: rng.range(0.05, 0.3),
            requested_cores: rng.range(4.0, 8.0),
            zone: None,
        })
        .collect();
    let mut tm = taskmanager();
    tm["spec"]["affinity"] = json!({"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": HOSTNAME,
            "labelSelector": {"matchLabels": {"app": "noisy"}},
            "namespaceSelector": {"matchLabels": {"tier": "batch"}}
        }]
    }});
    let mut wary = burst(40, 0.0);
    wary.pod = tm;
    let noisy = |i: usize| {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": format!("ingest-{i}"), "namespace": "batch",
                         "uid": format!("noisy-{i}"), "labels": {"app": "noisy"}},
            "spec": {"containers": [{"name": "main", "image": "ingest:1",
                     "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}]}
        })
    };
    let setup = Setup {
        // The third and seventh coolest stay free.
        pods: coolest(&specs, 10)
            .into_iter()
            .enumerate()
            .filter(|(rank, _)| rank % 4 != 2)
            .map(|(i, k)| (k, noisy(i)))
            .collect(),
        namespace_labels: BTreeMap::from([(
            "batch".to_string(),
            BTreeMap::from([("tier".to_string(), "batch".to_string())]),
        )]),
        hard: Some(none_beside_noisy),
        loose: false,
        ..Setup::default()
    };
    check("noisy-neighbour", &specs, &wary, setup);
}
