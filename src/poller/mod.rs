//! Polling: one loop per account, the bill cursor and counters, and the state file.
//!
//! The exchange is rate-limited, so figures are fetched in the background at a fixed interval
//! and `/metrics` serves the last snapshot; a scrape never calls the exchange.

pub mod counters;
pub mod cursor;
pub mod state;

use crate::api::client::{now_millis, MAX_PAGE};
use crate::api::model::AccountInfo;
use crate::api::{Answer, ApiError, Client, Endpoint};
use crate::metrics::{AccountSlot, AccountSnapshot, ExporterMetrics};
use counters::BillCounters;
use cursor::BillCursor;
use state::StateStore;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

/// How one account is polled.
#[derive(Debug, Clone)]
pub struct PollSettings {
    pub interval: Duration,
    /// How late a bill may become visible and still be counted.
    pub overlap: Duration,
    /// How far back bills are counted at the very first start (no saved state).
    pub backfill: Duration,
    /// Bill queries one poll may make at most; a longer scan resumes at the next poll.
    pub bill_queries_per_poll: usize,
}

/// One account's polling loop and everything it keeps between polls.
pub struct AccountPoller {
    client: Client,
    coin_ids: Vec<u64>,
    settings: PollSettings,
    slot: Arc<AccountSlot>,
    metrics: ExporterMetrics,
    store: Option<Arc<StateStore>>,
    cursor: BillCursor,
    counters: BillCounters,
    coins: BTreeMap<u64, AccountInfo>,
    /// The failures of the previous poll and of this one, so that a lasting outage logs once,
    /// not at every poll.
    previous_failures: BTreeSet<String>,
    failures: BTreeSet<String>,
}

impl AccountPoller {
    /// Sets up an account, resuming its bill counting from the state file when it has an entry.
    pub fn new(
        client: Client,
        coin_ids: Vec<u64>,
        settings: PollSettings,
        slot: Arc<AccountSlot>,
        metrics: ExporterMetrics,
        store: Option<Arc<StateStore>>,
    ) -> Self {
        let (cursor, counters) = starting_point(store.as_deref(), slot.name(), &settings);
        // Restored counters show at once, so a restart does not look like a counter reset.
        slot.publish(AccountSnapshot {
            counters: counters.clone(),
            settled_through_ms: cursor.state().settled_through,
            ..AccountSnapshot::default()
        });
        Self {
            client,
            coin_ids,
            settings,
            slot,
            metrics,
            store,
            cursor,
            counters,
            coins: BTreeMap::new(),
            previous_failures: BTreeSet::new(),
            failures: BTreeSet::new(),
        }
    }

    /// Polls every interval, after `start_delay`, until `shutdown` turns true. A poll in
    /// progress is abandoned at shutdown: what the state file holds is always consistent.
    pub async fn run(mut self, start_delay: Duration, mut shutdown: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + start_delay, self.settings.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            tokio::select! {
                _ = self.poll_once() => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// One poll: the account query for every coin, then the new bills; then save and publish.
    pub async fn poll_once(&mut self) {
        let mut healthy = true;
        for coin in self.coin_ids.clone() {
            let result = self.observe(Endpoint::Account, self.client.account(coin)).await;
            match result {
                Ok(info) => {
                    self.coins.insert(coin, with_coin_id(info, coin));
                }
                Err(e) => healthy = self.note_failure(Endpoint::Account, &e),
            }
        }
        healthy &= self.scan_bills().await;
        if healthy && !self.previous_failures.is_empty() {
            info!(account = self.slot.name(), "polling the exchange works again");
        }
        self.previous_failures = std::mem::take(&mut self.failures);
        self.save_state().await;
        self.slot.publish(AccountSnapshot {
            coins: self.coins.clone(),
            counters: self.counters.clone(),
            settled_through_ms: self.cursor.state().settled_through,
            up: healthy,
        });
    }

    /// Makes the bill queries of this poll, at most the per-poll budget; false on a failure.
    async fn scan_bills(&mut self) -> bool {
        self.cursor.start_poll(now_millis());
        for _ in 0..self.settings.bill_queries_per_poll {
            let Some(query) = self.cursor.next_query() else { return true };
            let page = match self.observe(Endpoint::Bills, self.client.bills(&query)).await {
                Ok(page) => page,
                Err(e) => return self.note_failure(Endpoint::Bills, &e),
            };
            let accepted = self.cursor.accept(&page);
            for bill in &accepted.new_bills {
                self.counters.count(bill);
            }
            if accepted.truncated {
                self.counters.truncated_queries += 1;
                warn!(account = self.slot.name(), query = ?query,
                    "more than a page of bills share one millisecond, business type, coin and symbol; the API cannot page further, so at least one bill was not counted");
            }
        }
        if self.cursor.pass_in_progress() {
            self.metrics.scan_deferred(self.slot.name());
            debug!(
                account = self.slot.name(),
                "bill scan reached the per-poll query limit; it resumes at the next poll"
            );
        }
        true
    }

    /// Awaits one request and records its outcome, latency and decode problems.
    async fn observe<T>(
        &self,
        endpoint: Endpoint,
        request: impl Future<Output = Result<Answer<T>, ApiError>>,
    ) -> Result<T, ApiError> {
        let started = Instant::now();
        let result = request.await;
        self.metrics.request(self.slot.name(), endpoint, &result, started.elapsed());
        let answer = result?;
        if !answer.problems.is_empty() {
            self.metrics.decode_problems(self.slot.name(), endpoint, &answer.problems);
            warn!(account = self.slot.name(), endpoint = endpoint.as_str(), problems = ?answer.problems,
                "some fields of the answer could not be read; the rest was kept");
        }
        Ok(answer.value)
    }

    /// Logs a failed request, as a warning only when the previous poll did not fail the same
    /// way; always returns false (not healthy).
    fn note_failure(&mut self, endpoint: Endpoint, error: &ApiError) -> bool {
        let text = format!("{}: {error}", endpoint.as_str());
        if self.previous_failures.contains(&text) {
            debug!(account = self.slot.name(), endpoint = endpoint.as_str(), error = %error, "request to the exchange failed again");
        } else {
            warn!(account = self.slot.name(), endpoint = endpoint.as_str(), outcome = error.outcome().as_str(), error = %error,
                "request to the exchange failed; the last good figures stay on /metrics and capi_up is 0");
        }
        self.failures.insert(text);
        false
    }

    async fn save_state(&self) {
        let Some(store) = &self.store else { return };
        if let Err(e) = store.save(self.slot.name(), self.cursor.state(), &self.counters).await {
            self.metrics.state_error(self.slot.name());
            error!(account = self.slot.name(), error = %e, "cannot save the state file; a restart now would resume from the previous save and count the newer bills again from there");
        }
    }
}

/// Where an account's bill counting starts: its saved state, or now (less the backfill).
fn starting_point(store: Option<&StateStore>, account: &str, settings: &PollSettings) -> (BillCursor, BillCounters) {
    let overlap_ms = settings.overlap.as_millis() as i64;
    match store.map(|s| s.restore(account)) {
        Some(Ok(Some(restored))) => {
            let settled_through_ms = restored.cursor.settled_through;
            info!(account, settled_through_ms, "resuming bill counting from the state file");
            (BillCursor::resume(restored.cursor, overlap_ms, MAX_PAGE), restored.counters)
        }
        failed_or_absent => {
            if let Some(Err(e)) = failed_or_absent {
                error!(account, error = %e, "cannot resume bill counting from the state file; counting starts afresh from now");
            }
            let count_from = now_millis() - settings.backfill.as_millis() as i64;
            (BillCursor::new(count_from, overlap_ms, MAX_PAGE), BillCounters::default())
        }
    }
}

/// Records without a readable `coin_id` take the coin they were queried for, so that they keep
/// a `coin_id` label and two coins' records cannot collide.
fn with_coin_id(mut info: AccountInfo, coin: u64) -> AccountInfo {
    let coin = || Some(coin.to_string());
    for collateral in info.collateral.iter_mut().filter(|c| c.coin_id.is_none()) {
        collateral.coin_id = coin();
    }
    for position in info.positions.iter_mut().filter(|p| p.coin_id.is_none()) {
        position.coin_id = coin();
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::model::{Collateral, Position};

    #[test]
    fn a_missing_coin_id_is_the_queried_coin_and_a_present_one_stays() {
        let info = AccountInfo {
            collateral: vec![Collateral::default(), Collateral { coin_id: Some("9".into()), ..Collateral::default() }],
            positions: vec![Position::default()],
            ..AccountInfo::default()
        };
        let info = with_coin_id(info, 2);
        assert_eq!(info.collateral[0].coin_id.as_deref(), Some("2"));
        assert_eq!(info.collateral[1].coin_id.as_deref(), Some("9"));
        assert_eq!(info.positions[0].coin_id.as_deref(), Some("2"));
    }
}
