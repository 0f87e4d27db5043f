//! The accept loop: one task per connection, TLS when configured, HTTP/1.1 with keep-alive by
//! hyper, a web configuration that a reload can replace, and a graceful stop.

use super::auth::BasicAuth;
use super::{WebError, WebSettings};
use crate::exposition::CHUNK_BYTES;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_io_timeout::TimeoutStream;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;
use tracing::{debug, info, warn};

/// How long to wait for connections to finish after `shutdown` when requests have no timeout.
const DRAIN_WITHOUT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Time on top of the request timeout for the last responses to be written out.
const DRAIN_MARGIN: Duration = Duration::from_secs(1);
/// Pause after an accept error that is not about one connection (e.g. out of file descriptors).
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(500);

/// What the web configuration decides, ready for connections: the routes with the layers it
/// asks for (basic auth, headers, rate limit) and TLS. A reload of the web configuration file
/// makes a new one: connections accepted afterwards handshake with its TLS settings, and every
/// request from then on, on old connections too, passes its layers.
pub struct WebStack {
    /// The routes with every layer around them.
    router: Router,
    tls: Option<TlsAcceptor>,
    /// Closed at shutdown (see [`BasicAuth::close`]).
    auth: Option<Arc<BasicAuth>>,
    settings: WebSettings,
}

impl WebStack {
    /// Fails when the certificates or keys the configuration names cannot be loaded. What the
    /// configuration asks for that is not honoured as written is logged, at start and at each
    /// reload that puts it in force.
    pub fn new(routes: Router, settings: WebSettings) -> Result<Arc<Self>, WebError> {
        let tls = match &settings.config {
            Some(config) => config.tls_server_config()?.map(TlsAcceptor::from),
            None => None,
        };
        for warning in settings.config.iter().flat_map(|config| &config.warnings) {
            warn!(problem = %warning, "the web config asks for something that is not honoured as written");
        }
        let (router, auth) = super::pipeline::wrap(routes, &settings);
        Ok(Arc::new(Self { router, tls, auth, settings }))
    }
}

/// Serves on every listener until `shutdown` completes, with the latest of `stacks`. At
/// `shutdown` it stops accepting, lets the requests in flight finish (for at most the request
/// timeout), closes idle connections, and returns. A bad client or a failed handshake closes that
/// one connection and is logged at debug level.
pub async fn serve(
    listeners: Vec<TcpListener>,
    stacks: watch::Receiver<Arc<WebStack>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    // The flags' settings, which a reload does not change.
    let settings = stacks.borrow().settings.clone();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).keep_alive(true).header_read_timeout(non_zero(settings.header_read_timeout));
    // A page's next chunk is asked for once the one before is nearly sent, so that a scrape holds
    // about one chunk (hyper's default queues 400 KB). The same bound refuses (431) a request
    // whose headers reach 64 to 128 KiB, depending on how they arrive.
    http.max_buf_size(CHUNK_BYTES);
    let connections = Arc::new(ConnectionSettings {
        stacks,
        http,
        handshake_timeout: non_zero(settings.header_read_timeout),
        write_timeout: non_zero(settings.request_timeout),
    });
    let (stop, stopped) = watch::channel(());
    let mut running = accept_until(listeners, connections.clone(), stopped, shutdown).await;
    drop(stop);
    if let Some(auth) = &connections.stacks.borrow().auth {
        auth.close();
    }
    let deadline =
        non_zero(settings.request_timeout).map_or(DRAIN_WITHOUT_REQUEST_TIMEOUT, |timeout| timeout + DRAIN_MARGIN);
    drain(&mut running, deadline).await;
    info!("web server stopped");
}

/// Everything a connection task needs.
struct ConnectionSettings {
    stacks: watch::Receiver<Arc<WebStack>>,
    http: http1::Builder,
    handshake_timeout: Option<Duration>,
    /// How long a write may wait for the client to take in bytes before the connection is
    /// closed: a client that stops reading would otherwise hold its scrape's page forever.
    write_timeout: Option<Duration>,
}

fn non_zero(duration: Duration) -> Option<Duration> {
    (!duration.is_zero()).then_some(duration)
}

/// Accepts connections on every listener, each connection in its own task, until `shutdown`;
/// returns the tasks still running.
async fn accept_until(
    listeners: Vec<TcpListener>,
    connections: Arc<ConnectionSettings>,
    stopped: watch::Receiver<()>,
    shutdown: impl Future<Output = ()>,
) -> JoinSet<()> {
    let (handover, mut accepted) = mpsc::channel(listeners.len().max(1));
    let mut accepting = JoinSet::new();
    for listener in listeners {
        accepting.spawn(accept_into(listener, handover.clone()));
    }
    let mut running = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some((stream, peer)) = accepted.recv() => {
                running.spawn(serve_connection(stream, peer, connections.clone(), stopped.clone()));
            }
            // Reaps finished connections so the set does not grow with every connection served.
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    // Dropping the listeners stops accepting.
    accepting.abort_all();
    running
}

/// Accepts connections on one listener and hands them over, pausing after an error that is not
/// about one connection (e.g. out of file descriptors).
async fn accept_into(listener: TcpListener, handover: mpsc::Sender<(TcpStream, SocketAddr)>) {
    loop {
        match listener.accept().await {
            Ok(connection) => {
                if handover.send(connection).await.is_err() {
                    return;
                }
            }
            Err(error) if is_connection_error(&error) => debug!(%error, "connection failed while accepting"),
            Err(error) => {
                warn!(%error, "cannot accept connections; retrying");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            }
        }
    }
}

/// Errors about one connection only, which need no pause before the next accept.
fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(error.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

/// Waits for the connections to close, up to `deadline`; then drops (aborts) the rest.
async fn drain(running: &mut JoinSet<()>, deadline: Duration) {
    let all_closed = async { while running.join_next().await.is_some() {} };
    if tokio::time::timeout(deadline, all_closed).await.is_err() {
        warn!(connections = running.len(), "closing connections that did not finish in time");
        running.abort_all();
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    connections: Arc<ConnectionSettings>,
    mut stopped: watch::Receiver<()>,
) {
    // Responses are small and written whole; waiting to fill packets only adds latency.
    let _ = stream.set_nodelay(true);
    let mut stream = TimeoutStream::new(stream);
    stream.set_write_timeout(connections.write_timeout);
    let stream = Box::pin(stream);
    let tls = connections.stacks.borrow().tls.clone();
    let Some(tls) = tls else {
        return serve_http(TokioIo::new(stream), peer, &connections, stopped).await;
    };
    let handshake = async {
        match connections.handshake_timeout {
            Some(limit) => tokio::time::timeout(limit, tls.accept(stream))
                .await
                .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out"))),
            None => tls.accept(stream).await,
        }
    };
    let tls_stream = tokio::select! {
        result = handshake => match result {
            Ok(tls_stream) => tls_stream,
            Err(error) => return debug!(%peer, %error, "TLS handshake failed"),
        },
        _ = stopped.changed() => return,
    };
    serve_http(TokioIo::new(tls_stream), peer, &connections, stopped).await;
}

/// Serves HTTP/1.1 requests on one connection until the client closes it or the server stops.
async fn serve_http<I>(
    io: TokioIo<I>,
    peer: SocketAddr,
    connections: &ConnectionSettings,
    mut stopped: watch::Receiver<()>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let stacks = connections.stacks.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let router = stacks.borrow().router.clone();
        router.oneshot(request.map(axum::body::Body::new))
    });
    let connection = connections.http.serve_connection(io, service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        _ = stopped.changed() => {
            // Finishes the request in progress, if any, then closes.
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = result {
        debug!(%peer, %error, "connection closed with an error");
    }
}

#[cfg(test)]
mod tests;
