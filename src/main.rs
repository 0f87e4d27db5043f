//! The `capi_exporter` binary: parse flags, set up logging, run.

#![forbid(unsafe_code)]

use anyhow::Context as _;
use capi_exporter::config::{usage_error_line, Cli, Config};
use clap::Parser as _;

/// jemalloc, configured in `.cargo/config.toml` to give freed memory back within 0.2 s. Each
/// account's lines are rendered anew at its publications, on whichever server thread scrapes:
/// with glibc's allocator the memory of the lines replaced stayed with the thread that had
/// allocated them, and a scrape that renders every account left 30 MB more resident at 1,000
/// accounts (measured: 98 against 69 MiB at its peak).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|error| exit_on_usage_error(error));
    let log_format = cli.log_format;
    capi_exporter::logging::init(cli.log_level, log_format);
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|runtime| {
            let result = runtime.block_on(run(cli));
            // A bcrypt check or state write still running on a blocking thread must not hold up
            // the exit: the check is of no use any more, and a write is atomic.
            runtime.shutdown_timeout(std::time::Duration::from_secs(2));
            result
        });
    if let Err(error) = result {
        capi_exporter::logging::fatal(log_format, &format!("{error:#}"));
        std::process::exit(1);
    }
}

/// `--help` and `--version` print as clap prints them; a usage error is one line with the same
/// prefix as a configuration error, then exit code 2 as clap's own.
fn exit_on_usage_error(error: clap::Error) -> ! {
    if !error.use_stderr() {
        error.exit();
    }
    let args: Vec<String> = std::env::args_os().map(|arg| arg.to_string_lossy().into_owned()).collect();
    let line = usage_error_line(&error, &args, |name| std::env::var_os(name).is_some());
    eprintln!("capi_exporter: error: {line}");
    std::process::exit(2);
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = Config::from_environment(&cli).context("invalid configuration")?;
    if cli.config_check {
        for line in capi_exporter::app::check(&config)? {
            println!("capi_exporter: {line}");
        }
        return Ok(());
    }
    let reread = std::sync::Arc::new(move || Config::from_environment(&cli));
    capi_exporter::app::run(config, reread, capi_exporter::app::shutdown_signal()).await?;
    Ok(())
}
