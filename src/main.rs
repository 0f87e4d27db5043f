//! The `capi_exporter` binary: parse flags, set up logging, run.

use anyhow::Context as _;
use capi_exporter::config::{Cli, Config};
use clap::Parser as _;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    capi_exporter::logging::init(cli.log_level, cli.log_format);
    if let Err(error) = run(&cli).await {
        eprintln!("capi_exporter: error: {error:#}");
        std::process::exit(1);
    }
}

async fn run(cli: &Cli) -> anyhow::Result<()> {
    let config = Config::from_cli(cli, &|name| std::env::var(name).ok()).context("invalid configuration")?;
    capi_exporter::app::run(config, shutdown_signal()).await?;
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
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
