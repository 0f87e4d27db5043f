//! The exposition is this exporter's public interface: dashboards and alerts depend on every
//! family's name, type, help, unit and labels. These golden files pin it, so that any change to
//! it shows as a reviewed diff (`cargo insta review`, or `INSTA_UPDATE=always cargo test --test
//! it golden` and `git diff`):
//! - `fixed_answers_text` and `fixed_answers_openmetrics`: the whole page in each format, values
//!   included (the process's masked), for two accounts: the documented account sample and a page
//!   of bills, decoded and counted as the poller does; and the same with a default fee setting,
//!   an unreadable amount and an error answer;
//! - `demo_families` and `demo_families_openmetrics`: every family and label set a seeded demo
//!   serves, in each format, values left out (the demo's activity runs on the clock).

use crate::common;
use common::now_ms;

use capi_exporter::api::client::{read_account_answer, read_bill_answer};
use capi_exporter::api::{ApiError, Coins, Endpoint};
use capi_exporter::exposition::{Exposition, Format};
use capi_exporter::poller::poll_state::PollState;
use capi_exporter::poller::{Checkpoint, PollSettings};
use capi_exporter::snapshot::stats::AccountStats;
use capi_exporter::snapshot::{AccountSlot, AccountSnapshot};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// When the bills of the fixed page were counted, by the exchange's clock (2030-03-17).
const COUNTED_AT_MS: i64 = 1_900_000_000_000;

const BILLS: &str = r#"{"hasNextPage":false,"items":[
    {"billId":686960019383517338,"coin":"USDT","symbol":"","amount":"100.5","businessType":"deposit","balance":"10100.5","fillFee":"0","ctime":1899999990000},
    {"billId":686960019383517339,"coin":"USDT","symbol":"cmt_btcusdt","amount":"-50.25","businessType":"position_open_long","balance":"10050.25","fillFee":"-0.03","ctime":1899999991000},
    {"billId":"686960019383517340","coin":"USDT","symbol":"cmt_btcusdt","amount":"60.1","businessType":"position_close_long","balance":"10110.35","fillFee":"-0.036","cTime":"1899999992000"},
    {"billId":686960019383517341,"coin":"USDT","symbol":"cmt_btcusdt","amount":"-0.0031","businessType":"position_funding","balance":"10110.3469","fillFee":"0","ctime":1899999993000},
    {"billId":686960019383517342,"coin":"BTC","symbol":"","amount":"0.5","businessType":"transfer_in","balance":"0.5","fillFee":"0","ctime":1899999994000}
]}"#;

/// The page with what changes from run to run masked: the values of the process's own metrics,
/// of the data age (the time since the sample was taken, which is now), of the times the
/// configuration was loaded and the last request succeeded, how the binary was built (revision,
/// branch, compiler), and the order of the samples within a family (some are kept in hash maps).
fn stable(page: &str) -> String {
    let mut lines = Vec::new();
    for line in page.lines() {
        let line = match line.split_once(" ") {
            Some((series, _)) if series.starts_with("capi_data_age_seconds{") => format!("{series} <age>"),
            Some((series, _)) if series.starts_with("process_") => format!("{series} <value>"),
            Some((series, _)) if series == "capi_config_last_reload_success_timestamp_seconds" => {
                format!("{series} <start time>")
            }
            Some((series, _)) if series.starts_with("capi_last_success_timestamp_seconds{") => {
                format!("{series} <request time>")
            }
            _ => line.to_string(),
        };
        lines.push(revision_hidden(&line));
    }
    samples_sorted(lines)
}

/// The lines, with each run of sample lines (between comment lines) sorted.
fn samples_sorted(lines: Vec<String>) -> String {
    let mut sorted = Vec::with_capacity(lines.len());
    let mut run: Vec<String> = Vec::new();
    for line in lines {
        if line.starts_with('#') {
            run.sort();
            sorted.append(&mut run);
            sorted.push(line);
        } else {
            run.push(line);
        }
    }
    run.sort();
    sorted.append(&mut run);
    sorted.join("\n") + "\n"
}

fn revision_hidden(line: &str) -> String {
    let mut line = line.to_string();
    for label in ["revision", "branch", "rustversion"] {
        let opening = format!("{label}=\"");
        if let Some((before, after)) = line.split_once(&opening) {
            let rest = after.split_once('"').map_or("", |(_, rest)| rest);
            line = format!("{before}{opening}<{label}>\"{rest}");
        }
    }
    line
}

/// The exposition of two accounts. `main` polled the documented account sample and a page of
/// bills; `second` the sample with a default fee setting, an answer with an unreadable amount,
/// an error answer and a successful request, so that every family that only such answers bring is shown too.
fn fixed_answers() -> Exposition {
    let main = fixed_account("main", false);
    let second = fixed_account("second", true);
    let stats = |slot: &AccountSlot| (*slot.latest().unwrap().stats).clone();
    let mut troubled = stats(&second);
    let headers = http::HeaderMap::new();
    let unreadable = br#"{"hasNextPage":false,"items":[{"billId":1,"amount":"1,5","ctime":1899999995000}]}"#;
    troubled.decode_problems(Endpoint::Bills, &read_bill_answer(200, &headers, unreadable).unwrap().problems);
    let refused = read_bill_answer(400, &headers, br#"{"code":"40015","msg":"system error","requestTime":1}"#);
    troubled.request(Endpoint::Bills, &refused, Duration::from_millis(120));
    troubled.request(Endpoint::Account, &Ok::<(), ApiError>(()), Duration::from_millis(80));
    let latest = second.latest().unwrap();
    second.publish(AccountSnapshot { stats: Arc::new(troubled), ..(*latest).clone() });
    Exposition::new(vec![main, second], Duration::from_secs(300))
}

/// One account's slot after a poll of the account sample (with a default fee setting when
/// asked) and the page of bills, as the next poll begins.
fn fixed_account(name: &str, default_fee: bool) -> Arc<AccountSlot> {
    let settings = PollSettings {
        interval: Duration::from_secs(15),
        overlap: Duration::from_secs(60),
        backfill: Duration::from_secs(3_600),
        bill_queries_per_poll: 8,
        coins: Coins::default(),
    };
    let slot = AccountSlot::new(name.to_owned());
    let mut state = PollState::new(Checkpoint::default(), &Default::default(), &settings, &[2]);
    let headers = http::HeaderMap::new();
    let mut sample =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/account_sample.json")).unwrap();
    if default_fee {
        let setting = r#"{"is_set_fee_rate":true,"taker_fee_rate":"0.0005","maker_fee_rate":"0.0001","is_set_fee_discount":true,"fee_discount":"0.9","is_set_taker_maker_fee_discount":false,"taker_fee_discount":"0","maker_fee_discount":"0"}"#;
        sample = sample.replace(r#""default_fee_setting": null"#, &format!(r#""default_fee_setting": {setting}"#));
    }
    let account = read_account_answer(200, &headers, sample.as_bytes()).unwrap();
    assert!(account.problems.is_empty(), "{:?}", account.problems);
    // Asked for before the bills (an hour before, to tell the two times apart): counting begins
    // when it was asked for, and the ledger check with it.
    state.take_account(2, account.value, now_ms(), COUNTED_AT_MS - 3_600_000);
    state.start_bill_scan(COUNTED_AT_MS);
    let bills = read_bill_answer(200, &headers, BILLS.as_bytes()).unwrap();
    assert!(bills.problems.is_empty(), "{:?}", bills.problems);
    assert_eq!(state.take_bills(&bills.value).new_bill_ids.len(), 5);
    assert!(state.compare_ledger().iter().all(|changed| changed.difference.is_zero()));
    // The next poll begins: counting has begun, and the flows the alerts watch are shown.
    state.start_bill_scan(COUNTED_AT_MS + 15_000);
    slot.publish(state.snapshot(true, Arc::new(AccountStats::new(settings.interval))));
    slot
}

#[test]
fn fixed_answers_text() {
    let page = fixed_answers().page(Format::Text).into_bytes();
    insta::assert_snapshot!(stable(&String::from_utf8(page).unwrap()));
}

#[test]
fn fixed_answers_openmetrics() {
    let page = fixed_answers().page(Format::OpenMetrics).into_bytes();
    insta::assert_snapshot!(stable(&String::from_utf8(page).unwrap()));
}

/// Each family's metadata lines and each distinct sample name with its label names, in the
/// order served.
fn families(page: &str) -> String {
    let mut seen = BTreeSet::new();
    let mut lines = Vec::new();
    for line in page.lines() {
        let described = if line.starts_with('#') {
            revision_hidden(line)
        } else {
            let series = line.rsplit_once(' ').map_or(line, |(series, _)| series);
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let names: Vec<&str> =
                labels.split("\",").filter_map(|pair| pair.split_once('=')).map(|(k, _)| k).collect();
            format!("{name}{{{}}}", names.join(","))
        };
        if seen.insert(described.clone()) {
            lines.push(described);
        }
    }
    samples_sorted(lines)
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_families() {
    let mut command = common::Exporter::command(&["--demo", "--demo.accounts", "1", "--demo.seed", "7"]);
    command.env("CAPI_POLL_INTERVAL", "200ms");
    let exporter = common::Exporter::spawn(command);
    // Once the demo has positions, bills and every kind of record to show.
    let scrape = exporter
        .wait_for("a position and bills", |s| {
            ["capi_position_size", "capi_bill_balance", "capi_bill_fill_fee_total"]
                .iter()
                .all(|name| !s.series(name).is_empty())
        })
        .await;
    insta::assert_snapshot!(families(&scrape.text));
    let openmetrics = reqwest::Client::new()
        .get(format!("{}/metrics", exporter.url))
        .header("accept", "application/openmetrics-text;version=1.0.0")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    insta::assert_snapshot!("demo_families_openmetrics", families(&openmetrics));
}

/// Every money figure's HELP text says its unit (a coin) and how it is signed: a trader reading
/// one must not have to guess either.
#[test]
fn money_figures_say_their_coin_and_sign() {
    let page = String::from_utf8(fixed_answers().page(Format::Text).into_bytes()).unwrap();
    let money: Vec<&str> = page
        .lines()
        .filter_map(|line| line.strip_prefix("# HELP "))
        .filter(|help| {
            let name = help.split(' ').next().unwrap_or_default().trim_end_matches("_total");
            !name.contains("_is_")
                && ["amount", "_fee", "balance", "_value", "_margin"].iter().any(|end| name.ends_with(end))
        })
        .collect();
    assert!(money.len() >= 30, "{money:#?}");
    for help in money {
        assert!(help.contains("coin") && help.contains("sign"), "{help}");
    }
}
