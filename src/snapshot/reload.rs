//! Whether the configuration files last read, at start or by a reload, are the ones in force,
//! as Prometheus and Alertmanager show theirs. The reload records, the exposition shows.

use super::stats::unix_now;
use std::sync::{Mutex, PoisonError};

#[derive(Debug)]
pub struct ReloadStatus {
    /// Whether the last reload succeeded, and when the last one that did (or the start) was.
    last: Mutex<(bool, f64)>,
}

impl Default for ReloadStatus {
    /// The files read at start are in force.
    fn default() -> Self {
        Self { last: Mutex::new((true, unix_now())) }
    }
}

impl ReloadStatus {
    pub fn record(&self, successful: bool) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        *last = if successful { (true, unix_now()) } else { (false, last.1) };
    }

    /// Whether the last reload succeeded, and the Unix time of the last success.
    pub fn last(&self) -> (bool, f64) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_reload_keeps_the_time_of_the_last_success() {
        let (ok, started) = ReloadStatus::default().last();
        assert!(ok && started > 1.7e9, "the start is a success, now");
        let status = ReloadStatus { last: Mutex::new((true, 1_000.0)) };
        status.record(false);
        assert_eq!(status.last(), (false, 1_000.0));
        status.record(true);
        let (ok, reloaded) = status.last();
        assert!(ok && reloaded >= started, "a success is recorded with its time");
    }
}
