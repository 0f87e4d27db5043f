//! The HTTP endpoints: `/metrics` (or `--web.telemetry-path`), a landing page, and the
//! `/-/healthy` and `/-/ready` probes. [`app`] builds the router without a socket, for tests.

use crate::metrics::{AccountSlot, Metrics, CONTENT_TYPE, REVISION, VERSION};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
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

/// Serves the latest rendering (see [`crate::metrics::rendered`]), compressed with gzip when the
/// scraper accepts it, as Prometheus does.
async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let failed = || (StatusCode::INTERNAL_SERVER_ERROR, "rendering the metrics failed\n").into_response();
    let Ok(rendered) = state.metrics.current().await else { return failed() };
    if !accepts_gzip(&headers) {
        return ([(header::CONTENT_TYPE, CONTENT_TYPE), (header::VARY, "Accept-Encoding")], rendered.plain())
            .into_response();
    }
    let Ok(body) = rendered.gzip().await else { return failed() };
    let headers =
        [(header::CONTENT_TYPE, CONTENT_TYPE), (header::CONTENT_ENCODING, "gzip"), (header::VARY, "Accept-Encoding")];
    (headers, body).into_response()
}

/// Whether `Accept-Encoding` lists gzip (or `*`) with a non-zero weight.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let codings =
        headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(','));
    codings.into_iter().any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let weighted = parts.filter_map(|p| p.strip_prefix("q=")).all(|q| q.parse::<f32>().map_or(true, |q| q > 0.0));
        (name.eq_ignore_ascii_case("gzip") || name == "*") && weighted
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, value.parse().unwrap());
        headers
    }

    #[test]
    fn gzip_is_used_when_accepted_and_not_refused() {
        assert!(accepts_gzip(&accept("gzip")));
        assert!(accepts_gzip(&accept("deflate, GZIP;q=0.5")));
        assert!(accepts_gzip(&accept("*")));
        assert!(!accepts_gzip(&accept("gzip;q=0")));
        assert!(!accepts_gzip(&accept("gzip; q=0.000")));
        assert!(!accepts_gzip(&accept("identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
