//! The fault-injection suite: for each way the exchange can fail, the exporter keeps serving,
//! reports it, recovers by itself, and the bill counts stay exact.

use crate::common;

use capi_sim::{Credentials, Fault, NewBill, SimOptions};
use common::{Exchange, Exporter, Scrape};
use rust_decimal::Decimal;
use serde_json::json;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn requests(scrape: &Scrape, outcome: &str) -> f64 {
    scrape.sum("capi_api_requests_total", &[("outcome", outcome)])
}

/// A deposit of 1 USDT, created now.
fn deposit() -> NewBill {
    NewBill { coin: "USDT".into(), business_type: "deposit".into(), amount: Decimal::ONE, ..NewBill::default() }
}

/// Adds a bill of 1 unit to the account and returns how many bills it has now.
fn add_deposit(exchange: &Exchange) -> usize {
    exchange.sim.add_bill(exchange.key(), deposit());
    exchange.sim.bills(exchange.key()).len()
}

async fn wait_counted(exporter: &Exporter, bills: usize) {
    exporter
        .wait_for(&format!("{bills} bills counted exactly"), |s| s.sum("capi_bills_total", &[]) == bills as f64)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn transient_faults_are_retried_counted_and_survived() {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    let exporter = Exporter::start(&exchange, &["--api.timeout", "1s"]);
    exporter.wait_up().await;
    let faults = [
        (Fault::HtmlStatus(500), "http_error"),
        (Fault::HtmlStatus(502), "http_error"),
        (Fault::ExchangeError { code: "40015".into() }, "exchange_error"),
        (Fault::Truncated, "decode_error"),
        (Fault::MalformedJson, "decode_error"),
        (Fault::Hang(Duration::from_millis(1_500)), "timeout"),
    ];
    let mut bills = 0;
    for (fault, outcome) in faults {
        let before = requests(&exporter.scrape().await, outcome);
        bills = add_deposit(&exchange);
        // Three in a row outlast one poll's retries, so the poll fails and capi_up shows it.
        exchange.sim.inject_fault(fault.clone(), 3);
        exporter.wait_for(&format!("{fault:?} counted as {outcome}"), |s| requests(s, outcome) >= before + 3.0).await;
        let scrape = exporter.wait_up().await;
        assert_eq!(scrape.value("capi_collateral_amount", &[]).map(|v| v > 0.0), Some(true));
    }
    wait_counted(&exporter, bills).await;
    assert_eq!(exporter.get("/-/healthy").await.status(), 200);
    let scrape = exporter.scrape().await;
    assert_eq!(scrape.sum("capi_api_exchange_errors_total", &[("code", "40015")]), 3.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_429_storm_backs_off_honouring_retry_after_then_resumes() {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    let exporter = Exporter::start(&exchange, &[]);
    exporter.wait_up().await;
    let requests_before = exchange.sim.requests().total;
    let bills = add_deposit(&exchange);
    let stormed = Instant::now();
    exchange.sim.inject_fault(Fault::RateLimited { retry_after_secs: Some(1) }, 3);
    let scrape =
        exporter.wait_for("a back-off", |s| s.value("capi_poll_backoff_seconds", &[]).is_some_and(|b| b > 0.0)).await;
    assert!(requests(&scrape, "rate_limited") >= 1.0);
    exporter.wait_for("three 429s counted", |s| requests(s, "rate_limited") == 3.0).await;
    let scrape = exporter.wait_up().await;
    // Three answers asking for a second's pause each: at a 200 ms interval without backing off
    // they would have been spent in 0.6 s; the poll that hits a 429 sends nothing more.
    assert!(stormed.elapsed() >= Duration::from_secs(3), "recovered after {:?}", stormed.elapsed());
    assert_eq!(scrape.value("capi_poll_backoff_seconds", &[]), Some(0.0));
    let during = exchange.sim.requests().total - requests_before;
    assert!(during < 15, "{during} requests during the storm");
    wait_counted(&exporter, bills).await;
}

/// The backoff after the second of two 429s, in seconds beyond the 0.2 s interval, with these
/// faults (and how many times each) in the poll between them; that poll's three 502s counted.
async fn backoff_after_a_second_429(between: Vec<(Fault, usize)>) -> f64 {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    // One coin: a poll is its account query (and its retries), then the bills.
    let exporter = Exporter::start(&exchange, &["--api.coin-ids", "2"]);
    exporter.wait_up().await;
    exchange.sim.inject_fault(Fault::RateLimited { retry_after_secs: None }, 1);
    for (fault, times) in between {
        exchange.sim.inject_fault(fault, times);
    }
    exchange.sim.inject_fault(Fault::RateLimited { retry_after_secs: None }, 1);
    let backoff = |s: &Scrape| s.value("capi_poll_backoff_seconds", &[]).filter(|b| *b > 0.0);
    let scrape = exporter
        .wait_for("the second 429's back-off", |s| requests(s, "rate_limited") == 2.0 && backoff(s).is_some())
        .await;
    assert_eq!(requests(&scrape, "http_error"), 3.0);
    backoff(&scrape).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_error_between_429s_does_not_cut_the_back_off_short() {
    // The account query and its two retries get a proxy's 502: no answer reached the poll.
    let waited = backoff_after_a_second_429(vec![(Fault::HtmlStatus(502), 3)]).await;
    // The second 429 of a run waits 10 s (8 to 12 with the jitter); begun afresh, 4 to 6 s.
    assert!((7.8..=11.8).contains(&waited), "backing off {waited} s after the second 429");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poll_the_exchange_answered_between_429s_ends_the_run() {
    // The account query is answered (a fault that waits for nothing); the bill query and its
    // two retries get a 502.
    let waited = backoff_after_a_second_429(vec![(Fault::Hang(Duration::ZERO), 1), (Fault::HtmlStatus(502), 3)]).await;
    assert!((3.8..=5.8).contains(&waited), "backing off {waited} s after a 429 that follows an answer");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retry_after_counts_from_the_429_however_long_the_poll_took() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let exporter = Exporter::start(&exchange, &["--api.timeout", "1s"]);
    exporter.wait_up().await;
    // Two timeouts and their retries take the poll about 2.75 s before the 429 comes. The
    // hangs outlast the test, so the 429 is the first fault answered.
    exchange.sim.inject_fault(Fault::Hang(Duration::from_secs(120)), 2);
    exchange.sim.inject_fault(Fault::RateLimited { retry_after_secs: Some(6) }, 1);
    let (refused, answered) = exchange.faults_answered(1).await;
    let waited = exchange.request_after(answered).await - refused;
    // A second of margin for the moments this test sees late.
    assert!(waited >= Duration::from_secs(5), "the next request came {waited:?} after a 429 asking for 6 s");
}

async fn skewed_clock_is_corrected(offset_ms: i64) {
    let exchange = Exchange::start(SimOptions { clock_offset_ms: offset_ms, ..SimOptions::default() }).await;
    let exporter = Exporter::start(&exchange, &["--bills.overlap", "2s"]);
    let scrape = exporter.wait_up().await;
    let offset = scrape.value("capi_clock_offset_seconds", &[]).unwrap();
    assert!((offset - offset_ms as f64 / 1000.0).abs() < 2.0, "estimated {offset} s for {offset_ms} ms");
    assert!(scrape.sum("capi_api_exchange_errors_total", &[("code", "40008")]) >= 1.0);
    // Bills are dated by the exchange's clock; the cursor follows it, so none is lost.
    let bills = add_deposit(&exchange);
    wait_counted(&exporter, bills).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_count_begins_at_the_start_by_the_exchange_clock_when_this_one_is_behind() {
    let ahead_ms = 120_000;
    let exchange = Exchange::start(SimOptions { clock_offset_ms: ahead_ms, ..SimOptions::default() }).await;
    // A deposit a minute before the start, by the exchange's clock: history, not a new bill.
    let start_ms = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap() + ahead_ms;
    let before = NewBill { ctime_ms: Some(start_ms - 60_000), ..deposit() };
    exchange.sim.add_bill(exchange.key(), before);
    let exporter = Exporter::start(&exchange, &["--bills.overlap", "2s"]);
    exporter.wait_up().await;
    exchange.sim.add_bill(exchange.key(), deposit());
    let scrape =
        exporter.wait_for("the deposit after the start counted", |s| s.sum("capi_bills_total", &[]) >= 1.0).await;
    let counting_from = scrape.value("capi_bill_counting_start_timestamp_seconds", &[]).unwrap();
    // The first answer corrects the clock by 2 minutes: counting begins when it was asked for.
    assert!(
        counting_from * 1000.0 >= (start_ms - 1_000) as f64,
        "counting from {counting_from}, started at {start_ms} ms"
    );
    assert_eq!(scrape.sum("capi_bills_total", &[]), 1.0, "only the deposit after the start");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exchange_clock_ahead_is_detected_and_signed_for() {
    skewed_clock_is_corrected(90_000).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exchange_clock_behind_is_detected_and_signed_for() {
    skewed_clock_is_corrected(-75_000).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lasting_outage_is_warned_once_though_each_error_page_names_its_request() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let exporter = Exporter::start(&exchange, &["--log.level", "debug"]);
    exporter.wait_up().await;
    // Three failing polls in a row: each poll's request and its two retries.
    exchange.sim.inject_fault(Fault::HtmlStatus(502), 9);
    exporter.wait_for("nine 502 answers", |s| requests(s, "http_error") >= 9.0).await;
    exporter.wait_up().await;
    let log = exporter.log();
    let failed: Vec<&str> = log.lines().filter(|l| l.contains("HTTP 502 from the exchange")).collect();
    let requests_named: std::collections::BTreeSet<&str> =
        failed.iter().filter_map(|l| l.split("(request ").nth(1)?.split(')').next()).collect();
    assert!(requests_named.len() >= 3, "each page names its request:\n{log}");
    let warnings = failed.iter().filter(|l| l.contains("level=warn")).count();
    assert_eq!(warnings, 1, "one warning for a lasting outage, not one per poll:\n{log}");
    exporter.wait_logged("polling the exchange works again", 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_key_is_reported_once_and_polled_ever_more_slowly() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let wrong = Credentials { secret: "not-the-secret".into(), ..exchange.credentials.clone() };
    let exporter = Exporter::start_with(&exchange.url, &wrong, &["--log.level", "debug"]);
    let scrape = exporter
        .wait_for("a slowed pace", |s| s.value("capi_poll_backoff_seconds", &[]).is_some_and(|b| b >= 1.0))
        .await;
    let rejected = scrape.sum("capi_api_exchange_errors_total", &[("code", "40009")]);
    assert!(rejected >= 3.0, "{rejected}");
    assert_eq!(requests(&scrape, "success"), 0.0);
    assert_eq!(requests(&scrape, "auth_error"), rejected, "the poll stops at the first rejection");
    assert_eq!(scrape.value("capi_up", &[]), Some(0.0));
    let ready = exporter.get("/-/ready").await;
    assert_eq!(ready.status(), 503);
    assert!(ready.text().await.unwrap().contains("default"));
    let log = exporter.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("level=warn")).collect();
    assert_eq!(warnings.len(), 1, "one warning for a lasting failure, not one per poll:\n{log}");
    assert!(warnings[0].contains("40009") && warnings[0].contains("signature verification failed"), "{}", warnings[0]);
    // At a 200 ms interval, hammering would make about 5 requests a second.
    let sent = exchange.sim.requests().total as f64;
    assert!(sent <= rejected + 1.0, "{sent} requests for {rejected} rejections");
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_refused_and_an_exchange_restart_lose_no_bill() {
    let mut exchange = Exchange::start(SimOptions::default()).await;
    exchange.sim.set_collateral_field(exchange.key(), 2, "amount", json!("777.5"));
    let exporter = Exporter::start(&exchange, &["--bills.overlap", "3s", "--data.max-age", "1m"]);
    exporter.wait_up().await;
    add_deposit(&exchange);
    exporter.wait_for("the deposit", |s| s.value("capi_collateral_amount", &[]) == Some(778.5)).await;
    exchange.stop().await;
    let down = exporter
        .wait_for("the outage", |s| s.value("capi_up", &[]) == Some(0.0) && requests(s, "transport_error") >= 3.0)
        .await;
    assert_eq!(down.value("capi_collateral_amount", &[]), Some(778.5), "last good figures stay within the max age");
    assert_eq!(exporter.get("/-/healthy").await.status(), 200);
    let warning = exporter.log().lines().find(|l| l.contains("level=warn")).map(str::to_string).unwrap_or_default();
    assert!(warning.contains("cannot reach the exchange"), "{warning}");
    // Bills keep happening while the exporter cannot see them.
    add_deposit(&exchange);
    let bills = add_deposit(&exchange);
    exchange.restart().await;
    exporter.wait_up().await;
    wait_counted(&exporter, bills).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stale_figures_are_withdrawn_and_come_back_with_the_exchange() {
    let mut exchange = Exchange::start(SimOptions::default()).await;
    let exporter = Exporter::start(&exchange, &["--data.max-age", "2s"]);
    exporter.wait_up().await;
    exchange.stop().await;
    let stale = exporter
        .wait_for("the figures withdrawn and the account down", |s| {
            s.value("capi_collateral_amount", &[]).is_none()
                && s.value("capi_data_age_seconds", &[("coin_id", "2")]).is_some_and(|age| age > 2.0)
                && s.value("capi_up", &[]) == Some(0.0)
        })
        .await;
    assert!(stale.series("capi_position_size").is_empty() && stale.series("capi_account_info").is_empty());
    exchange.restart().await;
    let fresh = exporter.wait_for("the figures back", |s| s.value("capi_collateral_amount", &[]).is_some()).await;
    assert!(fresh.value("capi_data_age_seconds", &[("coin_id", "2")]).is_some_and(|age| age < 2.0));
}

#[tokio::test(flavor = "multi_thread")]
async fn many_accounts_never_exceed_the_weight_budget() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let names: Vec<String> = (0..25).map(|i| format!("desk-{i}")).collect();
    let (config, env, keys) = exchange.accounts_file(&names);
    let mut command = Exporter::command(&["--config.file", config.to_str().unwrap(), "--api.base-url", &exchange.url]);
    command.envs(env.iter().map(|(k, v)| (k, v)));
    let exporter = Exporter::spawn(command);
    let scrape = exporter.wait_up().await;
    // 25 accounts x (1 account query + 1 bill query) = 75 IP weight per poll; 80% of 500 per
    // 11 s allows a poll of all of them every 2.0625 s, not every 200 ms.
    assert_eq!(scrape.value("capi_poll_interval_seconds", &[("account", "desk-0")]), Some(2.0625));
    assert!(exporter.log().contains("do not fit the exchange's weight budget"), "{}", exporter.log());
    // A burst on a few accounts (a bill a millisecond: more than a page, but pageable) makes
    // them page through more queries.
    let start = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    for key in keys.iter().take(3) {
        for i in 0..250 {
            let bill = NewBill {
                coin: "USDT".into(),
                business_type: "position_funding".into(),
                amount: Decimal::new(i + 1, 2),
                ctime_ms: Some(start + i),
                ..NewBill::default()
            };
            exchange.sim.add_bill(key, bill);
        }
    }
    exporter.wait_for("750 bills counted", |s| s.sum("capi_bills_total", &[]) == 750.0).await;
    let stats = exchange.sim.requests();
    assert_eq!(stats.by_outcome.get("rate_limited"), None, "{stats:?}");
    assert_eq!(requests(&exporter.scrape().await, "rate_limited"), 0.0);
}

/// A scrape never waits for a poll: while the exchange holds a poll's request for 30 s, /metrics
/// answers at once with the last snapshot's figures.
#[tokio::test]
async fn a_scrape_never_waits_for_a_poll_in_progress() {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    let exporter = Exporter::start(&exchange, &["--api.timeout", "60s"]);
    let before = exporter.wait_up().await;
    let hang = Duration::from_secs(30);
    exchange.sim.inject_fault(Fault::Hang(hang), 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    while exchange.sim.faults_pending() > 0 {
        assert!(Instant::now() < deadline, "no poll reached the exchange");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let hung_at = Instant::now();
    let during = exporter.scrape().await;
    assert!(hung_at.elapsed() < hang, "the scrape waited for the hung poll");
    assert_eq!(during.value("capi_up", &[]), Some(1.0));
    let amount = |s: &Scrape| s.value("capi_collateral_amount", &[("coin_id", "2")]);
    assert_eq!(amount(&during), amount(&before));
    assert!(amount(&during).is_some());
}
