//! The standard `process_*` metrics, read from `/proc/self` at each scrape (Linux only; on
//! other systems the family is simply absent).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::fmt;

#[derive(Debug, Default)]
pub struct ProcessCollector;

/// What `/proc` says about this process.
#[derive(Debug, Default, PartialEq)]
struct ProcessStats {
    cpu_seconds: f64,
    resident_bytes: f64,
    virtual_bytes: f64,
    start_time_seconds: f64,
    threads: f64,
    open_fds: f64,
    max_fds: f64,
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let Some(stats) = read_stats() else { return Ok(()) };
        let cpu = ConstCounter::new(stats.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        for (name, help, value) in [
            ("process_resident_memory_bytes", "Resident memory size in bytes", stats.resident_bytes),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes", stats.virtual_bytes),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                stats.start_time_seconds,
            ),
            ("process_threads", "Number of OS threads in the process", stats.threads),
            ("process_open_fds", "Number of open file descriptors", stats.open_fds),
            ("process_max_fds", "Maximum number of open file descriptors", stats.max_fds),
        ] {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

fn read_stats() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot_time = std::fs::read_to_string("/proc/stat").ok().and_then(|s| boot_time(&s))?;
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let open_fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0);
    let mut stats = parse_stat(&stat, boot_time)?;
    stats.open_fds = open_fds as f64;
    stats.max_fds = max_open_files(&limits).unwrap_or(f64::NAN);
    Some(stats)
}

/// Clock ticks per second and page size: the values of every Linux platform this runs on.
const TICKS_PER_SECOND: f64 = 100.0;
const PAGE_SIZE: f64 = 4096.0;

/// Parses `/proc/self/stat`; the command name may contain spaces, so fields count from its `)`.
fn parse_stat(stat: &str, boot_time: f64) -> Option<ProcessStats> {
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // `fields[0]` is field 3 (state) in proc(5)'s numbering.
    let number = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse().ok() };
    Some(ProcessStats {
        cpu_seconds: (number(14)? + number(15)?) / TICKS_PER_SECOND,
        threads: number(20)?,
        start_time_seconds: boot_time + number(22)? / TICKS_PER_SECOND,
        virtual_bytes: number(23)?,
        resident_bytes: number(24)? * PAGE_SIZE,
        open_fds: 0.0,
        max_fds: 0.0,
    })
}

fn boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat.lines().find_map(|line| line.strip_prefix("btime ")?.trim().parse().ok())
}

fn max_open_files(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (capi (exporter)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 7 0 12345 104857600 2560 18446744073709551615";
        let stats = parse_stat(stat, 1_700_000_000.0).unwrap();
        assert_eq!(stats.cpu_seconds, 3.0);
        assert_eq!(stats.threads, 7.0);
        assert_eq!(stats.start_time_seconds, 1_700_000_123.45);
        assert_eq!(stats.virtual_bytes, 104857600.0);
        assert_eq!(stats.resident_bytes, 2560.0 * 4096.0);
    }

    #[test]
    fn limits_and_boot_time_are_found() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024.0));
        assert_eq!(boot_time("cpu 1 2 3\nbtime 1700000000\n"), Some(1_700_000_000.0));
    }
}
