//! Immutable per-account snapshots, handed from the poller to the exposition.

use super::counters::BillCounters;
use super::stats::AccountStats;
use crate::api::model::{Account, AccountInfo};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

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
}

impl AccountSlot {
    pub fn new(name: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            latest: RwLock::new(None),
            ever_up: AtomicBool::new(false),
            publications: AtomicU64::new(0),
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
}
