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

mod affinity;
mod cycle;
mod spread;
