//! The replicas of this webhook from the EndpointSlices of two Services (read-only): the live
//! ones behind `<service>-replicas`, and the deciding one behind `<service>` (see
//! [`super::election`]); and this replica's name from the downward API (`POD_NAME`,
//! `POD_NAMESPACE`). Handed to the caller on every change (the app turns them into the
//! decisions' replica set and the forwarding target); while either is unknown, decisions go on
//! as if this replica were alone.

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
    pub(crate) fn from_env(service: &str) -> Option<Self> {
        let read = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Some(Identity {
            pod: read("POD_NAME")?,
            namespace: read("POD_NAMESPACE")?,
            service: service.to_string(),
        })
    }
}

/// One live replica: its pod name and, when the slice gives one, where it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// `https://address:port`, from the endpoint's first address and the slice's first port.
    pub url: Option<String>,
}

impl Member {
    /// Of the webhook Service's members, the one that decides: the only one the deciding
    /// replica's slice names (or, where a Service selects every replica, the lowest-named one
    /// that can be reached: all replicas that know the same members pick the same one).
    pub(crate) fn decider(members: &[Member]) -> Option<&Member> {
        members
            .iter()
            .filter(|m| m.url.is_some())
            .min_by(|a, b| a.name.cmp(&b.name))
    }
}

/// The pods behind the Service's ready endpoints (an endpoint whose readiness is unknown counts
/// as ready, as the EndpointSlice API says it should be read), sorted by name. A pod listed in
/// several slices (dual stack) counts once, with the first address found.
pub(crate) fn members_of<'a>(slices: impl IntoIterator<Item = &'a EndpointSlice>) -> Vec<Member> {
    let mut members: Vec<Member> = slices
        .into_iter()
        .flat_map(|slice| {
            let port = slice
                .ports
                .iter()
                .flatten()
                .find_map(|p| p.port)
                .and_then(|p| u16::try_from(p).ok());
            slice.endpoints.iter().map(move |e| (e, port))
        })
        .filter(|(e, _)| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .filter_map(|(e, port)| {
            let pod = e.target_ref.as_ref()?;
            (pod.kind.as_deref() == Some("Pod")).then_some(())?;
            let url = e.addresses.first().zip(port).map(|(address, port)| {
                if address.contains(':') {
                    format!("https://[{address}]:{port}")
                } else {
                    format!("https://{address}:{port}")
                }
            });
            Some(Member {
                name: pod.name.clone()?,
                url,
            })
        })
        .collect();
    // Sorted by name, then with a known address first, so dedup keeps an address when any
    // slice has one.
    members.sort_by(|a, b| {
        a.name
            .cmp(&b.name)
            .then_with(|| b.url.is_some().cmp(&a.url.is_some()))
    });
    members.dedup_by(|later, first| later.name == first.name);
    members
}

/// The Service whose endpoints are the live replicas, beside `service` (which the apiserver
/// calls, and whose one endpoint is the deciding replica).
pub(crate) fn replicas_service(service: &str) -> String {
    format!("{service}-replicas")
}

/// Watches the EndpointSlices of `service` in `namespace` and hands the ready members to
/// `publish` whenever they change, until `shutdown`. Watch errors are retried with backoff; the
/// last members keep serving meanwhile.
#[tracing::instrument(name = "replica_watch", skip_all, fields(service = %service))]
pub(crate) async fn watch_replicas(
    client: Client,
    namespace: &str,
    service: &str,
    publish: impl Fn(&[Member]) + Send,
    shutdown: impl Future<Output = ()> + Send,
) {
    let api = Api::<EndpointSlice>::namespaced(client, namespace);
    let config = watcher::Config::default().labels(&format!("{SERVICE_LABEL}={service}"));
    let (reader, writer) = reflector::store::<EndpointSlice>();
    let events = watcher::watcher(api, config)
        .default_backoff()
        .reflect(writer);
    let mut events = std::pin::pin!(events);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut last: Option<Vec<Member>> = None;
    loop {
        tokio::select! {
            () = &mut shutdown => {
                debug!("replica watch stopped");
                return;
            }
            event = events.next() => match event {
                // Mid-list the store holds only part of the slices (none at first): handing
                // that over would name a decider from a partial set.
                Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => {}
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
        let names: Vec<String> = members_of([&a, &b]).into_iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            vec!["placement-webhook-7d9f-a", "placement-webhook-7d9f-b"]
        );
    }

    #[test]
    fn members_carry_where_they_serve_and_the_lowest_reachable_name_decides() {
        let mut v4 = slice(json!([
            {"addresses": ["10.0.0.7"], "targetRef": {"kind": "Pod", "name": "webhook-b"}},
        ]));
        v4.ports = Some(vec![
            serde_json::from_value(json!({"name": "https", "port": 8443})).expect("a port"),
        ]);
        let mut v6 = slice(json!([
            {"addresses": ["fd00::7"], "targetRef": {"kind": "Pod", "name": "webhook-c"}},
        ]));
        v6.ports = v4.ports.clone();
        // No ports in this slice: the member is known, but cannot be forwarded to.
        let portless = slice(json!([
            {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": "webhook-a"}},
        ]));
        let members = members_of([&portless, &v4, &v6]);
        let urls: Vec<Option<&str>> = members.iter().map(|m| m.url.as_deref()).collect();
        assert_eq!(
            urls,
            vec![
                None,
                Some("https://10.0.0.7:8443"),
                Some("https://[fd00::7]:8443")
            ]
        );
        let decider = Member::decider(&members).map(|m| m.name.as_str());
        assert_eq!(decider, Some("webhook-b"));
        assert_eq!(Member::decider(&members[..1]), None);
    }
}
