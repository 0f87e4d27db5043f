//! The state file: each account's bill cursor and counters, saved after every poll.
//!
//! A write is atomic (temporary file, fsync, rename, fsync of the folder), so a crash at any
//! moment leaves either the old or the new file. State that cannot be read is never overwritten:
//! a file that cannot be read at all (permissions, a directory, a FIFO, too large) stops the
//! start with one line saying why; a corrupt file is moved aside; a file with a bad entry is
//! copied aside before anything is written, and that account counts afresh. Cursor and counters
//! of an account are always saved together, so after a restart the cursor re-reads exactly the
//! bills whose counting was lost. Pollers that finish while a write is running are saved
//! together by the next write (group commit), so many accounts do not mean many writes.
//!
//! One process uses a state file at a time: it holds a lock on `<file>.lock` while it runs, and
//! a second one refuses to start, since two writers would each drop the other's counts. The file
//! is readable by the exporter's user only: it holds balances and sums.

use super::cursor::{known, CursorState, KnownValues};
use super::ledger::Ledger;
use crate::api::model::MAX_BILL_ID_BYTES;
use crate::files::{describe_io_error, read_bounded, without_quoted_value, FileError};
use crate::snapshot::counters::{
    BillCounters, Direction, FlowKey, LatestBalance, Loss, MAX_BUSINESS_TYPES, MAX_COINS, MAX_LABEL_BYTES, OTHER,
};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tracing::warn;

const FORMAT: u32 = 1;
/// The largest state file read. One account's entry is a few KiB to a few hundred; 190 busy
/// accounts stay far below this, and a file beyond it was not written by this exporter.
pub const MAX_STATE_BYTES: u64 = 256 << 20;
/// Counts above this are not exact as the float Prometheus reads (2^53), and were not written by
/// this exporter.
const MAX_EXACT_COUNT: u64 = 1 << 53;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read state file {path}: {}; it is left as it is (fix its permissions, or move it away to count afresh)", describe_io_error(.error))]
    Read { path: PathBuf, error: std::io::Error },
    #[error("state file {path} is {what}, not a regular file; give --state.file the path of a file")]
    NotAFile { path: PathBuf, what: &'static str },
    #[error("state file {path} is larger than {} MiB, more than this exporter writes; it is left as it is (move it away to count afresh)", MAX_STATE_BYTES >> 20)]
    TooLarge { path: PathBuf },
    #[error("state file {path} is not valid ({detail})")]
    Corrupt { path: PathBuf, detail: String },
    #[error("state file {path} was written by a newer exporter (format {format}; this one reads {FORMAT}); it is left as it is (run the newer version, or move the file away to count afresh)")]
    Newer { path: PathBuf, format: u32 },
    #[error(
        "state file {path} is in use by another process (it holds {lock}); give each exporter a state file of its own"
    )]
    InUse { path: PathBuf, lock: PathBuf },
    #[error("cannot lock state file {path} with {lock}: {} (let the exporter's user write the file's folder, and the lock file if it is there)", describe_io_error(.error))]
    Lock { path: PathBuf, lock: PathBuf, error: std::io::Error },
    #[error("cannot keep {what} state file {path} as {aside}: {}; it is left as it is (make its folder writable, check the disk has room, or move it away)", describe_io_error(.error))]
    CannotKeep { what: &'static str, path: PathBuf, aside: PathBuf, error: std::io::Error },
    #[error("cannot write state file {path}: {}; bills counted since the last save are not shown until a save succeeds (let the exporter's user write the file and its folder, and check the disk has room)", describe_io_error(.error))]
    Write { path: PathBuf, error: std::io::Error },
}

/// Each account's entry, kept as raw JSON: entries of accounts no longer configured survive
/// untouched, and an entry is read only when its account is restored.
type RawEntries = BTreeMap<String, Box<RawValue>>;

/// The file's layout; written from borrowed entries, read into owned ones.
#[derive(Debug, Serialize, Deserialize)]
struct StateFile<E = RawEntries> {
    format: u32,
    accounts: E,
}

impl StateFile {
    /// The bytes of a state file holding `accounts`.
    fn bytes(accounts: &RawEntries) -> Vec<u8> {
        serde_json::to_vec(&StateFile { format: FORMAT, accounts }).expect("state is plain data")
    }
}

/// What opening the state file found, besides refusals.
#[derive(Debug, PartialEq, Eq)]
pub enum Opened {
    /// No file yet: it is created at the first save.
    Missing,
    /// Entries of this many accounts were read.
    Loaded { accounts: usize },
    /// The file was not valid JSON of this format: it was renamed `aside`, and every account
    /// counts afresh.
    MovedAside { aside: PathBuf, error: String },
    /// Some entries are not valid: the file as it was is copied to `kept`, and those accounts
    /// count afresh. Each entry with what is wrong with it.
    BadEntries { kept: PathBuf, entries: Vec<(String, String)> },
}

/// Entries dropped for accounts not polled (see [`StateStore::forget_others`]), and where the
/// file holding them was copied.
#[derive(Debug)]
pub struct Forgotten {
    pub accounts: Vec<String>,
    pub kept: PathBuf,
    /// Why the state file could not be written without them, if it could not: the next save
    /// that succeeds drops them, and until then a restart would resume them from there.
    pub not_rewritten: Option<StateError>,
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
    /// Absent from files of earlier versions: the ledger check then begins afresh.
    #[serde(default)]
    ledger: Ledger,
    /// Absent from files of earlier versions: taken as the first millisecond not settled, the
    /// latest that can be claimed.
    #[serde(default)]
    counting_since: Option<i64>,
    /// Absent from files of earlier versions: taken from the next account answer.
    #[serde(default)]
    exchange_account: Option<String>,
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
    pub ledger: Ledger,
}

#[derive(Debug, Default)]
struct Entries {
    accounts: RawEntries,
    /// Bumped at every change, so a writer knows whether its change is on disk yet.
    generation: u64,
}

#[derive(Debug)]
pub struct StateStore {
    path: PathBuf,
    entries: Mutex<Entries>,
    /// The generation last written to disk; held while writing, by the write itself, so that a
    /// save given up on (see [`SAVE_PATIENCE`]) leaves no second write beside it.
    written: Arc<tokio::sync::Mutex<u64>>,
    /// The lock on `<file>.lock`, held while the store lives; none over bytes given.
    _lock: Option<std::fs::File>,
}

/// What `--config.check` finds in a state file that a start acts on.
#[derive(Debug, Default)]
pub struct Checked {
    /// Whether the file exists: `--bills.backfill` applies only to a start without one.
    pub exists: bool,
    /// Why the file as a whole is not valid: a start keeps it aside, and every account counts afresh.
    pub invalid: Option<String>,
    /// The accounts whose entries a start resumes.
    pub resumed: Vec<String>,
    /// The entries not valid, with why: a start copies the file aside, and those accounts count
    /// afresh.
    pub bad_entries: Problems,
}

/// Accounts, each with a problem of its saved entry.
type Problems = Vec<(String, String)>;

/// The entries that cannot be read, with why; and the entries whose saved ledger check alone
/// cannot, with why.
fn examine(accounts: &RawEntries) -> (Problems, Problems) {
    let (mut bad, mut ledgers) = (Vec::new(), Vec::new());
    for (account, entry) in accounts {
        match SavedAccount::read(entry) {
            Ok((_, Some(problem))) => ledgers.push((account.clone(), problem)),
            Ok((_, None)) => {}
            Err(detail) => bad.push((account.clone(), detail)),
        }
    }
    (bad, ledgers)
}

/// How long a save waits for the one before it, and for its own write: both take milliseconds,
/// so a wait this long is a file system that stopped answering. The poll goes on, the failure
/// counted and logged, rather than every poller waiting with nothing said.
const SAVE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

impl StateStore {
    /// Opens the state file. A missing file is an empty store; a corrupt one is moved aside
    /// and the store starts empty; one with bad entries is copied aside, and those entries are
    /// left out of the next write. A file that cannot be read, or kept aside, is an error:
    /// nothing may overwrite it.
    pub fn open(path: &Path) -> Result<(Self, Opened), StateError> {
        let path = &followed(path)?;
        // Read once before the lock, so that a path refused (a directory, a device) gets no lock
        // file beside it; then again under the lock, for what a process that held it until now
        // saved meanwhile.
        read(path)?;
        let lock = lock(path)?;
        let store = |accounts| Self { _lock: Some(lock), ..Self::new(path, accounts) };
        let Some(bytes) = read(path)? else { return Ok((store(BTreeMap::new()), Opened::Missing)) };
        let file = match parse(path, &bytes) {
            Ok(file) => file,
            Err(error @ StateError::Newer { .. }) => return Err(error),
            Err(error) => {
                let aside = keep_aside(path, CORRUPT, |aside| std::fs::rename(path, aside))?;
                let opened = Opened::MovedAside { aside, error: error.to_string() };
                return Ok((store(BTreeMap::new()), opened));
            }
        };
        let mut accounts = file.accounts;
        let (bad, ledgers) = examine(&accounts);
        for (account, problem) in ledgers {
            warn!(path = %path.display(), account, problem,
                "the ledger check saved for this account is not valid; it begins afresh, and the bill counts go on");
        }
        let opened = if bad.is_empty() {
            Opened::Loaded { accounts: accounts.len() }
        } else {
            let kept = keep_aside(path, CORRUPT, |aside| std::fs::copy(path, aside).map(drop))?;
            // The copy holds them; the next write leaves them out, so that an entry of an
            // account no longer configured is not copied aside again at every start.
            for (account, _) in &bad {
                accounts.remove(account);
            }
            Opened::BadEntries { kept, entries: bad }
        };
        Ok((store(accounts), opened))
    }

    /// What [`StateStore::open`] would stop at, found without opening the store (no lock, no
    /// file kept aside): a path that is no regular file or cannot be read, a newer format; and
    /// what it would act on: a file or entries not valid, the accounts it would resume.
    pub fn check(path: &Path) -> Result<Checked, StateError> {
        let path = &followed(path)?;
        let Some(bytes) = read(path)? else { return Ok(Checked::default()) };
        let accounts = match parse(path, &bytes) {
            Ok(file) => file.accounts,
            Err(error @ StateError::Newer { .. }) => return Err(error),
            Err(error) => {
                let invalid = format!(
                    "{error}; a start keeps it aside as {}{CORRUPT}, and bill counting begins afresh",
                    path.display()
                );
                return Ok(Checked { exists: true, invalid: Some(invalid), ..Checked::default() });
            }
        };
        let (bad_entries, _) = examine(&accounts);
        let resumed = accounts.into_keys().filter(|name| !bad_entries.iter().any(|(bad, _)| bad == name)).collect();
        Ok(Checked { exists: true, invalid: None, resumed, bad_entries })
    }

    fn new(path: &Path, accounts: RawEntries) -> Self {
        Self {
            path: path.to_path_buf(),
            entries: Mutex::new(Entries { accounts, generation: 0 }),
            written: Arc::default(),
            _lock: None,
        }
    }

    /// A store over a state file's content, without touching the file (tests and fuzzing read
    /// untrusted content through this).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self, StateError> {
        Ok(Self::new(path, parse(path, bytes)?.accounts))
    }

    /// Drops the entries of accounts not in `kept`, once they are written aside, alone, as the
    /// state file `<file>.unpolled`: a start with the wrong accounts (a wrong flag) must not lose
    /// the others' state for good. Alone, so that taking one back takes back no other account's
    /// older state (whose counters would fall, and count again). Then writes the state file
    /// without them at once: left in it until some poll saved, they would come back at a restart
    /// before that, and count again what another replica or name counted meanwhile.
    ///
    /// The copy is written without holding the entries, which every poller's save takes: a slow
    /// file system holds up this call alone. Until it is written, saves keep the entries.
    pub async fn forget_others(&self, kept: &[&str]) -> Result<Option<Forgotten>, StateError> {
        let others: RawEntries = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            let others = entries.accounts.iter().filter(|(account, _)| !kept.contains(&account.as_str()));
            others.map(|(account, entry)| (account.clone(), entry.clone())).collect()
        };
        if others.is_empty() {
            return Ok(None);
        }
        let (path, bytes) = (self.path.clone(), StateFile::bytes(&others));
        // If this fails, they stay, and are looked at again next start.
        let keep = move || keep_aside(&path, UNPOLLED, |aside| write_atomically(aside, &bytes));
        let kept = tokio::task::spawn_blocking(keep).await.map_err(|e| self.write_error(e))??;
        let dropped = |accounts: &mut RawEntries| {
            accounts.retain(|account, _| !others.contains_key(account));
            true
        };
        let not_rewritten = self.write_with(dropped).await.err();
        Ok(Some(Forgotten { accounts: others.into_keys().collect(), kept, not_rewritten }))
    }

    /// The names of the accounts that have an entry.
    pub fn accounts(&self) -> Vec<String> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).accounts.keys().cloned().collect()
    }

    /// The saved state of one account, if there is a readable one.
    pub fn restore(&self, account: &str) -> Result<Option<Restored>, StateError> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = entries.accounts.get(account) else { return Ok(None) };
        // A ledger check not valid was said at open; it begins afresh.
        let (saved, _) = SavedAccount::read(entry).map_err(|detail| StateError::Corrupt {
            path: self.path.clone(),
            detail: format!("entry of account {account:?}: {detail}"),
        })?;
        Ok(Some(saved.into_restored()))
    }

    /// Records one account's state and returns once it is on disk, or with an error after
    /// `SAVE_PATIENCE`.
    pub async fn save(
        &self,
        account: &str,
        cursor: &CursorState,
        counters: &BillCounters,
        ledger: &Ledger,
    ) -> Result<(), StateError> {
        let saved = SavedAccount::new(cursor, counters, ledger.clone());
        let value = serde_json::value::to_raw_value(&saved).expect("state is plain data");
        self.write_with(|accounts| {
            accounts.insert(account.to_string(), value);
            true
        })
        .await
    }

    /// Drops one account's entry, if it has one, and returns once that is on disk: its counting
    /// begins afresh, and a restart must not bring back the counts it no longer shows.
    pub async fn forget(&self, account: &str) -> Result<(), StateError> {
        self.write_with(|accounts| accounts.remove(account).is_some()).await
    }

    /// Changes the entries by `change`, which says whether it changed any, and writes them out;
    /// returns once they are on disk, or with an error after `SAVE_PATIENCE`.
    async fn write_with(&self, change: impl FnOnce(&mut RawEntries) -> bool) -> Result<(), StateError> {
        let mine = {
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if !change(&mut entries.accounts) {
                return Ok(());
            }
            entries.generation += 1;
            entries.generation
        };
        let hung = || {
            let waited = SAVE_PATIENCE.as_secs();
            self.write_error(format!("a write has not finished in {waited} s; the file system may hang"))
        };
        let mut written =
            tokio::time::timeout(SAVE_PATIENCE, self.written.clone().lock_owned()).await.map_err(|_| hung())?;
        if *written >= mine {
            return Ok(()); // another poller's write already carried this change
        }
        let (bytes, generation) = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            (StateFile::bytes(&entries.accounts), entries.generation)
        };
        if bytes.len() as u64 > MAX_STATE_BYTES {
            // The file on disk stays one the next start can read.
            return Err(self.write_error(format!("it would be larger than {} MiB", MAX_STATE_BYTES >> 20)));
        }
        let path = self.path.clone();
        let write = tokio::task::spawn_blocking(move || {
            write_atomically(&path, &bytes).map_err(|error| StateError::Write { path, error })?;
            *written = generation;
            Ok(())
        });
        tokio::time::timeout(SAVE_PATIENCE, write).await.map_err(|_| hung())?.map_err(|e| self.write_error(e))?
    }

    /// A failed save, for a reason that is no I/O error of its own.
    fn write_error(&self, reason: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StateError {
        StateError::Write { path: self.path.clone(), error: std::io::Error::other(reason) }
    }
}

/// The file's content, `None` if there is no file. Only a regular file of at most
/// [`MAX_STATE_BYTES`] is read: a FIFO would block the start, a device never end.
fn read(path: &Path) -> Result<Option<Vec<u8>>, StateError> {
    match read_bounded(path, MAX_STATE_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(FileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(FileError::Io(error)) => Err(StateError::Read { path: path.to_path_buf(), error }),
        Err(FileError::NotAFile(what)) => Err(StateError::NotAFile { path: path.to_path_buf(), what }),
        // (Not text comes only from reading text.)
        Err(FileError::TooLarge(_) | FileError::NotText) => Err(StateError::TooLarge { path: path.to_path_buf() }),
    }
}

/// The file a symbolic link at `path` names, so that the lock is the file's own whatever path
/// names it, and a save replaces the file rather than the link (a rename replaces a link with a
/// file of its own, and the file the link named is never written again).
fn followed(path: &Path) -> Result<PathBuf, StateError> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_symlink());
    if !is_link {
        return Ok(path.to_path_buf());
    }
    std::fs::canonicalize(path)
        .map_err(|_| StateError::NotAFile { path: path.to_path_buf(), what: "a symbolic link to nothing" })
}

/// The suffixes of what is kept aside: a copy of a file not valid, and the entries of accounts
/// not polled, dropped from the file.
const CORRUPT: &str = ".corrupt";
const UNPOLLED: &str = ".unpolled";

/// Keeps the file as `<path><suffix>` (or `<suffix>.1`, `.2`... when taken) by `keep`, which
/// renames or copies it there. Failing to keep it is an error: it must not be overwritten.
fn keep_aside(path: &Path, suffix: &str, keep: impl Fn(&Path) -> std::io::Result<()>) -> Result<PathBuf, StateError> {
    let name = |n: u32| beside(path, &if n == 0 { suffix.to_owned() } else { format!("{suffix}.{n}") });
    let what = if suffix == UNPOLLED { "the entries of accounts not polled from the" } else { "the unreadable" };
    let cannot_keep = |aside: PathBuf, error| StateError::CannotKeep { what, path: path.to_path_buf(), aside, error };
    let Some(aside) = (0..100).map(name).find(|aside| !aside.exists()) else {
        let error = std::io::Error::other("its 100 earlier copies are all there; remove those no longer needed");
        return Err(cannot_keep(name(99), error));
    };
    keep(&aside).map_err(|error| cannot_keep(aside.clone(), error))?;
    Ok(aside)
}

/// Parses a state file's content; `path` only names it in errors.
fn parse(path: &Path, bytes: &[u8]) -> Result<StateFile, StateError> {
    let corrupt = |detail: String| StateError::Corrupt { path: path.to_path_buf(), detail };
    let file: StateFile = serde_json::from_slice(bytes).map_err(|e| corrupt(without_quoted_value(e)))?;
    if file.format > FORMAT {
        return Err(StateError::Newer { path: path.to_path_buf(), format: file.format });
    }
    if file.format != FORMAT {
        return Err(corrupt(format!("format {} is not the supported {FORMAT}", file.format)));
    }
    Ok(file)
}

/// Writes `bytes` as the file at `path`, readable by the exporter's user only, in full or not at
/// all, and durably.
/// A write that fails leaves no temporary file to fill a full disk further.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = beside(path, ".tmp");
    let written = std::fs::File::create(&temporary).and_then(|mut file| {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(error) = written.and_then(|()| std::fs::rename(&temporary, path)) {
        let _ = std::fs::remove_file(&temporary);
        return Err(error);
    }
    // The rename itself is only durable once the folder is synced.
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::File::open(folder).and_then(|f| f.sync_all())
}

/// `<path><suffix>`: the files kept beside the state file (its copies, its temporary file, its
/// lock).
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut beside = path.as_os_str().to_owned();
    beside.push(suffix);
    PathBuf::from(beside)
}

/// Takes the lock on `<path>.lock`, which the returned file holds until it is closed (by the
/// operating system too, if the process dies).
fn lock(path: &Path) -> Result<std::fs::File, StateError> {
    let lock_path = beside(path, ".lock");
    let failed = |error| StateError::Lock { path: path.to_path_buf(), lock: lock_path.clone(), error };
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(&lock_path);
    let file = file.map_err(failed)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(StateError::InUse { path: path.to_path_buf(), lock: lock_path.clone() })
        }
        Err(std::fs::TryLockError::Error(error)) => Err(failed(error)),
    }
}

/// Times a saved cursor can hold: from the epoch to the year 2100. Anything else is not a time
/// this exporter wrote, and would make the cursor's arithmetic meaningless.
const PLAUSIBLE_MS: std::ops::RangeInclusive<i64> = 0..=4_102_444_800_000;

impl SavedAccount {
    /// Reads and checks an entry: every value must be one this exporter could have written. A
    /// ledger check it cannot read (another version's form, a running total it does not know)
    /// or with an implausible time (one an earlier version wrote from an `updated_time` of -1) is
    /// replaced by a new one, with what was wrong: it is a check of the counts, and dropping the
    /// cursor and counts for it would lose bills.
    fn read(entry: &RawValue) -> Result<(Self, Option<String>), String> {
        let (mut saved, unreadable) = match serde_json::from_str::<Self>(entry.get()) {
            Ok(saved) => (saved, None),
            Err(error) => {
                let problem = without_quoted_value(error);
                (Self::without_ledger(entry).ok_or_else(|| problem.clone())?, Some(problem))
            }
        };
        saved.check()?;
        let ledger_problem = unreadable.or_else(|| saved.ledger.check(&PLAUSIBLE_MS).err());
        if ledger_problem.is_some() {
            saved.ledger = Ledger::default();
        }
        Ok((saved, ledger_problem))
    }

    /// The entry read again without its ledger check, if that is what could not be read.
    fn without_ledger(entry: &RawValue) -> Option<Self> {
        let mut fields: serde_json::Map<String, serde_json::Value> = serde_json::from_str(entry.get()).ok()?;
        fields.remove("ledger")?;
        serde_json::from_value(serde_json::Value::Object(fields)).ok()
    }

    fn check(&self) -> Result<(), String> {
        let times = [self.settled_through].into_iter().chain(self.counting_since).chain(self.seen.values().copied());
        if let Some(bad) = times.into_iter().find(|t| !PLAUSIBLE_MS.contains(t)) {
            return Err(format!("time {bad} is not a plausible time in milliseconds"));
        }
        let counts = self.bills.iter().map(|c| c.count).chain(self.shortfalls.values().copied());
        if let Some(bad) = counts.chain([self.truncated_queries]).find(|count| *count > MAX_EXACT_COUNT) {
            return Err(format!("count {bad} is larger than any this exporter counts (2^53)"));
        }
        if let Some(bad) = self.amounts.iter().chain(&self.fill_fees).find(|flow| flow.sum.is_sign_negative()) {
            return Err(format!("sum {} is negative; sums are of absolute values", bad.sum));
        }
        self.check_labels()?;
        self.check_known()?;
        if self.exchange_account.as_ref().is_some_and(|id| id.len() > MAX_LABEL_BYTES) {
            return Err(format!("an exchange account id longer than {MAX_LABEL_BYTES} bytes"));
        }
        Ok(())
    }

    /// Sums and balances are of coins and business types that have a count, and those are
    /// within the limits of the counters' labels, as the counters keep them.
    fn check_labels(&self) -> Result<(), String> {
        let counted: BTreeSet<(&str, &str)> =
            self.bills.iter().map(|c| (c.coin.as_str(), c.business_type.as_str())).collect();
        let flows = self.amounts.iter().chain(&self.fill_fees);
        if let Some(flow) = flows.into_iter().find(|f| !counted.contains(&(f.coin.as_str(), f.business_type.as_str())))
        {
            return Err(format!(
                "a sum of coin {:?}, business type {:?}, which have no count",
                flow.coin, flow.business_type
            ));
        }
        let coins: BTreeSet<&str> = counted.iter().map(|(coin, _)| *coin).collect();
        if let Some(coin) = self.balances.keys().find(|coin| !coins.contains(coin.as_str())) {
            return Err(format!("a balance of coin {coin:?}, which has no count"));
        }
        let types: BTreeSet<&str> = counted.iter().map(|(_, kind)| *kind).collect();
        for (what, values, max) in [("coins", coins, MAX_COINS), ("business types", types, MAX_BUSINESS_TYPES)] {
            // As the counters keep them: at most max - 1 values of their own, and "other".
            let own = values.iter().filter(|v| **v != OTHER).count();
            if own >= max {
                return Err(format!("{own} {what}, more than the {} this exporter keeps", max - 1));
            }
            if let Some(long) = values.iter().find(|v| v.len() > MAX_LABEL_BYTES) {
                return Err(format!("{what} value {long:?} is longer than {MAX_LABEL_BYTES} bytes"));
            }
        }
        Ok(())
    }

    /// The known values and the ids of unsettled bills are within the cursor's limits.
    fn check_known(&self) -> Result<(), String> {
        let known = &self.known;
        let too_many = [
            ("known business types", known.business_types.len(), known::MAX_BUSINESS_TYPES),
            ("known coins", known.coins.len(), known::MAX_COINS),
            ("known symbols", known.symbol_count(), known::MAX_SYMBOLS),
        ];
        if let Some((what, count, max)) = too_many.into_iter().find(|(_, count, max)| count > max) {
            return Err(format!("{count} {what}, more than the {max} this exporter keeps"));
        }
        let symbols = known.symbols.iter().flat_map(|(coin, symbols)| std::iter::once(coin).chain(symbols.keys()));
        let values = known.business_types.keys().chain(known.coins.keys()).chain(symbols);
        if let Some(long) = values.into_iter().find(|v| v.len() > known::MAX_VALUE_BYTES) {
            return Err(format!("known value {long:?} is longer than {} bytes", known::MAX_VALUE_BYTES));
        }
        match self.seen.keys().find(|id| id.len() > MAX_BILL_ID_BYTES) {
            Some(id) => Err(format!("bill id {id:?} is longer than {MAX_BILL_ID_BYTES} bytes")),
            None => Ok(()),
        }
    }

    fn new(cursor: &CursorState, counters: &BillCounters, ledger: Ledger) -> Self {
        // A sum of zero is one shown before any bill moved it, and shown again after a restore.
        let flows = |sums: &BTreeMap<FlowKey, Decimal>| {
            sums.iter()
                .filter(|(_, sum)| !sum.is_zero())
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
            ledger,
            counting_since: counters.counting_since_ms,
            exchange_account: counters.exchange_account_id.clone(),
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
                // Earlier versions kept one for `other`: whichever coin past the limit came last.
                balances: self.balances.into_iter().filter(|(coin, _)| coin != OTHER).collect(),
                shortfalls,
                counting_since_ms: Some(self.counting_since.unwrap_or(self.settled_through.saturating_add(1))),
                exchange_account_id: self.exchange_account,
            },
            ledger: self.ledger,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fields::Millis;
    use crate::api::model::{AccountInfo, Bill, Collateral};

    fn temp_path(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("capi-state-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("state.json")
    }

    fn sample_bill() -> Bill {
        Bill {
            id: "686960019383517338".into(),
            coin: "USDT".into(),
            symbol: "cmt_btcusdt".into(),
            business_type: "position_funding".into(),
            amount: Some(Decimal::new(-31, 4)),
            balance: Some(Decimal::new(125, 1)),
            fill_fee: Some(Decimal::new(-6, 2)),
            ctime_ms: 1713339011237,
        }
    }

    /// A ledger with a comparison begun and a bill not compared yet.
    fn sample_ledger() -> Ledger {
        let record = |updated_ms| Collateral {
            coin_id: Some("2".into()),
            cum_position_funding_amount: Some(Decimal::new(-5, 1)),
            updated_time: Some(Millis(updated_ms)),
            ..Collateral::default()
        };
        let answer = |updated_ms| AccountInfo { collateral: vec![record(updated_ms)], ..AccountInfo::default() };
        let mut ledger = Ledger::default();
        ledger.observe(2, &answer(1713338000000), 1713338000000);
        ledger.settle(1713339000000);
        ledger.count(&sample_bill(), 2);
        ledger
    }

    fn sample() -> (CursorState, BillCounters) {
        let mut counters = BillCounters::default();
        counters.count(&sample_bill());
        counters.shortfalls = [(Loss::Certain, 2), (Loss::Possible, 1)].into();
        counters.counting_since_ms = Some(1713338000000);
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
        let (store, opened) = StateStore::open(&path).unwrap();
        assert_eq!(opened, Opened::Missing);
        let (cursor, counters) = sample();
        let ledger = sample_ledger();
        assert!(!ledger.differences().is_empty());
        store.save("main", &cursor, &counters, &ledger).await.unwrap();
        drop(store);
        let (reopened, opened) = StateStore::open(&path).unwrap();
        assert_eq!(opened, Opened::Loaded { accounts: 1 });
        assert_eq!(reopened.restore("main").unwrap(), Some(Restored { cursor, counters, ledger }));
        assert_eq!(reopened.restore("other").unwrap(), None);
    }

    #[tokio::test]
    async fn a_forgotten_entry_is_gone_from_the_file_and_the_others_stay() {
        let path = temp_path("forget");
        let _ = std::fs::remove_file(&path);
        let (store, _) = StateStore::open(&path).unwrap();
        store.forget("main").await.unwrap();
        assert!(!path.exists(), "nothing to forget writes nothing");
        let (cursor, counters) = sample();
        for account in ["main", "other"] {
            store.save(account, &cursor, &counters, &Ledger::default()).await.unwrap();
        }
        store.forget("main").await.unwrap();
        drop(store);
        let (reopened, opened) = StateStore::open(&path).unwrap();
        assert_eq!(opened, Opened::Loaded { accounts: 1 });
        assert_eq!(reopened.restore("main").unwrap(), None);
        assert_eq!(reopened.restore("other").unwrap().map(|r| r.counters), Some(counters));
    }

    #[tokio::test]
    async fn a_balance_of_other_saved_by_earlier_versions_is_not_restored() {
        let path = temp_path("other-balance");
        let _ = std::fs::remove_file(&path);
        let (store, _) = StateStore::open(&path).unwrap();
        let (cursor, mut counters) = sample();
        counters.bills.insert((OTHER.into(), "deposit".into()), 1);
        let balance = LatestBalance { ctime_ms: 1713339011237, bill_id: "1".into(), balance: Decimal::ONE };
        counters.balances.insert(OTHER.into(), balance);
        store.save("main", &cursor, &counters, &Ledger::default()).await.unwrap();
        drop(store);
        let restored = StateStore::open(&path).unwrap().0.restore("main").unwrap().unwrap();
        assert!(restored.counters.balances.contains_key("USDT"));
        assert!(!restored.counters.balances.contains_key(OTHER));
    }

    #[test]
    fn truncated_queries_saved_by_earlier_versions_are_certain_shortfalls() {
        let text = r#"{"format":1,"accounts":{"a":{"amounts":[],"balances":{},"bills":[],"fill_fees":[],"seen":{},"settled_through":5,"truncated_queries":3}}}"#;
        let store = StateStore::from_bytes(Path::new("s.json"), text.as_bytes()).unwrap();
        let restored = store.restore("a").unwrap().unwrap();
        assert_eq!(restored.counters.shortfalls, [(Loss::Certain, 3)].into());
        assert_eq!(restored.cursor, CursorState { settled_through: 5, ..CursorState::default() });
        assert_eq!(restored.counters.counting_since_ms, Some(6), "no gap claimed before the first unsettled ms");
    }

    #[tokio::test]
    async fn a_corrupt_file_is_moved_aside_never_overwritten() {
        let path = temp_path("corrupt");
        for suffix in [".corrupt", ".corrupt.1"] {
            let _ = std::fs::remove_file(beside(&path, suffix));
        }
        for (round, suffix) in [(0, ".corrupt"), (1, ".corrupt.1")] {
            let content = format!("{{\"format\":1,\"accounts\":{{ round {round}");
            std::fs::write(&path, &content).unwrap();
            let (store, opened) = StateStore::open(&path).unwrap();
            assert!(
                matches!(&opened, Opened::MovedAside { aside: a, .. } if *a == beside(&path, suffix)),
                "{opened:?}"
            );
            assert_eq!(std::fs::read_to_string(beside(&path, suffix)).unwrap(), content, "kept as it was");
            assert!(!path.exists(), "moved, not copied");
            assert!(store.restore("main").unwrap().is_none());
            let (cursor, counters) = sample();
            store.save("main", &cursor, &counters, &Ledger::default()).await.unwrap();
            drop(store);
            assert_eq!(StateStore::open(&path).unwrap().1, Opened::Loaded { accounts: 1 });
        }
    }

    /// Counts of `n` coins other than USDT, each followed by a comma.
    fn many_coins(n: usize) -> String {
        (0..n).map(|i| format!(r#"{{"coin":"C{i}","business_type":"deposit","count":1}},"#)).collect()
    }

    #[tokio::test]
    async fn a_ledger_check_this_version_cannot_take_begins_afresh_and_the_counts_go_on() {
        let path = temp_path("ledger-other-form");
        let _ = std::fs::remove_file(&path);
        let (store, _) = StateStore::open(&path).unwrap();
        let (cursor, counters) = sample();
        store.save("main", &cursor, &counters, &sample_ledger()).await.unwrap();
        drop(store);
        let text = std::fs::read_to_string(&path).unwrap();
        let (at, ledger_end) = (text.find("\"ledger\":").unwrap(), text.find(",\"counting_since\"").unwrap());
        let ledger = &text[at..ledger_end];
        let other_forms = [
            // Begun at -1, from an `updated_time` of -1, by an earlier version.
            ledger.replace("\"since_ms\":1713338000000", "\"since_ms\":-1"),
            // A running total a later version compares.
            ledger.replacen("\"cum_position_funding_amount\"", "\"cum_later_amount\"", 1),
            // Coins as an earlier version wrote them, in a map.
            ledger.replacen("\"coins\":[", "\"coins\":{\"2\":[", 1).replacen(
                "],\"uncompared\"",
                "]},\"uncompared\"",
                1,
            ),
        ];
        for other in other_forms {
            assert_ne!(other, ledger);
            std::fs::write(&path, text.replace(ledger, &other)).unwrap();
            let (store, opened) = StateStore::open(&path).unwrap();
            assert_eq!(opened, Opened::Loaded { accounts: 1 }, "not a bad entry: {other}");
            let restored = store.restore("main").unwrap().unwrap();
            assert_eq!((&restored.cursor, &restored.counters), (&cursor, &counters));
            assert_eq!(restored.ledger, Ledger::default());
        }
    }

    #[test]
    fn an_entry_within_every_limit_is_good() {
        let (cursor, counters) = sample();
        let good = serde_json::to_string(&SavedAccount::new(&cursor, &counters, sample_ledger())).unwrap();
        let full =
            good.replace(r#""bills":[{"coin":"USDT""#, &format!(r#""bills":[{}{{"coin":"USDT""#, many_coins(30)));
        for entry in [good, full] {
            assert!(SavedAccount::read(&RawValue::from_string(entry.clone()).unwrap()).is_ok(), "{entry}");
        }
    }

    #[tokio::test]
    async fn a_file_with_a_bad_entry_is_kept_aside_before_it_is_written() {
        let path = temp_path("bad-entry");
        let _ = std::fs::remove_file(beside(&path, ".corrupt"));
        let good = serde_json::to_string(&SavedAccount::new(&sample().0, &sample().1, sample_ledger())).unwrap();
        for bad in [
            r#"{"settled_through":"x"}"#.to_string(),
            good.replace(r#""count":1"#, r#""count":"many""#),
            good.replace(r#""count":1"#, r#""count":-1"#),
            good.replace(r#""count":1"#, r#""count":18446744073709551615"#),
            good.replace(r#""sum":"0.0031""#, r#""sum":"NaN""#),
            good.replace(r#""sum":"0.0031""#, r#""sum":"-5""#),
            good.replacen(r#""business_type":"position_funding""#, r#""business_type":"made_up""#, 2),
            good.replace(r#""balances":{"USDT""#, r#""balances":{"BTC""#),
            good.replace(r#""coins":{"USDT""#, &format!(r#""coins":{{"{}""#, "U".repeat(65))),
            good.replace(r#""seen":{"686960019383517338""#, &format!(r#""seen":{{"{}""#, "6".repeat(65))),
            good.replace(r#""bills":[{"coin":"USDT""#, &format!(r#""bills":[{}{{"coin":"USDT""#, many_coins(31))),
        ] {
            assert_ne!(bad, good);
            let content = format!(r#"{{"format":1,"accounts":{{"bad":{bad},"good":{good}}}}}"#);
            std::fs::write(&path, &content).unwrap();
            let (store, opened) = StateStore::open(&path).unwrap();
            let Opened::BadEntries { kept, entries } = opened else { panic!("{bad}: {opened:?}") };
            assert_eq!(entries.iter().map(|(account, _)| account.as_str()).collect::<Vec<_>>(), ["bad"]);
            assert_eq!(std::fs::read_to_string(&kept).unwrap(), content, "kept as it was");
            assert!(store.restore("bad").unwrap().is_none(), "left out of the next write");
            assert!(store.restore("good").unwrap().is_some());
            let (cursor, counters) = sample();
            store.save("bad", &cursor, &counters, &Ledger::default()).await.unwrap();
            std::fs::remove_file(kept).unwrap();
        }
    }

    #[test]
    fn what_cannot_be_read_is_refused_and_left_alone() {
        let dir = temp_path("refused").with_file_name("refused");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a-directory")).unwrap();
        let refused = |path: &Path| StateStore::open(path).map(|(_, opened)| opened).unwrap_err().to_string();
        assert!(refused(&dir.join("a-directory")).contains("is a directory"));
        assert!(refused(Path::new("/dev/zero")).contains("is a special file"));
        let fifo = dir.join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert!(refused(&fifo).contains("is a special file"), "a FIFO is refused, not read");
        let huge = dir.join("huge.json");
        std::fs::File::create(&huge).unwrap().set_len(MAX_STATE_BYTES + 1).unwrap();
        assert!(refused(&huge).contains("larger than 256 MiB"));
        std::fs::write(dir.join("file"), b"").unwrap();
        let error = refused(&dir.join("file").join("state.json"));
        assert!(error.contains("cannot read state file"), "{error}");
        assert!(dir.join("a-directory").is_dir() && fifo.exists() && huge.exists());
        assert!(!dir.join("a-directory.corrupt").exists());
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
    async fn a_save_larger_than_a_start_reads_is_refused_and_the_file_kept() {
        let path = temp_path("too-large");
        let _ = std::fs::remove_file(&path);
        let (store, _) = StateStore::open(&path).unwrap();
        let (cursor, counters) = sample();
        store.save("main", &cursor, &counters, &Ledger::default()).await.unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        // Another account's entry as large as a start reads at most: with it, the file would not be.
        let huge = RawValue::from_string(format!("\"{}\"", "x".repeat(MAX_STATE_BYTES as usize))).unwrap();
        store.entries.lock().unwrap().accounts.insert("huge".into(), huge);
        let error = store.save("main", &cursor, &counters, &sample_ledger()).await.unwrap_err().to_string();
        assert!(error.contains("it would be larger than 256 MiB"), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), on_disk, "the file a start can read stays");
        std::fs::remove_file(&path).unwrap();
    }

    #[tokio::test]
    async fn one_bad_account_entry_does_not_spoil_the_others() {
        let path = temp_path("entry");
        std::fs::write(&path, br#"{"format":1,"accounts":{"bad":{"settled_through":"x"}}}"#).unwrap();
        let (store, opened) = StateStore::open(&path).unwrap();
        let Opened::BadEntries { kept, .. } = opened else { panic!("{opened:?}") };
        assert!(store.restore("bad").unwrap().is_none());
        let (cursor, counters) = sample();
        store.save("good", &cursor, &counters, &Ledger::default()).await.unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.contains(r#""good""#) && !written.contains(r#""bad""#), "{written}");
        // So the next start finds nothing to copy aside again.
        drop(store);
        assert!(matches!(StateStore::open(&path).unwrap().1, Opened::Loaded { accounts: 1 }));
        std::fs::remove_file(kept).unwrap();
    }

    #[tokio::test]
    async fn one_process_at_a_time_uses_a_state_file() {
        let path = temp_path("locked");
        let _ = std::fs::remove_file(&path);
        let (store, _) = StateStore::open(&path).unwrap();
        let error = StateStore::open(&path).unwrap_err().to_string();
        assert!(error.contains("is in use by another process") && error.contains("state.json.lock"), "{error}");
        let (cursor, counters) = sample();
        store.save("main", &cursor, &counters, &Ledger::default()).await.unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "balances and sums are for the exporter's user only");
        drop(store);
        assert_eq!(StateStore::open(&path).unwrap().1, Opened::Loaded { accounts: 1 }, "free once closed");
    }

    #[tokio::test]
    async fn a_state_file_named_through_a_link_is_the_file_it_names() {
        let path = temp_path("linked");
        let link = path.with_file_name("link.json");
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&link);
        std::fs::write(&path, format!("{{\"format\":{FORMAT},\"accounts\":{{}}}}")).unwrap();
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let (store, _) = StateStore::open(&path).unwrap();
        let error = StateStore::open(&link).unwrap_err().to_string();
        assert!(error.contains("is in use by another process"), "{error}");
        drop(store);

        let (store, _) = StateStore::open(&link).unwrap();
        let (cursor, counters) = sample();
        store.save("main", &cursor, &counters, &Ledger::default()).await.unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays a link");
        drop(store);
        assert_eq!(StateStore::open(&path).unwrap().1, Opened::Loaded { accounts: 1 }, "saved in the file it names");

        std::fs::remove_file(&path).unwrap();
        let error = StateStore::open(&link).unwrap_err().to_string();
        assert!(error.contains("a symbolic link to nothing"), "{error}");
    }

    #[test]
    fn a_file_of_a_newer_format_stops_the_start_and_is_left_alone() {
        let path = temp_path("newer");
        let content = r#"{"format":2,"accounts":{}}"#;
        std::fs::write(&path, content).unwrap();
        let error = StateStore::open(&path).unwrap_err().to_string();
        assert!(error.contains("written by a newer exporter (format 2; this one reads 1)"), "{error}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
        assert!(!beside(&path, ".corrupt").exists());
    }

    /// A fresh state file named after `name`, without a copy aside, in which accounts "main" and
    /// "other" are saved, and its store.
    async fn main_and_other_saved(name: &str) -> (PathBuf, StateStore) {
        let path = temp_path(name);
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(beside(&path, ".unpolled"));
        let (store, _) = StateStore::open(&path).unwrap();
        let (cursor, counters) = sample();
        for account in ["main", "other"] {
            store.save(account, &cursor, &counters, &Ledger::default()).await.unwrap();
        }
        (path, store)
    }

    #[tokio::test]
    async fn accounts_not_polled_are_dropped_once_the_file_is_copied_aside() {
        let (path, store) = main_and_other_saved("unpolled").await;
        drop(store);
        let on_disk = std::fs::read_to_string(&path).unwrap();
        let (store, _) = StateStore::open(&path).unwrap();
        assert!(store.forget_others(&["main", "other"]).await.unwrap().is_none(), "nothing to drop, nothing copied");
        let forgotten = store.forget_others(&["main"]).await.unwrap().unwrap();
        assert_eq!(
            (&forgotten.accounts[..], &forgotten.kept),
            (&["other".to_owned()][..], &beside(&path, ".unpolled"))
        );
        assert!(forgotten.not_rewritten.is_none());
        // Dropped from the file at once: a restart before any poll saved must not resume it.
        let on_disk_now = StateStore::from_bytes(&path, &std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk_now.accounts(), ["main"]);
        // Alone: taking it back takes back no other account's older state.
        let (aside, _) = StateStore::open(&forgotten.kept).unwrap();
        assert_eq!(aside.accounts(), ["other"]);
        assert_eq!(
            aside.restore("other").unwrap(),
            StateStore::from_bytes(&path, on_disk.as_bytes()).unwrap().restore("other").unwrap()
        );
        let mode = std::fs::metadata(&forgotten.kept).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "balances and sums are for the exporter's user only");
        drop(aside);
        assert!(store.restore("other").unwrap().is_none());
    }

    /// Copied aside but not written out of the state file (a folder where its temporary file
    /// would go): said, and the next save that succeeds drops them.
    #[tokio::test]
    async fn accounts_dropped_but_not_written_out_are_said_and_go_at_the_next_save() {
        let (path, store) = main_and_other_saved("unpolled-not-rewritten").await;
        let (cursor, counters) = sample();
        std::fs::create_dir_all(beside(&path, ".tmp")).unwrap();
        let forgotten = store.forget_others(&["main"]).await.unwrap().unwrap();
        let error = forgotten.not_rewritten.expect("the state file was not written").to_string();
        assert!(error.starts_with("cannot write state file"), "{error}");
        assert!(beside(&path, ".unpolled").exists(), "copied aside all the same");
        std::fs::remove_dir(beside(&path, ".tmp")).unwrap();
        store.save("main", &cursor, &counters, &Ledger::default()).await.unwrap();
        assert!(!std::fs::read_to_string(&path).unwrap().contains("\"other\""));
    }

    /// A folder where the temporary copy would go makes the copy fail, as a full disk would.
    #[tokio::test]
    async fn accounts_not_polled_stay_when_their_copy_cannot_be_written_and_no_temporary_file_is_left() {
        let (path, store) = main_and_other_saved("unpolled-unwritable").await;
        let aside = beside(&path, ".unpolled");
        let (cursor, counters) = sample();
        std::fs::create_dir_all(beside(&aside, ".tmp")).unwrap();
        let error = store.forget_others(&["main"]).await.unwrap_err().to_string();
        assert!(error.starts_with("cannot keep the entries of accounts not polled from the state file"), "{error}");
        std::fs::remove_dir(beside(&aside, ".tmp")).unwrap();
        store.save("main", &cursor, &counters, &Ledger::default()).await.unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("\"other\""), "kept in the file");
        assert!(!aside.exists() && !beside(&aside, ".tmp").exists());

        // A save whose rename fails (a folder where the file was) leaves no temporary file.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(store.save("main", &cursor, &counters, &Ledger::default()).await.is_err());
        assert!(!beside(&path, ".tmp").exists(), "the temporary file is removed");
        std::fs::remove_dir(&path).unwrap();
    }
}
