//! The `capi_exporter` binary: parse flags, set up logging, run.

use anyhow::Context as _;
use capi_exporter::config::{Cli, Config};
use clap::Parser as _;

#[tokio::main]
async fn main() {
    keep_large_buffers_out_of_the_heap();
    let cli = Cli::parse();
    capi_exporter::logging::init(cli.log_level, cli.log_format);
    if let Err(error) = run(&cli).await {
        eprintln!("capi_exporter: error: {error:#}");
        std::process::exit(1);
    }
}

/// A rendering of /metrics for 1,000 accounts is a 30 MB buffer. glibc's malloc raises its mmap
/// threshold after the first such buffer is freed, and later ones then come from per-thread
/// heaps that keep the memory: RSS grew by tens of MB per rendering thread. A fixed threshold
/// keeps large buffers in their own mappings, returned to the system when freed.
fn keep_large_buffers_out_of_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a tuning parameter, and glibc serializes it with allocations.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

async fn run(cli: &Cli) -> anyhow::Result<()> {
    let config = Config::from_cli(cli, &|name| std::env::var(name).ok()).context("invalid configuration")?;
    capi_exporter::app::run(config, capi_exporter::app::shutdown_signal()).await?;
    Ok(())
}
