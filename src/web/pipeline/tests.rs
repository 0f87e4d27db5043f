use super::*;
use crate::snapshot::handler::HandlerStats;
use crate::web::routes::limited;
use crate::web::test_support::cheap_hash;
use crate::web::WebConfig;
use axum::routing::get;
use base64::Engine;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{RwLock, Semaphore};
use tower::ServiceExt;

const PATIENCE: Duration = Duration::from_secs(10);

/// The router as the server runs it, answering one request.
async fn handle(router: &Router, request: Request<Body>) -> Response {
    router.clone().oneshot(request).await.unwrap()
}

fn settings(config: Option<WebConfig>, request_timeout: Duration) -> WebSettings {
    WebSettings { config, request_timeout, header_read_timeout: Duration::from_secs(5), ..WebSettings::default() }
}

fn page() -> Router {
    Router::new().route("/", get(|| async { "the page" }))
}

fn request(authorization: Option<&str>) -> Request<Body> {
    let builder = Request::builder().uri("/");
    let builder = match authorization {
        Some(value) => builder.header(header::AUTHORIZATION, value),
        None => builder,
    };
    builder.body(Body::empty()).unwrap()
}

async fn body_text(response: Response) -> String {
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A router whose one route, limited to `max` at once, reports that a request started, then
/// waits for the gate to open (the test holds its write lock).
fn gated_router(started: Arc<Semaphore>, gate: Arc<RwLock<()>>, max: usize, stats: Arc<HandlerStats>) -> Router {
    let handler = move || {
        let (started, gate) = (started.clone(), gate.clone());
        async move {
            started.add_permits(1);
            let _open = gate.read().await;
            "done"
        }
    };
    Router::new().route("/", limited(get(handler), max, Duration::from_secs(60), stats))
}

#[tokio::test]
async fn beyond_max_requests_the_next_scrape_gets_503_at_once_and_is_counted() {
    let max = 3;
    let (started, gate, stats) = (Arc::new(Semaphore::new(0)), Arc::new(RwLock::new(())), Arc::default());
    let closed = gate.clone().write_owned().await;
    let pipeline = wrap(
        gated_router(started.clone(), gate, max, Arc::clone(&stats)),
        &settings(None, Duration::from_secs(60)),
        None,
    )
    .0;
    let in_flight: Vec<_> = (0..max)
        .map(|_| {
            let pipeline = pipeline.clone();
            tokio::spawn(async move { handle(&pipeline, request(None)).await })
        })
        .collect();
    let all_started = started.acquire_many(max as u32);
    tokio::time::timeout(PATIENCE, all_started).await.expect("handlers started").unwrap().forget();
    assert_eq!(stats.in_flight(), 3);

    let refused = tokio::time::timeout(PATIENCE, handle(&pipeline, request(None))).await.expect("answered at once");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(body_text(refused).await.contains("Limit of concurrent requests reached (3)"));

    drop(closed);
    for task in in_flight {
        let response = tokio::time::timeout(PATIENCE, task).await.expect("finished").unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    // The places came back: as many requests as the limit pass again.
    for _ in 0..max {
        assert_eq!(handle(&pipeline, request(None)).await.status(), StatusCode::OK);
    }
    assert_eq!(stats.by_code(), [(200, 6), (500, 0), (503, 1)].into());
    assert_eq!(stats.in_flight(), 0);
}

#[tokio::test]
async fn a_scrape_holds_its_place_until_its_body_is_sent_or_dropped() {
    let stats = Arc::new(HandlerStats::default());
    let router =
        Router::new().route("/", limited(get(|| async { "the page" }), 1, Duration::from_secs(60), stats.clone()));
    let pipeline = wrap(router, &settings(None, Duration::from_secs(60)), None).0;
    let first = handle(&pipeline, request(None)).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(stats.in_flight(), 1, "its body is not sent yet");
    assert_eq!(handle(&pipeline, request(None)).await.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body_text(first).await, "the page");
    assert_eq!(stats.in_flight(), 0);
    let second = handle(&pipeline, request(None)).await;
    assert_eq!(second.status(), StatusCode::OK);
    drop(second);
    assert_eq!(handle(&pipeline, request(None)).await.status(), StatusCode::OK, "a dropped body frees its place");
    assert_eq!(stats.by_code(), [(200, 3), (500, 0), (503, 1)].into());
}

#[tokio::test]
async fn zero_max_requests_means_no_limit() {
    let parallel = 8;
    let (started, gate) = (Arc::new(Semaphore::new(0)), Arc::new(RwLock::new(())));
    let closed = gate.clone().write_owned().await;
    let pipeline =
        wrap(gated_router(started.clone(), gate, 0, Arc::default()), &settings(None, Duration::from_secs(60)), None).0;
    let requests: Vec<_> = (0..parallel)
        .map(|_| {
            let pipeline = pipeline.clone();
            tokio::spawn(async move { handle(&pipeline, request(None)).await })
        })
        .collect();
    let all_started = started.acquire_many(parallel as u32);
    tokio::time::timeout(PATIENCE, all_started).await.expect("all ran at once").unwrap().forget();
    drop(closed);
    for task in requests {
        let response = tokio::time::timeout(PATIENCE, task).await.expect("finished").unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn a_request_over_its_time_gets_503_and_frees_its_place() {
    let calls = Arc::new(AtomicUsize::new(0));
    let handler = move || {
        let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
        async move {
            if first {
                std::future::pending::<()>().await;
            }
            "quick"
        }
    };
    let router = Router::new().route("/", limited(get(handler), 1, Duration::from_secs(60), Arc::default()));
    let pipeline = wrap(router, &settings(None, Duration::from_millis(100)), None).0;
    let started = std::time::Instant::now();
    let response = tokio::time::timeout(PATIENCE, handle(&pipeline, request(None))).await.expect("timed out in time");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(handle(&pipeline, request(None)).await.status(), StatusCode::OK, "the only place is free again");
}

fn config(text: &str) -> WebConfig {
    WebConfig::parse(text, Path::new(".")).unwrap()
}

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

#[tokio::test]
async fn basic_auth_guards_every_path_and_shows_nothing_of_the_page() {
    let text = format!(
        "basic_auth_users:\n  alice: '{}'\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\n",
        cheap_hash("wonderland")
    );
    let pipeline = wrap(page(), &settings(Some(config(&text)), Duration::from_secs(5)), None).0;

    let allowed = handle(&pipeline, request(Some(&basic("alice", "wonderland")))).await;
    assert_eq!(allowed.status(), StatusCode::OK);
    assert_eq!(allowed.headers()["x-frame-options"], "deny");
    assert_eq!(body_text(allowed).await, "the page");

    for authorization in
        [None, Some(basic("alice", "wrong")), Some(basic("bob", "wonderland")), Some("Basic %%%".into())]
    {
        let refused = handle(&pipeline, request(authorization.as_deref())).await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "{authorization:?}");
        assert_eq!(refused.headers()[header::WWW_AUTHENTICATE], "Basic");
        assert_eq!(refused.headers()["x-frame-options"], "deny", "headers go on refusals too");
        assert!(!body_text(refused).await.contains("the page"));
    }

    let unknown_path = Request::builder().uri("/nowhere").body(Body::empty()).unwrap();
    assert_eq!(handle(&pipeline, unknown_path).await.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_rate_limit_answers_429() {
    let pipeline = wrap(
        page(),
        &settings(Some(config("rate_limit:\n  interval: 1h\n  burst: 2\n")), Duration::from_secs(5)),
        None,
    )
    .0;
    assert_eq!(handle(&pipeline, request(None)).await.status(), StatusCode::OK);
    assert_eq!(handle(&pipeline, request(None)).await.status(), StatusCode::OK);
    assert_eq!(handle(&pipeline, request(None)).await.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn wrong_credentials_are_refused_before_they_can_take_a_place() {
    let (started, gate) = (Arc::new(Semaphore::new(0)), Arc::new(RwLock::new(())));
    let closed = gate.clone().write_owned().await;
    let text = format!("basic_auth_users:\n  alice: '{}'\n", cheap_hash("wonderland"));
    let router = gated_router(started.clone(), gate, 1, Arc::default());
    let pipeline = wrap(router, &settings(Some(config(&text)), Duration::from_secs(5)), None).0;
    let holder = tokio::spawn({
        let pipeline = pipeline.clone();
        async move { handle(&pipeline, request(Some(&basic("alice", "wonderland")))).await }
    });
    tokio::time::timeout(PATIENCE, started.acquire()).await.expect("handler started").unwrap().forget();

    let guess = handle(&pipeline, request(Some(&basic("alice", "guess")))).await;
    assert_eq!(guess.status(), StatusCode::UNAUTHORIZED);
    let second = handle(&pipeline, request(Some(&basic("alice", "wonderland")))).await;
    assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE, "the only place is taken");

    drop(closed);
    assert_eq!(tokio::time::timeout(PATIENCE, holder).await.unwrap().unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn a_reload_with_the_same_users_keeps_the_logins_it_remembers() {
    let alice = format!("basic_auth_users:\n  alice: '{}'\n", cheap_hash("wonderland"));
    let (pipeline, before) = wrap(page(), &settings(Some(config(&alice)), Duration::from_secs(5)), None);
    let login = || request(Some(&basic("alice", "wonderland")));
    assert_eq!(handle(&pipeline, login()).await.status(), StatusCode::OK, "checked with bcrypt, remembered");

    let (reloaded, after) = wrap(page(), &settings(Some(config(&alice)), Duration::from_secs(5)), before.as_ref());
    assert!(Arc::ptr_eq(before.as_ref().unwrap(), after.as_ref().unwrap()));
    // No bcrypt check can run any more: the login is answered from memory.
    after.as_ref().unwrap().close();
    assert_eq!(handle(&reloaded, login()).await.status(), StatusCode::OK);
    let new = handle(&reloaded, request(Some(&basic("alice", "other")))).await;
    assert_eq!(new.status(), StatusCode::SERVICE_UNAVAILABLE, "new credentials needed a check");

    let bob = format!("basic_auth_users:\n  bob: '{}'\n", cheap_hash("builder"));
    let (_, changed) = wrap(page(), &settings(Some(config(&bob)), Duration::from_secs(5)), after.as_ref());
    assert!(!Arc::ptr_eq(after.as_ref().unwrap(), changed.as_ref().unwrap()), "other users, other checks");
}
