//! Which failed requests are tried again within the same poll, and after how long. Pure.
//!
//! A proxy's 5xx, a timeout, a dropped connection or a broken body are often gone a moment
//! later: up to two more attempts, 250 ms then 500 ms apart (with jitter). A rejected timestamp
//! is tried once more at once, since the client has corrected its clock from the answer. Rate
//! limits and refusals are not retried: the poll stops and the next one is paced by
//! [`super::backoff`].

use crate::api::ApiError;
use std::time::Duration;

const MORE_ATTEMPTS: u32 = 2;
const FIRST_PAUSE: Duration = Duration::from_millis(250);

/// The pause before attempt `attempt + 1` after `error`, or `None` to give up. `jitter` in
/// 0..1 spreads the pause between half and one and a half of it.
pub fn retry_after(error: &ApiError, attempt: u32, jitter: f64) -> Option<Duration> {
    if attempt >= MORE_ATTEMPTS {
        return None;
    }
    let transient = match error {
        ApiError::Http { status, .. } => *status >= 500,
        ApiError::Timeout(_) | ApiError::Transport(_) | ApiError::Decode(_) => true,
        _ if error.is_clock_skew() => return (attempt == 0).then_some(Duration::ZERO),
        _ => false,
    };
    transient.then(|| FIRST_PAUSE.saturating_mul(1 << attempt).mul_f64(0.5 + jitter.clamp(0.0, 1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(code: &str) -> ApiError {
        ApiError::Exchange { code: code.into(), message: String::new(), server_time_ms: None }
    }

    #[test]
    fn transient_failures_are_retried_twice_with_growing_pauses() {
        let bad_gateway = ApiError::Http { status: 502, snippet: String::new() };
        assert_eq!(retry_after(&bad_gateway, 0, 0.5), Some(Duration::from_millis(250)));
        assert_eq!(retry_after(&bad_gateway, 1, 0.5), Some(Duration::from_millis(500)));
        assert_eq!(retry_after(&bad_gateway, 2, 0.5), None);
        assert_eq!(retry_after(&ApiError::Timeout(Duration::from_secs(1)), 0, 0.0), Some(Duration::from_millis(125)));
        assert!(retry_after(&ApiError::Transport("reset".into()), 1, 1.0).is_some());
        assert!(retry_after(&ApiError::Decode("cut".into()), 0, 1.0).is_some());
    }

    #[test]
    fn refusals_and_rate_limits_are_not_retried_but_a_rejected_timestamp_once() {
        assert_eq!(retry_after(&ApiError::Http { status: 404, snippet: String::new() }, 0, 0.5), None);
        assert_eq!(retry_after(&ApiError::RateLimited { retry_after: None }, 0, 0.5), None);
        assert_eq!(retry_after(&exchange("40009"), 0, 0.5), None);
        assert_eq!(retry_after(&exchange("40015"), 0, 0.5), None);
        assert_eq!(retry_after(&exchange("40008"), 0, 0.5), Some(Duration::ZERO));
        assert_eq!(retry_after(&exchange("40008"), 1, 0.5), None);
    }
}
