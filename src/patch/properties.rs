//! Property: for any pod shape the webhook may meet, the patch applies, yields a valid Pod,
//! preserves everything that was there, and only adds.

use crate::test_support::seeded;

use crate::config::NodeMatch;
use crate::patch::{Changes, PatchError, Preferred, build};
use crate::placement::{Decision, RankedNode, TierChoice};
use json_patch::PatchOperation;
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Pod};
use proptest::prelude::*;
use serde_json::{Value, json};

fn requirement() -> impl Strategy<Value = Value> {
    (
        prop_oneof!["zone", "kubernetes.io/hostname", "node-pool"],
        prop_oneof!["In", "NotIn"],
        prop::collection::vec("[a-z]{1,6}", 1..3),
    )
        .prop_map(|(k, op, vals)| json!({"key": k, "operator": op, "values": vals}))
}

fn selector_term() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop::collection::vec(requirement(), 0..3)),
        prop::option::of("[a-z]{1,6}"),
    )
        .prop_map(|(exprs, field)| {
            let mut t = serde_json::Map::new();
            if let Some(e) = exprs {
                t.insert("matchExpressions".into(), json!(e));
            }
            if let Some(f) = field {
                t.insert(
                    "matchFields".into(),
                    json!([{"key": "metadata.name", "operator": "NotIn", "values": [f]}]),
                );
            }
            Value::Object(t)
        })
}

/// A value, `null`, or absent.
fn maybe(v: impl Strategy<Value = Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![Just(None), Just(Some(Value::Null)), v.prop_map(Some)]
}

fn node_affinity() -> impl Strategy<Value = Value> {
    (
        maybe(
            prop::collection::vec(
                (1..=100i32, selector_term())
                    .prop_map(|(w, t)| json!({"weight": w, "preference": t})),
                0..3,
            )
            .prop_map(Value::from),
        ),
        maybe(
            maybe(prop::collection::vec(selector_term(), 0..3).prop_map(Value::from)).prop_map(
                |terms| match terms {
                    Some(t) => json!({ "nodeSelectorTerms": t }),
                    None => json!({}),
                },
            ),
        ),
    )
        .prop_map(|(pref, req)| {
            let mut na = serde_json::Map::new();
            if let Some(p) = pref {
                na.insert("preferredDuringSchedulingIgnoredDuringExecution".into(), p);
            }
            if let Some(r) = req {
                na.insert("requiredDuringSchedulingIgnoredDuringExecution".into(), r);
            }
            Value::Object(na)
        })
}

fn pod() -> impl Strategy<Value = Value> {
    (
        maybe(node_affinity()),
        any::<bool>(),
        maybe(prop::collection::btree_map("[a-z]{1,5}", "[a-z]{0,5}", 0..3).prop_map(|m| json!(m))),
        prop_oneof![
            Just(None),
            Just(Some("default-scheduler".to_string())),
            Just(Some("volcano".to_string()))
        ],
        any::<bool>(),
    )
        .prop_map(|(na, with_pod_affinity, annotations, scheduler, affinity_null)| {
            let mut affinity = serde_json::Map::new();
            if let Some(na) = na {
                affinity.insert("nodeAffinity".into(), na);
            }
            if with_pod_affinity {
                affinity.insert(
                    "podAntiAffinity".into(),
                    json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50,
                        "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "wc"}}}}]}),
                );
            }
            let mut spec = json!({
                "containers": [{"name": "flink-main-container", "image": "flink:1.20"}],
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "flink", "effect": "NoSchedule"}],
                "nodeSelector": {"node-pool": "flink"},
            });
            if affinity_null {
                spec["affinity"] = Value::Null;
            } else if !affinity.is_empty() || with_pod_affinity {
                spec["affinity"] = Value::Object(affinity);
            }
            if let Some(s) = scheduler {
                spec["schedulerName"] = json!(s);
            }
            let mut metadata = json!({"name": "tm-1", "labels": {"component": "taskmanager"}});
            if let Some(a) = annotations {
                metadata["annotations"] = a;
            }
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
        })
}

fn decision() -> impl Strategy<Value = Decision> {
    // A node's label may or may not name it; its term's weight is its own (graded tiers).
    let node =
        ("[a-z][a-z0-9-]{0,8}", any::<bool>(), 1..=100i32).prop_map(|(name, by_label, weight)| {
            RankedNode {
                name,
                heat: 0.5,
                by_label,
                weight,
            }
        });
    (
        prop::collection::vec(
            (1..=100i32, prop::collection::vec(node.clone(), 1..4))
                .prop_map(|(weight, nodes)| TierChoice { weight, nodes }),
            0..3,
        ),
        prop::collection::vec(node, 0..4),
        0..=100i32,
        prop::collection::vec(("[a-z]{1,5}", "[a-z]{1,5}"), 0..2),
    )
        .prop_map(|(tiers, avoid, avoid_weight, pins)| Decision {
            tiers,
            avoid,
            avoid_weight,
            pinning: pins
                .into_iter()
                .map(|(k, v)| NodeSelectorRequirement {
                    key: k,
                    operator: "In".into(),
                    values: Some(vec![v]),
                })
                .collect(),
            ..Decision::default()
        })
}

/// `after` keeps everything `before` had: objects keep their keys, arrays keep their elements
/// as a prefix, scalars stay equal. `null` may become anything; `schedulerName` may change
/// only from the default.
fn preserved(before: &Value, after: &Value, path: &str) -> Result<(), String> {
    match (before, after) {
        (Value::Null, _) => Ok(()),
        (Value::Object(b), Value::Object(a)) => b.iter().try_for_each(|(k, v)| {
            let p = format!("{path}/{k}");
            match a.get(k) {
                None => Err(format!("{p} removed")),
                Some(_) if p == "/spec/schedulerName" && v == "default-scheduler" => Ok(()),
                Some(av) => preserved(v, av, &p),
            }
        }),
        (Value::Array(b), Value::Array(a)) => {
            if a.len() < b.len() {
                return Err(format!("{path} shrank"));
            }
            b.iter()
                .zip(a)
                .enumerate()
                .try_for_each(|(i, (bv, av))| preserved(bv, av, &format!("{path}/{i}")))
        }
        (b, a) if b == a => Ok(()),
        (b, a) => Err(format!("{path} changed from {b} to {a}")),
    }
}

/// The pod as the server reads the review's object: once, into its type.
fn typed(pod: &Value) -> Pod {
    serde_json::from_value(pod.clone()).expect("the generated object is a Pod")
}

fn check(pod: &Value, decision: &Decision, node_match: &NodeMatch) -> Result<(), TestCaseError> {
    let read = typed(pod);
    let preferred = super::preferred_terms(decision, node_match);
    let changes = Changes {
        preferred: preferred.into(),
        required: &decision.pinning,
        scheduler_name: Some("placement-scheduler"),
        annotations: vec![("placement-webhook.io/decision", "id=x mode=affinity".into())],
    };
    // The server writes the terms borrowed from the decision: the same patch.
    let borrowed = Changes {
        preferred: Preferred::Json(super::preferred_json(decision, node_match)),
        ..changes.clone()
    };
    let as_values = |changes: &Changes<'_>| -> Result<Value, TestCaseError> {
        let bytes = build(&read, changes)
            .and_then(|p| p.to_bytes().map_err(|e| PatchError::Encode(e.to_string())))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))
    };
    prop_assert_eq!(as_values(&borrowed)?, as_values(&changes)?);
    let patch = build(&read, &changes)
        .map_err(|e| TestCaseError::fail(e.to_string()))?
        .to_json_patch()
        .map_err(|e| TestCaseError::fail(format!("patch is not RFC 6902: {e}")))?;
    for op in &patch.0 {
        prop_assert!(matches!(op, PatchOperation::Add(_)), "non-add op {op:?}");
    }
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &patch)
        .map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}\n{patch:?}\n{pod}")))?;
    let typed: Pod = serde_json::from_value(patched.clone())
        .map_err(|e| TestCaseError::fail(format!("not a Pod: {e}")))?;
    preserved(pod, &patched, "").map_err(TestCaseError::fail)?;

    let spec = typed.spec.as_ref().expect("spec");
    let na = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    for term in na
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flatten()
    {
        prop_assert!((1..=100).contains(&term.weight), "weight {}", term.weight);
        for f in term.preference.match_fields.iter().flatten() {
            prop_assert_eq!(
                f.values.as_ref().map(Vec::len),
                Some(1),
                "matchFields need one value"
            );
        }
    }
    if !decision.pinning.is_empty() {
        let terms = &na
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .expect("required affinity")
            .node_selector_terms;
        prop_assert!(!terms.is_empty());
        for term in terms {
            let exprs = term.match_expressions.as_deref().unwrap_or_default();
            for pin in &decision.pinning {
                prop_assert!(exprs.contains(pin), "pin missing from a required term");
            }
        }
    }
    // Each tier names each of its nodes once at its weight, by label value or by name.
    let preferred = na
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map_or(&[][..], Vec::as_slice);
    let existing =
        pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .map_or(0, Vec::len);
    let mut named = named_nodes(&preferred[existing.min(preferred.len())..], node_match);
    let by_label = |n: &RankedNode| n.by_label && matches!(node_match, NodeMatch::Label { .. });
    let mut want: Vec<(i32, String, &str, bool)> = decision
        .tiers
        .iter()
        .flat_map(|t| {
            t.nodes
                .iter()
                .map(move |n| (n.weight, n.name.clone(), "In", by_label(n)))
        })
        .chain(
            decision
                .avoid
                .iter()
                .filter(|_| decision.avoid_weight > 0)
                .map(|n| (decision.avoid_weight, n.name.clone(), "NotIn", by_label(n))),
        )
        .collect();
    named.sort();
    want.sort();
    prop_assert_eq!(named, want);
    let annotations = typed.metadata.annotations.expect("annotations");
    prop_assert!(annotations.contains_key("placement-webhook.io/decision"));
    let original = pod["spec"]["schedulerName"].as_str();
    let want = match original {
        None | Some("default-scheduler") => "placement-scheduler",
        Some(other) => other,
    };
    prop_assert_eq!(spec.scheduler_name.as_deref(), Some(want));
    Ok(())
}

/// (weight, node name, operator, named by label) for each node the added terms name.
fn named_nodes<'a>(
    terms: &[k8s_openapi::api::core::v1::PreferredSchedulingTerm],
    node_match: &NodeMatch,
) -> Vec<(i32, String, &'a str, bool)> {
    let mut named = Vec::new();
    for term in terms {
        let operator_of = |op: &str| if op == "In" { "In" } else { "NotIn" };
        for e in term.preference.match_expressions.iter().flatten() {
            match node_match {
                NodeMatch::Label { key } => assert_eq!(&e.key, key),
                NodeMatch::Name => panic!("a label term when nodes go by name: {e:?}"),
            }
            for value in e.values.iter().flatten() {
                named.push((term.weight, value.clone(), operator_of(&e.operator), true));
            }
        }
        for f in term.preference.match_fields.iter().flatten() {
            assert_eq!(f.key, "metadata.name");
            for value in f.values.iter().flatten() {
                named.push((term.weight, value.clone(), operator_of(&f.operator), false));
            }
        }
    }
    named
}

proptest! {
    #![proptest_config(seeded::config(512))]

    #[test]
    fn patch_applies_and_preserves_by_name(pod in pod(), decision in decision()) {
        check(&pod, &decision, &NodeMatch::Name)?;
    }

    #[test]
    fn patch_applies_and_preserves_by_label(pod in pod(), decision in decision()) {
        check(&pod, &decision, &NodeMatch::Label { key: "kubernetes.io/hostname".into() })?;
    }
}

#[test]
fn metadata_that_may_be_missing_is_written_whole() {
    let changes = Changes {
        annotations: vec![("placement-webhook.io/decision", "v".into())],
        ..Default::default()
    };
    for mut pod in [
        json!({"spec": {"containers": []}}),
        json!({"metadata": {}, "spec": {"containers": []}}),
    ] {
        let patch = build(&typed(&pod), &changes)
            .and_then(|p| {
                p.to_json_patch()
                    .map_err(|e| PatchError::Encode(e.to_string()))
            })
            .expect("patch");
        json_patch::patch(&mut pod, &patch).expect("the patch applies");
        assert_eq!(
            pod["metadata"]["annotations"]["placement-webhook.io/decision"],
            "v"
        );
    }
}

#[test]
fn annotation_key_is_pointer_escaped() {
    let pod = json!({"metadata": {"annotations": {"a": "b"}}, "spec": {"containers": []}});
    let changes = Changes {
        annotations: vec![("placement-webhook.io/decision", "v".into())],
        ..Default::default()
    };
    let patch = build(&typed(&pod), &changes).expect("patch");
    let text = serde_json::to_string(&patch).expect("json");
    assert!(
        text.contains("/metadata/annotations/placement-webhook.io~1decision"),
        "{text}"
    );
}

#[test]
fn large_pod_gets_targeted_ops_only() {
    let env: Vec<Value> = (0..4000)
        .map(|i| json!({"name": format!("VAR_{i}"), "value": "x".repeat(32)}))
        .collect();
    let pod = json!({
        "metadata": {"name": "big", "annotations": {}},
        "spec": {"containers": [{"name": "flink-main-container", "env": env}]}
    });
    assert!(serde_json::to_vec(&pod).expect("json").len() > 200_000);
    let decision = Decision {
        tiers: vec![TierChoice {
            weight: 100,
            nodes: vec![RankedNode {
                name: "n1".into(),
                heat: 0.1,
                by_label: false,
                weight: 100,
            }],
        }],
        ..Default::default()
    };
    let changes = Changes {
        preferred: super::preferred_terms(&decision, &NodeMatch::Name).into(),
        annotations: vec![("placement-webhook.io/decision", "v".into())],
        ..Default::default()
    };
    let patch = build(&typed(&pod), &changes).expect("patch");
    let bytes = serde_json::to_vec(&patch).expect("json");
    assert!(bytes.len() < 1024, "patch is {} bytes", bytes.len());
}
