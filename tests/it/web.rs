//! The HTTP(S) serving layer end to end: certificates made here with rcgen, a web config file
//! written to a temporary folder, `serve` on 127.0.0.1:0, and reqwest (rustls) as the client.

use crate::common;

use axum::routing::get;
use axum::Router;
use capi_exporter::web::{serve, WebConfig, WebSettings, WebStack};
use reqwest::StatusCode;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const PATIENCE: Duration = Duration::from_secs(10);
const PAGE: &str = "the metrics page";

/// A CA, a server certificate for 127.0.0.1 and localhost, a client certificate from the CA
/// (and one marked as a CA itself), and a client certificate from another CA; all PEM.
struct Pki {
    ca: String,
    server_cert: String,
    server_key: String,
    /// Certificate and key together, as `reqwest::Identity::from_pem` takes them.
    client_identity: String,
    foreign_client_identity: String,
    marked_ca_client_identity: String,
}

type Issuer = rcgen::CertifiedIssuer<'static, rcgen::KeyPair>;

impl Pki {
    fn new() -> Pki {
        let ca = authority("exporter test CA");
        let foreign_ca = authority("someone else's CA");
        let (server_cert, server_key) =
            leaf(&["127.0.0.1", "localhost"], rcgen::ExtendedKeyUsagePurpose::ServerAuth, &ca);
        let (client_cert, client_key) = leaf(&["scraper.example"], rcgen::ExtendedKeyUsagePurpose::ClientAuth, &ca);
        let (foreign_cert, foreign_key) =
            leaf(&["scraper.example"], rcgen::ExtendedKeyUsagePurpose::ClientAuth, &foreign_ca);
        let marked_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let (marked_cert, marked_key) =
            leaf_marked(&["scraper.example"], rcgen::ExtendedKeyUsagePurpose::ClientAuth, &ca, marked_ca);
        Pki {
            ca: ca.pem(),
            server_cert,
            server_key,
            client_identity: format!("{client_cert}{client_key}"),
            foreign_client_identity: format!("{foreign_cert}{foreign_key}"),
            marked_ca_client_identity: format!("{marked_cert}{marked_key}"),
        }
    }
}

fn authority(name: &str) -> Issuer {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().expect("CA key")).expect("CA")
}

fn leaf(names: &[&str], usage: rcgen::ExtendedKeyUsagePurpose, issuer: &Issuer) -> (String, String) {
    leaf_marked(names, usage, issuer, rcgen::IsCa::NoCa)
}

/// A leaf certificate whose basic constraints say `is_ca`, as `openssl req -x509` marks its own.
fn leaf_marked(
    names: &[&str],
    usage: rcgen::ExtendedKeyUsagePurpose,
    issuer: &Issuer,
    is_ca: rcgen::IsCa,
) -> (String, String) {
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|name| name.to_string()).collect::<Vec<_>>()).expect("params");
    params.is_ca = is_ca;
    params.extended_key_usages = vec![usage];
    let key = rcgen::KeyPair::generate().expect("key");
    (params.signed_by(&key, issuer).expect("certificate").pem(), key.serialize_pem())
}

/// A folder under the system's temp dir holding the PKI's files and a web config; removed on drop.
struct ConfigDir(PathBuf);

impl ConfigDir {
    fn new(pki: &Pki) -> ConfigDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("capi-web-it-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = ConfigDir(std::env::temp_dir().join(name));
        std::fs::create_dir_all(&dir.0).expect("temp dir");
        dir.write("server.crt", &pki.server_cert);
        dir.write("server.key", &pki.server_key);
        dir.write("ca.crt", &pki.ca);
        dir
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write");
        path
    }

    /// Writes `web.yml` with the given text and loads it.
    fn config(&self, text: &str) -> WebConfig {
        let path = self.write("web.yml", text);
        WebConfig::load(&path).unwrap_or_else(|error| panic!("{error}"))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ConfigDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `serve`; stops it on `stop`.
struct Server {
    address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    async fn start(config: WebConfig) -> Server {
        Server::start_with(WebSettings { config: Some(config), ..WebSettings::default() }).await
    }

    async fn start_with(settings: WebSettings) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let router = Router::new().route("/metrics", get(|| async { PAGE }));
        let (stop, stopped) = oneshot::channel::<()>();
        let stack = tokio::sync::watch::channel(WebStack::new(router, settings, None).expect("web stack")).1;
        let task = tokio::spawn(serve(vec![listener], stack, async move {
            let _ = stopped.await;
        }));
        Server { address, stop: Some(stop), task }
    }

    fn https(&self) -> String {
        format!("https://{}/metrics", self.address)
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(PATIENCE, &mut self.task).await.expect("serve returned in time");
        result.expect("serve task");
    }
}

/// A client that trusts only the test CA, optionally with a client certificate.
fn client(pki: &Pki, identity: Option<&str>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca.as_bytes()).expect("CA"))
        .no_proxy()
        .timeout(PATIENCE);
    if let Some(identity) = identity {
        builder = builder.identity(reqwest::Identity::from_pem(identity.as_bytes()).expect("identity"));
    }
    builder.build().expect("client")
}

async fn get_page(client: &reqwest::Client, url: &str) -> Result<(StatusCode, String), reqwest::Error> {
    let response = client.get(url).send().await?;
    let status = response.status();
    Ok((status, response.text().await?))
}

const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

#[tokio::test]
async fn https_works_with_the_ca_and_plain_http_to_the_tls_port_is_told_so() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let server = Server::start(dir.config(TLS)).await;

    let (status, body) = get_page(&client(&pki, None), &server.https()).await.expect("HTTPS");
    assert_eq!((status, body.as_str()), (StatusCode::OK, PAGE));

    let plain = get_page(&client(&pki, None), &format!("http://{}/metrics", server.address)).await.unwrap();
    let told = "Client sent an HTTP request to an HTTPS server.\n";
    assert_eq!((plain.0, plain.1.as_str()), (StatusCode::BAD_REQUEST, told), "as Go's server answers");

    let untrusting = reqwest::Client::builder().use_rustls_tls().no_proxy().timeout(PATIENCE).build().unwrap();
    assert!(untrusting.get(server.https()).send().await.is_err(), "a client without the CA refuses the server");

    // The failed connections closed only themselves.
    assert!(get_page(&client(&pki, None), &server.https()).await.is_ok());
    server.stop().await;
}

/// Whether `client` gets the page within [`PATIENCE`], trying a new connection every 50 ms.
async fn served_in_time(client: &reqwest::Client, url: &str) -> bool {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        if get_page(client, url).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_renewed_certificate_is_served_without_a_reload_and_a_broken_one_is_not() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let server = Server::start(dir.config(TLS)).await;
    assert!(get_page(&client(&pki, None), &server.https()).await.is_ok());
    // Renewed by another CA, so that each client trusts one of the two certificates only.
    let renewed = Pki::new();
    assert!(get_page(&client(&renewed, None), &server.https()).await.is_err(), "not renewed yet");
    dir.write("server.key", &renewed.server_key);
    dir.write("server.crt", &renewed.server_cert);
    assert!(served_in_time(&client(&renewed, None), &server.https()).await, "the renewed certificate served");
    assert!(get_page(&client(&pki, None), &server.https()).await.is_err(), "the old one no longer");
    // A renewal that breaks the files: the certificate loaded before goes on serving.
    dir.write("server.crt", "not a certificate");
    let broken_seen = tokio::time::Instant::now() + Duration::from_millis(2_500);
    while tokio::time::Instant::now() < broken_seen {
        assert!(get_page(&client(&renewed, None), &server.https()).await.is_ok(), "still served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn require_and_verify_client_cert_takes_only_certificates_from_the_ca() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let text = format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n");
    let server = Server::start(dir.config(&text)).await;

    let without = get_page(&client(&pki, None), &server.https()).await;
    assert!(without.is_err(), "no client certificate: {without:?}");
    let foreign = get_page(&client(&pki, Some(&pki.foreign_client_identity)), &server.https()).await;
    assert!(foreign.is_err(), "a certificate from another CA: {foreign:?}");
    let (status, body) = get_page(&client(&pki, Some(&pki.client_identity)), &server.https()).await.expect("good cert");
    assert_eq!((status, body.as_str()), (StatusCode::OK, PAGE));
    server.stop().await;
}

#[tokio::test]
async fn a_client_ca_taken_away_lets_no_client_in_once_more() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let text = format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n");
    let server = Server::start(dir.config(&text)).await;
    // A client of its own for each connection.
    let ours = || client(&pki, Some(&pki.client_identity));
    assert!(get_page(&ours(), &server.https()).await.is_ok());
    dir.write("ca.crt", &Pki::new().ca);
    // The files are looked at once a second at most: the first connection a second after the
    // last look, however long after the change, is the one that must be refused.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert!(get_page(&ours(), &server.https()).await.is_err(), "the first connection after the change");
    server.stop().await;
}

#[tokio::test]
async fn verify_client_cert_if_given_lets_clients_without_one_in() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let text = format!("{TLS}  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n");
    let server = Server::start(dir.config(&text)).await;

    assert!(get_page(&client(&pki, None), &server.https()).await.is_ok(), "no certificate");
    assert!(get_page(&client(&pki, Some(&pki.client_identity)), &server.https()).await.is_ok(), "a good one");
    let foreign = get_page(&client(&pki, Some(&pki.foreign_client_identity)), &server.https()).await;
    assert!(foreign.is_err(), "a bad one: {foreign:?}");
    server.stop().await;
}

#[tokio::test]
async fn client_allowed_sans_check_the_client_certificate_names() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let base = format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n");

    let allowed = Server::start(dir.config(&format!("{base}  client_allowed_sans: [scraper.example]\n"))).await;
    assert!(get_page(&client(&pki, Some(&pki.client_identity)), &allowed.https()).await.is_ok());
    allowed.stop().await;

    let others = Server::start(dir.config(&format!("{base}  client_allowed_sans: [other.example]\n"))).await;
    assert!(get_page(&client(&pki, Some(&pki.client_identity)), &others.https()).await.is_err());
    others.stop().await;
}

#[tokio::test]
async fn max_version_is_honoured() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let server = Server::start(dir.config(&format!("{TLS}  max_version: TLS12\n"))).await;
    assert!(get_page(&client(&pki, None), &server.https()).await.is_ok(), "TLS 1.2 is spoken");
    let only_13 = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca.as_bytes()).unwrap())
        .min_tls_version(reqwest::tls::Version::TLS_1_3)
        .no_proxy()
        .timeout(PATIENCE)
        .build()
        .unwrap();
    assert!(only_13.get(server.https()).send().await.is_err(), "TLS 1.3 is not");
    server.stop().await;
}

#[tokio::test]
async fn basic_auth_over_https() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let hash = bcrypt::hash("wonderland", 4).unwrap();
    let server = Server::start(dir.config(&format!("{TLS}basic_auth_users:\n  alice: '{hash}'\n"))).await;
    let client = client(&pki, None);

    let right = client.get(server.https()).basic_auth("alice", Some("wonderland")).send().await.unwrap();
    assert_eq!(right.status(), StatusCode::OK);
    assert_eq!(right.text().await.unwrap(), PAGE);

    let wrong = client.get(server.https()).basic_auth("alice", Some("guess")).send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(!wrong.text().await.unwrap().contains(PAGE));

    let none = client.get(server.https()).send().await.unwrap();
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(none.headers()[reqwest::header::WWW_AUTHENTICATE], "Basic");
    assert!(!none.text().await.unwrap().contains(PAGE));
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_never_finishes_the_handshake_is_disconnected() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let settings = WebSettings {
        config: Some(dir.config(TLS)),
        header_read_timeout: Duration::from_millis(200),
        ..WebSettings::default()
    };
    let server = Server::start_with(settings).await;
    let mut silent = TcpStream::connect(server.address).await.unwrap();
    let mut buffer = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, silent.read_to_end(&mut buffer)).await;
    assert!(closed.is_ok(), "the server closed the silent connection");
    assert!(get_page(&client(&pki, None), &server.https()).await.is_ok(), "and kept serving");
    server.stop().await;
}

/// The status line a plain-HTTP request with a header of `bytes` bytes gets.
async fn status_with_a_header_of(server: &Server, bytes: usize) -> String {
    let mut stream = TcpStream::connect(server.address).await.unwrap();
    let request =
        format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\nConnection: close\r\n\r\n", "a".repeat(bytes));
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer)).await.expect("an answer in time").unwrap();
    String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn request_headers_of_60_kib_are_read_and_of_256_kib_refused() {
    let server = Server::start_with(WebSettings::default()).await;
    assert_eq!(status_with_a_header_of(&server, 60 * 1024).await, "HTTP/1.1 200 OK");
    // hyper refuses once its read buffer, growing by up to 64 KiB a read, holds 64 KiB or more.
    assert_eq!(status_with_a_header_of(&server, 256 * 1024).await, "HTTP/1.1 431 Request Header Fields Too Large");
    server.stop().await;
}

#[tokio::test]
async fn the_web_stack_cannot_be_made_when_the_certificate_is_gone() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let config = dir.config(TLS);
    std::fs::remove_file(dir.path().join("server.crt")).unwrap();
    let settings = WebSettings { config: Some(config), ..WebSettings::default() };
    let Err(error) = WebStack::new(Router::new(), settings, None) else { panic!("made without its certificate") };
    assert!(error.to_string().contains("tls_server_config.cert_file: cannot read server.crt"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_exporter_binary_serves_its_metrics_over_tls_with_basic_auth() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let hash = bcrypt::hash("wonderland", 4).unwrap();
    // What rustls cannot honour as written is served anyway, and said once at start.
    let asks = "  min_version: TLS10\n  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n";
    let web_config = dir.write("web.yml", &format!("{TLS}{asks}basic_auth_users:\n  prometheus: '{hash}'\n"));
    let mut command = common::Exporter::command(&["--demo", "--web.config.file", web_config.to_str().unwrap()]);
    command.env("CAPI_POLL_INTERVAL", "1s");
    let exporter = common::Exporter::spawn(command);
    let url = format!("{}/metrics", exporter.url.replace("http://", "https://"));
    let client = client(&pki, None);

    let scraped = client.get(&url).basic_auth("prometheus", Some("wonderland")).send().await.unwrap();
    assert_eq!(scraped.status(), StatusCode::OK);
    let body = scraped.text().await.unwrap();
    assert!(body.contains("capi_up{account=\"demo-1\"}") && !body.contains("# EOF"), "{body}");

    let refused = client.get(&url).basic_auth("prometheus", Some("guess")).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(!refused.text().await.unwrap().contains("capi_up"));
    // A client without the CA is a failure worth a line, once in 10 s; a TCP probe that sends
    // nothing is none; plain HTTP is told what is wrong.
    let untrusting = reqwest::Client::builder().use_rustls_tls().no_proxy().timeout(PATIENCE).build().unwrap();
    assert!(untrusting.get(&url).send().await.is_err());
    exporter.wait_logged("TLS handshake failed", 1);
    drop(TcpStream::connect(exporter.url.trim_start_matches("http://")).await.unwrap());
    let plain = reqwest::get(format!("{}/metrics", exporter.url)).await.unwrap();
    assert_eq!(plain.status(), StatusCode::BAD_REQUEST, "plain HTTP to the TLS port");
    exporter.wait_logged("a client spoke plain HTTP to the TLS port; it was answered 400", 1);
    let log = exporter.log();
    let failed: Vec<&str> = log.lines().filter(|l| l.contains("TLS handshake failed")).collect();
    assert_eq!(failed.len(), 1, "{log}");
    assert!(failed[0].contains("level=warn") && failed[0].contains("UnknownCA"), "{log}");
    assert!(log.contains("tls=true") && log.contains("basic_auth=true"), "{log}");
    let warned = |what: &str| log.lines().filter(|l| l.contains("level=warn") && l.contains(what)).count();
    assert_eq!(warned("min_version TLS10 means TLS12"), 1, "{log}");
    assert_eq!(warned("tls_server_config.cipher_suites: TLS_RSA_WITH_AES_128_CBC_SHA not offered"), 1, "{log}");
}

/// rustls refuses a client certificate marked as a CA, which Go accepts: the warning says so, so
/// that a client moved over from node_exporter is not sent looking at its CA.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_certificate_marked_as_a_ca_is_refused_with_a_warning_that_says_why() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let text = format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n");
    let web_config = dir.write("web.yml", &text);
    let exporter = common::Exporter::spawn(common::Exporter::command(&[
        "--demo",
        "--web.config.file",
        web_config.to_str().unwrap(),
    ]));
    let url = format!("{}/metrics", exporter.url.replace("http://", "https://"));
    let (status, _) = get_page(&client(&pki, Some(&pki.client_identity)), &url).await.expect("good cert");
    assert_eq!(status, StatusCode::OK);
    assert!(get_page(&client(&pki, Some(&pki.marked_ca_client_identity)), &url).await.is_err());
    exporter.wait_logged("its client certificate is marked as a CA (CA:TRUE), which rustls refuses", 1);
}

/// 200 connections with wrong passwords at once, then a first-time login with the right one:
/// it is answered at once (with 429 while too many checks wait, never after the whole flood),
/// and passes once the flood is checked. Repeated wrong credentials cost one check.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_wrong_passwords_does_not_hold_up_a_right_one() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    // Cost 8: about 70 ms a check in this debug build, so a queue of 200 would take 14 s.
    let hash = bcrypt::hash("wonderland", 8).unwrap();
    let web_config = dir.write("web.yml", &format!("basic_auth_users:\n  prometheus: '{hash}'\n"));
    let exporter = common::Exporter::spawn(common::Exporter::command(&[
        "--demo",
        "--web.config.file",
        web_config.to_str().unwrap(),
    ]));
    let url = format!("{}/metrics", exporter.url);
    let client = reqwest::Client::new();
    for distinct in [true, false] {
        let flood: Vec<_> = (0..200)
            .map(|i| {
                let password = if distinct { format!("guess-{i}") } else { "guess".to_string() };
                client.get(&url).basic_auth("prometheus", Some(password)).send()
            })
            .map(tokio::spawn)
            .collect();
        // Once one of the flood is answered, the checks' line is full (new guesses get 429 at
        // once) or the repeated guess has been checked.
        let since = std::time::Instant::now();
        while !flood.iter().any(JoinHandle::is_finished) {
            assert!(since.elapsed() < common::DEADLINE, "no answer to the flood");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let started = std::time::Instant::now();
        let first_login = client.get(&url).basic_auth("prometheus", Some("wonderland")).send().await.unwrap();
        let waited = started.elapsed();
        let status = first_login.status();
        assert!(waited < Duration::from_secs(5), "the right password waited {waited:?} behind the flood");
        let refused = futures_statuses(flood).await;
        assert!(refused.iter().all(|s| *s == StatusCode::UNAUTHORIZED || *s == StatusCode::TOO_MANY_REQUESTS));
        if distinct {
            assert!(status == StatusCode::OK || status == StatusCode::TOO_MANY_REQUESTS, "{status}");
        } else {
            assert_eq!(status, StatusCode::OK, "one wrong password repeated is checked once");
        }
        let later = client.get(&url).basic_auth("prometheus", Some("wonderland")).send().await.unwrap();
        assert_eq!(later.status(), StatusCode::OK);
        println!("distinct wrong passwords: {distinct}; the right one answered {status} in {waited:?}");
    }
}

async fn futures_statuses(requests: Vec<JoinHandle<reqwest::Result<reqwest::Response>>>) -> Vec<StatusCode> {
    let mut statuses = Vec::new();
    for request in requests {
        statuses.push(request.await.unwrap().unwrap().status());
    }
    statuses
}

/// SIGTERM while checks of the costliest hash accepted wait in line: the exporter stops after the
/// one running, not after the whole line.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_does_not_wait_for_a_line_of_password_checks() {
    let pki = Pki::new();
    let dir = ConfigDir::new(&pki);
    let started = std::time::Instant::now();
    let hash = bcrypt::hash("wonderland", 12).unwrap(); // the costliest the exporter accepts
    let one_check = started.elapsed();
    let web_config = dir.write("web.yml", &format!("basic_auth_users:\n  prometheus: '{hash}'\n"));
    let mut exporter = common::Exporter::spawn(common::Exporter::command(&[
        "--demo",
        "--web.config.file",
        web_config.to_str().unwrap(),
    ]));
    let url = format!("{}/metrics", exporter.url);
    let client = reqwest::Client::new();
    let line: Vec<_> = (0..9)
        .map(|i| client.get(&url).basic_auth("prometheus", Some(format!("guess-{i}"))).send())
        .map(tokio::spawn)
        .collect();
    // A third of a check's CPU used: the first check runs, the others wait in line.
    let (since, cpu_before) = (std::time::Instant::now(), exporter.cpu_time());
    while exporter.cpu_time() < cpu_before + one_check / 3 {
        assert!(since.elapsed() < common::DEADLINE, "no password check started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopping = std::time::Instant::now();
    let status = exporter.terminate();
    let took = stopping.elapsed();
    assert!(status.success(), "{status}");
    // The line would take 8 more checks; the one running and the stop take about one. Four
    // leave room for a busy machine, which slows the exporter's checks more than the one timed.
    assert!(took < one_check * 4, "stopping took {took:?}, one check {one_check:?}");
    println!("one check {one_check:?}; stopped in {took:?}");
    for request in line {
        let _ = request.await;
    }
}
