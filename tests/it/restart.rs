//! With a state file, kill -9 at random moments while bills flow (ten times by default; set
//! CAPI_CRASH_ROUNDS for more) loses no bill and counts none twice, the counters continue from
//! their saved values and the ledger check stays at 0; a corrupt file never crashes it.

use crate::common;

use capi_sim::{Fault, NewBill, SimOptions};
use common::{now_ms, state_path, Exchange, Exporter, Scrape};
use rust_decimal::Decimal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const KINDS: [&str; 3] = ["position_funding", "deposit", "position_open_short"];

fn counted(scrape: &Scrape) -> f64 {
    scrape.sum("capi_bills_total", &[])
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_at_random_moments_loses_nothing_and_counts_nothing_twice() {
    let exchange = Exchange::start(SimOptions { weight_per_10s: None, ..SimOptions::default() }).await;
    let key = exchange.key().to_string();
    let path = state_path("kill");
    let flags = ["--state.file", path.to_str().unwrap(), "--bills.overlap", "2s", "--poll.interval", "100ms"];
    // Start once so that counting begins before the first bill.
    let mut exporter = Exporter::start(&exchange, &flags);
    exporter.wait_up().await;
    let counting_start = |s: &Scrape| s.value("capi_bill_counting_start_timestamp_seconds", &[]);
    let began = counting_start(&exporter.wait_for("counting begun", |s| counting_start(s).is_some()).await);

    let flowing = Arc::new(AtomicBool::new(true));
    let adder = {
        let (sim, key, flowing) = (exchange.sim.clone(), key.clone(), flowing.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            while flowing.load(Ordering::Relaxed) {
                n += 1;
                let kind = KINDS[(n % 3) as usize];
                sim.add_bill(
                    &key,
                    NewBill {
                        coin: "USDT".into(),
                        business_type: kind.into(),
                        amount: Decimal::new(n as i64, 2),
                        ..NewBill::default()
                    },
                );
                tokio::time::sleep(Duration::from_millis(7)).await;
            }
        })
    };

    let mut seed = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    println!("kill moments seeded with {seed}");
    let mut last_seen = 0.0;
    // CAPI_CRASH_ROUNDS=200 cargo test --test it restart runs it many more times over.
    let rounds: usize = std::env::var("CAPI_CRASH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(10);
    for round in 0..rounds {
        if round > 0 {
            exporter = Exporter::start(&exchange, &flags);
            let first = exporter.scrape().await;
            assert!(
                counted(&first) >= last_seen,
                "round {round}: counters restarted from {} below the {last_seen} seen before the kill",
                counted(&first)
            );
        }
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let kill_after = Duration::from_millis(100 + (seed >> 33) % 1_000);
        let deadline = tokio::time::Instant::now() + kill_after;
        while tokio::time::Instant::now() < deadline {
            let scrape = exporter.scrape().await;
            let created = exchange.sim.bills(&key).len() as f64;
            assert!(counted(&scrape) <= created, "counted {} of {created} bills created", counted(&scrape));
            let differences = scrape.series("capi_ledger_difference");
            assert!(differences.iter().all(|d| d.value == 0.0), "the ledger check differs: {differences:?}");
            last_seen = counted(&scrape);
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        exporter.kill9();
    }
    flowing.store(false, Ordering::Relaxed);
    adder.await.unwrap();

    let bills = exchange.sim.bills(&key);
    let exporter = Exporter::start(&exchange, &flags);
    let newest = bills.iter().map(|b| b.ctime_ms).max().unwrap() as f64 / 1000.0;
    let scrape = exporter
        .wait_for("every bill settled", |s| {
            s.value("capi_bill_cursor_timestamp_seconds", &[]).is_some_and(|t| t >= newest)
        })
        .await;
    for kind in KINDS {
        let created = bills.iter().filter(|b| b.business_type == kind).count() as f64;
        assert_eq!(scrape.value("capi_bills_total", &[("business_type", kind)]), Some(created), "{kind}");
    }
    assert!(bills.len() > 200, "only {} bills flowed", bills.len());
    let differences = scrape.series("capi_ledger_difference");
    assert!(!differences.is_empty() && differences.iter().all(|d| d.value == 0.0), "{differences:?}");
    assert!(!exporter.log().contains("not valid"), "the state file survived every kill:\n{}", exporter.log());
    assert_eq!(counting_start(&scrape), began, "no gap since counting began");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_state_file_is_reported_kept_aside_and_replaced() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let path = state_path("corrupt");
    std::fs::write(&path, "{\"format\":1,\"accounts\":{\"default\":").unwrap();
    let exporter = Exporter::start(&exchange, &["--state.file", path.to_str().unwrap()]);
    exporter.wait_up().await;
    let log = exporter.log();
    let error = log.lines().find(|l| l.contains("level=error")).unwrap_or_else(|| panic!("no error logged:\n{log}"));
    assert!(error.contains(path.to_str().unwrap()) && error.contains("is not valid"), "{error}");
    let mut aside = path.clone().into_os_string();
    aside.push(".corrupt");
    assert!(std::path::Path::new(&aside).exists());
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert!(saved["accounts"]["default"]["settled_through"].is_i64());
}

#[test]
fn a_state_file_that_cannot_be_read_stops_the_start_and_is_left_alone() {
    let path = state_path("unreadable");
    std::fs::create_dir(&path).unwrap();
    let fifo = path.with_file_name("fifo.json");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for (state, what) in [(&path, "is a directory"), (&fifo, "is a special file")] {
        let mut command = Exporter::command(&["--demo", "--state.file", state.to_str().unwrap()]);
        let output = command.stderr(std::process::Stdio::piped()).output().unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(what) && errors[0].contains(state.to_str().unwrap()), "{stderr}");
    }
    assert!(path.is_dir() && fifo.exists(), "left as they were");
    assert!(!path.with_file_name("state.json.corrupt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_exporter_on_the_same_state_file_stops_at_start_and_leaves_it_alone() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let path = state_path("shared");
    let flags = ["--state.file", path.to_str().unwrap(), "--poll.interval", "200ms"];
    let first = Exporter::start(&exchange, &flags);
    first.wait_up().await;
    let second = Exporter::command(&["--demo", "--state.file", path.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8(second.stderr).unwrap();
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("is in use by another process"), "{stderr}");
    // The first goes on saving: the second's demo accounts dropped nothing from the file.
    let saved = std::fs::metadata(&path).unwrap().modified().unwrap();
    let deadline = std::time::Instant::now() + common::DEADLINE;
    while std::fs::metadata(&path).unwrap().modified().unwrap() == saved {
        assert!(std::time::Instant::now() < deadline, "no save after the second start:\n{}", first.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(first.scrape().await.value("capi_state_file_errors_total", &[]), Some(0.0));
    assert!(std::fs::read_to_string(&path).unwrap().contains("\"default\""));
    assert!(!path.with_file_name("state.json.unpolled").exists());
}

/// The exporter as a user without privileges: as root, through `setpriv` as `nobody`, since
/// root may read and write any file whatever its mode.
fn unprivileged(args: &[&str]) -> std::process::Command {
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Exporter::command(args);
    }
    Exporter::wrapped(&Exporter::command(args), &["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"])
}

/// Idle connections to the exporter, more than its limit on open files allows, take only their
/// share of it: the polls and the state file's saves go on meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn idle_connections_cannot_take_the_descriptors_that_saving_needs() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let path = state_path("descriptors");
    let flags = ["--state.file", path.to_str().unwrap(), "--bills.overlap", "1s"];
    let command = Exporter::command_with(&exchange.url, &exchange.credentials, &flags);
    let exporter = Exporter::spawn(Exporter::wrapped(&command, &["prlimit", "--nofile=256:256", "--"]));
    exporter.wait_up().await;
    let address = exporter.url.trim_start_matches("http://").to_string();
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(tokio::net::TcpStream::connect(&address).await.unwrap());
    }
    exporter.wait_logged("every place for a connection is taken", 1);
    // Saves go on while every place is held: the cursor on disk moves.
    let held_from = saved_settled_through(&path);
    let deadline = std::time::Instant::now() + common::DEADLINE;
    while saved_settled_through(&path) <= held_from {
        assert!(std::time::Instant::now() < deadline, "no save while the connections were held:\n{}", exporter.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(idle);
    let scrape = exporter.wait_for("served again", |s| s.value("capi_up", &[]) == Some(1.0)).await;
    assert_eq!(scrape.value("capi_state_file_errors_total", &[]), Some(0.0));
    let log = exporter.log();
    assert!(log.contains("open_files_limit=256") && !log.contains("Too many open files"), "{log}");
}

#[test]
fn a_state_file_the_exporter_may_not_read_or_keep_aside_stops_the_start_untouched() {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |path: &std::path::Path, mode| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
    let unreadable = state_path("no-permission");
    state_with(&unreadable, now_ms(), "[]");
    mode(&unreadable, 0o000).unwrap();
    // A bad entry must be copied aside before anything is written, in a folder it may not write:
    // that folder is found out already as the lock beside the file cannot be made.
    let unkeepable = state_path("read-only-folder");
    state_with(&unkeepable, now_ms(), r#"[{"coin":"USDT","business_type":"deposit","count":"many"}]"#);
    mode(unkeepable.parent().unwrap(), 0o555).unwrap();
    for (state, what) in [(&unreadable, "cannot read state file"), (&unkeepable, "cannot lock state file")] {
        let before = std::fs::read(state).unwrap();
        let output = unprivileged(&["--demo", "--state.file", state.to_str().unwrap()])
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(what) && errors[0].contains("Permission denied"), "{stderr}");
        assert_eq!(std::fs::read(state).unwrap(), before, "left as it was");
    }
    mode(unkeepable.parent().unwrap(), 0o755).unwrap();
    assert_eq!(std::fs::read_dir(unkeepable.parent().unwrap()).unwrap().count(), 1, "nothing written beside it");
}

/// A state file with one entry for the account `default`, with these fields changed.
fn state_with(path: &std::path::Path, settled_through_ms: i64, bills: &str) {
    let entry = format!(
        r#"{{"settled_through":{settled_through_ms},"seen":{{}},"bills":{bills},"amounts":[],"fill_fees":[],"balances":{{}},"truncated_queries":0}}"#
    );
    std::fs::write(path, format!(r#"{{"format":1,"accounts":{{"default":{entry}}}}}"#)).unwrap();
}

/// The settled point of the account `default` in the state file, if it has been saved.
fn saved_settled_through(path: &std::path::Path) -> i64 {
    let saved = std::fs::read(path).ok().and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
    saved.and_then(|saved| saved["accounts"]["default"]["settled_through"].as_i64()).unwrap_or(i64::MIN)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_entry_is_kept_aside_and_its_account_counts_afresh() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let path = state_path("bad-entry");
    state_with(&path, now_ms() - 1_000, r#"[{"coin":"USDT","business_type":"deposit","count":"many"}]"#);
    let original = std::fs::read_to_string(&path).unwrap();
    let exporter = Exporter::start(&exchange, &["--state.file", path.to_str().unwrap()]);
    exporter.wait_up().await;
    let kept = path.with_file_name("state.json.corrupt");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), original, "the file as it was is kept");
    let log = exporter.log();
    let error = log.lines().find(|l| l.contains("level=error")).unwrap_or_else(|| panic!("no error logged:\n{log}"));
    assert!(error.contains("account=default") && error.contains("state.json.corrupt"), "{error}");
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(saved["accounts"]["default"]["bills"], serde_json::json!([]), "counting afresh");
    // Bills from the entry's last settled millisecond to the start were passed over: said on /metrics.
    let saved_from = saved["accounts"]["default"]["counting_since"].as_f64().unwrap() / 1000.0;
    let scrape = exporter.scrape().await;
    assert_eq!(scrape.value("capi_bill_counting_start_timestamp_seconds", &[]), Some(saved_from));
    assert!(saved_from * 1000.0 > (now_ms() - 60_000) as f64, "the start of this run, not the entry's");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_saved_in_the_future_is_brought_back_to_the_latest_time_the_exchange_can_show() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let path = state_path("future");
    let ten_years_ms = 10 * 365 * 86_400_000;
    state_with(&path, now_ms() + ten_years_ms, "[]");
    let started_ms = now_ms();
    let exporter = Exporter::start(&exchange, &["--state.file", path.to_str().unwrap(), "--bills.overlap", "1s"]);
    exporter.wait_up().await;
    // Counting goes on from this machine's now plus the 62 s by which the exchange's clock may
    // be ahead of it uncorrected: a bill counted before the restart is never counted again.
    let scrape = exporter
        .wait_for("counting brought back", |s| {
            s.value("capi_bill_counting_start_timestamp_seconds", &[]).is_some_and(|at| at < 2e9)
        })
        .await;
    let counting_from_ms = scrape.value("capi_bill_counting_start_timestamp_seconds", &[]).unwrap() * 1000.0;
    let lag_ms = counting_from_ms - started_ms as f64;
    assert!((62_000.0..62_000.0 + 30_000.0).contains(&lag_ms), "counting from {lag_ms} ms after the start");
    let log = exporter.log();
    assert!(
        log.lines().any(|l| l.contains("level=warn") && l.contains("after the exchange's clock as estimated now")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_account_that_comes_back_after_being_polled_elsewhere_counts_afresh() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let path = state_path("elsewhere");
    let flags = ["--state.file", path.to_str().unwrap(), "--bills.overlap", "1s"];
    let deposit = || NewBill { coin: "USDT".into(), business_type: "deposit".into(), ..NewBill::default() };
    let deposits = |s: &Scrape| s.value("capi_bills_total", &[("business_type", "deposit")]);
    let mut exporter = Exporter::start(&exchange, &flags);
    exporter.wait_up().await;
    exchange.sim.add_bill(exchange.key(), deposit());
    exporter.wait_for("the first deposit counted", |s| deposits(s) == Some(1.0)).await;
    assert!(exporter.terminate().success());

    // This exporter polls another account now (as after a change of the shard count); the one
    // it polled is counted elsewhere meanwhile.
    let mut exporter = Exporter::start(&exchange, &[&flags[..], &["--api.account-name", "other"]].concat());
    exporter.wait_up().await;
    let saved_accounts = || {
        let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        saved["accounts"].as_object().unwrap().keys().cloned().collect::<Vec<_>>()
    };
    exporter.wait_for("the state of other saved", |_| saved_accounts() == ["other"]).await;
    let log = exporter.log();
    let warning = log.lines().find(|l| l.contains("does not poll")).unwrap_or_else(|| panic!("{log}"));
    assert!(warning.contains("level=warn") && warning.contains("accounts=default"), "{warning}");
    assert!(exporter.terminate().success());
    exchange.sim.add_bill(exchange.key(), deposit());

    // Back here, it counts from its start: the deposit counted elsewhere is not counted again.
    let exporter = Exporter::start(&exchange, &flags);
    exporter.wait_up().await;
    exchange.sim.add_bill(exchange.key(), deposit());
    let created_ms = exchange.sim.bills(exchange.key()).iter().map(|b| b.ctime_ms).max().unwrap();
    let scrape = exporter
        .wait_for("the deposit after the start final", |s| {
            s.value("capi_bill_cursor_timestamp_seconds", &[]).is_some_and(|t| t * 1000.0 >= created_ms as f64)
        })
        .await;
    assert_eq!(deposits(&scrape), Some(1.0), "counted afresh from the start, once");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_with_the_exchange_clock_ahead_counts_no_bill_twice() {
    restart_with_the_exchange_clock_ahead(0).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_with_the_exchange_clock_ahead_and_its_first_answers_failing_counts_no_bill_twice() {
    // No account answer corrects the clock in the first poll: the bills must wait for one.
    restart_with_the_exchange_clock_ahead(6).await;
}

/// Bills are dated by the exchange's clock, five minutes ahead of this machine's: the saved
/// cursor is then in this machine's future, and must not be brought back by its clock, even when
/// the first `failing` requests after the restart fail (a proxy's 502).
async fn restart_with_the_exchange_clock_ahead(failing: usize) {
    let exchange = Exchange::start(SimOptions { clock_offset_ms: 300_000, ..SimOptions::default() }).await;
    let path = state_path("clock-ahead");
    let flags = ["--state.file", path.to_str().unwrap(), "--bills.overlap", "1s", "--poll.interval", "200ms"];
    let exporter = Exporter::start(&exchange, &flags);
    exporter.wait_up().await;
    let deposit = NewBill { coin: "USDT".into(), business_type: "deposit".into(), ..NewBill::default() };
    exchange.sim.add_bill(exchange.key(), deposit);
    let created_ms = exchange.sim.bills(exchange.key())[0].ctime_ms;
    exporter
        .wait_for("the deposit counted", |s| s.value("capi_bills_total", &[("business_type", "deposit")]) == Some(1.0))
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while saved_settled_through(&path) <= created_ms {
        assert!(std::time::Instant::now() < deadline, "the deposit's millisecond was never saved as settled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(exporter);

    exchange.sim.inject_fault(Fault::HtmlStatus(502), failing);
    let exporter = Exporter::start(&exchange, &flags);
    let withdrawal = NewBill { coin: "USDT".into(), business_type: "withdraw".into(), ..NewBill::default() };
    exchange.sim.add_bill(exchange.key(), withdrawal);
    let scrape = exporter
        .wait_for("the withdrawal counted", |s| {
            s.value("capi_bills_total", &[("business_type", "withdraw")]) == Some(1.0)
        })
        .await;
    assert_eq!(scrape.value("capi_bills_total", &[("business_type", "deposit")]), Some(1.0), "counted twice");
    assert!(!exporter.log().contains("a time in the future"), "{}", exporter.log());
    assert_eq!(exchange.sim.faults_pending(), 0, "every fault was met");
}

#[tokio::test(flavor = "multi_thread")]
async fn bills_not_saved_are_not_shown_until_a_save_succeeds() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let path = state_path("unsaved");
    let flags = ["--state.file", path.to_str().unwrap(), "--bills.overlap", "1s", "--poll.interval", "200ms"];
    let exporter = Exporter::start(&exchange, &flags);
    exporter.wait_up().await;
    // A directory where the file was: every save fails (renaming over it), even as root. A save
    // may put the file back in between: then again.
    while std::fs::remove_file(&path).is_ok() && std::fs::create_dir(&path).is_err() {}
    assert!(path.is_dir());
    let deposit = NewBill { coin: "USDT".into(), business_type: "deposit".into(), ..NewBill::default() };
    exchange.sim.add_bill(exchange.key(), deposit);
    let created_ms = exchange.sim.bills(exchange.key())[0].ctime_ms;
    // Ten failed saves: ten polls, two seconds, well past the deposit's scan.
    let failing = exporter
        .wait_for("saves failing", |s| s.value("capi_state_file_errors_total", &[]).is_some_and(|n| n >= 10.0))
        .await;
    assert_eq!(failing.value("capi_bills_total", &[("business_type", "deposit")]), None, "shown unsaved");
    let shown_through = failing.value("capi_bill_cursor_timestamp_seconds", &[]).unwrap();
    assert!(shown_through * 1000.0 < created_ms as f64, "shown final unsaved: {shown_through}");
    let log = exporter.log();
    let said: Vec<&str> = log.lines().filter(|l| l.contains("cannot write state file")).collect();
    assert_eq!(said.len(), 1, "a lasting failure is said once: {log}");
    assert!(
        said[0].contains("not shown until a save succeeds") && said[0].contains("write the file and its folder"),
        "{}",
        said[0]
    );
    std::fs::remove_dir(&path).unwrap();
    exporter
        .wait_for("the deposit shown once saved", |s| {
            s.value("capi_bills_total", &[("business_type", "deposit")]) == Some(1.0)
        })
        .await;
    assert!(saved_settled_through(&path) > created_ms);
    assert!(exporter.log().contains("the state file is saved again"), "{}", exporter.log());
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "balances and sums are for the exporter's user only");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_save_that_hangs_is_given_up_on_and_polling_goes_on() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let path = state_path("hung");
    let flags = ["--state.file", path.to_str().unwrap(), "--poll.interval", "200ms"];
    let exporter = Exporter::start(&exchange, &flags);
    exporter.wait_up().await;
    // The next write's temporary file is a FIFO nobody reads: opening it blocks, as a write to
    // a file system that stopped answering does.
    let temporary = path.with_file_name("state.json.tmp");
    assert!(std::process::Command::new("mkfifo").arg(&temporary).status().unwrap().success());
    // Two polls that each gave up on their save: polling goes on, one poll per wait.
    exporter.wait_for("two saves given up on", |s| s.value("capi_state_file_errors_total", &[]) >= Some(2.0)).await;
    let log = exporter.log();
    assert!(log.lines().any(|l| l.contains("level=error") && l.contains("the file system may hang")), "{log}");
}
