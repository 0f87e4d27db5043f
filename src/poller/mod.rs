//! Polling: one loop per account, the bill cursor and counters, and the state file.
//!
//! The exchange is rate-limited, so figures are fetched in the background at a fixed interval
//! and `/metrics` serves the last snapshot; a scrape never calls the exchange.

pub mod backoff;
pub mod budget;
pub mod cursor;
pub mod ledger;
pub mod poll_state;
pub mod retry;
pub mod state;
pub mod supervisor;

use crate::api::clock::{local_now_ms, steady_now_ms};
use crate::api::fields::DecodeProblem;
use crate::api::{Answer, ApiError, Client, Coins, Endpoint};
use crate::snapshot::counters::BillCounters;
use crate::snapshot::counters::Loss;
use crate::snapshot::stats::AccountStats;
use crate::snapshot::{AccountSlot, AccountSnapshot};
use backoff::{Backoff, Pace};
use budget::AccountBudget;
use cursor::{CursorState, Shortfall, MAX_CROWDED_QUERIES};
use ledger::Ledger;
use poll_state::{Counted, PollState};
use retry::retry_after;
use state::StateStore;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

/// How one account is polled.
#[derive(Debug, Clone, PartialEq)]
pub struct PollSettings {
    /// Start to start, when nothing slows the polls down.
    pub interval: Duration,
    /// How late a bill may become visible and still be counted.
    pub overlap: Duration,
    /// How far back bills are counted at the very first start (no saved state).
    pub backfill: Duration,
    /// Bill queries one poll may make at most; a longer scan resumes at the next poll.
    pub bill_queries_per_poll: usize,
    /// The names of coin ids: a crowded millisecond is split over the configured coins' names.
    pub coins: Coins,
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
    pub ledger: Arc<Ledger>,
    /// How the polls are paced after a 429: a poller taking over (after a reload, or a panic)
    /// waits as long as the one before would have, and goes on doubling from where it was.
    pub pacing: Pacing,
}

/// When the next poll may start, and the backoff that set it; none unless the last poll met a
/// 429, or failed after one.
#[derive(Debug, Clone, Default)]
pub struct Pacing {
    backoff: Backoff,
    not_before: Option<Instant>,
}

impl Checkpoint {
    /// The account's saved cursor and counters, if the state file has them; the counters are
    /// shown at once, so that a restart of the exporter does not look like a counter reset.
    pub fn restore(setup: &PollerSetup) -> Arc<Mutex<Self>> {
        let account = setup.slot.name();
        let checkpoint = match setup.store.as_deref().map(|store| store.restore(account)) {
            Some(Ok(Some(restored))) => {
                let settled_through_ms = restored.cursor.settled_through;
                info!(account, settled_through_ms, "resuming bill counting from the state file");
                Self {
                    cursor: Some(restored.cursor),
                    counters: Arc::new(restored.counters),
                    ledger: Arc::new(restored.ledger),
                    pacing: Pacing::default(),
                }
            }
            Some(Err(e)) => {
                error!(account, error = %e, "counting afresh: the account's entry in the state file is not valid");
                Self::default()
            }
            Some(Ok(None)) | None => Self::default(),
        };
        // Counters and ledger check as saved, of the coins polled, until the first poll answers.
        let saved =
            PollState::new(checkpoint.clone(), &AccountSnapshot::default(), &setup.settings, &setup.account.coin_ids);
        setup.slot.publish(saved.snapshot(false, Arc::new(AccountStats::new(setup.settings.interval))));
        Arc::new(Mutex::new(checkpoint))
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
    store: Option<Arc<StateStore>>,
    /// What this poller and the ones before it did, published with every snapshot; recorded
    /// by each request, so shared by them.
    stats: Mutex<AccountStats>,
    /// Where the end of each poll is recorded once saved (at once, without a state file), for a
    /// poller that takes over after this one; its counters and settled point are the ones
    /// published, so that a restart after a failed save cannot take a counter back.
    checkpoint: Arc<Mutex<Checkpoint>>,
    state: PollState,
    backoff: Backoff,
    /// The failures of the previous poll and of this one, so that a lasting outage logs once,
    /// not at every poll.
    previous_failures: BTreeSet<String>,
    failures: BTreeSet<String>,
    /// Whether the last save failed: a lasting failure is said once, and its end too.
    save_failing: bool,
}

impl AccountPoller {
    /// A poller continuing from `checkpoint`, with the figures last published for the account.
    pub fn new(setup: PollerSetup, checkpoint: Arc<Mutex<Checkpoint>>) -> Self {
        let PollerSetup { account, settings, slot, store } = setup;
        let resumed = lock(&checkpoint).clone();
        let backoff = resumed.pacing.backoff.clone();
        let published = slot.latest().unwrap_or_default();
        let state = PollState::new(resumed, &published, &settings, &account.coin_ids);
        // The interval is this poller's: a reload that stretched it replaced the poller.
        let stats = Mutex::new(AccountStats { poll_interval: settings.interval, ..(*published.stats).clone() });
        Self {
            account,
            settings,
            slot,
            store,
            stats,
            checkpoint,
            state,
            backoff,
            previous_failures: BTreeSet::new(),
            failures: BTreeSet::new(),
            save_failing: false,
        }
    }

    /// Polls after `start_delay`, then one interval after each poll was due, or later when the
    /// exchange rate-limits or rejects the key, until `shutdown` turns true. A poll in progress
    /// is abandoned at shutdown: what the state file holds is always consistent.
    ///
    /// Every account's task keeps this future for the account's life, so it is kept small: the
    /// poller comes boxed (a future holds the arguments of its `async fn` twice over) and a
    /// poll's own state is boxed while the poll runs. That took an idle account's task from
    /// 4.5 KB to 0.4 KB beside the poller's 1.2 KB.
    pub async fn run(mut self: Box<Self>, start_delay: Duration, mut shutdown: watch::Receiver<bool>) {
        let not_before = lock(&self.checkpoint).pacing.not_before;
        let mut next = (Instant::now() + start_delay).max(not_before.unwrap_or_else(Instant::now));
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            let started = Instant::now();
            // A poll's checkpoint begins with no pacing; a failed one keeps this.
            let pacing_before = lock(&self.checkpoint).pacing.clone();
            let (pace, healthy) = tokio::select! {
                polled = Box::pin(self.poll_once(next + self.settings.interval)) => polled,
                _ = shutdown.wait_for(|stop| *stop) => return,
            };
            let wait = self.backoff.next_wait(pace, self.settings.interval, fastrand::f64());
            if wait > self.settings.interval {
                debug!(account = self.slot.name(), wait_seconds = wait.as_secs_f64(), "slowing down the next poll");
            }
            self.publish(healthy, wait.saturating_sub(self.settings.interval));
            next = match pace {
                // From when the poll was due, not when it began: a group stays together.
                Pace::Normal | Pace::Failed => (next + wait).max(started),
                // From the refusal: a poll that took long (timeouts before a 429) would
                // otherwise have used up the wait the exchange asked for.
                Pace::RateLimited { .. } | Pace::AuthRejected => Instant::now() + wait,
            };
            // A wait the exchange asked for binds whichever poller polls next; a rejected key's
            // does not: a reload that replaces the poller most likely brings a new key. A failed
            // poll leaves a run of rate limits it falls in to go on.
            lock(&self.checkpoint).pacing = match pace {
                Pace::RateLimited { .. } => Pacing { backoff: self.backoff.clone(), not_before: Some(next) },
                Pace::Normal | Pace::AuthRejected => Pacing::default(),
                Pace::Failed => pacing_before,
            };
        }
    }

    /// One poll: the account query for every coin, then the new bills; then save. Returns how
    /// the next poll should be paced, and whether every request succeeded. `next_due` is when
    /// the next poll is due.
    async fn poll_once(&mut self, next_due: Instant) -> (Pace, bool) {
        let mut pace = Pace::Normal;
        let mut healthy = true;
        let mut answered = false;
        self.state.begin_poll();
        for coin in self.account.coin_ids.clone() {
            let client = &self.account.client;
            let asked_locally_ms = local_now_ms();
            match self.request(Endpoint::Account, || client.account(coin)).await {
                Ok(info) => {
                    answered = true;
                    // By the exchange's clock as this answer leaves it: an answer that corrects
                    // the clock (a rejected timestamp, a `Date`) dates its question too. A fresh
                    // count begins there, and a clock behind would begin it before the start.
                    let asked_at_ms = asked_locally_ms.saturating_add(client.clock().offset_ms());
                    if let Some(change) = self.state.take_account(coin, info, steady_now_ms(), asked_at_ms) {
                        error!(account = self.slot.name(), exchange_account = change.now, counted_exchange_account = change.counted,
                            "the exchange names another account than the one whose bills were counted under this name (the credentials of another account?); its bill counts and ledger check begin afresh");
                    }
                }
                Err(e) => {
                    self.note_failure(Endpoint::Account, &e);
                    healthy = false;
                    pace = pace_after(&e);
                }
            }
            if pace.stops_requests() {
                break;
            }
        }
        // The bill window is dated by the clock requests are signed with, which an answer
        // vouches for (the exchange refuses a timestamp over 30 s off). Without one, after a
        // restart a clock behind would bring a saved cursor back and count bills twice, and a
        // clock ahead would settle bills never asked for: the bills wait for the next poll.
        if !pace.stops_requests() && !answered {
            self.recall(format_args!("bill scan put off: no account answer vouched for the clock"));
        } else if let Some(other) = self.state.account_in_doubt().filter(|_| !pace.stops_requests()) {
            // Not a complete poll: capi_up says so, and the poll-failing alert if it lasts.
            healthy = false;
            warn!(account = self.slot.name(), exchange_account = other,
                "the exchange names another account than the one whose bills are counted under this name (the credentials of another account?); bills are not scanned, and capi_up is 0, until it names the counted one again, or names this one in three polls in a row, when the counts begin afresh");
            self.recall(format_args!("bill scan put off: the answer names exchange account {other}"));
        } else if !pace.stops_requests() {
            if let Err(e) = self.scan_bills(next_due).await {
                self.note_failure(Endpoint::Bills, &e);
                healthy = false;
                pace = pace_after(&e);
            }
        }
        // A poll the exchange answered ends a run of 429s; one that failed before it answered
        // anything (a proxy's 5xx, timeouts) says nothing about its limits.
        if pace == Pace::Failed && answered {
            pace = Pace::Normal;
        }
        if healthy && !self.previous_failures.is_empty() {
            info!(account = self.slot.name(), "polling the exchange works again");
        }
        self.previous_failures = std::mem::take(&mut self.failures);
        self.compare_ledger();
        #[cfg(debug_assertions)]
        supervisor::panic_if_asked(self.slot.name());
        let checkpoint = self.state.checkpoint();
        // A poller taking over resumes from the last save, as a restart of the process would.
        if self.save_state(&checkpoint).await {
            *lock(&self.checkpoint) = checkpoint;
        }
        (pace, healthy)
    }

    /// Compares the running totals of the answers settled by now with the bills, and says when
    /// a difference appears, changes or goes.
    fn compare_ledger(&mut self) {
        let account = self.slot.name();
        for changed in self.state.compare_ledger() {
            let ledger::Changed { coin_id, field, before, difference, at_ms } = changed;
            if !difference.is_zero() {
                warn!(account, coin_id, field, %difference, compared_at_ms = at_ms,
                    "the exchange's running total and the bills counted differ: a bill was missed, or the exchange's two views disagree (capi_ledger_difference)");
                self.recall(format_args!("ledger: {field} of coin {coin_id} differs from the bills by {difference}"));
            } else if before.is_some_and(|b| !b.is_zero()) {
                info!(
                    account,
                    coin_id,
                    field,
                    compared_at_ms = at_ms,
                    "the exchange's running total and the bills counted agree again"
                );
            }
        }
    }

    /// Keeps a line in the account's log of recent polls (the status page's), with the time.
    fn recall(&self, event: std::fmt::Arguments) {
        use std::fmt::Write as _;
        let mut line = time_of_day(local_now_ms());
        let _ = write!(line, " {event}"); // (writing to a String cannot fail)
        self.slot.log_recent(line);
    }

    /// Publishes the poll's figures and stats, with the wait before the next poll beyond the
    /// interval.
    fn publish(&self, healthy: bool, backoff: Duration) {
        let outcome = if healthy { "every request succeeded" } else { "a request failed" };
        self.recall(format_args!("poll ended: {outcome}; next in {:?}", self.settings.interval + backoff));
        let stats = {
            let mut stats = lock(&self.stats);
            stats.poll_backoff = backoff;
            if healthy {
                stats.last_good_poll = Some(crate::snapshot::stats::unix_now());
            }
            let offset_ms = self.account.client.clock().offset_ms();
            if offset_ms != stats.clock_offset_ms {
                self.say_clock_offset(offset_ms);
            }
            stats.clock_offset_ms = offset_ms;
            Arc::new(stats.clone())
        };
        let (counters, settled_through_ms, ledger) = {
            let saved = lock(&self.checkpoint);
            // Of the coins polled: a coin dropped by a reload stays in what is saved until a
            // save succeeds, and its difference must not come back meanwhile.
            let mut ledger = saved.ledger.differences();
            ledger.retain(|(coin, _), _| self.account.coin_ids.contains(coin));
            (saved.counters.clone(), saved.settled_through_ms(), ledger)
        };
        self.slot.publish(AccountSnapshot {
            counters,
            settled_through_ms,
            ledger,
            ..self.state.snapshot(healthy, stats)
        });
    }

    /// Says that the exchange's clock, as learned from its answers, is off this machine's by a new
    /// amount: worth a warning beyond what a whole-second `Date` can tell.
    fn say_clock_offset(&self, offset_ms: i64) {
        let (account, offset_seconds) = (self.slot.name(), offset_ms as f64 / 1000.0);
        if offset_ms.abs() > crate::api::clock::DATE_PRECISION_MS {
            warn!(account, offset_seconds,
                "this machine's clock is off the exchange's: requests are signed and bills asked for by the exchange's time, as learned from its answers (capi_clock_offset_seconds); keep this machine's clock in sync (NTP)");
        } else {
            info!(account, offset_seconds, "this machine's clock agrees with the exchange's");
        }
        self.recall(format_args!("clock: the exchange's is {offset_seconds} s from this machine's"));
    }

    /// Makes the bill queries of this poll: at most the per-poll limit, and only those the
    /// budget has room for before `next_due`. A scan waiting longer would hold back the next
    /// poll's account queries, and so the figures (all accounts' at once, when a funding
    /// settlement makes every account's scan long).
    async fn scan_bills(&mut self, next_due: Instant) -> Result<(), ApiError> {
        let fresh = self.state.unsettled_from_ms().is_none();
        let now_ms = self.account.client.clock().now_ms();
        if let Some(saved_ms) = self.state.start_bill_scan(now_ms) {
            warn!(account = self.slot.name(), saved_settled_through_ms = saved_ms, now_ms,
                "bills were taken as final up to a time after the exchange's clock as estimated now (saved by a clock that was ahead, or a damaged state file; or this machine's clock is behind): counting goes on from there, or from the latest time the exchange's clock can show if that is earlier, and bills created since the save and dated before that are not counted");
        }
        if let Some(from_ms) = self.state.unsettled_from_ms().filter(|_| fresh) {
            info!(account = self.slot.name(), from_ms,
                "bill counting starts: bills created from this time on are counted (--bills.backfill counts older ones)");
        }
        // A query given up still fails the poll (capi_up 0): one of its requests failed.
        let mut given_up = None;
        for _ in 0..self.settings.bill_queries_per_poll {
            // A scan at its end waits for no room: the poll publishes at once.
            let Some(query) = self.state.next_bill_query() else { break };
            if !self.account.budget.room_by(Endpoint::Bills, next_due).await {
                break;
            }
            let client = &self.account.client;
            let counted = match self.request(Endpoint::Bills, || client.bills(&query)).await {
                Ok(page) => {
                    let counted = self.state.take_bills(&page);
                    let (bills, more, new) = (page.items.len(), page.has_next_page, counted.new_bill_ids.len());
                    debug!(account = self.slot.name(), ?query, bills, more, counted = new, "bill query answered");
                    self.recall(format_args!("bill query {query:?}: {bills} bills, {new} new, more pages: {more}"));
                    counted
                }
                Err(error) => {
                    let counted = error.is_parameter_refusal().then(|| self.state.give_up_refused_bill_query());
                    let Some(counted) = counted.flatten() else { return Err(error) };
                    warn!(account = self.slot.name(), ?query, %error,
                        "the exchange refuses this query of a crowded millisecond's bills, so it is not asked again: bills it alone would have found are not counted, and the millisecond is reported as a possible loss (capi_bill_pages_truncated_total)");
                    self.recall(format_args!("bill query {query:?} refused, and given up: {error}"));
                    given_up = Some(error);
                    counted
                }
            };
            self.report(&counted);
        }
        if self.state.bill_scan_in_progress() {
            lock(&self.stats).scans_deferred += 1;
            debug!(account = self.slot.name(), "bill scan stopped before its end; it resumes at the next poll");
        }
        given_up.map_or(Ok(()), Err)
    }

    /// Logs and counts what a bill answer left out or left unproven.
    fn report(&self, counted: &Counted) {
        for (problems, what) in [
            (
                &counted.miscounted,
                "bills were counted, but not all of their values as they are: see each problem's detail",
            ),
            (
                &counted.unmatched,
                "the exchange answered a bill query with bills that do not match it; they were ignored",
            ),
            (
                &counted.unremembered,
                "bills were counted, but some of their values were not remembered for splitting crowded milliseconds",
            ),
            (
                &counted.moved,
                "the exchange showed bills counted before at another creation time: each counts once while its id is kept, until its latest time settles, and would count again if shown at a later time after that",
            ),
        ] {
            if !problems.is_empty() {
                lock(&self.stats).decode_problems(Endpoint::Bills, problems);
                warn!(account = self.slot.name(), problems = DecodeProblem::summary(problems), "{what}");
            }
        }
        if let Some(shortfall) = &counted.shortfall {
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
            let elapsed = started.elapsed();
            lock(&self.stats).request(endpoint, &result, elapsed);
            let (account, endpoint_name, duration_ms) = (self.slot.name(), endpoint.as_str(), elapsed.as_millis());
            let error = match result {
                Ok(answer) => {
                    debug!(
                        account,
                        endpoint = endpoint_name,
                        outcome = "success",
                        duration_ms,
                        attempt,
                        "request answered"
                    );
                    self.recall(format_args!(
                        "{endpoint_name} request answered in {duration_ms} ms (attempt {attempt})"
                    ));
                    if !answer.problems.is_empty() {
                        lock(&self.stats).decode_problems(endpoint, &answer.problems);
                        warn!(
                            account,
                            endpoint = endpoint_name,
                            problems = DecodeProblem::summary(&answer.problems),
                            "some fields of the answer could not be read; the rest was kept"
                        );
                    }
                    return Ok(answer.value);
                }
                Err(error) => error,
            };
            let outcome = error.outcome().as_str();
            debug!(account, endpoint = endpoint_name, outcome, duration_ms, attempt, error = %error, "request failed");
            self.recall(format_args!(
                "{endpoint_name} request failed in {duration_ms} ms (attempt {attempt}): {outcome}: {error}"
            ));
            let Some(pause) = retry_after(&error, attempt, fastrand::f64()) else { return Err(error) };
            debug!(account, endpoint = endpoint_name, attempt, "retrying within the poll");
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    /// Logs a failed request, as a warning only when the previous poll did not fail the same
    /// way: at the same endpoint, with the same outcome and HTTP status or exchange code. Not
    /// with the same text, which often names the request (a proxy's request id, an echoed
    /// timestamp) and would warn at every poll of a lasting outage.
    fn note_failure(&mut self, endpoint: Endpoint, error: &ApiError) {
        let detail = match error {
            ApiError::Exchange { code, .. } => code.clone(),
            ApiError::Http { status, .. } => status.to_string(),
            _ => String::new(),
        };
        let kind = format!("{} {} {detail}", endpoint.as_str(), error.outcome().as_str());
        if self.previous_failures.contains(&kind) {
            debug!(account = self.slot.name(), endpoint = endpoint.as_str(), error = %error, "request to the exchange failed again");
        } else {
            warn!(account = self.slot.name(), endpoint = endpoint.as_str(), outcome = error.outcome().as_str(), error = %error,
                "request to the exchange failed; capi_up is 0, and the last good figures stay on /metrics until --data.max-age");
        }
        self.failures.insert(kind);
    }

    /// Saves the poll's state, if there is a state file; returns whether its counters may be
    /// published.
    async fn save_state(&mut self, checkpoint: &Checkpoint) -> bool {
        let Some(store) = &self.store else { return true };
        let saved = match &checkpoint.cursor {
            Some(cursor) => store.save(self.slot.name(), cursor, &checkpoint.counters, &checkpoint.ledger).await,
            // Counting begins afresh at the next scan: before any (a first start), or when the
            // counts were another exchange account's and the poll that dropped them scanned none.
            None => store.forget(self.slot.name()).await,
        };
        let account = self.slot.name();
        match (&saved, self.save_failing) {
            (Err(e), false) => {
                error!(account, error = %e, "cannot save the state file; the bill counters shown stay as last saved until a save succeeds, so that a restart cannot count bills twice")
            }
            (Err(e), true) => debug!(account, error = %e, "cannot save the state file, again"),
            (Ok(()), true) => info!(account, "the state file is saved again; the bill counters shown are current"),
            (Ok(()), false) => {}
        }
        if saved.is_err() {
            lock(&self.stats).state_file_errors += 1;
        }
        self.save_failing = saved.is_err();
        !self.save_failing
    }
}

/// The warning for a crowded millisecond whose count is not proven complete.
fn warn_shortfall(account: &str, shortfall: &Shortfall) {
    let business_type =
        if shortfall.business_types.is_empty() { "any".into() } else { shortfall.business_types.join(",") };
    let (ms, found, loss) = (shortfall.ms, shortfall.bills_found, shortfall.loss.as_str());
    let not_asked = shortfall.queries_not_asked;
    match shortfall.loss {
        Loss::Certain => warn!(account, millisecond = ms, business_type, bills_found = found, queries_not_asked = not_asked, loss,
            "more bills share this millisecond than the API can list, even split by business type, coin and symbol: at least one was not counted (capi_bill_pages_truncated_total)"),
        Loss::Possible if not_asked > 0 => warn!(account, millisecond = ms, business_type, bills_found = found, queries_not_asked = not_asked, loss,
            "more bills share this millisecond than one page holds, over more business types, coins and symbols than {MAX_CROWDED_QUERIES} queries can ask; every one found was counted, but the bills of the queries not asked may have been missed (capi_bill_pages_truncated_total)"),
        Loss::Possible => warn!(account, millisecond = ms, business_type, bills_found = found, queries_not_asked = not_asked, loss,
            "more bills share this millisecond than one page holds; every one found was counted, split over each business type, coin and symbol this account is known to use, but the API cannot list them all, so a bill of one never seen would have been missed (capi_bill_pages_truncated_total)"),
    }
}

/// `HH:MM:SS.mmm UTC` of a Unix time in milliseconds: the recent polls' log covers minutes.
fn time_of_day(unix_ms: i64) -> String {
    let ms_of_day = unix_ms.rem_euclid(86_400_000);
    let (hours, minutes) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60);
    format!("{hours:02}:{minutes:02}:{:02}.{:03} UTC", ms_of_day / 1000 % 60, ms_of_day % 1000)
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
        // A rejected key, or a refusal before the exchange (a firewall, an IP not on the key's
        // list): asking at full pace would only prolong a block.
        _ if error.outcome() == crate::api::Outcome::AuthError && !error.is_clock_skew() => Pace::AuthRejected,
        _ => Pace::Failed,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_before_the_exchange_slows_the_polls_as_a_rejected_key_does() {
        let http = |status| ApiError::Http { status, snippet: String::new() };
        assert_eq!(pace_after(&http(403)), Pace::AuthRejected);
        assert_eq!(pace_after(&http(401)), Pace::AuthRejected);
        assert_eq!(pace_after(&http(502)), Pace::Failed);
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

    #[test]
    fn the_time_of_day_is_utc_to_the_millisecond() {
        assert_eq!(time_of_day(1_795_558_206_543), "22:10:06.543 UTC");
        assert_eq!(time_of_day(0), "00:00:00.000 UTC");
        assert_eq!(time_of_day(-1), "23:59:59.999 UTC");
    }
}
