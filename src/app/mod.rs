//! Wires everything together: accounts (or the demo exchange), pollers, exposition and server.

use crate::api::{ApiError, Client, ClientSettings, Credentials, Secret};
use crate::config::shard::Shard;
use crate::config::{AccountConfig, Accounts, Config};
use crate::exposition::Exposition;
use crate::poller::budget::{self, AccountBudget, WeightWindow};
use crate::poller::state::{Opened, StateError, StateStore};
use crate::poller::supervisor::Supervisor;
use crate::poller::{start_delay, PollSettings, PolledAccount, PollerSetup};
use crate::snapshot::AccountSlot;
use crate::web::{self, app, AppState};
use capi_sim::{SimExchange, SimOptions};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{error, info, warn};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot listen on {address}: {error}; choose another --web.listen-address")]
    Listen { address: String, error: std::io::Error },
    #[error("cannot start the simulated exchange: {0}")]
    Demo(std::io::Error),
    #[error("cannot set up the HTTP client")]
    Client(#[from] ApiError),
    #[error("the HTTP server stopped: {0}")]
    Serve(std::io::Error),
    #[error(transparent)]
    Web(#[from] crate::web::WebError),
    #[error(transparent)]
    State(#[from] StateError),
}

/// Runs the exporter until `shutdown` completes, then stops the pollers and returns.
pub async fn run(config: Config, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), RunError> {
    // First: a stray signal during a long start (a large state file) must not end it either.
    ignore_stray_signals();
    let (base_url, mut accounts, demo) = resolve_accounts(&config).await?;
    let configured = accounts.len();
    accounts.retain(|account| config.shard.owns(&account.name));
    if config.shard != Shard::ALL {
        info!(
            shard = config.shard.index,
            shards = config.shard.count,
            accounts = accounts.len(),
            configured,
            "polling this shard's accounts"
        );
    }
    let http = Client::http_pool(config.timeout);
    let store = config.state_file.as_deref().map(open_state).transpose()?.map(Arc::new);
    let settings = poll_settings(&config, &accounts);
    warn_unnamed_coins(&accounts, &config.coins);
    info!(
        version = crate::version::VERSION,
        revision = crate::version::REVISION,
        accounts = accounts.len(),
        names = %listed(accounts.iter().map(|a| a.name.as_str())),
        poll_interval = ?settings.interval,
        ip_weight_budget = config.ip_weight_budget,
        uid_weight_budget = config.uid_weight_budget,
        "starting capi_exporter"
    );
    let max_age = config.data_max_age.unwrap_or_else(|| (settings.interval * 5).max(Duration::from_secs(60)));
    let slots: Vec<Arc<AccountSlot>> = accounts.iter().map(|a| AccountSlot::new(a.name.clone())).collect();
    let exposition = Arc::new(Exposition::new(slots.clone(), max_age).with_coins(config.coins.clone()));
    // Pollers are set up (and restored counters published) before anyone can scrape.
    let ip_budget = Arc::new(Mutex::new(WeightWindow::new(config.ip_weight_budget)));
    let client_settings = ClientSettings { base_url, timeout: config.timeout, locale: config.locale.clone() };
    let pollers = accounts
        .into_iter()
        .zip(&slots)
        .map(|(account, slot)| {
            let polled = PolledAccount {
                client: Client::new(http.clone(), client_settings.clone(), account.credentials)?,
                coin_ids: account.coin_ids,
                budget: AccountBudget::new(ip_budget.clone(), config.uid_weight_budget),
            };
            Ok(Supervisor::new(PollerSetup {
                account: polled,
                settings: settings.clone(),
                slot: slot.clone(),
                store: store.clone(),
            }))
        })
        .collect::<Result<Vec<Supervisor>, ApiError>>()?;
    let listeners = bind(&config.listen_addresses).await?;
    let addresses: Vec<String> =
        listeners.iter().filter_map(|listener| listener.local_addr().ok()).map(|a| a.to_string()).collect();
    let web = config.web.config.as_ref();
    info!(
        address = %addresses.join(","),
        path = %config.telemetry_path,
        accounts = pollers.len(),
        tls = web.is_some_and(|w| w.tls_enabled()),
        basic_auth = web.is_some_and(|w| w.basic_auth_enabled()),
        "serving metrics"
    );

    for warning in web.iter().flat_map(|web| web.warnings()) {
        warn!(problem = %warning, "the web config asks for something that is not honoured as written");
    }
    let (stop, stopped) = watch::channel(false);
    let polling = spawn_pollers(pollers, settings.interval, stopped).map_err(RunError::Serve)?;

    let state = AppState {
        exposition,
        slots: slots.into(),
        telemetry_path: config.telemetry_path.clone(),
        max_requests: config.web.max_requests,
    };
    let served = web::serve(listeners, app(state), config.web.clone(), shutdown).await;
    let _ = stop.send(true);
    let _ = polling.await;
    if let Some(exchange) = demo {
        exchange.abort();
    }
    served?;
    info!("stopped");
    Ok(())
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

/// Runs the pollers on a thread of their own with a single-threaded runtime: thousands of small
/// request tasks then never wake or migrate between the server's threads.
fn spawn_pollers(
    pollers: Vec<Supervisor>,
    interval: Duration,
    stopped: watch::Receiver<bool>,
) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (done, finished) = tokio::sync::oneshot::channel();
    std::thread::Builder::new().name("poller".into()).spawn(move || {
        runtime.block_on(async move {
            let mut running = JoinSet::new();
            let count = pollers.len();
            for (index, poller) in pollers.into_iter().enumerate() {
                running.spawn(poller.run(start_delay(index, count, interval), stopped.clone()));
            }
            while let Some(ended) = running.join_next().await {
                // A supervisor only ends at shutdown; one that panicked left its account unpolled.
                if let Err(death) = ended {
                    error!(error = %death, "an account's poller supervisor stopped unexpectedly; its account is no longer polled");
                }
            }
        });
        let _ = done.send(());
    })?;
    Ok(finished)
}

/// How the accounts are polled: at the configured interval, or a longer one when they cannot
/// all be polled within the exchange's weight budget (said at start, and in
/// `capi_poll_interval_seconds`).
fn poll_settings(config: &Config, accounts: &[AccountConfig]) -> PollSettings {
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
        backfill: config.bills_backfill,
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

/// The base URL and accounts to poll; in demo mode, starts the simulated exchange first.
async fn resolve_accounts(
    config: &Config,
) -> Result<(String, Vec<AccountConfig>, Option<tokio::task::JoinHandle<()>>), RunError> {
    match &config.accounts {
        Accounts::Exchange { base_url, accounts } => Ok((base_url.clone(), accounts.clone(), None)),
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

/// Opens the state file and says what it found; state that cannot be read or kept aside stops
/// the start, since counting afresh would overwrite it.
fn open_state(path: &std::path::Path) -> Result<StateStore, StateError> {
    let (store, opened) = StateStore::open(path)?;
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
    Ok(store)
}

/// SIGUSR1, SIGUSR2 and SIGALRM would end the process (their default action), yet nothing here
/// uses them: they are logged and ignored.
fn ignore_stray_signals() {
    #[cfg(unix)]
    for (kind, name) in [
        (tokio::signal::unix::SignalKind::user_defined1(), "SIGUSR1"),
        (tokio::signal::unix::SignalKind::user_defined2(), "SIGUSR2"),
        (tokio::signal::unix::SignalKind::alarm(), "SIGALRM"),
    ] {
        if let Ok(mut signal) = tokio::signal::unix::signal(kind) {
            tokio::spawn(async move {
                while signal.recv().await.is_some() {
                    info!(signal = name, "signal received and ignored");
                }
            });
        }
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
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
