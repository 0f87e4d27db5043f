//! Wires everything together: accounts (or the demo exchange), pollers, exposition and server;
//! and reloads the configuration files on SIGHUP or `/-/reload`.

mod fleet;
mod plan;

use crate::api::client::HttpPool;
use crate::api::credentials::Known;
use crate::api::{ApiError, Client, ClientSettings, Credentials, Secret};
use crate::config::{AccountConfig, Accounts, Config, ConfigError};
use crate::exposition::Exposition;
use crate::poller::budget::{AccountBudget, UidWindows, WeightWindow};
use crate::poller::state::{Checked, Forgotten, Opened, StateError, StateStore};
use crate::poller::{PolledAccount, PollerSetup};
use crate::snapshot::AccountSlot;
use crate::web::{self, app, AppState, ReloadRequest, WebStack};
use axum::Router;
use capi_sim::{SimExchange, SimOptions};
use fleet::{Fleet, Wanted};
use plan::Plan;
use std::collections::BTreeSet;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{error, info, warn};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start the simulated exchange: {0}")]
    Demo(std::io::Error),
    #[error("cannot set up the HTTP client")]
    Client(#[from] ApiError),
    #[error("cannot start the pollers' thread: {0}")]
    Pollers(std::io::Error),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the configuration could not be read again: {0}")]
    Reread(tokio::task::JoinError),
    #[error(transparent)]
    Web(#[from] crate::web::WebError),
    #[error(transparent)]
    State(#[from] StateError),
}

/// Reads the configuration again (flags, `--config.file`, `--web.config.file`), for a reload.
pub type Reread = Arc<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

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
    let (base_url, demo) = resolve_exchange(&config).await?;
    let (store, first_start) = match config.state_file.as_deref() {
        Some(path) => open_state(path).map(|(store, first_start)| (Some(store), first_start))?,
        None => (None, true),
    };
    // `--bills.backfill` at the first start only, when no state file exists yet. An account whose
    // saved state was lost (a torn file moved aside, a bad entry, an entry dropped as another
    // shard's) has series Prometheus already holds: counters that started again at old bills would
    // read as a reset followed by those bills, and `increase()` would count them twice.
    let backfill = if first_start { config.bills_backfill } else { Duration::ZERO };
    let mut wiring = Wiring {
        http: Client::http_pool(config.timeout),
        client: ClientSettings { base_url, timeout: config.timeout, locale: config.locale.clone() },
        ip_budget: Arc::new(Mutex::new(WeightWindow::new(config.ip_weight_budget))),
        uid_windows: UidWindows::new(config.uid_weight_budget),
        store: store.map(Arc::new),
        known: Known::default(),
        backfill,
        backfilled: BTreeSet::new(),
    };
    let plan = wiring.plan(&config);
    if let Some(store) = &wiring.store {
        forget_unpolled(store, &plan.names()).await;
        if !first_start {
            warn_of_accounts_not_backfilled(config.bills_backfill, store, &plan.names());
        }
    }
    info!(
        version = crate::version::VERSION,
        revision = crate::version::REVISION,
        accounts = plan.accounts.len(),
        names = %listed(plan.accounts.iter().map(|a| a.name.as_str())),
        poll_interval = ?plan.settings.interval,
        ip_weight_budget = config.ip_weight_budget,
        uid_weight_budget = config.uid_weight_budget,
        open_files_limit = open_files,
        "starting capi_exporter"
    );
    let listeners = crate::web::bind(&config.listen_addresses).await?;
    // Pollers are set up (and restored counters published) before anyone can scrape.
    let mut fleet = Fleet::new().map_err(RunError::Pollers)?;
    let max_age = plan.max_age;
    wiring.backfilled = plan.names().into_iter().collect();
    fleet.apply(plan.wanted(|name| wiring.backfill_of(name)), &|wanted, slot| wiring.setup(wanted, slot)).await?;
    let exposition = Exposition::new(fleet.slots(), max_age).with_coins(config.coins.clone());
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
    /// Every configured account's credentials (other shards' too), for the clients' redaction.
    known: Known,
    /// How far back the accounts of a first start begin counting: `--bills.backfill`, or none.
    backfill: Duration,
    /// The accounts of the start still polled. One a reload adds counts from its first poll, and
    /// these keep their settings across reloads, so that a reload leaves their pollers alone.
    backfilled: BTreeSet<String>,
}

impl Wiring {
    /// The accounts this replica polls under `config`, and how; says so in the log.
    fn plan(&self, config: &Config) -> Plan {
        let accounts = configured_accounts(config);
        self.known.set(accounts.iter().map(|account| account.credentials.clone()).collect());
        let plan = Plan::new(config, accounts);
        plan.log(config.shard);
        plan
    }

    fn backfill_of(&self, account: &str) -> Duration {
        if self.backfilled.contains(account) {
            self.backfill
        } else {
            Duration::ZERO
        }
    }

    fn setup(&self, wanted: &Wanted, slot: Arc<AccountSlot>) -> Result<PollerSetup, ApiError> {
        let account = &wanted.account;
        Ok(PollerSetup {
            account: PolledAccount {
                client: Client::new(
                    self.http.clone(),
                    self.client.clone(),
                    account.credentials.clone(),
                    self.known.clone(),
                )?,
                coin_ids: account.coin_ids.clone(),
                budget: AccountBudget::new(self.ip_budget.clone(), self.uid_windows.of(&account.name)),
            },
            settings: wanted.settings.clone(),
            slot,
            store: self.store.clone(),
        })
    }
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
                // The stop first: a reload pending at shutdown would only delay the exit.
                biased;
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
        // On a blocking thread: files of thousands of accounts take a second to read, which
        // scrapes and probes must not wait for.
        let reread = Arc::clone(&self.reread);
        let config = tokio::task::spawn_blocking(move || reread()).await.map_err(RunError::Reread)??;
        let stack = WebStack::new(self.routes.clone(), config.web.clone(), Some(&self.stacks.borrow()))?;
        let plan = self.wiring.plan(&config);
        let (max_age, polled) = (plan.max_age, plan.names());
        if let Some(store) = &self.wiring.store {
            // Before their pollers start, which save their state.
            let added: Vec<String> = polled.iter().filter(|n| !self.wiring.backfilled.contains(*n)).cloned().collect();
            warn_of_accounts_not_backfilled(config.bills_backfill, store, &added);
        }
        let wanted = plan.wanted(|name| self.wiring.backfill_of(name));
        self.fleet.apply(wanted, &|wanted, slot| self.wiring.setup(wanted, slot)).await?;
        // One removed and added back later counts from its first poll again.
        self.wiring.backfilled.retain(|name| polled.contains(name));
        if let Some(store) = self.wiring.store.clone() {
            // Once their pollers have ended.
            forget_unpolled(&store, &polled).await;
        }
        let exposition = self.expositions.borrow().successor(self.fleet.slots(), max_age, config.coins.clone());
        self.expositions.send_replace(Arc::new(exposition));
        let before = self.stacks.send_replace(stack);
        for dropped in self.stacks.borrow().protection_dropped_since(&before) {
            warn!("{dropped}");
        }
        Ok(())
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

/// What `--config.check` prints: that the configuration is valid, then each warning a start
/// with it would log; or the state file's problem that would stop the start.
pub fn check(config: &Config) -> Result<Vec<String>, StateError> {
    let plan = Plan::new(config, configured_accounts(config));
    let state_file_warnings = match &config.state_file {
        Some(path) => state_file_warnings(path, StateStore::check(path)?, config.bills_backfill, &plan.names()),
        None => Vec::new(),
    };
    let mut lines = config.check();
    let warnings = plan.warnings.iter().map(ToString::to_string).chain(state_file_warnings);
    lines.extend(warnings.map(|warning| format!("warning: {warning}")));
    Ok(lines)
}

/// What a start with this state file would warn of, or log as an error, and polling `polled`.
fn state_file_warnings(path: &std::path::Path, checked: Checked, backfill: Duration, polled: &[String]) -> Vec<String> {
    let file = path.display();
    let mut warnings: Vec<String> = checked.invalid.into_iter().collect();
    warnings.extend(checked.bad_entries.iter().map(|(account, problem)| {
        format!("state file {file}: the entry of account {account:?} is not valid ({problem}); a start keeps a copy of the file aside, and this account's bill counting begins afresh")
    }));
    let unpolled = not_in(&checked.resumed, polled);
    if !unpolled.is_empty() {
        warnings.push(format!("state file {file} holds accounts this replica does not poll ({}): a start moves their entries aside (as {file}.unpolled), and one polled here again later counts afresh", listed(unpolled.into_iter())));
    }
    let unsaved = not_in(polled, &checked.resumed);
    if checked.exists && !backfill.is_zero() && !unsaved.is_empty() {
        warnings.push(format!("{NOT_BACKFILLED}: {}", listed(unsaved.into_iter())));
    }
    warnings
}

/// The names of `names` that `others` lacks: saved accounts not polled, polled ones not saved.
fn not_in<'a>(names: &'a [String], others: &[String]) -> Vec<&'a str> {
    names.iter().filter(|name| !others.contains(name)).map(String::as_str).collect()
}

/// The accounts a configuration lists: its own, or the demo's.
fn configured_accounts(config: &Config) -> Vec<AccountConfig> {
    match &config.accounts {
        Accounts::Exchange { accounts, .. } => accounts.clone(),
        Accounts::Demo { seed, count, coin_ids } => {
            demo_accounts(*seed, *count, coin_ids).into_iter().map(|(_, account)| account).collect()
        }
    }
}

/// The demo's accounts, each with its keys as the simulated exchange takes them: the same for
/// the same seed, so that a reload finds the accounts it started with.
fn demo_accounts(seed: u64, count: u16, coin_ids: &[u64]) -> Vec<(capi_sim::Credentials, AccountConfig)> {
    (0..u64::from(count))
        .map(|index| {
            let generated = capi_sim::Credentials::generate(seed.wrapping_add(index));
            let credentials = Credentials {
                api_key: Secret::new(generated.api_key.clone()),
                secret: Secret::new(generated.secret.clone()),
                passphrase: Secret::new(generated.passphrase.clone()),
            };
            let account =
                AccountConfig { name: format!("demo-{}", index + 1), coin_ids: coin_ids.to_vec(), credentials };
            (generated, account)
        })
        .collect()
}

/// The base URL, after starting the simulated exchange in demo mode.
async fn resolve_exchange(config: &Config) -> Result<(String, Option<tokio::task::JoinHandle<()>>), RunError> {
    match &config.accounts {
        Accounts::Exchange { base_url, .. } => Ok((base_url.clone(), None)),
        Accounts::Demo { seed, count, coin_ids } => {
            let exchange = SimExchange::new(SimOptions::default());
            for (generated, _) in demo_accounts(*seed, *count, coin_ids) {
                exchange.add_account(generated, coin_ids);
            }
            let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
            let (address, server) = exchange.start(loopback).await.map_err(RunError::Demo)?;
            let activity = exchange.spawn_activity(*seed, capi_sim::DEMO_TICK);
            info!(exchange = %format!("http://{address}"), accounts = count, "demo mode: polling a simulated exchange with generated keys");
            let both = tokio::spawn(async move {
                let _ = tokio::join!(server, activity);
            });
            Ok((format!("http://{address}"), Some(both)))
        }
    }
}

/// Names the accounts a backfill was asked for that do not get it: those without saved state
/// at a later start (added since, whose first polls failed, or whose state was lost), or added
/// by a reload. Their bills before their first poll are not counted, and the operator should
/// know which.
fn warn_of_accounts_not_backfilled(backfill: Duration, store: &StateStore, polled: &[String]) {
    if backfill.is_zero() {
        return;
    }
    let unsaved = not_in(polled, &store.accounts());
    if !unsaved.is_empty() {
        warn!(accounts = %listed(unsaved.into_iter()), backfill = ?backfill, "{NOT_BACKFILLED}");
    }
}

const NOT_BACKFILLED: &str = "--bills.backfill applies at the first start only (no state file yet): these accounts have no saved state, and count from their first poll";

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

/// Drops the saved state of the accounts this exporter does not poll, at a start or after a
/// reload, saying which. Kept, an account that comes back would resume from its old cursor and
/// count again the bills counted meanwhile under another name or by another replica (a rename
/// and back, a shard count changed and back); a reload's re-added account would also show
/// counts that were never saved if saves were failing.
async fn forget_unpolled(store: &StateStore, polled: &[String]) {
    let polled: Vec<&str> = polled.iter().map(String::as_str).collect();
    match store.forget_others(&polled).await {
        Ok(Some(Forgotten { accounts, kept, not_rewritten })) => {
            let accounts = accounts.join(",");
            warn!(accounts, kept = %kept.display(),
                "the state file holds accounts this exporter does not poll (another shard's, or no longer configured); their saved state is dropped, and one that comes back counts afresh from then (their entries are kept aside, alone, as a state file: if an account was left out by mistake, stop the exporter and move its entry back, as the README says)");
            if let Some(error) = not_rewritten {
                error!(accounts, %error,
                    "the state file could not be written without the accounts dropped; the next save that succeeds drops them, and until then a restart would resume them from their saved cursor and may count again bills counted meanwhile elsewhere");
            }
        }
        Ok(None) => {}
        // Polling must not wait for the disk: the entries stay, and are looked at again next time.
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
