//! What an account's poller did: requests by outcome and their latency, the exchange's error
//! codes, unreadable fields, state file failures, pacing. Plain values owned by the poller and
//! published with each snapshot, so that a scrape shows them as of the last poll, like the
//! figures.

use crate::api::fields::DecodeProblem;
use crate::api::{ApiError, Endpoint, Outcome};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Request latency buckets, from a fast loopback answer to the longest sensible timeout.
pub const LATENCY_BUCKETS: [f64; 11] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// At most this many exchange error codes are told apart per account; others are counted as
/// `other`, so that an exchange sending ever new codes cannot create ever new series.
pub const MAX_ERROR_CODES: usize = 32;
/// At most this many distinct unreadable fields are told apart per account, the others counted
/// under the field `other`.
pub const MAX_PROBLEM_FIELDS: usize = 128;
const OTHER: &str = "other";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountStats {
    pub requests: BTreeMap<(Endpoint, Outcome), u64>,
    pub latency: BTreeMap<Endpoint, Histogram>,
    /// When a request to the endpoint last succeeded, Unix time in seconds.
    pub last_success: BTreeMap<Endpoint, f64>,
    pub exchange_errors: BTreeMap<(Endpoint, String), u64>,
    /// By endpoint, record and field.
    pub decode_problems: BTreeMap<(Endpoint, &'static str, String), u64>,
    pub state_file_errors: u64,
    pub scans_deferred: u64,
    pub poller_restarts: u64,
    pub poll_interval: Duration,
    pub poll_backoff: Duration,
    /// The exchange's clock minus this machine's, as this account's client knows it.
    pub clock_offset_ms: i64,
    /// When a poll last fully succeeded, Unix time in seconds.
    pub last_good_poll: Option<f64>,
    pub last_error: Option<LastError>,
}

/// The last request that failed, for the status page.
#[derive(Debug, Clone, PartialEq)]
pub struct LastError {
    /// Unix time in seconds.
    pub at: f64,
    pub endpoint: Endpoint,
    pub outcome: Outcome,
    /// The error as logged (credentials redacted), its code's meaning included; at most
    /// [`MAX_ERROR_TEXT`] bytes.
    pub text: String,
}

/// The longest error text kept: an HTML error page can be long.
pub const MAX_ERROR_TEXT: usize = 300;

impl AccountStats {
    /// Every request series at zero, so that rates and alerts work from the start.
    pub fn new(poll_interval: Duration) -> Self {
        let mut stats = Self { poll_interval, ..Self::default() };
        for endpoint in Endpoint::ALL {
            for outcome in Outcome::ALL {
                stats.requests.insert((endpoint, outcome), 0);
            }
            stats.latency.insert(endpoint, Histogram::default());
        }
        stats
    }

    /// Records one finished request.
    pub fn request<T>(&mut self, endpoint: Endpoint, result: &Result<T, ApiError>, elapsed: Duration) {
        let outcome = result.as_ref().err().map_or(Outcome::Success, ApiError::outcome);
        bump(self.requests.entry((endpoint, outcome)).or_default());
        self.latency.entry(endpoint).or_default().observe(elapsed.as_secs_f64());
        match result {
            Ok(_) => {
                self.last_success.insert(endpoint, unix_now());
            }
            Err(error) => {
                let text = cut(error.to_string(), MAX_ERROR_TEXT);
                self.last_error = Some(LastError { at: unix_now(), endpoint, outcome, text });
                if let Some(code) = error.exchange_code() {
                    let known = self.exchange_errors.contains_key(&(endpoint, code.to_owned()));
                    let code = if known || self.exchange_errors.len() < MAX_ERROR_CODES { code } else { OTHER };
                    bump(self.exchange_errors.entry((endpoint, code.to_owned())).or_default());
                }
            }
        }
    }

    pub fn decode_problems(&mut self, endpoint: Endpoint, problems: &[DecodeProblem]) {
        for problem in problems {
            let known = self.decode_problems.contains_key(&(endpoint, problem.record, problem.field.clone()));
            let field =
                if known || self.decode_problems.len() < MAX_PROBLEM_FIELDS { problem.field.as_str() } else { OTHER };
            bump(self.decode_problems.entry((endpoint, problem.record, field.to_owned())).or_default());
        }
    }
}

/// Unix time in seconds.
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}

/// `text` cut to at most `max` bytes at a character's boundary, and `…` added where it was cut.
pub(super) fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        text.truncate(text.floor_char_boundary(max));
        text.push('…');
    }
    text
}

fn bump(count: &mut u64) {
    *count = count.saturating_add(1);
}

/// Counts of observations at or below each of [`LATENCY_BUCKETS`], their sum and count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Cumulative, as the exposition writes them.
    pub buckets: [u64; LATENCY_BUCKETS.len()],
    pub count: u64,
    pub sum: f64,
}

impl Histogram {
    pub fn observe(&mut self, value: f64) {
        for (bucket, bound) in self.buckets.iter_mut().zip(LATENCY_BUCKETS) {
            if value <= bound {
                bump(bucket);
            }
        }
        bump(&mut self.count);
        self.sum += value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_outcome_with_their_latency() {
        let mut stats = AccountStats::new(Duration::from_secs(15));
        stats.request::<()>(Endpoint::Bills, &Ok(()), Duration::from_millis(30));
        stats.request::<()>(Endpoint::Bills, &Err(ApiError::Timeout(Duration::from_secs(10))), Duration::from_secs(10));
        assert_eq!(stats.requests[&(Endpoint::Bills, Outcome::Success)], 1);
        assert_eq!(stats.requests[&(Endpoint::Bills, Outcome::Timeout)], 1);
        assert_eq!(stats.requests[&(Endpoint::Account, Outcome::Success)], 0, "created at zero");
        let latency = &stats.latency[&Endpoint::Bills];
        assert_eq!(latency.buckets, [0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2]);
        assert_eq!(latency.count, 2);
        assert!((latency.sum - 10.03).abs() < 1e-9);
        assert!(stats.last_success.contains_key(&Endpoint::Bills));
    }

    #[test]
    fn error_codes_and_problem_fields_past_the_limit_are_other() {
        let mut stats = AccountStats::default();
        for code in 0..MAX_ERROR_CODES + 5 {
            let error = ApiError::Exchange { code: code.to_string(), message: String::new(), server_time_ms: None };
            stats.request::<()>(Endpoint::Account, &Err(error), Duration::ZERO);
        }
        assert_eq!(stats.exchange_errors.len(), MAX_ERROR_CODES + 1);
        assert_eq!(stats.exchange_errors[&(Endpoint::Account, OTHER.to_owned())], 5);
        let problems: Vec<DecodeProblem> = (0..MAX_PROBLEM_FIELDS + 3)
            .map(|i| DecodeProblem { record: "bill", field: format!("f{i}"), detail: "x" })
            .collect();
        stats.decode_problems(Endpoint::Bills, &problems);
        assert_eq!(stats.decode_problems.len(), MAX_PROBLEM_FIELDS + 1);
        assert_eq!(stats.decode_problems[&(Endpoint::Bills, "bill", OTHER.to_owned())], 3);
    }
}
