//! The scheduler model (`crate::scheduler`) reproduces the upstream kube-scheduler test
//! vectors exactly: every vector of every plugin, every expected field.

use std::collections::BTreeMap;

use crate::config::scheduler::{
    BalancedAllocationFormula, ResourceWeight, SchedulerConfig, ScoringStrategy,
    ScoringStrategyType,
};
use crate::scheduler::cycle::PodFacts;
use crate::scheduler::preferred_terms::PreferredTerms;
use crate::scheduler::resources::{CPU, DEFAULT_MEMORY_REQUEST, MEMORY, pod_requests};
use crate::scheduler::scores::*;
use crate::scheduler::{ModelNode, PodRequests, Resources, Scheduler, num_feasible_nodes_to_find};
use k8s_openapi::api::core::v1::{NodeAffinity, Pod, PreferredSchedulingTerm};
use serde::Deserialize;
use serde_json::{Map, Value, json};

#[derive(Debug, Deserialize)]
struct Vector {
    plugin: String,
    description: String,
    input: Value,
    expected: Value,
    source_path: String,
}

fn vectors() -> Vec<Vector> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/scheduler-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("read scheduler vectors");
    serde_json::from_str(&text).expect("scheduler vectors parse")
}

type Outcome = Result<Value, String>;

fn field<'a>(input: &'a Value, key: &str) -> Result<&'a Value, String> {
    input
        .get(key)
        .filter(|v| !v.is_null())
        .ok_or_else(|| format!("input has no {key:?}"))
}

fn parse<T: serde::de::DeserializeOwned>(value: &Value, what: &str) -> Result<T, String> {
    serde_json::from_value(value.clone()).map_err(|e| format!("{what}: {e}"))
}

fn by_name(nodes: &[ModelNode], scores: &[i64]) -> Value {
    let map: Map<String, Value> = nodes
        .iter()
        .zip(scores)
        .map(|(n, s)| (n.name.clone(), json!(s)))
        .collect();
    Value::Object(map)
}

/// A pod with one container per entry, each requesting exactly what the entry says.
fn pod_with_containers(containers: &[BTreeMap<String, String>]) -> Result<Pod, String> {
    let containers: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(i, requests)| json!({"name": format!("c{i}"), "resources": {"requests": requests}}))
        .collect();
    parse(&json!({"spec": {"containers": containers}}), "pod")
}

// ---- NodeAffinity ----

fn node_affinity(input: &Value, key: &str) -> Outcome {
    let terms: Option<Vec<PreferredSchedulingTerm>> = match input.get("pod_preferred_terms") {
        None | Some(Value::Null) => None,
        Some(t) => Some(parse(t, "pod_preferred_terms")?),
    };
    let added: Option<NodeAffinity> = match input.get("added_affinity") {
        None | Some(Value::Null) => None,
        Some(a) => Some(parse(a, "added_affinity")?),
    };
    let pod: Pod = parse(
        &json!({"spec": {"containers": [],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}}}),
        "pod",
    )?;
    // `scored_nodes`: bare names of the nodes that survived filtering (no labels needed).
    let nodes: Vec<ModelNode> = if let Some(names) = input.get("scored_nodes") {
        parse::<Vec<String>>(names, "scored_nodes")?
            .iter()
            .map(|n| ModelNode::new(n, BTreeMap::new(), Resources::default()))
            .collect()
    } else {
        #[derive(Deserialize)]
        struct NodeIn {
            name: String,
            #[serde(default)]
            labels: BTreeMap<String, String>,
        }
        parse::<Vec<NodeIn>>(field(input, "nodes")?, "nodes")?
            .into_iter()
            .map(|n| ModelNode::new(&n.name, n.labels, Resources::default()))
            .collect()
    };
    // Score as upstream does when it is called (whether or not PreScore would skip).
    let pod_terms = PodFacts::of(&pod).preferred_terms;
    let added_terms = added
        .as_ref()
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();
    let (added_scores, pod_scores) = (
        PreferredTerms::new(added_terms),
        PreferredTerms::new(pod_terms),
    );
    let raw: Vec<i64> = nodes
        .iter()
        .map(|n| added_scores.score(n) + pod_scores.score(n))
        .collect();
    let mut normalized = raw.clone();
    default_normalize_score(MAX_NODE_SCORE, false, &mut normalized);
    match key {
        // PreScore skips when neither the pod nor the profile's addedAffinity prefers anything.
        "prescore_status" => Ok(if pod_terms.is_empty() && added.is_none() {
            json!("Skip")
        } else {
            json!("Success")
        }),
        "raw_scores" => Ok(by_name(&nodes, &raw)),
        "normalized_scores" => Ok(by_name(&nodes, &normalized)),
        "weighted_contribution_weight2" => {
            let weighted: Vec<i64> = normalized
                .iter()
                .map(|s| s * SchedulerConfig::default().weights.node_affinity)
                .collect();
            Ok(by_name(&nodes, &weighted))
        }
        other => Err(format!("no model output named {other:?}")),
    }
}

// ---- NodeResourcesFit / LeastAllocated ----

fn least_allocated_vector(input: &Value, key: &str) -> Outcome {
    if key != "scores" {
        return Err(format!("no model output named {key:?}"));
    }
    #[derive(Deserialize)]
    struct Weight {
        name: String,
        weight: i64,
    }
    #[derive(Deserialize)]
    struct Existing {
        node: String,
        containers: Vec<BTreeMap<String, String>>,
    }
    let weights: Vec<Weight> = parse(field(input, "resources")?, "resources")?;
    let strategy = ScoringStrategy {
        kind: ScoringStrategyType::LeastAllocated,
        resources: weights
            .iter()
            .map(|w| ResourceWeight {
                name: w.name.clone(),
                weight: w.weight,
            })
            .collect(),
        ..ScoringStrategy::default()
    };
    let allocatable: BTreeMap<String, BTreeMap<String, String>> =
        parse(field(input, "nodes_allocatable")?, "nodes_allocatable")?;
    let mut nodes: Vec<ModelNode> = allocatable
        .iter()
        .map(|(name, alloc)| {
            let pairs: Vec<(&str, &str)> = alloc
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            ModelNode::new(name, BTreeMap::new(), resources(&pairs))
        })
        .collect();
    for existing in parse::<Vec<Existing>>(field(input, "existing_pods")?, "existing_pods")? {
        let pod = pod_with_containers(&existing.containers)?;
        nodes
            .iter_mut()
            .find(|n| n.name == existing.node)
            .ok_or_else(|| format!("existing pod on unknown node {}", existing.node))?
            .add_pod(&PodRequests::of(&pod));
    }
    let incoming: Vec<BTreeMap<String, String>> = parse(
        field(input, "incoming_pod_containers")?,
        "incoming_pod_containers",
    )?;
    let pod = PodRequests::of(&pod_with_containers(&incoming)?);
    let scores: Vec<i64> = nodes
        .iter()
        .map(|n| resources_fit_score(&pod, n, &strategy))
        .collect();
    Ok(by_name(&nodes, &scores))
}

// ---- NodeResourcesBalancedAllocation ----

/// `{"milliCPU": 3000, "memory": 5000, "nvidia.com/gpu": 1}` as Kubernetes quantities.
fn quantities(amounts: &BTreeMap<String, i64>) -> BTreeMap<String, String> {
    amounts
        .iter()
        .map(|(name, value)| match name.as_str() {
            "milliCPU" => (CPU.to_string(), format!("{value}m")),
            _ => (name.clone(), value.to_string()),
        })
        .collect()
}

fn balanced_vector(input: &Value, key: &str) -> Outcome {
    // The v1.36 formula vectors carry bare arrays instead of pods and nodes.
    if input.get("requested_with_pod").is_some() {
        if key != "score" {
            return Err(format!("no model output named {key:?}"));
        }
        let with: Vec<i64> = parse(field(input, "requested_with_pod")?, "requested_with_pod")?;
        let without: Vec<i64> = parse(
            field(input, "requested_without_pod")?,
            "requested_without_pod",
        )?;
        let allocatable: Vec<i64> = parse(field(input, "allocatable")?, "allocatable")?;
        return Ok(json!(balanced_score_change(&with, &without, &allocatable)));
    }
    let names: Vec<String> = match input.get("resources") {
        Some(r) => parse(r, "resources")?,
        None => SchedulerConfig::default().balanced_resources,
    };
    let request: BTreeMap<String, i64> = parse(
        field(input, "incoming_pod_request")?,
        "incoming_pod_request",
    )?;
    let pod = PodRequests::of(&pod_with_containers(&[quantities(&request)])?);
    match key {
        "prescore_status" => Ok(if balanced_allocation_skips(&pod, &names) {
            json!("Skip")
        } else {
            json!("Success")
        }),
        "scores" => {
            if balanced_allocation_skips(&pod, &names) {
                return Err("PreScore skips this pod, yet scores are expected".into());
            }
            let allocatable: BTreeMap<String, BTreeMap<String, i64>> =
                parse(field(input, "nodes_allocatable")?, "nodes_allocatable")?;
            let existing: BTreeMap<String, BTreeMap<String, i64>> = parse(
                field(input, "existing_requests_per_node")?,
                "existing_requests_per_node",
            )?;
            let mut nodes = Vec::new();
            for (name, alloc) in &allocatable {
                let alloc = quantities(alloc);
                let pairs: Vec<(&str, &str)> = alloc
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let mut node = ModelNode::new(name, BTreeMap::new(), resources(&pairs));
                if let Some(requests) = existing.get(name) {
                    node.add_pod(&PodRequests::of(&pod_with_containers(&[quantities(
                        requests,
                    )])?));
                }
                nodes.push(node);
            }
            let scores: Vec<i64> = nodes
                .iter()
                // These vectors are v1.35's (before kubernetes#135573).
                .map(|n| balanced_allocation(&pod, n, &names, BalancedAllocationFormula::WithPod))
                .collect();
            Ok(by_name(&nodes, &scores))
        }
        other => Err(format!("no model output named {other:?}")),
    }
}

// ---- helpers ----

fn normalize_vector(input: &Value, key: &str) -> Outcome {
    if key != "scores" {
        return Err(format!("no model output named {key:?}"));
    }
    let max: i64 = parse(field(input, "maxPriority")?, "maxPriority")?;
    let reverse: bool = parse(field(input, "reverse")?, "reverse")?;
    let mut scores: Vec<i64> = parse(field(input, "scores")?, "scores")?;
    default_normalize_score(max, reverse, &mut scores);
    Ok(json!(scores))
}

fn feasible_vector(input: &Value, key: &str) -> Outcome {
    if key != "numFeasibleNodesToFind" {
        return Err(format!("no model output named {key:?}"));
    }
    let all: i64 = parse(field(input, "numAllNodes")?, "numAllNodes")?;
    let percentage: i64 = parse(field(input, "percentageOfNodesToScore")?, "percentage")?;
    Ok(json!(num_feasible_nodes_to_find(percentage, all)))
}

#[test]
fn model_reproduces_every_scheduler_vector() {
    let vectors = vectors();
    assert!(
        vectors.len() >= 40,
        "fixture looks truncated: {} vectors",
        vectors.len()
    );
    let mut failures = Vec::new();
    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &vectors {
        let run: fn(&Value, &str) -> Outcome = match v.plugin.as_str() {
            "NodeAffinity" => node_affinity,
            "NodeResourcesFit/LeastAllocated" => least_allocated_vector,
            "NodeResourcesBalancedAllocation" => balanced_vector,
            "helper.DefaultNormalizeScore" => normalize_vector,
            "scheduler.numFeasibleNodesToFind" => feasible_vector,
            other => {
                failures.push(format!("{other} | {}: plugin not modelled", v.description));
                continue;
            }
        };
        let Some(expected) = v.expected.as_object().filter(|e| !e.is_empty()) else {
            failures.push(format!("{} | {}: no expectations", v.plugin, v.description));
            continue;
        };
        // Every expected field is computed and compared: nothing is skipped.
        for (key, want) in expected {
            match run(&v.input, key) {
                Ok(got) if &got == want => {}
                Ok(got) => failures.push(format!(
                    "{} | {} [{}]: {key}: model {got} != expected {want}",
                    v.plugin, v.description, v.source_path
                )),
                Err(e) => failures.push(format!("{} | {}: {key}: {e}", v.plugin, v.description)),
            }
        }
        *checked.entry(v.plugin.as_str()).or_default() += 1;
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(checked.values().sum::<usize>(), vectors.len());
    println!("vectors reproduced per plugin: {checked:?}");
}

/// What the webhook writes (tiers of `matchFields metadata.name In`, plus one `NotIn` term for
/// hot nodes) scored end to end: a single-node node-affinity winner gets the full 200 points.
#[test]
fn webhook_shaped_terms_score_as_scheduler_md_says() {
    let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [], "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}},
            {"weight": 40, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}},
            {"weight": 20, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": ["hot1"]},
                {"key": "metadata.name", "operator": "NotIn", "values": ["hot2"]}]}},
            {"weight": 7, "preference": {}}
        ]}}}}))
    .expect("pod");
    let nodes: Vec<ModelNode> = ["a", "b", "c", "hot1", "hot2"]
        .iter()
        .map(|n| ModelNode::new(n, BTreeMap::new(), Resources::default()))
        .collect();
    let all: Vec<usize> = (0..nodes.len()).collect();
    let affinity: Vec<i64> = crate::scheduler::score_with(
        &PodFacts::of(&pod),
        &nodes,
        &all,
        &SchedulerConfig::default(),
        None,
    )
    .iter()
    .map(|s| s.node_affinity)
    .collect();
    // raw 120/60/20/0/0 (the empty term counts nothing) -> 100/50/16/0/0 -> x2.
    assert_eq!(affinity, vec![200, 100, 32, 0, 0]);
}

fn resources(pairs: &[(&str, &str)]) -> Resources {
    Resources::parse(pairs).expect("valid quantities")
}

#[test]
fn filters_and_random_tie_break() {
    let alloc = resources(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]);
    let mut full = ModelNode::new("a-full", BTreeMap::new(), alloc.clone());
    let big: Pod = serde_json::from_value(json!({"spec": {"containers": [
        {"name": "x", "resources": {"requests": {"cpu": "3500m", "memory": "1Gi"}}}]}}))
    .expect("pod");
    full.add_pod(&PodRequests::of(&big));
    let nodes = vec![
        full,
        ModelNode::new("c-empty", BTreeMap::new(), alloc.clone()),
        ModelNode::new("b-empty", BTreeMap::new(), alloc),
    ];
    let one_cpu: Pod = serde_json::from_value(json!({"spec": {"containers": [
        {"name": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}))
    .expect("pod");
    // a-full has 500m left: filtered out; the two empty nodes tie and either may win.
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..32 {
        let mut scheduler = Scheduler::new(SchedulerConfig::default(), seed);
        let cycle = scheduler.schedule(&PodFacts::of(&one_cpu), &nodes);
        assert_eq!(cycle.sample, vec![1, 2]);
        seen.insert(cycle.node.expect("a node fits"));
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![1, 2]);
    let mut scheduler = Scheduler::new(SchedulerConfig::default(), 1);
    assert_eq!(
        scheduler.schedule(&PodFacts::of(&big), &nodes[..1]).node,
        None
    );
}

#[test]
fn sampling_rotates_its_start() {
    let alloc = resources(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]);
    let nodes: Vec<ModelNode> = (0..1000)
        .map(|i| ModelNode::new(&format!("n{i:04}"), BTreeMap::new(), alloc.clone()))
        .collect();
    let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [
        {"name": "x", "resources": {"requests": {"cpu": "1"}}}]}}))
    .expect("pod");
    let mut scheduler = Scheduler::new(SchedulerConfig::default(), 7);
    let first = scheduler.schedule(&PodFacts::of(&pod), &nodes);
    assert_eq!(first.sample.len(), 420);
    assert_eq!(first.sample[0], 0);
    let second = scheduler.schedule(&PodFacts::of(&pod), &nodes);
    assert_eq!(
        second.sample[0], 420,
        "the next search starts where the last one stopped"
    );
    let third = scheduler.schedule(&PodFacts::of(&pod), &nodes);
    assert_eq!(third.sample[0], 840);
    assert_eq!(third.sample[419], (840 + 419) % 1000, "wraps around");
}

#[test]
fn taints_cordons_and_strategies() {
    use crate::scheduler::{Taint, Unfit, cycle::filter};
    let alloc = resources(&[("cpu", "10"), ("memory", "10Gi"), ("pods", "110")]);
    let mut node = ModelNode::new("n", BTreeMap::new(), alloc);
    let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [
        {"name": "x", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "flink", "effect": "NoSchedule"}]}}))
    .expect("pod");
    let facts = PodFacts::of(&pod);
    assert_eq!(filter(&facts, &node), Ok(()));
    node.taints.push(Taint {
        key: "dedicated".into(),
        value: Some("flink".into()),
        effect: "NoSchedule".into(),
    });
    assert_eq!(filter(&facts, &node), Ok(()), "tolerated");
    node.taints.push(Taint {
        key: "gpu".into(),
        value: None,
        effect: "NoExecute".into(),
    });
    assert_eq!(filter(&facts, &node), Err(Unfit::Taint));
    node.taints.clear();
    node.unschedulable = true;
    assert_eq!(filter(&facts, &node), Err(Unfit::Unschedulable));
    node.unschedulable = false;
    // 2 of 10 cores and 1 of 10 GiB requested with the pod.
    let requests = &facts.requests;
    let most = ScoringStrategy {
        kind: ScoringStrategyType::MostAllocated,
        ..ScoringStrategy::default()
    };
    assert_eq!(resources_fit_score(requests, &node, &most), (20 + 10) / 2);
    let least = ScoringStrategy::default();
    assert_eq!(resources_fit_score(requests, &node, &least), (80 + 90) / 2);
    // Default shape 0 -> 10, 100 -> 0, scaled x10: utilization 20 -> 80, 10 -> 90, rounded mean.
    let ratio = ScoringStrategy {
        kind: ScoringStrategyType::RequestedToCapacityRatio,
        ..ScoringStrategy::default()
    };
    assert_eq!(resources_fit_score(requests, &node, &ratio), 85);
    // PreferNoSchedule only scores: the untolerated node loses its 300 points.
    let mut soft = node.clone();
    soft.name = "soft".into();
    soft.taints.push(Taint {
        key: "spot".into(),
        value: None,
        effect: "PreferNoSchedule".into(),
    });
    assert_eq!(filter(&facts, &soft), Ok(()));
    let nodes = vec![node, soft];
    let scores =
        crate::scheduler::score_with(&facts, &nodes, &[0, 1], &SchedulerConfig::default(), None);
    assert_eq!(scores[0].taint_toleration, 300);
    assert_eq!(scores[1].taint_toleration, 0);
}

#[test]
fn pod_requests_count_sidecars_init_and_defaults() {
    let pod: Pod = serde_json::from_value(json!({"spec": {
    "initContainers": [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}
    ],
    "containers": [
        {"name": "main", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}},
        {"name": "bare"}
    ],
    "overhead": {"cpu": "250m"}}}))
    .expect("pod");
    let written = pod_requests(&pod, false);
    // containers 2 + sidecar 0.1 = 2.1 cpu; init phase 3 + 0.1 = 3.1 wins; overhead 0.25 on top.
    assert_eq!(written.get(CPU), 3350);
    assert_eq!(written.get(MEMORY), 4 << 30);
    let non_zero = pod_requests(&pod, true);
    // "bare" gets 100m / 200MiB, so does the sidecar's missing memory.
    assert_eq!(non_zero.get(CPU), 3350);
    assert_eq!(non_zero.get(MEMORY), (4 << 30) + 2 * DEFAULT_MEMORY_REQUEST);
}
