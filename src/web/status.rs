//! The landing page: every account's state at a glance, as blackbox_exporter's page lists its
//! recent probes, with a link to each account's log of recent polls. Plain HTML, no JavaScript.
//! Built from the snapshots the pollers publish, so it says what `/metrics` says.

use super::routes::AppState;
use crate::api::clock::steady_now_ms;
use crate::snapshot::stats::{unix_now, AccountStats};
use crate::snapshot::{AccountSlot, AccountSnapshot, RECENT_LOG_BYTES};
use crate::version::{REVISION, VERSION};
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use std::fmt::Write as _;

/// Where an account's log of recent polls is served, with `?account=<name>`.
pub const POLL_LOG_PATH: &str = "/debug/polls";

const STYLE: &str = "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
th,td{border:1px solid #999;padding:.3em .6em;text-align:left;vertical-align:top}\
.up{background:#cfc}.down{background:#fcc}.waiting{background:#ffc}";

pub(super) async fn landing(State(state): State<AppState>) -> Html<String> {
    let path = html_escape(&state.telemetry_path);
    let mut page = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>capi_exporter</title>\
         <style>{STYLE}</style></head><body>\n<h1>capi_exporter</h1>\n<p>Prometheus exporter for the \
         futures (contract) account API. Version {VERSION}, revision {REVISION}.</p>\n<p><a href=\"{path}\">\
         Metrics</a> · <a href=\"/-/healthy\">Health</a> · <a href=\"/-/ready\">Readiness</a></p>\n\
         <h2>Accounts</h2>\n<table>\n<tr><th>Account</th><th>Polling</th><th>Last successful poll</th>\
         <th>Data age</th><th>Bills counted</th><th>Backoff</th><th>Last error</th><th>Recent polls</th></tr>\n"
    );
    let now = unix_now();
    for slot in state.exposition().slots() {
        write_row(&mut page, slot, now);
    }
    page.push_str("</table>\n</body></html>\n");
    Html(page)
}

/// One account's row: what an operator checks first when an account looks wrong.
fn write_row(page: &mut String, slot: &AccountSlot, now: f64) {
    let name = html_escape(slot.name());
    let latest = slot.latest().unwrap_or_default();
    let stats: &AccountStats = &latest.stats;
    let polled = stats.last_good_poll.is_some() || stats.last_error.is_some();
    let (class, polling) = match (latest.up, polled) {
        (true, _) => ("up", "up"),
        (false, false) => ("waiting", "not polled yet"),
        (false, true) => ("down", "down"),
    };
    let last_good = stats.last_good_poll.map_or_else(|| "never".to_owned(), |at| ago(now, at));
    let bills: u64 = latest.counters.bills.values().fold(0, |sum, count| sum.saturating_add(*count));
    let backoff = stats.poll_backoff;
    let backoff = if backoff.is_zero() { "none".to_owned() } else { format!("{} s", backoff.as_secs()) };
    let last_error = stats.last_error.as_ref().map_or_else(
        || "none".to_owned(),
        |e| format!("{} on {}, {}: {}", e.outcome.as_str(), e.endpoint.as_str(), ago(now, e.at), html_escape(&e.text)),
    );
    let _ = writeln!(
        page,
        "<tr class=\"{class}\"><td>{name}</td><td>{polling}</td><td>{last_good}</td><td>{}</td><td>{bills}</td>\
         <td>{backoff}</td><td>{last_error}</td><td><a href=\"{POLL_LOG_PATH}?account={name}\">log</a></td></tr>",
        data_age(&latest),
    );
}

/// The age of the oldest figures shown, by the clock that dates them.
fn data_age(snapshot: &AccountSnapshot) -> String {
    let now = steady_now_ms() as f64 / 1e3;
    let oldest_ms = snapshot.fetched_at_ms.values().min();
    oldest_ms.map_or_else(|| "no figures yet".to_owned(), |ms| seconds_since(now, *ms as f64 / 1e3))
}

fn ago(now: f64, at: f64) -> String {
    format!("{} ago", seconds_since(now, at))
}

/// Whole seconds from `at` to `now` (Unix times), never negative.
fn seconds_since(now: f64, at: f64) -> String {
    format!("{} s", (now - at).max(0.0) as u64)
}

#[derive(serde::Deserialize)]
pub(super) struct PollLogQuery {
    account: Option<String>,
}

/// The account's log of recent polls, as text: its requests, their outcomes and durations, the
/// bill queries and what they found. It never holds credentials.
pub(super) async fn poll_log(State(state): State<AppState>, Query(query): Query<PollLogQuery>) -> Response {
    let Some(account) = query.account else {
        return (StatusCode::BAD_REQUEST, "name the account: /debug/polls?account=NAME (the status page links each)\n")
            .into_response();
    };
    let slot = state.exposition().slots().find(|slot| slot.name() == account).cloned();
    let Some(slot) = slot else {
        return (StatusCode::NOT_FOUND, format!("no account {account:?} is polled here\n")).into_response();
    };
    let heading = format!("Recent polls of account {} (its last {RECENT_LOG_BYTES} bytes, oldest first)", slot.name());
    let text = format!("{heading}\n\n{}", slot.recent_log());
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
