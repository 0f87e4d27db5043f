//! Reloading the configuration files (SIGHUP, or `POST /-/reload` with `--web.enable-lifecycle`):
//! added accounts start, removed ones stop, changed and unchanged ones keep their counters and
//! cursor (no bill counted twice or lost); a broken file is refused with an error line and
//! `capi_config_last_reload_successful 0` while the configuration before keeps running.

use crate::common;

use capi_sim::{Credentials, Fault, NewBill, SimOptions};
use common::{Exchange, Exporter, Scrape};
use rust_decimal::Decimal;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Accounts `a`, `b` and `c` on the exchange (`a` holds coins 1 and 2), their credentials in the
/// environment, and a directory for the files.
struct Setup {
    exchange: Exchange,
    credentials: Vec<(&'static str, Credentials)>,
    dir: PathBuf,
}

impl Setup {
    async fn new(test: &str) -> Self {
        let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
        let credentials: Vec<(&str, Credentials)> =
            ["a", "b", "c"].into_iter().zip(200..).map(|(name, seed)| (name, Credentials::generate(seed))).collect();
        for (name, credentials) in &credentials {
            let coins: &[u64] = if *name == "a" { &[1, 2] } else { &[2] };
            exchange.sim.add_account(credentials.clone(), coins);
        }
        let dir = std::env::temp_dir().join(format!("capi-reload-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self { exchange, credentials, dir }
    }

    fn key(&self, name: &str) -> &str {
        &self.credentials.iter().find(|(n, _)| *n == name).unwrap().1.api_key
    }

    /// Writes the accounts file with these accounts (name and coin ids).
    fn write_accounts(&self, accounts: &[(&str, &str)]) -> PathBuf {
        let mut yaml = String::from("coin_names: {1: BTC}\naccounts:\n");
        for (name, coins) in accounts {
            let var = name.to_uppercase();
            yaml.push_str(&format!(
                "  - name: {name}\n    coin_ids: [{coins}]\n    credentials:\n      api_key: {{env: {var}_KEY}}\n      secret: {{env: {var}_SECRET}}\n      passphrase: {{env: {var}_PASS}}\n"
            ));
        }
        self.write("accounts.yml", &yaml)
    }

    fn write(&self, file: &str, text: &str) -> PathBuf {
        let path = self.dir.join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn start(&self, accounts: &Path, extra: &[&str]) -> Exporter {
        let mut command =
            Exporter::command(&["--config.file", accounts.to_str().unwrap(), "--api.base-url", &self.exchange.url]);
        command.args(extra);
        for (name, credentials) in &self.credentials {
            let var = name.to_uppercase();
            command.env(format!("{var}_KEY"), &credentials.api_key);
            command.env(format!("{var}_SECRET"), &credentials.secret);
            command.env(format!("{var}_PASS"), &credentials.passphrase);
        }
        Exporter::spawn(command)
    }

    fn add_trade(&self, account: &str) {
        self.add_trade_created(account, None);
    }

    /// An accounts file of `a` alone, whose secret is read from a file that holds a wrong one.
    fn write_accounts_with_a_wrong_secret(&self) -> PathBuf {
        let secret = self.write("a_secret", "not-the-secret");
        let yaml = format!(
            "accounts:\n  - name: a\n    credentials: {{api_key: {{env: A_KEY}}, secret: {{file: {}}}, passphrase: {{env: A_PASS}}}}\n",
            secret.display()
        );
        self.write("accounts.yml", &yaml)
    }

    /// Once a's key was rejected, writes its right secret and reloads.
    async fn fix_the_secret_and_reload(&self, exporter: &Exporter) {
        exporter
            .wait_for("the key rejected", |s| s.sum("capi_api_requests_total", &[("outcome", "auth_error")]) >= 1.0)
            .await;
        let credentials = &self.credentials.iter().find(|(name, _)| *name == "a").unwrap().1;
        self.write("a_secret", &credentials.secret);
        exporter.signal("HUP");
        exporter.wait_logged("configuration reloaded", 1);
    }

    /// Gives the name `a` b's credentials, as a slip in the accounts file would, with these coin
    /// ids (or the default ones), and reloads.
    fn give_a_the_credentials_of_b(&self, exporter: &Exporter, coin_ids: Option<&str>) {
        let b = "{api_key: {env: B_KEY}, secret: {env: B_SECRET}, passphrase: {env: B_PASS}}";
        let coins = coin_ids.map(|ids| format!("    coin_ids: [{ids}]\n")).unwrap_or_default();
        self.write("accounts.yml", &format!("accounts:\n  - name: a\n{coins}    credentials: {b}\n"));
        exporter.signal("HUP");
    }

    /// A trade created at `ctime_ms` (now if `None`).
    fn add_trade_created(&self, account: &str, ctime_ms: Option<i64>) {
        let bill = NewBill {
            coin: "USDT".into(),
            symbol: "cmt_btcusdt".into(),
            business_type: "position_open_long".into(),
            amount: Decimal::new(-5, 0),
            fill_fee: Decimal::new(-1, 2),
            ctime_ms,
            visible_after: Duration::ZERO,
        };
        self.exchange.sim.add_bill(self.key(account), bill);
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn trades(scrape: &Scrape, account: &str) -> Option<f64> {
    scrape.value("capi_bills_total", &[("account", account), ("business_type", "position_open_long")])
}

fn up(scrape: &Scrape, account: &str) -> Option<f64> {
    scrape.value("capi_up", &[("account", account)])
}

fn reload_ok(scrape: &Scrape) -> Option<f64> {
    scrape.value("capi_config_last_reload_successful", &[])
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_changes_the_accounts_and_keeps_the_counts_of_those_that_stay() {
    let setup = Setup::new("sighup").await;
    let accounts = setup.write_accounts(&[("a", "2"), ("b", "2")]);
    let exporter = setup.start(&accounts, &[]);
    exporter.wait_up().await;
    for _ in 0..3 {
        setup.add_trade("a");
    }
    let before = exporter.wait_for("a's 3 trades", |s| trades(s, "a") == Some(3.0)).await;
    let started_at = before.value("capi_config_last_reload_success_timestamp_seconds", &[]).unwrap();
    assert_eq!(reload_ok(&before), Some(1.0));

    // a gains coin 1 (a new poller, continuing), b goes, c comes.
    setup.write_accounts(&[("a", "2,1"), ("c", "2")]);
    exporter.signal("HUP");
    exporter.wait_logged("configuration reloaded", 1);
    // c counts bills created from its first poll on: its trade comes after that poll.
    exporter.wait_for("c polled", |s| up(s, "c") == Some(1.0)).await;
    setup.add_trade("a");
    setup.add_trade("c");
    let after = exporter
        .wait_for("a and c counted after the reload", |s| {
            trades(s, "a") == Some(4.0) && trades(s, "c") == Some(1.0) && up(s, "c") == Some(1.0)
        })
        .await;
    assert_eq!(up(&after, "b"), None, "b no longer shown");
    assert!(
        after.matching("capi_collateral_amount", &[("account", "a"), ("coin", "BTC"), ("coin_id", "1")]).len() == 1
    );
    assert_eq!(reload_ok(&after), Some(1.0));
    assert!(after.value("capi_config_last_reload_success_timestamp_seconds", &[]).unwrap() > started_at);
    let log = exporter.log();
    assert!(log.contains("SIGHUP received"), "{log}");
    assert!(log.contains("msg=\"the account is no longer configured; its polling stopped\" account=b"), "{log}");

    // A broken file is refused; the configuration before keeps running.
    std::fs::write(&accounts, "accounts: [oops\n").unwrap();
    exporter.signal("HUP");
    exporter.wait_logged("cannot reload the configuration", 1);
    let refused = exporter.wait_for("the failed reload", |s| reload_ok(s) == Some(0.0)).await;
    let success_at = refused.value("capi_config_last_reload_success_timestamp_seconds", &[]);
    assert_eq!(success_at, after.value("capi_config_last_reload_success_timestamp_seconds", &[]));
    let line = exporter.log().lines().find(|l| l.contains("cannot reload")).unwrap().to_owned();
    assert!(line.contains("level=error") && line.contains(accounts.to_str().unwrap()), "{line}");
    setup.add_trade("c");
    exporter.wait_for("c still polled", |s| trades(s, "c") == Some(2.0) && trades(s, "a") == Some(4.0)).await;
    assert_eq!(exporter.get("/-/reload").await.status(), 405);
    let forbidden = reqwest::Client::new().post(format!("{}/-/reload", exporter.url)).send().await.unwrap();
    assert_eq!(forbidden.status(), 403, "no lifecycle API without --web.enable-lifecycle");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_account_a_reload_removes_leaves_its_state_aside_and_counts_afresh_when_it_comes_back() {
    let setup = Setup::new("removed").await;
    let state = setup.dir.join("state.json");
    let exporter =
        setup.start(&setup.write_accounts(&[("a", "2"), ("b", "2")]), &["--state.file", state.to_str().unwrap()]);
    exporter.wait_up().await;
    setup.add_trade("b");
    exporter.wait_for("b's trade counted", |s| trades(s, "b") == Some(1.0)).await;
    // b goes (renamed, say, and polled under its new name meanwhile), then comes back.
    setup.write_accounts(&[("a", "2")]);
    exporter.signal("HUP");
    exporter.wait_logged("configuration reloaded", 1);
    exporter.wait_logged("their saved state is dropped", 1);
    let aside: serde_json::Value =
        serde_json::from_slice(&std::fs::read(setup.dir.join("state.json.unpolled")).unwrap()).unwrap();
    assert!(aside["accounts"]["b"].is_object() && aside["accounts"]["a"].is_null(), "b's entry alone: {aside}");
    setup.write_accounts(&[("a", "2"), ("b", "2")]);
    exporter.signal("HUP");
    exporter.wait_logged("configuration reloaded", 2);
    let back = exporter.wait_for("b polled again", |s| up(s, "b") == Some(1.0)).await;
    assert_eq!(trades(&back, "b"), None, "its trade, counted before it went, is not shown again");
}

/// The drop is written to the state file at once, not at the next poll's save: here the only
/// account left never saves (its key is rejected), and the exporter stops. Kept in the file, b
/// would resume from its old cursor at the next start, over bills another name or replica
/// counted meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn an_account_a_reload_removes_is_gone_from_the_state_file_before_any_other_save() {
    let setup = Setup::new("dropped-at-once").await;
    let state = setup.dir.join("state.json");
    let flags = ["--state.file", state.to_str().unwrap()];
    let mut exporter = setup.start(&setup.write_accounts(&[("b", "2")]), &flags);
    exporter.wait_up().await;
    setup.add_trade("b");
    let counted = exporter.wait_for("b's trade counted", |s| trades(s, "b") == Some(1.0)).await;
    let began = counted.value("capi_bill_counting_start_timestamp_seconds", &[("account", "b")]).unwrap();
    setup.write_accounts_with_a_wrong_secret();
    exporter.signal("HUP");
    exporter.wait_logged("their saved state is dropped", 1);
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert!(saved["accounts"]["b"].is_null(), "b still in the state file: {saved}");
    assert!(exporter.terminate().success());

    let exporter = setup.start(&setup.write_accounts(&[("b", "2")]), &flags);
    let back = exporter.wait_up().await;
    assert_eq!(trades(&back, "b"), None, "its trade, counted before it went, is not shown again");
    let begins = back.value("capi_bill_counting_start_timestamp_seconds", &[("account", "b")]).unwrap();
    assert!(begins > began, "b counts afresh from its start: {begins} against {began}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coin_taken_from_an_account_leaves_no_series() {
    let setup = Setup::new("coin-dropped").await;
    let accounts = setup.write_accounts(&[("a", "1,2")]);
    // Figures this old are still shown: only the reload can take coin 1's away.
    let exporter = setup.start(&accounts, &["--data.max-age", "1h"]);
    let coin_1 = |s: &Scrape| {
        ["capi_data_age_seconds", "capi_collateral_amount"]
            .map(|name| s.matching(name, &[("account", "a"), ("coin_id", "1")]).len())
    };
    exporter.wait_for("coin 1 shown", |s| coin_1(s) == [1, 1]).await;
    setup.write_accounts(&[("a", "2")]);
    exporter.signal("HUP");
    exporter.wait_logged("configuration reloaded", 1);
    let after = exporter.wait_for("coin 1's series gone", |s| coin_1(s) == [0, 0]).await;
    assert_eq!(after.matching("capi_data_age_seconds", &[("account", "a"), ("coin_id", "2")]).len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interval_a_reload_stretches_is_shown_for_every_account() {
    let setup = Setup::new("stretched").await;
    // One one-coin account weighs 3 a poll, which 80% of a budget of 10 carries every 4.125 s;
    // two every 8.25 s.
    let exporter =
        setup.start(&setup.write_accounts(&[("b", "2")]), &["--poll.interval", "5s", "--api.ip-weight-budget", "10"]);
    let interval = |s: &Scrape, account: &str| s.value("capi_poll_interval_seconds", &[("account", account)]);
    exporter.wait_for("b polled every 5 s", |s| interval(s, "b") == Some(5.0)).await;
    setup.write_accounts(&[("b", "2"), ("c", "2")]);
    exporter.signal("HUP");
    exporter.wait_logged("configuration reloaded", 1);
    exporter
        .wait_for("both polled every 8.25 s", |s| interval(s, "b") == Some(8.25) && interval(s, "c") == Some(8.25))
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_exchange_accounts_credentials_under_a_name_begin_its_counts_afresh() {
    let setup = Setup::new("swapped").await;
    let exporter = setup.start(&setup.write_accounts(&[("a", "2")]), &[]);
    exporter.wait_up().await;
    for _ in 0..3 {
        setup.add_trade("a");
    }
    exporter.wait_for("a's 3 trades", |s| trades(s, "a") == Some(3.0)).await;
    setup.give_a_the_credentials_of_b(&exporter, None);
    // Said at once, with the bill scan held; after three answers the counts begin afresh.
    exporter.wait_logged("its bill counts and ledger check begin afresh", 1);
    setup.add_trade("b");
    exporter.wait_for("b's trade alone under a", |s| trades(s, "a") == Some(1.0)).await;
    let log = exporter.log();
    let said = |text: &str| log.lines().find(|l| l.contains(text)).unwrap_or_else(|| panic!("{log}")).to_owned();
    assert!(said("bills are not scanned, and capi_up is 0").contains("level=warn"), "{log}");
    let line = said("its bill counts and ledger check begin afresh");
    assert!(line.contains("level=error") && line.contains("account=a"), "{line}");
}

#[tokio::test(flavor = "multi_thread")]
async fn counts_dropped_for_another_exchange_account_stay_dropped_after_a_restart() {
    let setup = Setup::new("swapped-unscanned").await;
    let state = setup.dir.join("state.json");
    // Polls 3 s apart: time to queue faults for the next poll once one is logged.
    let flags = ["--state.file", state.to_str().unwrap(), "--poll.interval", "3s"];
    let mut exporter = setup.start(&setup.write_accounts(&[("a", "1,2")]), &flags);
    exporter.wait_up().await;
    setup.add_trade("a");
    exporter.wait_for("a's trade", |s| trades(s, "a") == Some(1.0)).await;
    setup.give_a_the_credentials_of_b(&exporter, Some("1, 2"));
    // The third poll naming b drops a's counts at its first answer; its second is refused (429),
    // so it scans no bills.
    exporter.wait_logged("bills are not scanned", 2);
    setup.exchange.sim.inject_fault(Fault::Hang(Duration::ZERO), 1);
    setup.exchange.sim.inject_fault(Fault::RateLimited { retry_after_secs: Some(60) }, 1);
    exporter.wait_logged("its bill counts and ledger check begin afresh", 1);
    exporter.wait_for("a's trade no longer shown", |s| trades(s, "a").is_none()).await;
    assert_eq!(setup.exchange.sim.faults_pending(), 0, "{}", exporter.log());
    exporter.kill9();
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(saved["accounts"].get("a"), None, "{saved}");

    let restarted = setup.start(&setup.dir.join("accounts.yml"), &flags);
    let first = restarted.scrape().await;
    assert_eq!(trades(&first, "a"), None, "the dropped counts came back:\n{}", first.text);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poller_replaced_while_saves_fail_goes_on_from_the_last_save() {
    let setup = Setup::new("unsaved").await;
    let accounts = setup.write_accounts(&[("a", "2")]);
    let state = setup.dir.join("state.json");
    let exporter = setup.start(&accounts, &["--state.file", state.to_str().unwrap(), "--bills.overlap", "1s"]);
    exporter.wait_up().await;
    setup.add_trade("a");
    exporter.wait_for("a's first trade saved", |s| trades(s, "a") == Some(1.0)).await;
    // A directory where the file was: every save fails (renaming over it), even as root. A save
    // may put the file back in between: then again.
    while std::fs::remove_file(&state).is_ok() && std::fs::create_dir(&state).is_err() {}
    assert!(state.is_dir());
    setup.add_trade("a");
    let failed_saves = |s: &Scrape| s.value("capi_state_file_errors_total", &[]).unwrap_or(0.0);
    // Ten failed saves: ten polls, two seconds, well past the trade's scan.
    let failing = exporter.wait_for("saves failing", |s| failed_saves(s) >= 10.0).await;
    assert_eq!(trades(&failing, "a"), Some(1.0), "shown unsaved");

    // a gains coin 1: a new poller takes over, from the last save, not from the poll before.
    setup.write_accounts(&[("a", "2,1")]);
    exporter.signal("HUP");
    exporter.wait_logged("configuration reloaded", 1);
    let replaced = exporter
        .wait_for("the new poller failing its saves", |s| {
            s.matching("capi_collateral_amount", &[("account", "a"), ("coin_id", "1")]).len() == 1
                && failed_saves(s) >= failed_saves(&failing) + 10.0
        })
        .await;
    assert_eq!(trades(&replaced, "a"), Some(1.0), "shown unsaved after the takeover");
    std::fs::remove_dir(&state).unwrap();
    // Counted twice, it would show 3.
    exporter.wait_for("the second trade shown once saved", |s| trades(s, "a") == Some(2.0)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_lifecycle_endpoint_reloads_the_web_config_and_answers_with_the_problem() {
    let setup = Setup::new("lifecycle").await;
    let accounts = setup.write_accounts(&[("a", "2")]);
    let hash = |password: &str| bcrypt::hash(password, 4).unwrap();
    let web = setup.write("web.yml", &format!("basic_auth_users:\n  prometheus: '{}'\n", hash("first")));
    let exporter = setup.start(&accounts, &["--web.config.file", web.to_str().unwrap(), "--web.enable-lifecycle"]);
    let client = reqwest::Client::new();
    let request = |method: reqwest::Method, path: &str, password: &str| {
        client.request(method, format!("{}{path}", exporter.url)).basic_auth("prometheus", Some(password)).send()
    };
    let metrics = |password: &'static str| request(reqwest::Method::GET, "/metrics", password);
    assert_eq!(metrics("first").await.unwrap().status(), 200);

    std::fs::write(&web, format!("basic_auth_users:\n  prometheus: '{}'\n", hash("second"))).unwrap();
    let reloaded = request(reqwest::Method::POST, "/-/reload", "first").await.unwrap();
    assert_eq!(reloaded.status(), 200);
    assert_eq!(metrics("first").await.unwrap().status(), 401, "the old password no longer works");
    let page = metrics("second").await.unwrap().text().await.unwrap();
    assert_eq!(reload_ok(&Scrape::parse(&page)), Some(1.0), "{page}");

    // A web config naming a certificate that is not there is refused, with the problem.
    std::fs::write(&web, "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n").unwrap();
    let refused = request(reqwest::Method::PUT, "/-/reload", "second").await.unwrap();
    assert_eq!(refused.status(), 500);
    let problem = refused.text().await.unwrap();
    assert!(
        problem.starts_with("failed to reload the configuration: ") && problem.contains("missing.crt"),
        "{problem}"
    );
    let page = metrics("second").await.unwrap().text().await.unwrap();
    assert_eq!(reload_ok(&Scrape::parse(&page)), Some(0.0), "{page}");
    assert!(exporter.log().contains("cannot reload the configuration"), "{}", exporter.log());

    // An empty file (caught while it was written) means no protection, as in exporter-toolkit:
    // said in the log, not done quietly.
    std::fs::write(&web, "").unwrap();
    assert_eq!(request(reqwest::Method::POST, "/-/reload", "second").await.unwrap().status(), 200);
    assert_eq!(client.get(format!("{}/metrics", exporter.url)).send().await.unwrap().status(), 200);
    let warning =
        "the reloaded web config has no basic_auth_users: requests are answered without a password from now on";
    assert!(exporter.log().contains(warning), "{}", exporter.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poller_a_reload_replaces_keeps_the_wait_the_exchange_asked_for() {
    let setup = Setup::new("paced").await;
    let accounts = setup.write_accounts(&[("a", "2")]);
    let exporter = setup.start(&accounts, &[]);
    exporter.wait_up().await;
    setup.exchange.sim.inject_fault(Fault::RateLimited { retry_after_secs: Some(8) }, 1);
    let (refused, answered) = setup.exchange.faults_answered(1).await;
    // a gains coin 1: a new poller takes over within the 8 s the exchange asked for.
    setup.write_accounts(&[("a", "2,1")]);
    exporter.signal("HUP");
    exporter.wait_logged("configuration reloaded", 1);
    let waited = setup.exchange.request_after(answered).await - refused;
    // A second of margin for the moments this test sees late.
    assert!(waited >= Duration::from_secs(7), "the next request came {waited:?} after a 429 asking for 8 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poller_a_reload_replaces_after_a_failed_poll_goes_on_with_the_backoff() {
    let setup = Setup::new("paced-failed").await;
    let accounts = setup.write_accounts(&[("a", "2")]);
    let exporter = setup.start(&accounts, &[]);
    exporter.wait_up().await;
    // A 429; a poll whose account query and its retries get a 502; a poll that hangs until the
    // reload ends it; then the new poller's first request gets a 429 again.
    let sim = &setup.exchange.sim;
    sim.inject_fault(Fault::RateLimited { retry_after_secs: None }, 1);
    sim.inject_fault(Fault::HtmlStatus(502), 3);
    sim.inject_fault(Fault::Hang(Duration::from_secs(120)), 1);
    sim.inject_fault(Fault::RateLimited { retry_after_secs: None }, 1);
    let backoff = |s: &Scrape| s.value("capi_poll_backoff_seconds", &[("account", "a")]);
    let failed = |s: &Scrape| s.sum("capi_api_requests_total", &[("account", "a"), ("outcome", "http_error")]);
    exporter.wait_for("the failed poll", |s| failed(s) == 3.0 && backoff(s) == Some(0.0)).await;
    setup.write_accounts(&[("a", "2,1")]);
    exporter.signal("HUP");
    exporter.wait_logged("configuration reloaded", 1);
    let scrape = exporter.wait_for("the new poller's 429", |s| backoff(s).is_some_and(|b| b > 0.0)).await;
    // The second 429 of the run: 10 s (8 to 12 with the jitter) beyond the 0.2 s interval;
    // begun afresh, 4 to 6 s.
    let waited = backoff(&scrape).unwrap();
    assert!((7.8..=11.8).contains(&waited), "backing off {waited} s after the new poller's 429");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_account_of_a_first_start_whose_key_a_reload_fixes_counts_the_backfill() {
    let setup = Setup::new("fixed-key-backfill").await;
    let accounts = setup.write_accounts_with_a_wrong_secret();
    setup.add_trade_created("a", Some(common::now_ms() - 600_000));
    let state = setup.dir.join("state.json");
    let exporter = setup.start(&accounts, &["--state.file", state.to_str().unwrap(), "--bills.backfill", "1h"]);
    setup.fix_the_secret_and_reload(&exporter).await;
    // Counted from an hour back, as at the first start it still is for a: no poll had counted.
    exporter.wait_for("the trade of ten minutes ago counted", |s| trades(s, "a") == Some(1.0)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_account_a_reload_adds_is_named_as_going_without_the_backfill() {
    let setup = Setup::new("added-backfill").await;
    let state = setup.dir.join("state.json");
    let exporter = setup.start(
        &setup.write_accounts(&[("a", "2")]),
        &["--state.file", state.to_str().unwrap(), "--bills.backfill", "1h"],
    );
    exporter.wait_up().await;
    setup.add_trade_created("b", Some(common::now_ms() - 600_000));
    setup.write_accounts(&[("a", "2"), ("b", "2")]);
    exporter.signal("HUP");
    exporter.wait_logged("configuration reloaded", 1);
    let polled = exporter.wait_for("b polled", |s| up(s, "b") == Some(1.0)).await;
    assert_eq!(trades(&polled, "b"), None, "its trade of ten minutes ago is before its counting");
    let log = exporter.log();
    let warning = log.lines().find(|l| l.contains("--bills.backfill applies at the first start only"));
    assert!(warning.is_some_and(|l| l.contains("level=warn") && l.contains("accounts=b")), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_fixed_by_a_reload_is_tried_at_once_whatever_the_backoff() {
    let setup = Setup::new("fixed-key").await;
    // At 15 s, the first rejection holds the next poll back 30 s.
    let exporter = setup.start(&setup.write_accounts_with_a_wrong_secret(), &["--poll.interval", "15s"]);
    setup.fix_the_secret_and_reload(&exporter).await;
    let reloaded = std::time::Instant::now();
    exporter.wait_up().await;
    let waited = reloaded.elapsed();
    assert!(waited < Duration::from_secs(10), "the fixed key was first tried {waited:?} after the reload");
}
