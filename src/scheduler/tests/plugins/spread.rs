//! PodTopologySpread: the filter, PreFilter's counts and the scores against upstream's cases.

use super::*;

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
pub(super) const HOST: &str = "kubernetes.io/hostname";

/// A hard constraint with only maxSkew, key and selector set.
pub(super) fn hard(max_skew: i32, key: &str, selector: Value) -> Value {
    tsc(max_skew, key, DNS, selector, None, None, None, &[])
}

fn soft(max_skew: i32, key: &str, selector: Value) -> Value {
    tsc(max_skew, key, ANY, selector, None, None, None, &[])
}

pub(super) fn spread_pod(pairs: &[(&str, &str)], constraints: Vec<Value>, extra: Value) -> Pod {
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
