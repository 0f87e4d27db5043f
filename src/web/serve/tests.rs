use super::*;
use crate::snapshot::handler::HandlerStats;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, Semaphore};

const PATIENCE: Duration = Duration::from_secs(10);

fn settings(header_read_timeout: Duration) -> WebSettings {
    WebSettings { config: None, max_requests: 4, request_timeout: Duration::from_secs(5), header_read_timeout }
}

/// Starts `serve` on a free loopback port; returns its address, the trigger to stop it, and its task.
async fn start(
    router: Router,
    settings: WebSettings,
) -> (SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let stack = watch::channel(WebStack::new(router, settings, None).unwrap()).1;
    let server = tokio::spawn(serve(vec![listener], stack, async move {
        let _ = stopped.await;
    }));
    (address, stop, server)
}

#[tokio::test]
async fn serves_plain_http_and_stops_when_told() {
    let router = Router::new().route("/", get(|| async { "hello" }));
    let (address, stop, server) = start(router, settings(Duration::from_secs(5))).await;
    let body = reqwest::get(format!("http://{address}/")).await.unwrap().text().await.unwrap();
    assert_eq!(body, "hello");
    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, server).await.expect("stopped in time").unwrap();
    assert!(TcpStream::connect(address).await.is_err(), "no longer accepting");
}

#[tokio::test]
async fn a_request_in_flight_at_shutdown_is_answered_before_serve_returns() {
    let started = Arc::new(Semaphore::new(0));
    let release = Arc::new(Semaphore::new(0));
    let handler = {
        let (started, release) = (started.clone(), release.clone());
        move || {
            let (started, release) = (started.clone(), release.clone());
            async move {
                started.add_permits(1);
                let _ = release.acquire().await;
                "finished"
            }
        }
    };
    let router = Router::new().route("/", get(handler));
    let (address, stop, server) = start(router, settings(Duration::from_secs(5))).await;
    let request = tokio::spawn(async move { reqwest::get(format!("http://{address}/")).await?.text().await });
    tokio::time::timeout(PATIENCE, started.acquire()).await.expect("handler started").unwrap().forget();

    stop.send(()).unwrap();
    let mut server = server;
    let waited = tokio::time::timeout(Duration::from_millis(300), &mut server).await;
    assert!(waited.is_err(), "serve waits for the request in flight");
    release.add_permits(1);
    let body = tokio::time::timeout(PATIENCE, request).await.expect("answered").unwrap().unwrap();
    assert_eq!(body, "finished");
    tokio::time::timeout(PATIENCE, server).await.expect("stopped after the request").unwrap();
}

#[tokio::test]
async fn a_client_too_slow_to_send_its_headers_is_disconnected() {
    let router = Router::new().route("/", get(|| async { "hello" }));
    let (address, stop, server) = start(router, settings(Duration::from_millis(200))).await;
    let mut slow = TcpStream::connect(address).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let mut buffer = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, slow.read_to_end(&mut buffer)).await;
    assert!(closed.is_ok(), "the server closed the connection");
    assert!(!String::from_utf8_lossy(&buffer).contains("hello"));
    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, server).await.unwrap().unwrap();
}

#[tokio::test]
async fn idle_keep_alive_connections_do_not_hold_up_shutdown() {
    let router = Router::new().route("/", get(|| async { "hello" }));
    let (address, stop, server) = start(router, settings(Duration::from_secs(60))).await;
    let mut idle = TcpStream::connect(address).await.unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut first = [0u8; 512];
    let read = idle.read(&mut first).await.unwrap();
    assert!(String::from_utf8_lossy(&first[..read]).starts_with("HTTP/1.1 200"));
    let started = std::time::Instant::now();
    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, server).await.expect("stopped").unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "did not wait out the drain deadline");
}

#[tokio::test]
async fn a_client_that_takes_in_nothing_is_disconnected_after_the_request_timeout() {
    let stats = Arc::new(HandlerStats::default());
    // Far more than the socket buffers on both sides hold, made a chunk at a time as it is sent,
    // as a page is.
    let handler = || async { axum::body::Body::new(Chunks(1024)) };
    let router =
        Router::new().route("/", crate::web::routes::limited(get(handler), 1, Duration::from_secs(60), stats.clone()));
    let settings = WebSettings { request_timeout: Duration::from_millis(300), ..settings(Duration::from_secs(5)) };
    let (address, stop, server) = start(router, settings).await;
    let mut stalled = TcpStream::connect(address).await.unwrap();
    stalled.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let in_flight = |n: u64| {
        let stats = stats.clone();
        async move {
            while stats.in_flight() != n {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    tokio::time::timeout(PATIENCE, in_flight(1)).await.expect("the scrape started");
    tokio::time::timeout(PATIENCE, in_flight(0)).await.expect("the stalled scrape was given up");
    let mut received = Vec::new();
    tokio::time::timeout(PATIENCE, stalled.read_to_end(&mut received)).await.expect("closed").ok();
    assert!(received.len() < 1024 * CHUNK_BYTES, "the whole page was sent: {} bytes", received.len());
    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, server).await.unwrap().unwrap();
}

/// A body of this many chunks of [`CHUNK_BYTES`], each made when asked for.
struct Chunks(usize);

impl http_body::Body for Chunks {
    type Data = axum::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let chunk = self.0.checked_sub(1).map(|left| {
            self.0 = left;
            Ok(http_body::Frame::data(vec![b'x'; CHUNK_BYTES].into()))
        });
        std::task::Poll::Ready(chunk)
    }
}

#[tokio::test]
async fn a_client_that_reads_too_slowly_is_cut_off_at_the_request_timeout() {
    let stats = Arc::new(HandlerStats::default());
    let handler = || async { axum::body::Body::new(Chunks(1024)) };
    let timeout = Duration::from_secs(1);
    let router = Router::new().route("/", crate::web::routes::limited(get(handler), 1, timeout, stats.clone()));
    let settings = WebSettings { request_timeout: timeout, ..settings(Duration::from_secs(5)) };
    let (address, stop, server) = start(router, settings).await;
    let mut slow = TcpStream::connect(address).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    // 64 KiB every 2 ms or slower: the server's writes keep going (no write waits the timeout),
    // but the page's 64 MiB takes over 2 s.
    let mut received = 0;
    let reading = async {
        let mut buffer = vec![0u8; 64 << 10];
        while let Ok(read @ 1..) = slow.read(&mut buffer).await {
            received += read;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(PATIENCE, reading).await.expect("cut off");
    assert!(received < 1024 * CHUNK_BYTES, "the whole page was sent: {received} bytes");
    assert_eq!(stats.in_flight(), 0);
    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, server).await.unwrap().unwrap();
}

#[test]
fn a_stack_without_the_tls_or_users_of_the_one_before_says_so() {
    let dir = crate::web::test_support::TempDir::new();
    crate::web::test_support::TestPki::new().write_server_files(&dir);
    let hash = crate::web::test_support::cheap_hash("x");
    let text = format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  alice: '{hash}'\n"
    );
    let protected = WebSettings {
        config: Some(crate::web::WebConfig::parse(&text, dir.path()).unwrap()),
        ..WebSettings::default()
    };
    let protected = WebStack::new(Router::new(), protected, None).unwrap();
    let plain = WebStack::new(Router::new(), WebSettings::default(), Some(&protected)).unwrap();
    assert_eq!(
        plain.protection_dropped_since(&protected),
        [
            "the reloaded web config has no TLS: connections are plain HTTP from now on",
            "the reloaded web config has no basic_auth_users: requests are answered without a password from now on"
        ]
    );
    assert!(protected.protection_dropped_since(&plain).is_empty());
    assert!(plain.protection_dropped_since(&plain).is_empty());
    // TLS kept, client certificates no longer asked for.
    let tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    let stack = |text: &str| {
        let settings =
            WebSettings { config: Some(crate::web::WebConfig::parse(text, dir.path()).unwrap()), ..Default::default() };
        WebStack::new(Router::new(), settings, None).unwrap()
    };
    let mutual = stack(&format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"));
    assert_eq!(
        stack(tls).protection_dropped_since(&mutual),
        ["the reloaded web config requires no client certificate: TLS clients connect without one from now on"]
    );
    assert!(mutual.protection_dropped_since(&stack(tls)).is_empty());
}
