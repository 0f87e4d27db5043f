use super::*;
use crate::web::test_support::{TempDir, TestPki};
use crate::web::WebConfig;
use rustls::ProtocolVersion;

/// The rustls configuration for a web config text whose files are in `dir`.
fn build(dir: &TempDir, text: &str) -> Result<Arc<ServerConfig>, String> {
    let config = WebConfig::parse(text, dir.path()).map_err(|error| error.to_string())?;
    let tls = config.server_tls().map_err(|error| error.to_string())?;
    Ok(tls.expect("TLS is on").loaded_config())
}

fn settings(dir: &TempDir, text: &str) -> TlsSettings {
    WebConfig::parse(text, dir.path()).unwrap().tls.expect("TLS is on")
}

/// The client certificate verifier the settings in `text` build.
fn verifier(dir: &TempDir, text: &str) -> Arc<dyn ClientCertVerifier> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    settings(dir, text).client_verifier(&provider).unwrap()
}

fn dir_with_pki() -> TempDir {
    let dir = TempDir::new();
    TestPki::new().write_server_files(&dir);
    dir
}

const FILES: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

#[test]
fn every_client_auth_type_builds_a_verifier_that_asks_as_go_does() {
    let dir = dir_with_pki();
    for (name, offers, mandatory) in [
        ("NoClientCert", false, false),
        ("RequestClientCert", true, false),
        ("RequireAnyClientCert", true, true),
        ("VerifyClientCertIfGiven", true, false),
        ("RequireAndVerifyClientCert", true, true),
    ] {
        let ca = if name == "NoClientCert" { "" } else { "  client_ca_file: ca.crt\n" };
        let text = format!("{FILES}  client_auth_type: {name}\n{ca}");
        let verifier = verifier(&dir, &text);
        assert_eq!(verifier.offer_client_auth(), offers, "{name}");
        assert_eq!(offers && verifier.client_auth_mandatory(), mandatory, "{name}");
        build(&dir, &text).unwrap_or_else(|error| panic!("{name}: {error}"));
    }
}

#[test]
fn a_client_ca_named_is_read_even_where_it_verifies_nothing() {
    let dir = dir_with_pki();
    dir.write("empty.crt", "");
    for name in ["RequestClientCert", "RequireAnyClientCert"] {
        let error =
            build(&dir, &format!("{FILES}  client_auth_type: {name}\n  client_ca_file: missing.crt\n")).unwrap_err();
        assert!(error.contains("missing.crt"), "{name}: {error}");
        let error =
            build(&dir, &format!("{FILES}  client_auth_type: {name}\n  client_ca_file: empty.crt\n")).unwrap_err();
        assert!(error.contains("empty.crt"), "{name}: {error}");
    }
}

#[test]
fn cipher_suites_and_curves_narrow_what_is_offered_for_tls_1_2() {
    let dir = dir_with_pki();
    let offered = |text: &str| {
        let config = build(&dir, &format!("{FILES}{text}")).unwrap();
        let provider = config.crypto_provider().clone();
        let suites: Vec<&str> = provider.cipher_suites.iter().filter_map(|s| s.suite().as_str()).collect();
        let groups: Vec<NamedGroup> = provider.kx_groups.iter().map(|group| group.name()).collect();
        (suites.into_iter().map(str::to_owned).collect::<Vec<_>>(), groups)
    };
    let (all_suites, all_groups) = offered("");
    let named = "  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n";
    let (suites, groups) = offered(&format!("{named}  curve_preferences: [CurveP384, CurveP521, X25519]\n"));
    let tls13: Vec<String> = all_suites.iter().filter(|s| s.starts_with("TLS13_")).cloned().collect();
    assert_eq!(suites, [&tls13[..], &["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".to_string()]].concat());
    assert_eq!(groups, [NamedGroup::secp384r1, NamedGroup::X25519], "in the order named, P-521 left out");
    assert!(all_groups.len() > 2 && all_suites.len() > suites.len());
    // Only suites rustls lacks: nothing would be left for TLS 1.2.
    let error = build(&dir, &format!("{FILES}  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n")).unwrap_err();
    assert!(error.contains("cipher_suites: none of them is a TLS 1.2 suite rustls speaks"), "{error}");
    let tls13_only = format!("{FILES}  min_version: TLS13\n  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n");
    assert!(build(&dir, &tls13_only).is_ok(), "TLS 1.3 suites are not Go's to choose");
    let error = build(&dir, &format!("{FILES}  curve_preferences: [CurveP521]\n")).unwrap_err();
    assert!(error.contains("curve_preferences: none of them is a curve rustls speaks"), "{error}");
}

#[test]
fn allowed_sans_keep_the_inner_verifier_rules() {
    let dir = dir_with_pki();
    let text = format!(
        "{FILES}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  client_allowed_sans: [a]\n"
    );
    let verifier = verifier(&dir, &text);
    assert!(verifier.client_auth_mandatory());
    assert!(!verifier.root_hint_subjects().is_empty(), "the CA is hinted to clients");
    build(&dir, &text).unwrap();
}

#[test]
fn versions_follow_min_and_max() {
    let dir = dir_with_pki();
    let versions = |extra: &str| {
        let versions = settings(&dir, &format!("{FILES}{extra}")).protocol_versions();
        versions.iter().map(|version| version.version).collect::<Vec<_>>()
    };
    assert_eq!(versions(""), [ProtocolVersion::TLSv1_2, ProtocolVersion::TLSv1_3]);
    assert_eq!(versions("  min_version: TLS13\n"), [ProtocolVersion::TLSv1_3]);
    assert_eq!(versions("  max_version: TLS12\n"), [ProtocolVersion::TLSv1_2]);
    build(&dir, &format!("{FILES}  max_version: TLS12\n")).unwrap();
}

/// A certificate for a fixture key given in PKCS#8, with the key written in another encoding.
fn build_with_key(pkcs8: &str, other_encoding: &str) -> Result<Arc<ServerConfig>, String> {
    let key = rcgen::KeyPair::from_pem(pkcs8).expect("fixture key");
    let certificate = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap().self_signed(&key).unwrap();
    let dir = TempDir::new();
    dir.write("server.crt", &certificate.pem());
    dir.write("server.key", other_encoding);
    build(&dir, FILES)
}

#[test]
fn keys_load_in_pkcs8_pkcs1_and_sec1() {
    let rsa_pkcs8 = include_str!("testdata/rsa_pkcs8.pem");
    let ec_pkcs8 = include_str!("testdata/ec_pkcs8.pem");
    build_with_key(rsa_pkcs8, rsa_pkcs8).expect("RSA in PKCS#8");
    build_with_key(rsa_pkcs8, include_str!("testdata/rsa_pkcs1.pem")).expect("RSA in PKCS#1");
    build_with_key(ec_pkcs8, ec_pkcs8).expect("EC in PKCS#8");
    build_with_key(ec_pkcs8, include_str!("testdata/ec_sec1.pem")).expect("EC in SEC1");
}

#[test]
fn a_key_that_does_not_fit_the_certificate_is_named() {
    let error =
        build_with_key(include_str!("testdata/ec_pkcs8.pem"), include_str!("testdata/rsa_pkcs1.pem")).unwrap_err();
    assert!(error.contains("the key in server.key does not fit the certificate in server.crt"), "{error}");
}

#[test]
fn a_key_of_a_kind_rustls_does_not_serve_is_not_called_a_misfit() {
    let dir = TempDir::new();
    dir.write("server.crt", include_str!("testdata/p521.crt"));
    dir.write("server.key", include_str!("testdata/p521_pkcs8.pem"));
    let error = build(&dir, FILES).unwrap_err();
    assert!(error.contains("the key in server.key is of a kind rustls does not serve"), "{error}");
}

#[test]
fn a_broken_key_file_shows_none_of_its_content() {
    let dir = dir_with_pki();
    for content in [
        "-----BEGIN PRIVATE KEY-----\nSECRET-MATERIAL\n-----END PRIVATE KEY-----\n",
        "-----BEGIN PRIVATE KEY-----\nSECRET-MATERIAL\n",
        "SECRET-MATERIAL",
        "",
    ] {
        dir.write("server.key", content);
        let error = build(&dir, FILES).unwrap_err();
        assert!(error.contains("key_file: no unencrypted PEM private key"), "{error}");
        assert!(!error.contains("SECRET-MATERIAL"), "{error}");
    }
}

#[test]
fn certificate_and_ca_files_need_certificates() {
    let dir = dir_with_pki();
    dir.write("empty.crt", "");
    let error = build(&dir, "tls_server_config:\n  cert_file: empty.crt\n  key_file: server.key\n").unwrap_err();
    assert!(error.contains("cert_file: no PEM CERTIFICATE in empty.crt"), "{error}");
    let error =
        build(&dir, &format!("{FILES}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: empty.crt\n"))
            .unwrap_err();
    assert!(error.contains("client_ca_file: no PEM CERTIFICATE in empty.crt"), "{error}");
    let error =
        build(&dir, &format!("{FILES}  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: gone.crt\n"))
            .unwrap_err();
    assert!(error.contains("client_ca_file: cannot read gone.crt: No such file or directory"), "{error}");
}

#[test]
fn inline_certificate_key_and_ca_work_like_files() {
    let pki = TestPki::new();
    let indent = |pem: &str| pem.lines().map(|line| format!("    {line}\n")).collect::<String>();
    let text = format!(
        "tls_server_config:\n  cert: |\n{}  key: |\n{}  client_ca: |\n{}  client_auth_type: RequireAndVerifyClientCert\n",
        indent(&pki.server_cert),
        indent(&pki.server_key),
        indent(&pki.ca)
    );
    let dir = TempDir::new();
    build(&dir, &text).unwrap();
    assert!(verifier(&dir, &text).client_auth_mandatory());
}

fn certificate_with(names: Vec<rcgen::SanType>) -> Vec<u8> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.subject_alt_names = names;
    params.self_signed(&rcgen::KeyPair::generate().unwrap()).unwrap().der().to_vec()
}

#[test]
fn sans_match_exactly_and_ips_as_addresses() {
    let certificate = certificate_with(vec![
        rcgen::SanType::DnsName("scraper.example".try_into().unwrap()),
        rcgen::SanType::Rfc822Name("ops@example.com".try_into().unwrap()),
        rcgen::SanType::URI("spiffe://example/scraper".try_into().unwrap()),
        rcgen::SanType::IpAddress("::1".parse().unwrap()),
        rcgen::SanType::IpAddress("10.0.0.7".parse().unwrap()),
    ]);
    let allows = |allowed: &str| certificate_allows(&certificate, &[allowed.to_string()]).unwrap();
    assert!(allows("scraper.example"));
    assert!(allows("ops@example.com"));
    assert!(allows("spiffe://example/scraper"));
    assert!(allows("0:0:0:0:0:0:0:1"));
    assert!(allows("10.0.0.7"));
    assert!(allows("::ffff:10.0.0.7"));
    assert!(!allows("SCRAPER.example"));
    assert!(!allows("other.example"));
    assert!(!allows("10.0.0.8"));
}

#[test]
fn a_certificate_without_names_allows_none_and_a_broken_one_is_unreadable() {
    let allowed = ["a.example".to_string()];
    assert_eq!(certificate_allows(&certificate_with(Vec::new()), &allowed), Some(false));
    let certificate = certificate_with(vec![rcgen::SanType::DnsName("a.example".try_into().unwrap())]);
    assert_eq!(certificate_allows(&certificate, &allowed), Some(true));
    assert_eq!(certificate_allows(&certificate[..certificate.len() / 2], &allowed), None);
    assert_eq!(certificate_allows(b"", &allowed), None);
}
