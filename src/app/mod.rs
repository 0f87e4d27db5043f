//! Wires everything together: accounts (or the demo exchange), pollers, exposition and server;
//! and reloads the configuration files on SIGHUP or `/-/reload`.

mod fleet;

use crate::api::client::HttpPool;
use crate::api::{ApiError, Client, ClientSettings, Credentials, Secret};
use crate::config::{AccountConfig, Accounts, Config, ConfigError};
use crate::exposition::Exposition;
use crate::files::describe_io_error;
use crate::poller::budget::{self, AccountBudget, UidWindows, WeightWindow};
use crate::poller::state::{Forgotten, Opened, StateError, StateStore};
use crate::poller::{PollSettings, PolledAccount, PollerSetup};
use crate::snapshot::AccountSlot;
use crate::web::{self, app, AppState, ReloadRequest, WebStack};
use axum::Router;
use capi_sim::{SimExchange, SimOptions};
use fleet::{Fleet, Wanted};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{error, info, warn};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot listen on {address}: {}; choose another --web.listen-address", describe_io_error(.error))]
    Listen { address: String, error: std::io::Error },
    #[error("cannot start the simulated exchange: {0}")]
    Demo(std::io::Error),
    #[error("cannot set up the HTTP client")]
    Client(#[from] ApiError),
    #[error("cannot start the pollers' thread: {0}")]
    Pollers(std::io::Error),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Web(#[from] crate::web::WebError),
    #[error(transparent)]
    State(#[from] StateError),
}

/// Reads the configuration again (flags, `--config.file`, `--web.config.file`), for a reload.
pub type Reread = Box<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// Runs the exporter until `shutdown` completes, then stops the pollers and returns.
pub async fn run(
    config: Config,
    reread: Reread,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    // First: a stray signal during a long start (a large state file) must not end it either.
    ignore_stray_signals();
    let open_files = raise_open_files_limit();
    // SIGHUP reloads: listened for from the start, so that one sent during a long start neither
    // ends the process (its default action) nor is lost.
    let hangups = signal(SignalKind::hangup()).ok();
    let (base_url, demo_accounts, demo) = resolve_accounts(&config).await?;
    let (store, first_start) = match config.state_file.as_deref() {
        Some(path) => open_state(path).map(|(store, first_start)| (Some(store), first_start))?,
        None => (None, true),
    };
    let backfill = backfill(&config, first_start);
    let mut wiring = Wiring {
        http: Client::http_pool(config.timeout),
        client: ClientSettings { base_url, timeout: config.timeout, locale: config.locale.clone() },
        ip_budget: Arc::new(Mutex::new(WeightWindow::new(config.ip_weight_budget))),
        uid_windows: UidWindows::new(config.uid_weight_budget),
        store: store.map(Arc::new),
        backfill,
        demo_accounts,
    };
    let (wanted, settings) = wiring.plan(&config);
    if let Some(store) = &wiring.store {
        forget_unpolled(store, &wanted);
    }
    info!(
        version = crate::version::VERSION,
        revision = crate::version::REVISION,
        accounts = wanted.len(),
        names = %listed(wanted.iter().map(|w| w.account.name.as_str())),
        poll_interval = ?settings.interval,
        ip_weight_budget = config.ip_weight_budget,
        uid_weight_budget = config.uid_weight_budget,
        open_files_limit = open_files,
        "starting capi_exporter"
    );
    let listeners = bind(&config.listen_addresses).await?;
    // Pollers are set up (and restored counters published) before anyone can scrape.
    let mut fleet = Fleet::new().map_err(RunError::Pollers)?;
    fleet.apply(wanted, &|wanted, slot| wiring.setup(wanted, slot)).await?;
    // The backfill is for the accounts of a first start: one a reload adds counts from its first poll.
    wiring.backfill = Duration::ZERO;
    let exposition = Exposition::new(fleet.slots(), max_age(&config, &settings)).with_coins(config.coins.clone());
    let (expositions, exposition) = watch::channel(Arc::new(exposition));
    let (reload_requests, requests) = mpsc::channel(1);
    let routes = app(AppState {
        exposition,
        telemetry_path: config.telemetry_path.clone(),
        max_requests: config.web.max_requests,
        request_timeout: config.web.request_timeout,
        reload: config.lifecycle.then_some(reload_requests),
    });
    let (stacks, stack) = watch::channel(WebStack::new(routes.clone(), config.web.clone(), None)?);
    log_serving(&config, &listeners, fleet.slots().len());
    let reloader = Reloader { reread, wiring, fleet, expositions, stacks, routes };
    let (stop_reloads, reloads_stopped) = oneshot::channel();
    let reloading = tokio::spawn(reloader.serve(requests, hangups, reloads_stopped));
    web::serve(listeners, stack, shutdown).await;
    let _ = stop_reloads.send(());
    if let Ok(fleet) = reloading.await {
        fleet.stop().await;
    }
    if let Some(exchange) = demo {
        exchange.abort();
    }
    info!("stopped");
    Ok(())
}

/// What every account's poller is made with: fixed at start, since only flags set it.
struct Wiring {
    http: HttpPool,
    client: ClientSettings,
    ip_budget: Arc<Mutex<WeightWindow>>,
    uid_windows: UidWindows,
    store: Option<Arc<StateStore>>,
    /// How far back an account without saved state begins counting: `--bills.backfill` for the
    /// accounts of a first start, none after.
    backfill: Duration,
    /// The demo's accounts, which a reload keeps.
    demo_accounts: Vec<AccountConfig>,
}

impl Wiring {
    /// The accounts this replica polls under `config`, and how.
    fn plan(&self, config: &Config) -> (Vec<Wanted>, PollSettings) {
        let mut accounts = match &config.accounts {
            Accounts::Exchange { accounts, .. } => accounts.clone(),
            Accounts::Demo { .. } => self.demo_accounts.clone(),
        };
        let configured = accounts.len();
        accounts.retain(|account| config.shard.owns(&account.name));
        if accounts.is_empty() && configured > 0 {
            warn!(
                shard = config.shard.index,
                shards = config.shard.count,
                configured,
                "this shard owns none of the configured accounts, so it polls nothing; lower --shard.count if there are more replicas than needed"
            );
        } else if config.shard.count > 1 {
            info!(
                shard = config.shard.index,
                shards = config.shard.count,
                accounts = accounts.len(),
                configured,
                "polling this shard's accounts"
            );
        }
        let settings = poll_settings(config, &accounts, self.backfill);
        warn_unnamed_coins(&accounts, &config.coins);
        let wanted = accounts.into_iter().map(|account| Wanted { account, settings: settings.clone() }).collect();
        (wanted, settings)
    }

    fn setup(&self, wanted: &Wanted, slot: Arc<AccountSlot>) -> Result<PollerSetup, ApiError> {
        let account = &wanted.account;
        Ok(PollerSetup {
            account: PolledAccount {
                client: Client::new(self.http.clone(), self.client.clone(), account.credentials.clone())?,
                coin_ids: account.coin_ids.clone(),
                budget: AccountBudget::new(self.ip_budget.clone(), self.uid_windows.of(&account.name)),
            },
            settings: wanted.settings.clone(),
            slot,
            store: self.store.clone(),
        })
    }
}

/// Figures older than this are withdrawn: `--data.max-age`, or five poll intervals (at least a
/// minute).
fn max_age(config: &Config, settings: &PollSettings) -> Duration {
    let Some(max_age) = config.data_max_age else { return (settings.interval * 5).max(Duration::from_secs(60)) };
    if max_age <= settings.interval {
        warn!(max_age_seconds = max_age.as_secs_f64(), poll_interval_seconds = settings.interval.as_secs_f64(),
            "--data.max-age is not longer than the poll interval: every account's figures will be withdrawn between polls; give it two intervals or more");
    }
    max_age
}

fn log_serving(config: &Config, listeners: &[tokio::net::TcpListener], accounts: usize) {
    let addresses: Vec<String> =
        listeners.iter().filter_map(|listener| listener.local_addr().ok()).map(|a| a.to_string()).collect();
    let web = config.web.config.as_ref();
    info!(
        address = %addresses.join(","),
        path = %config.telemetry_path,
        accounts,
        tls = web.is_some_and(|w| w.tls_enabled()),
        basic_auth = web.is_some_and(|w| w.basic_auth_enabled()),
        max_requests = config.web.max_requests,
        "serving metrics"
    );
}

/// Everything a reload replaces, and how to read the configuration again.
struct Reloader {
    reread: Reread,
    wiring: Wiring,
    fleet: Fleet,
    expositions: watch::Sender<Arc<Exposition>>,
    stacks: watch::Sender<Arc<WebStack>>,
    /// The routes, for the web stack of a new web configuration.
    routes: Router,
}

impl Reloader {
    /// Reloads at each request and SIGHUP, one at a time, until `stop`; then hands the pollers
    /// back to be stopped.
    async fn serve(
        mut self,
        mut requests: mpsc::Receiver<ReloadRequest>,
        mut hangups: Option<Signal>,
        mut stop: oneshot::Receiver<()>,
    ) -> Fleet {
        loop {
            tokio::select! {
                _ = &mut stop => return self.fleet,
                Some(answer) = requests.recv() => {
                    let _ = answer.send(self.reload().await.map_err(|error| error.to_string()));
                }
                Some(()) = next_delivery(&mut hangups) => {
                    info!("SIGHUP received: reloading the configuration files");
                    let _ = self.reload().await;
                }
            }
        }
    }

    /// Reads the configuration files again and applies them, or keeps the configuration in
    /// force if they are refused; says which in a log line and in `capi_config_last_reload_*`.
    async fn reload(&mut self) -> Result<(), RunError> {
        let result = self.try_reload().await;
        self.expositions.borrow().reload_status().record(result.is_ok());
        match &result {
            Ok(()) => {
                let slots = self.fleet.slots();
                info!(accounts = slots.len(), names = %listed(slots.iter().map(|s| s.name())), "configuration reloaded");
            }
            Err(problem) => error!(%problem,
                "cannot reload the configuration; the configuration before keeps running (capi_config_last_reload_successful 0)"),
        }
        result
    }

    async fn try_reload(&mut self) -> Result<(), RunError> {
        let config = (self.reread)()?;
        let stack = WebStack::new(self.routes.clone(), config.web.clone(), Some(&self.stacks.borrow()))?;
        let (wanted, settings) = self.wiring.plan(&config);
        self.fleet.apply(wanted, &|wanted, slot| self.wiring.setup(wanted, slot)).await?;
        let max_age = max_age(&config, &settings);
        let exposition = self.expositions.borrow().successor(self.fleet.slots(), max_age, config.coins.clone());
        self.expositions.send_replace(Arc::new(exposition));
        self.stacks.send_replace(stack);
        Ok(())
    }
}

/// Coins configured without a name would show `coin=""` and not join with their bills.
fn warn_unnamed_coins(accounts: &[AccountConfig], coins: &crate::api::Coins) {
    let unnamed: std::collections::BTreeSet<u64> =
        accounts.iter().flat_map(|a| a.coin_ids.iter().copied()).filter(|id| coins.name(*id).is_none()).collect();
    if !unnamed.is_empty() {
        let ids: Vec<String> = unnamed.iter().map(u64::to_string).collect();
        warn!(coin_ids = %ids.join(","), "these coin ids have no name, so their series carry coin=\"\" and do not join with their bills; name them with --api.coin-names ID=NAME (or coin_names in the accounts file)");
    }
}

/// The first names, comma-separated, and how many more: a start-up line stays readable with a
/// thousand accounts.
fn listed<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 20;
    let more = names.len().saturating_sub(SHOWN);
    let shown: Vec<&str> = names.take(SHOWN).collect();
    match more {
        0 => shown.join(","),
        more => format!("{},... ({more} more)", shown.join(",")),
    }
}

/// How the accounts are polled: at the configured interval, or a longer one when they cannot
/// all be polled within the exchange's weight budget (said at start, and in
/// `capi_poll_interval_seconds`).
fn poll_settings(config: &Config, accounts: &[AccountConfig], backfill: Duration) -> PollSettings {
    let coins = accounts.iter().map(|a| a.coin_ids.len()).max().unwrap_or(1);
    let plan =
        budget::plan(accounts.len(), coins, config.poll_interval, config.ip_weight_budget, config.uid_weight_budget);
    if plan.interval > config.poll_interval {
        warn!(
            accounts = accounts.len(),
            coins,
            configured_seconds = config.poll_interval.as_secs_f64(),
            stretched_seconds = plan.interval.as_secs_f64(),
            "the accounts and coins do not fit the exchange's weight budget at --poll.interval; polling less often (raise the budgets if the exchange allows more, or shard the accounts over several IPs)"
        );
    }
    PollSettings {
        interval: plan.interval,
        overlap: config.bills_overlap,
        backfill,
        bill_queries_per_poll: plan.bill_queries_per_poll,
        coins: config.coins.clone(),
    }
}

/// Binds every listen address (a host name to the first of its addresses that binds).
async fn bind(addresses: &[String]) -> Result<Vec<tokio::net::TcpListener>, RunError> {
    let mut listeners = Vec::with_capacity(addresses.len());
    for address in addresses {
        let listener = match tokio::net::TcpListener::bind(address.as_str()).await {
            Err(error) if address.starts_with("[::]:") && !ipv6_available(&error) => {
                // A host without IPv6 (a container with it switched off): every IPv4 address.
                let ipv4 = address.replacen("[::]", "0.0.0.0", 1);
                warn!(address, %error, instead = ipv4, "IPv6 is not available here; listening on every IPv4 address");
                tokio::net::TcpListener::bind(ipv4.as_str()).await
            }
            bound => bound,
        };
        listeners.push(listener.map_err(|error| RunError::Listen { address: address.clone(), error })?);
    }
    Ok(listeners)
}

/// Whether a failed bind on `[::]` leaves IPv6 possible: no address family support, or no IPv6
/// address at all, means it does not.
fn ipv6_available(error: &std::io::Error) -> bool {
    const NO_FAMILY: i32 = libc::EAFNOSUPPORT;
    !(error.kind() == std::io::ErrorKind::AddrNotAvailable || error.raw_os_error() == Some(NO_FAMILY))
}

/// The base URL, and in demo mode the accounts to poll, after starting the simulated exchange.
async fn resolve_accounts(
    config: &Config,
) -> Result<(String, Vec<AccountConfig>, Option<tokio::task::JoinHandle<()>>), RunError> {
    match &config.accounts {
        Accounts::Exchange { base_url, .. } => Ok((base_url.clone(), Vec::new(), None)),
        Accounts::Demo { seed, count, coin_ids } => {
            let exchange = SimExchange::new(SimOptions::default());
            let mut accounts = Vec::new();
            for index in 0..u64::from(*count) {
                let generated = capi_sim::Credentials::generate(seed.wrapping_add(index));
                exchange.add_account(generated.clone(), coin_ids);
                let credentials = Credentials {
                    api_key: Secret::new(generated.api_key),
                    secret: Secret::new(generated.secret),
                    passphrase: Secret::new(generated.passphrase),
                };
                accounts.push(AccountConfig {
                    name: format!("demo-{}", index + 1),
                    coin_ids: coin_ids.clone(),
                    credentials,
                });
            }
            let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
            let (address, server) = exchange.start(loopback).await.map_err(RunError::Demo)?;
            let activity = exchange.spawn_activity(*seed, capi_sim::DEMO_TICK);
            info!(exchange = %format!("http://{address}"), accounts = count, "demo mode: polling a simulated exchange with generated keys");
            let both = tokio::spawn(async move {
                let _ = tokio::join!(server, activity);
            });
            Ok((format!("http://{address}"), accounts, Some(both)))
        }
    }
}

/// `--bills.backfill` at the first start, when no state file exists yet; none at any later one.
/// An account whose saved state was lost (a torn file moved aside, a bad entry, an entry dropped
/// as another shard's) has series Prometheus already holds: counters that started again at old
/// bills would read as a reset followed by those bills, and `increase()` would count them twice.
fn backfill(config: &Config, first_start: bool) -> Duration {
    if first_start {
        return config.bills_backfill;
    }
    if !config.bills_backfill.is_zero() {
        info!(backfill = ?config.bills_backfill,
            "--bills.backfill applies at the first start only (no state file yet): an account without saved state counts from when it is first polled");
    }
    Duration::ZERO
}

/// Opens the state file and says what it found, and whether this is the first start (no file
/// yet); state that cannot be read or kept aside stops the start, since counting afresh would
/// overwrite it.
fn open_state(path: &std::path::Path) -> Result<(StateStore, bool), StateError> {
    let (store, opened) = StateStore::open(path)?;
    let first_start = matches!(opened, Opened::Missing);
    let path = path.display();
    match opened {
        Opened::Missing => info!(%path, "no saved bill state yet; it will be created after the first poll"),
        Opened::Loaded { accounts } => info!(%path, accounts, "loaded saved bill state"),
        Opened::MovedAside { aside, error } => error!(%path, aside = %aside.display(), %error,
            "the state file is not valid; it was moved aside, and bill counting starts afresh from now"),
        Opened::BadEntries { kept, entries } => {
            for (account, problem) in entries {
                error!(%path, account, problem, kept = %kept.display(),
                    "an account's entry in the state file is not valid; the file as it was is kept aside, and this account's bill counting starts afresh from now");
            }
        }
    }
    Ok((store, first_start))
}

/// Drops the saved state of the accounts this exporter does not poll at its start, saying which.
/// Kept, an account that comes back (a shard count changed and changed back) would resume from
/// its old cursor and count again the bills that the replica which polled it meanwhile counted.
/// (A reload keeps them: an account it removes is polled by no one until one adds it back.)
fn forget_unpolled(store: &StateStore, wanted: &[Wanted]) {
    let polled: Vec<&str> = wanted.iter().map(|w| w.account.name.as_str()).collect();
    match store.forget_others(&polled) {
        Ok(Some(Forgotten { accounts, kept })) => warn!(accounts = %accounts.join(","), kept = %kept.display(),
            "the state file holds accounts this exporter does not poll (another shard's, or no longer configured); their saved state is dropped, and one that comes back counts afresh from then (their entries are kept aside, alone, as a state file: if an account was left out by mistake, stop the exporter and move its entry back, as the README says)"),
        Ok(None) => {}
        // Polling must not wait for the disk: the entries stay, and are looked at again next start.
        Err(error) => warn!(%error,
            "the state file holds accounts this exporter does not poll, and no copy of it could be kept; their entries stay in it, so one polled here again later resumes from its saved cursor and may count again bills another replica counted (remove the copies no longer needed)"),
    }
}

/// Raises the soft limit on open files to the hard one, as Go's runtime does for node_exporter:
/// systemd starts services with 1,024, which connections to `/metrics` could come near. Returns
/// the limit in force (`None`: unlimited).
fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.maximum.is_some() && limit.current != limit.maximum {
        let raised = Rlimit { current: limit.maximum, maximum: limit.maximum };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => return limit.maximum,
            Err(error) => warn!(%error, "cannot raise the limit on open files to its maximum"),
        }
    }
    limit.current
}

/// SIGUSR1, SIGUSR2 and SIGALRM would end the process (their default action), yet nothing here
/// uses them: they are logged and ignored.
fn ignore_stray_signals() {
    let stray = [
        (SignalKind::user_defined1(), "SIGUSR1"),
        (SignalKind::user_defined2(), "SIGUSR2"),
        (SignalKind::alarm(), "SIGALRM"),
    ];
    for (kind, name) in stray {
        if let Ok(mut signal) = signal(kind) {
            tokio::spawn(async move {
                while signal.recv().await.is_some() {
                    info!(signal = name, "signal received and ignored");
                }
            });
        }
    }
}

/// The next delivery of a signal listened for; never, if it could not be listened for.
async fn next_delivery(signal: &mut Option<Signal>) -> Option<()> {
    match signal {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    }
}

/// Completes on Ctrl-C or SIGTERM, listened for from the call on (in the runtime): a signal
/// that comes before the listening began is lost, and the exporter says it serves only after.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    async move {
        tokio::select! {
            _ = next_delivery(&mut interrupt) => {}
            _ = next_delivery(&mut terminate) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_list_of_names_is_cut_with_the_count_left_out() {
        let names: Vec<String> = (1..=25).map(|i| format!("a{i}")).collect();
        let all = |n: usize| listed(names[..n].iter().map(String::as_str));
        assert_eq!(all(2), "a1,a2");
        assert_eq!(all(20).split(',').count(), 20);
        assert!(all(25).ends_with(",a20,... (5 more)"), "{}", all(25));
    }
}
