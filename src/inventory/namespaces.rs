//! Namespace labels, for pod affinity terms that pick namespaces by `namespaceSelector`.
//! Only metadata is watched (namespaces are few); the ledger gets the whole map on a change.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use tracing::debug;

use crate::inflight::shared::SharedWorld;
use crate::scheduler::pods::Labels;

/// Every namespace's labels (a namespace without labels maps to an empty set).
pub(crate) fn labels_of<'a>(
    namespaces: impl IntoIterator<Item = &'a PartialObjectMeta<Namespace>>,
) -> BTreeMap<String, Labels> {
    namespaces
        .into_iter()
        .filter_map(|ns| {
            let name = ns.metadata.name.clone()?;
            Some((name, ns.metadata.labels.clone().unwrap_or_default()))
        })
        .collect()
}

/// Watches namespaces' metadata and hands their labels to the ledger whenever they change,
/// until `shutdown`. Watch errors are retried with backoff; the last labels stand meanwhile.
#[tracing::instrument(name = "namespace_watch", skip_all)]
pub(crate) async fn watch_namespaces(
    client: Client,
    world: Arc<SharedWorld>,
    shutdown: impl Future<Output = ()> + Send,
) {
    // An `Api` of `PartialObjectMeta` lists and watches metadata only.
    let api = Api::<PartialObjectMeta<Namespace>>::all(client);
    let (reader, writer) = reflector::store();
    let events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let mut events = std::pin::pin!(events);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => {
                debug!("namespace watch stopped");
                return;
            }
            event = events.next() => match event {
                Some(Ok(_)) => {
                    let state = reader.state();
                    let labels = labels_of(state.iter().map(|n| n.as_ref()));
                    let mut world = world.write();
                    if *world.cluster.namespace_labels() != labels {
                        debug!(namespaces = labels.len(), "namespace labels");
                        world.cluster.set_namespace_labels(labels);
                    }
                }
                Some(Err(error)) => debug!(%error, "namespace watch error; retrying"),
                None => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_by_namespace_name() {
        let ns: Vec<PartialObjectMeta<Namespace>> = serde_json::from_value(serde_json::json!([
            {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
             "metadata": {"name": "batch", "labels": {"team": "etl"}}},
            {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
             "metadata": {"name": "bare"}}
        ]))
        .expect("namespaces");
        let labels = labels_of(&ns);
        assert_eq!(labels["batch"].get("team").map(String::as_str), Some("etl"));
        assert!(labels["bare"].is_empty());
    }
}
