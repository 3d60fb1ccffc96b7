//! The heat band each node's label holds, as the node watch reads it back: kept beside the
//! view, not in it, so that a relabel changes one entry here instead of rebuilding the view of
//! every node. The keeper reconciles against it (`bands::keeper`): a replica that takes over or
//! restarts writes only the nodes whose band is wrong.

use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Node;

use crate::hashing::HashMap;

/// Node name -> the band its label holds (absent: no label, or not a band number).
#[derive(Debug, Default)]
pub(crate) struct NodeBands {
    key: String,
    bands: RwLock<HashMap<String, u32>>,
    /// The node watch has listed every node once: until then an absent entry says nothing.
    listed: AtomicBool,
    /// Bumped at every change of a band read back.
    version: AtomicU64,
}

impl NodeBands {
    /// Bands read from the label `key`.
    pub(crate) fn new(key: &str) -> Self {
        NodeBands {
            key: key.to_string(),
            ..NodeBands::default()
        }
    }

    /// The label the bands are read from.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// `node` as the watch delivered it (listed or changed).
    pub(crate) fn saw(&self, node: &Node) {
        let Some(name) = node.metadata.name.as_deref() else {
            return;
        };
        let band = (node.metadata.labels.as_ref())
            .and_then(|labels| labels.get(&self.key))
            .and_then(|value| value.parse::<u32>().ok());
        let mut bands = self.bands.write().unwrap_or_else(|e| e.into_inner());
        let before = match band {
            Some(band) => bands.insert(name.to_string(), band),
            None => bands.remove(name),
        };
        if before != band {
            self.version.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `node` was deleted.
    pub(crate) fn gone(&self, node: &Node) {
        if let Some(name) = node.metadata.name.as_deref() {
            let mut bands = self.bands.write().unwrap_or_else(|e| e.into_inner());
            if bands.remove(name).is_some() {
                self.version.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A complete list has been read (a relist replaces what was read before).
    pub(crate) fn set_listed(&self) {
        self.listed.store(true, Ordering::Relaxed);
    }

    /// Nodes that left while the watch was away: a relist names every node there is.
    pub(crate) fn keep_only<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        let names: crate::hashing::HashSet<&str> = names.into_iter().collect();
        let mut bands = self.bands.write().unwrap_or_else(|e| e.into_inner());
        let before = bands.len();
        bands.retain(|name, _| names.contains(name.as_str()));
        if bands.len() != before {
            self.version.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Changes with every band read back that differs from the one before.
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    pub(crate) fn listed(&self) -> bool {
        self.listed.load(Ordering::Relaxed)
    }

    /// Reads the bands under the lock: `read(&bands)`.
    pub(crate) fn read<T>(&self, read: impl FnOnce(&HashMap<String, u32>) -> T) -> T {
        let bands = self.bands.read().unwrap_or_else(|e| e.into_inner());
        read(&bands)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, band: Option<&str>) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some(name.into());
        if let Some(band) = band {
            node.metadata.labels = Some([("band".to_string(), band.to_string())].into());
        }
        node
    }

    #[test]
    fn a_label_read_back_is_kept_until_it_goes_and_a_relist_forgets_the_departed() {
        let bands = NodeBands::new("band");
        assert!(!bands.listed());
        bands.saw(&node("a", Some("3")));
        bands.saw(&node("b", Some("not a band")));
        bands.saw(&node("c", Some("0")));
        bands.set_listed();
        assert!(bands.listed());
        assert_eq!(
            bands.read(|b| (b.get("a").copied(), b.get("b").copied())),
            (Some(3), None)
        );
        let version = bands.version();
        bands.saw(&node("a", Some("3")));
        assert_eq!(bands.version(), version, "the same band read again");
        bands.saw(&node("a", None));
        assert!(bands.version() > version);
        bands.gone(&node("c", Some("0")));
        assert_eq!(bands.read(|b| b.len()), 0);
        bands.saw(&node("d", Some("5")));
        bands.saw(&node("e", Some("6")));
        bands.keep_only(["e"]);
        assert_eq!(bands.read(|b| b.keys().cloned().collect::<Vec<_>>()), ["e"]);
    }
}
