//! Configuration: flags (with environment fallbacks) and the optional YAML file, validated once
//! at start into plain typed structs. Credentials come only from the environment or from files,
//! never from flags, so they never show in `ps` or shell history.

pub mod environment;
mod file;
pub mod shard;
mod usage;

use crate::api::{Coins, Credentials, Secret};
use crate::duration::parse_prometheus;
use crate::web::{WebConfig, WebSettings};
use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use clap::{Parser, ValueEnum};
use environment::UnknownVariable;
pub use file::parse_accounts;
use shard::Shard;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tracing::level_filters::LevelFilter;
pub use usage::usage_error_line;

/// Looks up an environment variable; injected so that tests need not touch the real environment.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Invalid(String),
    #[error("missing credentials: set {0} (each, or the same name with _FILE naming a file that holds it), or run with --demo to try the exporter without a key")]
    MissingCredentials(String),
    #[error("both {0} and {0}_FILE are set; set only one")]
    AmbiguousCredential(&'static str),
    /// The path is not repeated: a credential written where its file's name belongs would go
    /// into the log, and a reload's answer, and credentials hold `/` and `.` as paths do.
    #[error("cannot read the {what} file: {reason}")]
    UnreadableFile { what: String, reason: String },
    #[error("config file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error(transparent)]
    Web(#[from] crate::web::WebError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Logfmt,
    Json,
}

/// Command-line flags. Every flag can also come from the environment variable it names.
#[derive(Debug, Parser)]
#[command(
    name = "capi_exporter",
    version = crate::version::LONG_VERSION,
    about = "Prometheus exporter for the futures (contract) account API of a crypto exchange"
)]
pub struct Cli {
    /// Base URL of the exchange's contract API.
    #[arg(long = "api.base-url", env = "CAPI_API_BASE_URL", default_value = "https://api-contract.weex.com")]
    pub api_base_url: String,
    /// Coin ids to query the account for, comma separated (2 is USDT).
    #[arg(long = "api.coin-ids", env = "CAPI_API_COIN_IDS", default_value = "2", value_delimiter = ',', value_parser = parse_coin_id)]
    pub api_coin_ids: Vec<u64>,
    /// Names of coin ids beyond the documented 2=USDT, as ID=NAME, comma separated (1=BTC): every
    /// coin-scoped series carries both the coin's name and its id.
    #[arg(long = "api.coin-names", env = "CAPI_API_COIN_NAMES", value_delimiter = ',')]
    pub api_coin_names: Vec<String>,
    /// Name of the account, the `account` label of every series (without --config.file)
    /// [default: default]
    // No default value for clap: a name given beside --config.file is warned of.
    #[arg(long = "api.account-name", env = "CAPI_API_ACCOUNT_NAME")]
    pub api_account_name: Option<String>,
    /// Longest wait for one answer of the exchange.
    #[arg(long = "api.timeout", env = "CAPI_API_TIMEOUT", default_value = "10s", value_parser = parse_prometheus)]
    pub api_timeout: Duration,
    /// Request weight the exchange allows per IP per 10 s, shared by every account polled here.
    #[arg(long = "api.ip-weight-budget", env = "CAPI_API_IP_WEIGHT_BUDGET", default_value_t = 500, value_parser = clap::value_parser!(u32).range(10..))]
    pub api_ip_weight_budget: u32,
    /// Request weight the exchange allows per account (UID) per 10 s.
    #[arg(long = "api.uid-weight-budget", env = "CAPI_API_UID_WEIGHT_BUDGET", default_value_t = 500, value_parser = clap::value_parser!(u32).range(10..))]
    pub api_uid_weight_budget: u32,
    /// Value of the `locale` header sent to the exchange.
    #[arg(long = "api.locale", env = "CAPI_API_LOCALE", default_value = "en-US")]
    pub api_locale: String,
    /// How often each account is polled.
    #[arg(long = "poll.interval", env = "CAPI_POLL_INTERVAL", default_value = "15s", value_parser = parse_prometheus)]
    pub poll_interval: Duration,
    /// How late a bill may become visible after its creation time and still be counted.
    #[arg(long = "bills.overlap", env = "CAPI_BILLS_OVERLAP", default_value = "60s", value_parser = parse_prometheus)]
    pub bills_overlap: Duration,
    /// At the first start (no saved state), also count bills created this long before it.
    #[arg(long = "bills.backfill", env = "CAPI_BILLS_BACKFILL", value_parser = parse_prometheus)]
    pub bills_backfill: Option<Duration>,
    /// Withdraw an account's figures from /metrics when its last successful poll is older than
    /// this. Default: five poll intervals, at least 1m.
    #[arg(long = "data.max-age", env = "CAPI_DATA_MAX_AGE", value_parser = parse_prometheus)]
    pub data_max_age: Option<Duration>,
    /// File keeping the bill cursor and counters across restarts.
    #[arg(long = "state.file", env = "CAPI_STATE_FILE")]
    pub state_file: Option<PathBuf>,
    /// YAML file listing several accounts, each with its own credentials.
    #[arg(long = "config.file", env = "CAPI_CONFIG_FILE")]
    pub config_file: Option<PathBuf>,
    // The text is clap's help, where `[IPv6]` is no link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Address to serve /metrics on: host:port, [IPv6]:port or :port (every address, IPv6 and IPv4);
    /// repeat the flag (or separate with commas) to listen on several.
    #[arg(
        long = "web.listen-address",
        env = "CAPI_WEB_LISTEN_ADDRESS",
        default_value = ":10127",
        value_delimiter = ','
    )]
    pub web_listen_address: Vec<String>,
    /// Web configuration file (TLS, basic auth) in the format of Prometheus's exporter-toolkit.
    #[arg(long = "web.config.file", env = "CAPI_WEB_CONFIG_FILE")]
    pub web_config_file: Option<PathBuf>,
    /// Most scrapes served at once, each until its page is sent; more get 503 at once (0: no limit).
    #[arg(long = "web.max-requests", env = "CAPI_WEB_MAX_REQUESTS", default_value_t = WebSettings::DEFAULT_MAX_REQUESTS)]
    pub web_max_requests: usize,
    /// Longest time to answer one HTTP request (slower ones get 503) and to send a scrape's page,
    /// and for a client to take in none of the answer (either way its connection is closed).
    #[arg(long = "web.request-timeout", env = "CAPI_WEB_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_prometheus)]
    pub web_request_timeout: Duration,
    /// Answer POST /-/reload, which reloads the configuration files as SIGHUP does.
    #[arg(long = "web.enable-lifecycle", env = "CAPI_WEB_ENABLE_LIFECYCLE")]
    pub web_enable_lifecycle: bool,
    /// Path of the metrics endpoint.
    #[arg(long = "web.telemetry-path", env = "CAPI_WEB_TELEMETRY_PATH", default_value = "/metrics")]
    pub web_telemetry_path: String,
    /// Least severe log level written.
    #[arg(long = "log.level", env = "CAPI_LOG_LEVEL", default_value = "info",
        value_parser = PossibleValuesParser::new(["error", "warn", "info", "debug"]).try_map(|l| l.parse::<LevelFilter>()))]
    pub log_level: LevelFilter,
    /// Log line format.
    #[arg(long = "log.format", env = "CAPI_LOG_FORMAT", default_value = "logfmt", value_enum)]
    pub log_format: LogFormat,
    /// This replica's shard, from 0: it polls only the accounts that hash to it.
    #[arg(long = "shard.index", env = "CAPI_SHARD_INDEX", default_value_t = 0)]
    pub shard_index: u32,
    /// How many replicas share the configured accounts.
    #[arg(long = "shard.count", env = "CAPI_SHARD_COUNT", default_value_t = 1)]
    pub shard_count: u32,
    /// Check the configuration (flags, --config.file with its credentials, --web.config.file
    /// with its certificates) and exit: 0 and a summary if it is valid, else 1 and the problem.
    #[arg(long = "config.check")]
    pub config_check: bool,
    /// Run against a built-in simulated exchange with generated keys: no API key needed.
    #[arg(long = "demo", conflicts_with = "config_file")]
    pub demo: bool,
    /// Seed of the simulated exchange's activity in --demo mode.
    #[arg(long = "demo.seed", default_value_t = 1, requires = "demo")]
    pub demo_seed: u64,
    /// Number of simulated accounts in --demo mode.
    #[arg(long = "demo.accounts", default_value_t = 2, requires = "demo", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub demo_accounts: u16,
}

/// One account to poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountConfig {
    pub name: String,
    pub coin_ids: Vec<u64>,
    pub credentials: Credentials,
}

/// Where the accounts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accounts {
    /// Real accounts on the exchange at `base_url`.
    Exchange { base_url: String, accounts: Vec<AccountConfig> },
    /// Simulated accounts on an in-process exchange.
    Demo { seed: u64, count: u16, coin_ids: Vec<u64> },
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub accounts: Accounts,
    pub timeout: Duration,
    /// Weight per 10 s: per IP (all accounts) and per account.
    pub ip_weight_budget: u32,
    pub uid_weight_budget: u32,
    pub locale: String,
    pub poll_interval: Duration,
    pub bills_overlap: Duration,
    pub bills_backfill: Duration,
    /// `None`: derived from the poll interval actually used.
    pub data_max_age: Option<Duration>,
    pub state_file: Option<PathBuf>,
    /// Where to listen, each as `host:port` for [`tokio::net::TcpListener::bind`].
    pub listen_addresses: Vec<String>,
    pub telemetry_path: String,
    pub web: WebSettings,
    /// Whether `/-/reload` is answered.
    pub lifecycle: bool,
    pub shard: Shard,
    /// The names of coin ids: the documented ones, the accounts file's and the flag's.
    pub coins: Coins,
    /// Settings given that this configuration does not use, by name, to be warned of: with
    /// `--config.file`, the single account's name and credentials.
    pub unused: Vec<String>,
    /// Variables set with the exporter's prefix that nothing reads, to be warned of.
    pub unknown_variables: Vec<UnknownVariable>,
}

impl Config {
    /// What `--config.check` says of a valid configuration (one whose TLS certificate and key
    /// loaded, as [`WebConfig::load`] checks), one line each: that it is valid, then what it
    /// asks for that is not honoured as written.
    pub fn check(&self) -> Vec<String> {
        let web = self.web.config.as_ref();
        let accounts = match &self.accounts {
            Accounts::Exchange { accounts, .. } => format!("{} account(s)", accounts.len()),
            Accounts::Demo { count, .. } => format!("{count} demo account(s)"),
        };
        let tls = if web.is_some_and(WebConfig::tls_enabled) { "TLS" } else { "plain HTTP" };
        let auth = if web.is_some_and(WebConfig::basic_auth_enabled) { ", basic auth" } else { "" };
        let valid = format!("the configuration is valid: {accounts}, {tls}{auth}");
        let warnings = web.map(WebConfig::warnings).unwrap_or_default().iter().map(|w| format!("warning: {w}"));
        std::iter::once(valid).chain(warnings).collect()
    }

    /// [`Self::from_cli`] with the process's environment, and the variables of the exporter's
    /// prefix set in it that nothing read.
    pub fn from_environment(cli: &Cli) -> Result<Self, ConfigError> {
        let read = RefCell::new(BTreeSet::new());
        let not_text = RefCell::new(None);
        let env = |name: &str| {
            read.borrow_mut().insert(name.to_owned());
            let value = std::env::var(name);
            if let Err(std::env::VarError::NotUnicode(_)) = value {
                not_text.borrow_mut().get_or_insert_with(|| name.to_owned());
            }
            value.ok()
        };
        let config = Self::from_cli(cli, &env);
        // Read as unset, it would be called missing, or its default taken.
        if let Some(name) = not_text.into_inner() {
            return Err(ConfigError::Invalid(format!("{name} is not UTF-8 text; set it to its value as text")));
        }
        let mut config = config?;
        let set = std::env::vars_os().filter_map(|(name, _)| name.into_string().ok());
        config.unknown_variables = environment::unknown(set, &read.into_inner());
        Ok(config)
    }

    /// Validates the flags and resolves credentials; every error is one line naming the problem.
    pub fn from_cli(cli: &Cli, env: Env) -> Result<Self, ConfigError> {
        let listen_addresses: Vec<String> =
            cli.web_listen_address.iter().map(|address| listen_address(address)).collect::<Result<_, _>>()?;
        if let Some(twice) =
            listen_addresses.iter().enumerate().find_map(|(i, a)| listen_addresses[..i].contains(a).then_some(a))
        {
            // Listening on it twice would fail as "already in use", sending one to look for another process.
            return Err(ConfigError::Invalid(format!(
                "--web.listen-address {twice} is given twice; give each address once"
            )));
        }
        validate_telemetry_path(&cli.web_telemetry_path)?;
        validate_locale(&cli.api_locale)?;
        let coin_ids = validate_coin_ids(&cli.api_coin_ids, "--api.coin-ids")?;
        let flag_coin_names =
            cli.api_coin_names.iter().map(|entry| coin_name_entry(entry)).collect::<Result<_, _>>()?;
        let shard = Shard::new(cli.shard_index, cli.shard_count).map_err(ConfigError::Invalid)?;
        let (accounts, file_coin_names) = if cli.demo {
            (Accounts::Demo { seed: cli.demo_seed, count: cli.demo_accounts, coin_ids }, Vec::new())
        } else {
            let base_url = validate_base_url(&cli.api_base_url)?;
            let listed = match &cli.config_file {
                Some(path) => file::load_accounts(path, &coin_ids, env)?,
                None => {
                    file::AccountsFile { accounts: vec![single_account(cli, coin_ids, env)?], coin_names: Vec::new() }
                }
            };
            (Accounts::Exchange { base_url, accounts: listed.accounts }, listed.coin_names)
        };
        let unused = if cli.config_file.is_some() { unused_with_accounts_file(cli, env) } else { Vec::new() };
        let coins = merge_coin_names(file_coin_names, flag_coin_names)?;
        if cli.bills_backfill.is_some() && cli.state_file.is_none() {
            return Err(ConfigError::Invalid(
                "--bills.backfill needs --state.file: without one, every start counts the backfill's bills again, and increase() and the bill alerts take them for new ones; add --state.file, or leave out --bills.backfill".into(),
            ));
        }
        Ok(Self {
            accounts,
            timeout: cli.api_timeout,
            ip_weight_budget: cli.api_ip_weight_budget,
            uid_weight_budget: cli.api_uid_weight_budget,
            locale: cli.api_locale.clone(),
            poll_interval: cli.poll_interval,
            bills_overlap: cli.bills_overlap,
            bills_backfill: cli.bills_backfill.unwrap_or(Duration::ZERO),
            data_max_age: cli.data_max_age,
            state_file: cli.state_file.as_deref().map(state_file).transpose()?,
            listen_addresses,
            telemetry_path: cli.web_telemetry_path.clone(),
            lifecycle: cli.web_enable_lifecycle,
            web: WebSettings {
                config: cli.web_config_file.as_deref().map(WebConfig::load).transpose()?,
                max_requests: cli.web_max_requests,
                request_timeout: cli.web_request_timeout,
                ..WebSettings::default()
            },
            shard,
            coins,
            unused,
            unknown_variables: Vec::new(),
        })
    }
}

/// The single account's settings that are set beside `--config.file`, which names each account
/// and its credentials instead.
fn unused_with_accounts_file(cli: &Cli, env: Env) -> Vec<String> {
    let name = cli.api_account_name.as_ref().map(|_| "--api.account-name (or CAPI_API_ACCOUNT_NAME)".to_owned());
    let credentials = CREDENTIAL_VARIABLES
        .iter()
        .flat_map(|var| [var.to_string(), format!("{var}_FILE")])
        .filter(|var| env(var).is_some_and(|value| !value.is_empty()));
    name.into_iter().chain(credentials).collect()
}

/// The state file, whose folder must exist: each save writes a new file beside it, so every save
/// would fail, and bills counted go unshown, without it.
fn state_file(path: &std::path::Path) -> Result<PathBuf, ConfigError> {
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => std::path::Path::new("."),
    };
    if !folder.is_dir() {
        return Err(ConfigError::Invalid(format!(
            "--state.file {}: the folder {} does not exist; create it, writable by the exporter's user (install -d -o USER {}), or choose another path",
            path.display(),
            folder.display(),
            folder.display()
        )));
    }
    Ok(path.to_path_buf())
}

/// A language tag such as `en-US`: letters, digits, `-` and `_`, at most 35 (BCP 47's longest).
/// It goes into a header of every request, so a line break would break them all.
fn validate_locale(locale: &str) -> Result<(), ConfigError> {
    let tag =
        (1..=35).contains(&locale.len()) && locale.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
    if !tag {
        return Err(ConfigError::Invalid(format!(
            "--api.locale {locale:?} is not a language tag; write it like en-US (letters, digits, '-' or '_')"
        )));
    }
    Ok(())
}

/// The paths the server answers besides the telemetry path.
const RESERVED_PATHS: [&str; 5] = ["/", "/-/healthy", "/-/ready", crate::web::RELOAD_PATH, crate::web::POLL_LOG_PATH];

/// One `--web.listen-address`, as exporter-toolkit takes it: `host:port`, `[IPv6]:port`, or
/// `:port` for every address, IPv6 and IPv4 (IPv4 alone where IPv6 is off). A host name is looked
/// up when the exporter binds it.
fn listen_address(text: &str) -> Result<String, ConfigError> {
    let invalid = || {
        ConfigError::Invalid(format!(
            "--web.listen-address {text:?} is not an address; write it like :10127, localhost:10127, 0.0.0.0:10127 or [::]:10127"
        ))
    };
    let (host, port) = text.rsplit_once(':').ok_or_else(invalid)?;
    port.parse::<u16>().map_err(|_| invalid())?;
    let is_host_name = |host: &str| {
        host.split('.').all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    match host {
        // Every address, IPv6 and IPv4 (a dual-stack socket), as Go's net.Listen(":port") does.
        "" => Ok(format!("[::]:{port}")),
        _ if text.parse::<SocketAddr>().is_ok() => Ok(text.to_string()),
        _ if is_host_name(host) => Ok(text.to_string()),
        _ => Err(invalid()),
    }
}

/// A plain path: `/` then segments of letters, digits, `-`, `_`, `.` and `~`, none empty, and
/// not a path the server answers otherwise. (The router would read `{name}` or `*` as patterns.)
fn validate_telemetry_path(path: &str) -> Result<(), ConfigError> {
    let plain_segment = |segment: &str| {
        !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b))
    };
    let plain = path.strip_prefix('/').is_some_and(|rest| rest.split('/').all(plain_segment));
    if !plain || RESERVED_PATHS.contains(&path) {
        return Err(ConfigError::Invalid(format!(
            "--web.telemetry-path {path:?} must be a plain path such as /metrics: '/' and then letters, digits, '-', '_', '.' or '~' between single slashes, other than {}",
            RESERVED_PATHS.join(", ")
        )));
    }
    Ok(())
}

/// The variables of a single account's credentials: API key, secret, passphrase.
const CREDENTIAL_VARIABLES: [&str; 3] = ["CAPI_API_KEY", "CAPI_API_SECRET", "CAPI_API_PASSPHRASE"];

fn single_account(cli: &Cli, coin_ids: Vec<u64>, env: Env) -> Result<AccountConfig, ConfigError> {
    let name = validate_name(cli.api_account_name.as_deref().unwrap_or("default"))?;
    let [api_key, secret, passphrase] = CREDENTIAL_VARIABLES.map(|var| credential_from_env(var, env));
    let given = [api_key?, secret?, passphrase?];
    // All the missing ones at once: a first start without a key should not take three tries.
    let missing: Vec<&str> =
        CREDENTIAL_VARIABLES.iter().zip(&given).filter(|(_, value)| value.is_none()).map(|(var, _)| *var).collect();
    let [Some(api_key), Some(secret), Some(passphrase)] = given else {
        return Err(ConfigError::MissingCredentials(missing.join(", ")));
    };
    let credentials = Credentials {
        api_key: plain_credential(api_key, "CAPI_API_KEY")?,
        secret: plain_credential(secret, "CAPI_API_SECRET")?,
        passphrase: plain_credential(passphrase, "CAPI_API_PASSPHRASE")?,
    };
    Ok(AccountConfig { name, coin_ids, credentials })
}

/// `VAR` or `VAR_FILE`, at most one of them; `None` if neither is set.
fn credential_from_env(var: &'static str, env: Env) -> Result<Option<Secret>, ConfigError> {
    let direct = env(var).filter(|v| !v.is_empty());
    let file = env(&format!("{var}_FILE")).filter(|v| !v.is_empty());
    match (direct, file) {
        (Some(_), Some(_)) => Err(ConfigError::AmbiguousCredential(var)),
        (Some(value), None) => Ok(Some(Secret::new(value))),
        (None, Some(path)) => read_secret_file(&PathBuf::from(path), &format!("{var}_FILE")).map(Some),
        (None, None) => Ok(None),
    }
}

/// The exchange's keys, secrets and passphrases are printable ASCII. A control character (a `\r`
/// left by an editor), a byte-order mark or a space at either end (copied along) would fail
/// every request; worse, the key and the passphrase travel in HTTP headers, and a server that
/// trims or re-encodes one before quoting it in an error would quote a text the log's redaction
/// does not know. So each is refused at start, naming where it is; so is one over
/// [`MAX_CREDENTIAL_BYTES`](crate::api::credentials::MAX_CREDENTIAL_BYTES), whose forms an error
/// quoting the exchange could not be checked for.
pub(crate) fn plain_credential(credential: Secret, origin: &str) -> Result<Secret, ConfigError> {
    let text = credential.expose();
    let problem = if text.bytes().any(|b| b.is_ascii_control()) {
        "holds a control character, which an HTTP header cannot carry"
    } else if !text.is_ascii() {
        "holds a character that is not ASCII (a byte-order mark an editor wrote, say)"
    } else if text.starts_with(' ') || text.ends_with(' ') {
        "has a space at its start or end"
    } else if text.len() > crate::api::credentials::MAX_CREDENTIAL_BYTES {
        "is longer than 1 KiB, which no credential of the exchange is"
    } else {
        return Ok(credential);
    };
    Err(ConfigError::Invalid(format!("{origin} {problem}; write the credential without it")))
}

/// A secret file's content without its trailing newline (as `echo` and editors write it).
pub(crate) fn read_secret_file(path: &std::path::Path, what: &str) -> Result<Secret, ConfigError> {
    let unreadable = |reason: String| ConfigError::UnreadableFile { what: what.into(), reason };
    let text = crate::files::read_config_text(path).map_err(|e| unreadable(e.to_string()))?;
    let value = text.trim_end_matches(['\n', '\r']);
    if value.is_empty() {
        return Err(unreadable("the file is empty".into()));
    }
    Ok(Secret::new(value))
}

/// A scheme and a host (and port), nothing more: the API's paths are signed as written, so a
/// path, query, fragment or user here would make every request fail its signature, misleadingly.
/// A port beyond 65535 is refused: the URI parser would drop it, and requests go to the scheme's.
fn validate_base_url(url: &str) -> Result<String, ConfigError> {
    let trimmed = url.trim_end_matches('/');
    let valid = !trimmed.contains('#')
        && trimmed.parse::<http::Uri>().is_ok_and(|u| {
            matches!(u.scheme_str(), Some("http" | "https"))
                && u.authority().is_some_and(|a| {
                    let port = a.as_str().strip_prefix(a.host());
                    !a.host().is_empty() && port.is_some_and(|port| port.is_empty() || a.port_u16().is_some())
                })
                && matches!(u.path(), "" | "/")
                && u.query().is_none()
        });
    if !valid {
        // Not quoted: a user part may hold a password.
        return Err(ConfigError::Invalid(
            "--api.base-url is not an http(s) URL of a host alone (a port up to 65535, no path, query, fragment or user), e.g. https://api-contract.weex.com".into(),
        ));
    }
    Ok(trimmed.to_string())
}

/// One `--api.coin-names` entry, `ID=NAME`.
fn coin_name_entry(entry: &str) -> Result<(u64, String), ConfigError> {
    let invalid = || ConfigError::Invalid(format!("--api.coin-names {entry:?}: write each as ID=NAME, like 1=BTC"));
    let (id, name) = entry.split_once('=').ok_or_else(invalid)?;
    let id = id.trim().parse().map_err(|_| invalid())?;
    Ok((id, validate_coin_name(name.trim(), "--api.coin-names")?))
}

/// A coin's name, as bills give it: 1 to 16 letters and digits.
pub(crate) fn validate_coin_name(name: &str, origin: &str) -> Result<String, ConfigError> {
    if name.is_empty() || name.len() > 16 || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(ConfigError::Invalid(format!("{origin}: coin name {name:?} must be 1 to 16 letters and digits")));
    }
    // The bill counters' coins past their limit are counted under this name: named, their
    // series would carry that coin's id.
    if name == crate::snapshot::counters::OTHER {
        return Err(ConfigError::Invalid(format!(
            "{origin}: coin name {name:?} is the bill counters' name for coins past their limit; give the coin another name"
        )));
    }
    Ok(name.to_owned())
}

/// The documented coins, then the accounts file's names and the flag's; the two may not give
/// one id two names, nor one name to two ids.
fn merge_coin_names(file: Vec<(u64, String)>, flag: Vec<(u64, String)>) -> Result<Coins, ConfigError> {
    let mut names = std::collections::BTreeMap::new();
    for (id, name) in file.into_iter().chain(flag) {
        if let Some(other) = names.insert(id, name.clone()).filter(|other| *other != name) {
            return Err(ConfigError::Invalid(format!(
                "coin id {id} is named both {other:?} and {name:?}; give it one name"
            )));
        }
    }
    let coins = Coins::default().with(names);
    if let Some((name, first, second)) = coins.name_given_twice() {
        return Err(ConfigError::Invalid(format!(
            "coin name {name:?} is given to coin ids {first} and {second}; give each id its own name"
        )));
    }
    Ok(coins)
}

/// One coin id of `--api.coin-ids`; the standard parser's "invalid digit found in string" says
/// neither what a coin id is nor how to write one.
fn parse_coin_id(text: &str) -> Result<u64, String> {
    text.trim().parse().map_err(|_| "a coin id is a whole number, like 2 for USDT".to_owned())
}

pub(crate) fn validate_coin_ids(ids: &[u64], origin: &str) -> Result<Vec<u64>, ConfigError> {
    if ids.is_empty() {
        return Err(ConfigError::Invalid(format!("{origin} is empty; name at least one coin id, e.g. 2 for USDT")));
    }
    let mut unique = ids.to_vec();
    unique.sort_unstable();
    unique.dedup();
    Ok(unique)
}

pub(crate) fn validate_name(name: &str) -> Result<String, ConfigError> {
    let valid =
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !valid {
        return Err(ConfigError::Invalid(format!(
            "account name {name:?} must be 1 to 64 letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests;
