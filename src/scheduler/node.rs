//! A node as the scheduler's cache sees it.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::resources::{PodRequests, Resources};
use super::terms::Taint;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelNode {
    pub name: String,
    /// Shared with the view's node and the snapshot or inventory it came from: read, never
    /// changed, and at 5,000 nodes each copy would cost megabytes.
    pub labels: Arc<BTreeMap<String, String>>,
    /// Every taint, whatever its effect.
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub allocatable: Resources,
    /// Sum of the requests of the pods on the node as written; `pods` counts them.
    pub requested: Resources,
    /// cpu and memory with the non-zero defaults for omitted requests (LeastAllocated).
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
}

impl AsRef<ModelNode> for ModelNode {
    fn as_ref(&self) -> &ModelNode {
        self
    }
}

impl ModelNode {
    pub fn new(
        name: &str,
        labels: impl Into<Arc<BTreeMap<String, String>>>,
        allocatable: Resources,
    ) -> Self {
        ModelNode {
            name: name.to_string(),
            labels: labels.into(),
            allocatable,
            ..ModelNode::default()
        }
    }

    /// Accounts a pod bound to this node, as the scheduler cache does on assume/bind.
    pub fn add_pod(&mut self, pod: &PodRequests) {
        self.requested.add(&pod.requested);
        self.requested.pods += 1;
        self.non_zero_milli_cpu += pod.non_zero_milli_cpu;
        self.non_zero_memory += pod.non_zero_memory;
    }

    /// The Fit filter: one more pod must fit, and every non-zero request in what is left.
    pub(crate) fn fits(&self, pod: &PodRequests) -> bool {
        fits_in(&self.allocatable, |name| self.requested.get(name), pod)
    }
}

/// The Fit filter on a node whose requested amount of each resource `requested` gives, for
/// callers that hold the node's requests in parts rather than as one [`ModelNode`].
pub(crate) fn fits_in(
    allocatable: &Resources,
    requested: impl Fn(&str) -> i64,
    pod: &PodRequests,
) -> bool {
    use super::resources::PODS;
    let max_pods = allocatable.pods;
    if max_pods > 0 && requested(PODS) + 1 > max_pods {
        return false;
    }
    pod.requested
        .iter()
        .filter(|(name, value)| *name != PODS && *value > 0)
        .all(|(name, value)| value <= allocatable.get(name) - requested(name))
}
