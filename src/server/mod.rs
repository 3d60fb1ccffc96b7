//! The HTTPS server: TLS accept loop, HTTP/1.1 connections, graceful shutdown.

pub(crate) mod forward;
pub(crate) mod routes;
pub(crate) mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

pub(crate) use routes::{AppState, router};
pub(crate) use tls::ServerTls;

/// How long in-flight reviews get to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves `state` on `listener` until `shutdown` resolves, then lets open requests finish.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Arc<ServerTls>,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) {
    let app = router(state.clone());
    let acceptor = tls.acceptor();
    let header_timeout = state.limits.header_read_timeout;
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(app.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            // A client that never finishes the handshake must not hold a task forever.
            let tls_stream = match tokio::time::timeout(header_timeout, acceptor.accept(tcp)).await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true);
            let conn = builder.serve_connection(TokioIo::new(tls_stream), service);
            if let Err(e) = watcher.watch(conn).await {
                debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    info!("shutting down: finishing in-flight reviews");
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("some connections did not finish in time");
    }
}
