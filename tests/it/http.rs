//! The HTTP endpoints, driven through the router without a socket.

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use capi_exporter::exposition::format::{OPENMETRICS, TEXT};
use capi_exporter::exposition::Exposition;
use capi_exporter::snapshot::stats::AccountStats;
use capi_exporter::snapshot::{AccountSlot, AccountSnapshot};
use capi_exporter::web::{app, AppState};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt as _;

/// The router for one account, as the exporter starts it: the account published, not yet up.
fn state(path: &str) -> (AppState, Arc<AccountSlot>) {
    let slot = AccountSlot::new("main");
    slot.publish(AccountSnapshot { stats: Arc::new(AccountStats::new(Duration::from_secs(15))), ..Default::default() });
    let exposition = Arc::new(Exposition::new(vec![slot.clone()], Duration::from_secs(60)));
    let exposition = tokio::sync::watch::channel(exposition).1;
    (
        AppState {
            exposition,
            telemetry_path: path.into(),
            max_requests: 40,
            request_timeout: Duration::from_secs(30),
            reload: None,
        },
        slot,
    )
}

async fn get(state: &AppState, path: &str) -> (StatusCode, String, String) {
    get_accepting(state, path, None).await
}

async fn get_accepting(state: &AppState, path: &str, accept: Option<&str>) -> (StatusCode, String, String) {
    let mut request = Request::get(path);
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let request = request.body(Body::empty()).unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let content_type =
        response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let body = to_bytes(response.into_body(), 1 << 24).await.unwrap();
    (status, content_type, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn metrics_are_classic_text_on_the_configured_path_and_openmetrics_to_who_prefers_it() {
    let (state, _) = state("/custom");
    let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    let (status, content_type, openmetrics) = get_accepting(&state, "/custom", Some(prometheus)).await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, OPENMETRICS));
    assert!(openmetrics.ends_with("# EOF\n") && openmetrics.contains("# TYPE capi_api_requests counter\n"));
    let (status, content_type, body) = get(&state, "/custom").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, TEXT);
    assert!(!body.contains("# EOF") && body.contains("# TYPE capi_api_requests_total counter\n"), "{body}");
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
    for (accept, content_type, end) in [("*/*", TEXT, "\n"), (OPENMETRICS, OPENMETRICS, "# EOF\n")] {
        let request = Request::get("/metrics")
            .header("accept", accept)
            .header("accept-encoding", "gzip")
            .body(Body::empty())
            .unwrap();
        let response = app(state.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.headers()["content-encoding"], "gzip");
        assert_eq!(response.headers()["content-type"], content_type);
        let compressed = to_bytes(response.into_body(), 1 << 24).await.unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&compressed[..]).read_to_string(&mut text).unwrap();
        assert!(text.contains("capi_up{account=\"main\"} 0") && text.ends_with(end), "{text}");
        let (_, _, plain) = get_accepting(&state, "/metrics", Some(accept)).await;
        assert_eq!(
            text.lines().filter(|l| !l.starts_with("process_")).count(),
            plain.lines().filter(|l| !l.starts_with("process_")).count()
        );
        assert!(compressed.len() * 3 < plain.len(), "{} bytes compressed from {}", compressed.len(), plain.len());
    }
}

#[tokio::test]
async fn scrapes_are_counted_by_code_as_promhttp_counts_them() {
    let (state, _) = state("/metrics");
    get(&state, "/metrics").await;
    get(&state, "/-/healthy").await;
    let (_, _, body) = get(&state, "/metrics").await;
    assert!(body.contains("promhttp_metric_handler_requests_total{code=\"200\"} 1\n"), "{body}");
    assert!(body.contains("promhttp_metric_handler_requests_total{code=\"503\"} 0\n"), "{body}");
    // The scrape being served counts itself, as with client_golang.
    assert!(body.contains("promhttp_metric_handler_requests_in_flight 1\n"), "{body}");
}
