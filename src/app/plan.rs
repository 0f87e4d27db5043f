//! What this replica polls under a configuration, at what pace, and what in it deserves a
//! warning. A start and each reload log the warnings; `--config.check` prints them, so that a
//! check says what the start would.

use std::collections::BTreeSet;
use std::time::Duration;

use tracing::{info, warn};

use super::fleet::Wanted;
use crate::config::environment::UnknownVariable;
use crate::config::shard::Shard;
use crate::config::{AccountConfig, Accounts, Config};
use crate::poller::{budget, PollSettings};

/// The accounts this replica polls, how, and how old their figures may grow.
pub(super) struct Plan {
    pub accounts: Vec<AccountConfig>,
    pub settings: PollSettings,
    pub max_age: Duration,
    pub warnings: Vec<Warning>,
    /// How many accounts the configuration lists, this shard's and the others'.
    configured: usize,
}

/// Something the configuration asks for that is not honoured as written, or defeats itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Warning {
    /// Every configured account falls to other shards.
    #[error("this shard owns none of the configured accounts ({configured}), so shard {} of {} polls nothing; lower --shard.count if there are more replicas than needed", shard.index, shard.count)]
    ShardOwnsNone { shard: Shard, configured: usize },
    /// The accounts do not fit the weight budget at `--poll.interval`.
    #[error("{accounts} account(s) with {coins} coin(s) do not fit the exchange's weight budget at --poll.interval {}; polling every {} instead (raise the budgets if the exchange allows more, or shard the accounts over several IPs)", seconds(*configured), seconds(*stretched))]
    Stretched { accounts: usize, coins: usize, configured: Duration, stretched: Duration },
    /// Coin ids without a name: their series carry `coin=""` and do not join with their bills.
    #[error("coin ids {} have no name, so their series carry coin=\"\" and do not join with their bills; name them with --api.coin-names ID=NAME (or coin_names in the accounts file)", joined(.0))]
    UnnamedCoins(Vec<u64>),
    /// A documented coin given another name: its series and its bills no longer join, unless the
    /// exchange's bills use that name.
    #[error("coin id {id} is documented as {documented} but named {name} here (--api.coin-names or coin_names): its series say coin=\"{name}\", and its bills join them, and enter the ledger check, only if they name it {name}; remove the name unless they do")]
    RenamedCoin { id: u64, documented: &'static str, name: String },
    /// `--data.max-age` withdraws every account's figures between two polls.
    #[error("--data.max-age {} is not longer than the poll interval {}: every account's figures will be withdrawn between polls; give it two intervals or more", seconds(*max_age), seconds(*interval))]
    ShortMaxAge { max_age: Duration, interval: Duration },
    /// A setting given that this configuration does not use.
    #[error("{0} is set but not used: --config.file names each account and its credentials")]
    Unused(String),
    /// A variable of the exporter's prefix that no setting reads: misspelt, its setting keeps
    /// its default.
    #[error("{0}")]
    UnknownVariable(UnknownVariable),
    /// The exchange's URL is plain HTTP to another machine: the key and passphrase travel in clear.
    #[error("--api.base-url {0} is plain HTTP to another machine: the API keys and passphrases, and every figure, travel unencrypted; use https://")]
    UnencryptedExchange(String),
}

impl Plan {
    /// Plans the polls of this shard's part of `configured`.
    pub fn new(config: &Config, configured: Vec<AccountConfig>) -> Self {
        let listed = configured.len();
        let accounts: Vec<AccountConfig> =
            configured.into_iter().filter(|account| config.shard.owns(&account.name)).collect();
        let unused = config.unused.iter().cloned().map(Warning::Unused);
        let unknown = config.unknown_variables.iter().cloned().map(Warning::UnknownVariable);
        let mut warnings: Vec<Warning> = unused.chain(unknown).collect();
        if let Accounts::Exchange { base_url, .. } = &config.accounts {
            if unencrypted_beyond_this_machine(base_url) {
                warnings.push(Warning::UnencryptedExchange(base_url.clone()));
            }
        }
        if accounts.is_empty() && listed > 0 {
            warnings.push(Warning::ShardOwnsNone { shard: config.shard, configured: listed });
        }
        let coins = accounts.iter().map(|a| a.coin_ids.len()).max().unwrap_or(1);
        let pace = budget::plan(
            accounts.len(),
            coins,
            config.poll_interval,
            config.ip_weight_budget,
            config.uid_weight_budget,
        );
        if pace.interval > config.poll_interval {
            warnings.push(Warning::Stretched {
                accounts: accounts.len(),
                coins,
                configured: config.poll_interval,
                stretched: pace.interval,
            });
        }
        let unnamed: BTreeSet<u64> = accounts
            .iter()
            .flat_map(|a| a.coin_ids.iter().copied())
            .filter(|id| config.coins.name(*id).is_none())
            .collect();
        if !unnamed.is_empty() {
            warnings.push(Warning::UnnamedCoins(unnamed.into_iter().collect()));
        }
        let renamed = config.coins.renamed_documented();
        warnings.extend(renamed.map(|(id, documented, name)| Warning::RenamedCoin {
            id,
            documented,
            name: name.into(),
        }));
        // Figures older than this are withdrawn: `--data.max-age`, or five poll intervals (at
        // least a minute).
        let max_age = config.data_max_age.unwrap_or_else(|| (pace.interval * 5).max(Duration::from_secs(60)));
        if max_age <= pace.interval {
            warnings.push(Warning::ShortMaxAge { max_age, interval: pace.interval });
        }
        let settings = PollSettings {
            interval: pace.interval,
            overlap: config.bills_overlap,
            backfill: Duration::ZERO,
            bill_queries_per_poll: pace.bill_queries_per_poll,
            coins: config.coins.clone(),
        };
        Self { accounts, settings, max_age, warnings, configured: listed }
    }

    /// The names of the accounts polled.
    pub fn names(&self) -> Vec<String> {
        self.accounts.iter().map(|account| account.name.clone()).collect()
    }

    /// Each account with the settings it is polled with, and how far back it begins counting if
    /// it has no saved state.
    pub fn wanted(self, backfill: impl Fn(&str) -> Duration) -> Vec<Wanted> {
        let settings = self.settings;
        let wanted = |account: AccountConfig| {
            let settings = PollSettings { backfill: backfill(&account.name), ..settings.clone() };
            Wanted { account, settings }
        };
        self.accounts.into_iter().map(wanted).collect()
    }

    /// Logs the shard's part, if the accounts are sharded, and every warning.
    pub fn log(&self, shard: Shard) {
        if shard.count > 1 && !self.accounts.is_empty() {
            info!(
                shard = shard.index,
                shards = shard.count,
                accounts = self.accounts.len(),
                configured = self.configured,
                "polling this shard's accounts"
            );
        }
        for warning in &self.warnings {
            warning.log();
        }
    }
}

impl Warning {
    /// One warning line: the sentence, with its figures as fields too.
    fn log(&self) {
        match self {
            Self::ShardOwnsNone { shard, configured } => {
                warn!(shard = shard.index, shards = shard.count, configured, "{self}");
            }
            Self::Stretched { accounts, coins, configured, stretched } => warn!(
                accounts,
                coins,
                configured_seconds = configured.as_secs_f64(),
                stretched_seconds = stretched.as_secs_f64(),
                "{self}"
            ),
            Self::UnnamedCoins(ids) => warn!(coin_ids = %joined(ids), "{self}"),
            Self::RenamedCoin { id, name, .. } => warn!(coin_id = id, coin = name, "{self}"),
            Self::ShortMaxAge { max_age, interval } => {
                warn!(max_age_seconds = max_age.as_secs_f64(), poll_interval_seconds = interval.as_secs_f64(), "{self}")
            }
            Self::Unused(setting) => warn!(setting, "{self}"),
            Self::UnknownVariable(unknown) => warn!(variable = unknown.name, "{self}"),
            Self::UnencryptedExchange(url) => warn!(url, "{self}"),
        }
    }
}

/// Whether requests to `base_url` leave this machine unencrypted: plain HTTP to a host that is not
/// `localhost` or a loopback address (a local proxy, or the tests' simulated exchange).
fn unencrypted_beyond_this_machine(base_url: &str) -> bool {
    let Ok(uri) = base_url.parse::<http::Uri>() else { return false };
    let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    uri.scheme_str() == Some("http") && !loopback
}

/// A duration as seconds to the millisecond: `15s`, `8.25s`.
fn seconds(duration: Duration) -> String {
    format!("{}s", duration.as_millis() as f64 / 1000.0)
}

fn joined(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}
