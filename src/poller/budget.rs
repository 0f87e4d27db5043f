//! The exchange's request weight budget, per IP (shared by every account this process polls)
//! and per account (UID), each a number of weight units per 10 s (spec 8, facts: 500 each).
//!
//! Windows slide, so no 10 s stretch ever holds more than the budget, wherever the exchange's
//! own windows start; a second of margin covers requests that arrive closer together than they
//! were sent. A request waits until both its windows have room: the budget is never exceeded.
//! Bill queries fill a window only to four fifths of its budget: the rest is the account
//! queries' alone, so that bursts of bills on many accounts at once (a funding settlement)
//! leave room for the figures.

use crate::api::Endpoint;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The exchange counts weight per 10 s; one more second absorbs network jitter.
pub const WINDOW: Duration = Duration::from_secs(11);

/// The documented weights (spec 4.1, 4.2): (IP, UID).
pub fn weights(endpoint: Endpoint) -> (u32, u32) {
    match endpoint {
        Endpoint::Bills => (2, 5),
        Endpoint::Account => (1, 1),
    }
}

/// Weight spent in a sliding window, against a budget. Pure: time is passed in.
#[derive(Debug)]
pub struct WeightWindow {
    budget: u32,
    spent: VecDeque<(Instant, u32)>,
    /// The sum of `spent`'s weights, kept so that a request does not add up the window.
    total: u32,
}

impl WeightWindow {
    pub fn new(budget: u32) -> Self {
        Self { budget, spent: VecDeque::new(), total: 0 }
    }

    /// When a request to `endpoint` fits in the window (now, if it fits now).
    pub fn ready_at(&mut self, endpoint: Endpoint, weight: u32, now: Instant) -> Instant {
        let limit = match endpoint {
            Endpoint::Account => self.budget,
            // Budgets are at least 10, so a bill query (at most 5) always fits in time.
            Endpoint::Bills => self.budget - self.budget / 5,
        };
        while let Some(&(_, w)) = self.spent.front().filter(|(at, _)| *at + WINDOW <= now) {
            self.total -= w;
            self.spent.pop_front();
        }
        let mut total = self.total;
        let mut ready = now;
        for (at, spent) in &self.spent {
            if total + weight <= limit {
                break;
            }
            total -= spent;
            ready = *at + WINDOW;
        }
        ready
    }

    pub fn spend(&mut self, weight: u32, now: Instant) {
        self.spent.push_back((now, weight));
        self.total += weight;
    }
}

/// Each account's UID window, by account name, for as long as the process runs: a poller that a
/// reload replaces goes on with its account's window, whose last 10 s the exchange still counts.
#[derive(Debug)]
pub struct UidWindows {
    budget: u32,
    by_name: Mutex<BTreeMap<String, Arc<Mutex<WeightWindow>>>>,
}

impl UidWindows {
    pub fn new(budget: u32) -> Self {
        Self { budget, by_name: Mutex::default() }
    }

    /// The window of the account named `name`.
    pub fn of(&self, name: &str) -> Arc<Mutex<WeightWindow>> {
        let mut by_name = self.by_name.lock().unwrap_or_else(|e| e.into_inner());
        let window =
            by_name.entry(name.to_owned()).or_insert_with(|| Arc::new(Mutex::new(WeightWindow::new(self.budget))));
        window.clone()
    }
}

/// One account's view of the budget: the shared IP window and its own UID window.
#[derive(Debug, Clone)]
pub struct AccountBudget {
    ip: Arc<Mutex<WeightWindow>>,
    uid: Arc<Mutex<WeightWindow>>,
}

impl AccountBudget {
    pub fn new(ip: Arc<Mutex<WeightWindow>>, uid: Arc<Mutex<WeightWindow>>) -> Self {
        Self { ip, uid }
    }

    /// Waits until a request to `endpoint` fits both windows, then books its weight.
    pub async fn acquire(&self, endpoint: Endpoint) {
        loop {
            let now = Instant::now();
            let ready = self.book_if_ready(endpoint, now, true);
            if ready <= now {
                return;
            }
            tokio::time::sleep_until(ready).await;
        }
    }

    /// Waits until a request to `endpoint` fits both windows, unless that is after `deadline`;
    /// whether it fits. Books nothing: the request does, and waits if another took the room
    /// meanwhile.
    pub async fn room_by(&self, endpoint: Endpoint, deadline: Instant) -> bool {
        loop {
            let now = Instant::now();
            let ready = self.book_if_ready(endpoint, now, false);
            if ready <= now {
                return true;
            }
            if ready > deadline {
                return false;
            }
            tokio::time::sleep_until(ready).await;
        }
    }

    /// When a request to `endpoint` fits both windows; if that is now and `book`, its weight is
    /// booked, under the same locks.
    fn book_if_ready(&self, endpoint: Endpoint, now: Instant, book: bool) -> Instant {
        let (ip_weight, uid_weight) = weights(endpoint);
        let mut ip = self.ip.lock().unwrap_or_else(|e| e.into_inner());
        let mut uid = self.uid.lock().unwrap_or_else(|e| e.into_inner());
        let ready = ip.ready_at(endpoint, ip_weight, now).max(uid.ready_at(endpoint, uid_weight, now));
        if ready <= now && book {
            ip.spend(ip_weight, now);
            uid.spend(uid_weight, now);
        }
        ready
    }
}

/// How the accounts are polled within the budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PollPlan {
    /// The configured interval, or longer when the accounts do not fit it.
    pub interval: Duration,
    /// Bill queries one poll of an account may make (the windows still pace them).
    pub bill_queries_per_poll: usize,
}

/// Routine polls may use this share of each budget; the rest is for bursts of bill queries.
const ROUTINE_SHARE: f64 = 0.8;
/// Bill queries a poll may make even when the routine share leaves no room for them: a burst
/// must make progress, and the windows (not this number) keep the budget. It then waits for
/// room, slowing that account's polls, rather than sending more.
const MIN_BILL_QUERIES: usize = 8;
/// A bound on one poll's length, whatever the budget allows.
const MAX_BILL_QUERIES: usize = 50;

/// Plans the polls of `accounts` accounts with `coins` coins each: the interval at which one
/// account query per coin and one bill query per account fit in the routine share of both
/// budgets, and how many bill queries a poll may then make.
pub fn plan(accounts: usize, coins: usize, interval: Duration, ip_budget: u32, uid_budget: u32) -> PollPlan {
    let window = WINDOW.as_secs_f64();
    let (bill_ip, bill_uid) = weights(Endpoint::Bills);
    let (account_ip, account_uid) = weights(Endpoint::Account);
    let ip_per_poll = accounts as f64 * (coins as f64 * f64::from(account_ip) + f64::from(bill_ip));
    let uid_per_poll = coins as f64 * f64::from(account_uid) + f64::from(bill_uid);
    let needed = |weight: f64, budget: u32| weight * window / (f64::from(budget) * ROUTINE_SHARE);
    let seconds = interval.as_secs_f64().max(needed(ip_per_poll, ip_budget)).max(needed(uid_per_poll, uid_budget));
    let interval = Duration::from_secs_f64(seconds).max(interval);
    // What the routine share leaves per poll, beyond the account queries, in bill queries.
    let polls_per_window = window / interval.as_secs_f64();
    let uid_spare = f64::from(uid_budget) * ROUTINE_SHARE / polls_per_window - coins as f64 * f64::from(account_uid);
    let ip_spare = f64::from(ip_budget) * ROUTINE_SHARE / polls_per_window / accounts.max(1) as f64
        - coins as f64 * f64::from(account_ip);
    let bill_queries = (uid_spare / f64::from(bill_uid)).min(ip_spare / f64::from(bill_ip));
    let bill_queries_per_poll = (bill_queries.floor().max(0.0) as usize).clamp(MIN_BILL_QUERIES, MAX_BILL_QUERIES);
    PollPlan { interval, bill_queries_per_poll }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accounts one IP carries at a 15 s interval with the documented 500 per 10 s: the
    /// exchange's arithmetic allows 750 / weight (187 with 2 coins, 250 with 1); the planner,
    /// keeping a fifth in reserve over an 11 s window, plans 136 and 181 before it stretches.
    #[test]
    fn accounts_that_fit_one_ip_at_fifteen_seconds() {
        let interval = Duration::from_secs(15);
        for (coins, fitting) in [(2, 136), (1, 181)] {
            assert_eq!(plan(fitting, coins, interval, 500, 500).interval, interval, "{coins} coins");
            assert!(plan(fitting + 1, coins, interval, 500, 500).interval > interval, "{coins} coins");
        }
    }

    #[test]
    fn a_window_refuses_what_does_not_fit_until_old_weight_slides_out() {
        let start = Instant::now();
        let mut window = WeightWindow::new(10);
        window.spend(6, start);
        window.spend(4, start + Duration::from_secs(3));
        assert_eq!(window.ready_at(Endpoint::Account, 1, start + Duration::from_secs(5)), start + WINDOW);
        assert_eq!(window.ready_at(Endpoint::Account, 6, start + Duration::from_secs(5)), start + WINDOW);
        assert_eq!(
            window.ready_at(Endpoint::Account, 7, start + Duration::from_secs(5)),
            start + Duration::from_secs(3) + WINDOW
        );
        let later = start + WINDOW;
        assert_eq!(window.ready_at(Endpoint::Account, 6, later), later);
        assert_eq!(window.ready_at(Endpoint::Account, 7, later), start + Duration::from_secs(3) + WINDOW);
    }

    #[test]
    fn bill_queries_leave_a_fifth_of_the_window_to_account_queries() {
        let now = Instant::now();
        let mut window = WeightWindow::new(10);
        window.spend(8, now);
        assert_eq!(window.ready_at(Endpoint::Bills, 1, now), now + WINDOW);
        assert_eq!(window.ready_at(Endpoint::Account, 2, now), now);
    }

    #[tokio::test(start_paused = true)]
    async fn room_for_a_bill_query_is_awaited_only_until_the_deadline() {
        let windows = UidWindows::new(10_000);
        let budget = AccountBudget::new(Arc::new(Mutex::new(WeightWindow::new(10))), windows.of("main"));
        for _ in 0..4 {
            budget.acquire(Endpoint::Bills).await;
        }
        let started = Instant::now();
        assert!(!budget.room_by(Endpoint::Bills, started + Duration::from_secs(5)).await);
        assert_eq!(Instant::now(), started, "no room before the deadline: no wait for it");
        assert!(budget.room_by(Endpoint::Account, started).await, "account queries have their fifth");
        assert!(budget.room_by(Endpoint::Bills, started + WINDOW).await);
        assert_eq!(Instant::now(), started + WINDOW);
    }

    #[test]
    fn any_stretch_of_the_window_length_holds_at_most_the_budget() {
        let start = Instant::now();
        let mut window = WeightWindow::new(500);
        let mut now = start;
        let mut sent = Vec::new();
        for i in 0..2_000u32 {
            let weight = [1, 5, 2][i as usize % 3];
            now = window.ready_at(Endpoint::Account, weight, now).max(now);
            window.spend(weight, now);
            sent.push((now, weight));
            now += Duration::from_millis(3);
        }
        for (i, (at, _)) in sent.iter().enumerate() {
            let in_window: u32 = sent[i..].iter().take_while(|(t, _)| *t < *at + WINDOW).map(|(_, w)| w).sum();
            assert!(in_window <= 500, "{in_window} within one window");
        }
        assert!(now - start > WINDOW * 3, "it waited rather than exceeding");
    }

    #[tokio::test(start_paused = true)]
    async fn an_accounts_pollers_share_its_uid_window_and_other_accounts_have_their_own() {
        let ip = Arc::new(Mutex::new(WeightWindow::new(10_000)));
        let windows = UidWindows::new(10);
        let before_reload = AccountBudget::new(ip.clone(), windows.of("main"));
        before_reload.acquire(Endpoint::Bills).await;
        before_reload.acquire(Endpoint::Bills).await;
        let (after_reload, other) =
            (AccountBudget::new(ip.clone(), windows.of("main")), AccountBudget::new(ip, windows.of("other")));
        let started = Instant::now();
        other.acquire(Endpoint::Bills).await;
        assert_eq!(Instant::now(), started, "another account's window is its own");
        after_reload.acquire(Endpoint::Bills).await;
        assert_eq!(Instant::now(), started + WINDOW, "main's window went on across the replacement");
    }

    #[test]
    fn one_account_at_the_default_interval_fits_and_may_page() {
        let plan = plan(1, 1, Duration::from_secs(15), 500, 500);
        assert_eq!(plan.interval, Duration::from_secs(15));
        assert_eq!(plan.bill_queries_per_poll, 50);
    }

    #[test]
    fn too_many_accounts_stretch_the_interval_to_what_the_ip_allows() {
        // 100 accounts x (1 account query + 1 bill query) = 300 IP weight per poll; 80% of 500
        // per 11 s allows one poll of all every 8.25 s.
        let crowded = plan(100, 1, Duration::from_secs(5), 500, 500);
        assert_eq!(crowded.interval, Duration::from_secs_f64(8.25));
        assert_eq!(crowded.bill_queries_per_poll, MIN_BILL_QUERIES);
        let relaxed = plan(100, 1, Duration::from_secs(15), 500, 500);
        assert_eq!(relaxed.interval, Duration::from_secs(15));
    }

    #[test]
    fn a_short_interval_is_stretched_to_what_the_uid_allows() {
        // 2 coins + 1 bill query = 7 UID weight per poll; 80% of 500 per 11 s: every 0.1925 s.
        let plan = plan(1, 2, Duration::from_millis(100), 500, 500);
        assert_eq!(plan.interval, Duration::from_secs_f64(0.1925));
        assert_eq!(plan.bill_queries_per_poll, MIN_BILL_QUERIES);
    }
}
