//! Immutable per-account snapshots, handed from the poller to the exposition.

use super::counters::BillCounters;
use super::stats::AccountStats;
use crate::api::model::{Account, AccountInfo};
use rust_decimal::Decimal;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// How much of the recent polls' log an account keeps, and the longest line kept. A poll writes
/// a line per request, one per bill query and one at its end: about 450 bytes, so 4 KiB hold the
/// last nine polls or so, and 1,000 accounts keep 4 MiB.
pub const RECENT_LOG_BYTES: usize = 4096;
pub const MAX_LINE_BYTES: usize = 500;

/// The difference between each of the exchange's running totals and the bills counted, by coin
/// id and field (the ledger check, as of its latest settled comparison).
pub type LedgerDifferences = BTreeMap<(u64, &'static str), Decimal>;

/// Everything `/metrics` shows about one account, as of its last poll.
#[derive(Debug, Clone, Default)]
pub struct AccountSnapshot {
    /// The last good answer of the account query, per coin id. A coin whose query failed keeps
    /// its previous answer: `capi_up` and the request counters tell that it is old.
    pub coins: BTreeMap<u64, Arc<AccountInfo>>,
    /// When each coin's answer in `coins` was fetched (this machine's clock, ms).
    pub fetched_at_ms: BTreeMap<u64, i64>,
    /// Shared with the poller, which copies them only when new bills change them.
    pub counters: Arc<BillCounters>,
    /// Bills created at or before this millisecond are final in the counters.
    pub settled_through_ms: i64,
    pub ledger: LedgerDifferences,
    /// Whether every request of the last poll succeeded.
    pub up: bool,
    /// What the poller did, up to this snapshot.
    pub stats: Arc<AccountStats>,
}

impl AccountSnapshot {
    /// The coins whose figures were fetched at `oldest_ms` or later: older figures are withdrawn
    /// rather than served as if they were current.
    pub fn fresh_coins(&self, oldest_ms: i64) -> impl Iterator<Item = (u64, &AccountInfo)> {
        self.coins
            .iter()
            .filter(move |(coin, _)| self.fetched_at_ms.get(coin).is_some_and(|at| *at >= oldest_ms))
            .map(|(coin, info)| (*coin, info.as_ref()))
    }

    /// The account record, which every coin's answer repeats: taken from the lowest fresh coin.
    pub fn fresh_account(&self, oldest_ms: i64) -> Option<&Account> {
        self.fresh_coins(oldest_ms).find_map(|(_, info)| info.account.as_ref())
    }
}

/// Where one account's poller publishes and the exposition reads.
#[derive(Debug)]
pub struct AccountSlot {
    name: String,
    latest: RwLock<Option<Arc<AccountSnapshot>>>,
    ever_up: AtomicBool,
    /// Snapshots published so far: a rendering that read this count before it began shows at
    /// least every snapshot counted in it.
    publications: AtomicU64,
    /// The log of the recent polls, for the status page: what the poller logs at debug level,
    /// kept whatever the log level (it holds no credentials). Lines ending in `\n`, oldest
    /// first, at most [`RECENT_LOG_BYTES`] in all, in a buffer allocated once.
    recent: Mutex<String>,
}

impl AccountSlot {
    pub fn new(name: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            latest: RwLock::new(None),
            ever_up: AtomicBool::new(false),
            publications: AtomicU64::new(0),
            recent: Mutex::new(String::with_capacity(RECENT_LOG_BYTES)),
        })
    }

    /// The configured account name, the `account` label of every series.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn publish(&self, snapshot: AccountSnapshot) {
        if snapshot.up {
            self.ever_up.store(true, Ordering::Release);
        }
        *self.latest.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(snapshot));
        self.publications.fetch_add(1, Ordering::SeqCst);
    }

    pub fn latest(&self) -> Option<Arc<AccountSnapshot>> {
        self.latest.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn publications(&self) -> u64 {
        self.publications.load(Ordering::SeqCst)
    }

    /// Whether a poll of this account has ever fully succeeded (readiness).
    pub fn has_been_up(&self) -> bool {
        self.ever_up.load(Ordering::Acquire)
    }

    /// Adds a line to the recent polls' log, cut to `MAX_LINE_BYTES`; the oldest lines go to
    /// make room for it.
    pub fn log_recent(&self, line: String) {
        let line = super::stats::cut(line, MAX_LINE_BYTES);
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let excess = (recent.len() + line.len() + 1).saturating_sub(RECENT_LOG_BYTES);
        if excess > 0 {
            // Through the end of the line that holds the last byte in excess.
            let end = recent.match_indices('\n').map(|(at, _)| at + 1).find(|end| *end >= excess);
            let end = end.unwrap_or(recent.len());
            recent.drain(..end);
        }
        recent.push_str(&line);
        recent.push('\n');
    }

    /// The recent polls' log: lines ending in `\n`, oldest first.
    pub fn recent_log(&self) -> String {
        self.recent.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recent_log_keeps_the_last_whole_lines_that_fit_each_cut_to_size() {
        let slot = AccountSlot::new("a");
        for i in 0..1000 {
            slot.log_recent(format!("line {i}"));
        }
        let log = slot.recent_log();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.last(), Some(&"line 999"));
        let first: usize = lines[0].trim_start_matches("line ").parse().unwrap();
        assert_eq!(lines, (first..1000).map(|i| format!("line {i}")).collect::<Vec<_>>());
        // Full: one line more would not fit.
        assert!(log.len() <= RECENT_LOG_BYTES && log.len() + "line 1000\n".len() > RECENT_LOG_BYTES, "{}", log.len());

        slot.log_recent("é".repeat(MAX_LINE_BYTES));
        let log = slot.recent_log();
        assert!(log.ends_with(&format!("\n{}…\n", "é".repeat(MAX_LINE_BYTES / 2))));
        assert!(log.len() <= RECENT_LOG_BYTES && log.starts_with("line "), "whole lines went: {log:.20}");
        assert_eq!(slot.recent.lock().unwrap().capacity(), RECENT_LOG_BYTES, "never grown");
    }
}
