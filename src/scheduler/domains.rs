//! Topology domains numbered per key: the plugins that count pods by domain (InterPodAffinity's
//! score) add up per domain number instead of hashing a label value for every pod counted.

use std::sync::Arc;

use crate::hashing::HashMap;

use super::node::ModelNode;

/// A node without the key's label is in no domain.
const NO_DOMAIN: u32 = u32::MAX;

/// The domain of every node for one topology key, numbered from 0 in node order.
#[derive(Debug, Clone)]
pub(crate) struct Domains {
    /// One number per node, then the count of domains.
    numbers: Arc<[u32]>,
}

impl Domains {
    /// The domains of `key` over `nodes`.
    pub(crate) fn of<N: AsRef<ModelNode>>(nodes: &[N], key: &str) -> Self {
        Domains::from(Arc::<[u32]>::from(Self::numbered(nodes, key)))
    }

    /// What [`Domains::of`] holds, as a list a memo can keep and [`Domains::from`] reads back.
    pub(crate) fn numbered<N: AsRef<ModelNode>>(nodes: &[N], key: &str) -> Vec<u32> {
        let mut by_value: HashMap<&str, u32> = HashMap::default();
        let mut numbers: Vec<u32> = nodes
            .iter()
            .map(|node| match node.as_ref().labels.get(key) {
                Some(value) => {
                    let next = u32::try_from(by_value.len()).unwrap_or(NO_DOMAIN);
                    *by_value.entry(value.as_str()).or_insert(next)
                }
                None => NO_DOMAIN,
            })
            .collect();
        numbers.push(u32::try_from(by_value.len()).unwrap_or(NO_DOMAIN));
        numbers
    }

    /// How many domains there are.
    pub(crate) fn count(&self) -> usize {
        self.numbers.last().map_or(0, |&n| n as usize)
    }

    /// The domain of the node at `node`; `None` when it lacks the label (or is not listed).
    #[inline]
    pub(crate) fn of_node(&self, node: usize) -> Option<usize> {
        let nodes = self.numbers.len().saturating_sub(1);
        (node < nodes)
            .then(|| self.numbers[node])
            .filter(|&d| d != NO_DOMAIN)
            .map(|d| d as usize)
    }
}

impl From<Arc<[u32]>> for Domains {
    /// A list made by [`Domains::numbered`].
    fn from(numbers: Arc<[u32]>) -> Self {
        Domains { numbers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn node(name: &str, zone: Option<&str>) -> ModelNode {
        let labels: BTreeMap<String, String> = zone
            .map(|z| ("zone".to_string(), z.to_string()))
            .into_iter()
            .collect();
        ModelNode::new(name, labels, Default::default())
    }

    #[test]
    fn nodes_sharing_a_value_share_a_domain() {
        let nodes = [
            node("a", Some("z1")),
            node("b", None),
            node("c", Some("z2")),
            node("d", Some("z1")),
        ];
        let domains = Domains::of(&nodes, "zone");
        assert_eq!(domains.count(), 2);
        assert_eq!(domains.of_node(0), domains.of_node(3));
        assert_ne!(domains.of_node(0), domains.of_node(2));
        assert_eq!(domains.of_node(1), None, "no label, no domain");
        assert_eq!(domains.of_node(4), None, "not listed");
        assert_eq!(Domains::of(&nodes, "rack").count(), 0);
    }
}
