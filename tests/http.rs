//! The HTTP endpoints, driven through the router without a socket.

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use capi_exporter::metrics::{AccountSlot, AccountSnapshot, ExporterMetrics, Metrics, CONTENT_TYPE};
use capi_exporter::server::{app, AppState};
use std::sync::Arc;
use tower::ServiceExt as _;

fn state(path: &str) -> (AppState, Arc<AccountSlot>) {
    let slot = AccountSlot::new("main");
    let exporter = ExporterMetrics::new();
    exporter.add_account("main");
    let metrics = Arc::new(Metrics::new(vec![slot.clone()], &exporter, std::time::Duration::from_secs(60)));
    (AppState { metrics, slots: vec![slot.clone()].into(), telemetry_path: path.into() }, slot)
}

async fn get(state: &AppState, path: &str) -> (StatusCode, String, String) {
    let request = Request::get(path).body(Body::empty()).unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let content_type =
        response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let body = to_bytes(response.into_body(), 1 << 24).await.unwrap();
    (status, content_type, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn metrics_are_openmetrics_text_on_the_configured_path() {
    let (state, _) = state("/custom");
    let (status, content_type, body) = get(&state, "/custom").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, CONTENT_TYPE);
    assert!(body.ends_with("# EOF\n"));
    assert!(body.contains("capi_up{account=\"main\"} 0"), "{body}");
    assert!(
        body.contains("capi_api_requests_total{account=\"main\",endpoint=\"bills\",outcome=\"timeout\"} 0"),
        "{body}"
    );
    assert!(body.contains("capi_exporter_build_info{version="), "{body}");
    assert!(body.contains("process_resident_memory_bytes "), "{body}");
    assert_eq!(get(&state, "/metrics").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_landing_page_links_to_the_metrics() {
    let (state, _) = state("/custom");
    let (status, content_type, body) = get(&state, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type.starts_with("text/html"));
    assert!(body.contains("href=\"/custom\""), "{body}");
}

#[tokio::test]
async fn ready_waits_for_a_successful_poll_and_healthy_does_not() {
    let (state, slot) = state("/metrics");
    assert_eq!(get(&state, "/-/healthy").await.0, StatusCode::OK);
    let (status, _, body) = get(&state, "/-/ready").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("main"), "{body}");
    slot.publish(AccountSnapshot { up: false, ..AccountSnapshot::default() });
    assert_eq!(get(&state, "/-/ready").await.0, StatusCode::SERVICE_UNAVAILABLE);
    slot.publish(AccountSnapshot { up: true, ..AccountSnapshot::default() });
    assert_eq!(get(&state, "/-/ready").await.0, StatusCode::OK);
    slot.publish(AccountSnapshot { up: false, ..AccountSnapshot::default() });
    assert_eq!(
        get(&state, "/-/ready").await.0,
        StatusCode::OK,
        "once ready, a failed poll shows in capi_up, not readiness"
    );
}

#[tokio::test]
async fn metrics_are_gzipped_for_scrapers_that_accept_it() {
    use std::io::Read as _;
    let (state, _) = state("/metrics");
    let request = Request::get("/metrics").header("accept-encoding", "gzip").body(Body::empty()).unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.headers()["content-encoding"], "gzip");
    let compressed = to_bytes(response.into_body(), 1 << 24).await.unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&compressed[..]).read_to_string(&mut text).unwrap();
    let (_, _, plain) = get(&state, "/metrics").await;
    assert!(text.ends_with("# EOF\n") && text.contains("capi_up{account=\"main\"} 0"), "{text}");
    assert_eq!(
        text.lines().filter(|l| !l.starts_with("process_")).count(),
        plain.lines().filter(|l| !l.starts_with("process_")).count()
    );
    assert!(compressed.len() * 3 < plain.len(), "{} bytes compressed from {}", compressed.len(), plain.len());
}
