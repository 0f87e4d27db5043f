//! How long to wait before the next poll, after a poll that failed. Pure: the caller supplies
//! the jitter, so tests are exact.
//!
//! - Rate limited (429): the exchange asks to stop sending. Back off exponentially from 5 s to
//!   5 minutes, or as long as its `Retry-After` says if that is longer, with jitter so that many
//!   accounts do not return in step.
//! - Rejected key (auth error): retrying cannot help until a person acts, so poll at a slowing
//!   pace (twice, four times... the interval, up to 15 minutes) rather than hammering.
//! - Anything else (5xx, timeouts, broken answers): already retried within the poll; the next
//!   poll comes at the normal interval. A poll that failed before the exchange answered anything
//!   says nothing about its limits, so a run of 429s (or of rejections) it falls between goes on
//!   where it was: a poll the exchange answered begins the pace afresh.

use std::time::Duration;

const RATE_LIMIT_FIRST: Duration = Duration::from_secs(5);
const RATE_LIMIT_MAX: Duration = Duration::from_secs(300);
const AUTH_MAX: Duration = Duration::from_secs(900);

/// What the last poll ended in, as far as pacing is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    Normal,
    /// A request failed in a way that is neither a rate limit nor a refusal, and the exchange
    /// answered none of the poll's requests.
    Failed,
    RateLimited {
        retry_after: Option<Duration>,
    },
    AuthRejected,
}

impl Pace {
    /// Whether the exchange asked us to stop sending, or refuses the key: no more requests now.
    pub fn stops_requests(self) -> bool {
        matches!(self, Pace::RateLimited { .. } | Pace::AuthRejected)
    }
}

/// Consecutive polls that ended the same troubled way.
#[derive(Debug, Default, Clone)]
pub struct Backoff {
    streak: u32,
    last: Option<Pace>,
}

impl Backoff {
    /// The wait before the next poll, beyond which the poll interval is not enough. `jitter` is
    /// a number in 0..1 that spreads the wait by up to ±20%.
    pub fn next_wait(&mut self, pace: Pace, interval: Duration, jitter: f64) -> Duration {
        // A failure that is no refusal leaves the run it falls in where it was.
        if pace != Pace::Failed {
            let same_trouble = matches!(
                (self.last, pace),
                (Some(Pace::RateLimited { .. }), Pace::RateLimited { .. })
                    | (Some(Pace::AuthRejected), Pace::AuthRejected)
            );
            self.streak = if same_trouble { self.streak.saturating_add(1) } else { 0 };
            self.last = Some(pace);
        }
        let doubled = |first: Duration, max: Duration| first.saturating_mul(1 << self.streak.min(16)).min(max);
        match pace {
            Pace::Normal | Pace::Failed => interval,
            Pace::RateLimited { retry_after } => {
                // Capped after the jitter: five minutes at most, as documented.
                let jittered = doubled(RATE_LIMIT_FIRST, RATE_LIMIT_MAX).mul_f64(0.8 + 0.4 * jitter.clamp(0.0, 1.0));
                let backoff = jittered.min(RATE_LIMIT_MAX);
                backoff.max(retry_after.unwrap_or_default()).max(interval)
            }
            Pace::AuthRejected => doubled(interval.saturating_mul(2), AUTH_MAX).max(interval),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIFTEEN: Duration = Duration::from_secs(15);

    #[test]
    fn a_healthy_poll_waits_the_interval() {
        assert_eq!(Backoff::default().next_wait(Pace::Normal, FIFTEEN, 0.5), FIFTEEN);
    }

    #[test]
    fn rate_limits_back_off_exponentially_up_to_five_minutes_and_reset() {
        let mut backoff = Backoff::default();
        let limited = Pace::RateLimited { retry_after: None };
        let waits: Vec<u64> =
            (0..9).map(|_| backoff.next_wait(limited, Duration::from_secs(1), 0.5).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(backoff.next_wait(Pace::Normal, FIFTEEN, 0.5), FIFTEEN);
        assert_eq!(backoff.next_wait(limited, Duration::from_secs(1), 0.5), Duration::from_secs(5));
    }

    #[test]
    fn a_failure_between_rate_limits_or_rejections_does_not_begin_the_pace_afresh() {
        let mut backoff = Backoff::default();
        let limited = Pace::RateLimited { retry_after: None };
        let one_second = Duration::from_secs(1);
        let waits: Vec<u64> = [limited, Pace::Failed, limited, Pace::Failed, Pace::Failed, limited]
            .into_iter()
            .map(|pace| backoff.next_wait(pace, one_second, 0.5).as_secs())
            .collect();
        assert_eq!(waits, [5, 1, 10, 1, 1, 20]);
        let mut backoff = Backoff::default();
        let waits: Vec<u64> = [Pace::AuthRejected, Pace::Failed, Pace::AuthRejected]
            .into_iter()
            .map(|pace| backoff.next_wait(pace, FIFTEEN, 0.5).as_secs())
            .collect();
        assert_eq!(waits, [30, 15, 60]);
    }

    #[test]
    fn jitter_spreads_the_wait_and_retry_after_wins_when_longer() {
        let limited = Pace::RateLimited { retry_after: None };
        assert_eq!(Backoff::default().next_wait(limited, Duration::from_secs(1), 0.0), Duration::from_secs(4));
        assert_eq!(Backoff::default().next_wait(limited, Duration::from_secs(1), 1.0), Duration::from_secs(6));
        let mut at_the_cap = Backoff::default();
        let longest = (0..9).map(|_| at_the_cap.next_wait(limited, Duration::from_secs(1), 1.0)).max();
        assert_eq!(longest, Some(RATE_LIMIT_MAX), "jitter does not take the wait past five minutes");
        let told = Pace::RateLimited { retry_after: Some(Duration::from_secs(42)) };
        assert_eq!(Backoff::default().next_wait(told, Duration::from_secs(1), 0.5), Duration::from_secs(42));
        assert_eq!(Backoff::default().next_wait(limited, FIFTEEN, 0.5), FIFTEEN, "never faster than the interval");
    }

    #[test]
    fn a_rejected_key_slows_the_polls_to_a_quarter_hour() {
        let mut backoff = Backoff::default();
        let waits: Vec<u64> = (0..7).map(|_| backoff.next_wait(Pace::AuthRejected, FIFTEEN, 0.5).as_secs()).collect();
        assert_eq!(waits, [30, 60, 120, 240, 480, 900, 900]);
    }
}
