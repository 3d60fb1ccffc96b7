//! PodTopologySpread and InterPodAffinity in the scheduler model reproduce upstream's unit-test
//! vectors: each case below copies the inputs and the expected filter codes or normalised
//! scores of one upstream test case, cited by path, test function and case name. The upstream
//! tests call one plugin alone (no other filter runs), so these call the plugin's filter or
//! score alone as well; inputs are written with upstream's `st.MakePod()` / `st.MakeNode()`
//! shorthands spelled out.

use std::collections::BTreeMap;

use crate::scheduler::pod_affinity::{AffinityFilter, affinity_scores};
use crate::scheduler::pods::Labels;
use crate::scheduler::topology_spread::{SpreadFilter, spread_scores};
use crate::scheduler::{
    ClusterPods, Code, ExistingPod, ModelNode, PodFacts, Resources, SpreadDefaults, Taint,
};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

const OK: &str = "Success";
const UNSCHED: &str = "Unschedulable";
const UNRESOLVABLE: &str = "UnschedulableAndUnresolvable";

fn code_name(code: Code) -> &'static str {
    match code {
        Code::Unschedulable => UNSCHED,
        Code::UnschedulableAndUnresolvable => UNRESOLVABLE,
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `st.MakeNode().Name(name).Label(..)...`
fn node(name: &str, pairs: &[(&str, &str)]) -> ModelNode {
    ModelNode::new(name, labels(pairs), Resources::default())
}

/// `.Taints(taints)` of the spread tests: `node.kubernetes.io/unschedulable:NoSchedule`.
fn tainted(mut n: ModelNode) -> ModelNode {
    n.taints.push(Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        value: None,
        effect: "NoSchedule".into(),
    });
    n
}

/// A pod in `ns` with `pairs` as labels and `spec` (an object) as its spec.
fn pod(ns: &str, pairs: &[(&str, &str)], spec: Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = json!([]);
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "labels": labels(pairs)},
        "spec": spec}))
    .expect("pod")
}

/// An existing pod on the node named `on` (a node not listed: index past the end, ignored).
fn on(nodes: &[ModelNode], at: &str, ns: &str, pairs: &[(&str, &str)], spec: Value) -> ExistingPod {
    let index = nodes
        .iter()
        .position(|n| n.name == at)
        .unwrap_or(usize::MAX);
    ExistingPod::of(&pod(ns, pairs, spec), index)
}

/// `st.MakePod().Name(..).Node(at).Label(l, "")` in the default namespace.
fn plain(nodes: &[ModelNode], at: &str, pairs: &[(&str, &str)]) -> ExistingPod {
    on(nodes, at, "", pairs, json!({}))
}

fn terminating(mut p: ExistingPod) -> ExistingPod {
    p.terminating = true;
    p
}

// ---- PodTopologySpread ----

/// `st.MakeLabelSelector().Exists(key)`
fn exists(key: &str) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": "Exists"}]})
}

/// `SpreadConstraint(maxSkew, key, action, selector, minDomains, nodeAffinityPolicy,
/// nodeTaintsPolicy, matchLabelKeys)`
#[allow(clippy::too_many_arguments)]
fn tsc(
    max_skew: i32,
    key: &str,
    action: &str,
    selector: Value,
    min_domains: Option<i32>,
    affinity_policy: Option<&str>,
    taints_policy: Option<&str>,
    match_label_keys: &[&str],
) -> Value {
    let mut c = json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": action});
    if !selector.is_null() {
        c["labelSelector"] = selector;
    }
    if let Some(m) = min_domains {
        c["minDomains"] = json!(m);
    }
    if let Some(p) = affinity_policy {
        c["nodeAffinityPolicy"] = json!(p);
    }
    if let Some(p) = taints_policy {
        c["nodeTaintsPolicy"] = json!(p);
    }
    if !match_label_keys.is_empty() {
        c["matchLabelKeys"] = json!(match_label_keys);
    }
    c
}

const DNS: &str = "DoNotSchedule";
const ANY: &str = "ScheduleAnyway";
const HOST: &str = "kubernetes.io/hostname";

/// A hard constraint with only maxSkew, key and selector set.
fn hard(max_skew: i32, key: &str, selector: Value) -> Value {
    tsc(max_skew, key, DNS, selector, None, None, None, &[])
}

fn soft(max_skew: i32, key: &str, selector: Value) -> Value {
    tsc(max_skew, key, ANY, selector, None, None, None, &[])
}

fn spread_pod(pairs: &[(&str, &str)], constraints: Vec<Value>, extra: Value) -> Pod {
    let mut spec = extra;
    spec["topologySpreadConstraints"] = json!(constraints);
    pod("", pairs, spec)
}

/// The filter's code on every node, the plugin configured with `defaultingType: List` and no
/// default constraints, as the upstream filter tests set it up.
fn spread_codes(pod: &Pod, nodes: &[ModelNode], existing: &[ExistingPod]) -> Vec<&'static str> {
    let namespaces = BTreeMap::new();
    let defaults = SpreadDefaults::List(Vec::new());
    let mut cluster = ClusterPods::new(existing, &namespaces);
    cluster.spread_defaults = &defaults;
    let facts = PodFacts::of(pod);
    let Some(filter) = SpreadFilter::new(&facts, nodes, &cluster) else {
        return vec![OK; nodes.len()];
    };
    nodes
        .iter()
        .map(|n| {
            filter
                .check(&facts, n)
                .map_or_else(|u| code_name(u.code()), |()| OK)
        })
        .collect()
}

/// Matching pods per (key, value) after PreFilter (`TpPairToMatchNum`), `None` when skipped.
fn spread_state(
    pod: &Pod,
    nodes: &[ModelNode],
    existing: &[ExistingPod],
) -> Option<BTreeMap<(String, String), i64>> {
    let namespaces = BTreeMap::new();
    let defaults = SpreadDefaults::List(Vec::new());
    let mut cluster = ClusterPods::new(existing, &namespaces);
    cluster.spread_defaults = &defaults;
    SpreadFilter::new(&PodFacts::of(pod), nodes, &cluster).map(|f| f.domain_counts())
}

fn pairs(entries: &[(&str, &str, i64)]) -> BTreeMap<(String, String), i64> {
    entries
        .iter()
        .map(|(k, v, n)| ((k.to_string(), v.to_string()), *n))
        .collect()
}

/// Normalised scores of the first `candidates` nodes (the rest failed filtering), the plugin
/// configured with `defaultingType: System` as upstream's score test sets it up.
fn spread_score(
    pod: &Pod,
    nodes: &[ModelNode],
    candidates: usize,
    existing: &[ExistingPod],
    owners: &[Labels],
) -> Option<Vec<i64>> {
    let namespaces = BTreeMap::new();
    let cluster = ClusterPods::new(existing, &namespaces);
    let mut facts = PodFacts::of(pod);
    facts.owner_selectors = owners;
    let all: Vec<usize> = (0..candidates).collect();
    spread_scores(&facts, nodes, &all, &cluster)
}

/// Four nodes in two zones with a `node` label, as most spread filter cases use.
fn four_nodes() -> Vec<ModelNode> {
    vec![
        node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
        node("node-b", &[("zone", "zone1"), ("node", "node-b")]),
        node("node-x", &[("zone", "zone2"), ("node", "node-x")]),
        node("node-y", &[("zone", "zone2"), ("node", "node-y")]),
    ]
}

/// Existing pods labelled `foo: ""`, `count` on each node named.
fn foo_pods(nodes: &[ModelNode], spread: &[(&str, usize)]) -> Vec<ExistingPod> {
    spread
        .iter()
        .flat_map(|(at, count)| (0..*count).map(move |_| plain(nodes, at, &[("foo", "")])))
        .collect()
}

/// Collects mismatches so that one run reports every case that differs.
#[derive(Default)]
struct Check {
    cases: usize,
    failures: Vec<String>,
}

impl Check {
    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, case: &str, got: T, want: T) {
        self.cases += 1;
        if got != want {
            self.failures
                .push(format!("{case}: model {got:?} != upstream {want:?}"));
        }
    }

    fn done(self, at_least: usize) {
        assert!(
            self.failures.is_empty(),
            "{} of {} cases differ:\n{}",
            self.failures.len(),
            self.cases,
            self.failures.join("\n")
        );
        assert!(self.cases >= at_least, "only {} cases ran", self.cases);
        println!("{} upstream cases reproduced", self.cases);
    }
}

#[test]
fn spread_filter_single_constraint() {
    let mut check = Check::default();
    let nodes = four_nodes();
    let foo = || exists("foo");
    let bar = || exists("bar");

    // pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go TestSingleConstraint "no existing pods"
    let p = spread_pod(&[("foo", "")], vec![hard(1, "zone", foo())], json!({}));
    check.eq(
        "no existing pods",
        spread_codes(&p, &nodes, &[]),
        vec![OK, OK, OK, OK],
    );

    // filtering_test.go TestSingleConstraint "no existing pods, incoming pod doesn't match itself"
    let p = spread_pod(&[("foo", "")], vec![hard(1, "zone", bar())], json!({}));
    check.eq(
        "no existing pods, no self match",
        spread_codes(&p, &nodes, &[]),
        vec![OK; 4],
    );

    // filtering_test.go TestSingleConstraint "existing pods in a different namespace do not count"
    let p = spread_pod(&[("foo", "")], vec![hard(1, "zone", foo())], json!({}));
    let existing = vec![
        on(&nodes, "node-a", "ns1", &[("foo", "")], json!({})),
        on(&nodes, "node-a", "ns2", &[("foo", "")], json!({})),
        plain(&nodes, "node-x", &[("foo", "")]),
        plain(&nodes, "node-y", &[("foo", "")]),
    ];
    check.eq(
        "existing pods in a different namespace do not count",
        spread_codes(&p, &nodes, &existing),
        vec![OK, OK, UNSCHED, UNSCHED],
    );

    // filtering_test.go TestSingleConstraint "existing pods do not match null selector"
    let p = spread_pod(
        &[("foo", "")],
        vec![hard(1, "zone", Value::Null)],
        json!({}),
    );
    let existing = foo_pods(&nodes, &[("node-x", 1), ("node-y", 1)]);
    check.eq(
        "existing pods do not match null selector",
        spread_codes(&p, &nodes, &existing),
        vec![OK; 4],
    );

    // filtering_test.go TestSingleConstraint "pods spread across zones as 3/3, all nodes fit"
    let p = spread_pod(&[("foo", "")], vec![hard(1, "zone", foo())], json!({}));
    let existing = foo_pods(&nodes, &[("node-a", 2), ("node-b", 1), ("node-y", 3)]);
    check.eq(
        "pods spread across zones as 3/3, all nodes fit",
        spread_codes(&p, &nodes, &existing),
        vec![OK; 4],
    );

    // filtering_test.go TestSingleConstraint "pods spread across zones as 1/2 due to absence of label 'zone' on node-b"
    let typo = vec![
        node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
        node("node-b", &[("zon", "zone1"), ("node", "node-b")]),
        node("node-x", &[("zone", "zone2"), ("node", "node-x")]),
        node("node-y", &[("zone", "zone2"), ("node", "node-y")]),
    ];
    let existing = foo_pods(
        &typo,
        &[("node-a", 1), ("node-b", 1), ("node-x", 1), ("node-y", 1)],
    );
    check.eq(
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        spread_codes(&p, &typo, &existing),
        vec![OK, UNRESOLVABLE, UNSCHED, UNSCHED],
    );

    // filtering_test.go TestSingleConstraint "pod cannot be scheduled as all nodes don't have label 'rack'"
    let p_rack = spread_pod(&[("foo", "")], vec![hard(1, "rack", foo())], json!({}));
    let two = vec![
        node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
        node("node-x", &[("zone", "zone2"), ("node", "node-x")]),
    ];
    check.eq(
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        spread_codes(&p_rack, &two, &[]),
        vec![UNRESOLVABLE, UNRESOLVABLE],
    );

    // filtering_test.go TestSingleConstraint "pods spread across nodes as 2/1/0/3, only node-x fits"
    let existing = foo_pods(&nodes, &[("node-a", 2), ("node-b", 1), ("node-y", 3)]);
    let p = spread_pod(&[("foo", "")], vec![hard(1, "node", foo())], json!({}));
    check.eq(
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        spread_codes(&p, &nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, UNSCHED],
    );

    // filtering_test.go TestSingleConstraint "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit"
    let p = spread_pod(&[("foo", "")], vec![hard(2, "node", foo())], json!({}));
    check.eq(
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        spread_codes(&p, &nodes, &existing),
        vec![UNSCHED, OK, OK, UNSCHED],
    );

    // filtering_test.go TestSingleConstraint "pods spread across nodes as 2/1/0/3, but pod doesn't match itself"
    let p = spread_pod(&[("bar", "")], vec![hard(1, "node", foo())], json!({}));
    check.eq(
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        spread_codes(&p, &nodes, &existing),
        vec![UNSCHED, OK, OK, UNSCHED],
    );

    // filtering_test.go TestSingleConstraint "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits"
    let affinity_in = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}]}}}});
    let p = spread_pod(&[("foo", "")], vec![hard(1, "node", foo())], affinity_in);
    check.eq(
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        spread_codes(&p, &nodes, &existing),
        vec![OK, OK, OK, UNSCHED],
    );

    // filtering_test.go TestSingleConstraint "terminating Pods should be excluded"
    let ab = vec![
        node("node-a", &[("node", "node-a")]),
        node("node-b", &[("node", "node-b")]),
    ];
    let existing = vec![
        terminating(plain(&ab, "node-a", &[("foo", "")])),
        plain(&ab, "node-b", &[("foo", "")]),
    ];
    let p = spread_pod(&[("foo", "")], vec![hard(1, "node", foo())], json!({}));
    check.eq(
        "terminating Pods should be excluded",
        spread_codes(&p, &ab, &existing),
        vec![OK, UNSCHED],
    );

    // filtering_test.go TestSingleConstraint "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits"
    let affinity_not_in = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node", "operator": "NotIn", "values": ["node-b"]}]}]}}}});
    let p = spread_pod(
        &[("foo", "")],
        vec![hard(1, "zone", foo())],
        affinity_not_in,
    );
    let existing = foo_pods(&nodes, &[("node-b", 2), ("node-y", 1)]);
    check.eq(
        "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        spread_codes(&p, &nodes, &existing),
        vec![OK, OK, UNSCHED, UNSCHED],
    );

    // filtering_test.go TestSingleConstraint "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits"
    let abc = vec![
        node("node-a", &[("node", "node-a")]),
        node("node-b", &[("node", "node-b")]),
        node("node-c", &[("node", "node-c")]),
    ];
    let existing = foo_pods(&abc, &[("node-a", 2), ("node-b", 2), ("node-c", 1)]);
    let min_domains = |m| tsc(2, "node", DNS, exists("foo"), Some(m), None, None, &[]);
    let p = spread_pod(&[("foo", "")], vec![min_domains(4)], json!({}));
    check.eq(
        "2/2/1, maxSkew 2, domains < minDomains, the third node fits",
        spread_codes(&p, &abc, &existing),
        vec![UNSCHED, UNSCHED, OK],
    );

    // filtering_test.go TestSingleConstraint "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit"
    let p = spread_pod(&[("foo", "")], vec![min_domains(2)], json!({}));
    check.eq(
        "2/2/1, maxSkew 2, domains > minDomains, all nodes fit",
        spread_codes(&p, &abc, &existing),
        vec![OK, OK, OK],
    );

    // filtering_test.go TestSingleConstraint "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit"
    let existing = foo_pods(&nodes, &[("node-a", 1), ("node-b", 1), ("node-y", 1)]);
    let zone_min = |m| tsc(2, "zone", DNS, exists("foo"), Some(m), None, None, &[]);
    let p = spread_pod(&[("foo", "")], vec![zone_min(3)], json!({}));
    check.eq(
        "zone 2/1, maxSkew 2, domains < minDomains, third and fourth fit",
        spread_codes(&p, &nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, OK],
    );

    // filtering_test.go TestSingleConstraint "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit"
    let p = spread_pod(&[("foo", "")], vec![zone_min(1)], json!({}));
    check.eq(
        "zone 2/1, maxSkew 2, domains > minDomains, all fit",
        spread_codes(&p, &nodes, &existing),
        vec![OK; 4],
    );

    // The node-inclusion cases share nodes and pods: 1/1/0/1 over node-a, node-b, node-x, node-y.
    let foo_nodes = vec![
        node("node-a", &[("node", "node-a"), ("foo", "")]),
        node("node-b", &[("node", "node-b"), ("foo", "")]),
        node("node-x", &[("node", "node-x"), ("foo", "")]),
        node("node-y", &[("node", "node-y")]),
    ];
    let existing = foo_pods(&foo_nodes, &[("node-a", 1), ("node-b", 1), ("node-y", 1)]);
    let selector = json!({"nodeSelector": {"foo": ""}});
    let node_affinity = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "foo", "operator": "In", "values": [""]}]}]}}}});
    let ignore_affinity = tsc(
        1,
        "node",
        DNS,
        exists("foo"),
        None,
        Some("Ignore"),
        None,
        &[],
    );

    // filtering_test.go TestSingleConstraint "NodeAffinityPolicy honored with labelSelectors"
    let p = spread_pod(
        &[("foo", "")],
        vec![hard(1, "node", foo())],
        selector.clone(),
    );
    check.eq(
        "NodeAffinityPolicy honored with labelSelectors",
        spread_codes(&p, &foo_nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, OK],
    );
    // filtering_test.go TestSingleConstraint "NodeAffinityPolicy ignored with labelSelectors"
    let p = spread_pod(&[("foo", "")], vec![ignore_affinity.clone()], selector);
    check.eq(
        "NodeAffinityPolicy ignored with labelSelectors",
        spread_codes(&p, &foo_nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, UNSCHED],
    );
    // filtering_test.go TestSingleConstraint "NodeAffinityPolicy honored with nodeAffinity"
    let p = spread_pod(
        &[("foo", "")],
        vec![hard(1, "node", foo())],
        node_affinity.clone(),
    );
    check.eq(
        "NodeAffinityPolicy honored with nodeAffinity",
        spread_codes(&p, &foo_nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, OK],
    );
    // filtering_test.go TestSingleConstraint "NodeAffinityPolicy ignored with labelSelectors"
    // (the second case of that name, with nodeAffinity)
    let p = spread_pod(&[("foo", "")], vec![ignore_affinity], node_affinity);
    check.eq(
        "NodeAffinityPolicy ignored with nodeAffinity",
        spread_codes(&p, &foo_nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, UNSCHED],
    );

    let taint_nodes = vec![
        node("node-a", &[("node", "node-a"), ("foo", "")]),
        node("node-b", &[("node", "node-b"), ("foo", "")]),
        node("node-x", &[("node", "node-x"), ("foo", "")]),
        tainted(node("node-y", &[("node", "node-y")])),
    ];
    let existing = foo_pods(&taint_nodes, &[("node-a", 1), ("node-b", 1), ("node-y", 1)]);
    // filtering_test.go TestSingleConstraint "NodeTaintsPolicy honored"
    let honor_taints = tsc(
        1,
        "node",
        DNS,
        exists("foo"),
        None,
        None,
        Some("Honor"),
        &[],
    );
    let p = spread_pod(&[("foo", "")], vec![honor_taints], json!({}));
    check.eq(
        "NodeTaintsPolicy honored",
        spread_codes(&p, &taint_nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, OK],
    );
    // filtering_test.go TestSingleConstraint "NodeTaintsPolicy ignored"
    let p = spread_pod(&[("foo", "")], vec![hard(1, "node", foo())], json!({}));
    check.eq(
        "NodeTaintsPolicy ignored",
        spread_codes(&p, &taint_nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, UNSCHED],
    );

    check.done(23);
}

#[test]
fn spread_filter_multiple_constraints() {
    let mut check = Check::default();
    let nodes = four_nodes();
    let foo = || exists("foo");
    let bar = || exists("bar");
    let zone_node = |p: &[(&str, &str)]| {
        spread_pod(
            p,
            vec![hard(1, "zone", foo()), hard(1, "node", foo())],
            json!({}),
        )
    };
    let foo_bar = || vec![hard(1, "zone", foo()), hard(1, "node", bar())];

    // pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go TestMultipleConstraints "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]"
    let existing = foo_pods(&nodes, &[("node-a", 2), ("node-b", 1), ("node-y", 3)]);
    check.eq(
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        spread_codes(&zone_node(&[("foo", "")]), &nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, UNSCHED],
    );

    // filtering_test.go TestMultipleConstraints "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]"
    let existing = foo_pods(&nodes, &[("node-a", 2), ("node-b", 1), ("node-y", 4)]);
    check.eq(
        "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        spread_codes(&zone_node(&[("foo", "")]), &nodes, &existing),
        vec![UNSCHED; 4],
    );

    // filtering_test.go TestMultipleConstraints "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]"
    let p = spread_pod(&[("foo", ""), ("bar", "")], foo_bar(), json!({}));
    let existing = vec![
        plain(&nodes, "node-a", &[("foo", "")]),
        plain(&nodes, "node-y", &[("bar", "")]),
    ];
    check.eq(
        "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        spread_codes(&p, &nodes, &existing),
        vec![UNSCHED, UNSCHED, OK, UNSCHED],
    );

    // filtering_test.go TestMultipleConstraints "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]"
    let existing = vec![
        plain(&nodes, "node-a", &[("foo", "")]),
        plain(&nodes, "node-x", &[("bar", "")]),
        plain(&nodes, "node-y", &[("bar", "")]),
    ];
    check.eq(
        "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
        spread_codes(&p, &nodes, &existing),
        vec![UNSCHED; 4],
    );

    // filtering_test.go TestMultipleConstraints "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]"
    let existing2 = vec![
        plain(&nodes, "node-a", &[("foo", "")]),
        plain(&nodes, "node-a", &[("foo", ""), ("bar", "")]),
        plain(&nodes, "node-y", &[("foo", "")]),
        plain(&nodes, "node-y", &[("foo", ""), ("bar", "")]),
        plain(&nodes, "node-y", &[("foo", "")]),
    ];
    check.eq(
        "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
        spread_codes(&p, &nodes, &existing2),
        vec![UNSCHED, OK, UNSCHED, UNSCHED],
    );

    // filtering_test.go TestMultipleConstraints "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint"
    let p = spread_pod(&[("bar", "")], foo_bar(), json!({}));
    check.eq(
        "Constraints hold different labelSelectors but pod doesn't match itself on 'zone'",
        spread_codes(&p, &nodes, &existing),
        vec![OK, OK, UNSCHED, UNSCHED],
    );

    // filtering_test.go TestMultipleConstraints "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]"
    let no_node_x = vec![
        node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
        node("node-b", &[("zone", "zone1"), ("node", "node-b")]),
        node("node-x", &[("zone", "zone2")]),
        node("node-y", &[("zone", "zone2"), ("node", "node-y")]),
    ];
    let existing = foo_pods(&no_node_x, &[("node-a", 1), ("node-y", 1)]);
    check.eq(
        "two Constraints on zone and node, absence of label 'node' on node-x",
        spread_codes(&zone_node(&[("foo", "")]), &no_node_x, &existing),
        vec![UNSCHED, OK, UNRESOLVABLE, UNSCHED],
    );

    let selector = || json!({"nodeSelector": {"foo": ""}});
    let policies = |zone: (Option<&str>, Option<&str>), node: (Option<&str>, Option<&str>)| {
        vec![
            tsc(1, "zone", DNS, exists("foo"), None, zone.0, zone.1, &[]),
            tsc(1, "node", DNS, exists("foo"), None, node.0, node.1, &[]),
        ]
    };

    // filtering_test.go TestMultipleConstraints "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore"
    let n1 = vec![
        node(
            "node-a",
            &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
        ),
        node(
            "node-b",
            &[("zone", "zone1"), ("node", "node-b"), ("foo", "")],
        ),
        node(
            "node-x",
            &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
        ),
        node("node-y", &[("zone", "zone2"), ("node", "node-y")]),
    ];
    let existing = foo_pods(&n1, &[("node-a", 1), ("node-b", 1), ("node-y", 1)]);
    let p = spread_pod(
        &[("foo", "")],
        policies((None, None), (Some("Ignore"), None)),
        selector(),
    );
    check.eq(
        "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
        spread_codes(&p, &n1, &existing),
        vec![UNSCHED, UNSCHED, OK, UNSCHED],
    );

    // filtering_test.go TestMultipleConstraints "two node inclusion Constraints, zone: honor/honor, node: honor/ignore"
    let n2 = vec![
        node(
            "node-a",
            &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
        ),
        node(
            "node-b",
            &[("zone", "zone1"), ("node", "node-b"), ("foo", "")],
        ),
        node(
            "node-x",
            &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
        ),
        tainted(node("node-y", &[("zone", "zone2"), ("node", "node-y")])),
    ];
    let existing = foo_pods(&n2, &[("node-a", 1), ("node-b", 1), ("node-y", 1)]);
    let p = spread_pod(
        &[("foo", "")],
        policies((None, Some("Honor")), (None, None)),
        json!({}),
    );
    check.eq(
        "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
        spread_codes(&p, &n2, &existing),
        vec![UNSCHED, UNSCHED, OK, UNSCHED],
    );

    // filtering_test.go TestMultipleConstraints "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore"
    let n3 = vec![
        node(
            "node-a",
            &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
        ),
        node("node-b", &[("zone", "zone1"), ("node", "node-b")]),
        node(
            "node-x",
            &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
        ),
        tainted(node(
            "node-y",
            &[("zone", "zone2"), ("node", "node-y"), ("foo", "")],
        )),
    ];
    let existing = foo_pods(&n3, &[("node-a", 1), ("node-b", 1), ("node-y", 1)]);
    let p = spread_pod(
        &[("foo", "")],
        policies((None, None), (None, None)),
        selector(),
    );
    check.eq(
        "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
        spread_codes(&p, &n3, &existing),
        vec![UNSCHED, OK, OK, UNSCHED],
    );

    check.done(10);
}

/// PreFilter's matching pods per domain (`TpPairToMatchNum`), for the cases whose effect shows
/// there rather than in a filter code.
#[test]
fn spread_prefilter_counts() {
    let mut check = Check::default();
    let nodes = four_nodes();
    let foo = || exists("foo");

    // pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go TestPreFilterState "normal case with two spreadConstraints"
    let existing = foo_pods(&nodes, &[("node-a", 2), ("node-b", 1), ("node-y", 4)]);
    let p = spread_pod(
        &[("foo", "")],
        vec![hard(1, "zone", foo()), hard(1, "node", foo())],
        json!({}),
    );
    check.eq(
        "normal case with two spreadConstraints",
        spread_state(&p, &nodes, &existing),
        Some(pairs(&[
            ("zone", "zone1", 3),
            ("zone", "zone2", 4),
            ("node", "node-a", 2),
            ("node", "node-b", 1),
            ("node", "node-x", 0),
            ("node", "node-y", 4),
        ])),
    );

    // filtering_test.go TestPreFilterState "namespace mismatch doesn't count"
    let existing = vec![
        plain(&nodes, "node-a", &[("foo", "")]),
        on(&nodes, "node-a", "ns1", &[("foo", "")], json!({})),
        plain(&nodes, "node-b", &[("foo", "")]),
        on(&nodes, "node-y", "ns2", &[("foo", "")], json!({})),
        plain(&nodes, "node-y", &[("foo", "")]),
    ];
    let p = spread_pod(&[("foo", "")], vec![hard(1, "zone", foo())], json!({}));
    check.eq(
        "namespace mismatch doesn't count",
        spread_state(&p, &nodes, &existing),
        Some(pairs(&[("zone", "zone1", 2), ("zone", "zone2", 1)])),
    );

    // filtering_test.go TestPreFilterState "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty"
    let existing = vec![
        plain(&nodes, "node-a", &[("foo", "")]),
        plain(&nodes, "node-a", &[("foo", ""), ("bar", "a")]),
        plain(&nodes, "node-b", &[("foo", "")]),
        plain(&nodes, "node-y", &[("foo", ""), ("bar", "a")]),
        plain(&nodes, "node-y", &[("bar", "")]),
    ];
    let keys =
        |selector: Value, keys: &[&str]| tsc(1, "zone", DNS, selector, None, None, None, keys);
    let p = spread_pod(
        &[("foo", ""), ("bar", "a")],
        vec![keys(foo(), &["bar"])],
        json!({}),
    );
    check.eq(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        spread_state(&p, &nodes, &existing),
        Some(pairs(&[("zone", "zone1", 1), ("zone", "zone2", 1)])),
    );

    // filtering_test.go TestPreFilterState "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty"
    let foo_a = foo_a_pods(&nodes);
    let p = spread_pod(&[("foo", "a")], vec![keys(json!({}), &["foo"])], json!({}));
    check.eq(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        spread_state(&p, &nodes, &foo_a),
        Some(pairs(&[("zone", "zone1", 3), ("zone", "zone2", 2)])),
    );

    // filtering_test.go TestPreFilterState "key in matchLabelKeys is ignored when LabelSelector is nil when feature gate enabled"
    let p = spread_pod(&[("foo", "")], vec![keys(Value::Null, &["bar"])], json!({}));
    check.eq(
        "key in matchLabelKeys is ignored when LabelSelector is nil",
        spread_state(&p, &nodes, &foo_a),
        Some(pairs(&[("zone", "zone1", 0), ("zone", "zone2", 0)])),
    );

    // filtering_test.go TestPreFilterState "key in matchLabelKeys is ignored when it isn't exist in pod.labels"
    let p = spread_pod(&[("foo", "")], vec![keys(foo(), &["bar"])], json!({}));
    check.eq(
        "key in matchLabelKeys is ignored when it isn't exist in pod.labels",
        spread_state(&p, &nodes, &foo_a),
        Some(pairs(&[("zone", "zone1", 3), ("zone", "zone2", 2)])),
    );

    // filtering_test.go TestPreFilterState "skip if not specified"
    let p = spread_pod(&[("foo", "")], vec![], json!({}));
    check.eq(
        "skip if not specified",
        spread_state(&p, &nodes[..1], &[]),
        None,
    );

    // The taint cases: node-c carries the unschedulable taint; pods bar 1/2/- plus one unlabelled on node-c.
    let abc = vec![
        node("node-a", &[("node", "node-a")]),
        node("node-b", &[("node", "node-b")]),
        tainted(node("node-c", &[("node", "node-c"), ("bar", "")])),
    ];
    let existing = vec![
        plain(&abc, "node-a", &[("bar", "")]),
        plain(&abc, "node-b", &[("bar", "")]),
        plain(&abc, "node-b", &[("bar", "")]),
        plain(&abc, "node-c", &[]),
    ];
    let bar_taints = |policy| tsc(1, "node", DNS, exists("bar"), None, None, policy, &[]);
    // filtering_test.go TestPreFilterState "NodeTaintsPolicy honored"
    let p = spread_pod(&[("foo", "")], vec![bar_taints(Some("Honor"))], json!({}));
    check.eq(
        "NodeTaintsPolicy honored",
        spread_state(&p, &abc, &existing),
        Some(pairs(&[("node", "node-a", 1), ("node", "node-b", 2)])),
    );
    // filtering_test.go TestPreFilterState "NodeTaintsPolicy ignored"
    let p = spread_pod(&[("foo", "")], vec![bar_taints(None)], json!({}));
    check.eq(
        "NodeTaintsPolicy ignored",
        spread_state(&p, &abc, &existing),
        Some(pairs(&[
            ("node", "node-a", 1),
            ("node", "node-b", 2),
            ("node", "node-c", 0),
        ])),
    );
    // filtering_test.go TestPreFilterState "NodeTaintsPolicy honored with tolerated taints"
    let p = spread_pod(
        &[("foo", "")],
        vec![bar_taints(Some("Honor"))],
        json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}),
    );
    check.eq(
        "NodeTaintsPolicy honored with tolerated taints",
        spread_state(&p, &abc, &existing),
        Some(pairs(&[
            ("node", "node-a", 1),
            ("node", "node-b", 2),
            ("node", "node-c", 0),
        ])),
    );

    // filtering_test.go TestPreFilterState "two node inclusion Constraints, zone: ignore/ignore, node: honor/honor"
    let n = vec![
        node("node-a", &[("zone", "zone1"), ("node", "node-a")]),
        tainted(node(
            "node-b",
            &[("zone", "zone1"), ("node", "node-b"), ("foo", "")],
        )),
        node(
            "node-x",
            &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
        ),
        node(
            "node-y",
            &[("zone", "zone2"), ("node", "node-y"), ("foo", "")],
        ),
    ];
    let existing = foo_pods(&n, &[("node-a", 2), ("node-x", 2), ("node-y", 1)]);
    let p = spread_pod(
        &[("foo", "")],
        vec![
            tsc(1, "zone", DNS, foo(), None, Some("Ignore"), None, &[]),
            tsc(1, "node", DNS, foo(), None, None, Some("Honor"), &[]),
        ],
        json!({"nodeSelector": {"foo": ""}}),
    );
    check.eq(
        "two node inclusion Constraints, zone: ignore/ignore, node: honor/honor",
        spread_state(&p, &n, &existing),
        Some(pairs(&[
            ("zone", "zone1", 2),
            ("zone", "zone2", 3),
            ("node", "node-x", 2),
            ("node", "node-y", 1),
        ])),
    );

    check.done(11);
}

/// Five pods labelled `foo: a`: 2 on node-a, 1 on node-b, 2 on node-y.
fn foo_a_pods(nodes: &[ModelNode]) -> Vec<ExistingPod> {
    [("node-a", 2), ("node-b", 1), ("node-y", 2)]
        .iter()
        .flat_map(|(at, n)| (0..*n).map(move |_| plain(nodes, at, &[("foo", "a")])))
        .collect()
}

#[test]
fn spread_scores_as_upstream() {
    let mut check = Check::default();
    let foo = || exists("foo");
    let bar = || exists("bar");
    let hosts = |names: &[&str]| -> Vec<ModelNode> {
        names.iter().map(|n| node(n, &[(HOST, n)])).collect()
    };
    let host_pod = |max_skew, selector| {
        spread_pod(
            &[("foo", "")],
            vec![soft(max_skew, HOST, selector)],
            json!({}),
        )
    };

    // pkg/scheduler/framework/plugins/podtopologyspread/scoring_test.go TestPodTopologySpreadScore "one constraint on node, no existing pods"
    let ab = hosts(&["node-a", "node-b"]);
    check.eq(
        "one constraint on node, no existing pods",
        spread_score(&host_pod(1, foo()), &ab, 2, &[], &[]),
        Some(vec![100, 100]),
    );

    // scoring_test.go TestPodTopologySpreadScore "one constraint on node, only one node is candidate"
    let existing = foo_pods(&ab, &[("node-a", 2), ("node-b", 1)]);
    check.eq(
        "one constraint on node, only one node is candidate",
        spread_score(&host_pod(1, foo()), &ab, 1, &existing, &[]),
        Some(vec![100]),
    );

    // scoring_test.go TestPodTopologySpreadScore "one constraint on node, all nodes have the same number of matching pods"
    let existing = foo_pods(&ab, &[("node-a", 1), ("node-b", 1)]);
    check.eq(
        "one constraint on node, all nodes have the same number of matching pods",
        spread_score(&host_pod(1, foo()), &ab, 2, &existing, &[]),
        Some(vec![100, 100]),
    );

    // Matching pods 2/1/0/3 over node-a..node-d.
    let abcd = hosts(&["node-a", "node-b", "node-c", "node-d"]);
    let existing = foo_pods(&abcd, &[("node-a", 2), ("node-b", 1), ("node-d", 3)]);
    // scoring_test.go TestPodTopologySpreadScore "one constraint on node, all 4 nodes are candidates"
    check.eq(
        "one constraint on node, all 4 nodes are candidates",
        spread_score(&host_pod(1, foo()), &abcd, 4, &existing, &[]),
        Some(vec![20, 60, 100, 0]),
    );
    // scoring_test.go TestPodTopologySpreadScore "one constraint on node, null selector"
    check.eq(
        "one constraint on node, null selector",
        spread_score(&host_pod(1, Value::Null), &abcd, 4, &existing, &[]),
        Some(vec![100, 100, 100, 100]),
    );
    // scoring_test.go TestPodTopologySpreadScore "one constraint on node, all 4 nodes are candidates, maxSkew=2"
    check.eq(
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        spread_score(&host_pod(2, foo()), &abcd, 4, &existing, &[]),
        Some(vec![33, 66, 100, 16]),
    );

    // Matching pods 4/3/2/1.
    let existing = foo_pods(
        &abcd,
        &[("node-a", 4), ("node-b", 3), ("node-c", 2), ("node-d", 1)],
    );
    // scoring_test.go TestPodTopologySpreadScore "one constraint on node, all 4 nodes are candidates, maxSkew=3"
    check.eq(
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        spread_score(&host_pod(3, foo()), &abcd, 4, &existing, &[]),
        Some(vec![44, 66, 77, 100]),
    );
    // scoring_test.go TestPodTopologySpreadScore "system defaulting, nodes don't have zone, pods match service"
    let no_constraints = pod("", &[("foo", "")], json!({}));
    check.eq(
        "system defaulting, nodes don't have zone, pods match service",
        spread_score(
            &no_constraints,
            &abcd,
            4,
            &existing,
            &[labels(&[("foo", "")])],
        ),
        Some(vec![44, 66, 77, 100]),
    );

    // Matching pods 4/2/1/~3~ (node-y failed filtering).
    let abxy = hosts(&["node-a", "node-b", "node-x", "node-y"]);
    let existing = foo_pods(
        &abxy,
        &[("node-a", 4), ("node-b", 2), ("node-x", 1), ("node-y", 3)],
    );
    // scoring_test.go TestPodTopologySpreadScore "one constraint on node, 3 out of 4 nodes are candidates"
    check.eq(
        "one constraint on node, 3 out of 4 nodes are candidates",
        spread_score(&host_pod(1, foo()), &abxy, 3, &existing, &[]),
        Some(vec![33, 83, 100]),
    );
    // scoring_test.go TestPodTopologySpreadScore "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key"
    let mut odd = abxy.clone();
    odd[1] = node("node-b", &[("n", "node-b")]);
    check.eq(
        "one constraint on node, 3 out of 4 candidates, one node doesn't match topology key",
        spread_score(&host_pod(1, foo()), &odd, 3, &existing, &[]),
        Some(vec![16, 0, 100]),
    );
    // scoring_test.go TestPodTopologySpreadScore "one constraint on zone, 3 out of 4 nodes are candidates"
    let zoned = vec![
        node("node-a", &[("zone", "zone1"), (HOST, "node-a")]),
        node("node-b", &[("zone", "zone1"), (HOST, "node-b")]),
        node("node-x", &[("zone", "zone2"), (HOST, "node-x")]),
        node("node-y", &[("zone", "zone2"), (HOST, "node-y")]),
    ];
    let zone_pod = spread_pod(&[("foo", "")], vec![soft(1, "zone", foo())], json!({}));
    check.eq(
        "one constraint on zone, 3 out of 4 nodes are candidates",
        spread_score(&zone_pod, &zoned, 3, &existing, &[]),
        Some(vec![75, 75, 100]),
    );

    // scoring_test.go TestPodTopologySpreadScore "two Constraints on zone and node, 2 out of 4 nodes are candidates"
    // Candidates node-a and node-x; node-b and node-y failed.
    let ax_by = vec![
        zoned[0].clone(),
        zoned[2].clone(),
        zoned[1].clone(),
        zoned[3].clone(),
    ];
    let existing = foo_pods(
        &ax_by,
        &[("node-a", 2), ("node-b", 1), ("node-x", 2), ("node-y", 4)],
    );
    let zone_host = spread_pod(
        &[("foo", "")],
        vec![soft(1, "zone", foo()), soft(1, HOST, foo())],
        json!({}),
    );
    check.eq(
        "two Constraints on zone and node, 2 out of 4 nodes are candidates",
        spread_score(&zone_host, &ax_by, 2, &existing, &[]),
        Some(vec![100, 63]),
    );

    let foo_bar = spread_pod(
        &[("foo", ""), ("bar", "")],
        vec![soft(1, "zone", foo()), soft(1, HOST, bar())],
        json!({}),
    );
    let mixed = vec![
        plain(&zoned, "node-a", &[("foo", "")]),
        plain(&zoned, "node-b", &[("foo", ""), ("bar", "")]),
        plain(&zoned, "node-y", &[("foo", "")]),
        plain(&zoned, "node-y", &[("bar", "")]),
    ];
    // scoring_test.go TestPodTopologySpreadScore "two Constraints on zone and node, with different labelSelectors"
    check.eq(
        "two Constraints on zone and node, with different labelSelectors",
        spread_score(&foo_bar, &zoned, 4, &mixed, &[]),
        Some(vec![60, 20, 100, 60]),
    );
    // scoring_test.go TestPodTopologySpreadScore "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods"
    let sparse = vec![
        plain(&zoned, "node-b", &[("bar", "")]),
        plain(&zoned, "node-x", &[("foo", "")]),
        plain(&zoned, "node-y", &[("foo", ""), ("bar", "")]),
    ];
    check.eq(
        "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
        spread_score(&foo_bar, &zoned, 4, &sparse, &[]),
        Some(vec![100, 60, 40, 0]),
    );
    // scoring_test.go TestPodTopologySpreadScore "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates"
    check.eq(
        "two Constraints, different labelSelectors, 3 out of 4 nodes are candidates",
        spread_score(&foo_bar, &zoned, 3, &mixed, &[]),
        Some(vec![50, 25, 100]),
    );

    // scoring_test.go TestPodTopologySpreadScore "existing pods in a different namespace do not count"
    let existing = vec![
        on(&ab, "node-a", "ns1", &[("foo", "")], json!({})),
        plain(&ab, "node-a", &[("foo", "")]),
        plain(&ab, "node-b", &[("foo", "")]),
        plain(&ab, "node-b", &[("foo", "")]),
    ];
    check.eq(
        "existing pods in a different namespace do not count",
        spread_score(&host_pod(1, foo()), &ab, 2, &existing, &[]),
        Some(vec![100, 33]),
    );

    // scoring_test.go TestPodTopologySpreadScore "terminating Pods should be excluded"
    let existing = vec![
        terminating(plain(&ab, "node-a", &[("foo", "")])),
        plain(&ab, "node-b", &[("foo", "")]),
    ];
    check.eq(
        "terminating Pods should be excluded",
        spread_score(&host_pod(1, foo()), &ab, 2, &existing, &[]),
        Some(vec![100, 0]),
    );

    // scoring_test.go TestPodTopologySpreadScore "minDomains has no effect when ScheduleAnyway"
    let abc_node = vec![
        node("node-a", &[("node", "node-a")]),
        node("node-b", &[("node", "node-b")]),
        node("node-c", &[("node", "node-c")]),
    ];
    let existing = foo_pods(&abc_node, &[("node-a", 2), ("node-b", 2), ("node-c", 1)]);
    let p = spread_pod(
        &[("foo", "")],
        vec![tsc(2, "node", ANY, foo(), Some(10), None, None, &[])],
        json!({}),
    );
    check.eq(
        "minDomains has no effect when ScheduleAnyway",
        spread_score(&p, &abc_node, 3, &existing, &[]),
        Some(vec![75, 75, 100]),
    );

    // The node-inclusion cases: node-a 2, node-b 1, node-c 1 (node-c lacks foo).
    let inc = vec![
        node("node-a", &[("node", "node-a"), ("foo", "")]),
        node("node-b", &[("node", "node-b"), ("foo", "")]),
        node("node-c", &[("node", "node-c")]),
    ];
    let existing = foo_pods(&inc, &[("node-a", 2), ("node-b", 1), ("node-c", 1)]);
    let selector = json!({"nodeSelector": {"foo": ""}});
    let node_affinity = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "foo", "operator": "In", "values": [""]}]}]}}}});
    let honor = soft(1, "node", foo());
    let ignore = tsc(1, "node", ANY, foo(), None, Some("Ignore"), None, &[]);
    for (case, constraint, extra, want) in [
        // scoring_test.go TestPodTopologySpreadScore "NodeAffinityPolicy honoed with labelSelectors"
        (
            "NodeAffinityPolicy honoed with labelSelectors",
            &honor,
            &selector,
            vec![0, 33, 100],
        ),
        // scoring_test.go TestPodTopologySpreadScore "NodeAffinityPolicy ignored with labelSelectors"
        (
            "NodeAffinityPolicy ignored with labelSelectors",
            &ignore,
            &selector,
            vec![66, 100, 100],
        ),
        // scoring_test.go TestPodTopologySpreadScore "NodeAffinityPolicy honoed with nodeAffinity"
        (
            "NodeAffinityPolicy honoed with nodeAffinity",
            &honor,
            &node_affinity,
            vec![0, 33, 100],
        ),
        // scoring_test.go TestPodTopologySpreadScore "NodeAffinityPolicy ignored with nodeAffinity"
        (
            "NodeAffinityPolicy ignored with nodeAffinity",
            &ignore,
            &node_affinity,
            vec![66, 100, 100],
        ),
    ] {
        let p = spread_pod(&[("foo", "")], vec![constraint.clone()], extra.clone());
        check.eq(case, spread_score(&p, &inc, 3, &existing, &[]), Some(want));
    }

    let taint_nodes = vec![
        node("node-a", &[("node", "node-a")]),
        node("node-b", &[("node", "node-b")]),
        tainted(node("node-c", &[("node", "node-c")])),
    ];
    let existing = foo_pods(&taint_nodes, &[("node-a", 2), ("node-b", 1), ("node-c", 1)]);
    // scoring_test.go TestPodTopologySpreadScore "NodeTaintsPolicy honored"
    let p = spread_pod(
        &[("foo", "")],
        vec![tsc(1, "node", ANY, foo(), None, None, Some("Honor"), &[])],
        json!({}),
    );
    check.eq(
        "NodeTaintsPolicy honored",
        spread_score(&p, &taint_nodes, 3, &existing, &[]),
        Some(vec![0, 33, 100]),
    );
    // scoring_test.go TestPodTopologySpreadScore "NodeTaintsPolicy ignored"
    let p = spread_pod(&[("foo", "")], vec![soft(1, "node", foo())], json!({}));
    check.eq(
        "NodeTaintsPolicy ignored",
        spread_score(&p, &taint_nodes, 3, &existing, &[]),
        Some(vec![66, 100, 100]),
    );

    // scoring_test.go TestPodTopologySpreadScore "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty"
    let cd = vec![
        node("node-a", &[("zone", "zone1"), (HOST, "node-a")]),
        node("node-b", &[("zone", "zone1"), (HOST, "node-b")]),
        node("node-c", &[("zone", "zone2"), (HOST, "node-c")]),
        node("node-d", &[("zone", "zone2"), (HOST, "node-d")]),
    ];
    let existing = vec![
        plain(&cd, "node-a", &[("foo", "")]),
        plain(&cd, "node-b", &[("foo", ""), ("bar", "")]),
        plain(&cd, "node-c", &[("foo", "")]),
        plain(&cd, "node-c", &[("bar", "")]),
    ];
    let p = spread_pod(
        &[("foo", ""), ("bar", "")],
        vec![
            tsc(1, "zone", ANY, json!({}), None, None, None, &["foo"]),
            tsc(1, HOST, ANY, json!({}), None, None, None, &["bar"]),
        ],
        json!({}),
    );
    check.eq(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        spread_score(&p, &cd, 4, &existing, &[]),
        Some(vec![60, 20, 60, 100]),
    );

    // scoring_test.go TestPodTopologySpreadScore "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty"
    let existing = vec![
        plain(&cd, "node-a", &[("foo", "")]),
        plain(&cd, "node-b", &[("foo", ""), ("bar", ""), ("baz", "")]),
        plain(&cd, "node-c", &[("foo", "")]),
        plain(&cd, "node-c", &[("bar", "")]),
        plain(&cd, "node-c", &[("bar", ""), ("baz", "")]),
    ];
    let p = spread_pod(
        &[("foo", ""), ("bar", ""), ("baz", "")],
        vec![
            soft(1, "zone", foo()),
            tsc(1, HOST, ANY, bar(), None, None, None, &["baz"]),
        ],
        json!({}),
    );
    check.eq(
        "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        spread_score(&p, &cd, 4, &existing, &[]),
        Some(vec![60, 20, 60, 100]),
    );

    // scoring_test.go TestPreScoreSkip "the pod doesn't have soft topology spread Constraints"
    // (that test configures List defaulting; with the system defaults a pod no owner selects
    // gets no default constraints either, so PreScore skips the same way.)
    let bare = pod("default", &[], json!({}));
    check.eq(
        "the pod doesn't have soft topology spread Constraints",
        spread_score(&bare, &ab, 2, &[], &[]),
        None,
    );

    check.done(27);
}

/// The default constraints follow the owners' selectors, and only for a pod without its own.
#[test]
fn spread_defaults_apply_only_to_selected_pods_without_constraints() {
    let nodes = vec![
        node("a", &[(HOST, "a"), ("topology.kubernetes.io/zone", "z1")]),
        node("b", &[(HOST, "b"), ("topology.kubernetes.io/zone", "z2")]),
    ];
    let existing = foo_pods(&nodes, &[("a", 3)]);
    let bare = pod("", &[("foo", "")], json!({}));
    assert_eq!(
        spread_score(&bare, &nodes, 2, &existing, &[]),
        None,
        "no owner"
    );
    let scored = spread_score(&bare, &nodes, 2, &existing, &[labels(&[("foo", "")])]);
    // Raw a = round(3 ln 4 + 2 + 3 ln 4 + 4) = 14, b = 2 + 4 = 6; a = 100 * (14 + 6 - 14) / 14.
    assert_eq!(scored, Some(vec![42, 100]), "a Service selects it");
    // Its own hard constraint replaces the defaults: no soft constraint, no score.
    let own = spread_pod(
        &[("foo", "")],
        vec![hard(1, HOST, exists("foo"))],
        json!({}),
    );
    assert_eq!(
        spread_score(&own, &nodes, 2, &existing, &[labels(&[("foo", "")])]),
        None
    );
}

// ---- InterPodAffinity ----

/// The namespaces of upstream's interpodaffinity tests (`namespaces` in scoring_test.go).
fn team_namespaces() -> BTreeMap<String, Labels> {
    [
        ("subteam1.team1", "team1"),
        ("subteam2.team1", "team1"),
        ("subteam1.team2", "team2"),
        ("subteam2.team2", "team2"),
    ]
    .iter()
    .map(|(ns, team)| (ns.to_string(), labels(&[("team", team)])))
    .collect()
}

/// A required term as `st.PodAffinityIn/NotIn/Exists(key, topologyKey, values)` builds it.
fn term(key: &str, op: &str, values: &[&str], topology: &str) -> Value {
    let mut e = json!({"key": key, "operator": op});
    if !values.is_empty() {
        e["values"] = json!(values);
    }
    json!({"labelSelector": {"matchExpressions": [e]}, "topologyKey": topology})
}

/// `st.PodAffinityIn(key, topologyKey, values)`
fn in_(key: &str, topology: &str, values: &[&str]) -> Value {
    term(key, "In", values, topology)
}

/// A spec with required pod affinity and anti-affinity terms.
fn required(affinity: Vec<Value>, anti: Vec<Value>) -> Value {
    let mut a = json!({});
    if !affinity.is_empty() {
        a["podAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": affinity});
    }
    if !anti.is_empty() {
        a["podAntiAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": anti});
    }
    json!({"affinity": a})
}

fn affinity_codes(pod: &Pod, nodes: &[ModelNode], existing: &[ExistingPod]) -> Vec<&'static str> {
    let namespaces = team_namespaces();
    let cluster = ClusterPods::new(existing, &namespaces);
    let facts = PodFacts::of(pod);
    let Some(filter) = AffinityFilter::new(&facts, nodes, &cluster) else {
        return vec![OK; nodes.len()];
    };
    nodes
        .iter()
        .map(|n| {
            filter
                .check(n)
                .map_or_else(|u| code_name(u.code()), |()| OK)
        })
        .collect()
}

/// The filter's verdict with its reason (which of the three checks failed).
fn affinity_reason(pod: &Pod, nodes: &[ModelNode], existing: &[ExistingPod]) -> Vec<String> {
    let namespaces = team_namespaces();
    let cluster = ClusterPods::new(existing, &namespaces);
    let facts = PodFacts::of(pod);
    let Some(filter) = AffinityFilter::new(&facts, nodes, &cluster) else {
        return vec![OK.to_string(); nodes.len()];
    };
    nodes
        .iter()
        .map(|n| match filter.check(n) {
            Ok(()) => OK.to_string(),
            Err(u) => format!("{}: {u:?}", code_name(u.code())),
        })
        .collect()
}

#[test]
fn affinity_filter_single_node() {
    use crate::scheduler::AffinityUnfit::*;
    let reason = |u: crate::scheduler::AffinityUnfit| format!("{}: {u:?}", code_name(u.code()));
    let mut check = Check::default();
    let node1 = vec![node("node1", &[("region", "r1"), ("zone", "z11")])];
    let scan = [("service", "securityscan")];
    let s1 = [("security", "S1")];
    let the_pod = || vec![plain(&node1, "node1", &scan)];
    let ok = || vec![OK.to_string()];

    // pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go TestRequiredAffinitySingleNode "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods"
    check.eq(
        "no rules, no pods",
        affinity_reason(&pod("", &[], json!({})), &node1, &[]),
        ok(),
    );

    // filtering_test.go TestRequiredAffinitySingleNode "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod"
    let p = pod(
        "",
        &s1,
        required(
            vec![in_("service", "region", &["securityscan", "value2"])],
            vec![],
        ),
    );
    check.eq(
        "affinity In matches the existing pod",
        affinity_reason(&p, &node1, &the_pod()),
        ok(),
    );

    // filtering_test.go TestRequiredAffinitySingleNode "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod"
    let p = pod(
        "",
        &s1,
        required(
            vec![term(
                "service",
                "NotIn",
                &["securityscan3", "value3"],
                "region",
            )],
            vec![],
        ),
    );
    check.eq(
        "affinity NotIn matches the existing pod",
        affinity_reason(&p, &node1, &the_pod()),
        ok(),
    );

    // filtering_test.go TestRequiredAffinitySingleNode "Does not satisfy the PodAffinity with labelSelector because of diff Namespace"
    let mut t = in_("service", "", &["securityscan", "value2"]);
    t["namespaces"] = json!(["DiffNameSpace"]);
    let p = pod("", &s1, required(vec![t], vec![]));
    let other_ns = vec![on(&node1, "node1", "ns", &scan, json!({}))];
    check.eq(
        "diff Namespace",
        affinity_reason(&p, &node1, &other_ns),
        vec![reason(Affinity)],
    );

    // filtering_test.go TestRequiredAffinitySingleNode "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod"
    let p = pod(
        "",
        &scan,
        required(
            vec![in_("service", "", &["antivirusscan", "value2"])],
            vec![],
        ),
    );
    check.eq(
        "unmatching labelSelector",
        affinity_reason(&p, &node1, &the_pod()),
        vec![reason(Affinity)],
    );

    // Two terms on "region", each with two requirements.
    let two_terms = |second_value: &str| {
        json!([
            {"labelSelector": {"matchExpressions": [
                {"key": "service", "operator": "Exists"},
                {"key": "wrongkey", "operator": "DoesNotExist"}]}, "topologyKey": "region"},
            {"labelSelector": {"matchExpressions": [
                {"key": "service", "operator": "In", "values": [second_value]},
                {"key": "service", "operator": "NotIn", "values": ["WrongValue"]}]}, "topologyKey": "region"}])
    };
    // filtering_test.go TestRequiredAffinitySingleNode "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution "
    let p = pod(
        "",
        &s1,
        json!({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": two_terms("securityscan")}}}),
    );
    check.eq(
        "different label operators in multiple terms",
        affinity_reason(&p, &node1, &the_pod()),
        ok(),
    );
    // filtering_test.go TestRequiredAffinitySingleNode "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match."
    let p = pod(
        "",
        &s1,
        json!({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": two_terms("securityscan2")}}}),
    );
    check.eq(
        "matchExpressions are ANDed",
        affinity_reason(&p, &node1, &the_pod()),
        vec![reason(Affinity)],
    );

    let aff_region = || in_("service", "region", &["securityscan", "value2"]);
    let anti_node = || in_("service", "node", &["antivirusscan", "value2"]);
    // filtering_test.go TestRequiredAffinitySingleNode "satisfies the PodAffinity and PodAntiAffinity with the existing pod"
    let p = pod("", &s1, required(vec![aff_region()], vec![anti_node()]));
    check.eq(
        "affinity and anti-affinity",
        affinity_reason(&p, &node1, &the_pod()),
        ok(),
    );

    // filtering_test.go TestRequiredAffinitySingleNode "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod"
    let existing = vec![on(
        &node1,
        "node1",
        "",
        &scan,
        required(vec![], vec![anti_node()]),
    )];
    check.eq(
        "affinity, anti-affinity and symmetry",
        affinity_reason(&p, &node1, &existing),
        ok(),
    );

    // filtering_test.go TestRequiredAffinitySingleNode "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod"
    let p = pod(
        "",
        &s1,
        required(
            vec![aff_region()],
            vec![in_("service", "zone", &["securityscan", "value2"])],
        ),
    );
    check.eq(
        "anti-affinity not satisfied",
        affinity_reason(&p, &node1, &the_pod()),
        vec![reason(AntiAffinity)],
    );

    // filtering_test.go TestRequiredAffinitySingleNode "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod"
    let p = pod("", &scan, required(vec![aff_region()], vec![anti_node()]));
    let zone_anti = || in_("service", "zone", &["securityscan", "value2"]);
    let existing = vec![on(
        &node1,
        "node1",
        "",
        &scan,
        required(vec![], vec![zone_anti()]),
    )];
    check.eq(
        "symmetry not satisfied",
        affinity_reason(&p, &node1, &existing),
        vec![reason(ExistingAntiAffinity)],
    );

    // filtering_test.go TestRequiredAffinitySingleNode "pod matches its own Label in PodAffinity and that matches the existing pod Labels"
    let p = pod(
        "",
        &scan,
        required(
            vec![term(
                "service",
                "NotIn",
                &["securityscan", "value2"],
                "region",
            )],
            vec![],
        ),
    );
    let elsewhere = vec![plain(&node1, "node2", &scan)];
    check.eq(
        "pod matches its own label, existing pod elsewhere",
        affinity_reason(&p, &node1, &elsewhere),
        vec![reason(Affinity)],
    );

    // filtering_test.go TestRequiredAffinitySingleNode "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod"
    let p = pod("", &scan, json!({}));
    check.eq(
        "existing anti-affinity respected, not satisfied",
        affinity_reason(&p, &node1, &existing),
        vec![reason(ExistingAntiAffinity)],
    );
    // filtering_test.go TestRequiredAffinitySingleNode "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod"
    let not_in = vec![on(
        &node1,
        "node1",
        "",
        &scan,
        required(
            vec![],
            vec![term(
                "service",
                "NotIn",
                &["securityscan", "value2"],
                "zone",
            )],
        ),
    )];
    check.eq(
        "existing anti-affinity respected, satisfied",
        affinity_reason(&p, &node1, &not_in),
        ok(),
    );

    let ex = |key: &str, topo: &str| term(key, "Exists", &[], topo);
    // filtering_test.go TestRequiredAffinitySingleNode "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod"
    let p = pod(
        "",
        &scan,
        required(
            vec![],
            vec![ex("service", "region"), ex("security", "region")],
        ),
    );
    let existing = vec![on(
        &node1,
        "node1",
        "",
        &s1,
        required(vec![], vec![ex("security", "zone")]),
    )];
    check.eq(
        "incoming anti-affinity symmetry",
        affinity_reason(&p, &node1, &existing),
        vec![reason(AntiAffinity)],
    );

    // filtering_test.go TestRequiredAffinitySingleNode "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms"
    let p = pod(
        "",
        &scan,
        required(vec![], vec![ex("service", "zone"), ex("security", "zone")]),
    );
    check.eq(
        "symmetry a1",
        affinity_reason(&p, &node1, &existing),
        vec![reason(AntiAffinity)],
    );

    // filtering_test.go TestRequiredAffinitySingleNode "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms"
    let p = pod("", &s1, required(vec![], vec![ex("security", "zone")]));
    let existing = vec![on(
        &node1,
        "node1",
        "",
        &scan,
        required(vec![], vec![ex("service", "zone"), ex("security", "zone")]),
    )];
    check.eq(
        "symmetry a2",
        affinity_reason(&p, &node1, &existing),
        vec![reason(ExistingAntiAffinity)],
    );

    let abc_def = || required(vec![], vec![ex("abc", "zone"), ex("def", "zone")]);
    // filtering_test.go TestRequiredAffinitySingleNode "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms"
    let p = pod("", &[("abc", ""), ("xyz", "")], abc_def());
    let existing = vec![on(
        &node1,
        "node1",
        "",
        &[("def", ""), ("xyz", "")],
        abc_def(),
    )];
    check.eq(
        "symmetry b1",
        affinity_reason(&p, &node1, &existing),
        vec![reason(AntiAffinity)],
    );
    // filtering_test.go TestRequiredAffinitySingleNode "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms"
    let p = pod("", &[("def", ""), ("xyz", "")], abc_def());
    let existing = vec![on(
        &node1,
        "node1",
        "",
        &[("abc", ""), ("xyz", "")],
        abc_def(),
    )];
    check.eq(
        "symmetry b2",
        affinity_reason(&p, &node1, &existing),
        vec![reason(AntiAffinity)],
    );

    // The namespaceSelector cases: `team In team1`.
    let team1 =
        json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]});
    let with_selector = |topo: &str, selector: &Value| {
        let mut t = in_("service", topo, &["securityscan", "value2"]);
        t["namespaceSelector"] = selector.clone();
        t
    };
    let in_ns = |ns: &str| vec![on(&node1, "node1", ns, &scan, json!({}))];
    // filtering_test.go TestRequiredAffinitySingleNode "affinity with NamespaceSelector"
    let p = pod(
        "",
        &s1,
        required(vec![with_selector("region", &team1)], vec![]),
    );
    check.eq(
        "affinity with NamespaceSelector",
        affinity_reason(&p, &node1, &in_ns("subteam1.team1")),
        ok(),
    );
    // filtering_test.go TestRequiredAffinitySingleNode "affinity with non-matching NamespaceSelector"
    check.eq(
        "affinity with non-matching NamespaceSelector",
        affinity_reason(&p, &node1, &in_ns("subteam1.team2")),
        vec![reason(Affinity)],
    );
    // filtering_test.go TestRequiredAffinitySingleNode "anti-affinity with matching NamespaceSelector"
    let p = pod(
        "subteam1.team1",
        &s1,
        required(vec![], vec![with_selector("zone", &team1)]),
    );
    check.eq(
        "anti-affinity with matching NamespaceSelector",
        affinity_reason(&p, &node1, &in_ns("subteam2.team1")),
        vec![reason(AntiAffinity)],
    );
    // filtering_test.go TestRequiredAffinitySingleNode "anti-affinity with matching all NamespaceSelector"
    let p_all = pod(
        "subteam1.team1",
        &s1,
        required(vec![], vec![with_selector("zone", &json!({}))]),
    );
    check.eq(
        "anti-affinity with matching all NamespaceSelector",
        affinity_reason(&p_all, &node1, &in_ns("subteam2.team1")),
        vec![reason(AntiAffinity)],
    );
    // filtering_test.go TestRequiredAffinitySingleNode "anti-affinity with non-matching NamespaceSelector"
    check.eq(
        "anti-affinity with non-matching NamespaceSelector",
        affinity_reason(&p, &node1, &in_ns("subteam1.team2")),
        ok(),
    );

    check.done(24);
}

#[test]
fn affinity_filter_multiple_nodes() {
    let mut check = Check::default();
    let china = [("region", "China")];
    let china_az1 = [("region", "China"), ("az", "az1")];
    let india = [("region", "India")];
    let three =
        |a: &str, b: &str, c: &str| vec![node(a, &china), node(b, &china_az1), node(c, &india)];

    // pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go TestRequiredAffinityMultipleNodes "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has an existing pod that matches the affinity rules"
    let nodes = three("node1", "node2", "node3");
    let p = pod(
        "",
        &[],
        required(vec![in_("foo", "region", &["bar"])], vec![]),
    );
    let existing = vec![plain(&nodes, "node1", &[("foo", "bar")])];
    check.eq(
        "same topology value as a matching pod",
        affinity_codes(&p, &nodes, &existing),
        vec![OK, OK, UNRESOLVABLE],
    );

    // filtering_test.go TestRequiredAffinityMultipleNodes "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere."
    let first = pod(
        "",
        &[("foo", "bar"), ("service", "securityscan")],
        required(
            vec![
                in_("foo", "zone", &["bar"]),
                in_("service", "zone", &["securityscan"]),
            ],
            vec![],
        ),
    );
    let ab = vec![
        node("nodeA", &[("zone", "az1"), ("hostname", "h1")]),
        node("nodeB", &[("zone", "az2"), ("hostname", "h2")]),
    ];
    let existing = vec![plain(&ab, "nodeA", &[("foo", "bar")])];
    check.eq(
        "the first pod of a collection",
        affinity_codes(&first, &ab, &existing),
        vec![OK, OK],
    );

    // filtering_test.go TestRequiredAffinityMultipleNodes "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys"
    let unlabelled = vec![
        node("nodeA", &[("zoneLabel", "az1"), ("hostname", "h1")]),
        node("nodeB", &[("zoneLabel", "az2"), ("hostname", "h2")]),
    ];
    let existing = vec![plain(&unlabelled, "nodeA", &[("foo", "bar")])];
    check.eq(
        "the first pod needs the topology keys",
        affinity_codes(&first, &unlabelled, &existing),
        vec![UNRESOLVABLE, UNRESOLVABLE],
    );

    let r1 = vec![
        node("nodeA", &[("region", "r1"), ("hostname", "nodeA")]),
        node("nodeB", &[("region", "r1"), ("hostname", "nodeB")]),
    ];
    // filtering_test.go TestRequiredAffinityMultipleNodes "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB."
    let p = pod(
        "",
        &[],
        required(vec![], vec![in_("foo", "region", &["abc"])]),
    );
    let existing = vec![plain(&r1, "nodeA", &[("foo", "abc")])];
    check.eq(
        "anti-affinity over a shared region",
        affinity_codes(&p, &r1, &existing),
        vec![UNSCHED, UNSCHED],
    );

    // filtering_test.go TestRequiredAffinityMultipleNodes "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod."
    let rz = vec![
        node(
            "nodeA",
            &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")],
        ),
        node(
            "nodeB",
            &[("region", "r1"), ("zone", "z2"), ("hostname", "nodeB")],
        ),
    ];
    let p = pod(
        "",
        &[],
        required(
            vec![],
            vec![
                in_("foo", "region", &["abc"]),
                in_("service", "zone", &["securityscan"]),
            ],
        ),
    );
    let existing = vec![plain(
        &rz,
        "nodeA",
        &[("foo", "abc"), ("service", "securityscan")],
    )];
    check.eq(
        "any anti-affinity term matches",
        affinity_codes(&p, &rz, &existing),
        vec![UNSCHED, UNSCHED],
    );

    // filtering_test.go TestRequiredAffinityMultipleNodes "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC"
    let abc = three("nodeA", "nodeB", "nodeC");
    let p = pod(
        "",
        &[],
        required(vec![], vec![in_("foo", "region", &["abc"])]),
    );
    let existing = vec![plain(&abc, "nodeA", &[("foo", "abc")])];
    check.eq(
        "anti-affinity spares another region",
        affinity_codes(&p, &abc, &existing),
        vec![UNSCHED, UNSCHED, OK],
    );

    // filtering_test.go TestRequiredAffinityMultipleNodes "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in different namespace)"
    let p = pod(
        "NS1",
        &[("foo", "123")],
        required(vec![], vec![in_("foo", "region", &["bar"])]),
    );
    let existing = vec![
        on(&abc, "nodeA", "NS1", &[("foo", "bar")], json!({})),
        on(
            &abc,
            "nodeC",
            "NS2",
            &[],
            required(vec![], vec![in_("foo", "region", &["123"])]),
        ),
    ];
    check.eq(
        "anti-affinity in another namespace",
        affinity_codes(&p, &abc, &existing),
        vec![UNSCHED, UNSCHED, OK],
    );

    // filtering_test.go TestRequiredAffinityMultipleNodes "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the term is also checked"
    let rz1 = vec![
        node(
            "nodeA",
            &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")],
        ),
        node(
            "nodeB",
            &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeB")],
        ),
    ];
    let invalid = || {
        required(
            vec![],
            vec![term("foo", "Exists", &[], "invalid-node-label")],
        )
    };
    let p = pod("", &[("foo", "")], json!({}));
    let existing = vec![on(&rz1, "nodeA", "", &[], invalid())];
    check.eq(
        "existing anti-affinity on a missing key",
        affinity_codes(&p, &rz1, &existing),
        vec![OK, OK],
    );

    // filtering_test.go TestRequiredAffinityMultipleNodes "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches"
    let p = pod("", &[], invalid());
    let existing = vec![plain(&rz1, "nodeA", &[("foo", "")])];
    check.eq(
        "incoming anti-affinity on a missing key",
        affinity_codes(&p, &rz1, &existing),
        vec![OK, OK],
    );

    check.done(9);
}

/// Normalised InterPodAffinity scores of every node (all candidates), `None` when PreScore skips.
fn affinity_score(
    pod: &Pod,
    nodes: &[ModelNode],
    existing: &[ExistingPod],
    hard_weight: i32,
) -> Option<Vec<i64>> {
    let namespaces = team_namespaces();
    let mut cluster = ClusterPods::new(existing, &namespaces);
    cluster.hard_pod_affinity_weight = hard_weight;
    let all: Vec<usize> = (0..nodes.len()).collect();
    affinity_scores(&PodFacts::of(pod), nodes, &all, &cluster)
}

/// A weighted term selecting `security In values` on `topology`.
fn weighted(weight: i32, expressions: Value, topology: &str) -> Value {
    json!({"weight": weight, "podAffinityTerm": {
        "labelSelector": {"matchExpressions": expressions}, "topologyKey": topology}})
}

fn security_in(values: &[&str]) -> Value {
    json!([{"key": "security", "operator": "In", "values": values}])
}

fn preferred(affinity: Vec<Value>, anti: Vec<Value>) -> Value {
    let mut a = json!({});
    if !affinity.is_empty() {
        a["podAffinity"] = json!({"preferredDuringSchedulingIgnoredDuringExecution": affinity});
    }
    if !anti.is_empty() {
        a["podAntiAffinity"] = json!({"preferredDuringSchedulingIgnoredDuringExecution": anti});
    }
    json!({"affinity": a})
}

#[test]
fn affinity_scores_as_upstream() {
    let mut check = Check::default();
    let china = [("region", "China")];
    let india = [("region", "India")];
    let az1 = [("az", "az1")];
    let az2 = [("az", "az2")];
    let china_az1 = [("region", "China"), ("az", "az1")];
    let s1 = [("security", "S1")];
    let s2 = [("security", "S2")];
    // The affinities upstream's TestPreferredAffinity names.
    let stay_s1_region = || preferred(vec![weighted(5, security_in(&["S1"]), "region")], vec![]);
    let stay_s2_region = || preferred(vec![weighted(6, security_in(&["S2"]), "region")], vec![]);
    let affinity3 = preferred(
        vec![
            weighted(
                8,
                json!([{"key": "security", "operator": "NotIn", "values": ["S1"]},
                       {"key": "security", "operator": "In", "values": ["S2"]}]),
                "region",
            ),
            weighted(
                2,
                json!([{"key": "security", "operator": "Exists"},
                       {"key": "wrongkey", "operator": "DoesNotExist"}]),
                "region",
            ),
        ],
        vec![],
    );
    let hard_affinity = required(
        vec![
            json!({"labelSelector": {"matchExpressions": security_in(&["S1", "value2"])}, "topologyKey": "region"}),
            json!({"labelSelector": {"matchExpressions": [
                {"key": "security", "operator": "Exists"},
                {"key": "wrongkey", "operator": "DoesNotExist"}]}, "topologyKey": "region"}),
        ],
        vec![],
    );
    let away_s1_az = || preferred(vec![], vec![weighted(5, security_in(&["S1"]), "az")]);
    let away_s2_az = preferred(vec![], vec![weighted(5, security_in(&["S2"]), "az")]);
    let stay_s1_away_s2 = || {
        preferred(
            vec![weighted(8, security_in(&["S1"]), "region")],
            vec![weighted(5, security_in(&["S2"]), "az")],
        )
    };
    let with_namespaces = |mut t: Value| {
        t["podAffinityTerm"]["namespaces"] = json!(["subteam2.team2"]);
        t["podAffinityTerm"]["namespaceSelector"] =
            json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]});
        t
    };
    let affinity_ns_selector = || {
        preferred(
            vec![with_namespaces(weighted(5, security_in(&["S1"]), "region"))],
            vec![],
        )
    };
    let anti_ns_selector = || {
        preferred(
            vec![],
            vec![with_namespaces(weighted(5, security_in(&["S1"]), "region"))],
        )
    };
    let nodes3 = |a: &[(&str, &str)], b: &[(&str, &str)], c: &[(&str, &str)]| {
        vec![node("node1", a), node("node2", b), node("node3", c)]
    };
    let full = Some(vec![100, 0, 0]);

    // pkg/scheduler/framework/plugins/interpodaffinity/scoring_test.go TestPreferredAffinity "all nodes are same priority as Affinity is nil"
    let nodes = nodes3(&china, &india, &az1);
    check.eq(
        "all nodes are same priority as Affinity is nil",
        affinity_score(&pod("", &s1, json!({})), &nodes, &[], 1),
        None,
    );

    // scoring_test.go TestPreferredAffinity "Affinity: pod that matches topology key & pods in nodes will get high score comparing to others which doesn't match either pods in nodes or in topology key"
    let existing = vec![
        plain(&nodes, "node1", &s1),
        plain(&nodes, "node2", &s2),
        plain(&nodes, "node3", &s1),
    ];
    check.eq(
        "Affinity: pod that matches topology key & pods in nodes will get high score",
        affinity_score(&pod("", &s1, stay_s1_region()), &nodes, &existing, 1),
        full.clone(),
    );

    // scoring_test.go TestPreferredAffinity "All the nodes that have the same topology key & label value with one of them has an existing pod that match the affinity rules, have the same score"
    let n = nodes3(&china, &china_az1, &india);
    let existing1 = vec![plain(&n, "node1", &s1)];
    check.eq(
        "same topology key & value as a matching pod, same score",
        affinity_score(&pod("", &[], stay_s1_region()), &n, &existing1, 1),
        Some(vec![100, 100, 0]),
    );

    // scoring_test.go TestPreferredAffinity "Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more matches will get high score"
    let five = vec![
        node("node1", &china),
        node("node2", &india),
        node("node3", &china),
        node("node4", &china),
        node("node5", &india),
    ];
    let existing5: Vec<ExistingPod> = ["node1", "node1", "node2", "node3", "node4", "node5"]
        .iter()
        .map(|at| plain(&five, at, &s2))
        .collect();
    check.eq(
        "Affinity: region with more matches gets the high score",
        affinity_score(&pod("", &s1, stay_s2_region()), &five, &existing5, 1),
        Some(vec![100, 0, 100, 100, 0]),
    );

    // scoring_test.go TestPreferredAffinity "Affinity: different Label operators and values for pod affinity scheduling preference, including some match failures "
    check.eq(
        "Affinity: different Label operators and values",
        affinity_score(&pod("", &s1, affinity3), &nodes, &existing, 1),
        Some(vec![20, 100, 0]),
    );

    // scoring_test.go TestPreferredAffinity "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry"
    let sym = vec![
        on(&nodes, "node1", "", &s1, stay_s1_region()),
        on(&nodes, "node2", "", &s2, stay_s2_region()),
    ];
    check.eq(
        "Affinity symmetry: preferred terms",
        affinity_score(&pod("", &s2, json!({})), &nodes, &sym, 1),
        Some(vec![0, 100, 0]),
    );

    // scoring_test.go TestPreferredAffinity "Affinity symmetry with namespace selector"
    let sym_ns = vec![
        on(&nodes, "node1", "", &s1, affinity_ns_selector()),
        on(&nodes, "node2", "", &s2, stay_s2_region()),
    ];
    check.eq(
        "Affinity symmetry with namespace selector",
        affinity_score(&pod("subteam1.team1", &s1, json!({})), &nodes, &sym_ns, 1),
        full.clone(),
    );

    // scoring_test.go TestPreferredAffinity "AntiAffinity symmetry with namespace selector"
    let sym_anti_ns = vec![
        on(&nodes, "node1", "", &s1, anti_ns_selector()),
        on(&nodes, "node2", "", &s2, stay_s2_region()),
    ];
    check.eq(
        "AntiAffinity symmetry with namespace selector",
        affinity_score(
            &pod("subteam1.team1", &s1, json!({})),
            &nodes,
            &sym_anti_ns,
            1,
        ),
        Some(vec![0, 100, 100]),
    );

    // scoring_test.go TestPreferredAffinity "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry"
    let hard = vec![
        on(&nodes, "node1", "", &s1, hard_affinity.clone()),
        on(&nodes, "node2", "", &s2, hard_affinity),
    ];
    check.eq(
        "Affinity symmetry: required terms at hardPodAffinityWeight",
        affinity_score(&pod("", &s1, json!({})), &nodes, &hard, 1),
        Some(vec![100, 100, 0]),
    );

    // scoring_test.go TestPreferredAffinity "Anti Affinity: pod that does not match existing pods in node will get high score "
    let two = vec![node("node1", &az1), node("node2", &china)];
    let existing = vec![plain(&two, "node1", &s1), plain(&two, "node2", &s2)];
    check.eq(
        "Anti Affinity: pod that does not match existing pods gets the high score",
        affinity_score(&pod("", &s1, away_s1_az()), &two, &existing, 1),
        Some(vec![0, 100]),
    );

    // scoring_test.go TestPreferredAffinity "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score comparing to others "
    let existing = vec![plain(&two, "node1", &s1), plain(&two, "node2", &s1)];
    check.eq(
        "Anti Affinity: no topology key gets the higher score",
        affinity_score(&pod("", &s1, away_s1_az()), &two, &existing, 1),
        Some(vec![0, 100]),
    );

    // scoring_test.go TestPreferredAffinity "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches will get high score"
    let two_india = vec![node("node1", &az1), node("node2", &india)];
    let existing = vec![
        plain(&two_india, "node1", &s1),
        plain(&two_india, "node1", &s1),
        plain(&two_india, "node2", &s2),
    ];
    check.eq(
        "Anti Affinity: more unmatches gets the high score",
        affinity_score(&pod("", &s1, away_s1_az()), &two_india, &existing, 1),
        Some(vec![0, 100]),
    );

    // scoring_test.go TestPreferredAffinity "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score"
    let azs = vec![node("node1", &az1), node("node2", &az2)];
    let existing = vec![
        on(&azs, "node1", "", &s1, away_s2_az),
        on(&azs, "node2", "", &s2, away_s1_az()),
    ];
    check.eq(
        "Anti Affinity symmetry",
        affinity_score(&pod("", &s2, json!({})), &azs, &existing, 1),
        Some(vec![0, 100]),
    );

    // scoring_test.go TestPreferredAffinity "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity"
    let ch_az = vec![node("node1", &china), node("node2", &az1)];
    let existing = vec![plain(&ch_az, "node1", &s1), plain(&ch_az, "node2", &s1)];
    check.eq(
        "Affinity and Anti Affinity: preferred terms",
        affinity_score(&pod("", &s1, stay_s1_away_s2()), &ch_az, &existing, 1),
        Some(vec![100, 0]),
    );

    // scoring_test.go TestPreferredAffinity "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing pods have the same labels"
    let five2 = vec![
        node("node1", &china_az1),
        node("node2", &india),
        node("node3", &china),
        node("node4", &china),
        node("node5", &india),
    ];
    let existing: Vec<ExistingPod> = [
        "node1", "node1", "node2", "node3", "node3", "node4", "node5",
    ]
    .iter()
    .map(|at| plain(&five2, at, &s1))
    .collect();
    check.eq(
        "Affinity and Anti Affinity: same labels",
        affinity_score(&pod("", &s1, stay_s1_away_s2()), &five2, &existing, 1),
        Some(vec![100, 0, 100, 100, 0]),
    );

    // scoring_test.go TestPreferredAffinity "Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity & symmetry"
    let four = vec![
        node("node1", &china),
        node("node2", &az1),
        node("node3", &india),
        node("node4", &az2),
    ];
    let existing = vec![
        plain(&four, "node1", &s1),
        plain(&four, "node2", &s2),
        on(&four, "node3", "", &[], stay_s1_away_s2()),
        on(&four, "node4", "", &[], away_s1_az()),
    ];
    check.eq(
        "Affinity and Anti Affinity and symmetry",
        affinity_score(&pod("", &s1, stay_s1_away_s2()), &four, &existing, 1),
        Some(vec![100, 0, 100, 0]),
    );

    // scoring_test.go TestPreferredAffinity "Avoid panic when partial nodes in a topology don't have pods with affinity"
    let two_china = vec![node("node1", &china), node("node2", &china)];
    let existing = vec![
        plain(&two_china, "node1", &s1),
        on(&two_china, "node2", "", &[], stay_s1_away_s2()),
    ];
    check.eq(
        "Avoid panic when partial nodes in a topology don't have pods with affinity",
        affinity_score(&pod("", &s1, json!({})), &two_china, &existing, 1),
        Some(vec![0, 0]),
    );

    // The namespace cases: node1 in China, node2 in India.
    let ci = vec![node("node1", &china), node("node2", &india)];
    let spread_ns = |third: &str| {
        vec![
            on(&ci, "node1", "subteam1.team1", &s1, json!({})),
            on(&ci, "node1", "subteam1.team1", &s1, json!({})),
            on(&ci, "node1", third, &s1, json!({})),
            on(&ci, "node2", "subteam2.team1", &s1, json!({})),
        ]
    };
    // scoring_test.go TestPreferredAffinity "Affinity with pods matching NamespaceSelector"
    check.eq(
        "Affinity with pods matching NamespaceSelector",
        affinity_score(
            &pod("subteam1.team1", &s1, affinity_ns_selector()),
            &ci,
            &spread_ns("subteam1.team2"),
            1,
        ),
        Some(vec![100, 0]),
    );
    // scoring_test.go TestPreferredAffinity "Affinity with pods matching both NamespaceSelector and Namespaces fields"
    check.eq(
        "Affinity with pods matching both NamespaceSelector and Namespaces fields",
        affinity_score(
            &pod("subteam1.team1", &s1, affinity_ns_selector()),
            &ci,
            &spread_ns("subteam2.team2"),
            1,
        ),
        Some(vec![100, 0]),
    );
    // scoring_test.go TestPreferredAffinity "Affinity with pods matching NamespaceSelector" (the second
    // case of that name, with antiAffinityNamespaceSelector)
    check.eq(
        "Anti-affinity with pods matching NamespaceSelector",
        affinity_score(
            &pod("subteam1.team1", &s1, anti_ns_selector()),
            &ci,
            &spread_ns("subteam1.team2"),
            1,
        ),
        Some(vec![0, 100]),
    );
    // scoring_test.go TestPreferredAffinity "Affinity with pods matching both NamespaceSelector and Namespaces fields"
    // (the second case of that name, with antiAffinityNamespaceSelector)
    check.eq(
        "Anti-affinity with pods matching both NamespaceSelector and Namespaces fields",
        affinity_score(
            &pod("subteam1.team1", &s1, anti_ns_selector()),
            &ci,
            &spread_ns("subteam2.team2"),
            1,
        ),
        Some(vec![0, 100]),
    );

    // scoring_test.go TestPreferredAffinity "Do not ignore preferred terms of existing pods"
    // ("Ignore preferred terms of existing pods" needs `ignorePreferredTermsOfExistingPods`, a
    // plugin argument the model does not take: upstream's default is false, as here.)
    let existing = vec![
        on(&ci, "node1", "", &s1, stay_s1_away_s2()),
        on(&ci, "node2", "", &s2, stay_s2_region()),
    ];
    check.eq(
        "Do not ignore preferred terms of existing pods",
        affinity_score(&pod("", &s2, json!({})), &ci, &existing, 1),
        Some(vec![0, 100]),
    );

    // scoring_test.go TestPreferredAffinity "No nodes to score"
    check.eq(
        "No nodes to score",
        affinity_score(&pod("", &s2, json!({})), &[], &[], 1),
        None,
    );

    check.done(22);
}

#[test]
fn affinity_scores_hard_pod_affinity_weight() {
    let mut check = Check::default();
    let nodes = vec![
        node("node1", &[("region", "China")]),
        node("node2", &[("region", "India")]),
        node("node3", &[("az", "az1")]),
    ];
    let hard = required(
        vec![json!({
            "labelSelector": {"matchExpressions": [{"key": "service", "operator": "In", "values": ["S1"]}]},
            "namespaces": ["", "subteam2.team2"],
            "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]},
            "topologyKey": "region"})],
        vec![],
    );
    let existing = vec![
        on(&nodes, "node1", "", &[], hard.clone()),
        on(&nodes, "node2", "", &[], hard),
    ];
    let s1 = [("service", "S1")];

    // pkg/scheduler/framework/plugins/interpodaffinity/scoring_test.go TestPreferredAffinityWithHardPodAffinitySymmetricWeight "with default weight"
    check.eq(
        "with default weight",
        affinity_score(&pod("", &s1, json!({})), &nodes, &existing, 1),
        Some(vec![100, 100, 0]),
    );
    // scoring_test.go TestPreferredAffinityWithHardPodAffinitySymmetricWeight "with zero weight"
    check.eq(
        "with zero weight",
        affinity_score(&pod("", &s1, json!({})), &nodes, &existing, 0),
        None,
    );
    // scoring_test.go TestPreferredAffinityWithHardPodAffinitySymmetricWeight "with no matching namespace"
    check.eq(
        "with no matching namespace",
        affinity_score(&pod("subteam1.team2", &s1, json!({})), &nodes, &existing, 1),
        None,
    );
    // scoring_test.go TestPreferredAffinityWithHardPodAffinitySymmetricWeight "with matching NamespaceSelector"
    check.eq(
        "with matching NamespaceSelector",
        affinity_score(&pod("subteam1.team1", &s1, json!({})), &nodes, &existing, 1),
        Some(vec![100, 100, 0]),
    );
    // scoring_test.go TestPreferredAffinityWithHardPodAffinitySymmetricWeight "with matching Namespaces"
    check.eq(
        "with matching Namespaces",
        affinity_score(&pod("subteam2.team2", &s1, json!({})), &nodes, &existing, 1),
        Some(vec![100, 100, 0]),
    );

    check.done(5);
}

// ---- the cycle ----

/// `Scheduler::schedule_with` filters with both plugins and adds their weighted scores; with
/// no constraint and no pod in view it decides as `schedule` does.
#[test]
fn cycle_applies_both_plugins() {
    use crate::config::scheduler::SchedulerConfig;
    use crate::scheduler::Scheduler;
    use crate::scheduler::cycle::score_with;
    let alloc =
        Resources::parse(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "110")]).expect("quantities");
    let nodes: Vec<ModelNode> = (0..6)
        .map(|i| {
            let zone = format!("z{}", i % 3);
            let name = format!("n{i}");
            let pairs = [
                ("topology.kubernetes.io/zone", zone.as_str()),
                (HOST, name.as_str()),
            ];
            ModelNode::new(&name, labels(&pairs), alloc.clone())
        })
        .collect();
    let tm = [("app", "tm")];
    // Zones z0 and z1 hold one TaskManager each, z2 none.
    let existing = vec![plain(&nodes, "n0", &tm), plain(&nodes, "n1", &tm)];
    let namespaces = BTreeMap::new();
    let cluster = ClusterPods::new(&existing, &namespaces);
    let spread = spread_pod(
        &tm,
        vec![hard(
            1,
            "topology.kubernetes.io/zone",
            json!({"matchLabels": {"app": "tm"}}),
        )],
        json!({}),
    );
    let facts = PodFacts::of(&spread);
    let mut scheduler = Scheduler::new(SchedulerConfig::default(), 7);
    let cycle = scheduler.schedule_with(&facts, &nodes, &cluster);
    assert_eq!(
        cycle.sample,
        vec![2, 5],
        "only zone z2 keeps the skew within 1"
    );

    // Preferred anti-affinity on the hostname: the nodes holding a TaskManager lose 200 points.
    let apart = pod(
        "",
        &tm,
        preferred(
            vec![],
            vec![json!({"weight": 100, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "tm"}}, "topologyKey": HOST}})],
        ),
    );
    let facts = PodFacts::of(&apart);
    let all: Vec<usize> = (0..nodes.len()).collect();
    let scores = score_with(
        &facts,
        &nodes,
        &all,
        &SchedulerConfig::default(),
        Some(&cluster),
    );
    let inter_pod: Vec<i64> = scores.iter().map(|s| s.inter_pod_affinity).collect();
    assert_eq!(inter_pod, vec![0, 0, 200, 200, 200, 200]);
    assert!(
        scores.iter().all(|s| s.pod_topology_spread == 0),
        "no owner, no defaults"
    );

    // Nothing in view: the same node as the plain cycle, seed for seed.
    let plain_pod = pod("", &tm, json!({}));
    let facts = PodFacts::of(&plain_pod);
    let none = ClusterPods::new(&[], &namespaces);
    for seed in 0..8 {
        let a = Scheduler::new(SchedulerConfig::default(), seed).schedule(&facts, &nodes);
        let b =
            Scheduler::new(SchedulerConfig::default(), seed).schedule_with(&facts, &nodes, &none);
        assert_eq!(a, b);
    }
}

/// `AffinityScore::keep_best` keeps exactly the nodes whose weighted normalised score trails
/// the best by less than the margin, as the scores themselves say, whatever the sums' spread
/// (preferred affinity and anti-affinity on one node each, pods spread unevenly).
#[test]
fn keep_best_keeps_what_the_scores_keep() {
    use crate::scheduler::domains::Domains;
    use crate::scheduler::pod_affinity::AffinityScore;
    let nodes: Vec<ModelNode> = (0..13)
        .map(|k| node(&format!("n{k}"), &[("hostname", &format!("n{k}"))]))
        .collect();
    // Uneven counts: several nodes share a raw sum, some nodes have none.
    let mut existing = Vec::new();
    for (k, count) in [0, 1, 1, 2, 3, 5, 8, 0, 13, 2, 7, 4, 6]
        .into_iter()
        .enumerate()
    {
        for _ in 0..count {
            existing.push(plain(&nodes, &format!("n{k}"), &[("security", "S1")]));
        }
        if k % 3 == 0 {
            existing.push(plain(&nodes, &format!("n{k}"), &[("security", "S2")]));
        }
    }
    let namespaces = team_namespaces();
    let cluster = ClusterPods::new(&existing, &namespaces);
    let domains = |key: &str| Domains::of(&nodes, key);
    let all: Vec<usize> = (0..nodes.len()).collect();
    let positions: Vec<u32> = (0..nodes.len() as u32).collect();
    let mut cases = 0;
    for (affinity, anti) in [(1, 0), (0, 1), (3, 5), (7, 2)] {
        let mut terms = (Vec::new(), Vec::new());
        if affinity > 0 {
            terms
                .0
                .push(weighted(affinity, security_in(&["S2"]), "hostname"));
        }
        if anti > 0 {
            terms
                .1
                .push(weighted(anti, security_in(&["S1"]), "hostname"));
        }
        let incoming = pod("", &[], preferred(terms.0, terms.1));
        let facts = PodFacts::of(&incoming);
        let mut score = AffinityScore::new(&facts, cluster.namespace_labels, 1, &domains);
        for p in cluster.pods {
            score.add(p.kind(), [(p.node, p.count)]);
        }
        let scores = score.scores(&all).expect("some term matched");
        for weight in [1, 2, 3] {
            for margin in [1, 7, 25, 50, 99, 100, 150, 301] {
                let best = scores.iter().copied().max().unwrap_or(0) * weight;
                let expected: Vec<u32> = (0..nodes.len())
                    .filter(|&k| best - scores[k] * weight < margin)
                    .map(|k| k as u32)
                    .collect();
                let kept = score.keep_best(&positions, weight, margin).expect("scored");
                assert_eq!(kept, expected, "weight {weight}, margin {margin}");
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 96);
}
