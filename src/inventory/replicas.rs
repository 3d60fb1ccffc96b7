//! The live replicas of this webhook, from its own Service's EndpointSlices (read-only), and
//! this replica's name from the downward API (`POD_NAME`, `POD_NAMESPACE`). Handed to the
//! caller on every change (the app turns them into the decisions' replica set); while either is
//! unknown, decisions go on as if this replica were alone.

use std::future::Future;

use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use tracing::{debug, info};

/// The label EndpointSlices carry to name their Service.
const SERVICE_LABEL: &str = "kubernetes.io/service-name";

/// Who this replica is, and where its Service lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub pod: String,
    pub namespace: String,
    pub service: String,
}

impl Identity {
    /// From the downward API's `POD_NAME` and `POD_NAMESPACE`; `None` when either is unset.
    pub fn from_env(service: &str) -> Option<Self> {
        let read = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Some(Identity {
            pod: read("POD_NAME")?,
            namespace: read("POD_NAMESPACE")?,
            service: service.to_string(),
        })
    }
}

/// The pods behind the Service's ready endpoints (an endpoint whose readiness is unknown counts
/// as ready, as the EndpointSlice API says it should be read).
pub fn members_of<'a>(slices: impl IntoIterator<Item = &'a EndpointSlice>) -> Vec<String> {
    let mut members: Vec<String> = slices
        .into_iter()
        .flat_map(|slice| slice.endpoints.iter())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .filter_map(|e| e.target_ref.as_ref())
        .filter(|r| r.kind.as_deref() == Some("Pod"))
        .filter_map(|r| r.name.clone())
        .collect();
    members.sort();
    members.dedup();
    members
}

/// Watches the Service's EndpointSlices and hands the ready members to `publish` whenever they
/// change, until `shutdown`. Watch errors are retried with backoff; the last members keep
/// serving meanwhile.
#[tracing::instrument(name = "replica_watch", skip_all, fields(service = %identity.service))]
pub async fn watch_replicas(
    client: Client,
    identity: &Identity,
    publish: impl Fn(&[String]) + Send,
    shutdown: impl Future<Output = ()> + Send,
) {
    let api = Api::<EndpointSlice>::namespaced(client, &identity.namespace);
    let config =
        watcher::Config::default().labels(&format!("{SERVICE_LABEL}={}", identity.service));
    let (reader, writer) = reflector::store::<EndpointSlice>();
    let events = watcher::watcher(api, config)
        .default_backoff()
        .reflect(writer);
    let mut events = std::pin::pin!(events);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut last: Option<Vec<String>> = None;
    loop {
        tokio::select! {
            () = &mut shutdown => {
                debug!("replica watch stopped");
                return;
            }
            event = events.next() => match event {
                Some(Ok(_)) => {
                    let slices = reader.state();
                    let members = members_of(slices.iter().map(|s| s.as_ref()));
                    if last.as_ref() != Some(&members) {
                        info!(replicas = members.len(), "replica set");
                        publish(&members);
                        last = Some(members);
                    }
                }
                Some(Err(error)) => debug!(%error, "replica watch error; retrying"),
                None => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "placement-webhook-abc", "namespace": "placement-webhook",
                          "labels": {SERVICE_LABEL: "placement-webhook"}},
            "addressType": "IPv4",
            "endpoints": endpoints,
        }))
        .expect("an EndpointSlice")
    }

    #[test]
    fn ready_pod_endpoints_are_the_members() {
        let a = slice(json!([
            {"addresses": ["10.0.0.1"], "conditions": {"ready": true},
             "targetRef": {"kind": "Pod", "name": "placement-webhook-7d9f-b", "namespace": "placement-webhook"}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": false},
             "targetRef": {"kind": "Pod", "name": "placement-webhook-7d9f-x"}},
            {"addresses": ["10.0.0.3"],
             "targetRef": {"kind": "Pod", "name": "placement-webhook-7d9f-a"}},
        ]));
        // The same pod in a second slice (dual stack) counts once.
        let b = slice(json!([
            {"addresses": ["fd00::1"], "conditions": {"ready": true},
             "targetRef": {"kind": "Pod", "name": "placement-webhook-7d9f-b"}},
            {"addresses": ["10.0.0.9"], "conditions": {"ready": true}},
        ]));
        assert_eq!(
            members_of([&a, &b]),
            vec!["placement-webhook-7d9f-a", "placement-webhook-7d9f-b"]
        );
    }
}
