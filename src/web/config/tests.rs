use super::*;
use crate::web::test_support::{cheap_hash, TempDir, TestPki};
use proptest::prelude::*;

fn parse(text: &str) -> Result<WebConfig, WebError> {
    WebConfig::parse(text, Path::new("/etc/exporter"))
}

fn problem(text: &str) -> String {
    parse(text).expect_err("should be rejected").to_string()
}

const TLS_FILES: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

#[test]
fn an_empty_file_asks_for_nothing() {
    for text in ["", "# only a comment\n", "{}", "tls_server_config:\nbasic_auth_users:\n"] {
        let config = parse(text).unwrap_or_else(|error| panic!("{text:?}: {error}"));
        assert!(!config.tls_enabled(), "{text:?}");
        assert!(!config.basic_auth_enabled(), "{text:?}");
        assert!(config.headers.is_empty());
        assert_eq!(config.rate_limit, None);
    }
}

#[test]
fn tls_settings_without_a_certificate_key_or_client_auth_leave_tls_off() {
    let config =
        parse("tls_server_config:\n  min_version: TLS13\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n").unwrap();
    assert!(!config.tls_enabled());
}

#[test]
fn a_full_exporter_toolkit_file_is_accepted() {
    let text = format!(
        "{TLS_FILES}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: /abs/ca.crt\n  \
         min_version: TLS12\n  max_version: TLS13\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n  \
         curve_preferences: [X25519, CurveP256]\n  prefer_server_cipher_suites: true\n  \
         client_allowed_sans: [scraper.example]\n\
         http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    \
         Strict-Transport-Security: max-age=31536000\n\
         rate_limit:\n  interval: 1s\n  burst: 5\n\
         basic_auth_users:\n  alice: {}\n",
        cheap_hash("secret")
    );
    let config = parse(&text).unwrap();
    let tls = config.tls.as_ref().unwrap();
    assert_eq!(tls.client_auth, ClientAuth::RequireAndVerifyClientCert);
    assert_eq!(tls.client_allowed_sans.as_deref(), Some(&["scraper.example".to_string()][..]));
    let debug = format!("{tls:?}");
    assert!(debug.contains("/etc/exporter/server.crt"), "relative paths join the config's folder: {debug}");
    assert!(debug.contains("/abs/ca.crt"), "absolute paths stay: {debug}");
    assert_eq!(config.headers.len(), 2);
    assert_eq!(config.rate_limit, Some(RateLimit { interval: std::time::Duration::from_secs(1), burst: 5 }));
    assert!(config.basic_auth_enabled());
    assert!(tls.prefer_server_cipher_suites);
    assert_eq!(tls.cipher_suites.as_deref(), Some(&["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_string()][..]));
    assert_eq!(tls.curve_preferences.as_ref().map(Vec::len), Some(2));
    assert!(config.warnings.is_empty(), "every suite and curve named is offered: {:?}", config.warnings);
}

#[test]
fn what_cannot_be_honoured_is_said_once_and_what_is_plain_is_quiet() {
    let config = parse(&format!(
        "{TLS_FILES}  min_version: TLS10
http_server_config:
  http2: true
"
    ))
    .unwrap();
    assert_eq!(
        config.warnings,
        [
            "tls_server_config.min_version TLS10 means TLS12 here: rustls speaks nothing older",
            "http_server_config.http2 is not honoured: this server speaks HTTP/1.1 only"
        ]
    );
    let plain = parse(&format!(
        "{TLS_FILES}  min_version: TLS12
  cipher_suites: []
  prefer_server_cipher_suites: false
"
    ))
    .unwrap();
    assert!(plain.warnings.is_empty(), "{:?}", plain.warnings);
    assert!(!plain.tls.unwrap().prefer_server_cipher_suites);
}

#[test]
fn users_of_different_bcrypt_costs_are_warned_of() {
    let (cheap, dearer) = (cheap_hash("x"), bcrypt::hash("y", 5).unwrap());
    let text = format!("basic_auth_users:\n  alice: '{cheap}'\n  bob: '{dearer}'\n");
    let config = WebConfig::parse(&text, Path::new("/")).unwrap();
    let warning = "basic_auth_users: the hashes have bcrypt costs from 4 to 5; a refused login of a user whose cost is lower is answered sooner, which tells that the user exists: hash every password with one cost";
    assert_eq!(config.warnings, [warning]);
    let same = WebConfig::parse(&format!("basic_auth_users:\n  alice: '{cheap}'\n  bob: '{cheap}'\n"), Path::new("/"));
    assert!(same.unwrap().warnings.is_empty());
}

#[test]
fn users_are_unique_and_free_of_colons() {
    let hash = cheap_hash("x");
    let twice = problem(&format!("basic_auth_users:\n  alice: '{hash}'\n  bob: '{hash}'\n  alice: '{hash}'\n"));
    assert!(twice.contains("user \"alice\" is listed twice"), "{twice}");
    let colon = problem(&format!("basic_auth_users:\n  'al:ice': '{hash}'\n"));
    assert!(colon.contains("the user name that begins \"al\" holds ':'") && !colon.contains("ice"), "{colon}");
}

#[test]
fn every_client_auth_type_is_understood() {
    let cases = [
        ("NoClientCert", ClientAuth::NoClientCert, false),
        ("RequestClientCert", ClientAuth::RequestClientCert, false),
        ("RequireAnyClientCert", ClientAuth::RequireAnyClientCert, false),
        ("RequireClientCert", ClientAuth::RequireAnyClientCert, false),
        ("VerifyClientCertIfGiven", ClientAuth::VerifyClientCertIfGiven, true),
        ("RequireAndVerifyClientCert", ClientAuth::RequireAndVerifyClientCert, true),
    ];
    for (name, expected, needs_ca) in cases {
        let ca = if needs_ca { "  client_ca_file: ca.crt\n" } else { "" };
        let config = parse(&format!("{TLS_FILES}  client_auth_type: {name}\n{ca}")).unwrap();
        assert_eq!(config.tls.unwrap().client_auth, expected, "{name}");
    }
}

#[test]
fn client_auth_rules_of_exporter_toolkit_hold() {
    let unknown = problem(&format!("{TLS_FILES}  client_auth_type: Sometimes\n"));
    assert!(unknown.contains("client_auth_type") && unknown.contains("Sometimes"), "{unknown}");
    let ca_without_auth = problem(&format!("{TLS_FILES}  client_ca_file: ca.crt\n"));
    assert!(ca_without_auth.contains("without a Client Auth Policy"), "{ca_without_auth}");
    let verify_without_ca = problem(&format!("{TLS_FILES}  client_auth_type: RequireAndVerifyClientCert\n"));
    assert!(verify_without_ca.contains("client_ca_file"), "{verify_without_ca}");
    let sans_with_optional_cert = problem(&format!(
        "{TLS_FILES}  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n  client_allowed_sans: [a]\n"
    ));
    assert!(sans_with_optional_cert.contains("client_allowed_sans"), "{sans_with_optional_cert}");
}

#[test]
fn certificate_and_key_must_both_be_named() {
    let no_key = problem("tls_server_config:\n  cert_file: server.crt\n");
    assert_eq!(no_key, "web config: tls_server_config: missing one of key or key_file");
    let no_cert = problem("tls_server_config:\n  key_file: server.key\n");
    assert!(no_cert.contains("missing one of cert or cert_file"), "{no_cert}");
    let empty_names = problem("tls_server_config:\n  cert_file: ''\n  key_file: server.key\n");
    assert!(empty_names.contains("missing one of cert or cert_file"), "{empty_names}");
}

#[test]
fn tls_versions_are_checked() {
    let old_floor = parse(&format!("{TLS_FILES}  min_version: TLS10\n")).unwrap();
    assert_eq!(old_floor.tls.unwrap().min_version, TlsVersion::Tls12);
    for (text, expected) in [
        ("  max_version: TLS11\n", "below TLS12"),
        ("  min_version: TLS14\n", "unknown TLS version \"TLS14\""),
        ("  min_version: TLS13\n  max_version: TLS12\n", "min_version is above max_version"),
    ] {
        let error = problem(&format!("{TLS_FILES}{text}"));
        assert!(error.contains(expected), "{text}: {error}");
    }
}

#[test]
fn bad_yaml_is_one_line_naming_the_problem() {
    let error = problem("tls_server_config: [unclosed\n");
    assert!(error.starts_with("web config: "), "{error}");
    assert!(!error.contains('\n'), "{error}");
    let wrong_type = problem("basic_auth_users: [alice]\n");
    assert!(wrong_type.contains("basic_auth_users"), "{wrong_type}");
}

#[test]
fn unknown_keys_are_rejected_at_every_level() {
    for (text, key) in [
        ("tls_config:\n  cert_file: x\n", "tls_config"),
        ("tls_server_config:\n  certfile: x\n", "certfile"),
        ("http_server_config:\n  header:\n    X-Frame-Options: deny\n", "header"),
        ("rate_limit:\n  every: 1s\n", "every"),
    ] {
        let error = problem(text);
        assert!(error.contains("unknown field") && error.contains(key), "{text}: {error}");
    }
}

#[test]
fn only_exporter_toolkit_headers_and_values_are_allowed() {
    let other = problem("http_server_config:\n  headers:\n    Server: mine\n");
    assert!(other.contains("\"Server\" can not be configured"), "{other}");
    let bad_value = problem("http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n");
    assert!(bad_value.contains("X-Content-Type-Options"), "{bad_value}");
    let control = problem("http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\nb\"\n");
    assert!(control.contains("not a valid header value"), "{control}");
    let blank = parse("http_server_config:\n  headers:\n    X-XSS-Protection: ''\n").unwrap();
    assert!(blank.headers.is_empty(), "a blank free-form header is unset");
}

#[test]
fn a_password_that_is_not_a_bcrypt_hash_is_rejected_without_showing_it() {
    let secret_looking = "$2y$10$thisisnotavalidbcrypthashatalltoolongorshort";
    for hash in [secret_looking, "plaintext-password", "$2x$04$abcdefghijklmnopqrstuuVUrPmXD6q/Nwu2hGVk5KHLRVGc8hkJC"] {
        let error = problem(&format!("basic_auth_users:\n  alice: '{hash}'\n"));
        assert!(error.contains("\"alice\"") && error.contains("not a bcrypt hash"), "{error}");
        assert!(!error.contains(hash), "{error}");
    }
    let impossible = cheap_hash("x").replacen("$04$", "$32$", 1);
    assert!(problem(&format!("basic_auth_users:\n  alice: '{impossible}'\n")).contains("above the 12 accepted"));
    let too_costly = cheap_hash("x").replacen("$04$", "$13$", 1);
    let error = problem(&format!("basic_auth_users:\n  alice: '{too_costly}'\n"));
    assert!(error.contains("has cost 13, above the 12 accepted") && !error.contains(&too_costly[7..]), "{error}");
}

#[test]
fn every_bcrypt_prefix_that_exporters_write_is_accepted() {
    let hash = cheap_hash("secret");
    for prefix in ["$2a$", "$2b$", "$2y$"] {
        let text = format!("basic_auth_users:\n  alice: '{prefix}{}'\n", &hash[4..]);
        assert!(parse(&text).unwrap().basic_auth_enabled(), "{prefix}");
    }
}

#[test]
fn rate_limit_follows_go_durations() {
    assert_eq!(parse("rate_limit:\n  interval: 0s\n  burst: 0\n").unwrap().rate_limit, None);
    assert_eq!(parse("rate_limit:\n  burst: 3\n").unwrap().rate_limit, None);
    let nanos = parse("rate_limit:\n  interval: 1000000\n  burst: 1\n").unwrap().rate_limit.unwrap();
    assert_eq!(nanos.interval, std::time::Duration::from_millis(1));
    assert!(problem("rate_limit:\n  interval: 1s\n").contains("rate_limit.burst"));
    assert!(problem("rate_limit:\n  interval: soon\n  burst: 1\n").contains("rate_limit.interval"));
}

#[test]
fn debug_output_shows_no_hash_and_no_inline_key() {
    let hash = cheap_hash("secret");
    let text = format!(
        "tls_server_config:\n  cert: inline-cert\n  key: TOP-SECRET-KEY\nbasic_auth_users:\n  alice: '{hash}'\n"
    );
    let debug = format!("{:?}", parse(&text).unwrap());
    assert!(debug.contains("alice"), "{debug}");
    assert!(!debug.contains(&hash[7..]) && !debug.contains("TOP-SECRET-KEY"), "{debug}");
}

#[test]
fn load_names_the_file_in_every_error() {
    let dir = TempDir::new();
    let missing = dir.path().join("absent.yml");
    let error = WebConfig::load(&missing).unwrap_err().to_string();
    assert_eq!(error, format!("web config {}: cannot read it: No such file or directory", missing.display()));

    let bad = dir.write("bad.yml", "nonsense: true\n");
    let error = WebConfig::load(&bad).unwrap_err().to_string();
    assert!(error.starts_with(&format!("web config {}: ", bad.display())) && error.contains("nonsense"), "{error}");
}

#[test]
fn load_reads_the_certificates_so_a_missing_one_fails_at_start() {
    let dir = TempDir::new();
    let path = dir.write("web.yml", TLS_FILES);
    let error = WebConfig::load(&path).unwrap_err().to_string();
    assert_eq!(
        error,
        format!(
            "web config {}: tls_server_config.cert_file: cannot read server.crt: No such file or directory",
            path.display()
        )
    );
    TestPki::new().write_server_files(&dir);
    let config = WebConfig::load(&path).unwrap();
    assert!(config.tls_enabled());
    assert_eq!(config.file(), Some(path.as_path()));
}

#[test]
fn load_takes_paths_relative_to_the_config_file_not_the_working_directory() {
    let dir = TempDir::new();
    TestPki::new().write_server_files(&dir);
    std::fs::create_dir(dir.path().join("conf")).unwrap();
    let path = dir.write("conf/web.yml", "tls_server_config:\n  cert_file: ../server.crt\n  key_file: ../server.key\n");
    assert!(WebConfig::load(&path).unwrap().tls_enabled());
}

#[test]
fn hostile_yaml_is_refused_without_hanging() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(parse(&deep).is_err());
    let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        let previous = format!("*{}", "a".repeat(level));
        laughs.push_str(&format!(
            "{}: &{} [{}]\n",
            "a".repeat(level + 1),
            "a".repeat(level + 1),
            vec![previous; 10].join(", ")
        ));
    }
    assert!(parse(&laughs).is_err());
    assert!(parse("\u{0}\u{feff}\t: :").is_err());
}

/// A valid file to mutate in the property tests below.
const SEED: &str =
    "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_auth_type: RequireAndVerifyClientCert\n  \
    client_ca_file: ca.crt\n  client_allowed_sans: [x]\n  min_version: TLS12\nhttp_server_config:\n  headers:\n    \
    X-Frame-Options: deny\nrate_limit:\n  interval: 1.5s\n  burst: 2\nbasic_auth_users:\n  \
    u: $2y$04$abcdefghijklmnopqrstuuVUrPmXD6q/Nwu2hGVk5KHLRVGc8hkJC\n";

proptest! {
    #[test]
    fn parse_never_panics_on_any_text(text in "\\PC{0,200}") {
        let _ = parse(&text);
    }

    #[test]
    fn parse_never_panics_on_a_damaged_valid_file(position in 0usize..1000, replacement in "\\PC{0,4}") {
        let mut text = SEED.to_string();
        let mut index = position % text.len();
        while !text.is_char_boundary(index) {
            index -= 1;
        }
        text.replace_range(index..(index + 1).min(text.len()), &replacement);
        let _ = parse(&text);
    }
}

#[test]
fn users_written_as_one_string_are_refused_without_quoting_the_hash() {
    let error = problem("basic_auth_users: \"admin: $2y$10$secrethashsecrethash\"\n");
    assert!(error.contains("a map of user names to bcrypt hashes"), "{error}");
    assert!(!error.contains("secrethash"), "{error}");
}
