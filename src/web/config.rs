//! The web configuration file of Prometheus's exporter-toolkit (docs/web-configuration.md), parsed
//! strictly like its `yaml.UnmarshalStrict`: unknown keys are errors.
//!
//! Keys accepted but without effect here, and why:
//! - `tls_server_config.cipher_suites`, `curve_preferences`, `prefer_server_cipher_suites`: rustls
//!   offers only modern AEAD suites and curves and has no weak ones to switch off, and Go's suite
//!   names mostly name suites (CBC, RSA key exchange) that rustls does not implement;
//! - `http_server_config.http2`: this server speaks HTTP/1.1 only, which every scraper speaks.
//!
//! `min_version: TLS10` or `TLS11` means TLS 1.2, the oldest version rustls speaks.

use super::auth::PasswordHash;
use super::duration::parse_go_duration;
use super::rate_limit::RateLimit;
use super::tls::{ClientAuth, PemSource, TlsSettings, TlsVersion};
use super::WebError;
use axum::http::{HeaderName, HeaderValue};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A validated web configuration. Reading the certificates and keys it names happens in
/// [`WebConfig::load`] and again when [`super::serve`] starts, never in [`WebConfig::parse`].
#[derive(Clone)]
pub struct WebConfig {
    file: Option<PathBuf>,
    tls: Option<TlsSettings>,
    headers: Vec<(HeaderName, HeaderValue)>,
    users: BTreeMap<String, PasswordHash>,
    rate_limit: Option<RateLimit>,
}

impl WebConfig {
    /// Reads, parses and validates the file, and loads the TLS certificates and keys it names so
    /// that a broken setup fails at start. Relative paths in it are relative to its folder.
    pub fn load(path: &Path) -> Result<WebConfig, WebError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            WebError::config(format!("cannot read it: {}", describe_io_error(&error))).in_file(path)
        })?;
        let base_dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut config = WebConfig::parse(&text, base_dir).map_err(|error| error.in_file(path))?;
        config.file = Some(path.to_path_buf());
        config.tls_server_config()?;
        Ok(config)
    }

    /// Parses and validates the text of a web configuration; relative paths in it are taken
    /// relative to `base_dir`. Reads no file, and never panics, whatever the text.
    pub fn parse(text: &str, base_dir: &Path) -> Result<WebConfig, WebError> {
        let raw: Option<RawConfig> =
            serde_yaml_ng::from_str(text).map_err(|error| WebError::config(error.to_string()))?;
        let raw = raw.unwrap_or_default();
        Ok(WebConfig {
            file: None,
            tls: raw.tls_server_config.map(|tls| tls_settings(tls, base_dir)).transpose()?.flatten(),
            headers: headers(raw.http_server_config.and_then(|http| http.headers).unwrap_or_default())?,
            users: users(raw.basic_auth_users.unwrap_or_default())?,
            rate_limit: raw.rate_limit.map(rate_limit).transpose()?.flatten(),
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

    /// Whether requests need a user and password.
    pub fn basic_auth_enabled(&self) -> bool {
        !self.users.is_empty()
    }

    /// Builds the rustls configuration from the certificate and key files as they are now;
    /// `None` when the configuration asks for no TLS.
    pub(crate) fn tls_server_config(&self) -> Result<Option<Arc<rustls::ServerConfig>>, WebError> {
        let Some(tls) = &self.tls else { return Ok(None) };
        let located = |problem: String| WebError::Config { file: self.file.clone(), problem };
        tls.server_config().map(Some).map_err(located)
    }

    #[cfg(test)]
    pub(crate) fn tls_settings(&self) -> Option<&TlsSettings> {
        self.tls.as_ref()
    }

    pub(crate) fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    pub(crate) fn users(&self) -> &BTreeMap<String, PasswordHash> {
        &self.users
    }

    pub(crate) fn rate_limit(&self) -> Option<RateLimit> {
        self.rate_limit
    }
}

/// Shows no password hash and no inline key.
impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebConfig")
            .field("file", &self.file)
            .field("tls", &self.tls)
            .field("headers", &self.headers)
            .field("basic_auth_users", &self.users.keys().collect::<Vec<_>>())
            .field("rate_limit", &self.rate_limit)
            .finish()
    }
}

/// The file as written; no Debug, as it holds password hashes and possibly a key.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    rate_limit: Option<RawRateLimit>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    // Accepted for compatibility, without effect: see the module documentation.
    #[serde(rename = "cipher_suites")]
    _cipher_suites: Option<Vec<String>>,
    #[serde(rename = "curve_preferences")]
    _curve_preferences: Option<Vec<String>>,
    #[serde(rename = "prefer_server_cipher_suites")]
    _prefer_server_cipher_suites: Option<bool>,
    min_version: Option<String>,
    max_version: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    #[serde(rename = "http2")]
    _http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
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
    let certificate =
        PemSource::pick("tls_server_config.cert_file", cert_file, "tls_server_config.cert", cert, base_dir)
            .ok_or_else(|| problem("missing one of cert or cert_file".into()))?;
    let key = PemSource::pick("tls_server_config.key_file", key_file, "tls_server_config.key", key, base_dir)
        .ok_or_else(|| problem("missing one of key or key_file".into()))?;
    let client_ca = PemSource::pick(
        "tls_server_config.client_ca_file",
        client_ca_file,
        "tls_server_config.client_ca",
        client_ca,
        base_dir,
    );
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
    };
    settings.check().map_err(problem)?;
    Ok(Some(settings))
}

fn client_auth(name: Option<&str>) -> Result<ClientAuth, WebError> {
    let Some(name) = name else { return Ok(ClientAuth::NoClientCert) };
    ClientAuth::from_name(name).ok_or_else(|| {
        let known = ClientAuth::NAMES.join(", ");
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
    let mut headers = Vec::with_capacity(raw.len());
    for (name, value) in raw {
        if let Some(header) = header(&name, &value)? {
            headers.push(header);
        }
    }
    Ok(headers)
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

fn users(raw: BTreeMap<String, String>) -> Result<BTreeMap<String, PasswordHash>, WebError> {
    raw.into_iter()
        .map(|(user, hash)| match PasswordHash::parse(hash) {
            Some(hash) => Ok((user, hash)),
            // The hash itself stays out of the message: exporter-toolkit treats it as a secret.
            None => Err(WebError::config(format!(
                "basic_auth_users: the password of {user:?} is not a bcrypt hash ($2a$, $2b$ or $2y$, cost 4 to 31)"
            ))),
        })
        .collect()
}

/// The `rate_limit` section; `None` when its interval is zero or absent, which turns it off.
fn rate_limit(raw: RawRateLimit) -> Result<Option<RateLimit>, WebError> {
    let interval = match raw.interval {
        None => return Ok(None),
        Some(RawDuration::Nanoseconds(nanoseconds)) => std::time::Duration::from_nanos(nanoseconds),
        Some(RawDuration::Text(text)) => parse_go_duration(&text).ok_or_else(|| {
            WebError::config(format!("rate_limit.interval: {text:?} is not a duration; write it like 1s or 100ms"))
        })?,
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

/// An I/O error as one short phrase ("No such file or directory"), without Rust's "(os error 2)".
pub(crate) fn describe_io_error(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(index) if text.ends_with(')') => text[..index].to_string(),
        _ => text,
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
