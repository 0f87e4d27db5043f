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
    capi_exporter::app::run(config, capi_exporter::app::shutdown_signal()).await?;
    Ok(())
}
