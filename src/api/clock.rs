//! The exchange's clock as this machine estimates it. Requests are signed with a timestamp the
//! exchange rejects when it is more than 30 s from its own clock (code 40008), so when that
//! happens the offset is estimated from the answer and later requests use the corrected time.
//!
//! A clock ahead by less than 30 s is never rejected, yet it dates the bill window, and shortens
//! `--bills.overlap` by as much. So every successful answer's HTTP `Date` is read too, and may move
//! the exchange's time earlier, never later: a `Date` clock ahead of the one that dates bills would
//! shorten the overlap in turn, while one behind only delays counting (and a clock behind by more
//! than 30 s is corrected by the rejection). `Date` has whole seconds, so it moves the offset only
//! when clearly earlier ([`DATE_PRECISION_MS`] and half the round trip); taken as is (not as the
//! middle of its second), it errs towards earlier. A `Date` that contradicts the exchange's
//! acceptance of the request (over its 30 s from the offset the request was signed with), or that
//! would have requests rejected again (29 s from the offset a rejection taught), is another
//! clock's, a proxy's say, and is not taken.
//!
//! The time comes from the network, so the offset is bounded: at most a day either way. A
//! machine clock a day off is broken beyond what a correction should hide, and an absurd answer
//! must not date every request (or the bill cursor) years away.

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// The largest offset learned, either way: one day.
pub const MAX_OFFSET_MS: i64 = 86_400_000;

/// How far an offset read from a `Date` must be from the one in use to replace it, beyond half
/// the round trip: the `Date`'s second, and as much again so that estimates do not take turns.
pub const DATE_PRECISION_MS: i64 = 2_000;

/// How far from the exchange's clock a request's timestamp may be and still be accepted.
const TIMESTAMP_WINDOW_MS: i64 = 30_000;

/// How far the exchange's clock may be ahead of [`Clock::now_ms`] with nothing to correct it: a
/// timestamp behind by up to the window is accepted, and a `Date` (a proxy's, say) may take the
/// estimate up to the window, and its precision, earlier than that.
pub const UNCORRECTED_LAG_MS: i64 = 2 * TIMESTAMP_WINDOW_MS + DATE_PRECISION_MS;

#[derive(Debug, Default)]
pub struct Clock {
    learned: Mutex<Learned>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Learned {
    /// The exchange's clock minus this machine's, in milliseconds.
    offset_ms: i64,
    /// The offset the last rejected timestamp taught: the exchange's own time, to the millisecond.
    from_rejection_ms: Option<i64>,
}

impl Clock {
    /// The exchange's time now, in milliseconds since the epoch.
    pub fn now_ms(&self) -> i64 {
        local_now_ms().saturating_add(self.offset_ms())
    }

    pub fn offset_ms(&self) -> i64 {
        self.learned().offset_ms
    }

    fn learned(&self) -> std::sync::MutexGuard<'_, Learned> {
        self.learned.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Learns the offset from a rejected timestamp's answer, which told the server's time, to a
    /// request sent at `sent_ms` and answered at `received_ms` (local times): the server read its
    /// clock about halfway between. The offset is at most [`MAX_OFFSET_MS`] either way.
    pub fn correct(&self, server_ms: i64, sent_ms: i64, received_ms: i64) -> i64 {
        let offset = estimate_offset(server_ms, sent_ms, received_ms);
        *self.learned() = Learned { offset_ms: offset, from_rejection_ms: Some(offset) };
        offset
    }

    /// Learns the offset from the `Date` of an answer that accepted a request signed with
    /// `signed_offset_ms`, when the `Date` is clearly earlier than the offset in use and agrees
    /// with what the exchange accepted and rejected. Returns the new offset when it changed.
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
        let mut learned = self.learned();
        let distance = |from: i64| (i128::from(offset) - i128::from(from)).abs();
        let clearly_earlier =
            i128::from(learned.offset_ms) - i128::from(offset) > i128::from(DATE_PRECISION_MS) + round_trip / 2;
        let agrees_with_acceptance = distance(signed_offset_ms) <= i128::from(TIMESTAMP_WINDOW_MS + 1_000) + round_trip;
        let agrees_with_rejection =
            learned.from_rejection_ms.is_none_or(|exact| distance(exact) <= i128::from(TIMESTAMP_WINDOW_MS - 1_000));
        (clearly_earlier && agrees_with_acceptance && agrees_with_rejection).then(|| {
            learned.offset_ms = offset;
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

/// This machine's clock as it was at the first call, moved on since by the clock of time since
/// boot (`CLOCK_BOOTTIME`: it never steps, and counts a suspend or a paused VM): the time of
/// figures fetched, and of the scrapes that judge their age. A step of the wall clock (an
/// operator, NTP at boot) moves neither, so it can neither bring withdrawn figures back as fresh
/// (a step back) nor withdraw fresh ones (a step forward).
pub fn steady_now_ms() -> i64 {
    static START: OnceLock<(i64, i64)> = OnceLock::new();
    let (start_boot_ms, start_ms) = *START.get_or_init(|| (since_boot_ms(), local_now_ms()));
    start_ms.saturating_add(since_boot_ms().saturating_sub(start_boot_ms))
}

fn since_boot_ms() -> i64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    now.tv_sec.saturating_mul(1000).saturating_add(now.tv_nsec / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steady_clock_starts_at_the_wall_clock_and_never_goes_back() {
        let first = steady_now_ms();
        assert!((first - local_now_ms()).abs() < 1_000);
        let later = steady_now_ms();
        assert!(later >= first);
    }

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
    fn a_date_moves_the_exchanges_time_only_earlier_and_only_when_clearly() {
        let clock = Clock::default();
        // Within the precision of a whole-second date, or later: the offset in use stays.
        assert_eq!(clock.correct_from_date(10_000 - 1_999, 0, 10_000, 10_000), None);
        assert_eq!(clock.correct_from_date(10_000 + 5_000, 0, 10_000, 10_200), None);
        // Earlier by less than 2 s and half of a slow round trip.
        assert_eq!(clock.correct_from_date(8_500, 0, 10_000, 16_000), None);
        assert_eq!(clock.offset_ms(), 0);
        // This machine 20 s ahead: learned, from the middle of the round trip.
        assert_eq!(clock.correct_from_date(80_000, 0, 100_000, 100_400), Some(-20_200));
        assert_eq!(clock.correct_from_date(79_000, -20_200, 100_000, 100_400), None, "the second before, read again");
        // This machine's clock set back during the request.
        assert_eq!(clock.correct_from_date(0, -20_200, 100_000, 99_000), None);
        assert_eq!(clock.offset_ms(), -20_200);
    }

    #[test]
    fn a_date_the_exchanges_acceptance_or_rejection_contradicts_is_not_taken() {
        // Accepted with a timestamp signed by this machine's clock: a `Date` 40 s earlier is not
        // the exchange's clock, nor an absurd one.
        let clock = Clock::default();
        assert_eq!(clock.correct_from_date(60_000, 0, 100_000, 100_000), None);
        assert_eq!(clock.correct_from_date(i64::MIN, 0, i64::MAX, i64::MAX), None);
        // A rejected timestamp taught that the exchange is 90 s behind this machine.
        clock.correct(10_000, 100_000, 100_000);
        assert_eq!(clock.offset_ms(), -90_000);
        // A proxy's `Date` by this machine's clock would be later: never taken.
        assert_eq!(clock.correct_from_date(100_000, -90_000, 100_000, 100_200), None);
        // 30.5 s earlier than the rejection taught: within what the exchange accepted, but
        // requests signed by it would be rejected again.
        assert_eq!(clock.correct_from_date(100_000 - 120_500, -90_000, 100_000, 100_000), None);
        assert_eq!(clock.offset_ms(), -90_000);
        // 25 s earlier: taken.
        assert_eq!(clock.correct_from_date(100_000 - 115_000, -90_000, 100_000, 100_000), Some(-115_000));
    }
}
