//! A simulated exchange speaking the two endpoints of the contract account API as the spec and
//! the exchange's documentation describe them: signing and its error codes, rate limits, bills
//! with ids above 2^53, late visibility, and injectable faults of the network in front.
//!
//! `capi_exporter --demo` serves it on loopback with [`SimExchange::spawn_activity`] making up
//! trades; integration tests script it directly (`add_bill`, `inject_fault`, ...).
//!
//! One [`SimExchange`] is a handle: clones share the state, kept behind a std `Mutex` that is
//! only ever held for synchronous work, never across an `.await`.

#![forbid(unsafe_code)]

mod activity;
mod auth;
mod book;
mod control;
mod faults;
mod limits;
mod records;
mod reply;
pub mod scale;
mod server;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rust_decimal::Decimal;
use tokio::task::JoinHandle;

pub use activity::DEMO_TICK;
pub use book::{NewBill, NewPosition, SimBill};
pub use faults::Fault;
pub use server::RequestStats;

use book::Book;
use faults::FaultQueue;
use limits::RateLimiter;

/// How the simulated exchange behaves where the documentation leaves a choice open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    /// Bill items newest first (else oldest first). Default true.
    pub newest_first: bool,
    /// Whether a bill at exactly `startTime` matches. Default true.
    pub start_inclusive: bool,
    /// Whether a bill at exactly `endTime` matches. Default true.
    pub end_inclusive: bool,
    /// IP and UID weight budget per 10 s; `None` is unlimited. Default 500.
    pub weight_per_10s: Option<u32>,
    /// Largest accepted distance of `ACCESS-TIMESTAMP` from the exchange's clock. Default 30 s.
    pub timestamp_window_ms: i64,
    /// How a bill's creation time is sent. Default `ctime` as a JSON integer.
    pub time_field: TimeField,
    /// `billId` as a JSON string (else a JSON integer). Default false.
    pub ids_as_strings: bool,
    /// How far the exchange's clock is ahead of this machine's (negative: behind), for clock
    /// skew: it checks timestamps and dates bills by its own clock. Default 0.
    pub clock_offset_ms: i64,
    /// Which clock the answers' HTTP `Date` tells. Default the exchange's.
    pub date: DateHeader,
    /// Business types the bill query refuses as a filter (40017), as the exchange may refuse a
    /// type it does not document although its bills show it. Default none.
    pub refused_business_types: Vec<String>,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            newest_first: true,
            start_inclusive: true,
            end_inclusive: true,
            weight_per_10s: Some(500),
            timestamp_window_ms: 30_000,
            time_field: TimeField::CtimeInt,
            ids_as_strings: false,
            clock_offset_ms: 0,
            date: DateHeader::ExchangeClock,
            refused_business_types: Vec::new(),
        }
    }
}

/// The HTTP `Date` of the answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DateHeader {
    /// Now by the exchange's clock.
    #[default]
    ExchangeClock,
    /// Now by the exchange's clock plus this many milliseconds: by a clock of its own, as a proxy
    /// (nginx writes its own `Date`) or a load balancer would.
    Skewed(i64),
    /// Blank (the HTTP server would add one by this machine's clock otherwise): as good as none.
    Blank,
}

/// The two documented spellings of a bill's creation time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TimeField {
    /// `"ctime": 1713339011237`, as in the documentation's sample.
    #[default]
    CtimeInt,
    /// `"cTime": "1713339011237"`, as in the field table.
    CTimeString,
}

/// An api key with its secret and passphrase.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub api_key: String,
    pub secret: String,
    pub passphrase: String,
}

impl fmt::Debug for Credentials {
    /// The key identifies an account and may be logged; the secret and passphrase may not.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("api_key", &self.api_key)
            .field("secret", &"<redacted>")
            .field("passphrase", &"<redacted>")
            .finish()
    }
}

impl Credentials {
    /// Random-looking credentials, the same for the same seed (for the demo).
    pub fn generate(seed: u64) -> Self {
        const ALPHANUMERIC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut hex = |words: usize| (0..words).map(|_| format!("{:016x}", rng.u64(..))).collect::<String>();
        let api_key = format!("weex_{}", hex(2));
        let secret = hex(4);
        let passphrase = (0..16).filter_map(|_| rng.choice(ALPHANUMERIC).map(|&b| char::from(b))).collect();
        Self { api_key, secret, passphrase }
    }
}

/// A running server of the simulated exchange; dropping it leaves the server running.
#[derive(Debug)]
pub struct SimServer {
    stop: tokio::sync::oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl SimServer {
    /// Stops serving and waits until every connection is closed.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// The simulated exchange. Cheap to clone; clones share one exchange.
///
/// # Panics
/// The scripting methods (those taking an `api_key`) panic when no account has that key: it is
/// a mistake in the test script. Nothing a request carries can make the server panic.
#[derive(Debug, Clone)]
pub struct SimExchange {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    options: SimOptions,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    book: Book,
    limiter: RateLimiter,
    faults: FaultQueue,
    stats: RequestStats,
}

impl SimExchange {
    pub fn new(options: SimOptions) -> Self {
        let state = State {
            book: Book::default(),
            limiter: RateLimiter::new(options.weight_per_10s),
            faults: FaultQueue::default(),
            stats: RequestStats::default(),
        };
        Self { shared: Arc::new(Shared { options, state: Mutex::new(state) }) }
    }

    /// The state. A panic elsewhere (a scripting mistake in a test) must not take the server
    /// down with it, so a poisoned lock is used as it is.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the books at the exchange's time, read once the books are held: a bill is never
    /// dated before an answer that was given without it, as a busy machine could otherwise make
    /// happen between reading the clock and taking the lock.
    fn with_book<T>(&self, change: impl FnOnce(&mut Book, i64) -> T) -> T {
        let mut state = self.lock();
        let now = self.now_ms();
        change(&mut state.book, now)
    }

    /// The exchange's clock, in milliseconds since the epoch.
    fn now_ms(&self) -> i64 {
        now_ms() + self.shared.options.clock_offset_ms
    }

    /// Adds an account: NORMAL status, settings for two contracts, 10000 of each coin, no
    /// positions. Adding the same api key again replaces the account.
    pub fn add_account(&self, credentials: Credentials, coin_ids: &[u64]) {
        self.with_book(|book, now| book.add_account(credentials, coin_ids, now));
    }

    /// The HTTP endpoints; unknown paths answer 404.
    pub fn router(&self) -> axum::Router {
        server::router(self.clone())
    }

    /// Serves [`Self::router`] on `addr` (port 0 picks one) in a spawned task; returns the
    /// bound address.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn start(&self, addr: SocketAddr) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
        let (bound, server) = self.start_stoppable(addr).await?;
        Ok((bound, server.task))
    }

    /// Like [`Self::start`], with a handle that stops the server as a restart or an outage
    /// would: every connection closes, and until it is started again connections are refused.
    /// The exchange's state stays as it is.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn start_stoppable(&self, addr: SocketAddr) -> std::io::Result<(SocketAddr, SimServer)> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        let router = self.router();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            // Dropping the handle without `stop` leaves the server running, as `start` wants.
            let shutdown = async {
                if stopped.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            if let Err(error) = axum::serve(listener, router).with_graceful_shutdown(shutdown).await {
                tracing::error!(%error, "simulated exchange stopped serving");
            }
        });
        Ok((bound, SimServer { stop, task }))
    }

    /// Books a bill for the account of `api_key` (panics if there is none) and returns its id.
    /// The amount moves the coin's collateral, whose new amount becomes the bill's balance; the
    /// collateral's `cum_*` accumulators follow the business type.
    pub fn add_bill(&self, api_key: &str, bill: NewBill) -> u64 {
        self.with_book(|book, now| book.add_bill(api_key, bill, now))
    }

    /// Every bill of the account, visible yet or not, in the order added.
    pub fn bills(&self, api_key: &str) -> Vec<SimBill> {
        self.with_book(|book, _| book.bills(api_key))
    }

    /// Exactly what the account query would answer now for this coin.
    pub fn account_json(&self, api_key: &str, coin_id: u64) -> serde_json::Value {
        self.with_book(|book, _| book.account_json(api_key, coin_id))
    }

    /// Overrides one field of the coin's collateral record. A well-typed value (e.g. `"12.5"`
    /// for `amount`) becomes the new state; anything else (`"abc"`) is served as given until
    /// the field is set again.
    pub fn set_collateral_field(&self, api_key: &str, coin_id: u64, field: &str, value: serde_json::Value) {
        self.with_book(|book, now| book.set_collateral_field(api_key, coin_id, field, value, now));
    }

    /// Moves a running total of the coin's collateral (`cum_deposit_amount`, ...) by `by` without
    /// a bill; returns its new value, `None` for a field that is no running total.
    pub fn move_running_total(&self, api_key: &str, coin_id: u64, field: &str, by: Decimal) -> Option<Decimal> {
        self.with_book(|book, now| book.move_running_total(api_key, coin_id, field, by, now))
    }

    /// Sets `is_liquidating` and books a zero-amount `start_liquidate` / `finish_liquidate` bill.
    pub fn set_liquidating(&self, api_key: &str, coin_id: u64, on: bool) {
        self.with_book(|book, now| book.set_liquidating(api_key, coin_id, on, now));
    }

    /// Opens a position (no bill) and returns its id.
    pub fn open_position(&self, api_key: &str, position: NewPosition) -> String {
        self.with_book(|book, now| book.open_position(api_key, position, now))
    }

    /// Overrides one field of an open position, like [`Self::set_collateral_field`].
    ///
    /// # Panics
    /// When the position is not open (or the api key unknown).
    pub fn update_position(&self, api_key: &str, position_id: &str, field: &str, value: serde_json::Value) {
        self.with_book(|book, _| book.update_position(api_key, position_id, field, value));
    }

    /// Removes an open position from the answers (no bill).
    ///
    /// # Panics
    /// When the position is not open (or the api key unknown).
    pub fn close_position(&self, api_key: &str, position_id: &str) {
        let closed = self.with_book(|book, _| book.take_position(api_key, position_id));
        assert!(closed.is_some(), "simulated exchange: no open position has id {position_id:?}");
    }

    /// The next `times` requests, to either endpoint, get `fault`. Faults injected earlier are
    /// used up first.
    pub fn inject_fault(&self, fault: Fault, times: usize) {
        self.lock().faults.push(fault, times);
    }

    /// How many requests will still get an injected fault: 0 once the last one has begun.
    pub fn faults_pending(&self) -> usize {
        self.lock().faults.pending()
    }

    pub fn requests(&self) -> RequestStats {
        self.lock().stats.clone()
    }

    /// Makes up account activity every `tick`, reproducibly from `seed`: see the `activity`
    /// module. Stops when the returned task is aborted.
    pub fn spawn_activity(&self, seed: u64, tick: Duration) -> JoinHandle<()> {
        activity::spawn(self.clone(), seed, tick)
    }
}

/// The exchange's clock, in milliseconds since the epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
}
