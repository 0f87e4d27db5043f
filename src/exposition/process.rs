//! The standard `process_*` metrics of client libraries, read from `/proc/self` through `procfs`
//! at each scrape, with the system's own clock tick and page size. On systems without `/proc`
//! the families are absent.

use super::format::{Family, Lines};

const CPU: Family = Family::counter("process_cpu_seconds", "Total user and system CPU time spent in seconds");
const RESIDENT: Family = Family::gauge("process_resident_memory_bytes", "Resident memory size in bytes");
const VIRTUAL: Family = Family::gauge("process_virtual_memory_bytes", "Virtual memory size in bytes");
const START_TIME: Family =
    Family::gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds");
const THREADS: Family = Family::gauge("process_threads", "Number of OS threads in the process");
const OPEN_FDS: Family = Family::gauge("process_open_fds", "Number of open file descriptors");
const MAX_FDS: Family = Family::gauge("process_max_fds", "Maximum number of open file descriptors");

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

/// Writes the process families, if `/proc` can be read.
pub(super) fn write(lines: &mut Lines) {
    let Ok(stats) = read() else { return };
    let no_labels: [(&str, &str); 0] = [];
    lines.family(&CPU, [(no_labels, stats.cpu_seconds)]);
    for (family, value) in [
        (&RESIDENT, stats.resident_bytes),
        (&VIRTUAL, stats.virtual_bytes),
        (&START_TIME, stats.start_time_seconds),
        (&THREADS, stats.threads),
        (&OPEN_FDS, stats.open_fds),
        (&MAX_FDS, stats.max_fds),
    ] {
        lines.family(family, [(no_labels, value)]);
    }
}

fn read() -> procfs::ProcResult<ProcessStats> {
    let me = procfs::process::Process::myself()?;
    let stat = me.stat()?;
    let ticks = procfs::ticks_per_second() as f64;
    let max_fds = match me.limits()?.max_open_files.soft_limit {
        procfs::process::LimitValue::Value(limit) => limit as f64,
        procfs::process::LimitValue::Unlimited => f64::INFINITY,
    };
    Ok(ProcessStats {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_bytes: (stat.rss * procfs::page_size()) as f64,
        virtual_bytes: stat.vsize as f64,
        start_time_seconds: procfs::boot_time_secs()? as f64 + stat.starttime as f64 / ticks,
        threads: stat.num_threads as f64,
        open_fds: me.fd_count()? as f64,
        max_fds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_as_it_is() {
        let stats = read().unwrap();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kib = |key: &str| -> f64 {
            let line = status.lines().find(|l| l.starts_with(key)).unwrap();
            line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap() * 1024.0
        };
        // The kernel's own figures in /proc/self/status, read a moment later.
        assert!((stats.resident_bytes - kib("VmRSS:")).abs() < 64.0 * 1024.0 * 1024.0);
        assert_eq!(stats.virtual_bytes > 0.0, kib("VmSize:") > 0.0);
        assert!(stats.threads >= 1.0 && stats.open_fds >= 3.0 && stats.max_fds >= stats.open_fds);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!(stats.start_time_seconds <= now && stats.start_time_seconds > now - 3_600.0);
    }
}
