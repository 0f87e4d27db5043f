//! The state file: each account's bill cursor and counters, saved after every poll.
//!
//! A write is atomic (temporary file, fsync, rename, fsync of the folder), so a crash at any
//! moment leaves either the old or the new file. Cursor and counters of an account are always
//! saved together, so after a restart the cursor re-reads exactly the bills whose counting was
//! lost. Pollers that finish while a write is running are saved together by the next write
//! (group commit), so many accounts do not mean many writes.

use super::counters::{BillCounters, Direction, LatestBalance};
use super::cursor::{CursorState, KnownValues, Loss};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const FORMAT: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read state file {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
    #[error("state file {path} is not valid ({detail})")]
    Corrupt { path: PathBuf, detail: String },
    #[error("cannot write state file {path}: {error}")]
    Write { path: PathBuf, error: std::io::Error },
}

#[derive(Debug, Serialize, Deserialize)]
struct StateFile {
    format: u32,
    /// Kept as raw JSON so that entries of accounts no longer configured survive untouched.
    accounts: BTreeMap<String, Value>,
}

/// One account's saved state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SavedAccount {
    settled_through: i64,
    seen: BTreeMap<String, i64>,
    bills: Vec<SavedCount>,
    amounts: Vec<SavedFlow>,
    fill_fees: Vec<SavedFlow>,
    balances: BTreeMap<String, LatestBalance>,
    /// Written by earlier versions: bill queries still full after every split, which are certain
    /// shortfalls. Read into `shortfalls`, never written.
    #[serde(default, skip_serializing)]
    truncated_queries: u64,
    #[serde(default)]
    shortfalls: BTreeMap<Loss, u64>,
    #[serde(default)]
    known: KnownValues,
    #[serde(default)]
    reported: Vec<SavedShortfall>,
}

/// A shortfall already reported for a millisecond that is not settled yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SavedShortfall {
    ms: i64,
    loss: Loss,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SavedCount {
    coin: String,
    business_type: String,
    count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SavedFlow {
    coin: String,
    business_type: String,
    direction: Direction,
    #[serde(with = "rust_decimal::serde::str")]
    sum: Decimal,
}

/// What an account restarts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    pub cursor: CursorState,
    pub counters: BillCounters,
}

#[derive(Debug, Default)]
struct Entries {
    accounts: BTreeMap<String, Value>,
    /// Bumped at every change, so a writer knows whether its change is on disk yet.
    generation: u64,
}

#[derive(Debug)]
pub struct StateStore {
    path: PathBuf,
    entries: Mutex<Entries>,
    /// The generation last written to disk; held while writing.
    written: tokio::sync::Mutex<u64>,
}

impl StateStore {
    /// Opens the state file. A missing file is an empty store; an unreadable or corrupt one is
    /// moved aside (never deleted) and reported, and the store starts empty.
    pub fn open(path: &Path) -> (Self, Result<usize, StateError>) {
        let loaded = load(path);
        let accounts = match &loaded {
            Ok(file) => file.accounts.clone(),
            Err(_) => BTreeMap::new(),
        };
        let report = match loaded {
            Ok(file) => Ok(file.accounts.len()),
            Err(error) => Err(move_aside(path, error)),
        };
        let store = Self {
            path: path.to_path_buf(),
            entries: Mutex::new(Entries { accounts, generation: 0 }),
            written: tokio::sync::Mutex::new(0),
        };
        (store, report)
    }

    /// A store over a state file's content, without touching the file (tests and fuzzing read
    /// untrusted content through this).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self, StateError> {
        let file = parse(path, bytes)?;
        Ok(Self {
            path: path.to_path_buf(),
            entries: Mutex::new(Entries { accounts: file.accounts, generation: 0 }),
            written: tokio::sync::Mutex::new(0),
        })
    }

    /// The names of the accounts that have an entry.
    pub fn accounts(&self) -> Vec<String> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).accounts.keys().cloned().collect()
    }

    /// The saved state of one account, if there is a readable one.
    pub fn restore(&self, account: &str) -> Result<Option<Restored>, StateError> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Some(value) = entries.accounts.get(account) else { return Ok(None) };
        let corrupt = |detail: String| StateError::Corrupt {
            path: self.path.clone(),
            detail: format!("entry of account {account:?}: {detail}"),
        };
        let saved: SavedAccount = serde_json::from_value(value.clone()).map_err(|e| corrupt(e.to_string()))?;
        saved.check_times().map_err(corrupt)?;
        Ok(Some(saved.into_restored()))
    }

    /// Records one account's state and returns once it is on disk.
    pub async fn save(&self, account: &str, cursor: &CursorState, counters: &BillCounters) -> Result<(), StateError> {
        let value = serde_json::to_value(SavedAccount::new(cursor, counters)).expect("state is plain data");
        let mine = {
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries.accounts.insert(account.to_string(), value);
            entries.generation += 1;
            entries.generation
        };
        let mut written = self.written.lock().await;
        if *written >= mine {
            return Ok(()); // another poller's write already carried this change
        }
        let (bytes, generation) = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            let file = StateFile { format: FORMAT, accounts: entries.accounts.clone() };
            (serde_json::to_vec(&file).expect("state is plain data"), entries.generation)
        };
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || write_atomically(&path, &bytes))
            .await
            .map_err(|e| StateError::Write { path: self.path.clone(), error: std::io::Error::other(e) })??;
        *written = generation;
        Ok(())
    }
}

fn load(path: &Path) -> Result<StateFile, StateError> {
    match std::fs::read(path) {
        Ok(bytes) => parse(path, &bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(StateFile { format: FORMAT, accounts: BTreeMap::new() })
        }
        Err(error) => Err(StateError::Read { path: path.to_path_buf(), error }),
    }
}

/// Parses a state file's content; `path` only names it in errors.
fn parse(path: &Path, bytes: &[u8]) -> Result<StateFile, StateError> {
    let corrupt = |detail: String| StateError::Corrupt { path: path.to_path_buf(), detail };
    let file: StateFile = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if file.format != FORMAT {
        return Err(corrupt(format!("format {} is not the supported {FORMAT}", file.format)));
    }
    Ok(file)
}

/// Keeps a bad file for inspection instead of overwriting it at the next save.
fn move_aside(path: &Path, error: StateError) -> StateError {
    if matches!(error, StateError::Corrupt { .. }) {
        let mut aside = path.as_os_str().to_owned();
        aside.push(".corrupt");
        let _ = std::fs::rename(path, &aside);
    }
    error
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let fail = |error| StateError::Write { path: path.to_path_buf(), error };
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut file = std::fs::File::create(&temporary).map_err(fail)?;
    file.write_all(bytes).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    std::fs::rename(&temporary, path).map_err(fail)?;
    // The rename itself is only durable once the folder is synced.
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(folder).and_then(|f| f.sync_all()).map_err(fail)
}

/// Times a saved cursor can hold: from the epoch to the year 2100. Anything else is not a time
/// this exporter wrote, and would make the cursor's arithmetic meaningless.
const PLAUSIBLE_MS: std::ops::RangeInclusive<i64> = 0..=4_102_444_800_000;

impl SavedAccount {
    fn check_times(&self) -> Result<(), String> {
        let times = std::iter::once(self.settled_through).chain(self.seen.values().copied());
        match times.into_iter().find(|t| !PLAUSIBLE_MS.contains(t)) {
            Some(bad) => Err(format!("time {bad} is not a plausible time in milliseconds")),
            None => Ok(()),
        }
    }

    fn new(cursor: &CursorState, counters: &BillCounters) -> Self {
        let flows = |sums: &BTreeMap<super::counters::FlowKey, Decimal>| {
            sums.iter()
                .map(|((coin, business_type, direction), sum)| SavedFlow {
                    coin: coin.clone(),
                    business_type: business_type.clone(),
                    direction: *direction,
                    sum: *sum,
                })
                .collect()
        };
        Self {
            settled_through: cursor.settled_through,
            seen: cursor.seen.iter().map(|(id, t)| (id.clone(), *t)).collect(),
            bills: counters
                .bills
                .iter()
                .map(|((coin, business_type), count)| SavedCount {
                    coin: coin.clone(),
                    business_type: business_type.clone(),
                    count: *count,
                })
                .collect(),
            amounts: flows(&counters.amounts),
            fill_fees: flows(&counters.fill_fees),
            balances: counters.balances.clone(),
            truncated_queries: 0,
            shortfalls: counters.shortfalls.clone(),
            known: cursor.known.clone(),
            reported: cursor.reported.iter().map(|(ms, loss)| SavedShortfall { ms: *ms, loss: *loss }).collect(),
        }
    }

    fn into_restored(self) -> Restored {
        let flows = |saved: Vec<SavedFlow>| {
            saved.into_iter().map(|f| ((f.coin, f.business_type, f.direction), f.sum)).collect()
        };
        let mut shortfalls = self.shortfalls;
        if self.truncated_queries > 0 {
            let certain = shortfalls.entry(Loss::Certain).or_default();
            *certain = certain.saturating_add(self.truncated_queries);
        }
        Restored {
            cursor: CursorState {
                settled_through: self.settled_through,
                seen: self.seen.into_iter().collect::<HashMap<_, _>>(),
                known: self.known,
                reported: self.reported.into_iter().map(|r| (r.ms, r.loss)).collect(),
            },
            counters: BillCounters {
                bills: self.bills.into_iter().map(|c| ((c.coin, c.business_type), c.count)).collect(),
                amounts: flows(self.amounts),
                fill_fees: flows(self.fill_fees),
                balances: self.balances,
                shortfalls,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::model::Bill;

    fn temp_path(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("capi-state-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("state.json")
    }

    fn sample() -> (CursorState, BillCounters) {
        let mut counters = BillCounters::default();
        counters.count(&Bill {
            id: "686960019383517338".into(),
            coin: "USDT".into(),
            symbol: "cmt_btcusdt".into(),
            business_type: "position_funding".into(),
            amount: Some(Decimal::new(-31, 4)),
            balance: Some(Decimal::new(125, 1)),
            fill_fee: Some(Decimal::new(-6, 2)),
            ctime_ms: 1713339011237,
        });
        counters.shortfalls = [(Loss::Certain, 2), (Loss::Possible, 1)].into();
        let mut cursor = CursorState {
            settled_through: 1713339000000,
            seen: [("686960019383517338".to_string(), 1713339011237)].into_iter().collect(),
            ..CursorState::default()
        };
        cursor.known.coins.insert("USDT".into(), 1713339011237);
        cursor.known.symbols.entry("USDT".into()).or_default().insert("cmt_btcusdt".into(), 1713339011237);
        cursor.reported.insert(1713339011237, Loss::Possible);
        (cursor, counters)
    }

    #[tokio::test]
    async fn saved_state_comes_back_exactly() {
        let path = temp_path("roundtrip");
        let _ = std::fs::remove_file(&path);
        let (store, report) = StateStore::open(&path);
        assert_eq!(report.unwrap(), 0);
        let (cursor, counters) = sample();
        store.save("main", &cursor, &counters).await.unwrap();
        let (reopened, report) = StateStore::open(&path);
        assert_eq!(report.unwrap(), 1);
        assert_eq!(reopened.restore("main").unwrap(), Some(Restored { cursor, counters }));
        assert_eq!(reopened.restore("other").unwrap(), None);
    }

    #[test]
    fn truncated_queries_saved_by_earlier_versions_are_certain_shortfalls() {
        let text = r#"{"format":1,"accounts":{"a":{"amounts":[],"balances":{},"bills":[],"fill_fees":[],"seen":{},"settled_through":5,"truncated_queries":3}}}"#;
        let store = StateStore::from_bytes(Path::new("s.json"), text.as_bytes()).unwrap();
        let restored = store.restore("a").unwrap().unwrap();
        assert_eq!(restored.counters.shortfalls, [(Loss::Certain, 3)].into());
        assert_eq!(restored.cursor, CursorState { settled_through: 5, ..CursorState::default() });
    }

    #[tokio::test]
    async fn a_corrupt_file_is_reported_and_kept_aside() {
        let path = temp_path("corrupt");
        std::fs::write(&path, b"{\"format\":1,\"accounts\":{").unwrap();
        let (store, report) = StateStore::open(&path);
        let error = report.unwrap_err().to_string();
        assert!(error.contains("is not valid"), "{error}");
        assert!(store.restore("main").unwrap().is_none());
        let mut aside = path.as_os_str().to_owned();
        aside.push(".corrupt");
        assert!(Path::new(&aside).exists());
        let (cursor, counters) = sample();
        store.save("main", &cursor, &counters).await.unwrap();
        assert!(StateStore::open(&path).1.is_ok());
    }

    #[test]
    fn implausible_times_make_an_entry_corrupt() {
        for settled_through in [i64::MAX, i64::MIN, -1] {
            let text = format!(
                r#"{{"format":1,"accounts":{{"a":{{"amounts":[],"balances":{{}},"bills":[],"fill_fees":[],"seen":{{}},"settled_through":{settled_through},"truncated_queries":0}}}}}}"#
            );
            let store = StateStore::from_bytes(Path::new("s.json"), text.as_bytes()).unwrap();
            let error = store.restore("a").unwrap_err().to_string();
            assert!(error.contains("not a plausible time"), "{error}");
        }
    }

    #[tokio::test]
    async fn one_bad_account_entry_does_not_spoil_the_others() {
        let path = temp_path("entry");
        std::fs::write(&path, br#"{"format":1,"accounts":{"bad":{"settled_through":"x"}}}"#).unwrap();
        let (store, report) = StateStore::open(&path);
        assert!(report.is_ok());
        assert!(store.restore("bad").is_err());
        assert!(store.restore("good").unwrap().is_none());
    }
}
