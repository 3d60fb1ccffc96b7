//! A Service's virtual IP on loopback, as kube-proxy makes it: each new connection goes to an
//! endpoint of the Service at that moment; a connection stays where it went. Either the one
//! endpoint the webhook Service's EndpointSlice names (the deciding replica, which writes itself
//! there; with none, or one that refuses, the connection is dropped and the apiserver fails
//! open), or round robin over fixed backends (a Service selecting every replica of a stateless
//! webhook).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, Client};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How often the slice is read (kube-proxy follows a watch; this is well inside a second).
const POLL: Duration = Duration::from_millis(50);

pub struct Balancer {
    pub addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl Balancer {
    /// Follows the EndpointSlice `name` in `namespace`: its one ready endpoint's port, on
    /// 127.0.0.1 (the replicas all serve on loopback).
    pub async fn following(client: Client, namespace: &str, name: &str) -> Balancer {
        let target = Arc::new(AtomicU16::new(0));
        let follow = {
            let (target, name) = (target.clone(), name.to_string());
            let slices = Api::<EndpointSlice>::namespaced(client, namespace);
            tokio::spawn(async move {
                loop {
                    if let Ok(slice) = slices.get(&name).await {
                        target.store(endpoint_port(&slice).unwrap_or(0), Ordering::Relaxed);
                    }
                    tokio::time::sleep(POLL).await;
                }
            })
        };
        let mut balancer = Balancer::serve(move || {
            let port = target.load(Ordering::Relaxed);
            (port != 0)
                .then(|| SocketAddr::from(([127, 0, 0, 1], port)))
                .into_iter()
                .collect()
        })
        .await;
        balancer.tasks.push(follow);
        balancer
    }

    /// Round robin over `backends`; a backend that refuses is skipped, as a Service drops an
    /// endpoint that is not ready. (The latency bench's do-nothing webhook, which has no state.)
    #[allow(dead_code)]
    pub async fn start(backends: Vec<SocketAddr>) -> Balancer {
        let next = AtomicUsize::new(0);
        Balancer::serve(move || {
            let start = next.fetch_add(1, Ordering::Relaxed);
            (0..backends.len())
                .map(|i| backends[(start + i) % backends.len()])
                .collect()
        })
        .await
    }

    /// Sends each new connection to the first of `backends()` (then in turn) that accepts.
    async fn serve(backends: impl Fn() -> Vec<SocketAddr> + Send + 'static) -> Balancer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                // kube-proxy forwards in the kernel and adds no delay of its own; a userspace
                // copy with Nagle on would hold a response's second segment for the peer's
                // delayed ACK (about 40 ms) and hide both webhooks' latency behind it.
                let _ = inbound.set_nodelay(true);
                let backends = backends();
                tokio::spawn(async move {
                    for backend in backends {
                        if let Ok(mut outbound) = TcpStream::connect(backend).await {
                            let _ = outbound.set_nodelay(true);
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                            return;
                        }
                    }
                });
            }
        });
        Balancer {
            addr,
            tasks: vec![accept],
        }
    }
}

/// The port of the slice's one ready endpoint.
pub fn endpoint_port(slice: &EndpointSlice) -> Option<u16> {
    let [endpoint] = slice.endpoints.as_slice() else {
        return None;
    };
    if endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
        return None;
    }
    let port = slice.ports.as_ref()?.first()?.port?;
    u16::try_from(port).ok()
}

impl Drop for Balancer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
