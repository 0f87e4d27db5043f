//! The exporter's own live metrics: requests, their outcomes and latency, per account.

use crate::api::fields::DecodeProblem;
use crate::api::{ApiError, Endpoint, Outcome};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    account: String,
    endpoint: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    account: String,
    endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    account: String,
    endpoint: &'static str,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProblemLabels {
    account: String,
    endpoint: &'static str,
    record: &'static str,
    field: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AccountLabels {
    account: String,
}

/// Request latency buckets, from a fast loopback answer to the longest sensible timeout.
const LATENCY_BUCKETS: [f64; 11] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Live counters shared by every account's poller.
#[derive(Clone, Debug)]
pub struct ExporterMetrics {
    requests: Family<RequestLabels, Counter>,
    exchange_errors: Family<CodeLabels, Counter>,
    durations: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    last_success: Family<EndpointLabels, Gauge<f64, AtomicU64>>,
    decode_problems: Family<ProblemLabels, Counter>,
    state_errors: Family<AccountLabels, Counter>,
    scans_deferred: Family<AccountLabels, Counter>,
    poll_interval: Family<AccountLabels, Gauge<f64, AtomicU64>>,
    poll_backoff: Family<AccountLabels, Gauge<f64, AtomicU64>>,
    poller_restarts: Family<AccountLabels, Counter>,
    clock_offset: Gauge<f64, AtomicU64>,
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

impl Default for ExporterMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ExporterMetrics {
    pub fn new() -> Self {
        Self {
            requests: Family::default(),
            exchange_errors: Family::default(),
            durations: Family::new_with_constructor(latency_histogram),
            last_success: Family::default(),
            decode_problems: Family::default(),
            state_errors: Family::default(),
            scans_deferred: Family::default(),
            poll_interval: Family::default(),
            poll_backoff: Family::default(),
            poller_restarts: Family::default(),
            clock_offset: Gauge::default(),
        }
    }

    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "capi_api_requests",
            "Requests to the exchange by endpoint and outcome",
            self.requests.clone(),
        );
        registry.register(
            "capi_api_exchange_errors",
            "Error answers of the exchange by its error code",
            self.exchange_errors.clone(),
        );
        registry.register(
            "capi_api_request_duration_seconds",
            "Time from sending a request to the exchange to its full answer",
            self.durations.clone(),
        );
        registry.register(
            "capi_last_success_timestamp_seconds",
            "When a request to this endpoint last succeeded (Unix time)",
            self.last_success.clone(),
        );
        registry.register(
            "capi_api_decode_problems",
            "Fields of exchange answers that could not be read; the rest of the record was kept",
            self.decode_problems.clone(),
        );
        registry.register(
            "capi_state_file_errors",
            "Failed writes of the state file (the figures were still published)",
            self.state_errors.clone(),
        );
        registry.register(
            "capi_poll_interval_seconds",
            "Time between the starts of two polls of the account: --poll.interval, or longer when the accounts and coins do not fit the exchange's weight budget in it",
            self.poll_interval.clone(),
        );
        registry.register(
            "capi_poll_backoff_seconds",
            "Extra wait before the account's next poll, after the exchange rate-limited the exporter or rejected the key",
            self.poll_backoff.clone(),
        );
        registry.register(
            "capi_clock_offset_seconds",
            "The exchange's clock minus this machine's, as estimated from its answer to a rejected timestamp (error 40008); requests are signed with the corrected time",
            self.clock_offset.clone(),
        );
        registry.register(
            "capi_poller_restarts",
            "Times the account's poller stopped unexpectedly and was restarted from its last complete poll",
            self.poller_restarts.clone(),
        );
        registry.register(
            "capi_bill_scan_deferred",
            "Polls whose bill scan reached the per-poll query limit and resumes at the next poll",
            self.scans_deferred.clone(),
        );
    }

    /// Creates every request series at zero, so that rates and alerts work from the start.
    pub fn add_account(&self, account: &str) {
        for endpoint in Endpoint::ALL {
            for outcome in Outcome::ALL {
                let _ = self.requests.get_or_create(&request_labels(account, endpoint, outcome));
            }
            let _ = self.durations.get_or_create(&endpoint_labels(account, endpoint));
        }
        let labels = AccountLabels { account: account.into() };
        let _ = self.state_errors.get_or_create(&labels);
        let _ = self.scans_deferred.get_or_create(&labels);
        let _ = self.poll_backoff.get_or_create(&labels);
        let _ = self.poller_restarts.get_or_create(&labels);
    }

    /// Records one finished request.
    pub fn request<T>(&self, account: &str, endpoint: Endpoint, result: &Result<T, ApiError>, elapsed: Duration) {
        let outcome = result.as_ref().err().map_or(Outcome::Success, ApiError::outcome);
        self.requests.get_or_create(&request_labels(account, endpoint, outcome)).inc();
        self.durations.get_or_create(&endpoint_labels(account, endpoint)).observe(elapsed.as_secs_f64());
        match result {
            Ok(_) => {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
                self.last_success.get_or_create(&endpoint_labels(account, endpoint)).set(now.as_secs_f64());
            }
            Err(error) => {
                if let Some(code) = error.exchange_code() {
                    let labels = CodeLabels { account: account.into(), endpoint: endpoint.as_str(), code: code.into() };
                    self.exchange_errors.get_or_create(&labels).inc();
                }
            }
        }
    }

    pub fn decode_problems(&self, account: &str, endpoint: Endpoint, problems: &[DecodeProblem]) {
        for problem in problems {
            let labels = ProblemLabels {
                account: account.into(),
                endpoint: endpoint.as_str(),
                record: problem.record,
                field: problem.field.clone(),
            };
            self.decode_problems.get_or_create(&labels).inc();
        }
    }

    pub fn state_error(&self, account: &str) {
        self.state_errors.get_or_create(&AccountLabels { account: account.into() }).inc();
    }

    pub fn poll_interval(&self, account: &str, interval: Duration) {
        self.poll_interval.get_or_create(&AccountLabels { account: account.into() }).set(interval.as_secs_f64());
    }

    pub fn poll_backoff(&self, account: &str, extra_wait: Duration) {
        self.poll_backoff.get_or_create(&AccountLabels { account: account.into() }).set(extra_wait.as_secs_f64());
    }

    pub fn clock_offset(&self, offset_ms: i64) {
        self.clock_offset.set(offset_ms as f64 / 1000.0);
    }

    pub fn poller_restart(&self, account: &str) {
        self.poller_restarts.get_or_create(&AccountLabels { account: account.into() }).inc();
    }

    pub fn scan_deferred(&self, account: &str) {
        self.scans_deferred.get_or_create(&AccountLabels { account: account.into() }).inc();
    }
}

fn request_labels(account: &str, endpoint: Endpoint, outcome: Outcome) -> RequestLabels {
    RequestLabels { account: account.into(), endpoint: endpoint.as_str(), outcome: outcome.as_str() }
}

fn endpoint_labels(account: &str, endpoint: Endpoint) -> EndpointLabels {
    EndpointLabels { account: account.into(), endpoint: endpoint.as_str() }
}
