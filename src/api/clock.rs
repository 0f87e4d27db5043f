//! The exchange's clock as this machine estimates it. Requests are signed with a timestamp the
//! exchange rejects when it is more than 30 s from its own clock (code 40008), so when that
//! happens the offset is estimated from the answer and later requests use the corrected time.
//!
//! The time comes from the network, so the offset is bounded: at most a day either way. A
//! machine clock a day off is broken beyond what a correction should hide, and an absurd answer
//! must not date every request (or the bill cursor) years away.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The largest offset learned, either way: one day.
pub const MAX_OFFSET_MS: i64 = 86_400_000;

#[derive(Debug, Default)]
pub struct Clock {
    /// The exchange's clock minus this machine's, in milliseconds.
    offset_ms: AtomicI64,
}

impl Clock {
    /// The exchange's time now, in milliseconds since the epoch.
    pub fn now_ms(&self) -> i64 {
        local_now_ms().saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// Learns the offset from a server time read in an answer to a request sent at `sent_ms` and
    /// answered at `received_ms` (local times): the server read its clock about halfway between.
    /// The offset is at most [`MAX_OFFSET_MS`] either way.
    pub fn correct(&self, server_ms: i64, sent_ms: i64, received_ms: i64) -> i64 {
        let offset = estimate_offset(server_ms, sent_ms, received_ms);
        self.offset_ms.store(offset, Ordering::Relaxed);
        offset
    }
}

fn estimate_offset(server_ms: i64, sent_ms: i64, received_ms: i64) -> i64 {
    let middle = (i128::from(sent_ms) + i128::from(received_ms)) / 2;
    let offset = (i128::from(server_ms) - middle).clamp(-i128::from(MAX_OFFSET_MS), i128::from(MAX_OFFSET_MS));
    offset as i64
}

/// This machine's clock, in milliseconds since the epoch.
pub fn local_now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_measured_at_the_middle_of_the_round_trip() {
        assert_eq!(estimate_offset(10_100, 1_000, 1_200), 9_000);
        assert_eq!(estimate_offset(900, 1_000, 1_000), -100);
        assert_eq!(estimate_offset(i64::MAX, 1_000, 1_200), MAX_OFFSET_MS);
        assert_eq!(estimate_offset(i64::MIN, i64::MAX, i64::MAX), -MAX_OFFSET_MS);
        let thirty_years = 30 * 365 * MAX_OFFSET_MS;
        assert_eq!(estimate_offset(local_now_ms() + thirty_years, local_now_ms(), local_now_ms()), MAX_OFFSET_MS);
        let clock = Clock::default();
        assert_eq!(clock.correct(local_now_ms() - 60_000, local_now_ms(), local_now_ms()) / 1000, -60);
        assert!((clock.now_ms() - (local_now_ms() - 60_000)).abs() < 1_000);
    }
}
