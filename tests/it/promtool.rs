//! `promtool check metrics` (Debian's prometheus package) finds nothing at all in the page a plain
//! scrape gets, the classic text format: every family, every counter among them, passes.

use crate::common;

use capi_sim::{Fault, NewPosition, SimOptions};
use common::{Exchange, Exporter};
use rust_decimal::Decimal;
use std::io::Write as _;
use std::process::{Command, Stdio};

fn promtool() -> String {
    let path = std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".into());
    let found = Command::new(&path).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(
        found.is_ok_and(|s| s.success()),
        "promtool not found: install Debian's prometheus package (scripts/test.sh does) or set PROMTOOL"
    );
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn promtool_finds_nothing_in_the_default_page() {
    let promtool = promtool();
    let exchange = Exchange::start(SimOptions::default()).await;
    let key = exchange.key().to_string();
    exchange.sim.open_position(
        &key,
        NewPosition {
            coin_id: 2,
            contract_id: 10000002,
            side: "SHORT".into(),
            margin_mode: "ISOLATED".into(),
            leverage: Decimal::from(5),
            size: Decimal::from(1),
            open_value: Decimal::from(100),
        },
    );
    let exporter = Exporter::start(&exchange, &[]);
    exporter.wait_up().await;
    let bill = common::usdt_bill;
    exchange.sim.add_bill(&key, bill("position_open_short", 500, -6));
    exchange.sim.add_bill(&key, bill("position_funding", -30, 0));
    exchange.sim.inject_fault(Fault::ExchangeError { code: "40015".into() }, 1);
    exchange.sim.set_collateral_field(&key, 2, "legacy_amount", serde_json::json!("not a number"));
    let scrape = exporter
        .wait_for("bills, an exchange error and a decode problem", |s| {
            s.sum("capi_bills_total", &[]) == 2.0
                && !s.series("capi_api_exchange_errors_total").is_empty()
                && !s.series("capi_api_decode_problems_total").is_empty()
        })
        .await;

    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(scrape.text.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let counters = scrape.text.lines().filter(|l| l.starts_with("# TYPE ") && l.ends_with(" counter")).count();
    assert!(counters >= 8, "{counters} counter families");
    assert!(output.status.success() && report.trim().is_empty(), "promtool reports:\n{report}");
}
