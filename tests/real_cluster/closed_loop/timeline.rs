//! When each pod of a burst was bound and when each node's heat band moved, as the apiserver's
//! watches told the test: what the hottest node carried when each of its pods chose it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::task::JoinHandle;

/// What the watches heard, each at its time since the recording began.
#[derive(Debug, Default)]
struct Heard {
    /// node -> (seconds, band) at each change of its label.
    bands: BTreeMap<String, Vec<(f64, String)>>,
    /// pod -> (seconds, node) when its bind was first heard.
    binds: BTreeMap<String, (f64, String)>,
}

/// Records node bands and pod binds until dropped.
pub(super) struct Timeline {
    heard: Arc<Mutex<Heard>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Timeline {
    /// Starts watching `namespace`'s pods and every node's `key` label.
    pub(super) fn start(client: &Client, namespace: &str, key: &str) -> Timeline {
        let heard = Arc::new(Mutex::new(Heard::default()));
        let start = Instant::now();
        let nodes = {
            let heard = heard.clone();
            let key = key.to_string();
            let api = Api::<Node>::all(client.clone());
            tokio::spawn(async move {
                let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
                while let Some(event) = events.next().await {
                    let Some(node) = applied(event) else {
                        continue;
                    };
                    let Some(name) = node.metadata.name.clone() else {
                        continue;
                    };
                    let band = node
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(&key).cloned())
                        .unwrap_or_else(|| "-".into());
                    let mut heard = heard.lock().expect("timeline lock");
                    let changes = heard.bands.entry(name).or_default();
                    if changes.last().is_none_or(|(_, last)| *last != band) {
                        changes.push((start.elapsed().as_secs_f64(), band));
                    }
                }
            })
        };
        let pods = {
            let heard = heard.clone();
            let api = Api::<Pod>::namespaced(client.clone(), namespace);
            tokio::spawn(async move {
                let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
                while let Some(event) = events.next().await {
                    let Some(pod) = applied(event) else {
                        continue;
                    };
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let Some(node) = pod.spec.and_then(|s| s.node_name) else {
                        continue;
                    };
                    let mut heard = heard.lock().expect("timeline lock");
                    heard
                        .binds
                        .entry(name)
                        .or_insert((start.elapsed().as_secs_f64(), node));
                }
            })
        };
        Timeline {
            heard,
            tasks: vec![nodes, pods],
        }
    }

    /// Waits until the node watch has listed `n` nodes, so that the first binds are read
    /// against the bands as they were.
    pub(super) async fn wait_nodes(&self, n: usize) {
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        while self.heard.lock().expect("timeline lock").bands.len() < n {
            assert!(
                Instant::now() < deadline,
                "the timeline's node watch listed < {n} nodes"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// The band `node` carried just before `pod`'s bind was heard, and how long it had carried
    /// it: `tm-00579 at 10.21 s, band 5 for 10.21 s`.
    pub(super) fn at_bind(&self, pod: &str, node: &str) -> String {
        let heard = self.heard.lock().expect("timeline lock");
        let Some(&(at, _)) = heard.binds.get(pod) else {
            return format!("{pod} (bind not heard)");
        };
        let before = heard
            .bands
            .get(node)
            .and_then(|changes| changes.iter().rev().find(|(t, _)| *t <= at));
        match before {
            Some((since, band)) => {
                format!("{pod} at {at:.2} s, band {band} for {:.2} s", at - since)
            }
            None => format!("{pod} at {at:.2} s, no band heard"),
        }
    }

    /// Every band `node` carried, with the time it was heard: `5@0.00 7@10.24`.
    pub(super) fn bands_of(&self, node: &str) -> String {
        let heard = self.heard.lock().expect("timeline lock");
        heard
            .bands
            .get(node)
            .map(|changes| {
                changes
                    .iter()
                    .map(|(t, band)| format!("{band}@{t:.2}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    }
}

/// The object a watch event lists or changes; `None` for the list's bounds, deletions and
/// errors (the watcher retries them).
fn applied<K>(event: Result<watcher::Event<K>, watcher::Error>) -> Option<K> {
    match event {
        Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => Some(object),
        _ => None,
    }
}

impl Drop for Timeline {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
