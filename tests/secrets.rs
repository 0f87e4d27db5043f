//! The API key, secret and passphrase never reach logs, errors or /metrics, on any path and at
//! debug level, in both log formats.

mod common;

use capi_exporter::sim::{Credentials, Fault, NewBill, SimOptions};
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
        ] {
            let failed_before = failures(&exporter.scrape().await);
            exchange.sim.inject_fault(fault, 2);
            exporter.wait_for("two failed requests", |s| failures(s) >= failed_before + 2.0).await;
        }
        assert_hidden(&exchange.credentials, &format!("/metrics ({format})"), &exporter.scrape().await.text);
        assert_hidden(&exchange.credentials, &format!("the {format} log"), &exporter.log());
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
