//! Scale mode: many accounts, each with its own key and a few open positions, and the files an
//! exporter (or any other client) needs to poll them. `capi_sim` serves it for load tests.

use super::records::CONTRACTS;
use super::{Credentials, NewPosition, SimExchange};
use rust_decimal::Decimal;
use serde::Serialize;
use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// The accounts to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSpec {
    pub accounts: u32,
    pub coin_ids: Vec<u64>,
    /// Open positions per account, spread over the coins and both contracts.
    pub positions: u32,
    /// Account `k` (1-based) gets the credentials of seed `seed + k`.
    pub seed: u64,
}

/// One created account, as a client would configure it.
#[derive(Clone, Serialize)]
pub struct ScaleAccount {
    pub name: String,
    #[serde(flatten)]
    pub credentials: CredentialsJson,
    pub coin_ids: Vec<u64>,
}

/// The credentials, spelled out for tools outside this crate (the load test's Python exporter).
/// A type of its own: [`Credentials`] itself cannot be written out.
#[derive(Clone, Serialize)]
pub struct CredentialsJson {
    pub api_key: String,
    pub secret: String,
    pub passphrase: String,
}

impl std::fmt::Debug for ScaleAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScaleAccount").field("name", &self.name).field("coin_ids", &self.coin_ids).finish()
    }
}

/// The name of account `number` (1-based), which is also its number on the control routes.
pub fn account_name(number: u32) -> String {
    format!("acct-{number:04}")
}

/// Adds the accounts of `spec` to `exchange`, in order, and opens their positions.
pub fn populate(exchange: &SimExchange, spec: &ScaleSpec) -> Vec<ScaleAccount> {
    (1..=spec.accounts)
        .map(|number| {
            let credentials = Credentials::generate(spec.seed.wrapping_add(u64::from(number)));
            exchange.add_account(credentials.clone(), &spec.coin_ids);
            for index in 0..spec.positions {
                exchange.open_position(&credentials.api_key, position(spec, index));
            }
            let Credentials { api_key, secret, passphrase } = credentials;
            let credentials = CredentialsJson { api_key, secret, passphrase };
            ScaleAccount { name: account_name(number), credentials, coin_ids: spec.coin_ids.clone() }
        })
        .collect()
}

/// The `index`th position of an account: coins and contracts in turn, sides alternating.
fn position(spec: &ScaleSpec, index: u32) -> NewPosition {
    let i = index as usize;
    let size = Decimal::from(index + 1);
    NewPosition {
        coin_id: spec.coin_ids[i % spec.coin_ids.len()],
        contract_id: CONTRACTS[i % CONTRACTS.len()].0,
        side: if index.is_multiple_of(2) { "LONG" } else { "SHORT" }.to_owned(),
        margin_mode: "SHARED".to_owned(),
        leverage: Decimal::from(10),
        size,
        open_value: size * Decimal::from(100),
    }
}

/// Writes `dir/accounts.yml` (the exporter's `--config.file`, credentials in files under
/// `dir/secrets/`) and `dir/credentials.json` (everything in one file, for other tools).
///
/// # Errors
/// When a file cannot be written.
pub fn write_account_files(dir: &Path, accounts: &[ScaleAccount]) -> std::io::Result<()> {
    let secrets = dir.join("secrets");
    std::fs::create_dir_all(&secrets)?;
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o700))?;
    let mut yaml = String::from("accounts:\n");
    for account in accounts {
        let c = &account.credentials;
        let _ = writeln!(yaml, "  - name: {}\n    coin_ids: {:?}\n    credentials:", account.name, account.coin_ids);
        for (field, value) in [("api_key", &c.api_key), ("secret", &c.secret), ("passphrase", &c.passphrase)] {
            let path = secrets.join(format!("{}.{field}", account.name));
            write_private(&path, value.as_bytes())?;
            // A JSON string is a YAML double-quoted string: any path reads back as it is.
            let quoted = serde_json::to_string(&path.to_string_lossy()).map_err(std::io::Error::other)?;
            let _ = writeln!(yaml, "      {field}: {{file: {quoted}}}");
        }
    }
    std::fs::write(dir.join("accounts.yml"), yaml)?;
    let json = serde_json::to_vec_pretty(accounts).map_err(std::io::Error::other)?;
    write_private(&dir.join("credentials.json"), &json)
}

/// Writes a file only its owner can read: it holds (simulated) credentials.
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.write_all(contents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimOptions;

    #[test]
    fn every_account_gets_its_own_key_positions_and_private_files() {
        let exchange = SimExchange::new(SimOptions::default());
        let spec = ScaleSpec { accounts: 3, coin_ids: vec![1, 2], positions: 5, seed: 7 };
        let accounts = populate(&exchange, &spec);
        let keys: std::collections::BTreeSet<_> = accounts.iter().map(|a| a.credentials.api_key.clone()).collect();
        assert_eq!(keys.len(), 3);
        let key = &accounts[2].credentials.api_key;
        let positions = |coin| exchange.account_json(key, coin)["position"].as_array().map_or(0, Vec::len);
        assert_eq!((positions(1), positions(2)), (3, 2));

        let dir = std::env::temp_dir().join(format!("capi-scale-test-{}", std::process::id()));
        write_account_files(&dir, &accounts).unwrap();
        let mode = |name: &str| std::fs::metadata(dir.join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            (mode("credentials.json"), mode("secrets"), mode("secrets/acct-0001.secret")),
            (0o600, 0o700, 0o600)
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
