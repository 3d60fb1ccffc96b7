//! One look at the cluster, for commands that run once (`simulate`, `hotspots`): every node's
//! facts, the requests bound to each and the running TaskManagers, listed rather than watched.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, ObjectList};
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::Inventory;
use super::nodes::node_facts;
use super::pods::{UNFINISHED_PODS, record_seen};
use crate::cluster::ClusterPicture;
use crate::scheduler::PodRequests;

/// Items per list page: large clusters come back in pages, as kubectl reads them.
const PAGE: u32 = 500;

/// What the scheduler's cache would hold: the nodes, and the pods as the pod watch keeps them
/// (the requests bound to each node, the running TaskManagers and steered pods).
#[derive(Debug, Default)]
pub struct ClusterState {
    pub inventory: Inventory,
    pub pods: ClusterPicture,
    /// The unfinished pods a webhook steered (with its decision note): what a replica
    /// starting now would charge.
    pub steered: Vec<Pod>,
}

/// Lists every node and every unfinished pod once.
#[tracing::instrument(name = "cluster_list", skip_all)]
pub async fn list_cluster(client: Client) -> Result<ClusterState, kube::Error> {
    let nodes: Vec<Node> = list_all(&Api::all(client.clone()), ListParams::default()).await?;
    let pods: Vec<Pod> = list_all(
        &Api::all(client),
        ListParams::default().fields(UNFINISHED_PODS),
    )
    .await?;
    let mut state = ClusterState {
        inventory: Inventory {
            nodes: nodes.iter().map(node_facts).collect(),
        },
        pods: ClusterPicture::default(),
        steered: Vec::new(),
    };
    for pod in pods {
        if record_seen(&mut state.pods, &pod, false, &PodRequests::of(&pod)).is_some() {
            state.steered.push(pod);
        }
    }
    tracing::info!(
        nodes = state.inventory.nodes.len(),
        bound_pods = state.pods.occupancy.pods(),
        running_taskmanagers = state.pods.running.len(),
        "listed the cluster"
    );
    Ok(state)
}

/// Every page of a list.
async fn list_all<K>(api: &Api<K>, params: ListParams) -> Result<Vec<K>, kube::Error>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut items = Vec::new();
    let mut params = params.limit(PAGE);
    loop {
        let page: ObjectList<K> = api.list(&params).await?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}
