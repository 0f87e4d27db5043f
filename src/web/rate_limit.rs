//! The web configuration's `rate_limit`: a token bucket like Go's `rate.NewLimiter(rate.Every(interval),
//! burst)`, which exporter-toolkit answers with 429 when empty.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The validated `rate_limit` section: one request per `interval`, up to `burst` at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RateLimit {
    pub(crate) interval: Duration,
    pub(crate) burst: u32,
}

/// A token bucket that starts full.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    limit: RateLimit,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

impl RateLimiter {
    pub(crate) fn new(limit: RateLimit) -> Self {
        let bucket = Bucket { tokens: f64::from(limit.burst), refilled_at: Instant::now() };
        RateLimiter { limit, bucket: Mutex::new(bucket) }
    }

    /// Takes a token if there is one.
    pub(crate) fn allow(&self) -> bool {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> bool {
        // A poisoned lock only means another request panicked mid-update; the counts stay usable.
        let mut bucket = self.bucket.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let earned =
            now.saturating_duration_since(bucket.refilled_at).as_secs_f64() / self.limit.interval.as_secs_f64();
        bucket.tokens = (bucket.tokens + earned).min(f64::from(self.limit.burst));
        bucket.refilled_at = bucket.refilled_at.max(now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_one_request_per_interval() {
        let limiter = RateLimiter::new(RateLimit { interval: Duration::from_secs(1), burst: 2 });
        let start = Instant::now();
        assert!(limiter.allow_at(start));
        assert!(limiter.allow_at(start));
        assert!(!limiter.allow_at(start));
        assert!(!limiter.allow_at(start + Duration::from_millis(500)));
        assert!(limiter.allow_at(start + Duration::from_millis(1000)));
        assert!(!limiter.allow_at(start + Duration::from_millis(1100)));
    }

    #[test]
    fn the_bucket_never_holds_more_than_the_burst() {
        let limiter = RateLimiter::new(RateLimit { interval: Duration::from_millis(10), burst: 1 });
        let later = Instant::now() + Duration::from_secs(60);
        assert!(limiter.allow_at(later));
        assert!(!limiter.allow_at(later));
    }
}
