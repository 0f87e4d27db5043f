//! Exact, or loud: the situations where bills could be lost silently or a poller could die, each
//! against the simulated exchange and the real binary. Every bill is counted exactly once, or the
//! shortfall shows in `capi_bill_pages_truncated_total` and a warning; no input stops an account
//! from being polled.

use crate::common;

use capi_sim::{DateHeader, Fault, NewBill, SimOptions};
use common::{now_ms, Exchange, Exporter, Scrape};
use rust_decimal::Decimal;
use std::time::Duration;

/// Fast polls, room in the weight budget for the hundreds of queries of a crowded millisecond,
/// and a short overlap so that counts settle quickly.
const FAST: [&str; 8] = [
    "--bills.overlap",
    "1s",
    "--api.ip-weight-budget",
    "100000",
    "--api.uid-weight-budget",
    "100000",
    "--poll.interval",
    "300ms",
];

fn bill(kind: &str, coin: &str, symbol: &str, amount: Decimal, ctime_ms: i64) -> NewBill {
    NewBill {
        coin: coin.into(),
        symbol: symbol.into(),
        business_type: kind.into(),
        amount,
        fill_fee: Decimal::ZERO,
        ctime_ms: Some(ctime_ms),
        visible_after: Duration::ZERO,
    }
}

/// An exchange with the weight budget of [`FAST`].
async fn roomy_exchange() -> Exchange {
    Exchange::start(SimOptions { weight_per_10s: Some(100_000), ..SimOptions::default() }).await
}

/// A roomy exchange whose bounds are exclusive, so they are never proven inclusive and a crowded
/// millisecond's loss stays "possible" rather than depending on which bounds were proven first.
async fn exclusive_exchange() -> Exchange {
    let options = SimOptions {
        start_inclusive: false,
        end_inclusive: false,
        weight_per_10s: Some(100_000),
        ..SimOptions::default()
    };
    Exchange::start(options).await
}

/// The exporter started on `exchange` with [`FAST`] settings, once its first poll succeeded.
async fn watched(exchange: Exchange) -> (Exchange, Exporter) {
    let exporter = Exporter::start(&exchange, &FAST);
    exporter.wait_up().await;
    (exchange, exporter)
}

async fn settled_past(exporter: &Exporter, ms: i64) -> Scrape {
    let settled = ms as f64 / 1000.0;
    exporter
        .wait_for("the bills to settle", |s| {
            s.value("capi_bill_cursor_timestamp_seconds", &[]).is_some_and(|t| t >= settled)
        })
        .await
}

fn shortfalls(scrape: &Scrape, loss: &str) -> Option<f64> {
    scrape.value("capi_bill_pages_truncated_total", &[("loss", loss)])
}

/// The warning line of a crowded millisecond, with its fields.
fn shortfall_warning(log: &str, ms: i64) -> Option<String> {
    let millisecond = format!("millisecond={ms} ");
    log.lines().find(|line| line.contains("level=warn") && line.contains(&millisecond)).map(str::to_owned)
}

/// 150 funding bills in one millisecond, each of its own symbol: a funding settlement of an
/// account with 150 positions.
fn fund_150_positions(exchange: &Exchange, at: i64) {
    for i in 0..150 {
        let symbol = format!("cmt_{i}usdt");
        exchange.sim.add_bill(exchange.key(), bill("position_funding", "USDT", &symbol, Decimal::new(-(i + 1), 2), at));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crowded_millisecond_of_symbols_never_seen_is_reported_as_a_possible_loss() {
    let (exchange, exporter) = watched(exclusive_exchange().await).await;
    let at = now_ms();
    fund_150_positions(&exchange, at);
    let scrape = settled_past(&exporter, at).await;
    // The page shows 100 symbols; the other 50 were never seen, and the API cannot list them.
    assert_eq!(scrape.value("capi_bills_total", &[("business_type", "position_funding")]), Some(100.0));
    assert_eq!(shortfalls(&scrape, "possible"), Some(1.0));
    assert_eq!(shortfalls(&scrape, "certain"), Some(0.0));
    let warning = shortfall_warning(&exporter.log(), at).expect("a warning names the millisecond");
    for field in ["account=default", "business_type=position_funding", "bills_found=100", "loss=possible"] {
        assert!(warning.contains(field), "{field} in {warning}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crowded_millisecond_of_symbols_seen_before_is_counted_whole() {
    let (exchange, exporter) = watched(exclusive_exchange().await).await;
    // Each position was opened on its own millisecond: the symbols become known.
    let opened = now_ms();
    for i in 0..150 {
        let symbol = format!("cmt_{i}usdt");
        exchange
            .sim
            .add_bill(exchange.key(), bill("position_open_long", "USDT", &symbol, Decimal::NEGATIVE_ONE, opened + i));
    }
    settled_past(&exporter, opened + 149).await;
    let at = now_ms();
    fund_150_positions(&exchange, at);
    let scrape = settled_past(&exporter, at).await;
    assert_eq!(scrape.value("capi_bills_total", &[("business_type", "position_open_long")]), Some(150.0));
    assert_eq!(scrape.value("capi_bills_total", &[("business_type", "position_funding")]), Some(150.0));
    let funded: f64 = (1..=150).map(|i| i as f64 / 100.0).sum();
    let paid = scrape.value("capi_bill_amount_total", &[("business_type", "position_funding"), ("direction", "out")]);
    assert!((paid.unwrap() - funded).abs() < 1e-9, "{paid:?}");
    // Every bill counted, yet a symbol never seen would have been missed: still reported.
    assert_eq!(shortfalls(&scrape, "possible"), Some(1.0));
    assert!(shortfall_warning(&exporter.log(), at).unwrap().contains("bills_found=150"));
}

/// 50 BTC and then 100 USDT deposits in one millisecond: the exchange lists the newest first,
/// so the first page shows only USDT.
fn deposit_in_two_coins(exchange: &Exchange, at: i64) {
    for coin in std::iter::repeat_n("BTC", 50).chain(std::iter::repeat_n("USDT", 100)) {
        exchange.sim.add_bill(exchange.key(), bill("deposit", coin, "", Decimal::ONE, at));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coin_a_crowded_page_hides_is_reported_unless_seen_before() {
    let (exchange, exporter) = watched(exclusive_exchange().await).await;
    let at = now_ms();
    deposit_in_two_coins(&exchange, at);
    let scrape = settled_past(&exporter, at).await;
    assert_eq!(scrape.value("capi_bills_total", &[("coin", "USDT"), ("business_type", "deposit")]), Some(100.0));
    assert_eq!(scrape.value("capi_bills_total", &[("coin", "BTC"), ("business_type", "deposit")]), None);
    assert_eq!(shortfalls(&scrape, "possible"), Some(1.0));
    assert!(shortfall_warning(&exporter.log(), at).unwrap().contains("business_type=deposit"));

    // Once a BTC bill has shown the coin, the next crowded millisecond is queried for it too.
    let earlier = now_ms();
    exchange.sim.add_bill(exchange.key(), bill("withdraw", "BTC", "", Decimal::NEGATIVE_ONE, earlier));
    settled_past(&exporter, earlier).await;
    let again = now_ms() + 1;
    deposit_in_two_coins(&exchange, again);
    let scrape = settled_past(&exporter, again).await;
    assert_eq!(scrape.value("capi_bills_total", &[("coin", "USDT"), ("business_type", "deposit")]), Some(200.0));
    assert_eq!(scrape.value("capi_bills_total", &[("coin", "BTC"), ("business_type", "deposit")]), Some(50.0));
    assert_eq!(shortfalls(&scrape, "possible"), Some(2.0));
    assert!(shortfall_warning(&exporter.log(), again).unwrap().contains("bills_found=150"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crowded_millisecond_query_the_exchange_refuses_is_reported_and_counting_goes_on() {
    let refused = vec!["x_rebate".to_owned()];
    let options = SimOptions { refused_business_types: refused, ..SimOptions::default() };
    let (exchange, exporter) =
        watched(Exchange::start(SimOptions { weight_per_10s: Some(100_000), ..options }).await).await;
    // The account's bills show a type the exchange refuses as a filter; then a crowded millisecond.
    let seen = now_ms();
    exchange.sim.add_bill(exchange.key(), bill("x_rebate", "USDT", "", Decimal::ONE, seen));
    settled_past(&exporter, seen).await;
    let crowded = now_ms() + 1;
    for kind in ["deposit", "withdraw"].repeat(60) {
        exchange.sim.add_bill(exchange.key(), bill(kind, "USDT", "", Decimal::ONE, crowded));
    }
    let scrape = settled_past(&exporter, crowded).await;
    let counted = |s: &Scrape, kind| s.value("capi_bills_total", &[("business_type", kind)]);
    assert_eq!((counted(&scrape, "deposit"), counted(&scrape, "withdraw")), (Some(60.0), Some(60.0)));
    assert_eq!(shortfalls(&scrape, "possible"), Some(1.0));
    assert!(shortfall_warning(&exporter.log(), crowded).unwrap().contains("business_type=x_rebate"));
    assert!(exporter.log().contains("the exchange refuses this query of a crowded millisecond's bills"));
    // Counting goes on, and the account is up again.
    let later = now_ms() + 2;
    exchange.sim.add_bill(exchange.key(), bill("deposit", "USDT", "", Decimal::ONE, later));
    exporter
        .wait_for("the later deposit", |s| counted(s, "deposit") == Some(61.0) && s.value("capi_up", &[]) == Some(1.0))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn amounts_past_the_decimal_range_are_counted_and_reported_not_fatal() {
    let (exchange, exporter) = watched(roomy_exchange().await).await;
    let at = now_ms();
    exchange.sim.add_bill(exchange.key(), bill("deposit", "USDT", "", Decimal::MAX, at));
    exchange.sim.add_bill(exchange.key(), bill("deposit", "USDT", "", Decimal::MAX, at + 1));
    settled_past(&exporter, at + 1).await;
    // The poller lives on: a later bill is counted too.
    let later = now_ms() + 2;
    exchange.sim.add_bill(exchange.key(), bill("withdraw", "USDT", "", Decimal::NEGATIVE_ONE, later));
    let scrape = settled_past(&exporter, later).await;
    assert_eq!(scrape.value("capi_bills_total", &[("business_type", "deposit")]), Some(2.0));
    assert_eq!(scrape.value("capi_bills_total", &[("business_type", "withdraw")]), Some(1.0));
    let max: f64 = Decimal::MAX.to_string().parse().unwrap();
    assert_eq!(scrape.value("capi_bill_amount_total", &[("business_type", "deposit"), ("direction", "in")]), Some(max));
    let unsummed = [("endpoint", "bills"), ("record", "bill"), ("field", "amount")];
    assert_eq!(scrape.value("capi_api_decode_problems_total", &unsummed), Some(1.0));
    assert_eq!(scrape.value("capi_up", &[]), Some(1.0));
    assert_eq!(scrape.value("capi_poller_restarts_total", &[]), Some(0.0));
    assert!(exporter.log().contains("too large to add to the counted sum"), "{}", exporter.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retry_after_of_any_size_waits_at_most_an_hour() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let exporter = Exporter::start(&exchange, &["--poll.interval", "1s"]);
    exporter.wait_up().await;
    exchange.sim.inject_fault(Fault::RateLimited { retry_after_secs: Some(u64::MAX) }, 1);
    let scrape =
        exporter.wait_for("the backoff", |s| s.value("capi_poll_backoff_seconds", &[]).is_some_and(|b| b > 0.0)).await;
    assert_eq!(scrape.value("capi_poll_backoff_seconds", &[]), Some(3599.0));
    assert_eq!(scrape.value("capi_up", &[]), Some(0.0));
    assert_eq!(scrape.value("capi_poller_restarts_total", &[]), Some(0.0));
    assert!(!exporter.log().contains("panicked"), "{}", exporter.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_answer_is_a_decode_error_and_polling_goes_on() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let exporter = Exporter::start(&exchange, &["--poll.interval", "1s"]);
    exporter.wait_up().await;
    // One poll's request and its two retries.
    exchange.sim.inject_fault(Fault::Oversized(17 << 20), 3);
    let decode_errors = [("outcome", "decode_error")];
    let scrape = exporter
        .wait_for("recovery after the oversized answers", |s| {
            s.sum("capi_api_requests_total", &decode_errors) == 3.0 && s.value("capi_up", &[]) == Some(1.0)
        })
        .await;
    assert_eq!(scrape.value("capi_poller_restarts_total", &[]), Some(0.0));
    assert!(exporter.log().contains("the answer is larger than 16 MiB"), "{}", exporter.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poller_that_dies_is_restarted_and_counts_every_bill_once() {
    let exchange = Exchange::start(SimOptions::default()).await;
    // A long account name, as trading desks use (any arithmetic on names must hold for it).
    let name = "a-long-account-name-of-a-trading-desk";
    // One deposit before the start, counted by the first poll: the polls after it die.
    exchange.sim.add_bill(exchange.key(), bill("deposit", "USDT", "", Decimal::from(100), now_ms() - 10_000));
    let state = common::state_path("poller-dies");
    let flags = ["--bills.overlap", "1s", "--bills.backfill", "1m", "--state.file", state.to_str().unwrap()];
    let mut command = Exporter::command(&[&["--api.account-name", name][..], &flags[..]].concat());
    command
        .args(["--api.base-url", &exchange.url])
        .env("CAPI_API_KEY", &exchange.credentials.api_key)
        .env("CAPI_API_SECRET", &exchange.credentials.secret)
        .env("CAPI_API_PASSPHRASE", &exchange.credentials.passphrase)
        .env("CAPI_TEST_PANIC", format!("{name}:3"));
    let exporter = Exporter::spawn(command);
    exporter.wait_up().await;
    // Bills flow while the poller dies three times, 1, 2 and 4 s apart.
    let key = exchange.key().to_string();
    let sim = exchange.sim.clone();
    let flow = std::thread::spawn(move || {
        for i in 0..60 {
            sim.add_bill(&key, bill("deposit", "USDT", "", Decimal::new(i + 1, 1), now_ms()));
            std::thread::sleep(Duration::from_millis(150));
        }
    });
    let down = exporter
        .wait_for("the account shown down", |s| {
            s.value("capi_poller_restarts_total", &[]) >= Some(1.0) && s.value("capi_up", &[]) == Some(0.0)
        })
        .await;
    let deposits = |s: &Scrape| s.value("capi_bills_total", &[("business_type", "deposit")]);
    assert_eq!(deposits(&down), Some(1.0), "the last counters stay on show");
    flow.join().unwrap();
    let newest = exchange.sim.bills(exchange.key()).iter().map(|b| b.ctime_ms).max().unwrap();
    let scrape = exporter
        .wait_for("three restarts and every bill", |s| {
            s.value("capi_poller_restarts_total", &[]) == Some(3.0)
                && s.value("capi_up", &[]) == Some(1.0)
                && s.value("capi_bill_cursor_timestamp_seconds", &[]).is_some_and(|t| t >= newest as f64 / 1000.0)
        })
        .await;
    assert_eq!(deposits(&scrape), Some(61.0));
    let deposited: f64 = 100.0 + (1..=60).map(|i| i as f64 / 10.0).sum::<f64>();
    let counted = scrape.value("capi_bill_amount_total", &[("business_type", "deposit"), ("direction", "in")]).unwrap();
    assert!((counted - deposited).abs() < 1e-9, "{counted} counted, {deposited} deposited");
    let log = exporter.log();
    let deaths = log.lines().filter(|l| l.contains("level=error") && l.contains("poller stopped unexpectedly"));
    assert_eq!(deaths.filter(|l| l.contains(&format!("account={name}"))).count(), 3, "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_absurd_exchange_time_moves_the_clock_a_day_at_most_and_is_corrected() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let exporter = Exporter::start(&exchange, &["--poll.interval", "300ms"]);
    exporter.wait_up().await;
    for request_time_ms in [i64::MAX, now_ms() + 30 * 365 * 86_400_000, i64::MIN] {
        let rejected_before = exporter.scrape().await.sum("capi_api_exchange_errors_total", &[("code", "40008")]);
        exchange.sim.inject_fault(Fault::RejectedTimestamp { request_time_ms }, 1);
        // The answer taught an offset of a day at most: the next request, signed a day off, is
        // rejected by the exchange with its true time, which corrects the clock again.
        exporter
            .wait_for("the clock corrected back", |s| {
                s.sum("capi_api_exchange_errors_total", &[("code", "40008")]) >= rejected_before + 2.0
                    && s.value("capi_clock_offset_seconds", &[]).is_some_and(|o| o.abs() < 5.0)
                    && s.value("capi_up", &[]) == Some(1.0)
            })
            .await;
    }
    let log = exporter.log();
    assert!(!log.contains("panicked") && !log.contains("stopped unexpectedly"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clock_ahead_by_less_than_the_exchange_rejects_is_learned_and_a_late_bill_still_counts() {
    // This machine's clock 20 s ahead: within the 30 s the exchange accepts, so no timestamp is
    // rejected. Taken as the exchange's, it would settle bills 10 s after the exchange's now
    // with a 10 s overlap, and a bill listed 5 s late would never be counted.
    let exchange = Exchange::start(SimOptions { clock_offset_ms: -20_000, ..SimOptions::default() }).await;
    let exporter = Exporter::start(&exchange, &["--bills.overlap", "10s"]);
    // Should the first answer come too late to tell (a busy machine), counting starts 20 s
    // ahead, and a bill before that start is history: wait until the exchange's now is past it.
    exporter
        .wait_for("the exchange's clock learned from its answers' Date, and counting started", |s| {
            s.value("capi_clock_offset_seconds", &[]).is_some_and(|o| (-21.5..=-19.5).contains(&o))
                && s.value("capi_up", &[]) == Some(1.0)
                && s.value("capi_bill_cursor_timestamp_seconds", &[])
                    .is_some_and(|cursor| cursor * 1000.0 < (now_ms() - 20_000) as f64)
        })
        .await;
    let late = NewBill { visible_after: Duration::from_secs(5), ..common::usdt_bill("deposit", 1_234, 0) };
    exchange.sim.add_bill(exchange.key(), late);
    let counted = exporter.wait_for("the late deposit counted", |s| s.sum("capi_bills_total", &[]) == 1.0).await;
    assert_eq!(
        counted.value("capi_bill_amount_total", &[("business_type", "deposit"), ("direction", "in")]),
        Some(12.34)
    );
    assert_eq!(counted.sum("capi_api_exchange_errors_total", &[]), 0.0, "no timestamp was rejected");
    let log = exporter.log();
    let warning = log.lines().find(|l| l.contains("clock is off the exchange's")).unwrap_or_default();
    assert!(warning.contains("level=warn") && warning.contains("offset_seconds=-2"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_date_ahead_of_the_exchanges_clock_does_not_move_the_bill_window_ahead() {
    // A load balancer whose clock is 20 s ahead writes the `Date`; this machine's clock and the
    // exchange's agree. Taken, it would settle bills 10 s after the exchange's now with a 10 s
    // overlap, and a bill listed 5 s late would never be counted.
    let exchange = Exchange::start(SimOptions { date: DateHeader::Skewed(20_000), ..SimOptions::default() }).await;
    let exporter = Exporter::start(&exchange, &["--bills.overlap", "10s"]);
    exporter.wait_up().await;
    let late = NewBill { visible_after: Duration::from_secs(5), ..common::usdt_bill("deposit", 4_321, 0) };
    exchange.sim.add_bill(exchange.key(), late);
    let counted = exporter.wait_for("the late deposit counted", |s| s.sum("capi_bills_total", &[]) == 1.0).await;
    assert_eq!(
        counted.value("capi_bill_amount_total", &[("business_type", "deposit"), ("direction", "in")]),
        Some(43.21)
    );
    assert_eq!(counted.value("capi_clock_offset_seconds", &[]), Some(0.0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_date_by_another_clock_does_not_undo_the_correction_of_a_rejected_timestamp() {
    // This machine's clock 90 s ahead, and a proxy on it that dates the answers by it, as nginx
    // does: the `Date` contradicts the exchange's acceptance of requests signed 90 s back.
    let options = SimOptions { clock_offset_ms: -90_000, date: DateHeader::Skewed(90_000), ..SimOptions::default() };
    let exchange = Exchange::start(options).await;
    let exporter = Exporter::start(&exchange, &["--bills.overlap", "10s"]);
    exporter
        .wait_for("the clock corrected by the rejected timestamp", |s| {
            s.value("capi_clock_offset_seconds", &[]).is_some_and(|o| (-90.5..=-89.5).contains(&o))
                && s.value("capi_up", &[]) == Some(1.0)
        })
        .await;
    exchange.sim.add_bill(exchange.key(), common::usdt_bill("deposit", 500, 0));
    let counted = exporter.wait_for("the deposit counted", |s| s.sum("capi_bills_total", &[]) == 1.0).await;
    assert_eq!(counted.value("capi_clock_offset_seconds", &[]).map(f64::round), Some(-90.0));
    let rejected = counted.sum("capi_api_exchange_errors_total", &[("code", "40008")]);
    assert_eq!(rejected, 1.0, "one rejection taught the clock; none after");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_accounts_answer_never_moves_another_accounts_clock() {
    // An exchange that accepts timestamps two days off, and sends no `Date` to learn from, keeps
    // a wrong offset in place, so what each account's clock learned can be read at leisure.
    let exchange = Exchange::start(SimOptions {
        timestamp_window_ms: 2 * 86_400_000,
        date: DateHeader::Blank,
        ..SimOptions::default()
    })
    .await;
    let names = ["a".to_owned(), "b".to_owned()];
    let (config, env, _) = exchange.accounts_file(&names);
    let mut command = Exporter::command(&["--config.file", config.to_str().unwrap(), "--api.base-url", &exchange.url]);
    command.envs(env.iter().map(|(k, v)| (k, v)));
    let exporter = Exporter::spawn(command);
    exporter.wait_up().await;
    exchange.sim.inject_fault(Fault::RejectedTimestamp { request_time_ms: now_ms() + 30 * 365 * 86_400_000 }, 1);
    let scrape = exporter
        .wait_for("one account's clock a day ahead", |s| {
            s.series("capi_clock_offset_seconds").iter().any(|o| o.value > 86_000.0)
                && s.value("capi_up", &[("account", "a")]) == Some(1.0)
        })
        .await;
    let offsets = scrape.series("capi_clock_offset_seconds");
    let moved: Vec<f64> = offsets.iter().map(|o| o.value).filter(|o| o.abs() > 5.0).collect();
    assert_eq!(moved, [86_400.0], "only the account that read the time moved, by a day: {offsets:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bills_an_exchange_makes_up_cannot_grow_the_series_and_are_reported() {
    let (exchange, exporter) = watched(roomy_exchange().await).await;
    // 50 bills of a new type and coin each, and 50 from the year 2000, on each of 60 answers.
    exchange.sim.inject_fault(Fault::ForeignBills(100), 60);
    let served_in_window = || {
        let pages = exchange.sim.requests().faulted_by_path.get("/capi/v2/account/bills").copied().unwrap_or(0);
        50.0 * pages as f64
    };
    let counted_all = exporter
        .wait_for("every made-up bill of the window counted", |s| {
            exchange.sim.faults_pending() == 0 && s.sum("capi_bills_total", &[]) == served_in_window()
        })
        .await;
    // Counted once: two more bill queries later, the total has not moved.
    let bill_queries = |s: &Scrape| s.sum("capi_api_requests_total", &[("endpoint", "bills")]);
    let queried = bill_queries(&counted_all);
    let scrape = exporter.wait_for("two more bill queries", |s| bill_queries(s) >= queried + 2.0).await;
    let total = scrape.sum("capi_bills_total", &[]);
    assert_eq!(total, served_in_window(), "each made-up bill of the window counted once");
    assert!(total >= 50.0, "at least one bill page had made-up bills");
    let counted = scrape.series("capi_bills_total");
    let label_values =
        |label: &str| counted.iter().map(|s| s.labels[label].clone()).collect::<std::collections::BTreeSet<_>>();
    let (coins, types) = (label_values("coin"), label_values("business_type"));
    assert!(coins.len() <= 32 && types.len() <= 64, "{} coins, {} types", coins.len(), types.len());
    assert!(coins.contains("other") && types.contains("other"), "the excess is counted as other");
    let problems =
        |field: &str| scrape.sum("capi_api_decode_problems_total", &[("endpoint", "bills"), ("field", field)]);
    assert_eq!(problems("cTime"), total, "each bill outside the window reported");
    assert!(problems("coin") > 0.0 && problems("businessType") > 0.0);
    assert_eq!(scrape.value("capi_up", &[]), Some(1.0));
}
