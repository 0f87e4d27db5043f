//! The client speaks TLS to an `https://` exchange and checks its certificate against the
//! Mozilla roots: an exchange whose certificate no public authority issued is refused, with the
//! reason in the error, before any credential is sent.

use capi_exporter::api::{ApiError, Client, ClientSettings, Credentials, Secret};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt as _;

const SECRET: &str = "tls-test-secret-3c9a";

/// Serves TLS with a self-signed certificate for 127.0.0.1; reports whether a client finished
/// the handshake and what it sent after it.
async fn self_signed_exchange() -> (u16, tokio::task::JoinHandle<Option<Vec<u8>>>) {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let served = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.ok()?;
        let mut tls = acceptor.accept(socket).await.ok()?;
        let mut request = Vec::new();
        let _ = tls.read_to_end(&mut request).await;
        Some(request)
    });
    (port, served)
}

#[tokio::test]
async fn an_exchange_with_an_untrusted_certificate_is_refused_before_credentials_are_sent() {
    let (port, served) = self_signed_exchange().await;
    let settings = ClientSettings {
        base_url: format!("https://127.0.0.1:{port}"),
        timeout: Duration::from_secs(10),
        locale: "en-US".into(),
    };
    let credentials = Credentials {
        api_key: Secret::new("tls-test-key"),
        secret: Secret::new(SECRET),
        passphrase: Secret::new("tls-test-passphrase"),
    };
    let client =
        Client::new(Client::http_pool(settings.timeout), settings, credentials, Default::default()).expect("client");

    let error = client.account(1).await.expect_err("an untrusted certificate must be refused");
    let ApiError::Transport(message) = &error else { panic!("not a transport error: {error}") };
    assert!(message.contains("UnknownIssuer"), "the reason is missing: {message}");
    assert!(!message.contains(SECRET) && !message.contains("tls-test-key"), "{message}");
    let received = tokio::time::timeout(Duration::from_secs(10), served).await.expect("server done").expect("task");
    assert_eq!(received, None, "the handshake must fail before any request is sent");
}
