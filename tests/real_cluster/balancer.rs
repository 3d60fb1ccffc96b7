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
                let start = next.fetch_add(1, Ordering::Relaxed);
                let backends = backends.clone();
                tokio::spawn(async move {
                    // A backend that refuses is skipped, as a Service drops an endpoint that is
                    // not ready.
                    for i in 0..backends.len() {
                        let backend = backends[(start + i) % backends.len()];
                        if let Ok(mut outbound) = TcpStream::connect(backend).await {
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
