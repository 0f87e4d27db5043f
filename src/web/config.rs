//! The web configuration file of Prometheus's exporter-toolkit (docs/web-configuration.md), parsed
//! strictly like its `yaml.UnmarshalStrict`: unknown keys are errors.
//!
//! `tls_server_config.cipher_suites` (Go's names, for TLS 1.2 as in Go) and `curve_preferences`
//! narrow what rustls offers. Keys accepted but not honoured as written, each with a warning at
//! start and by `--config.check` ([`WebConfig::warnings`]):
//! - suites and curves named that rustls does not implement (CBC, RSA key exchange, P-521): not
//!   offered;
//! - `min_version: TLS10` or `TLS11` means TLS 1.2, the oldest version rustls speaks;
//! - `http_server_config.http2: true`: this server speaks HTTP/1.1 only, which every scraper
//!   speaks.
//!
//! `prefer_server_cipher_suites` is honoured (by default the server's order, as in Go). User
//! names must be unique and free of `:`, which Basic auth cannot carry.

use super::auth::PasswordHash;
use super::rate_limit::RateLimit;
use super::tls::{
    curves_not_offered, suites_not_offered, ClientAuth, PemSource, ServerTls, TlsSettings, TlsVersion,
    GO_CIPHER_SUITES, GO_CURVES,
};
use super::WebError;
use crate::duration::parse_go;
use crate::files::without_quoted_value;
use axum::http::{HeaderName, HeaderValue};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A validated web configuration. Reading the certificates and keys it names happens in
/// [`WebConfig::load`] and again when [`super::serve()`] starts, never in [`WebConfig::parse`].
/// Its Debug output shows no password hash and no inline key: their own Debug hides them.
#[derive(Clone, Debug)]
pub struct WebConfig {
    file: Option<PathBuf>,
    pub(super) tls: Option<TlsSettings>,
    pub(super) headers: Vec<(HeaderName, HeaderValue)>,
    pub(super) users: BTreeMap<String, PasswordHash>,
    pub(super) rate_limit: Option<RateLimit>,
    /// What the file asks for that is not honoured as written, one line each, to log at start.
    pub(super) warnings: Vec<String>,
}

impl WebConfig {
    /// Reads, parses and validates the file, and loads the TLS certificates and keys it names so
    /// that a broken setup fails at start. Relative paths in it are relative to its folder.
    pub fn load(path: &Path) -> Result<WebConfig, WebError> {
        let text = crate::files::read_config_text(path)
            .map_err(|error| WebError::config(format!("cannot read it: {error}")).in_file(path))?;
        let base_dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut config = WebConfig::parse(&text, base_dir).map_err(|error| error.in_file(path))?;
        config.file = Some(path.to_path_buf());
        config.server_tls()?;
        Ok(config)
    }

    /// Parses and validates the text of a web configuration; relative paths in it are taken
    /// relative to `base_dir`. Reads no file, and never panics, whatever the text.
    pub fn parse(text: &str, base_dir: &Path) -> Result<WebConfig, WebError> {
        crate::files::check_yaml_nesting(text).map_err(WebError::config)?;
        let raw: Option<RawConfig> =
            serde_yaml_ng::from_str(text).map_err(|error| WebError::config(without_quoted_value(error)))?;
        let raw = raw.unwrap_or_default();
        let mut warnings = Vec::new();
        if let Some(tls) = &raw.tls_server_config {
            warnings.extend(tls_warnings(tls));
        }
        if raw.http_server_config.as_ref().and_then(|http| http.http2) == Some(true) {
            warnings.push("http_server_config.http2 is not honoured: this server speaks HTTP/1.1 only".into());
        }
        let users = users(raw.basic_auth_users.unwrap_or_default().0)?;
        warnings.extend(cost_warning(&users));
        Ok(WebConfig {
            file: None,
            tls: raw.tls_server_config.map(|tls| tls_settings(tls, base_dir)).transpose()?.flatten(),
            headers: headers(raw.http_server_config.and_then(|http| http.headers).unwrap_or_default())?,
            users,
            rate_limit: raw.rate_limit.map(rate_limit).transpose()?.flatten(),
            warnings,
        })
    }

    /// The file this configuration was loaded from, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Whether connections must speak TLS.
    pub fn tls_enabled(&self) -> bool {
        self.tls.is_some()
    }

    /// What the file asks for that is not honoured as written, one line each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Whether requests need a user and password.
    pub fn basic_auth_enabled(&self) -> bool {
        !self.users.is_empty()
    }

    /// Loads the certificate and key files as they are now; `None` when the configuration asks
    /// for no TLS.
    pub(super) fn server_tls(&self) -> Result<Option<ServerTls>, WebError> {
        let Some(tls) = &self.tls else { return Ok(None) };
        let located = |problem: String| WebError::Config { file: self.file.clone(), problem };
        ServerTls::load(tls.clone()).map(Some).map_err(located)
    }
}

/// The file as written; no Debug, as it holds password hashes and possibly a key.
#[derive(Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a map of tls_server_config, http_server_config, basic_auth_users and rate_limit"
)]
struct RawConfig {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    rate_limit: Option<RawRateLimit>,
    basic_auth_users: Option<Entries>,
}

/// A YAML map's entries in order, repeated keys included (a map type would keep the last).
#[derive(Default)]
struct Entries(Vec<(String, String)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of user names to bcrypt hashes")
            }
            /// Not quoted back, as the default would: it may be a hash, which is a secret.
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Entries, E> {
                Err(E::custom("expected a map of user names to bcrypt hashes, not a string"))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map of tls_server_config's settings")]
struct RawTls {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    // Accepted for compatibility, with a warning: see the module documentation.
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    min_version: Option<String>,
    max_version: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map of http_server_config's settings")]
struct RawHttp {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map of interval and burst")]
struct RawRateLimit {
    interval: Option<RawDuration>,
    burst: Option<u32>,
}

/// Go's YAML decoder takes a duration as text (`1s`) or as an integer count of nanoseconds.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawDuration {
    Nanoseconds(u64),
    Text(String),
}

/// An empty string counts as absent, as Go's zero value does.
fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|text| !text.is_empty())
}

/// The `tls_server_config` section; `None` when it sets none of the keys that turn TLS on.
fn tls_settings(raw: RawTls, base_dir: &Path) -> Result<Option<TlsSettings>, WebError> {
    let (cert, key, client_ca) = (non_empty(raw.cert), non_empty(raw.key), non_empty(raw.client_ca));
    let (cert_file, key_file) = (non_empty(raw.cert_file), non_empty(raw.key_file));
    let (client_ca_file, client_auth_type) = (non_empty(raw.client_ca_file), non_empty(raw.client_auth_type));
    let enabled = [&cert, &key, &client_ca, &cert_file, &key_file, &client_ca_file, &client_auth_type]
        .iter()
        .any(|value| value.is_some());
    if !enabled {
        return Ok(None);
    }
    let problem = |text: String| WebError::config(format!("tls_server_config: {text}"));
    // A file wins over inline text, as in exporter-toolkit.
    let certificate = PemSource::pick("cert", cert_file, cert, base_dir)
        .ok_or_else(|| problem("missing one of cert or cert_file".into()))?;
    let key = PemSource::pick("key", key_file, key, base_dir)
        .ok_or_else(|| problem("missing one of key or key_file".into()))?;
    let client_ca = PemSource::pick("client_ca", client_ca_file, client_ca, base_dir);
    let client_auth = client_auth(client_auth_type.as_deref())?;
    let min_version = version("min_version", raw.min_version, TlsVersion::Tls12)?;
    let max_version = version("max_version", raw.max_version, TlsVersion::Tls13)?;
    let settings = TlsSettings {
        certificate,
        key,
        client_ca,
        client_auth,
        min_version,
        max_version,
        client_allowed_sans: raw.client_allowed_sans,
        // Go's default: the server's order of preference.
        prefer_server_cipher_suites: raw.prefer_server_cipher_suites.unwrap_or(true),
        cipher_suites: go_names(
            "cipher_suites",
            raw.cipher_suites,
            &GO_CIPHER_SUITES,
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        )?,
        curve_preferences: go_names(
            "curve_preferences",
            raw.curve_preferences,
            &GO_CURVES.map(|(name, _)| name),
            "X25519",
        )?,
    };
    settings.check().map_err(problem)?;
    Ok(Some(settings))
}

/// Names as Go knows them, or an error naming the first it does not (as exporter-toolkit refuses
/// an unknown cipher or curve).
fn go_names(
    field: &str,
    names: Option<Vec<String>>,
    known: &[&str],
    example: &str,
) -> Result<Option<Vec<String>>, WebError> {
    if let Some(unknown) = names.iter().flatten().find(|name| !known.contains(&name.as_str())) {
        return Err(WebError::config(format!(
            "tls_server_config.{field}: unknown name {unknown:?}; use Go's names, such as {example}"
        )));
    }
    Ok(names)
}

/// What a TLS section asks for that rustls cannot do as written.
fn tls_warnings(raw: &RawTls) -> Vec<String> {
    let mut warnings = Vec::new();
    let named = |names: &Option<Vec<String>>| names.clone().unwrap_or_default();
    let suites = named(&raw.cipher_suites);
    let curves = named(&raw.curve_preferences);
    for (field, not_offered) in
        [("cipher_suites", suites_not_offered(&suites)), ("curve_preferences", curves_not_offered(&curves))]
    {
        if !not_offered.is_empty() {
            warnings.push(format!(
                "tls_server_config.{field}: {} not offered: rustls does not implement them",
                not_offered.join(", ")
            ));
        }
    }
    if let Some(old @ ("TLS10" | "TLS11")) = raw.min_version.as_deref() {
        warnings.push(format!("tls_server_config.min_version {old} means TLS12 here: rustls speaks nothing older"));
    }
    warnings
}

fn client_auth(name: Option<&str>) -> Result<ClientAuth, WebError> {
    let Some(name) = name else { return Ok(ClientAuth::NoClientCert) };
    ClientAuth::from_name(name).ok_or_else(|| {
        let known = ClientAuth::NAMES.map(|(known, _)| known).join(", ");
        WebError::config(format!("tls_server_config.client_auth_type: unknown value {name:?}; use one of {known}"))
    })
}

/// A TLS version by Go's name. TLS 1.0 and 1.1 map to 1.2: rustls speaks nothing older, and a
/// floor set that low still admits every client that speaks 1.2 or 1.3.
fn version(field: &str, name: Option<String>, default: TlsVersion) -> Result<TlsVersion, WebError> {
    match name.as_deref() {
        None | Some("") => Ok(default),
        Some("TLS10" | "TLS11") if field == "min_version" => Ok(TlsVersion::Tls12),
        Some("TLS10" | "TLS11") => {
            Err(WebError::config(format!("tls_server_config.{field}: TLS versions below TLS12 are not supported")))
        }
        Some("TLS12") => Ok(TlsVersion::Tls12),
        Some("TLS13") => Ok(TlsVersion::Tls13),
        Some(other) => Err(WebError::config(format!(
            "tls_server_config.{field}: unknown TLS version {other:?}; use TLS12 or TLS13"
        ))),
    }
}

/// The extra response headers exporter-toolkit allows, with the values it allows when it limits them.
const ALLOWED_HEADERS: [(&str, &[&str]); 5] = [
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

fn headers(raw: BTreeMap<String, String>) -> Result<Vec<(HeaderName, HeaderValue)>, WebError> {
    raw.iter().filter_map(|(name, value)| header(name, value).transpose()).collect()
}

/// One configured header; `None` for a blank value of a free-form header ("unset if blank").
fn header(name: &str, value: &str) -> Result<Option<(HeaderName, HeaderValue)>, WebError> {
    let problem = |text: String| WebError::config(format!("http_server_config.headers: {text}"));
    let Some((_, allowed_values)) = ALLOWED_HEADERS.iter().find(|(allowed, _)| *allowed == name) else {
        return Err(problem(format!("HTTP header {name:?} can not be configured")));
    };
    if !allowed_values.is_empty() && !allowed_values.contains(&value) {
        return Err(problem(format!("invalid value for {name}: expected one of {allowed_values:?}, got {value:?}")));
    }
    if value.is_empty() {
        return Ok(None);
    }
    let header_value =
        HeaderValue::from_str(value).map_err(|_| problem(format!("{name}: {value:?} is not a valid header value")))?;
    let header_name =
        HeaderName::from_bytes(name.as_bytes()).map_err(|_| problem(format!("{name:?} is not a header")))?;
    Ok(Some((header_name, header_value)))
}

/// Users whose hashes have different costs can be told from unknown ones by how soon a refused
/// login is answered: an unknown user's check costs as much as the costliest hash.
fn cost_warning(users: &BTreeMap<String, PasswordHash>) -> Option<String> {
    let costs = users.values().map(PasswordHash::cost);
    let (lowest, highest) = (costs.clone().min()?, costs.max()?);
    (lowest != highest).then(|| format!(
        "basic_auth_users: the hashes have bcrypt costs from {lowest} to {highest}; a refused login of a user whose cost is lower is answered sooner, which tells that the user exists: hash every password with one cost"
    ))
}

fn users(raw: Vec<(String, String)>) -> Result<BTreeMap<String, PasswordHash>, WebError> {
    let mut users = BTreeMap::new();
    for (user, hash) in raw {
        let problem = |text: String| WebError::config(format!("basic_auth_users: {text}"));
        if user.contains(':') {
            // What follows the ':' is not repeated: it may be the password, written as htpasswd has it.
            let begins = user.split(':').next().unwrap_or_default();
            return Err(problem(format!(
                "the user name that begins {begins:?} holds ':', which Basic auth cannot carry in a user name"
            )));
        }
        // The hash itself stays out of the message: exporter-toolkit treats it as a secret.
        let hash = PasswordHash::parse(hash).map_err(|reason| problem(format!("the password of {user:?} {reason}")))?;
        if users.insert(user.clone(), hash).is_some() {
            return Err(problem(format!("user {user:?} is listed twice")));
        }
    }
    Ok(users)
}

/// The `rate_limit` section; `None` when its interval is zero or absent, which turns it off.
fn rate_limit(raw: RawRateLimit) -> Result<Option<RateLimit>, WebError> {
    let interval = match raw.interval {
        None => return Ok(None),
        Some(RawDuration::Nanoseconds(nanoseconds)) => std::time::Duration::from_nanos(nanoseconds),
        Some(RawDuration::Text(text)) => {
            parse_go(&text).map_err(|error| WebError::config(format!("rate_limit.interval: {error}")))?
        }
    };
    if interval.is_zero() {
        return Ok(None);
    }
    match raw.burst {
        // Go's limiter with a burst of 0 would refuse every request.
        None | Some(0) => Err(WebError::config("rate_limit.burst: give at least 1 when rate_limit.interval is set")),
        Some(burst) => Ok(Some(RateLimit { interval, burst })),
    }
}

#[cfg(test)]
mod tests;
