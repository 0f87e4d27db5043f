//! The exchange's clock as this machine estimates it. Requests are signed with a timestamp the
//! exchange rejects when it is more than 30 s from its own clock (code 40008), so when that
//! happens the offset is estimated from the answer and later requests use the corrected time.
//!
//! A clock off by less than 30 s is never rejected, yet it dates the bill window: one ahead would
//! shorten `--bills.overlap` by as much. So every successful answer's HTTP `Date` is read too. It
//! has whole seconds only, so it replaces the offset in use only when it is clearly another
//! ([`DATE_PRECISION_MS`] and half the round trip); taken as is (not as the middle of its second),
//! it errs towards an exchange clock earlier than it is, which lengthens the overlap rather than
//! shortening it. A `Date` that contradicts the exchange's acceptance of the request (over its 30 s
//! from the offset the request was signed with) is another clock's, a proxy's say, and not taken.
//!
//! The time comes from the network, so the offset is bounded: at most a day either way. A
//! machine clock a day off is broken beyond what a correction should hide, and an absurd answer
//! must not date every request (or the bill cursor) years away.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The largest offset learned, either way: one day.
pub const MAX_OFFSET_MS: i64 = 86_400_000;

/// How far an offset read from a `Date` must be from the one in use to replace it, beyond half
/// the round trip: the `Date`'s second, and as much again so that estimates do not take turns.
pub const DATE_PRECISION_MS: i64 = 2_000;

/// How far from the exchange's clock a request's timestamp may be and still be accepted.
const TIMESTAMP_WINDOW_MS: i64 = 30_000;

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

    /// Learns the offset from the `Date` of an answer that accepted a request signed with
    /// `signed_offset_ms`, when the `Date` is clearly off the offset in use and agrees with that
    /// acceptance. Returns the new offset when it changed.
    pub fn correct_from_date(
        &self,
        date_ms: i64,
        signed_offset_ms: i64,
        sent_ms: i64,
        received_ms: i64,
    ) -> Option<i64> {
        // Negative when this machine's clock was set back during the request: nothing to go by.
        let round_trip = i128::from(received_ms) - i128::from(sent_ms);
        if round_trip < 0 {
            return None;
        }
        let offset = estimate_offset(date_ms, sent_ms, received_ms);
        let from_signed = (i128::from(offset) - i128::from(signed_offset_ms)).abs();
        let from_current = (i128::from(offset) - i128::from(self.offset_ms())).abs();
        let agrees_with_acceptance = from_signed <= i128::from(TIMESTAMP_WINDOW_MS + 1_000) + round_trip;
        let clearly_off = from_current > i128::from(DATE_PRECISION_MS) + round_trip / 2;
        (agrees_with_acceptance && clearly_off).then(|| {
            self.offset_ms.store(offset, Ordering::Relaxed);
            offset
        })
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

    #[test]
    fn a_date_moves_the_offset_only_when_clearly_off_and_consistent_with_the_acceptance() {
        let clock = Clock::default();
        // Within the precision of a whole-second date: the offset in use stays.
        assert_eq!(clock.correct_from_date(10_000 - 1_999, 0, 10_000, 10_000), None);
        assert_eq!(clock.correct_from_date(10_000 + 1_500, 0, 10_000, 10_200), None);
        // Beyond it by more than half of a slow round trip only.
        assert_eq!(clock.correct_from_date(18_000, 0, 10_000, 16_000), None);
        assert_eq!(clock.offset_ms(), 0);
        // This machine 20 s ahead: learned, from the middle of the round trip.
        assert_eq!(clock.correct_from_date(80_000, 0, 100_000, 100_400), Some(-20_200));
        assert_eq!(clock.correct_from_date(81_000, -20_200, 100_000, 100_400), None, "the same second, read again");
        // This machine's clock set back during the request.
        assert_eq!(clock.correct_from_date(0, -20_200, 100_000, 99_000), None);
        assert_eq!(clock.offset_ms(), -20_200);
    }

    #[test]
    fn a_date_the_exchanges_acceptance_contradicts_is_not_taken() {
        // Learned from a rejected timestamp: the exchange is 90 s behind this machine.
        let clock = Clock::default();
        clock.correct(10_000, 100_000, 100_000);
        assert_eq!(clock.offset_ms(), -90_000);
        // A proxy's `Date` by this machine's clock, on an answer the exchange accepted with the
        // timestamp signed 90 s back: that `Date` is not the exchange's clock.
        assert_eq!(clock.correct_from_date(100_000, -90_000, 100_000, 100_200), None);
        assert_eq!(clock.offset_ms(), -90_000);
        // Within the exchange's 30 s (and a second for the `Date`, and the round trip): taken.
        assert_eq!(clock.correct_from_date(100_000 - 59_000, -90_000, 100_000, 100_000), Some(-59_000));
        // An absurd `Date` on an accepted request contradicts the acceptance too.
        assert_eq!(clock.correct_from_date(i64::MAX, -59_000, 100_000, 100_000), None);
        assert_eq!(clock.correct_from_date(i64::MIN, -59_000, i64::MAX, i64::MAX), None);
    }
}
