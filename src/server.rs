//! The HTTP endpoints: `/metrics` (or `--web.telemetry-path`), a landing page, and the
//! `/-/healthy` and `/-/ready` probes. [`app`] builds the router without a socket, for tests.

use crate::exposition::{Exposition, Format, REVISION, VERSION};
use crate::snapshot::AccountSlot;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use http_body::{Frame, SizeHint};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_http::compression::{CompressionLayer, CompressionLevel};

#[derive(Clone, Debug)]
pub struct AppState {
    pub exposition: Arc<Exposition>,
    pub slots: Arc<[Arc<AccountSlot>]>,
    pub telemetry_path: String,
}

pub fn app(state: AppState) -> Router {
    Router::new()
        .route(&state.telemetry_path, get(metrics).layer(CompressionLayer::new().quality(CompressionLevel::Precise(2))))
        .route("/", get(landing))
        .route("/-/healthy", get(|| async { "OK\n" }))
        .route("/-/ready", get(ready))
        .with_state(state)
}

/// Serves the page in the format the scraper's `Accept` header prefers, compressed with gzip
/// when it accepts that (as Prometheus does; level 2, which costs about what level 1 does and
/// sends a third less). The page is made on a blocking thread: for many accounts it is tens of
/// milliseconds of work the server's threads need not wait for.
async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|value| value.to_str().ok());
    let format = Format::negotiate(accept);
    let exposition = state.exposition.clone();
    let Ok(page) = tokio::task::spawn_blocking(move || exposition.page(format)).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "making the page failed\n").into_response();
    };
    let headers = [(header::CONTENT_TYPE, format.content_type()), (header::VARY, "Accept")];
    (headers, Body::new(Pieces::new(page))).into_response()
}

/// A page sent as the pieces it is made of, without copying them into one buffer.
struct Pieces {
    pieces: VecDeque<Bytes>,
    remaining: u64,
}

impl Pieces {
    fn new(pieces: Vec<Bytes>) -> Self {
        let remaining = pieces.iter().map(|piece| piece.len() as u64).sum();
        Self { pieces: pieces.into(), remaining }
    }
}

impl http_body::Body for Pieces {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let piece = self.pieces.pop_front();
        self.remaining -= piece.as_ref().map_or(0, |piece| piece.len() as u64);
        Poll::Ready(piece.map(|piece| Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.pieces.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// Ready once every account has had one fully successful poll.
async fn ready(State(state): State<AppState>) -> Response {
    let waiting: Vec<&str> = state.slots.iter().filter(|s| !s.has_been_up()).map(|s| s.name()).collect();
    if waiting.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        let text = format!("not ready: no successful poll yet for account(s) {}\n", waiting.join(", "));
        (StatusCode::SERVICE_UNAVAILABLE, text).into_response()
    }
}

async fn landing(State(state): State<AppState>) -> Html<String> {
    let path = html_escape(&state.telemetry_path);
    Html(format!(
        "<!DOCTYPE html>\n<html><head><title>capi_exporter</title></head><body>\n\
         <h1>capi_exporter</h1>\n<p>Prometheus exporter for the futures (contract) account API. \
         Version {VERSION}, revision {REVISION}.</p>\n<ul>\n<li><a href=\"{path}\">Metrics</a></li>\n\
         <li><a href=\"/-/healthy\">Health</a></li>\n<li><a href=\"/-/ready\">Readiness</a></li>\n</ul>\n</body></html>\n"
    ))
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
