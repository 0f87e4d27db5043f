//! The accept loop: one task per connection, TLS when configured, HTTP/1.1 with keep-alive by
//! hyper, a web configuration that a reload can replace, and a graceful stop.

use super::auth::BasicAuth;
use super::tls::ServerTls;
use super::{WebError, WebSettings};
use crate::exposition::CHUNK_BYTES;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_io_timeout::TimeoutStream;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;
use tracing::{debug, info, warn};

/// Time on top of the request timeout for the last responses to be written out.
const DRAIN_MARGIN: Duration = Duration::from_secs(1);
/// Pause after an accept error that is not about one connection (e.g. out of file descriptors).
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(500);
/// Failed TLS handshakes, and connections waiting for a place, are logged at most once in this
/// long: a scanner or a misconfigured scraper must not flood the log. Each line counts the
/// events left out before it.
const LOG_AT_MOST_EVERY: Duration = Duration::from_secs(10);
/// Connections served at once, at most; see [`connection_limit`].
const MAX_CONNECTIONS: usize = 512;
/// What a client speaking plain HTTP to the TLS port is told, as Go's server tells it.
const PLAIN_HTTP_ANSWER: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// What the web configuration decides, ready for connections: the routes with the layers it
/// asks for (basic auth, headers, rate limit) and TLS. A reload of the web configuration file
/// makes a new one: connections accepted afterwards handshake with its TLS settings, and every
/// request from then on, on old connections too, passes its layers.
pub struct WebStack {
    /// The routes with every layer around them.
    router: Router,
    tls: Option<Arc<ServerTls>>,
    /// Closed at shutdown (see [`BasicAuth::close`]).
    auth: Option<Arc<BasicAuth>>,
    settings: WebSettings,
}

impl WebStack {
    /// Fails when the certificates or keys the configuration names cannot be loaded. What the
    /// configuration asks for that is not honoured as written is logged, at start and at each
    /// reload that puts it in force. A reload gives the stack `before` it, whose remembered
    /// logins go on while the users are the same.
    pub fn new(routes: Router, settings: WebSettings, before: Option<&WebStack>) -> Result<Arc<Self>, WebError> {
        let tls = match &settings.config {
            Some(config) => config.server_tls()?.map(Arc::new),
            None => None,
        };
        for warning in settings.config.iter().flat_map(|config| &config.warnings) {
            warn!(problem = %warning, "the web config needs a look");
        }
        let (router, auth) = super::pipeline::wrap(routes, &settings, before.and_then(|stack| stack.auth.as_ref()));
        Ok(Arc::new(Self { router, tls, auth, settings }))
    }

    /// The protection `before` had and this stack has not, one line each. A web config caught
    /// while it was being written, or with a section commented out, reads as no protection at
    /// all, as in exporter-toolkit: a reload that puts such a stack in force says so.
    pub fn protection_dropped_since(&self, before: &WebStack) -> Vec<&'static str> {
        let mut dropped = Vec::new();
        if before.tls.is_some() && self.tls.is_none() {
            dropped.push("the reloaded web config has no TLS: connections are plain HTTP from now on");
        }
        if before.requires_client_certificates() && self.tls.is_some() && !self.requires_client_certificates() {
            dropped.push(
                "the reloaded web config requires no client certificate: TLS clients connect without one from now on",
            );
        }
        if before.auth.is_some() && self.auth.is_none() {
            dropped.push(
                "the reloaded web config has no basic_auth_users: requests are answered without a password from now on",
            );
        }
        dropped
    }

    fn requires_client_certificates(&self) -> bool {
        let tls = self.settings.config.as_ref().and_then(|config| config.tls.as_ref());
        tls.is_some_and(|tls| tls.client_auth.requires_certificate())
    }
}

/// Binds every listen address (a host name to the first of its addresses that binds).
pub async fn bind(addresses: &[String]) -> Result<Vec<TcpListener>, WebError> {
    let mut listeners = Vec::with_capacity(addresses.len());
    for address in addresses {
        let listener = match TcpListener::bind(address.as_str()).await {
            Err(error) if address.starts_with("[::]:") && !ipv6_available(&error) => {
                // A host without IPv6 (a container with it switched off): every IPv4 address.
                let ipv4 = address.replacen("[::]", "0.0.0.0", 1);
                warn!(address, %error, instead = ipv4, "IPv6 is not available here; listening on every IPv4 address");
                TcpListener::bind(ipv4.as_str()).await
            }
            bound => bound,
        };
        listeners.push(listener.map_err(|error| WebError::Listen { address: address.clone(), error })?);
    }
    Ok(listeners)
}

/// Whether a failed bind on `[::]` leaves IPv6 possible: no address family support, or no IPv6
/// address at all, means it does not.
fn ipv6_available(error: &std::io::Error) -> bool {
    const NO_FAMILY: i32 = libc::EAFNOSUPPORT;
    !(error.kind() == std::io::ErrorKind::AddrNotAvailable || error.raw_os_error() == Some(NO_FAMILY))
}

/// Serves on every listener until `shutdown` completes, with the latest of `stacks`. At
/// `shutdown` it stops accepting, lets the requests in flight finish (for at most the request
/// timeout), closes idle connections, and returns. A bad client closes that one connection and is
/// logged at debug level; a failed TLS handshake too, and it is logged as a warning (see
/// `LOG_AT_MOST_EVERY`) unless the client closed before sending a byte (a TCP probe).
pub async fn serve(
    listeners: Vec<TcpListener>,
    stacks: watch::Receiver<Arc<WebStack>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    // The flags' settings, which a reload does not change.
    let settings = stacks.borrow().settings.clone();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).keep_alive(true).header_read_timeout(settings.header_read_timeout);
    // A page's next chunk is asked for once the one before is nearly sent, so that a scrape holds
    // about one chunk (hyper's default queues 400 KB). The same bound refuses (431) a request
    // whose headers reach 64 to 128 KiB, depending on how they arrive.
    http.max_buf_size(CHUNK_BYTES);
    let connections = Arc::new(ConnectionSettings {
        stacks,
        http,
        handshake_timeout: settings.header_read_timeout,
        write_timeout: settings.request_timeout,
        places: Arc::new(Semaphore::new(connection_limit())),
        handshake_failures: Mutex::default(),
        plain_http: Mutex::default(),
        waiting_for_places: Mutex::default(),
    });
    let (stop, stopped) = watch::channel(());
    let mut running = accept_until(listeners, connections.clone(), stopped, shutdown).await;
    drop(stop);
    if let Some(auth) = &connections.stacks.borrow().auth {
        auth.close();
    }
    drain(&mut running, settings.request_timeout + DRAIN_MARGIN).await;
    info!("web server stopped");
}

/// Everything a connection task needs.
struct ConnectionSettings {
    stacks: watch::Receiver<Arc<WebStack>>,
    http: http1::Builder,
    handshake_timeout: Duration,
    /// How long a write may wait for the client to take in bytes before the connection is
    /// closed: a client that stops reading would otherwise hold its scrape's page forever.
    write_timeout: Duration,
    /// A place for each connection served; a connection accepted holds one until it closes.
    places: Arc<Semaphore>,
    handshake_failures: Mutex<LogLimit>,
    plain_http: Mutex<LogLimit>,
    waiting_for_places: Mutex<LogLimit>,
}

/// When the next line of a kind may be logged, and how many were not since the last one.
#[derive(Default)]
struct LogLimit {
    next_at: Option<Instant>,
    left_out: u64,
}

impl LogLimit {
    /// Whether a line may be logged now, with the count of those left out before it.
    fn allow(limit: &Mutex<LogLimit>) -> Option<u64> {
        let mut limit = limit.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if limit.next_at.is_some_and(|next_at| now < next_at) {
            limit.left_out += 1;
            return None;
        }
        limit.next_at = Some(now + LOG_AT_MOST_EVERY);
        Some(std::mem::take(&mut limit.left_out))
    }
}

impl ConnectionSettings {
    /// Said apart from failed handshakes, so that a probe without `scheme: HTTPS` does not hide them.
    fn log_plain_http(&self, peer: SocketAddr) {
        match LogLimit::allow(&self.plain_http) {
            Some(not_logged) => warn!(%peer, times_not_logged = not_logged,
                "a client spoke plain HTTP to the TLS port; it was answered 400 (give it the https scheme)"),
            None => debug!(%peer, "a client spoke plain HTTP to the TLS port"),
        }
    }

    fn log_handshake_failure(&self, peer: SocketAddr, error: &std::io::Error) {
        // A TCP probe (a load balancer's health check) closes at once, some with a reset.
        let probe = matches!(error.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset);
        match (!probe).then(|| LogLimit::allow(&self.handshake_failures)).flatten() {
            Some(not_logged) => warn!(%peer, %error, failures_not_logged = not_logged,
                "TLS handshake failed: the client got no answer ({})", handshake_advice(error)),
            None => debug!(%peer, %error, "TLS handshake failed"),
        }
    }
}

/// What to check after a failed handshake. rustls refuses a client certificate marked as a CA,
/// which Go, and so node_exporter, accepts: a client moved over from one is told why.
fn handshake_advice(error: &std::io::Error) -> &'static str {
    if error.to_string().contains("CaUsedAsEndEntity") {
        "its client certificate is marked as a CA (CA:TRUE), which rustls refuses: issue it with basicConstraints=CA:FALSE"
    } else {
        "check its CA, client certificate and scheme"
    }
}

/// How many connections are served at once: half the open-files limit, so that connections to
/// `/metrics` (idle ones too, for the 10 s a client has to send its headers) cannot take the
/// descriptors the exchange's connections and the state file need; and at most
/// [`MAX_CONNECTIONS`], which bounds the memory a flood of idle connections holds (up to 80 KiB
/// each, with 63 KiB of headers not yet finished: 40 MiB). Further connections wait in the
/// kernel's queue until one closes. Whoever can reach the port can hold every place, as with any
/// server that accepts connections before authenticating them: keep the port to the Prometheus
/// servers' network.
fn connection_limit() -> usize {
    let open_files = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
    usize::try_from(open_files / 2).unwrap_or(usize::MAX).clamp(1, MAX_CONNECTIONS)
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
        accepting.spawn(accept_into(listener, handover.clone(), connections.clone()));
    }
    let mut running = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some((stream, peer, place)) = accepted.recv() => {
                let serving = serve_connection(stream, peer, connections.clone(), stopped.clone());
                running.spawn(async move {
                    serving.await;
                    drop(place);
                });
            }
            // Reaps finished connections so the set does not grow with every connection served.
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    // Dropping the listeners stops accepting.
    accepting.abort_all();
    running
}

/// Accepts connections on one listener, each once it has a place, and hands them over; pauses
/// after an error that is not about one connection (e.g. out of file descriptors).
async fn accept_into(listener: TcpListener, handover: mpsc::Sender<Accepted>, connections: Arc<ConnectionSettings>) {
    loop {
        let place = match connections.places.clone().try_acquire_owned() {
            Ok(place) => place,
            Err(_) => {
                if let Some(not_logged) = LogLimit::allow(&connections.waiting_for_places) {
                    warn!(
                        limit = connection_limit(),
                        times_not_logged = not_logged,
                        "every place for a connection is taken; new connections wait until one closes"
                    );
                }
                let Ok(place) = connections.places.clone().acquire_owned().await else { return };
                place
            }
        };
        match listener.accept().await {
            Ok((stream, peer)) => {
                if handover.send((stream, peer, place)).await.is_err() {
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

/// A connection accepted, with the place it holds.
type Accepted = (TcpStream, SocketAddr, OwnedSemaphorePermit);

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
    let tls = connections.stacks.borrow().tls.clone();
    let timed = |stream| {
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(connections.write_timeout));
        Box::pin(stream)
    };
    let Some(tls) = tls else {
        return serve_http(TokioIo::new(timed(stream)), peer, &connections, stopped).await;
    };
    let deadline = Instant::now() + connections.handshake_timeout;
    let handshake = async {
        let mut stream = stream;
        if before(deadline, answered_plain_http(&mut stream)).await? {
            return Ok(None);
        }
        let config = tls.current().await;
        before(deadline, TlsAcceptor::from(config).accept(timed(stream))).await.map(Some)
    };
    let tls_stream = tokio::select! {
        result = handshake => match result {
            Ok(Some(tls_stream)) => tls_stream,
            Ok(None) => return connections.log_plain_http(peer),
            Err(error) => return connections.log_handshake_failure(peer, &error),
        },
        _ = stopped.changed() => return,
    };
    serve_http(TokioIo::new(tls_stream), peer, &connections, stopped).await;
}

/// Runs one step of a handshake, failing once `deadline` has passed.
async fn before<T>(deadline: Instant, step: impl Future<Output = std::io::Result<T>>) -> std::io::Result<T> {
    let timed_out = || std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out");
    tokio::time::timeout_at(deadline, step).await.unwrap_or_else(|_| Err(timed_out()))
}

/// Answers 400 to a client that speaks plain HTTP to the TLS port (a request starts with a
/// letter, a TLS handshake with byte 22), so that its user reads what is wrong; whether it did.
async fn answered_plain_http(stream: &mut TcpStream) -> std::io::Result<bool> {
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await? {
        0 => Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed before the handshake")),
        _ if first[0].is_ascii_alphabetic() => {
            stream.write_all(PLAIN_HTTP_ANSWER).await?;
            let _ = stream.shutdown().await;
            Ok(true)
        }
        _ => Ok(false),
    }
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
