//! When the exchange fails, /metrics keeps the last good figures, capi_up drops to 0, the
//! failure is counted by outcome, the exporter recovers by itself, and no bill is lost.

mod common;

use capi_exporter::sim::{Credentials, Fault, NewBill, SimOptions};
use common::{Exchange, Exporter, Scrape};
use serde_json::json;
use std::time::Duration;

fn requests(scrape: &Scrape, outcome: &str) -> f64 {
    scrape.sum("capi_api_requests_total", &[("outcome", outcome)])
}

#[tokio::test(flavor = "multi_thread")]
async fn each_fault_is_counted_survived_and_recovered_from() {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    let key = exchange.key().to_string();
    exchange.sim.set_collateral_field(&key, 2, "amount", json!("4321.5"));
    let exporter = Exporter::start(&exchange, &["--api.timeout", "1s", "--bills.overlap", "2s"]);
    exporter.wait_up().await;
    let faults = [
        (Fault::HtmlStatus(502), "http_error", 20),
        (Fault::ExchangeError { code: "40015".into() }, "exchange_error", 20),
        (Fault::Truncated, "decode_error", 20),
        (Fault::MalformedJson, "decode_error", 20),
        (Fault::RateLimited { retry_after_secs: None }, "rate_limited", 20),
        (Fault::Hang(Duration::from_millis(1_500)), "timeout", 3),
    ];
    let mut added = 0;
    for (fault, outcome, times) in faults {
        let before = requests(&exporter.scrape().await, outcome);
        // A zero amount leaves the collateral amount, the last good figure checked below, as it is.
        exchange
            .sim
            .add_bill(&key, NewBill { coin: "USDT".into(), business_type: "deposit".into(), ..NewBill::default() });
        added += 1;
        exchange.sim.inject_fault(fault.clone(), times);
        let failing = exporter
            .wait_for(&format!("{fault:?} counted as {outcome}"), |s| {
                requests(s, outcome) > before && s.value("capi_up", &[]) == Some(0.0)
            })
            .await;
        assert_eq!(
            failing.value("capi_collateral_amount", &[]),
            Some(4321.5),
            "last good figures stay during {fault:?}"
        );
        exporter.wait_up().await;
    }
    let scrape = exporter.scrape().await;
    assert_eq!(scrape.sum("capi_api_exchange_errors_total", &[("code", "40015")]), 20.0);
    exporter
        .wait_for("every bill counted once", |s| {
            s.value("capi_bills_total", &[("business_type", "deposit")]) == Some(added as f64)
        })
        .await;
    assert_eq!(exporter.get("/-/healthy").await.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_key_is_reported_once_with_its_code_and_not_ready() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let wrong = Credentials { secret: "not-the-secret".into(), ..exchange.credentials.clone() };
    let exporter = Exporter::start_with(&exchange.url, &wrong, &["--log.level", "debug"]);
    let scrape = exporter
        .wait_for("auth errors", |s| {
            s.value("capi_api_exchange_errors_total", &[("code", "40009"), ("endpoint", "account")]) >= Some(3.0)
        })
        .await;
    assert!(requests(&scrape, "auth_error") >= 3.0);
    assert_eq!(requests(&scrape, "success"), 0.0);
    assert_eq!(scrape.value("capi_up", &[]), Some(0.0));
    let ready = exporter.get("/-/ready").await;
    assert_eq!(ready.status(), 503);
    assert!(ready.text().await.unwrap().contains("default"));
    let log = exporter.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("level=warn")).collect();
    assert_eq!(warnings.len(), 2, "one warning per endpoint for a lasting failure, not one per poll:\n{log}");
    for (warning, endpoint) in warnings.iter().zip(["account", "bills"]) {
        assert!(warning.contains(&format!("endpoint={endpoint}")), "{warning}");
        assert!(warning.contains("40009") && warning.contains("signature verification failed"), "{warning}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_exchange_is_a_transport_error_and_the_exporter_keeps_serving() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let exporter = Exporter::start_with(&closed, &Credentials::generate(1), &[]);
    let scrape = exporter.wait_for("transport errors", |s| requests(s, "transport_error") >= 2.0).await;
    assert_eq!(scrape.value("capi_up", &[]), Some(0.0));
    assert_eq!(exporter.get("/-/healthy").await.status(), 200);
    assert_eq!(exporter.get("/-/ready").await.status(), 503);
    let warning = exporter.log().lines().find(|l| l.contains("level=warn")).map(str::to_string).unwrap_or_default();
    assert!(warning.contains("cannot reach the exchange"), "{warning}");
}
