//! The HTTP endpoints: `/metrics` (or `--web.telemetry-path`), a landing page, and the
//! `/-/healthy` and `/-/ready` probes. [`app`] builds the router without a socket, for tests.

use crate::exposition::{Exposition, Format, Page};
use crate::snapshot::AccountSlot;
use crate::version::{REVISION, VERSION};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use http_body::{Frame, SizeHint};
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
/// sends a third less). Making the page renders the accounts that published since the last
/// scrape: at most tens of milliseconds, once per poll interval, on the server's thread.
async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|value| value.to_str().ok());
    let format = Format::negotiate(accept);
    let headers = [(header::CONTENT_TYPE, format.content_type()), (header::VARY, "Accept")];
    (headers, Body::new(PageBody(state.exposition.page(format)))).into_response()
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
