//! A per-connection round-robin TCP balancer on loopback, as a Service's virtual IP is to the
//! apiserver: each new connection goes to the next backend; a connection stays where it went.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct Balancer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Balancer {
    pub async fn start(backends: Vec<SocketAddr>) -> Balancer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let next = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                // kube-proxy forwards in the kernel and adds no delay of its own; a userspace
                // copy with Nagle on would hold a response's second segment for the peer's
                // delayed ACK (about 40 ms) and hide both webhooks' latency behind it.
                let _ = inbound.set_nodelay(true);
                let start = next.fetch_add(1, Ordering::Relaxed);
                let backends = backends.clone();
                tokio::spawn(async move {
                    // A backend that refuses is skipped, as a Service drops an endpoint that is
                    // not ready.
                    for i in 0..backends.len() {
                        let backend = backends[(start + i) % backends.len()];
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
        Balancer { addr, task }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
