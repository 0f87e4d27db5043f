//! The ledger check against the simulated exchange: a bill the bill query never lists and a
//! running total moved without a bill each show in `capi_ledger_difference`, with their field and
//! amount; bursts, late bills, a restart and `kill -9` leave every difference at 0.

use crate::common;

use capi_sim::{NewBill, SimOptions};
use common::{now_ms, usdt_bill, Exchange, Exporter, Scrape};
use std::collections::BTreeMap;
use std::time::Duration;

const FIELDS: usize = 14;

/// Every ledger difference of the page, by field.
fn differences(scrape: &Scrape) -> BTreeMap<String, f64> {
    scrape
        .matching("capi_ledger_difference", &[("coin", "USDT"), ("coin_id", "2")])
        .into_iter()
        .map(|s| (s.labels["field"].clone(), s.value))
        .collect()
}

fn all_zero(scrape: &Scrape) -> bool {
    let differences = differences(scrape);
    differences.len() == FIELDS && differences.values().all(|d| *d == 0.0)
}

fn hidden(bill: NewBill) -> NewBill {
    NewBill { visible_after: Duration::MAX, ..bill }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hidden_bill_and_a_total_moved_without_a_bill_show_with_their_field_and_amount() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let key = exchange.key();
    let exporter = Exporter::start(&exchange, &["--bills.overlap", "1s"]);
    exporter.wait_for("every running total compared, at 0", all_zero).await;

    exchange.sim.add_bill(key, usdt_bill("deposit", 300, 0));
    exchange.sim.add_bill(key, hidden(usdt_bill("deposit", 250, 0)));
    exchange.sim.add_bill(key, hidden(usdt_bill("position_open_long", -1000, -6)));
    let scrape = exporter
        .wait_for("the hidden bills' difference", |s| {
            differences(s).get("cum_deposit_amount") == Some(&2.5)
                && differences(s).get("cum_position_open_long_amount") == Some(&10.0)
        })
        .await;
    let expected: BTreeMap<&str, f64> =
        [("cum_deposit_amount", 2.5), ("cum_position_open_long_amount", 10.0), ("cum_position_fill_fee_amount", 0.06)]
            .into();
    for (field, difference) in differences(&scrape) {
        assert_eq!(difference, expected.get(field.as_str()).copied().unwrap_or(0.0), "{field}");
    }
    assert_eq!(scrape.value("capi_bills_total", &[("business_type", "deposit")]), Some(1.0), "the visible one");

    // 1.25 withdrawn as far as the running total says, with no bill at all.
    exchange.sim.move_running_total(key, 2, "cum_withdraw_amount", rust_decimal::Decimal::new(125, 2)).unwrap();
    let scrape = exporter
        .wait_for("the withdrawal total's difference", |s| differences(s).get("cum_withdraw_amount") == Some(&1.25))
        .await;
    assert_eq!(differences(&scrape)["cum_deposit_amount"], 2.5, "the earlier difference stays");
    let log = exporter.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("capi_ledger_difference")).collect();
    for field in ["cum_deposit_amount", "cum_position_open_long_amount", "cum_withdraw_amount"] {
        assert!(
            warnings.iter().any(|l| l.contains("level=warn") && l.contains(&format!("field={field}"))),
            "no warning for {field}:\n{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn while_saves_fail_the_ledger_check_shows_what_is_saved_as_the_counters_do() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let key = exchange.key();
    let state = common::state_path("ledger-unsaved");
    let exporter = Exporter::start(&exchange, &["--bills.overlap", "1s", "--state.file", state.to_str().unwrap()]);
    exporter.wait_for("every running total compared, at 0", all_zero).await;
    // A directory where the file was: every save fails (renaming over it). A save may put the
    // file back in between: then again.
    while std::fs::remove_file(&state).is_ok() && std::fs::create_dir(&state).is_err() {}
    let failed_saves = |s: &Scrape| s.value("capi_state_file_errors_total", &[]).unwrap_or(0.0);
    let failing = exporter.wait_for("saves failing", |s| failed_saves(s) >= 1.0).await;
    exchange.sim.move_running_total(key, 2, "cum_withdraw_amount", rust_decimal::Decimal::new(125, 2)).unwrap();
    // Ten more polls, two seconds: the total's move is settled and compared, but not saved.
    let unsaved = exporter.wait_for("saves failing on", |s| failed_saves(s) >= failed_saves(&failing) + 10.0).await;
    assert!(all_zero(&unsaved), "shown unsaved: {:?}", differences(&unsaved));
    std::fs::remove_dir(&state).unwrap();
    exporter
        .wait_for("the difference shown once saved", |s| differences(s).get("cum_withdraw_amount") == Some(&1.25))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_difference_is_shown_from_the_first_scrape_after_a_restart() {
    let mut exchange = Exchange::start(SimOptions::default()).await;
    let state = common::state_path("ledger-restart");
    let flags = ["--bills.overlap", "1s", "--state.file", state.to_str().unwrap()];
    let mut exporter = Exporter::start(&exchange, &flags);
    exporter.wait_for("every running total compared, at 0", all_zero).await;
    exchange.sim.add_bill(exchange.key(), hidden(usdt_bill("deposit", 250, 0)));
    exporter.wait_for("the hidden bill's difference", |s| differences(s).get("cum_deposit_amount") == Some(&2.5)).await;
    assert!(exporter.terminate().success());

    // No poll can answer: the saved difference is all the exporter has, and it is shown (with no
    // figures of the coin), so that a restart does not hold off the alert on it.
    exchange.stop().await;
    let exporter = Exporter::start(&exchange, &flags);
    let first = exporter.scrape().await;
    assert_eq!(differences(&first).get("cum_deposit_amount"), Some(&2.5), "{}", first.text);
    assert_eq!(differences(&first).len(), FIELDS);
    assert_eq!(first.value("capi_collateral_amount", &[]), None);
}

/// Adds bills of every kind the check compares, signed as the exchange books them: a burst of
/// more than a page in one millisecond, and some that become visible a second late.
fn add_activity(exchange: &Exchange, round: i64) {
    let key = exchange.key();
    let at = Some(now_ms());
    for n in 0..120 {
        let bill = match n % 4 {
            0 => usdt_bill("deposit", 100 + n, 0),
            1 => usdt_bill("withdraw", -(50 + n), 0),
            2 => usdt_bill("position_open_long", -(200 + n), -(n % 5 + 1)),
            _ => usdt_bill("position_funding", if n % 8 == 3 { 7 } else { -3 }, 0),
        };
        exchange.sim.add_bill(key, NewBill { ctime_ms: at, ..bill });
    }
    for n in 0..20 {
        let late = NewBill {
            visible_after: Duration::from_millis(1_000),
            ..usdt_bill("position_close_long", 500 + n + round, -2)
        };
        exchange.sim.add_bill(key, late);
    }
}

/// Scrapes until the cursor has settled past every bill so far, checking every page on the way:
/// the hidden deposit's difference and 0 for every other field, at every moment.
async fn settle_unchanged(exporter: &Exporter, exchange: &Exchange) {
    let newest = exchange.sim.bills(exchange.key()).iter().map(|b| b.ctime_ms).max().unwrap() as f64 / 1000.0;
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    loop {
        let scrape = exporter.scrape().await;
        let shown = differences(&scrape);
        for (field, difference) in &shown {
            let expected = if field == "cum_deposit_amount" { HIDDEN_DEPOSIT } else { 0.0 };
            assert_eq!(*difference, expected, "{field}: {shown:?}\n{}", exporter.log());
        }
        let settled = scrape.value("capi_bill_cursor_timestamp_seconds", &[]).is_some_and(|t| t > newest + 0.5);
        if settled && shown.len() == FIELDS {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "not settled in time:\n{}", exporter.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const HIDDEN_DEPOSIT: f64 = 12.34;

#[tokio::test(flavor = "multi_thread")]
async fn bursts_late_bills_restarts_and_kill_9_leave_every_difference_as_it_was() {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    let dir = std::env::temp_dir().join(format!("capi-ledger-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state.json");
    let flags = ["--state.file", state.to_str().unwrap(), "--bills.overlap", "2s", "--poll.interval", "100ms"];
    let mut exporter = Exporter::start(&exchange, &flags);
    exporter.wait_for("every running total compared, at 0", all_zero).await;
    // One bill never listed: its difference must stay exactly as it is through all that follows
    // (a comparison that began afresh at a restart would show 0 instead).
    exchange.sim.add_bill(exchange.key(), hidden(usdt_bill("deposit", 1234, 0)));
    exporter
        .wait_for("the hidden deposit's difference", |s| {
            differences(s).get("cum_deposit_amount") == Some(&HIDDEN_DEPOSIT)
        })
        .await;

    add_activity(&exchange, 0);
    settle_unchanged(&exporter, &exchange).await;

    // A clean stop, bills while it is down, and a start from the state file.
    assert!(exporter.terminate().success(), "{}", exporter.log());
    add_activity(&exchange, 1);
    exporter = Exporter::start(&exchange, &flags);
    settle_unchanged(&exporter, &exchange).await;

    // kill -9 in the middle of a burst, and a start from whatever the state file holds.
    add_activity(&exchange, 2);
    exporter.kill9();
    add_activity(&exchange, 3);
    exporter = Exporter::start(&exchange, &flags);
    settle_unchanged(&exporter, &exchange).await;

    let scrape = exporter.scrape().await;
    let bills = exchange.sim.bills(exchange.key());
    let listed = bills.iter().filter(|b| b.visible_at_ms != i64::MAX).count() as f64;
    assert_eq!(scrape.sum("capi_bills_total", &[]), listed, "every listed bill counted once");
    assert!(listed >= 560.0, "{listed} bills");
    let _ = std::fs::remove_dir_all(&dir);
}
