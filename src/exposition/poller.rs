//! What an account's poller did, from the stats of its snapshot: requests by outcome and their
//! latency, error codes, unreadable fields, state file failures, pacing.

use super::format::{Family, Lines, RenderedLabels};
use crate::snapshot::stats::AccountStats;

const REQUESTS: Family = Family::counter("capi_api_requests", "Requests to the exchange by endpoint and outcome");
const EXCHANGE_ERRORS: Family =
    Family::counter("capi_api_exchange_errors", "Error answers of the exchange by its error code");
const LATENCY: Family = Family::histogram(
    "capi_api_request_duration_seconds",
    "Time from sending a request to the exchange to its full answer",
);
const LAST_SUCCESS: Family =
    Family::gauge("capi_last_success_timestamp_seconds", "When a request to this endpoint last succeeded (Unix time)");
const DECODE_PROBLEMS: Family = Family::counter(
    "capi_api_decode_problems",
    "Fields of exchange answers that could not be read; the rest of the record was kept",
);
const STATE_FILE_ERRORS: Family = Family::counter(
    "capi_state_file_errors",
    "Failed writes of the state file; meanwhile the bill counters shown stay as last saved",
);
const POLL_INTERVAL: Family = Family::gauge(
    "capi_poll_interval_seconds",
    "Time between the starts of two polls of the account: --poll.interval, or longer when the accounts and coins do not fit the exchange's weight budget in it",
);
const POLL_BACKOFF: Family = Family::gauge(
    "capi_poll_backoff_seconds",
    "Extra wait before the account's next poll, after the exchange rate-limited the exporter or rejected the key",
);
const CLOCK_OFFSET: Family = Family::gauge(
    "capi_clock_offset_seconds",
    "The exchange's clock minus this machine's, as learned from its answers (a rejected timestamp, error 40008, or an HTTP Date over 2 s earlier); requests are signed and bills asked for by the corrected time",
);
const POLLER_RESTARTS: Family = Family::counter(
    "capi_poller_restarts",
    "Times the account's poller stopped unexpectedly and was restarted from its last complete poll",
);
const SCANS_DEFERRED: Family = Family::counter(
    "capi_bill_scan_deferred",
    "Polls whose bill scan reached the per-poll query limit and resumes at the next poll",
);

/// Writes the poller's families of one account.
pub(super) fn write(account: &RenderedLabels, stats: &AccountStats, lines: &mut Lines) {
    let requests = stats.requests.iter().map(|((endpoint, outcome), count)| {
        ((account, [("endpoint", endpoint.as_str()), ("outcome", outcome.as_str())]), *count as f64)
    });
    lines.family(&REQUESTS, requests);
    let errors = stats.exchange_errors.iter().map(|((endpoint, code), count)| {
        ((account, [("endpoint", endpoint.as_str()), ("code", code.as_str())]), *count as f64)
    });
    lines.family(&EXCHANGE_ERRORS, errors);
    let latency =
        stats.latency.iter().map(|(endpoint, histogram)| ((account, [("endpoint", endpoint.as_str())]), histogram));
    lines.histogram(&LATENCY, latency);
    let last_success =
        stats.last_success.iter().map(|(endpoint, at)| ((account, [("endpoint", endpoint.as_str())]), *at));
    lines.family(&LAST_SUCCESS, last_success);
    let problems = stats.decode_problems.iter().map(|((endpoint, record, field), count)| {
        let labels = [("endpoint", endpoint.as_str()), ("record", record), ("field", field.as_str())];
        ((account, labels), *count as f64)
    });
    lines.family(&DECODE_PROBLEMS, problems);
    lines.family(&STATE_FILE_ERRORS, [(account, stats.state_file_errors as f64)]);
    lines.family(&POLL_INTERVAL, [(account, stats.poll_interval.as_secs_f64())]);
    lines.family(&POLL_BACKOFF, [(account, stats.poll_backoff.as_secs_f64())]);
    lines.family(&CLOCK_OFFSET, [(account, stats.clock_offset_ms as f64 / 1000.0)]);
    lines.family(&POLLER_RESTARTS, [(account, stats.poller_restarts as f64)]);
    lines.family(&SCANS_DEFERRED, [(account, stats.scans_deferred as f64)]);
}
