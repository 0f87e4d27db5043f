//! The HTTP endpoints: `/metrics` (or `--web.telemetry-path`), a landing page, and the
//! `/-/healthy` and `/-/ready` probes. [`app`] builds the router without a socket, for tests.

use crate::metrics::{AccountSlot, Metrics, CONTENT_TYPE, REVISION, VERSION};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct AppState {
    pub metrics: Arc<Metrics>,
    pub slots: Arc<[Arc<AccountSlot>]>,
    pub telemetry_path: String,
}

pub fn app(state: AppState) -> Router {
    Router::new()
        .route(&state.telemetry_path, get(metrics))
        .route("/", get(landing))
        .route("/-/healthy", get(|| async { "OK\n" }))
        .route("/-/ready", get(ready))
        .with_state(state)
}

/// Renders on a blocking thread: a large exposition must not hold up the pollers' tasks.
async fn metrics(State(state): State<AppState>) -> Response {
    let metrics = state.metrics.clone();
    match tokio::task::spawn_blocking(move || metrics.render()).await {
        Ok(body) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "rendering the metrics failed\n").into_response(),
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
