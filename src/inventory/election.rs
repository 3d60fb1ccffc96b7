//! Which replica decides: the holder of the Lease `<service>-decider`, which writes itself as the
//! only endpoint of the webhook's Service (the EndpointSlice `<service>-decider`, created by the
//! install; the Service has no selector). The apiserver's reviews then reach the deciding
//! replica directly, with no hop between replicas. The others stay warm (they watch the same
//! pods and nodes) and take the Lease once its holder stops renewing it; the new holder writes
//! itself into the slice, and the Service follows.
//!
//! Writes, all by name (the RBAC grants no more): the Lease (get, patch) and the slice (get,
//! patch). The slice is written when this replica takes the Lease and checked again while it
//! holds it, so a slice someone else changed is put back.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder};
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::config::ElectionConfig;

use super::replicas::Identity;

/// How often a holder checks that the Service's slice still names it.
const RECHECK: Duration = Duration::from_secs(5);
/// How long to wait before trying again to join the election when the Lease cannot be read.
const RETRY: Duration = Duration::from_secs(5);
/// The field manager of the slice's writes.
const FIELD_MANAGER: &str = "placement-webhook";

/// This replica standing for the Lease: who it is and where the Service should send reviews.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) identity: Identity,
    /// This pod's address (`POD_IP`), as the slice carries it.
    pub(crate) address: String,
    /// The port this replica serves reviews on.
    pub(crate) port: u16,
    pub(crate) settings: ElectionConfig,
}

impl Candidate {
    /// The Lease and the EndpointSlice, both `<service>-decider`.
    pub(crate) fn object_name(&self) -> String {
        format!("{}-decider", self.identity.service)
    }

    /// The slice's endpoints and ports naming this replica (a merge patch: lists are replaced
    /// whole).
    fn slice_patch(&self) -> Value {
        json!({
            "endpoints": [{
                "addresses": [self.address],
                "conditions": {"ready": true},
                "targetRef": {
                    "kind": "Pod",
                    "name": self.identity.pod,
                    "namespace": self.identity.namespace,
                },
            }],
            "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}],
        })
    }

    /// Whether `slice` already sends the Service's traffic to this replica.
    fn named_by(&self, slice: &EndpointSlice) -> bool {
        let [endpoint] = slice.endpoints.as_slice() else {
            return false;
        };
        let port = slice
            .ports
            .iter()
            .flatten()
            .map(|p| p.port)
            .collect::<Vec<_>>();
        endpoint.addresses == [self.address.clone()]
            && endpoint.conditions.as_ref().and_then(|c| c.ready) != Some(false)
            && endpoint.target_ref.as_ref().and_then(|r| r.name.as_deref())
                == Some(self.identity.pod.as_str())
            && port == [Some(i32::from(self.port))]
    }
}

/// Stands for the Lease until `shutdown`: while this replica holds it, keeps the Service's slice
/// naming it. At shutdown the Lease is released.
#[tracing::instrument(name = "election", skip_all, fields(lease = %candidate.object_name()))]
pub(crate) async fn stand(
    client: Client,
    candidate: Candidate,
    shutdown: impl Future<Output = ()> + Send,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let manager = tokio::select! {
        () = &mut shutdown => return,
        manager = join(&client, &candidate) => manager,
    };
    let (mut holding, task) = manager.watch().await;
    let slices = Api::<EndpointSlice>::namespaced(client, &candidate.identity.namespace);
    let mut recheck = tokio::time::interval(RECHECK);
    let mut held = false;
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            changed = holding.changed() => {
                if changed.is_err() {
                    warn!("the election stopped: this replica no longer stands for the Lease");
                    break;
                }
                held = *holding.borrow_and_update();
                info!(holding = held, "deciding replica: lease {}", if held { "taken" } else { "lost" });
                if held {
                    publish(&slices, &candidate).await;
                }
            }
            _ = recheck.tick(), if held => publish(&slices, &candidate).await,
        }
    }
    // Dropping the receiver makes the manager release the Lease if it holds it.
    drop(holding);
    let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
}

/// The Lease manager, once the Lease can be read (the install creates it).
async fn join(client: &Client, candidate: &Candidate) -> LeaseManager {
    loop {
        let built = LeaseManagerBuilder::new(client.clone(), candidate.object_name())
            .with_namespace(&candidate.identity.namespace)
            .with_create_mode(LeaseCreateMode::UseExistent)
            .with_identity(&candidate.identity.pod)
            .with_duration(candidate.settings.lease_duration.as_secs())
            .with_grace(candidate.settings.renew_before.as_secs())
            .build()
            .await;
        match built {
            Ok(manager) => return manager,
            Err(error) => {
                warn!(%error, "cannot stand for the deciding replica's Lease; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Writes this replica into the Service's slice unless it is there already.
async fn publish(slices: &Api<EndpointSlice>, candidate: &Candidate) {
    let name = candidate.object_name();
    match slices.get(&name).await {
        Ok(slice) if candidate.named_by(&slice) => return,
        Ok(_) => {}
        Err(error) => {
            warn!(%error, slice = %name, "cannot read the Service's EndpointSlice");
            return;
        }
    }
    let patch = Patch::Merge(candidate.slice_patch());
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match slices.patch(&name, &params, &patch).await {
        Ok(_) => info!(slice = %name, address = %candidate.address, port = candidate.port,
            "the Service now sends reviews to this replica"),
        Err(error) => warn!(%error, slice = %name, "cannot write the Service's EndpointSlice"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate() -> Candidate {
        Candidate {
            identity: Identity {
                pod: "placement-webhook-a".into(),
                namespace: "placement-webhook".into(),
                service: "placement-webhook".into(),
            },
            address: "10.0.0.7".into(),
            port: 8443,
            settings: ElectionConfig::default(),
        }
    }

    fn slice(patch: &Value) -> EndpointSlice {
        let mut object = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "placement-webhook-decider"},
            "addressType": "IPv4",
            "endpoints": [],
        });
        json_patch::merge(&mut object, patch);
        serde_json::from_value(object).expect("an EndpointSlice")
    }

    #[test]
    fn the_slice_written_names_this_replica_and_another_does_not() {
        let me = candidate();
        assert_eq!(me.object_name(), "placement-webhook-decider");
        assert!(!me.named_by(&slice(&json!({}))), "an empty slice");
        let written = slice(&me.slice_patch());
        assert!(me.named_by(&written));
        let mut other = me.clone();
        other.identity.pod = "placement-webhook-b".into();
        other.address = "10.0.0.8".into();
        assert!(!other.named_by(&written));
        let mut moved = me.clone();
        moved.port = 9443;
        assert!(!moved.named_by(&written), "a port that changed");
    }
}
