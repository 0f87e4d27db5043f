//! The simulated exchange over real HTTP: each test starts it on 127.0.0.1:0 and talks to it with
//! a minimal HTTP/1.1 client, so routing, raw query and body bytes are exercised as sent.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use crate::auth::sign;

const ACCOUNT: &str = "/capi/v2/account/account";
const BILLS: &str = "/capi/v2/account/bills";

struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    fn code(&self) -> String {
        assert_eq!(self.status, 400, "{}", String::from_utf8_lossy(&self.body));
        self.json()["code"].as_str().expect("code is a string").to_owned()
    }
}

struct Client {
    addr: SocketAddr,
    credentials: Credentials,
}

impl Client {
    /// One request on a fresh connection; the answer is read to the end.
    async fn send(&self, method: &str, target: &str, headers: &[(&str, String)], body: &[u8]) -> Answer {
        let mut stream = TcpStream::connect(self.addr).await.expect("connect");
        let mut request = format!(
            "{method} {target} HTTP/1.1\r\nHost: sim\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).await.expect("write head");
        stream.write_all(body).await.expect("write body");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read");
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("end of head");
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        Answer { status, head, body: raw[split + 4..].to_vec() }
    }

    /// The four signed headers and the content type, for a request at `timestamp_ms`.
    fn signed(
        &self,
        method: &str,
        path: &str,
        query: &str,
        body: &[u8],
        timestamp_ms: i64,
    ) -> Vec<(&'static str, String)> {
        let timestamp = timestamp_ms.to_string();
        let c = &self.credentials;
        vec![
            ("ACCESS-KEY", c.api_key.clone()),
            ("ACCESS-SIGN", sign(&c.secret, &timestamp, method, path, query, body)),
            ("ACCESS-TIMESTAMP", timestamp),
            ("ACCESS-PASSPHRASE", c.passphrase.clone()),
            ("Content-Type", "application/json".to_owned()),
            ("locale", "en-US".to_owned()),
        ]
    }

    async fn account(&self, query: &str) -> Answer {
        let headers = self.signed("GET", ACCOUNT, query, b"", now_ms());
        self.send("GET", &format!("{ACCOUNT}?{query}"), &headers, b"").await
    }

    async fn bills(&self, body: &str) -> Answer {
        let headers = self.signed("POST", BILLS, "", body.as_bytes(), now_ms());
        self.send("POST", BILLS, &headers, body.as_bytes()).await
    }
}

async fn start(options: SimOptions) -> (SimExchange, Client) {
    let sim = SimExchange::new(options);
    let credentials = Credentials::generate(1);
    sim.add_account(credentials.clone(), &[1, 2]);
    let (addr, _task) = sim.start(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("start");
    (sim, Client { addr, credentials })
}

fn usdt(business_type: &str, amount: i64) -> NewBill {
    NewBill {
        coin: "USDT".into(),
        symbol: "cmt_btcusdt".into(),
        business_type: business_type.into(),
        amount: Decimal::from(amount),
        ..NewBill::default()
    }
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value.as_object().expect("object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

fn sorted<'a>(names: &[&'a str]) -> Vec<&'a str> {
    let mut names = names.to_vec();
    names.sort_unstable();
    names
}

#[tokio::test]
async fn the_account_answer_has_every_field_of_the_spec() {
    let (sim, client) = start(SimOptions::default()).await;
    let key = &client.credentials.api_key;
    sim.open_position(
        key,
        NewPosition {
            coin_id: 2,
            contract_id: 10_000_001,
            side: "LONG".into(),
            margin_mode: "SHARED".into(),
            leverage: Decimal::from(10),
            size: Decimal::new(15, 1),
            open_value: Decimal::from(150),
        },
    );
    let answer = client.account("coinId=2").await;
    assert_eq!(answer.status, 200);
    let body = answer.json();
    assert_eq!(body, sim.account_json(key, 2));
    assert_eq!(keys(&body), ["account", "collateral", "position", "version"]);
    assert!(body["version"].as_str().is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())));

    let account = &body["account"];
    assert_eq!(
        keys(account),
        sorted(&[
            "id",
            "user_id",
            "client_account_id",
            "is_system_account",
            "default_fee_setting",
            "contract_id_to_fee_setting",
            "contract_id_to_mode_setting",
            "contract_id_to_leverage_setting",
            "create_order_rate_limit_per_minute",
            "create_order_delay_milliseconds",
            "extra_type",
            "extra_data_json",
            "status",
            "created_time",
            "updated_time",
        ])
    );
    assert_eq!(account["default_fee_setting"], Value::Null);
    assert_eq!(account["status"], "NORMAL");
    let fee = &account["contract_id_to_fee_setting"]["10000001"];
    assert_eq!(
        keys(fee),
        sorted(&[
            "contract_id",
            "is_set_fee_rate",
            "taker_fee_rate",
            "maker_fee_rate",
            "is_set_fee_discount",
            "fee_discount",
            "is_set_taker_maker_fee_discount",
            "taker_fee_discount",
            "maker_fee_discount",
        ])
    );
    assert_eq!(
        keys(&account["contract_id_to_mode_setting"]["10000002"]),
        ["contract_id", "margin_mode", "position_mode", "separated_mode"]
    );
    assert_eq!(
        keys(&account["contract_id_to_leverage_setting"]["10000001"]),
        ["contract_id", "cross_leverage", "isolated_long_leverage", "isolated_short_leverage", "shared_leverage"]
    );

    let collateral = &body["collateral"][0];
    assert_eq!(body["collateral"].as_array().map(Vec::len), Some(1));
    let decimals = [
        "amount",
        "pending_deposit_amount",
        "pending_withdraw_amount",
        "pending_transfer_in_amount",
        "pending_transfer_out_amount",
        "legacy_amount",
        "cum_deposit_amount",
        "cum_withdraw_amount",
        "cum_transfer_in_amount",
        "cum_transfer_out_amount",
        "cum_margin_move_in_amount",
        "cum_margin_move_out_amount",
        "cum_position_open_long_amount",
        "cum_position_open_short_amount",
        "cum_position_close_long_amount",
        "cum_position_close_short_amount",
        "cum_position_fill_fee_amount",
        "cum_position_liquidate_fee_amount",
        "cum_position_funding_amount",
        "cum_order_fill_fee_income_amount",
        "cum_order_liquidate_fee_income_amount",
        "created_time",
        "updated_time",
    ];
    let others =
        ["account_id", "coin_id", "margin_mode", "cross_contract_id", "isolated_position_id", "is_liquidating"];
    assert_eq!(keys(collateral), sorted(&[&decimals[..], &others[..]].concat()));
    assert!(decimals.iter().all(|field| collateral[field].is_string()), "{collateral}");
    assert_eq!(collateral["amount"], "10000");
    assert_eq!((collateral["coin_id"].as_u64(), &collateral["margin_mode"]), (Some(2), &json!("SHARED")));
    assert_eq!((collateral["cross_contract_id"].as_u64(), &collateral["isolated_position_id"]), (Some(0), &json!("0")));

    let position = &body["position"][0];
    assert_eq!(
        keys(position),
        sorted(&[
            "id",
            "account_id",
            "coin_id",
            "contract_id",
            "side",
            "margin_mode",
            "separated_mode",
            "separated_open_order_id",
            "leverage",
            "size",
            "open_value",
            "open_fee",
            "funding_fee",
            "isolated_margin",
            "is_auto_append_isolated_margin",
            "cum_open_size",
            "cum_open_value",
            "cum_open_fee",
            "cum_close_size",
            "cum_close_value",
            "cum_close_fee",
            "cum_funding_fee",
            "cum_liquidate_fee",
            "created_match_sequence_id",
            "updated_match_sequence_id",
            "created_time",
            "updated_time",
        ])
    );
    assert_eq!((&position["size"], position["contract_id"].as_u64()), (&json!("1.5"), Some(10_000_001)));
    assert_eq!(position["account_id"], account["id"]);

    let other_coin = client.account("coinId=1").await.json();
    assert_eq!(other_coin["position"], json!([]));
    let unknown = client.account("coinId=77").await.json();
    assert_eq!((&unknown["collateral"], &unknown["position"]), (&json!([]), &json!([])));
    for bad in ["", "coinId=", "coinId=two", "coin=2"] {
        assert_eq!(client.account(bad).await.code(), "40017", "{bad:?}");
    }
}

#[tokio::test]
async fn bills_have_the_documented_shape_and_ids_beyond_f64() {
    let (sim, client) = start(SimOptions::default()).await;
    let key = &client.credentials.api_key;
    let first = sim.add_bill(key, usdt("deposit", 5));
    let second = sim.add_bill(key, usdt("transfer_out", -2));
    assert_eq!(first, 686_960_019_383_517_338);
    assert_eq!(second, first + 1);
    let answer =
        client.bills(r#"{"coin":"","symbol":"","businessType":"","startTime":null,"endTime":null,"limit":100}"#).await;
    assert_eq!(answer.status, 200);
    let text = String::from_utf8_lossy(&answer.body).into_owned();
    assert!(text.contains(r#""billId":686960019383517339,"#), "{text}");
    let body = answer.json();
    assert_eq!(body["hasNextPage"], false);
    let newest = &body["items"][0];
    assert_eq!(newest["billId"].as_u64(), Some(second));
    assert_eq!(
        keys(newest),
        ["amount", "balance", "billId", "businessType", "coin", "ctime", "fillFee", "symbol", "transferReason"]
    );
    assert_eq!(
        (&newest["amount"], &newest["balance"], &newest["fillFee"]),
        (&json!("-2"), &json!("10003"), &json!("0"))
    );
    let ctime = newest["ctime"].as_i64().expect("ctime is an integer");
    assert!((now_ms() - ctime).abs() < 10_000);
    assert!(!keys(&body["items"][1]).contains(&"transferReason"));

    let (sim, client) =
        start(SimOptions { time_field: TimeField::CTimeString, ids_as_strings: true, ..SimOptions::default() }).await;
    let id = sim.add_bill(&client.credentials.api_key, usdt("deposit", 1));
    let item = &client.bills("{}").await.json()["items"][0];
    assert_eq!(item["billId"], json!(id.to_string()));
    assert!(item["cTime"].as_str().is_some_and(|t| t.len() == 13));
    assert!(item.get("ctime").is_none());
}

#[tokio::test]
async fn bill_queries_validate_limit_and_filter_order_and_visibility() {
    let (sim, client) = start(SimOptions { newest_first: false, ..SimOptions::default() }).await;
    let key = &client.credentials.api_key;
    for time in [3000, 1000, 2000] {
        sim.add_bill(key, NewBill { ctime_ms: Some(time), ..usdt("deposit", 1) });
    }
    sim.add_bill(key, NewBill { visible_after: Duration::from_secs(3600), ..usdt("deposit", 1) });
    sim.add_bill(key, NewBill { visible_after: Duration::from_secs(1), ..usdt("withdraw", -1) });
    assert_eq!(sim.bills(key).len(), 5);

    let times = |body: &Value| -> Vec<i64> {
        body["items"].as_array().expect("items").iter().filter_map(|i| i["ctime"].as_i64()).collect()
    };
    let page = client.bills(r#"{"startTime":1000,"endTime":2000}"#).await.json();
    assert_eq!(times(&page), [1000, 2000]);
    let page = client.bills(r#"{"limit":2}"#).await.json();
    assert_eq!((times(&page), &page["hasNextPage"]), (vec![1000, 2000], &json!(true)));
    let visible = client.bills(r#"{"limit":100}"#).await.json();
    assert_eq!(
        (times(&visible).len(), &visible["hasNextPage"]),
        (3, &json!(false)),
        "the late bills are not visible yet"
    );

    let withdrawals =
        || async { client.bills(r#"{"businessType":"withdraw"}"#).await.json()["items"].as_array().map(Vec::len) };
    let since = std::time::Instant::now();
    while withdrawals().await != Some(1) {
        assert!(since.elapsed() < Duration::from_secs(30), "the withdrawal is not visible after its delay");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(client.bills("{}").await.json()["items"].as_array().map(Vec::len), Some(4));

    for bad in [r#"{"limit":0}"#, r#"{"limit":101}"#, r#"{"limit":"20"}"#, r#"{"startTime":"x"}"#, "not json"] {
        assert_eq!(client.bills(bad).await.code(), "40017", "{bad}");
    }
    assert_eq!(sim.requests().by_outcome.get("bad_request"), Some(&5));
}

#[tokio::test]
async fn authentication_failures_use_the_documented_codes() {
    let (_sim, client) = start(SimOptions::default()).await;
    let query = "coinId=2";
    let target = format!("{ACCOUNT}?{query}");
    let signed = |timestamp_ms| client.signed("GET", ACCOUNT, query, b"", timestamp_ms);
    let without =
        |name: &str| -> Vec<(&str, String)> { signed(now_ms()).into_iter().filter(|(n, _)| *n != name).collect() };
    let replaced = |name: &str, value: &str| -> Vec<(&str, String)> {
        signed(now_ms()).into_iter().map(|(n, v)| if n == name { (n, value.to_owned()) } else { (n, v) }).collect()
    };
    let cases = [
        (without("ACCESS-KEY"), "40001"),
        (replaced("ACCESS-SIGN", ""), "40002"),
        (without("ACCESS-TIMESTAMP"), "40003"),
        (without("ACCESS-PASSPHRASE"), "40011"),
        (replaced("ACCESS-TIMESTAMP", "1591089508"), "40005"),
        (replaced("Content-Type", "text/plain"), "40007"),
        (replaced("ACCESS-KEY", "nobody"), "40006"),
        (signed(now_ms() - 31_000), "40008"),
        (replaced("ACCESS-PASSPHRASE", "guess"), "40012"),
        (replaced("ACCESS-SIGN", "AAAA"), "40009"),
    ];
    for (headers, code) in cases {
        let answer = client.send("GET", &target, &headers, b"").await;
        let body = answer.json();
        assert_eq!(answer.code(), code, "{body}");
        assert!(body["msg"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(body["requestTime"].as_i64().is_some_and(|t| (now_ms() - t).abs() < 10_000));
    }
    assert_eq!(client.send("GET", &target, &signed(now_ms() - 25_000), b"").await.status, 200, "inside the window");
    assert_eq!(client.send("GET", &target, &signed(now_ms() + 25_000), b"").await.status, 200, "a fast clock too");
}

#[tokio::test]
async fn the_signature_covers_the_bytes_as_sent() {
    let (_sim, client) = start(SimOptions::default()).await;
    let query = "coinId=2&note=a%20b";
    let headers = client.signed("GET", ACCOUNT, query, b"", now_ms());
    assert_eq!(client.send("GET", &format!("{ACCOUNT}?{query}"), &headers, b"").await.status, 200);
    assert_eq!(client.send("GET", &format!("{ACCOUNT}?coinId=2&note=a+b"), &headers, b"").await.code(), "40009");

    let body = br#"{ "limit" : 5 }"#;
    let headers = client.signed("POST", BILLS, "", body, now_ms());
    assert_eq!(client.send("POST", BILLS, &headers, body).await.status, 200);
    assert_eq!(client.send("POST", BILLS, &headers, br#"{"limit":5}"#).await.code(), "40009");
}

#[tokio::test]
async fn weight_over_the_budget_is_refused_with_429() {
    let (sim, client) = start(SimOptions { weight_per_10s: Some(5), ..SimOptions::default() }).await;
    assert_eq!(client.bills("{}").await.status, 200, "UID weight 5 fits");
    let refused = client.bills("{}").await;
    assert_eq!(refused.status, 429, "the account's UID budget is spent");
    assert!(refused.json().is_object());
    assert_eq!(refused.header("retry-after"), None);
    // The IP has spent 2 + 2; one more account query fits, then the IP budget is spent too.
    let other = Credentials::generate(2);
    sim.add_account(other.clone(), &[2]);
    let other = Client { addr: client.addr, credentials: other };
    assert_eq!(other.account("coinId=2").await.status, 200);
    assert_eq!(other.account("coinId=2").await.status, 429);
    let stats = sim.requests();
    assert_eq!((stats.total, stats.by_outcome.get("rate_limited")), (4, Some(&2)));
    assert_eq!(stats.by_path.get(BILLS), Some(&2));

    let (_sim, unlimited) = start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    for _ in 0..5 {
        assert_eq!(unlimited.bills("{}").await.status, 200);
    }
}

#[tokio::test]
async fn every_fault_kind_replaces_the_answer() {
    let (sim, client) = start(SimOptions::default()).await;
    sim.add_bill(&client.credentials.api_key, usdt("deposit", 1));
    let normal = client.bills("{}").await.body;

    sim.inject_fault(Fault::HtmlStatus(502), 2);
    for _ in 0..2 {
        let answer = client.account("coinId=2").await;
        assert_eq!(answer.status, 502);
        assert!(answer.header("content-type").is_some_and(|t| t.starts_with("text/html")));
        assert!(String::from_utf8_lossy(&answer.body).contains("<html>"));
    }
    assert_eq!(client.account("coinId=2").await.status, 200, "the fault is used up");

    sim.inject_fault(Fault::Truncated, 1);
    let answer = client.bills("{}").await;
    assert_eq!((answer.status, answer.body.len()), (200, normal.len() / 2));
    assert!(normal.starts_with(&answer.body));
    assert!(serde_json::from_slice::<Value>(&answer.body).is_err());

    sim.inject_fault(Fault::MalformedJson, 1);
    let answer = client.bills("{}").await;
    assert_eq!(answer.status, 200);
    assert!(serde_json::from_slice::<Value>(&answer.body).is_err());

    sim.inject_fault(Fault::Hang(Duration::from_millis(200)), 1);
    let started = Instant::now();
    let answer = client.bills("{}").await;
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(answer.body, normal);

    sim.inject_fault(Fault::RateLimited { retry_after_secs: Some(7) }, 1);
    sim.inject_fault(Fault::RateLimited { retry_after_secs: None }, 1);
    let answer = client.bills("{}").await;
    assert_eq!((answer.status, answer.header("retry-after")), (429, Some("7")));
    let answer = client.bills("{}").await;
    assert_eq!((answer.status, answer.header("retry-after")), (429, None));

    sim.inject_fault(Fault::ExchangeError { code: "40015".into() }, 1);
    let answer = client.account("coinId=2").await;
    assert_eq!(answer.code(), "40015");
    assert_eq!(answer.json()["msg"], "System error");

    let stats = sim.requests();
    assert_eq!((stats.by_outcome.get("fault"), stats.by_outcome.get("ok")), (Some(&8), Some(&2)));
    assert_eq!(stats.total, 10);
}

#[tokio::test]
async fn unknown_paths_and_methods_are_refused() {
    let (sim, client) = start(SimOptions::default()).await;
    assert_eq!(client.send("GET", "/capi/v2/account/nothing", &[], b"").await.status, 404);
    assert_eq!(client.send("GET", "/", &[], b"").await.status, 404);
    assert_eq!(client.send("GET", BILLS, &[], b"").await.status, 405);
    assert_eq!(sim.requests().total, 0);
}

#[tokio::test]
async fn scripted_state_shows_in_the_answers() {
    let (sim, client) = start(SimOptions::default()).await;
    let key = &client.credentials.api_key;
    sim.set_collateral_field(key, 2, "amount", json!("abc"));
    assert_eq!(client.account("coinId=2").await.json()["collateral"][0]["amount"], "abc");
    sim.set_collateral_field(key, 2, "amount", json!("100"));
    sim.add_bill(key, NewBill { fill_fee: Decimal::ONE, ..usdt("position_open_long", -10) });
    sim.set_liquidating(key, 2, true);
    let collateral = &client.account("coinId=2").await.json()["collateral"][0];
    assert_eq!((&collateral["amount"], &collateral["is_liquidating"]), (&json!("90"), &json!(true)));
    assert_eq!(
        (&collateral["cum_position_open_long_amount"], &collateral["cum_position_fill_fee_amount"]),
        (&json!("10"), &json!("1"))
    );
    sim.set_liquidating(key, 2, false);
    let kinds: Vec<String> = sim.bills(key).into_iter().map(|bill| bill.business_type).collect();
    assert_eq!(kinds, ["position_open_long", "start_liquidate", "finish_liquidate"]);
    assert_eq!(sim.account_json(key, 2)["collateral"][0]["is_liquidating"], false);
    let version = |sim: &SimExchange| sim.account_json(key, 2)["version"].as_str().and_then(|v| v.parse::<u64>().ok());
    let before = version(&sim);
    let position = sim.open_position(
        key,
        NewPosition {
            coin_id: 2,
            contract_id: 10_000_002,
            side: "SHORT".into(),
            margin_mode: "SHARED".into(),
            leverage: Decimal::from(5),
            size: Decimal::ONE,
            open_value: Decimal::from(100),
        },
    );
    sim.update_position(key, &position, "funding_fee", json!("-0.5"));
    assert_eq!(client.account("coinId=2").await.json()["position"][0]["funding_fee"], "-0.5");
    sim.close_position(key, &position);
    assert_eq!(client.account("coinId=2").await.json()["position"], json!([]));
    assert!(version(&sim) > before);
}

#[tokio::test]
async fn the_activity_generator_books_bills_while_serving() {
    let (sim, client) = start(SimOptions::default()).await;
    let activity = sim.spawn_activity(3, Duration::from_millis(5));
    let since = std::time::Instant::now();
    while sim.bills(&client.credentials.api_key).is_empty() {
        assert!(since.elapsed() < Duration::from_secs(30), "no bill booked");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    activity.abort();
    assert_eq!(client.bills(r#"{"limit":100}"#).await.status, 200);
}

#[test]
fn credentials_are_reproducible_and_debug_hides_the_secrets() {
    let credentials = Credentials::generate(9);
    assert_eq!(credentials, Credentials::generate(9));
    assert_ne!(credentials, Credentials::generate(10));
    assert_eq!((credentials.secret.len(), credentials.passphrase.len()), (64, 16));
    let shown = format!("{credentials:?}");
    assert!(shown.contains(&credentials.api_key));
    assert!(!shown.contains(&credentials.secret) && !shown.contains(&credentials.passphrase), "{shown}");
}

/// Why the exporter cannot skip the bill query while an account's figures stand still: a bill
/// booked earlier can become visible later, when nothing in the account query changes any more.
#[tokio::test]
async fn a_bill_can_appear_while_the_account_answer_stays_the_same() {
    let (sim, client) = start(SimOptions::default()).await;
    let key = &client.credentials.api_key;
    sim.add_bill(key, NewBill { visible_after: Duration::from_secs(3), ..usdt("deposit", 5) });
    let before = sim.account_json(key, 2);
    let items = |body: Value| body["items"].as_array().map_or(0, Vec::len);
    assert_eq!(items(client.bills("{}").await.json()), 0);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while items(client.bills("{}").await.json()) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the late bill never became visible");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sim.account_json(key, 2), before, "the account answer changed when the bill appeared");
}
