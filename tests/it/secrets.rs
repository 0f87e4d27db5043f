//! The API key, secret and passphrase never reach logs, errors or /metrics, on any path and at
//! debug level, in both log formats.

use crate::common;

use capi_sim::{Credentials, Fault, NewBill, SimOptions};
use common::{Exchange, Exporter};
use std::process::Stdio;
use std::time::Duration;

fn assert_hidden(credentials: &Credentials, what: &str, text: &str) {
    for (name, secret) in
        [("key", &credentials.api_key), ("secret", &credentials.secret), ("passphrase", &credentials.passphrase)]
    {
        assert!(!text.contains(secret.as_str()), "the {name} appears in {what}:\n{text}");
    }
}

/// Requests that did not succeed, a counter that only grows (unlike capi_up, which a fast
/// recovery may flip back before a scrape sees it).
fn failures(scrape: &common::Scrape) -> f64 {
    scrape.sum("capi_api_requests_total", &[]) - scrape.sum("capi_api_requests_total", &[("outcome", "success")])
}

#[tokio::test(flavor = "multi_thread")]
async fn no_path_shows_a_credential() {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    let key = exchange.key().to_string();
    for format in ["logfmt", "json"] {
        let exporter =
            Exporter::start(&exchange, &["--log.level", "debug", "--log.format", format, "--api.timeout", "500ms"]);
        exporter.wait_up().await;
        exchange
            .sim
            .add_bill(&key, NewBill { coin: "USDT".into(), business_type: "deposit".into(), ..NewBill::default() });
        for fault in [
            Fault::HtmlStatus(502),
            Fault::ExchangeError { code: "40006".into() },
            Fault::Truncated,
            Fault::RateLimited { retry_after_secs: Some(1) },
            Fault::Hang(Duration::from_millis(800)),
            // A proxy's debug page and an exchange message that echo the request's headers.
            Fault::EchoHeaders(500),
            Fault::EchoHeaders(400),
        ] {
            let failed_before = failures(&exporter.scrape().await);
            exchange.sim.inject_fault(fault, 2);
            exporter.wait_for("two failed requests", |s| failures(s) >= failed_before + 2.0).await;
        }
        assert_hidden(&exchange.credentials, &format!("/metrics ({format})"), &exporter.scrape().await.text);
        assert_hidden(&exchange.credentials, &format!("the {format} log"), &exporter.log());
        assert!(exporter.log().contains("access-key: [REDACTED]"), "the echoed headers are logged, redacted");
        assert!(!exporter.log().contains("access-sign: ") || exporter.log().contains("access-sign: [REDACTED]"));
    }

    let wrong_passphrase = Credentials { passphrase: "wrong-passphrase-123".into(), ..exchange.credentials.clone() };
    let exporter = Exporter::start_with(&exchange.url, &wrong_passphrase, &["--log.level", "debug"]);
    exporter
        .wait_for("a rejected passphrase", |s| s.sum("capi_api_exchange_errors_total", &[("code", "40012")]) >= 2.0)
        .await;
    assert_hidden(&wrong_passphrase, "the log of a rejected key", &exporter.log());
    assert_hidden(&wrong_passphrase, "/metrics of a rejected key", &exporter.scrape().await.text);

    let mut incomplete = Exporter::command(&["--api.base-url", &exchange.url]);
    incomplete.env("CAPI_API_KEY", &exchange.credentials.api_key).env("CAPI_API_SECRET", &exchange.credentials.secret);
    let output = incomplete.stderr(Stdio::piped()).output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("CAPI_API_PASSPHRASE"), "{stderr}");
    assert_hidden(&exchange.credentials, "a configuration error", &stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn clock_skew_and_basic_auth_paths_show_no_secret_either() {
    let exchange = Exchange::start(SimOptions { clock_offset_ms: 45_000, ..SimOptions::default() }).await;
    let dir = std::env::temp_dir().join(format!("capi-secrets-web-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let password = "scrape-password-4711";
    let hash = bcrypt::hash(password, 4).unwrap();
    let web = dir.join("web.yml");
    std::fs::write(&web, format!("basic_auth_users:\n  prometheus: '{hash}'\n")).unwrap();
    let exporter = Exporter::start(&exchange, &["--log.level", "debug", "--web.config.file", web.to_str().unwrap()]);
    let client = reqwest::Client::new();
    let scrape = |password: &'static str| {
        let request = client.get(format!("{}/metrics", exporter.url)).basic_auth("prometheus", Some(password));
        async move { request.send().await.unwrap() }
    };
    let wrong = scrape("not-the-password-0815").await;
    assert_eq!(wrong.status(), 401);
    let deadline = std::time::Instant::now() + common::DEADLINE;
    let text = loop {
        let body = scrape(password).await.text().await.unwrap();
        if body.contains("capi_clock_offset_seconds{account=\"default\"} 4") || std::time::Instant::now() > deadline {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(text.contains("capi_clock_offset_seconds{account=\"default\"} 4"), "the skew was not corrected:\n{text}");
    let log = exporter.log();
    assert!(log.contains("40008"), "the rejected timestamp is logged:\n{log}");
    for hidden in [password, "not-the-password-0815", hash.as_str()] {
        assert!(!log.contains(hidden) && !text.contains(hidden), "{hidden} leaked");
    }
    assert_hidden(&exchange.credentials, "the log of a skewed clock", &log);
    assert_hidden(&exchange.credentials, "/metrics of a skewed clock", &text);
}
