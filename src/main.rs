//! The `capi_exporter` binary: parse flags, set up logging, run.

use anyhow::Context as _;
use capi_exporter::config::{Cli, Config};
use clap::Parser as _;

fn main() {
    let cli = Cli::parse();
    capi_exporter::logging::init(cli.log_level, cli.log_format);
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|runtime| {
            let result = runtime.block_on(run(&cli));
            // A bcrypt check or state write still running on a blocking thread must not hold up
            // the exit: the check is of no use any more, and a write is atomic.
            runtime.shutdown_timeout(std::time::Duration::from_secs(2));
            result
        });
    if let Err(error) = result {
        eprintln!("capi_exporter: error: {error:#}");
        std::process::exit(1);
    }
}

async fn run(cli: &Cli) -> anyhow::Result<()> {
    let config = Config::from_cli(cli, &|name| std::env::var(name).ok()).context("invalid configuration")?;
    capi_exporter::app::run(config, capi_exporter::app::shutdown_signal()).await?;
    Ok(())
}
