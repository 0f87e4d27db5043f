//! The HTTP endpoints: `/metrics` (or `--web.telemetry-path`), the status page (see
//! [`super::status`]), the `/-/healthy` and `/-/ready` probes, and `/-/reload` as Prometheus has
//! it. [`app`] builds the router without a socket, for tests.

use super::status;
use crate::exposition::{Exposition, Format, Page};
use crate::snapshot::handler::{HandlerStats, InFlight};
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use http_body::{Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tower_http::compression::{CompressionLayer, CompressionLevel};

#[derive(Clone, Debug)]
pub struct AppState {
    /// The exposition of the accounts polled now; a reload replaces it.
    pub exposition: watch::Receiver<Arc<Exposition>>,
    pub telemetry_path: String,
    /// `--web.max-requests`: scrapes served at once; 0 for no limit.
    pub max_requests: usize,
    /// `--web.request-timeout`: the longest a scrape may take, its page sent; zero for no limit.
    pub request_timeout: Duration,
    /// Where `/-/reload` asks for a reload; `None` without `--web.enable-lifecycle`.
    pub reload: Option<mpsc::Sender<ReloadRequest>>,
}

/// A request to reload the configuration files, answered with the problem when they are refused.
pub type ReloadRequest = oneshot::Sender<Result<(), String>>;

impl AppState {
    pub(super) fn exposition(&self) -> Arc<Exposition> {
        self.exposition.borrow().clone()
    }
}

pub fn app(state: AppState) -> Router {
    let metrics_route = get(metrics).layer(CompressionLayer::new().quality(CompressionLevel::Precise(2)));
    let stats = state.exposition().handler_stats();
    let metrics_route = limited(metrics_route, state.max_requests, state.request_timeout, stats);
    Router::new()
        .route(&state.telemetry_path, metrics_route)
        .route("/", get(status::landing))
        .route(status::POLL_LOG_PATH, get(status::poll_log))
        .route("/-/healthy", get(|| async { "OK\n" }))
        .route("/-/ready", get(ready))
        .route(RELOAD_PATH, post(reload).put(reload))
        .with_state(state)
}

/// Where a reload is asked for, with POST or PUT, as Prometheus's lifecycle API has it.
pub const RELOAD_PATH: &str = "/-/reload";

/// Serves the page in the format the scraper's `Accept` header prefers, compressed with gzip
/// when it accepts that (as Prometheus does; level 2, which costs about what level 1 does and
/// sends a third less). Making the page renders the accounts that published since the last
/// scrape: at most tens of milliseconds, once per poll interval, on the server's thread.
async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|value| value.to_str().ok());
    let format = Format::negotiate(accept);
    let headers = [(header::CONTENT_TYPE, format.content_type()), (header::VARY, "Accept")];
    (headers, Body::new(PageBody(state.exposition().page(format)))).into_response()
}

/// The scrape limit and the handler metrics around the metrics route, as client_golang's promhttp
/// puts them: at most `max` scrapes at once (0: no limit), the next one gets 503 at once, never a
/// queue (a scraper that waits in one would time out anyway); every answer, 503s included, is
/// counted by status code. A scrape holds its place, and counts as in flight, until its body is
/// sent or dropped, not only while its headers are made (as tower's concurrency limit would);
/// a body not sent within `send_within` of the request is abandoned, closing
/// the connection: clients that read slowly or not at all can neither pile up pages nor keep
/// the places from scrapers. The probes are never limited, so a flood of scrapes cannot fail
/// them.
pub(super) fn limited<S: Clone + Send + Sync + 'static>(
    route: MethodRouter<S>,
    max: usize,
    send_within: Duration,
    stats: Arc<HandlerStats>,
) -> MethodRouter<S> {
    let places = (max > 0).then(|| Arc::new(Semaphore::new(max)));
    route.layer(middleware::from_fn_with_state(Limit { places, max, send_within, stats }, counted))
}

#[derive(Clone)]
struct Limit {
    places: Option<Arc<Semaphore>>,
    max: usize,
    send_within: Duration,
    stats: Arc<HandlerStats>,
}

async fn counted(State(limit): State<Limit>, request: Request, next: Next) -> Response {
    let deadline = Instant::now() + limit.send_within;
    let in_flight = limit.stats.start();
    let Ok(place) = limit.places.map(Semaphore::try_acquire_owned).transpose() else {
        in_flight.answered(StatusCode::SERVICE_UNAVAILABLE.as_u16());
        let text = format!("Limit of concurrent requests reached ({}), try again later.\n", limit.max);
        return (StatusCode::SERVICE_UNAVAILABLE, text).into_response();
    };
    let response = next.run(request).await;
    in_flight.answered(response.status().as_u16());
    response.map(|body| Body::new(Held { body, deadline, _held: (place, in_flight) }))
}

/// A response body, its deadline, and what is held until it is sent or dropped.
struct Held {
    body: Body,
    deadline: Instant,
    _held: (Option<OwnedSemaphorePermit>, InFlight),
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(Some(Err(axum::Error::new("the page was not taken in within --web.request-timeout"))));
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The page as an HTTP body, sent a piece at a time.
struct PageBody(Page);

impl http_body::Body for PageBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.next_chunk().map(|chunk| Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.remaining() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.remaining())
    }
}

/// Ready once every account has had one fully successful poll.
async fn ready(State(state): State<AppState>) -> Response {
    let exposition = state.exposition();
    let waiting: Vec<&str> = exposition.slots().filter(|s| !s.has_been_up()).map(|s| s.name()).collect();
    if waiting.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        let text = format!("not ready: no successful poll yet for account(s) {}\n", waiting.join(", "));
        (StatusCode::SERVICE_UNAVAILABLE, text).into_response()
    }
}

/// Reloads the configuration files: 200 when the new configuration runs, 500 and the problem
/// when it was refused (the old one keeps running), 403 without `--web.enable-lifecycle`.
async fn reload(State(state): State<AppState>) -> Response {
    let Some(requests) = &state.reload else {
        return (StatusCode::FORBIDDEN, "Lifecycle API is not enabled (--web.enable-lifecycle).\n").into_response();
    };
    let (answer, answered) = oneshot::channel();
    let stopping = || (StatusCode::SERVICE_UNAVAILABLE, "The exporter is stopping.\n").into_response();
    if requests.send(answer).await.is_err() {
        return stopping();
    }
    match answered.await {
        Ok(Ok(())) => (StatusCode::OK, "configuration reloaded\n").into_response(),
        Ok(Err(problem)) => {
            (StatusCode::INTERNAL_SERVER_ERROR, format!("failed to reload the configuration: {problem}\n"))
                .into_response()
        }
        Err(_) => stopping(),
    }
}
