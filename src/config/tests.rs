use super::*;
use std::collections::HashMap;

fn cli(args: &[&str]) -> Cli {
    let mut all = vec!["capi_exporter"];
    all.extend_from_slice(args);
    Cli::try_parse_from(all).unwrap()
}

fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name| map.get(name).cloned()
}

const KEYS: [(&str, &str); 3] = [("CAPI_API_KEY", "k"), ("CAPI_API_SECRET", "s"), ("CAPI_API_PASSPHRASE", "p")];

fn temp_file(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capi-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

#[test]
fn defaults_follow_the_documented_interface() {
    let config = Config::from_cli(&cli(&[]), &env_of(&KEYS)).unwrap();
    let Accounts::Exchange { base_url, accounts } = &config.accounts else { panic!("not demo") };
    assert_eq!(base_url, "https://api-contract.weex.com");
    assert_eq!(accounts[0].name, "default");
    assert_eq!(accounts[0].coin_ids, vec![2]);
    assert_eq!(accounts[0].credentials.secret.expose(), "s");
    assert_eq!(config.poll_interval, Duration::from_secs(15));
    assert_eq!(config.bills_overlap, Duration::from_secs(60));
    assert_eq!(config.bills_backfill, Duration::ZERO);
    assert_eq!(config.listen_addresses, ["[::]:10127"]);
    assert_eq!(config.telemetry_path, "/metrics");
    assert_eq!((config.ip_weight_budget, config.uid_weight_budget), (500, 500));
    assert_eq!(config.data_max_age, None);
}

#[test]
fn listen_addresses_are_taken_as_exporter_toolkit_takes_them() {
    let addresses = |args: &[&str]| Config::from_cli(&cli(args), &env_of(&KEYS)).map(|c| c.listen_addresses);
    let flags = ["--web.listen-address", ":9", "--web.listen-address", "localhost:10", "--web.listen-address"];
    let all = addresses(&[&flags[..], &["[::1]:11,127.0.0.1:12"]].concat()).unwrap();
    assert_eq!(all, ["[::]:9", "localhost:10", "[::1]:11", "127.0.0.1:12"]);
    for bad in ["10127", "host:port", ":70000", "a b:1", "[::1:1", "exa_mple:1", ""] {
        let error = addresses(&["--web.listen-address", bad]).unwrap_err().to_string();
        assert!(error.contains("is not an address; write it like :10127"), "{bad}: {error}");
    }
}

#[test]
fn missing_or_doubled_credentials_name_the_variable() {
    let error = Config::from_cli(&cli(&[]), &env_of(&KEYS[..2])).unwrap_err();
    assert!(error.to_string().starts_with("missing credentials: set CAPI_API_PASSPHRASE (each,"), "{error}");
    let error = Config::from_cli(&cli(&[]), &env_of(&KEYS[1..2])).unwrap_err();
    assert!(
        error.to_string().starts_with("missing credentials: set CAPI_API_KEY, CAPI_API_PASSPHRASE (each,"),
        "{error}"
    );
    let secret_file = temp_file("secret", "from-file\n");
    let mut vars = KEYS.to_vec();
    vars.push(("CAPI_API_SECRET_FILE", secret_file.to_str().unwrap()));
    let error = Config::from_cli(&cli(&[]), &env_of(&vars)).unwrap_err();
    assert!(matches!(error, ConfigError::AmbiguousCredential("CAPI_API_SECRET")), "{error}");
    vars.retain(|(k, _)| *k != "CAPI_API_SECRET");
    let config = Config::from_cli(&cli(&[]), &env_of(&vars)).unwrap();
    let Accounts::Exchange { accounts, .. } = config.accounts else { panic!() };
    assert_eq!(accounts[0].credentials.secret.expose(), "from-file");
}

#[test]
fn a_state_file_in_a_folder_that_does_not_exist_is_refused() {
    let state_file = |path: &str| Config::from_cli(&cli(&["--state.file", path]), &env_of(&KEYS)).map(|c| c.state_file);
    let folder = temp_file("marker", "").with_file_name("");
    let inside = folder.join("state.json");
    assert_eq!(state_file(inside.to_str().unwrap()).unwrap(), Some(inside.clone()));
    assert_eq!(state_file("state.json").unwrap(), Some(PathBuf::from("state.json")), "the working folder");
    let missing = folder.join("no-such-folder").join("state.json");
    let error = state_file(missing.to_str().unwrap()).unwrap_err().to_string();
    assert!(
        error.starts_with("--state.file ") && error.contains("no-such-folder does not exist; create it"),
        "{error}"
    );
}

#[test]
fn a_backfill_needs_a_state_file() {
    let backfill = |args: &[&str]| Config::from_cli(&cli(args), &env_of(&KEYS)).map(|c| c.bills_backfill);
    let error = backfill(&["--bills.backfill", "1h"]).unwrap_err().to_string();
    assert!(error.starts_with("--bills.backfill needs --state.file: without one, every start counts"), "{error}");
    let state = temp_file("marker", "").with_file_name("state.json");
    let with_state = ["--bills.backfill", "1h", "--state.file", state.to_str().unwrap()];
    assert_eq!(backfill(&with_state).unwrap(), Duration::from_secs(3_600));
}

#[test]
fn demo_needs_no_credentials() {
    let config = Config::from_cli(&cli(&["--demo"]), &env_of(&[])).unwrap();
    assert_eq!(config.accounts, Accounts::Demo { seed: 1, count: 2, coin_ids: vec![2] });
}

#[test]
fn bad_values_give_one_line_naming_the_flag() {
    let error = Config::from_cli(&cli(&["--web.listen-address", "nonsense"]), &env_of(&KEYS)).unwrap_err();
    assert!(error.to_string().contains("--web.listen-address"), "{error}");
    let bad = ["ftp://x", "https://x/prefix", "https://x?a=1", "https://u:p@x", "https://x#f", "https://"];
    for url in bad.into_iter().chain(["http://127.0.0.1:85069", "https://x:", "https://[::1]:99999"]) {
        let error = Config::from_cli(&cli(&["--api.base-url", url]), &env_of(&KEYS)).unwrap_err();
        assert!(error.to_string().contains("--api.base-url"), "{url}: {error}");
        assert!(!error.to_string().contains("u:p@"), "{error}");
    }
    for url in ["https://x", "https://x/", "http://127.0.0.1:8080", "https://[::1]:65535"] {
        assert!(Config::from_cli(&cli(&["--api.base-url", url]), &env_of(&KEYS)).is_ok(), "{url}");
    }
    let error = Config::from_cli(&cli(&["--api.account-name", "a b"]), &env_of(&KEYS)).unwrap_err();
    assert!(error.to_string().contains("account name"), "{error}");
    let parse = Cli::try_parse_from(["capi_exporter", "--poll.interval", "5x"]).unwrap_err().to_string();
    assert!(parse.contains("is not a duration"), "{parse}");
}

#[test]
fn files_an_editor_began_with_a_byte_order_mark_read_as_without_it() {
    let secret = temp_file("bom-secret", "\u{feff}secret\r\n");
    let yaml = format!(
        "\u{feff}accounts:\r\n  - name: a\r\n    credentials: {{api_key: {{env: K}}, secret: {{file: {}}}, passphrase: {{env: P}}}}\r\n",
        secret.display()
    );
    let path = temp_file("bom-accounts.yml", &yaml);
    let config = Config::from_cli(&cli(&["--config.file", path.to_str().unwrap()]), &env_of(&[("K", "k"), ("P", "p")]));
    let Accounts::Exchange { accounts, .. } = config.unwrap().accounts else { panic!() };
    assert_eq!(accounts[0].credentials.secret.expose(), "secret");
}

#[test]
fn the_yaml_file_lists_accounts_with_their_own_credentials() {
    let secret = temp_file("b-secret", "bsecret\n");
    let yaml = format!(
        "accounts:\n  - name: a\n    credentials:\n      api_key: {{env: A_KEY}}\n      secret: {{env: A_SECRET}}\n      passphrase: {{env: A_PASS}}\n  - name: b\n    coin_ids: [2, 1]\n    credentials:\n      api_key: {{env: B_KEY}}\n      secret: {{file: {}}}\n      passphrase: {{env: B_PASS}}\n",
        secret.display()
    );
    let path = temp_file("accounts.yml", &yaml);
    let env = env_of(&[("A_KEY", "ak"), ("A_SECRET", "as"), ("A_PASS", "ap"), ("B_KEY", "bk"), ("B_PASS", "bp")]);
    let config = Config::from_cli(&cli(&["--config.file", path.to_str().unwrap()]), &env).unwrap();
    let Accounts::Exchange { accounts, .. } = config.accounts else { panic!() };
    assert_eq!(accounts.len(), 2);
    assert_eq!(accounts[1].coin_ids, vec![1, 2]);
    assert_eq!(accounts[1].credentials.secret.expose(), "bsecret");
    assert_eq!(accounts[0].coin_ids, vec![2]);
}

#[test]
fn yaml_mistakes_name_the_file_and_the_account() {
    let path = temp_file("typo.yml", "accounts:\n  - name: a\n    coinids: [2]\n");
    let error =
        Config::from_cli(&cli(&["--config.file", path.to_str().unwrap()]), &env_of(&[])).unwrap_err().to_string();
    // The key is not repeated (under `credentials` it may be a credential), its place is.
    assert!(
        error.contains("typo.yml")
            && error.contains(
                "accounts[0]: unknown field, expected one of `name`, `coin_ids`, `credentials` at line 3 column 5"
            ),
        "{error}"
    );
    let path = temp_file("unset.yml", "accounts:\n  - name: a\n    credentials:\n      api_key: {env: NOPE}\n      secret: {env: NOPE}\n      passphrase: {env: NOPE}\n");
    let error =
        Config::from_cli(&cli(&["--config.file", path.to_str().unwrap()]), &env_of(&[])).unwrap_err().to_string();
    assert!(error.contains("account \"a\": api_key: the environment variable named for it is not set"), "{error}");
    let error = Config::from_cli(&cli(&["--config.file", "/nonexistent.yml"]), &env_of(&[])).unwrap_err().to_string();
    assert!(error.starts_with("config file /nonexistent.yml"), "{error}");
}

#[test]
fn a_credential_written_where_its_variable_or_file_belongs_is_not_repeated() {
    let env = env_of(&[("S", "s"), ("P", "p")]);
    let error_with_api_key = |api_key: &str| {
        let yaml = format!("accounts:\n  - name: a\n    credentials:\n      api_key: {api_key}\n      secret: {{env: S}}\n      passphrase: {{env: P}}\n");
        let path = temp_file("value-as-name.yml", &yaml);
        Config::from_cli(&cli(&["--config.file", path.to_str().unwrap()]), &env).unwrap_err().to_string()
    };
    let error = error_with_api_key("{env: \"3f9a+Kq0Zx\"}");
    assert!(
        error.ends_with("account \"a\": api_key: the environment variable named for it is not set, or empty"),
        "{error}"
    );
    // Credentials have the shape of variable names, and of paths, as often as not; and one
    // written inside the braces is a key that is no field.
    for (written, credential) in [
        ("{env: HUNTER2PASS}", "HUNTER2PASS"),
        ("{file: \"Tr0ub4dor.horse/staple\"}", "Tr0ub4dor"),
        ("{Tr0ub4dor.horse}", "Tr0ub4dor"),
        ("{file: a, Tr0ub4dor.horse}", "Tr0ub4dor"),
    ] {
        let error = error_with_api_key(written);
        let names_the_account = error.contains("account \"a\"") || error.contains("accounts[0]");
        assert!(!error.contains(credential) && names_the_account, "{written}: {error}");
    }
    for path in ["3f9a+Kq0Zx", "my.pass/2024", "/run/none/secret"] {
        let error = Config::from_cli(&cli(&[]), &env_of(&[("CAPI_API_SECRET_FILE", path), KEYS[0], KEYS[2]]))
            .unwrap_err()
            .to_string();
        assert_eq!(error, "cannot read the CAPI_API_SECRET_FILE file: No such file or directory");
    }
}

#[test]
fn the_telemetry_path_is_a_plain_path_the_server_does_not_use_otherwise() {
    let with = |path: &str| Config::from_cli(&cli(&["--web.telemetry-path", path]), &env_of(&KEYS));
    for good in ["/metrics", "/prometheus/metrics", "/capi.v2-metrics_~x"] {
        assert_eq!(with(good).unwrap().telemetry_path, good);
    }
    for bad in
        ["metrics", "/", "/-/healthy", "/-/ready", "/*", "/{x}", "/metrics/", "//metrics", "/me trics", "/a:b", ""]
    {
        let error = with(bad).map(drop).unwrap_err().to_string();
        assert!(error.contains("must be a plain path such as /metrics"), "{bad}: {error}");
    }
}

#[test]
fn the_locale_is_a_language_tag() {
    let with = |locale: &str| Config::from_cli(&cli(&["--api.locale", locale]), &env_of(&KEYS));
    assert_eq!(with("zh-CN").unwrap().locale, "zh-CN");
    for bad in ["en-US\r\nX-Injected: 1", "en US", "", &"x".repeat(36)] {
        let error = with(bad).map(drop).unwrap_err().to_string();
        assert!(error.contains("is not a language tag"), "{bad:?}: {error}");
    }
}

#[test]
fn coin_names_come_from_the_documentation_the_accounts_file_and_the_flag() {
    let env = env_of(&[("K", "k"), ("S", "s"), ("P", "p")]);
    let account = "  - name: main\n    credentials: {api_key: {env: K}, secret: {env: S}, passphrase: {env: P}}\n";
    let file = temp_file("coins.yml", &format!("accounts:\n{account}coin_names: {{1: BTC}}\n"));
    let with = |flags: &[&str]| {
        let args = [&["--config.file", file.to_str().unwrap()], flags].concat();
        Config::from_cli(&cli(&args), &env).map(|config| config.coins)
    };
    let coins = with(&["--api.coin-names", "5=ETH,1=BTC"]).unwrap();
    assert_eq!([coins.name(2), coins.name(1), coins.name(5)], [Some("USDT"), Some("BTC"), Some("ETH")]);
    for (flag, problem) in [
        ("1=XBT", "coin id 1 is named both \"BTC\" and \"XBT\""),
        ("7=USDT", "coin name \"USDT\" is given to coin ids 2 and 7"),
        ("0=USDT", "coin name \"USDT\" is given to coin ids 0 and 2"),
        ("5=BTC", "coin name \"BTC\" is given to coin ids 1 and 5"),
        ("7", "write each as ID=NAME"),
        ("x=BTC", "write each as ID=NAME"),
        ("7=B-T", "must be 1 to 16 letters and digits"),
        ("7=other", "coin name \"other\" is the bill counters' name for coins past their limit"),
    ] {
        let error = with(&["--api.coin-names", flag]).unwrap_err().to_string();
        assert!(error.contains(problem), "{flag}: {error}");
    }
    let bad_file = temp_file("bad-coins.yml", &format!("accounts:\n{account}coin_names: {{1: \"B T\"}}\n"));
    let args = ["--config.file", bad_file.to_str().unwrap()];
    let error = Config::from_cli(&cli(&args), &env).unwrap_err().to_string();
    assert!(error.contains("bad-coins.yml") && error.contains("coin_names"), "{error}");
}

#[test]
fn a_credential_written_into_the_file_is_refused_without_being_quoted() {
    for value in ["abcd-1234-secret", "'quoted-secret'", "123456789", "[list-secret]"] {
        let yaml = format!(
            "accounts:\n  - name: a\n    credentials:\n      api_key: {value}\n      secret: {{env: S}}\n      passphrase: {{env: P}}\n"
        );
        let error = parse_accounts(std::path::Path::new("a.yml"), &yaml, &[2], &env_of(&[])).unwrap_err().to_string();
        assert!(error.contains("{env: VARIABLE} or {file: PATH}") && error.contains("line 4"), "{error}");
        let bare = value.trim_matches(|c| c == '\'' || c == '[' || c == ']');
        assert!(!error.contains(bare), "{error}");
    }
    // Pasted as a key, twice.
    let yaml = "accounts:\n  - name: a\n    credentials:\n      api_key: {env: K}\n      secret:\n        dup-secret:\n        dup-secret:\n      passphrase: {env: P}\n";
    let error = parse_accounts(std::path::Path::new("a.yml"), yaml, &[2], &env_of(&[])).unwrap_err().to_string();
    assert!(error.contains("duplicate entry with key at line 6"), "{error}");
    assert!(!error.contains("dup-secret"), "{error}");
}

#[test]
fn a_key_or_passphrase_with_a_control_character_is_refused_at_start() {
    let env = env_of(&[("CAPI_API_KEY", "key\r"), ("CAPI_API_SECRET", "s\r"), ("CAPI_API_PASSPHRASE", "p")]);
    let error = Config::from_cli(&cli(&[]), &env).unwrap_err().to_string();
    assert!(error.starts_with("CAPI_API_KEY holds a control character"), "{error}");
    assert!(!error.contains("key\r"), "{error}");
    let yaml = "accounts:\n  - name: a\n    credentials:\n      api_key: {env: K}\n      secret: {env: S}\n      passphrase: {env: P}\n";
    let env = env_of(&[("K", "key"), ("S", "s"), ("P", "pass\u{7f}")]);
    let error = parse_accounts(std::path::Path::new("a.yml"), yaml, &[2], &env).unwrap_err().to_string();
    assert!(error.contains("account \"a\": passphrase holds a control character"), "{error}");
}

#[test]
fn a_credential_with_a_space_at_an_end_or_a_character_beyond_ascii_is_refused_at_start() {
    for (variable, value, problem) in [
        ("CAPI_API_KEY", "key ", "has a space at its start or end"),
        ("CAPI_API_PASSPHRASE", " pass", "has a space at its start or end"),
        (
            "CAPI_API_SECRET",
            "\u{feff}secret",
            "holds a character that is not ASCII (a byte-order mark an editor wrote, say)",
        ),
        ("CAPI_API_KEY", "kéy", "holds a character that is not ASCII (a byte-order mark an editor wrote, say)"),
        ("CAPI_API_SECRET", &"s".repeat(1025), "is longer than 1 KiB, which no credential of the exchange is"),
    ] {
        let mut given = vec![("CAPI_API_KEY", "key"), ("CAPI_API_SECRET", "secret"), ("CAPI_API_PASSPHRASE", "pass")];
        given.retain(|(name, _)| *name != variable);
        given.push((variable, value));
        let error = Config::from_cli(&cli(&[]), &env_of(&given)).unwrap_err().to_string();
        assert_eq!(error, format!("{variable} {problem}; write the credential without it"));
    }
    let inner_space = env_of(&[("CAPI_API_KEY", "key"), ("CAPI_API_SECRET", "s"), ("CAPI_API_PASSPHRASE", "a pass")]);
    assert!(Config::from_cli(&cli(&[]), &inner_space).is_ok(), "a space within a passphrase is its own");
    let yaml = "accounts:\n  - name: a\n    credentials:\n      api_key: {env: K}\n      secret: {env: S}\n      passphrase: {env: P}\n";
    let env = env_of(&[("K", "key\t"), ("S", "s"), ("P", "p")]);
    let error = parse_accounts(std::path::Path::new("a.yml"), yaml, &[2], &env).unwrap_err().to_string();
    assert!(error.contains("account \"a\": api_key holds a control character"), "{error}");
    let env = env_of(&[("K", "key"), ("S", "s"), ("P", "")]);
    let error = parse_accounts(std::path::Path::new("a.yml"), yaml, &[2], &env).unwrap_err().to_string();
    assert!(error.contains("passphrase: the environment variable named for it is not set, or empty"), "{error}");
}

#[test]
fn one_api_key_under_two_names_is_refused_without_repeating_it() {
    let yaml = "accounts:\n  - name: a\n    credentials: {api_key: {env: K}, secret: {env: S}, passphrase: {env: P}}\n  - name: b\n    coin_ids: [1]\n    credentials: {api_key: {env: K2}, secret: {env: S}, passphrase: {env: P}}\n";
    let path = temp_file("same-key.yml", yaml);
    let env = env_of(&[("K", "key-of-a"), ("K2", "key-of-a"), ("S", "s"), ("P", "p")]);
    let error = Config::from_cli(&cli(&["--config.file", path.to_str().unwrap()]), &env).unwrap_err().to_string();
    assert!(error.contains("accounts \"a\" and \"b\" have the same API key") && !error.contains("key-of-a"), "{error}");
    let env = env_of(&[("K", "key-of-a"), ("K2", "key-of-b"), ("S", "s"), ("P", "p")]);
    assert!(Config::from_cli(&cli(&["--config.file", path.to_str().unwrap()]), &env).is_ok());
}

#[test]
fn a_listen_address_given_twice_is_refused_as_such() {
    let error = Config::from_cli(&cli(&["--web.listen-address", ":9,127.0.0.1:9,[::]:9"]), &env_of(&KEYS)).unwrap_err();
    assert_eq!(error.to_string(), "--web.listen-address [::]:9 is given twice; give each address once");
}

#[test]
fn a_misshapen_accounts_file_is_described_in_its_own_words_not_rust_types() {
    for (yaml, expected) in [
        ("accounts:\n  - [1]\n", "accounts[0]: invalid type: sequence, expected an account: a map of name, coin_ids and credentials at line 2"),
        ("accounts:\n  - name: a\n    credentials: 5\n", "expected a map of api_key, secret and passphrase"),
    ] {
        let error = parse_accounts(std::path::Path::new("a.yml"), yaml, &[2], &env_of(&[])).unwrap_err().to_string();
        assert!(error.contains(expected) && !error.contains("struct"), "{error}");
    }
}
