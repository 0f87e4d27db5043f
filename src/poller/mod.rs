//! Polling: one loop per account, the bill cursor and counters, and the state file.
//!
//! The exchange is rate-limited, so figures are fetched in the background at a fixed interval
//! and `/metrics` serves the last snapshot; a scrape never calls the exchange.

pub mod backoff;
pub mod budget;
pub mod counters;
pub mod cursor;
pub mod retry;
pub mod state;
pub mod supervisor;

use crate::api::client::MAX_PAGE;
use crate::api::clock::local_now_ms;
use crate::api::fields::DecodeProblem;
use crate::api::model::{coin_name, AccountInfo};
use crate::api::{Answer, ApiError, Client, Endpoint};
use crate::metrics::{AccountSlot, AccountSnapshot, ExporterMetrics};
use backoff::{Backoff, Pace};
use budget::AccountBudget;
use counters::BillCounters;
use cursor::{Accepted, BillCursor, CursorState, Loss, Shortfall};
use retry::{retry_after, Jitter};
use state::StateStore;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

/// How one account is polled.
#[derive(Debug, Clone)]
pub struct PollSettings {
    /// Start to start, when nothing slows the polls down.
    pub interval: Duration,
    /// How late a bill may become visible and still be counted.
    pub overlap: Duration,
    /// How far back bills are counted at the very first start (no saved state).
    pub backfill: Duration,
    /// Bill queries one poll may make at most; a longer scan resumes at the next poll.
    pub bill_queries_per_poll: usize,
}

/// What is polled: one account's client, its coins, and its share of the weight budget.
#[derive(Debug, Clone)]
pub struct PolledAccount {
    pub client: Client,
    pub coin_ids: Vec<u64>,
    pub budget: AccountBudget,
}

/// What an account's poller is made of, beyond what it counts: each poller the supervisor
/// starts for the account gets a copy.
#[derive(Debug, Clone)]
pub struct PollerSetup {
    pub account: PolledAccount,
    pub settings: PollSettings,
    pub slot: Arc<AccountSlot>,
    pub metrics: ExporterMetrics,
    pub store: Option<Arc<StateStore>>,
}

/// What an account's polls have counted as of the end of the last one. Cursor and counters are
/// consistent with each other, so a poller starting from it counts every bill exactly once.
#[derive(Debug, Clone, Default)]
pub struct Checkpoint {
    /// `None` until the first bill scan of a fresh start: counting starts then, by the
    /// exchange's clock as the first answers corrected it, not this machine's.
    pub cursor: Option<CursorState>,
    pub counters: Arc<BillCounters>,
}

impl Checkpoint {
    /// The account's saved cursor and counters, if the state file has them.
    pub fn restore(setup: &PollerSetup) -> Self {
        let account = setup.slot.name();
        match setup.store.as_deref().map(|store| store.restore(account)) {
            Some(Ok(Some(restored))) => {
                let settled_through_ms = restored.cursor.settled_through;
                info!(account, settled_through_ms, "resuming bill counting from the state file");
                Self { cursor: Some(restored.cursor), counters: Arc::new(restored.counters) }
            }
            Some(Err(e)) => {
                error!(account, error = %e, "cannot resume bill counting from the state file; counting starts afresh from now");
                Self::default()
            }
            Some(Ok(None)) | None => Self::default(),
        }
    }

    /// Bills created up to this time are final; before counting starts, nothing is.
    pub fn settled_through_ms(&self) -> i64 {
        self.cursor.as_ref().map_or(0, |c| c.settled_through)
    }
}

/// One account's polling loop and everything it keeps between polls.
pub struct AccountPoller {
    account: PolledAccount,
    settings: PollSettings,
    slot: Arc<AccountSlot>,
    metrics: ExporterMetrics,
    store: Option<Arc<StateStore>>,
    /// Where the end of each poll is recorded, for a poller that takes over after this one.
    checkpoint: Arc<Mutex<Checkpoint>>,
    cursor: Option<BillCursor>,
    /// Shared with the published snapshot: copied on write, only when bills arrive.
    counters: Arc<BillCounters>,
    /// Shared with the published snapshots: each answer is held once, however many read it.
    coins: BTreeMap<u64, Arc<AccountInfo>>,
    /// When each coin's figures were last fetched (this machine's clock, ms).
    fetched_at_ms: BTreeMap<u64, i64>,
    backoff: Backoff,
    jitter: Jitter,
    /// The failures of the previous poll and of this one, so that a lasting outage logs once,
    /// not at every poll.
    previous_failures: BTreeSet<String>,
    failures: BTreeSet<String>,
}

impl AccountPoller {
    /// A poller continuing from `checkpoint`, with the figures last published for the account.
    pub fn new(setup: PollerSetup, checkpoint: Arc<Mutex<Checkpoint>>) -> Self {
        let PollerSetup { account, settings, slot, metrics, store } = setup;
        let resumed = lock(&checkpoint).clone();
        let cursor = resumed.cursor.map(|state| bill_cursor(state, &settings, &account.coin_ids));
        let published = slot.latest().unwrap_or_default();
        let name_hash = slot.name().bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        let jitter = Jitter::new(local_now_ms() as u64 ^ name_hash);
        Self {
            account,
            settings,
            slot,
            metrics,
            store,
            checkpoint,
            cursor,
            counters: resumed.counters,
            coins: published.coins.clone(),
            fetched_at_ms: published.fetched_at_ms.clone(),
            backoff: Backoff::default(),
            jitter,
            previous_failures: BTreeSet::new(),
            failures: BTreeSet::new(),
        }
    }

    /// Polls after `start_delay`, then one interval after each poll was due, or later when the
    /// exchange rate-limits or rejects the key, until `shutdown` turns true. A poll in progress
    /// is abandoned at shutdown: what the state file holds is always consistent.
    pub async fn run(mut self, start_delay: Duration, mut shutdown: watch::Receiver<bool>) {
        let mut next = Instant::now() + start_delay;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            let started = Instant::now();
            let pace = tokio::select! {
                pace = self.poll_once() => pace,
                _ = shutdown.wait_for(|stop| *stop) => return,
            };
            let wait = self.backoff.next_wait(pace, self.settings.interval, self.jitter.next());
            self.metrics.poll_backoff(self.slot.name(), wait.saturating_sub(self.settings.interval));
            if wait > self.settings.interval {
                debug!(account = self.slot.name(), wait_seconds = wait.as_secs_f64(), "slowing down the next poll");
            }
            // From when the poll was due, not when it began: a group stays together.
            next = (next + wait).max(started);
        }
    }

    /// One poll: the account query for every coin, then the new bills; then save and publish.
    /// Returns how the next poll should be paced.
    pub async fn poll_once(&mut self) -> Pace {
        let mut pace = Pace::Normal;
        let mut healthy = true;
        for coin in self.account.coin_ids.clone() {
            let client = &self.account.client;
            match self.request(Endpoint::Account, || client.account(coin)).await {
                Ok(info) => {
                    self.coins.insert(coin, Arc::new(with_coin_id(info, coin)));
                    self.fetched_at_ms.insert(coin, local_now_ms());
                }
                Err(e) => {
                    self.note_failure(Endpoint::Account, &e);
                    healthy = false;
                    pace = pace_after(&e);
                }
            }
            if pace != Pace::Normal {
                break; // the exchange asked us to stop, or refuses the key: no more requests now
            }
        }
        if pace == Pace::Normal {
            if let Err(e) = self.scan_bills().await {
                self.note_failure(Endpoint::Bills, &e);
                healthy = false;
                pace = pace_after(&e);
            }
        }
        if healthy && !self.previous_failures.is_empty() {
            info!(account = self.slot.name(), "polling the exchange works again");
        }
        self.previous_failures = std::mem::take(&mut self.failures);
        #[cfg(debug_assertions)]
        supervisor::panic_if_asked(self.slot.name());
        self.save_state().await;
        *lock(&self.checkpoint) =
            Checkpoint { cursor: self.cursor.as_ref().map(|c| c.state().clone()), counters: self.counters.clone() };
        self.metrics.clock_offset(self.account.client.clock().offset_ms());
        self.slot.publish(AccountSnapshot {
            coins: self.coins.clone(),
            fetched_at_ms: self.fetched_at_ms.clone(),
            counters: self.counters.clone(),
            settled_through_ms: self.cursor.as_ref().map_or(0, |c| c.state().settled_through),
            up: healthy,
        });
        pace
    }

    /// Makes the bill queries of this poll, at most the per-poll limit.
    async fn scan_bills(&mut self) -> Result<(), ApiError> {
        let now_ms = self.account.client.clock().now_ms();
        let mut cursor = self.cursor.take().unwrap_or_else(|| {
            let count_from = now_ms.saturating_sub(self.settings.backfill.as_millis() as i64);
            bill_cursor(CursorState::counting_from(count_from), &self.settings, &self.account.coin_ids)
        });
        cursor.start_poll(now_ms);
        let scanned = self.scan_with(&mut cursor).await;
        if cursor.pass_in_progress() {
            self.metrics.scan_deferred(self.slot.name());
            debug!(account = self.slot.name(), "bill scan stopped before its end; it resumes at the next poll");
        }
        self.cursor = Some(cursor);
        scanned
    }

    async fn scan_with(&mut self, cursor: &mut BillCursor) -> Result<(), ApiError> {
        for _ in 0..self.settings.bill_queries_per_poll {
            let Some(query) = cursor.next_query() else { break };
            let client = &self.account.client;
            let page = self.request(Endpoint::Bills, || client.bills(&query)).await?;
            let accepted = cursor.accept(&page);
            self.count(accepted);
        }
        Ok(())
    }

    /// Counts what one answer brought: its new bills and the shortfalls it proved.
    fn count(&mut self, accepted: Accepted) {
        if accepted.new_bills.is_empty() && accepted.shortfall.is_none() {
            return; // the counters shared with the snapshot stay as they are
        }
        let counters = Arc::make_mut(&mut self.counters);
        let unsummed: Vec<DecodeProblem> = accepted
            .new_bills
            .iter()
            .flat_map(|bill| counters.count(bill))
            .map(|field| DecodeProblem { record: "bill", field: field.into(), detail: UNSUMMABLE })
            .collect();
        if let Some(shortfall) = &accepted.shortfall {
            counters.note_shortfall(shortfall.loss);
        }
        if !unsummed.is_empty() {
            self.metrics.decode_problems(self.slot.name(), Endpoint::Bills, &unsummed);
            warn!(account = self.slot.name(), problems = ?unsummed,
                "bills were counted, but some of their values are too large to add to the sums and are left out of them");
        }
        if let Some(shortfall) = &accepted.shortfall {
            warn_shortfall(self.slot.name(), shortfall);
        }
    }

    /// Sends a request within the weight budget, retrying transient failures a bounded number
    /// of times, and records every attempt's outcome, latency and decode problems.
    async fn request<T, F, Fut>(&self, endpoint: Endpoint, send: F) -> Result<T, ApiError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Answer<T>, ApiError>>,
    {
        let mut attempt = 0;
        loop {
            self.account.budget.acquire(endpoint).await;
            let started = std::time::Instant::now();
            let result = send().await;
            self.metrics.request(self.slot.name(), endpoint, &result, started.elapsed());
            let error = match result {
                Ok(answer) => return Ok(self.keep_problems(endpoint, answer)),
                Err(error) => error,
            };
            let Some(pause) = retry_after(&error, attempt, self.jitter.next()) else { return Err(error) };
            debug!(account = self.slot.name(), endpoint = endpoint.as_str(), error = %error, attempt, "retrying within the poll");
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    fn keep_problems<T>(&self, endpoint: Endpoint, answer: Answer<T>) -> T {
        if !answer.problems.is_empty() {
            self.metrics.decode_problems(self.slot.name(), endpoint, &answer.problems);
            warn!(account = self.slot.name(), endpoint = endpoint.as_str(), problems = ?answer.problems,
                "some fields of the answer could not be read; the rest was kept");
        }
        answer.value
    }

    /// Logs a failed request, as a warning only when the previous poll did not fail the same
    /// way.
    fn note_failure(&mut self, endpoint: Endpoint, error: &ApiError) {
        let text = format!("{}: {error}", endpoint.as_str());
        if self.previous_failures.contains(&text) {
            debug!(account = self.slot.name(), endpoint = endpoint.as_str(), error = %error, "request to the exchange failed again");
        } else {
            warn!(account = self.slot.name(), endpoint = endpoint.as_str(), outcome = error.outcome().as_str(), error = %error,
                "request to the exchange failed; the last good figures stay on /metrics and capi_up is 0");
        }
        self.failures.insert(text);
    }

    async fn save_state(&self) {
        let (Some(store), Some(cursor)) = (&self.store, &self.cursor) else { return };
        if let Err(e) = store.save(self.slot.name(), cursor.state(), &self.counters).await {
            self.metrics.state_error(self.slot.name());
            error!(account = self.slot.name(), error = %e, "cannot save the state file; a restart now would resume from the previous save and count the newer bills again from there");
        }
    }
}

/// What a bill value that could not be added to its sum is reported as.
const UNSUMMABLE: &str = "too large to add to the counted sum; the bill is counted, the value is left out";

/// The warning for a crowded millisecond whose count is not proven complete.
fn warn_shortfall(account: &str, shortfall: &Shortfall) {
    let business_type =
        if shortfall.business_types.is_empty() { "any".into() } else { shortfall.business_types.join(",") };
    let (ms, found, loss) = (shortfall.ms, shortfall.bills_found, shortfall.loss.as_str());
    match shortfall.loss {
        Loss::Certain => warn!(account, millisecond = ms, business_type, bills_found = found, loss,
            "more bills share this millisecond than the API can list, even split by business type, coin and symbol: at least one was not counted (capi_bill_pages_truncated_total)"),
        Loss::Possible => warn!(account, millisecond = ms, business_type, bills_found = found, loss,
            "more bills share this millisecond than one page holds; every one found was counted, split over each business type, coin and symbol this account is known to use, but the API cannot list them all, so a bill of one never seen would have been missed (capi_bill_pages_truncated_total)"),
    }
}

/// Polls start in groups this far apart. The requests of a group overlap, so the runtime wakes
/// once for many answers instead of once for each: against the simulated exchange this cut the
/// CPU of a 1,000-account poll cycle at 15 s from 442 to 245 ms. A group of 33 accounts (1,000
/// at 15 s) keeps as many connections to the exchange open.
const START_GROUP_SPACING: Duration = Duration::from_millis(500);

/// When account `index` of `count` first polls: spread over the interval in groups, rather
/// than all at once or each on its own.
pub fn start_delay(index: usize, count: usize, interval: Duration) -> Duration {
    let count = count.max(1);
    let groups = (interval.as_millis() / START_GROUP_SPACING.as_millis()).clamp(1, count as u128) as usize;
    interval.mul_f64((index * groups / count) as f64 / groups as f64)
}

/// How a failure paces the next poll.
fn pace_after(error: &ApiError) -> Pace {
    match error {
        ApiError::RateLimited { retry_after } => Pace::RateLimited { retry_after: *retry_after },
        _ if error.outcome() == crate::api::Outcome::AuthError && !error.is_clock_skew() => Pace::AuthRejected,
        _ => Pace::Normal,
    }
}

fn lock(checkpoint: &Mutex<Checkpoint>) -> std::sync::MutexGuard<'_, Checkpoint> {
    checkpoint.lock().unwrap_or_else(|e| e.into_inner())
}

/// A bill cursor continuing from `state`, splitting crowded milliseconds over the configured
/// coins too.
fn bill_cursor(state: CursorState, settings: &PollSettings, coin_ids: &[u64]) -> BillCursor {
    let coins = coin_ids.iter().filter_map(|id| coin_name(*id)).map(str::to_owned).collect();
    BillCursor::resume(state, settings.overlap.as_millis() as i64, MAX_PAGE).with_configured_coins(coins)
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

    #[test]
    fn accounts_start_in_groups_half_a_second_apart_within_the_interval() {
        let fifteen = Duration::from_secs(15);
        let delays: Vec<Duration> = (0..1000).map(|i| start_delay(i, 1000, fifteen)).collect();
        assert!(delays.windows(2).all(|pair| pair[0] <= pair[1]));
        let distinct: BTreeSet<Duration> = delays.iter().copied().collect();
        assert_eq!(distinct.len(), 30);
        assert_eq!(distinct.first(), Some(&Duration::ZERO));
        assert_eq!(distinct.last(), Some(&Duration::from_millis(14_500)));
        let largest_group = distinct.iter().map(|d| delays.iter().filter(|x| *x == d).count()).max();
        assert_eq!(largest_group, Some(34));
        // Few accounts still start one by one, evenly spread.
        let few: Vec<Duration> = (0..10).map(|i| start_delay(i, 10, fifteen)).collect();
        assert_eq!(few, (0..10).map(|i| Duration::from_millis(1_500 * i)).collect::<Vec<_>>());
        assert_eq!(start_delay(0, 1, fifteen), Duration::ZERO);
        assert_eq!(start_delay(0, 3, Duration::from_millis(100)), Duration::ZERO);
    }
}
