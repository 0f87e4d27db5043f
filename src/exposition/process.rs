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

/// Writes the process families, if `/proc` can be read.
pub(super) fn write(lines: &mut Lines) {
    let Ok(stats) = read() else { return };
    let no_labels: [(&str, &str); 0] = [];
    for (family, value) in stats {
        lines.family(family, [(no_labels, value)]);
    }
}

/// What `/proc` says about this process, family by family.
fn read() -> procfs::ProcResult<[(&'static Family, f64); 7]> {
    let me = procfs::process::Process::myself()?;
    let stat = me.stat()?;
    let ticks = procfs::ticks_per_second() as f64;
    let max_fds = match me.limits()?.max_open_files.soft_limit {
        procfs::process::LimitValue::Value(limit) => limit as f64,
        procfs::process::LimitValue::Unlimited => f64::INFINITY,
    };
    Ok([
        (&CPU, (stat.utime + stat.stime) as f64 / ticks),
        (&RESIDENT, (stat.rss * procfs::page_size()) as f64),
        (&VIRTUAL, stat.vsize as f64),
        (&START_TIME, procfs::boot_time_secs()? as f64 + stat.starttime as f64 / ticks),
        (&THREADS, stat.num_threads as f64),
        (&OPEN_FDS, me.fd_count()? as f64),
        (&MAX_FDS, max_fds),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_as_it_is() {
        let stats = read().unwrap();
        let value = |family: &Family| stats.iter().find(|(read, _)| *read == family).unwrap().1;
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kib = |key: &str| -> f64 {
            let line = status.lines().find(|l| l.starts_with(key)).unwrap();
            line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap() * 1024.0
        };
        // The kernel's own figures in /proc/self/status, read a moment later, while other tests
        // run: close, and far from the 16 times a wrong page size (4 against 64 KiB) would make.
        let near = |ours: f64, kernel: f64| (0.5..2.0).contains(&(ours / kernel));
        assert!(near(value(&RESIDENT), kib("VmRSS:")), "{} against {}", value(&RESIDENT), kib("VmRSS:"));
        assert!(near(value(&VIRTUAL), kib("VmSize:")), "{} against {}", value(&VIRTUAL), kib("VmSize:"));
        assert!(value(&THREADS) >= 1.0 && value(&OPEN_FDS) >= 3.0 && value(&MAX_FDS) >= value(&OPEN_FDS));
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!(value(&START_TIME) <= now && value(&START_TIME) > now - 3_600.0);
    }
}
