//! InterPodAffinity: the filter and the scores against upstream's cases.

use super::*;

/// The namespaces of upstream's interpodaffinity tests (`namespaces` in scoring_test.go).
pub(super) fn team_namespaces() -> BTreeMap<String, Labels> {
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
pub(super) fn weighted(weight: i32, expressions: Value, topology: &str) -> Value {
    json!({"weight": weight, "podAffinityTerm": {
        "labelSelector": {"matchExpressions": expressions}, "topologyKey": topology}})
}

pub(super) fn security_in(values: &[&str]) -> Value {
    json!([{"key": "security", "operator": "In", "values": values}])
}

pub(super) fn preferred(affinity: Vec<Value>, anti: Vec<Value>) -> Value {
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
