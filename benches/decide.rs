//! decide + patch per review at 50 / 500 / 5,000 nodes, and the whole review (parse → answer).

use placement_webhook::inflight::shared::SharedWorld;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use placement_webhook::admission::Admission;
use placement_webhook::config::{Config, NodeMatch};
use placement_webhook::inflight::ledger::{Ledger, PodLoad};
use placement_webhook::inflight::world::World;
use placement_webhook::patch::{self, Changes};
use placement_webhook::placement::{self, DecisionCtx, PodConstraints, PodDemand, RankIndexes};
use placement_webhook::scheduler::PodFacts;
use placement_webhook::snapshot::{LoadSnapshot, NodeLoad, Taint};
use placement_webhook::view::{ClusterView, ViewStore};
use serde_json::Value;

// The server's allocator: allocation-heavy paths cost here what they cost there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const REVIEW: &str = include_str!("../examples/taskmanager-review.json");

/// `config` with a `matchFields` term per node instead of hostname-label terms.
fn by_name(mut config: Config) -> Config {
    config.placement.node_match = NodeMatch::Name;
    config
}

/// A cluster with realistic variety: a spread of loads, some hot, some tainted or cordoned.
fn cluster(n: usize) -> LoadSnapshot {
    // A fixed LCG keeps runs comparable without a dependency.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as f64 / (1u64 << 31) as f64
    };
    let nodes = (0..n)
        .map(|i| {
            let name = format!("worker-{i:05}");
            let mut node = NodeLoad::new(&name, (next() * 0.95).min(1.0));
            node.network_bytes_per_second = Some(next() * 1.2e9);
            node.network_capacity_bytes_per_second = Some(1.25e9);
            node.cpu_capacity_cores = Some(32.0);
            Arc::make_mut(&mut node.labels).insert("kubernetes.io/hostname".into(), name.clone());
            Arc::make_mut(&mut node.labels).insert("node-pool".into(), "flink".into());
            if i % 17 == 0 {
                node.taints.push(Taint {
                    key: "dedicated".into(),
                    value: Some("gpu".into()),
                    effect: "NoSchedule".into(),
                });
            }
            node.unschedulable = i % 29 == 0;
            node
        })
        .collect();
    LoadSnapshot {
        window_samples: Default::default(),
        taken_at: None,
        pods: Vec::new(),
        nodes,
    }
}

/// The example TaskManager as placement sees it: 2 cores, no network estimate.
fn demand<'a>(pod: &'a Pod, config: &Config) -> PodDemand<'a> {
    PodDemand {
        constraints: PodConstraints::of(pod, &config.placement.pinning),
        facts: PodFacts::of(pod),
        load: PodLoad {
            cpu_cores: 2.0,
            network_bytes_per_second: 0.0,
        },
        source: Default::default(),
    }
}

fn decide(
    demand: &PodDemand<'_>,
    view: &ClusterView,
    world: &World,
    config: &Config,
) -> placement::Decision {
    placement::decide(
        &DecisionCtx::new(demand, view, world, &config.placement, &config.scheduler),
        7,
    )
}

/// As the server decides: from the pod shape's ranking index, caught up with the ledger.
fn decide_indexed(
    demand: &PodDemand<'_>,
    view: &ClusterView,
    world: &World,
    config: &Config,
    indexes: &RankIndexes,
) -> placement::Decision {
    placement::decide_indexed(
        &DecisionCtx::new(demand, view, world, &config.placement, &config.scheduler),
        7,
        indexes,
    )
}

fn patch_for(decision: &placement::Decision, pod: &Pod, config: &Config) -> patch::JsonPatch {
    let changes = Changes {
        preferred: patch::Preferred::Json(patch::preferred_json(
            decision,
            &config.placement.node_match,
        )),
        required: &decision.pinning,
        scheduler_name: None,
        annotations: vec![("placement-webhook.io/decision", String::from("x"))],
    };
    patch::build(pod, &changes).expect("patch")
}

/// A burst in progress at 5,000 nodes, one review after another as a new-uid load test sends
/// them: decide, charge where the decision predicts, build the patch. Walking every node each
/// time against the ranking index caught up with the ~50 nodes each charge changed.
fn bench_steady_burst(c: &mut Criterion) {
    let config = Config::default();
    let review: Value = serde_json::from_str(REVIEW).expect("example review");
    let pod: Pod = serde_json::from_value(review["request"]["object"].clone()).expect("pod");
    let d = demand(&pod, &config);
    let view = ClusterView::build(&cluster(5000), None, &config.placement);
    let mut group = c.benchmark_group("burst_decide_charge_patch_5000_nodes");
    for indexed in [false, true] {
        let mut world = World::new(Ledger::new(Duration::from_secs(90)));
        world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
        let indexes = RankIndexes::default();
        let mut steered = 0u64;
        let name = if indexed { "indexed" } else { "walk" };
        group.bench_function(name, |b| {
            b.iter(|| {
                let decision = if indexed {
                    decide_indexed(&d, &view, &world, &config, &indexes)
                } else {
                    decide(&d, &view, &world, &config)
                };
                world.charges.charge(
                    &format!("p{steered}"),
                    &decision.landing,
                    d.load,
                    &d.facts.requests,
                    Instant::now(),
                );
                steered += 1;
                black_box(patch_for(&decision, &pod, &config))
            })
        });
    }
    group.finish();
}

fn bench_decide_and_patch(c: &mut Criterion) {
    let config = Config::default();
    let review: Value = serde_json::from_str(REVIEW).expect("example review");
    let pod: Pod = serde_json::from_value(review["request"]["object"].clone()).expect("pod");
    let mut group = c.benchmark_group("decide_and_patch");
    for n in [50, 500, 5000] {
        let view = ClusterView::build(&cluster(n), None, &config.placement);
        // A burst in progress: 100 pods in flight on the coolest nodes.
        let mut world = World::new(Ledger::new(Duration::from_secs(90)));
        for i in 0..100 {
            let node = view.nodes[i % view.nodes.len().min(30)].name.clone();
            let d = demand(&pod, &config);
            world.charges.charge(
                &format!("p{i}"),
                &[(node, 1.0)],
                d.load,
                &d.facts.requests,
                Instant::now(),
            );
        }
        // As the server does: the ledger numbered by view position.
        world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let decision = decide(&demand(&pod, &config), &view, &world, &config);
                let changes = Changes {
                    preferred: patch::Preferred::Json(patch::preferred_json(
                        &decision,
                        &config.placement.node_match,
                    )),
                    required: &decision.pinning,
                    scheduler_name: None,
                    annotations: vec![("placement-webhook.io/decision", String::from("x"))],
                };
                black_box(patch::build(&pod, &changes).expect("patch"))
            })
        });
    }
    group.finish();
}

fn bench_whole_review(c: &mut Criterion) {
    let mut group = c.benchmark_group("review_bytes");
    // The default names nodes by their hostname label; "by_name" writes a matchFields term
    // per node, as before the default changed.
    for (id, n, config) in [
        ("50", 50, Config::default()),
        ("5000", 5000, Config::default()),
        ("5000_by_name", 5000, by_name(Config::default())),
    ] {
        let config = Arc::new(config);
        let store = Arc::new(ViewStore::new(config.placement.clone()));
        store.publish_snapshot(cluster(n));
        // A dry run keeps the ledger from growing across iterations.
        let mut review: Value = serde_json::from_str(REVIEW).expect("example review");
        review["request"]["dryRun"] = Value::Bool(true);
        let body = serde_json::to_vec(&review).expect("json");
        let admission = Admission::new(
            config.clone(),
            store,
            Arc::new(SharedWorld::new(World::new(Ledger::new(
                config.inflight.ttl,
            )))),
        );
        group.bench_with_input(BenchmarkId::from_parameter(id), &n, |b, _| {
            b.iter(|| {
                let answer = admission.review_bytes(black_box(&body)).expect("answer");
                black_box(serde_json::to_vec(&answer.review).expect("json"))
            })
        });
    }
    group.finish();
}

/// decide + patch at 5,000 nodes after a burst of `pods` steered pods, charged as the server
/// charges them (where each decision predicts the pod lands): the ledger the next pod of a large burst sees.
fn bench_after_burst(c: &mut Criterion) {
    let config = Config::default();
    let review: Value = serde_json::from_str(REVIEW).expect("example review");
    let pod: Pod = serde_json::from_value(review["request"]["object"].clone()).expect("pod");
    let d = demand(&pod, &config);
    let view = ClusterView::build(&cluster(5000), None, &config.placement);
    let mut group = c.benchmark_group("decide_and_patch_after_burst_5000_nodes");
    let mut world = World::new(Ledger::new(Duration::from_secs(90)));
    world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
    let mut steered = 0;
    // 0: the idle ledger, the reference for what a full one may cost (issue: within 1.2x).
    for pods in [0, 100, 1000, 5000] {
        while steered < pods {
            let decision = decide(&d, &view, &world, &config);
            world.charges.charge(
                &format!("p{steered}"),
                &decision.landing,
                d.load,
                &d.facts.requests,
                Instant::now(),
            );
            steered += 1;
        }
        group.bench_with_input(BenchmarkId::new("walk", pods), &pods, |b, _| {
            b.iter(|| {
                black_box(patch_for(
                    &decide(&d, &view, &world, &config),
                    &pod,
                    &config,
                ))
            })
        });
        let indexes = RankIndexes::default();
        group.bench_with_input(BenchmarkId::new("indexed", pods), &pods, |b, _| {
            b.iter(|| {
                let decision = decide_indexed(&d, &view, &world, &config, &indexes);
                black_box(patch_for(&decision, &pod, &config))
            })
        });
    }
    group.finish();
}

/// Where a review's time goes at 5,000 nodes (idle ledger, the server's indexed decision):
/// the decision, its terms as k8s types, the patch as JSON values, the patch as bytes.
fn bench_parts(c: &mut Criterion) {
    let config = Config::default();
    let review: Value = serde_json::from_str(REVIEW).expect("example review");
    let pod: Pod = serde_json::from_value(review["request"]["object"].clone()).expect("pod");
    let d = demand(&pod, &config);
    let view = ClusterView::build(&cluster(5000), None, &config.placement);
    let mut world = World::new(Ledger::new(Duration::from_secs(90)));
    world.align(view.id, view.nodes.iter().map(|n| n.name.as_str()));
    let indexes = RankIndexes::default();
    let decision = decide_indexed(&d, &view, &world, &config, &indexes);
    let patch = patch_for(&decision, &pod, &config);
    let mut group = c.benchmark_group("parts_5000_nodes");
    group.bench_function("decide_indexed", |b| {
        b.iter(|| black_box(decide_indexed(&d, &view, &world, &config, &indexes)))
    });
    group.bench_function("preferred_terms", |b| {
        b.iter(|| {
            black_box(patch::preferred_terms(
                &decision,
                &config.placement.node_match,
            ))
        })
    });
    group.bench_function("patch_build", |b| {
        b.iter(|| black_box(patch_for(&decision, &pod, &config)))
    });
    group.bench_function("patch_to_bytes", |b| {
        b.iter(|| black_box(patch.to_bytes().expect("json")))
    });
    let named = by_name(Config::default());
    group.bench_function("patch_build_by_name", |b| {
        b.iter(|| black_box(patch_for(&decision, &pod, &named)))
    });
    group.finish();
}

/// `cluster(n)` with room for every pod: 100,000 cores each, so no number of charges fills a
/// node and every review stays a full decision (the steady state of a busy webhook).
fn roomy_cluster(n: usize) -> LoadSnapshot {
    let mut snapshot = cluster(n);
    for node in &mut snapshot.nodes {
        node.cpu_capacity_cores = Some(100_000.0);
        for (resource, amount) in [
            ("cpu", "100000"),
            ("memory", "100000Gi"),
            ("pods", "1000000"),
        ] {
            node.allocatable.insert(resource.into(), amount.into());
        }
    }
    snapshot
}

/// What a busy webhook does per review: a new uid (the ledger charged every time) with the
/// ledger at `inflight.max_entries`, on a cluster with room, parse to response bytes; under
/// the default sampling (10% of 5,000 nodes from a rotating start: a decision names the nodes
/// that cover its runs) and with the exact profile (`percentage_of_nodes_to_score: 100`).
/// Beside them, the minimal webhook's handler (`examples/minimal_webhook.rs`: the review read
/// into a `DynamicObject`, one label patched) on the same body, the in-process part of the
/// load test's baseline.
fn bench_steady_review(c: &mut Criterion) {
    let mut group = c.benchmark_group("steady_review_5000_nodes");
    for (name, percentage) in [("webhook", 0), ("webhook_exact_profile", 100)] {
        let mut config = Config::default();
        config.scheduler.percentage_of_nodes_to_score = percentage;
        let (admission, mut next_review) = steady_admission(config);
        group.bench_function(name, |b| {
            b.iter_batched(
                &mut next_review,
                |body| {
                    let answer = admission.review_bytes(black_box(&body)).expect("answer");
                    black_box(serde_json::to_vec(&answer.review).expect("json"))
                },
                criterion::BatchSize::SmallInput,
            )
        });
    }
    let body = REVIEW.as_bytes().to_vec();
    group.bench_function("minimal_baseline", |b| {
        b.iter(|| black_box(minimal_review(black_box(&body))))
    });
    group.finish();
}

/// A webhook on the roomy 5,000-node cluster with its ledger filled to its working size, and
/// the reviews that keep it there (a new uid each: its first 8 hex digits count, the ledger id
/// being the first 16).
fn steady_admission(config: Config) -> (Admission, impl FnMut() -> Vec<u8>) {
    let config = Arc::new(config);
    let store = Arc::new(ViewStore::new(config.placement.clone()));
    store.publish_snapshot(roomy_cluster(5000));
    let admission = Admission::new(
        config.clone(),
        store,
        Arc::new(SharedWorld::new(World::new(Ledger::new(
            config.inflight.ttl,
        )))),
    );
    let at = REVIEW.find("3f2a9c01-").expect("the example's uid");
    let mut counter = 0u32;
    let mut next_review = move || {
        counter += 1;
        let mut body = REVIEW.as_bytes().to_vec();
        body[at..at + 8].copy_from_slice(format!("{counter:08x}").as_bytes());
        body
    };
    for _ in 0..config.inflight.max_entries {
        let body = next_review();
        admission.review_bytes(&body).expect("answer");
    }
    (admission, next_review)
}

/// `examples/minimal_webhook.rs`'s handler without the server: parse, one label, serialize.
fn minimal_review(body: &[u8]) -> Vec<u8> {
    use json_patch_v4 as json_patch;
    use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
    use kube::core::{DynamicObject, Resource};
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).expect("review");
    let req: AdmissionRequest<DynamicObject> = review.try_into().expect("request");
    let mut res = AdmissionResponse::from(&req);
    if let Some(obj) = req.object {
        let mut patches = Vec::new();
        if obj.meta().labels.is_none() {
            patches.push(json_patch::PatchOperation::Add(json_patch::AddOperation {
                path: json_patch::jsonptr::PointerBuf::from_tokens(["metadata", "labels"]),
                value: serde_json::json!({}),
            }));
        }
        patches.push(json_patch::PatchOperation::Add(json_patch::AddOperation {
            path: json_patch::jsonptr::PointerBuf::from_tokens(["metadata", "labels", "admission"]),
            value: Value::String("modified-by-admission-controller".into()),
        }));
        res = res.with_patch(json_patch::Patch(patches)).expect("patch");
    }
    serde_json::to_vec(&res.into_review()).expect("json")
}

criterion_group!(
    benches,
    bench_steady_review,
    bench_parts,
    bench_decide_and_patch,
    bench_whole_review,
    bench_after_burst,
    bench_steady_burst
);
criterion_main!(benches);
