//! The YAML file listing several accounts:
//!
//! ```yaml
//! accounts:
//!   - name: main
//!     coin_ids: [2]            # optional; default --api.coin-ids
//!     credentials:
//!       api_key: {env: MAIN_API_KEY}
//!       secret: {file: /run/secrets/main_secret}
//!       passphrase: {env: MAIN_PASSPHRASE}
//! coin_names: {1: BTC}         # optional; coin ids' names beyond the documented 2: USDT
//! ```

use super::{
    plain_credential, read_secret_file, validate_coin_ids, validate_coin_name, validate_name, AccountConfig,
    ConfigError, Env,
};
use crate::api::{Credentials, Secret};
use crate::files::without_quoted_value_or_key;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map of accounts and coin_names")]
struct FileConfig {
    accounts: Vec<FileAccount>,
    #[serde(default)]
    coin_names: BTreeMap<u64, String>,
}

/// What the accounts file says: the accounts, and names of coin ids.
#[derive(Debug)]
pub struct AccountsFile {
    pub accounts: Vec<AccountConfig>,
    pub coin_names: Vec<(u64, String)>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an account: a map of name, coin_ids and credentials")]
struct FileAccount {
    name: String,
    coin_ids: Option<Vec<u64>>,
    credentials: FileCredentials,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map of api_key, secret and passphrase")]
struct FileCredentials {
    api_key: CredentialEntry,
    secret: CredentialEntry,
    passphrase: CredentialEntry,
}

/// Where one credential is read from (exactly one of the two): never the value itself, so the
/// file can be shared.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "{env: VARIABLE} or {file: PATH}")]
struct SecretSource {
    env: Option<String>,
    file: Option<PathBuf>,
}

/// A credential's place in the file. Anything but a map is refused without being quoted, as
/// YAML's own message would quote it: it may be the credential itself.
#[derive(Debug, Deserialize)]
#[serde(try_from = "serde_yaml_ng::Value")]
struct CredentialEntry(SecretSource);

impl TryFrom<serde_yaml_ng::Value> for CredentialEntry {
    type Error = String;

    fn try_from(value: serde_yaml_ng::Value) -> Result<Self, String> {
        if !value.is_mapping() {
            return Err("give {env: VARIABLE} or {file: PATH}, never the credential itself".into());
        }
        serde_yaml_ng::from_value(value).map(Self).map_err(without_quoted_value_or_key)
    }
}

pub(super) fn load_accounts(path: &Path, default_coins: &[u64], env: Env) -> Result<AccountsFile, ConfigError> {
    let text = crate::files::read_config_text(path)
        .map_err(|e| ConfigError::File { path: path.to_path_buf(), reason: e.to_string() })?;
    parse_accounts(path, &text, default_coins, env)
}

/// Parses and validates the accounts file's text; `path` names it in errors and nothing is read
/// but the credential files it names.
pub fn parse_accounts(path: &Path, text: &str, default_coins: &[u64], env: Env) -> Result<AccountsFile, ConfigError> {
    let fail = |reason: String| ConfigError::File { path: path.to_path_buf(), reason };
    crate::files::check_yaml_nesting(text).map_err(fail)?;
    let parsed: FileConfig = serde_yaml_ng::from_str(text).map_err(|e| fail(without_quoted_value_or_key(e)))?;
    if parsed.accounts.is_empty() {
        return Err(fail("accounts is empty; list at least one account".into()));
    }
    let mut names = BTreeSet::new();
    let mut accounts = Vec::new();
    for account in parsed.accounts {
        let in_account = |e: ConfigError| fail(format!("account {:?}: {e}", account.name));
        let name = validate_name(&account.name).map_err(in_account)?;
        if !names.insert(name.clone()) {
            return Err(fail(format!("account name {name:?} appears twice; names must be unique")));
        }
        let coin_ids = match &account.coin_ids {
            Some(ids) => validate_coin_ids(ids, "coin_ids").map_err(in_account)?,
            None => default_coins.to_vec(),
        };
        let c = &account.credentials;
        let credentials = Credentials {
            api_key: resolve(&c.api_key, "api_key", env).map_err(in_account)?,
            secret: resolve(&c.secret, "secret", env).map_err(in_account)?,
            passphrase: resolve(&c.passphrase, "passphrase", env).map_err(in_account)?,
        };
        // One key, one exchange account: under two names its bills would be counted twice, and
        // its weight budget (the exchange's, per account) spent by two windows of ours.
        let same_key =
            accounts.iter().find(|a: &&AccountConfig| a.credentials.api_key.expose() == credentials.api_key.expose());
        if let Some(first) = same_key {
            return Err(fail(format!(
                "accounts {:?} and {name:?} have the same API key; list each exchange account once, with all its coins in coin_ids",
                first.name
            )));
        }
        accounts.push(AccountConfig { name, coin_ids, credentials });
    }
    let coin_names = parsed
        .coin_names
        .into_iter()
        .map(|(id, name)| Ok((id, validate_coin_name(&name, "coin_names").map_err(|e| fail(e.to_string()))?)))
        .collect::<Result<_, ConfigError>>()?;
    Ok(AccountsFile { accounts, coin_names })
}

fn resolve(CredentialEntry(source): &CredentialEntry, what: &str, env: Env) -> Result<Secret, ConfigError> {
    let credential = match (&source.env, &source.file) {
        (Some(var), None) => match env(var).filter(|v| !v.is_empty()) {
            Some(value) => Secret::new(value),
            // The variable's name is not repeated: a credential written where its name belongs
            // would go into the log, and a reload's answer.
            None => {
                return Err(ConfigError::Invalid(format!(
                    "{what}: the environment variable named for it is not set, or empty"
                )))
            }
        },
        (None, Some(path)) => read_secret_file(path, what)?,
        _ => return Err(ConfigError::Invalid(format!("{what}: give exactly one of env: VARIABLE or file: PATH"))),
    };
    plain_credential(credential, what)
}
