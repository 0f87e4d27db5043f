//! What the metrics handler did, as client_golang's promhttp counts it: requests by HTTP status
//! code and requests in flight. The web layer counts, the exposition shows.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Debug)]
pub struct HandlerStats {
    in_flight: AtomicU64,
    by_code: Mutex<BTreeMap<u16, u64>>,
}

impl Default for HandlerStats {
    /// 200, 500 and 503 are shown from the start, at 0, as promhttp does.
    fn default() -> Self {
        let by_code = [200, 500, 503].into_iter().map(|code| (code, 0)).collect();
        Self { in_flight: AtomicU64::new(0), by_code: Mutex::new(by_code) }
    }
}

/// One request in flight until dropped (once its answer is sent, or the client went away);
/// counted by its status code with [`InFlight::answered`], or by none if never answered.
#[derive(Debug)]
pub struct InFlight {
    stats: Arc<HandlerStats>,
}

impl HandlerStats {
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight { stats: self.clone() }
    }

    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Requests answered, by status code.
    pub fn by_code(&self) -> BTreeMap<u16, u64> {
        self.by_code.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl InFlight {
    pub fn answered(&self, code: u16) {
        let mut by_code = self.stats.by_code.lock().unwrap_or_else(PoisonError::into_inner);
        let count = by_code.entry(code).or_insert(0);
        *count = count.saturating_add(1);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_code_and_leave_the_in_flight_count_when_done() {
        let stats = Arc::new(HandlerStats::default());
        let (first, second) = (stats.start(), stats.start());
        assert_eq!(stats.in_flight(), 2);
        first.answered(200);
        assert_eq!(stats.in_flight(), 2, "in flight until sent");
        drop((first, second));
        assert_eq!(stats.in_flight(), 0);
        assert_eq!(stats.by_code(), [(200, 1), (500, 0), (503, 0)].into());
    }
}
