//! Account, collateral and position figures on /metrics equal what the exchange answers, field
//! by field, and follow it: a closed position disappears, a liquidation shows.

use crate::common;

use capi_sim::{NewPosition, SimOptions};
use common::{Exchange, Exporter, Scrape};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use std::str::FromStr;

/// The value a JSON field should show as a gauge (its text parsed as a float, as any reader of
/// the exposition would), or `None` for text fields.
fn gauge_value(value: &Value) -> Option<f64> {
    match value {
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.to_string().parse().ok(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The metric a numeric field maps onto, and its value in that metric's unit.
fn expected(prefix: &str, field: &str, value: f64) -> (String, f64) {
    if let Some(stem) = field.strip_suffix("_time") {
        (format!("{prefix}_{stem}_timestamp_seconds"), value / 1000.0)
    } else if let Some(stem) = field.strip_suffix("_milliseconds") {
        (format!("{prefix}_{stem}_seconds"), value / 1000.0)
    } else {
        (format!("{prefix}_{field}"), value)
    }
}

/// Checks every numeric field of `record` against the series with `labels`.
fn assert_record(
    scrape: &Scrape,
    prefix: &str,
    record: &Value,
    labels: &[(&str, &str)],
    text_fields: &[&str],
    fields: usize,
) {
    let mut checked = 0;
    for (field, value) in record.as_object().unwrap() {
        if text_fields.contains(&field.as_str()) {
            continue;
        }
        let Some(value) = gauge_value(value) else { panic!("{prefix}.{field} = {value} is not numeric") };
        let (name, value) = expected(prefix, field, value);
        assert_eq!(scrape.value(&name, labels), Some(value), "{name}{labels:?}");
        checked += 1;
    }
    assert_eq!(checked, fields, "numeric fields of {prefix}");
}

const COLLATERAL_TEXT: [&str; 5] =
    ["account_id", "coin_id", "margin_mode", "cross_contract_id", "isolated_position_id"];
const POSITION_TEXT: [&str; 8] =
    ["id", "account_id", "coin_id", "contract_id", "side", "margin_mode", "separated_mode", "separated_open_order_id"];

#[tokio::test(flavor = "multi_thread")]
async fn every_collateral_position_and_account_field_shows_exactly() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let key = exchange.key().to_string();
    exchange.sim.set_collateral_field(&key, 2, "amount", json!("12345.67891234"));
    exchange.sim.set_collateral_field(&key, 2, "pending_withdraw_amount", json!("0.00000001"));
    exchange.sim.set_collateral_field(&key, 2, "cum_position_funding_amount", json!("-3.25"));
    let position_id = exchange.sim.open_position(
        &key,
        NewPosition {
            coin_id: 2,
            contract_id: 10000001,
            side: "LONG".into(),
            margin_mode: "SHARED".into(),
            leverage: Decimal::from(20),
            size: Decimal::from_str("0.5").unwrap(),
            open_value: Decimal::from(1000),
        },
    );
    let exporter = Exporter::start(&exchange, &["--api.account-name", "desk"]);
    exporter.wait_up().await;
    let answer = exchange.sim.account_json(&key, 2);
    let scrape = exporter.wait_for("the position", |s| s.value("capi_position_size", &[]).is_some()).await;

    let collateral = &answer["collateral"][0];
    let labels = [
        ("account", "desk"),
        ("coin_id", "2"),
        ("margin_mode", "SHARED"),
        ("cross_contract_id", "0"),
        ("isolated_position_id", "0"),
    ];
    assert_record(&scrape, "capi_collateral", collateral, &labels, &COLLATERAL_TEXT, 24);
    assert_eq!(scrape.value("capi_collateral_amount", &[("account", "desk")]), Some(12345.67891234));

    let position = &answer["position"][0];
    let labels = [
        ("account", "desk"),
        ("coin_id", "2"),
        ("contract_id", "10000001"),
        ("side", "LONG"),
        ("margin_mode", "SHARED"),
        ("position_id", position_id.as_str()),
    ];
    assert_record(&scrape, "capi_position", position, &labels, &POSITION_TEXT, 19);
    let info =
        [("position_id", position_id.as_str()), ("separated_mode", position["separated_mode"].as_str().unwrap())];
    assert_eq!(scrape.value("capi_position_info", &info), Some(1.0));

    let account = &answer["account"];
    let mut scalars = account.as_object().unwrap().clone();
    let maps = [
        "default_fee_setting",
        "contract_id_to_fee_setting",
        "contract_id_to_mode_setting",
        "contract_id_to_leverage_setting",
    ];
    scalars.retain(|k, _| !maps.contains(&k.as_str()));
    let text = ["id", "user_id", "client_account_id", "extra_type", "extra_data_json", "status"];
    assert_record(&scrape, "capi_account", &Value::Object(scalars), &[("account", "desk")], &text, 5);
    let info = [("account", "desk"), ("account_id", account["id"].as_str().unwrap()), ("status", "NORMAL")];
    assert_eq!(scrape.value("capi_account_info", &info), Some(1.0));
    assert_settings(&scrape, account);
}

/// Fee, leverage and mode settings per contract.
fn assert_settings(scrape: &Scrape, account: &Value) {
    let fees = account["contract_id_to_fee_setting"].as_object().unwrap();
    assert!(!fees.is_empty());
    for (contract, fee) in fees {
        for role in ["taker", "maker"] {
            let expected = gauge_value(&fee[format!("{role}_fee_rate")]);
            let labels = [("contract_id", contract.as_str()), ("role", role)];
            assert_eq!(scrape.value("capi_account_fee_rate", &labels), expected, "{contract} {role}");
        }
    }
    let leverages = account["contract_id_to_leverage_setting"].as_object().unwrap();
    for (contract, leverage) in leverages {
        for kind in ["isolated_long", "isolated_short", "cross", "shared"] {
            let expected = gauge_value(&leverage[format!("{kind}_leverage")]);
            let labels = [("contract_id", contract.as_str()), ("kind", kind)];
            assert_eq!(scrape.value("capi_account_leverage_setting", &labels), expected);
        }
    }
    for (contract, mode) in account["contract_id_to_mode_setting"].as_object().unwrap() {
        let labels = [
            ("contract_id", contract.as_str()),
            ("margin_mode", mode["margin_mode"].as_str().unwrap()),
            ("position_mode", mode["position_mode"].as_str().unwrap()),
        ];
        assert_eq!(scrape.value("capi_contract_mode_info", &labels), Some(1.0));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_position_disappears_and_a_moved_one_follows() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let key = exchange.key().to_string();
    let open = |side: &str| NewPosition {
        coin_id: 2,
        contract_id: 10000001,
        side: side.into(),
        margin_mode: "SHARED".into(),
        leverage: Decimal::from(10),
        size: Decimal::from(2),
        open_value: Decimal::from(500),
    };
    let long = exchange.sim.open_position(&key, open("LONG"));
    let short = exchange.sim.open_position(&key, open("SHORT"));
    let exporter = Exporter::start(&exchange, &[]);
    exporter.wait_for("two positions", |s| s.series("capi_position_size").len() == 2).await;

    exchange.sim.update_position(&key, &long, "size", json!("3.75"));
    exchange.sim.close_position(&key, &short);
    let scrape = exporter
        .wait_for("the short gone and the long moved", |s| {
            s.series("capi_position_size").len() == 1
                && s.value("capi_position_size", &[("position_id", &long)]) == Some(3.75)
        })
        .await;
    assert!(scrape.matching("capi_position_info", &[("position_id", &short)]).is_empty());
    assert!(scrape.matching("capi_position_leverage", &[("position_id", &short)]).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_liquidation_episode_shows_in_the_flag_and_the_bills() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let key = exchange.key().to_string();
    let exporter = Exporter::start(&exchange, &[]);
    exporter.wait_up().await;
    let liquidating = |s: &Scrape| s.value("capi_collateral_is_liquidating", &[("coin_id", "2")]);
    assert_eq!(liquidating(&exporter.scrape().await), Some(0.0));

    exchange.sim.set_liquidating(&key, 2, true);
    let scrape = exporter
        .wait_for("liquidation", |s| {
            liquidating(s) == Some(1.0)
                && s.value("capi_bills_total", &[("business_type", "start_liquidate")]) == Some(1.0)
        })
        .await;
    assert_eq!(scrape.value("capi_bills_total", &[("business_type", "finish_liquidate")]), None);

    exchange.sim.set_liquidating(&key, 2, false);
    exporter
        .wait_for("the end of the liquidation", |s| {
            liquidating(s) == Some(0.0)
                && s.value("capi_bills_total", &[("business_type", "finish_liquidate")]) == Some(1.0)
        })
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn several_accounts_from_a_yaml_file_each_get_their_own_figures() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let second = exchange.add_account(99);
    exchange.sim.set_collateral_field(exchange.key(), 2, "amount", json!("111.5"));
    exchange.sim.set_collateral_field(&second.api_key, 2, "amount", json!("222.25"));
    let dir = tempdir("yaml");
    let secret_file = dir.join("second.secret");
    std::fs::write(&secret_file, format!("{}\n", second.secret)).unwrap();
    let yaml = format!(
        "accounts:\n  - name: first\n    credentials:\n      api_key: {{env: FIRST_KEY}}\n      secret: {{env: FIRST_SECRET}}\n      passphrase: {{env: FIRST_PASS}}\n  - name: second\n    coin_ids: [2]\n    credentials:\n      api_key: {{env: SECOND_KEY}}\n      secret: {{file: {}}}\n      passphrase: {{env: SECOND_PASS}}\n",
        secret_file.display()
    );
    let config = dir.join("accounts.yml");
    std::fs::write(&config, yaml).unwrap();
    let mut command = Exporter::command(&["--config.file", config.to_str().unwrap(), "--api.base-url", &exchange.url]);
    command
        .env("FIRST_KEY", &exchange.credentials.api_key)
        .env("FIRST_SECRET", &exchange.credentials.secret)
        .env("FIRST_PASS", &exchange.credentials.passphrase)
        .env("SECOND_KEY", &second.api_key)
        .env("SECOND_PASS", &second.passphrase);
    let exporter = Exporter::spawn(command);
    let scrape = exporter
        .wait_for("both accounts up", |s| s.series("capi_up").iter().filter(|u| u.value == 1.0).count() == 2)
        .await;
    assert_eq!(scrape.value("capi_collateral_amount", &[("account", "first")]), Some(111.5));
    assert_eq!(scrape.value("capi_collateral_amount", &[("account", "second")]), Some(222.25));
    assert_eq!(exporter.get("/-/ready").await.status(), 200);
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("capi-it-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn the_figures_stay_fresh_while_a_long_bill_scan_waits_for_the_budget() {
    let exchange = Exchange::start(SimOptions::default()).await;
    // 20 IP weight per 11 s stretches the polls to 2.06 s; bill queries then have room for
    // about one poll's worth of queries at a time, and a backlog takes several polls.
    let flags = ["--api.ip-weight-budget", "20", "--bills.overlap", "2s"];
    let exporter = Exporter::start(&exchange, &flags);
    exporter.wait_up().await;
    let now = common::now_ms();
    for offset in 0..300 {
        let bill = capi_sim::NewBill { ctime_ms: Some(now + offset), ..common::usdt_bill("deposit", 1, 0) };
        exchange.sim.add_bill(exchange.key(), bill);
    }
    let bills = exchange.sim.bills(exchange.key()).len() as f64;
    let oldest = std::cell::Cell::new(0.0_f64);
    let scrape = exporter
        .wait_for("the backlog counted", |s| {
            oldest.set(oldest.get().max(s.value("capi_data_age_seconds", &[]).unwrap_or(f64::INFINITY)));
            s.sum("capi_bills_total", &[]) == bills
        })
        .await;
    // A scan that waited for room within one poll held the account queries back for 11 s.
    let oldest = oldest.get();
    assert!(oldest < 6.0, "the figures were {oldest} s old while the bills were scanned");
    assert!(scrape.sum("capi_bill_scan_deferred_total", &[]) >= 2.0, "the scan took several polls");
}
