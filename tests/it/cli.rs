//! The binary as a user runs it: one clear line for a configuration mistake, a clean exit on
//! SIGTERM.

use crate::common;

use capi_exporter::config::shard::Shard;
use capi_sim::SimOptions;
use common::{wait_exit, Exchange, Exporter};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn run_to_exit(mut command: Command) -> (i32, String) {
    command.stderr(Stdio::piped());
    let output = command.output().unwrap();
    (output.status.code().unwrap_or(-1), String::from_utf8(output.stderr).unwrap())
}

#[test]
fn missing_credentials_stop_it_with_one_line_naming_the_variable() {
    let (code, stderr) = run_to_exit(Exporter::command(&[]));
    assert_eq!(code, 1);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("missing credentials: set CAPI_API_KEY, CAPI_API_SECRET, CAPI_API_PASSPHRASE (each, or")
            && lines[0].contains("--demo"),
        "{stderr}"
    );
}

#[test]
fn a_bad_config_file_names_the_file_and_the_mistake() {
    let path = std::env::temp_dir().join(format!("capi-cli-{}.yml", std::process::id()));
    std::fs::write(&path, "accounts:\n  - name: main\n    coin_ids: two\n").unwrap();
    let (code, stderr) = run_to_exit(Exporter::command(&["--config.file", path.to_str().unwrap()]));
    assert_eq!(code, 1);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(path.to_str().unwrap()) && stderr.contains("coin_ids"), "{stderr}");
}

#[test]
fn a_bad_flag_value_says_what_a_good_one_looks_like() {
    let (code, stderr) = run_to_exit(Exporter::command(&["--demo", "--poll.interval", "fast"]));
    assert_eq!(code, 2);
    // One line, with the prefix of a configuration error.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("capi_exporter: error: invalid value 'fast' for '--poll.interval"), "{stderr}");
    assert!(stderr.contains("write it like 500ms, 15s") && stderr.ends_with("(see --help)\n"), "{stderr}");
}

#[test]
fn a_demo_setting_without_demo_is_refused_instead_of_ignored() {
    for flag in ["--demo.accounts", "--demo.seed"] {
        // With credentials, the exchange would have been polled, the setting silently unused.
        let mut command = Exporter::command(&[flag, "3", "--config.check"]);
        command.envs([("CAPI_API_KEY", "k"), ("CAPI_API_SECRET", "s"), ("CAPI_API_PASSPHRASE", "p")]);
        let (code, stderr) = run_to_exit(command);
        assert_eq!(code, 2, "{flag}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("required arguments were not provided") && stderr.contains("--demo "), "{stderr}");
    }
}

#[test]
fn a_bad_value_from_the_environment_names_its_variable_and_the_possible_values() {
    let mut command = Exporter::command(&["--demo"]);
    command.env("CAPI_LOG_LEVEL", "trace");
    let (code, stderr) = run_to_exit(command);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "capi_exporter: error: invalid value 'trace' for '--log.level <LOG_LEVEL>'; [possible values: error, warn, info, debug]; the value is CAPI_LOG_LEVEL's, from the environment (see --help)\n"
    );
}

#[test]
fn a_taken_port_is_one_line_naming_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let (code, stderr) = run_to_exit(Exporter::command(&["--demo", "--web.listen-address", &address]));
    assert_eq!(code, 1);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(&format!(
            "cannot listen on {address}: Address already in use; choose another --web.listen-address"
        )),
        "{stderr}"
    );
}

#[test]
fn with_json_logs_the_error_that_stops_it_is_a_json_line_too() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let (code, stderr) =
        run_to_exit(Exporter::command(&["--demo", "--log.format", "json", "--web.listen-address", &address]));
    assert_eq!(code, 1);
    for line in stderr.lines() {
        assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "not JSON: {line}");
    }
    let last: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(last["level"], "error", "{stderr}");
    assert!(last["error"].as_str().unwrap().contains(&format!("cannot listen on {address}")), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_it_cleanly_with_exit_code_0() {
    let exchange = Exchange::start(SimOptions::default()).await;
    let mut exporter = Exporter::start(&exchange, &[]);
    exporter.wait_up().await;
    let status = exporter.terminate();
    assert_eq!(status.code(), Some(0), "{}", exporter.log());
    assert!(exporter.log().contains("msg=stopped"), "{}", exporter.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn stray_signals_are_ignored() {
    let mut exporter = Exporter::spawn(Exporter::command(&["--demo"]));
    exporter.wait_up().await;
    for signal in ["USR1", "USR2", "ALRM"] {
        exporter.signal(signal);
    }
    let deadline = std::time::Instant::now() + common::DEADLINE;
    while exporter.log().matches("signal received and ignored").count() < 3 {
        assert!(std::time::Instant::now() < deadline, "{}", exporter.log());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    exporter.wait_up().await;
    assert_eq!(exporter.terminate().code(), Some(0), "{}", exporter.log());
}

#[test]
fn a_config_error_is_said_once() {
    let dir = scratch_dir("once");
    let web = dir.join("web.yml");
    std::fs::write(&web, "basic_auth_users:\n  alice: plaintext\n").unwrap();
    let (code, stderr) = run_to_exit(Exporter::command(&["--demo", "--web.config.file", web.to_str().unwrap()]));
    assert_eq!(code, 1);
    assert_eq!(stderr.matches("is not a bcrypt hash").count(), 1, "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_demo_needs_nothing_and_serves_live_figures() {
    let mut command = Exporter::command(&["--demo", "--demo.accounts", "3"]);
    command.stderr(Stdio::piped());
    let mut exporter = Exporter::spawn(command);
    let scrape = exporter
        .wait_for("three demo accounts up", |s| s.series("capi_up").iter().filter(|u| u.value == 1.0).count() == 3)
        .await;
    for account in ["demo-1", "demo-2", "demo-3"] {
        assert!(scrape.value("capi_collateral_amount", &[("account", account)]).is_some_and(|v| v > 0.0), "{account}");
    }
    assert_eq!(exporter.get("/-/ready").await.status(), 200);
    assert_eq!(exporter.terminate().code(), Some(0));
    let _ = wait_exit;
}

#[test]
fn a_web_config_with_a_missing_certificate_stops_it_with_one_line() {
    let dir = scratch_dir("web");
    let web = dir.join("web.yml");
    std::fs::write(&web, "tls_server_config:\n  cert_file: nowhere.crt\n  key_file: nowhere.key\n").unwrap();
    let (code, stderr) = run_to_exit(Exporter::command(&["--demo", "--web.config.file", web.to_str().unwrap()]));
    assert_eq!(code, 1);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("web config") && stderr.contains("nowhere.crt"), "{stderr}");
}

#[test]
fn a_key_or_password_file_named_as_a_config_is_refused_without_quoting_it() {
    let dir = scratch_dir("mistake");
    let key = dir.join("server.key");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let htpasswd = dir.join("htpasswd");
    let hash = "$2y$10$abcdefghijklmnopqrstuuwmjOOgyx/jknFqeF8sHrF2cGgSECl/q";
    std::fs::write(&htpasswd, format!("alice:{hash}\n")).unwrap();
    let key_body = certified.signing_key.serialize_pem().lines().nth(1).unwrap().to_owned();
    // The demo's accounts for the web config's cases: --demo takes no accounts file.
    for (demo, flag, file, secret) in [
        (true, "--web.config.file", &key, key_body.as_str()),
        (true, "--web.config.file", &htpasswd, hash),
        (false, "--config.file", &key, key_body.as_str()),
        (false, "--config.file", &htpasswd, hash),
    ] {
        let args = ["--config.check", flag, file.to_str().unwrap()];
        let (code, stderr) = run_to_exit(Exporter::command(&[&["--demo"][..usize::from(demo)], &args[..]].concat()));
        assert_eq!(code, 1, "{flag} {file:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("invalid type: string, expected"), "{flag} {file:?}: {stderr}");
        assert!(!stderr.contains(secret), "{flag} {file:?} quoted: {stderr}");
    }
}

/// A folder of this test process's own, named after `tag`.
fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capi-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `--config.check` of the accounts file `accounts`, with the variables `env` and the flags
/// `extra`: its exit code, standard output and standard error.
fn config_check(accounts: &Path, env: &[(&str, &str)], extra: &[&str]) -> (Option<i32>, String, String) {
    let mut command =
        Exporter::command(&[&["--config.check", "--config.file", accounts.to_str().unwrap()], extra].concat());
    command.envs(env.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let output = command.output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (output.status.code(), text(output.stdout), text(output.stderr))
}

#[test]
fn a_misspelt_variable_is_warned_of_with_the_one_it_misspells() {
    let dir = scratch_dir("variables");
    let accounts = dir.join("accounts.yml");
    // The accounts file's credential variables may have the exporter's prefix: they are read.
    let credentials =
        "{api_key: {env: CAPI_MAIN_KEY}, secret: {env: CAPI_MAIN_SECRET}, passphrase: {env: CAPI_MAIN_PASS}}";
    std::fs::write(&accounts, format!("accounts:\n  - name: main\n    credentials: {credentials}\n")).unwrap();
    let set = [("CAPI_MAIN_KEY", "k"), ("CAPI_MAIN_SECRET", "s"), ("CAPI_MAIN_PASS", "p"), ("CAPI_STATE_FLIE", "x")];
    let (code, stdout, stderr) = config_check(&accounts, &set, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "capi_exporter: the configuration is valid: 1 account(s), plain HTTP\n\
         capi_exporter: warning: CAPI_STATE_FLIE is set, but no setting reads it, so it changes nothing; did you mean CAPI_STATE_FILE?\n"
    );
}

#[test]
fn a_variable_that_is_not_utf8_is_named_as_such() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = scratch_dir("not-utf8");
    let accounts = dir.join("accounts.yml");
    let credentials = "{api_key: {env: K}, secret: {env: S}, passphrase: {env: P}}";
    std::fs::write(&accounts, format!("accounts:\n  - name: main\n    credentials: {credentials}\n")).unwrap();
    let mut command = Exporter::command(&["--config.check", "--config.file", accounts.to_str().unwrap()]);
    command.envs([("K", "k"), ("P", "p")]).env("S", std::ffi::OsStr::from_bytes(b"ab\xffcd"));
    let output = command.stderr(Stdio::piped()).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "capi_exporter: error: invalid configuration: S is not UTF-8 text; set it to its value as text\n"
    );
}

#[test]
fn config_check_says_valid_or_names_the_problem_and_starts_nothing() {
    let dir = scratch_dir("check");
    let accounts = dir.join("accounts.yml");
    let credentials =
        |key: &str| format!("credentials: {{api_key: {{env: {key}}}, secret: {{env: S}}, passphrase: {{env: P}}}}");
    std::fs::write(
        &accounts,
        format!("accounts:\n  - name: main\n    {}\n  - name: hedge\n    {}\n", credentials("K"), credentials("K2")),
    )
    .unwrap();
    let check = |env: &[(&str, &str)], extra: &[&str]| config_check(&accounts, env, extra);
    let keys = [("K", "key"), ("K2", "key-2"), ("S", "secret"), ("P", "passphrase")];
    let (code, stdout, stderr) = check(&keys, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "capi_exporter: the configuration is valid: 2 account(s), plain HTTP\n");
    assert_eq!(stderr, "", "nothing starts, nothing is logged");

    let (code, _, stderr) = check(&keys[..3], &[]);
    assert_eq!(code, Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let unset = "passphrase: the environment variable named for it is not set, or empty";
    assert!(stderr.contains("invalid configuration") && stderr.contains(unset), "{stderr}");

    // A certificate only the server would load is loaded too.
    let web = dir.join("web.yml");
    std::fs::write(&web, "tls_server_config:\n  cert_file: nowhere.crt\n  key_file: nowhere.key\n").unwrap();
    let (code, _, stderr) = check(&keys, &["--web.config.file", web.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("nowhere.crt"), "{stderr}");

    // Suites and curves by Go's names: one rustls lacks is said, an unknown one refused.
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("server.crt"), certified.cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), certified.signing_key.serialize_pem()).unwrap();
    let tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";
    let suites = "  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n";
    std::fs::write(&web, format!("{tls}{suites}  curve_preferences: [CurveP521, X25519]\n")).unwrap();
    let (code, stdout, stderr) = check(&keys, &["--web.config.file", web.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "capi_exporter: the configuration is valid: 2 account(s), TLS\n\
         capi_exporter: warning: tls_server_config.cipher_suites: TLS_RSA_WITH_AES_128_CBC_SHA not offered: rustls does not implement them\n\
         capi_exporter: warning: tls_server_config.curve_preferences: CurveP521 not offered: rustls does not implement them\n"
    );
    std::fs::write(&web, format!("{tls}  cipher_suites: [TLS_BOGUS]\n")).unwrap();
    let (code, _, stderr) = check(&keys, &["--web.config.file", web.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("tls_server_config.cipher_suites: unknown name \"TLS_BOGUS\""), "{stderr}");

    // What the start would warn of: 2 accounts with 2 coins weigh 8 a poll, which 80% of a budget
    // of 10 carries once in 11 s; coin 7 has no name; 5 s of age is less than 11 s.
    let flags =
        ["--api.coin-ids", "2,7", "--poll.interval", "1s", "--api.ip-weight-budget", "10", "--data.max-age", "5s"];
    let (code, stdout, stderr) = check(&keys, &flags);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "capi_exporter: the configuration is valid: 2 account(s), plain HTTP\n\
         capi_exporter: warning: 2 account(s) with 2 coin(s) do not fit the exchange's weight budget at --poll.interval 1s; polling every 11s instead (raise the budgets if the exchange allows more, or shard the accounts over several IPs)\n\
         capi_exporter: warning: coin ids 7 have no name, so their series carry coin=\"\" and do not join with their bills; name them with --api.coin-names ID=NAME (or coin_names in the accounts file)\n\
         capi_exporter: warning: --data.max-age 5s is not longer than the poll interval 11s: every account's figures will be withdrawn between polls; give it two intervals or more\n"
    );
    // The documented coin renamed.
    let (code, stdout, stderr) = check(&keys, &["--api.coin-names", "2=BTC"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout.lines().nth(1),
        Some("capi_exporter: warning: coin id 2 is documented as USDT but named BTC here (--api.coin-names or coin_names): its series say coin=\"BTC\", and its bills join them, and enter the ledger check, only if they name it BTC; remove the name unless they do")
    );
    // The exchange over plain HTTP: said, unless it is this machine (a local proxy).
    let (code, stdout, stderr) = check(&keys, &["--api.base-url", "http://api-contract.weex.com"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout.lines().nth(1),
        Some("capi_exporter: warning: --api.base-url http://api-contract.weex.com is plain HTTP to another machine: the API keys and passphrases, and every figure, travel unencrypted; use https://")
    );
    for local in ["http://127.0.0.1:8080", "http://[::1]:8080", "http://localhost:8080"] {
        let (code, stdout, stderr) = check(&keys, &["--api.base-url", local]);
        assert_eq!((code, stdout.lines().count()), (Some(0), 1), "{local}: {stdout}{stderr}");
    }
    // What would stop the start at the state file: a directory, a newer exporter's file.
    let newer = dir.join("newer.json");
    std::fs::write(&newer, r#"{"format":99,"accounts":{}}"#).unwrap();
    for (state, problem) in [(&dir, "is a directory, not a regular file"), (&newer, "was written by a newer exporter")]
    {
        let (code, stdout, stderr) = check(&keys, &["--state.file", state.to_str().unwrap()]);
        assert_eq!((code, stdout.as_str()), (Some(1), ""), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(problem), "{stderr}");
    }
    // What a start would warn of: a file not valid, kept aside, its counts begun afresh.
    let corrupt = dir.join("corrupt.json");
    std::fs::write(&corrupt, r#"{"format":1,"accou"#).unwrap();
    let (code, stdout, stderr) = check(&keys, &["--state.file", corrupt.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let warning = stdout.lines().nth(1).unwrap_or_default();
    assert!(
        warning.starts_with(&format!("capi_exporter: warning: state file {} is not valid (", corrupt.display()))
            && warning.ends_with(&format!(
                "a start keeps it aside as {}.corrupt, and bill counting begins afresh",
                corrupt.display()
            )),
        "{stdout}"
    );
    assert_eq!(std::fs::read_to_string(&corrupt).unwrap(), r#"{"format":1,"accou"#, "left as it is");
    // What a start would do to entries: one not valid counts afresh, one of an account not
    // polled is moved aside, and the backfill skips an account without a saved entry.
    let entries = dir.join("entries.json");
    let valid =
        r#"{"amounts":[],"balances":{},"bills":[],"fill_fees":[],"seen":{},"settled_through":5,"truncated_queries":3}"#;
    let text =
        format!(r#"{{"format":1,"accounts":{{"main":{valid},"gone":{valid},"hedge":{{"settled_through":"x"}}}}}}"#);
    std::fs::write(&entries, &text).unwrap();
    let (code, stdout, stderr) = check(&keys, &["--state.file", entries.to_str().unwrap(), "--bills.backfill", "1h"]);
    assert_eq!(code, Some(0), "{stderr}");
    let file = entries.display();
    let warnings: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(warnings.len(), 3, "{stdout}");
    assert!(
        warnings[0].starts_with(&format!(
            "capi_exporter: warning: state file {file}: the entry of account \"hedge\" is not valid ("
        )),
        "{stdout}"
    );
    assert!(
        warnings[0]
            .ends_with("); a start keeps a copy of the file aside, and this account's bill counting begins afresh"),
        "{stdout}"
    );
    assert_eq!(warnings[1], format!("capi_exporter: warning: state file {file} holds accounts this replica does not poll (gone): a start moves their entries aside (as {file}.unpolled), and one polled here again later counts afresh"));
    assert_eq!(warnings[2], "capi_exporter: warning: --bills.backfill applies at the first start only (no state file yet): these accounts have no saved state, and count from their first poll: hedge");
    assert_eq!(std::fs::read_to_string(&entries).unwrap(), text, "left as it is");
    assert_eq!(
        std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains(".lock"))
            .count(),
        0,
        "no lock file"
    );

    // The single account's settings beside an accounts file.
    let (code, stdout, stderr) =
        check(&[&keys[..], &[("CAPI_API_SECRET_FILE", "/run/secret")]].concat(), &["--api.account-name", "main"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "capi_exporter: the configuration is valid: 2 account(s), plain HTTP\n\
         capi_exporter: warning: --api.account-name (or CAPI_API_ACCOUNT_NAME) is set but not used: --config.file names each account and its credentials\n\
         capi_exporter: warning: CAPI_API_SECRET_FILE is set but not used: --config.file names each account and its credentials\n"
    );
    let idle = (2..10)
        .flat_map(|count| (0..count).map(move |index| Shard::new(index, count).unwrap()))
        .find(|shard| !shard.owns("main") && !shard.owns("hedge"))
        .unwrap();
    let (index, count) = (idle.index.to_string(), idle.count.to_string());
    let (code, stdout, stderr) = check(&keys, &["--shard.index", &index, "--shard.count", &count]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "capi_exporter: the configuration is valid: 2 account(s), plain HTTP\n\
             capi_exporter: warning: this shard owns none of the configured accounts (2), so shard {index} of {count} polls nothing; lower --shard.count if there are more replicas than needed\n"
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn version_says_how_the_binary_was_built_as_node_exporter_does() {
    let mut command = Exporter::command(&["--version"]);
    let output = command.stdout(Stdio::piped()).output().unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    let expected_start = format!("capi_exporter {} (branch: ", env!("CARGO_PKG_VERSION"));
    assert!(lines[0].starts_with(&expected_start) && lines[0].contains(", revision: "), "{stdout}");
    let field = |name: &str| lines.iter().find_map(|line| line.trim().strip_prefix(name)).map(str::trim);
    let date = field("build date:").unwrap_or_default();
    assert!(date.len() == 17 && date.as_bytes()[8] == b'-', "a date like 20261124-00:25:52: {stdout}");
    assert!(field("rust version:").is_some_and(|v| v.split('.').count() == 3), "{stdout}");
    assert_eq!(field("platform:"), Some(format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH).as_str()));
}

#[tokio::test(flavor = "multi_thread")]
async fn it_serves_on_every_listen_address() {
    let exporter = Exporter::spawn(Exporter::command(&[
        "--demo",
        "--web.listen-address",
        "127.0.0.1:0",
        "--web.listen-address",
        "localhost:0",
    ]));
    let log = exporter.log();
    let line = log.lines().find(|line| line.contains("serving metrics")).unwrap();
    let addresses = common::field(line, "address").unwrap();
    let addresses: Vec<&str> = addresses.split(',').collect();
    assert_eq!(addresses.len(), 2, "{log}");
    for address in addresses {
        let body = reqwest::get(format!("http://{address}/metrics")).await.unwrap().text().await.unwrap();
        assert!(body.contains("capi_up{account=\"demo-1\"}"), "{address}: {body}");
    }
}

/// `:port` is every address, as with exporter-toolkit: IPv4 and, where the host has it, IPv6.
#[tokio::test(flavor = "multi_thread")]
async fn a_port_alone_listens_on_every_address() {
    let exporter = Exporter::spawn(Exporter::command(&["--demo", "--web.listen-address", ":0"]));
    let log = exporter.log();
    let line = log.lines().find(|line| line.contains("serving metrics")).unwrap();
    let address = common::field(line, "address").unwrap();
    let (host, port) = address.rsplit_once(':').unwrap();
    let mut loopbacks = vec!["127.0.0.1"];
    if host == "[::]" {
        loopbacks.push("[::1]");
    } else {
        assert_eq!(host, "0.0.0.0", "{log}");
        assert!(log.contains("IPv6 is not available here"), "{log}");
    }
    for loopback in loopbacks {
        let body = reqwest::get(format!("http://{loopback}:{port}/metrics")).await.unwrap().text().await.unwrap();
        assert!(body.contains("capi_up{account=\"demo-1\"}"), "{loopback}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_start_up_line_says_version_accounts_interval_and_budget() {
    let exporter = Exporter::spawn(Exporter::command(&[
        "--demo",
        "--demo.accounts",
        "2",
        "--poll.interval",
        "15s",
        "--api.ip-weight-budget",
        "400",
    ]));
    let log = exporter.log();
    let line = log.lines().find(|l| l.contains("msg=\"starting capi_exporter\"")).unwrap_or_else(|| panic!("{log}"));
    for field in ["version=0.1.0", "accounts=2", "names=demo-1,demo-2", "poll_interval=15s", "ip_weight_budget=400"] {
        assert!(line.contains(field), "{field} missing: {line}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn at_debug_level_each_request_of_a_poll_is_logged() {
    let exporter = Exporter::spawn(Exporter::command(&["--demo", "--demo.accounts", "1", "--log.level", "debug"]));
    exporter.wait_for("a bill query logged", |_| exporter.log().contains("bill query answered")).await;
    let log = exporter.log();
    let lines = |msg: &str| log.lines().filter(|l| l.contains(&format!("msg=\"{msg}\""))).collect::<Vec<_>>();
    for endpoint in ["account", "bills"] {
        let answered = lines("request answered");
        let line =
            answered.iter().find(|l| l.contains(&format!(" endpoint={endpoint} "))).unwrap_or_else(|| panic!("{log}"));
        assert!(
            line.contains("account=demo-1") && line.contains("outcome=success") && line.contains("duration_ms="),
            "{line}"
        );
    }
    let bills = lines("bill query answered");
    assert!(
        bills[0].contains("start_time: ") && bills[0].contains(" bills=") && bills[0].contains(" counted="),
        "{}",
        bills[0]
    );
}

#[test]
fn a_max_age_not_longer_than_the_poll_interval_is_warned_about_at_start() {
    let flags = ["--demo", "--demo.accounts", "1", "--data.max-age", "2s", "--poll.interval", "2s"];
    let exporter = Exporter::spawn(Exporter::command(&flags));
    let log = exporter.log();
    let warning = log.lines().find(|l| l.contains("--data.max-age 2s is not longer than the poll interval 2s"));
    assert!(warning.is_some_and(|l| l.contains("level=warn") && l.contains("max_age_seconds=2")), "{log}");
    let calm = Exporter::spawn(Exporter::command(&["--demo", "--demo.accounts", "1", "--data.max-age", "5s"]));
    assert!(!calm.log().contains("--data.max-age is not longer"), "{}", calm.log());
}
