//! `capi_sim`: the simulated exchange on its own, in scale mode, for load tests: many accounts,
//! each with its own key, served until Ctrl-C or SIGTERM. Not part of the exporter.

#![forbid(unsafe_code)]

use anyhow::Context as _;
use capi_sim::scale::{populate, write_account_files, ScaleSpec};
use capi_sim::{SimExchange, SimOptions};
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};

/// Serves a simulated exchange with many accounts and writes the files a client needs to poll
/// them: DIR/accounts.yml (the exporter's --config.file) and DIR/credentials.json.
#[derive(Debug, Parser)]
#[command(version)]
struct SimCli {
    /// Accounts to create, named acct-0001, acct-0002, ...
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    accounts: u32,
    /// Coins each account holds.
    #[arg(long = "coin-ids", default_value = "2", value_delimiter = ',')]
    coin_ids: Vec<u64>,
    /// Open positions per account, spread over the coins.
    #[arg(long, default_value_t = 5)]
    positions: u32,
    /// Where to serve the exchange's API (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The folder to write accounts.yml, credentials.json and secrets/ into.
    #[arg(long)]
    out: PathBuf,
    /// Account k gets the credentials of seed + k.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// IP and UID weight budget per 10 s, as the exchange enforces it; 0 for none.
    #[arg(long = "weight-per-10s", default_value_t = 0)]
    weight_per_10s: u32,
    /// Make up trades, funding and transfers every this many milliseconds; none when absent.
    /// SIGUSR1 stops it for good, while the exchange keeps answering (a test's settled end).
    #[arg(long = "activity-tick-ms", value_parser = clap::value_parser!(u64).range(1..))]
    activity_tick_ms: Option<u64>,
}

#[tokio::main]
async fn main() {
    let cli = SimCli::parse();
    if let Err(error) = run(cli).await {
        eprintln!("capi_sim: error: {error:#}");
        std::process::exit(1);
    }
}

async fn run(cli: SimCli) -> anyhow::Result<()> {
    anyhow::ensure!(!cli.coin_ids.is_empty(), "--coin-ids needs at least one coin id");
    let options =
        SimOptions { weight_per_10s: (cli.weight_per_10s > 0).then_some(cli.weight_per_10s), ..SimOptions::default() };
    let exchange = SimExchange::new(options);
    let spec = ScaleSpec { accounts: cli.accounts, coin_ids: cli.coin_ids, positions: cli.positions, seed: cli.seed };
    let accounts = populate(&exchange, &spec);
    write_account_files(&cli.out, &accounts)
        .with_context(|| format!("cannot write the account files into {}", cli.out.display()))?;
    let (address, server) = exchange
        .start_stoppable(cli.listen)
        .await
        .with_context(|| format!("cannot listen on {}; choose another --listen", cli.listen))?;
    let activity = cli.activity_tick_ms.map(|ms| exchange.spawn_activity(cli.seed, Duration::from_millis(ms)));
    // Listened for before the address is printed: a signal sent as soon as it is, before the
    // listening began, would be lost.
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let mut stop_activity = signal(SignalKind::user_defined1()).context("cannot watch for SIGUSR1")?;
    println!("capi_sim listening on http://{address} accounts={}", accounts.len());
    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = stop_activity.recv() => {
                if let Some(activity) = &activity {
                    activity.abort();
                    println!("capi_sim: activity stopped");
                }
            }
        }
    }
    if let Some(activity) = activity {
        activity.abort();
    }
    server.stop().await;
    Ok(())
}
