//! The bodies of the fuzz targets, one `pub fn <target>(data: &[u8])` each.
//!
//! Shared by the fuzz crate (`fuzz/fuzz_targets/<target>.rs`, run by libFuzzer) and by the main
//! crate's `tests/it/fuzz_regressions.rs`, which replays the committed inputs through exactly these
//! functions on stable Rust. Only the crate's public API and serde_json are used. Every target
//! asserts invariants, not only the absence of panics: a failed assertion is a finding.

use capi_exporter::api::client::{read_account_answer, read_bill_answer};
use capi_exporter::api::json::JsonObject;
use capi_exporter::api::model::{decode_account_info, decode_bill_page, Bill, BillPage, MAX_PAGE, MAX_RECORDS};
use capi_exporter::api::Coins;
use capi_exporter::config::parse_accounts;
use capi_exporter::exposition::{Exposition, Format};
use capi_exporter::poller::cursor::BillCursor;
use capi_exporter::poller::poll_state::PollState;
use capi_exporter::poller::state::StateStore;
use capi_exporter::poller::{Checkpoint, PollSettings};
use capi_exporter::snapshot::{AccountSlot, AccountSnapshot};
use capi_exporter::web::WebConfig;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// When the bill cursor's pass starts, how late a bill may appear, and the page size.
const NOW_MS: i64 = 1_000_000;
const OVERLAP_MS: i64 = 60_000;
const PAGE_SIZE: u32 = 100;
/// How many queries of one pass the fuzzed page answers at most (each may split again).
const MAX_QUERIES: usize = 200;
/// A realistic wall clock for a cursor resumed from a state file (2030-03-17).
const WALL_CLOCK_MS: i64 = 1_900_000_000_000;
/// What the environment holds for every credential variable of the accounts file.
const SECRET: &str = "fuzz-secret-5e1f";

/// A bill page: decoded leniently, then fed to a fresh bill cursor as the answer to every query
/// of its pass. Invariants: a bill is returned as new at most once, across queries, passes and
/// a restart from the cursor's state, while its id is kept (until every creation time it was
/// shown at in the window settles); exactly the distinct ids created in the pass's window
/// since counting began are new, and the others are reported as not answering the query;
/// queries stay inside the pass's window; ids are normalized.
pub fn bill_page(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let object = JsonObject::parse(data);
    assert_eq!(object.is_ok(), value.is_object(), "the lazy reader and serde_json disagree on what is an object");
    let Ok(object) = object else { return };
    let mut problems = Vec::new();
    let decoded = decode_bill_page(&object, &mut problems);
    let pageful = value["items"].as_array().is_some_and(|items| items.len() <= MAX_PAGE as usize);
    assert_eq!(decoded.is_ok(), pageful, "a bill answer decodes iff it has an items array of at most a page");
    let Ok(page) = decoded else { return };
    assert!(page.items.len() <= value["items"].as_array().map_or(0, Vec::len), "more bills than items");
    for bill in &page.items {
        assert_eq!(bill.id, bill.id.trim(), "bill id not trimmed");
        let digits = bill.id.len() > 1 && bill.id.bytes().all(|b| b.is_ascii_digit());
        assert!(!(digits && bill.id.starts_with('0')), "numeric bill id {:?} keeps a leading zero", bill.id);
    }

    // Inputs of odd length settle what the pass covered after each answer, as the poll state
    // does once a count's first scan is done.
    let settling = data.len() % 2 == 1;
    let mut cursor = BillCursor::new(0, OVERLAP_MS, PAGE_SIZE);
    cursor.start_poll(NOW_MS);
    let first = cursor.next_query().expect("a fresh cursor has a query to make");
    assert_eq!((first.start_time, first.end_time, first.limit), (-1, NOW_MS + 1, PAGE_SIZE));
    assert!(first.business_type.is_none() && first.coin.is_none() && first.symbol.is_none());

    let accepted = cursor.accept(&page);
    if settling {
        cursor.settle_covered();
    }
    assert_eq!(accepted.shortfall, None, "a window of many milliseconds can always be split");
    let mut counted = HashSet::new();
    let mut position = 0;
    for bill in &accepted.new_bills {
        assert!(bill.ctime_ms > -1, "bill {:?} created at {} ms, before counting began", bill.id, bill.ctime_ms);
        assert!(counted.insert(bill.id.as_str()), "bill {:?} returned as new twice", bill.id);
        // New bills come in the page's order, as they are on it.
        let offset = page.items[position..].iter().position(|b| b == bill).expect("a new bill not on the page");
        position += offset + 1;
    }
    let in_window = |b: &&Bill| -1 <= b.ctime_ms && b.ctime_ms <= NOW_MS + 1;
    let expected: HashSet<&str> =
        page.items.iter().filter(in_window).filter(|b| b.ctime_ms > -1).map(|b| b.id.as_str()).collect();
    let outside = page.items.iter().filter(|b| !in_window(b)).count();
    assert_eq!(accepted.unmatched.len(), outside, "bills created outside the query's window are not all ignored");
    assert_eq!(counted, expected, "the new bills are not exactly the distinct ids created since counting began");
    check_seen(&cursor);
    if page.has_next_page {
        assert!(cursor.pass_in_progress(), "a full answer must be split, not end the pass");
    } else {
        assert!(!cursor.pass_in_progress(), "the pass's only query was answered");
        assert_eq!(cursor.state().settled_through, NOW_MS - OVERLAP_MS);
    }

    // The same page answers every further query of the pass: nothing is new any more.
    for _ in 0..MAX_QUERIES {
        let Some(query) = cursor.next_query() else { break };
        assert!(-1 <= query.start_time && query.start_time <= query.end_time && query.end_time <= NOW_MS + 1);
        assert_eq!(query.limit, PAGE_SIZE);
        assert!(query.coin.is_none() || query.business_type.is_some(), "a coin split below a type split");
        assert!(query.symbol.is_none() || query.coin.is_some(), "a symbol split below a coin split");
        let again = cursor.accept(&page);
        if settling {
            cursor.settle_covered();
        }
        assert_eq!(again.new_bills, Vec::new(), "bills counted twice within a pass");
        let crowded_ms = again.shortfall.as_ref().map(|s| s.ms);
        assert!(
            crowded_ms.is_none_or(|ms| query.start_time <= ms
                && ms <= query.end_time
                && query.end_time - query.start_time <= 2),
            "shortfall {crowded_ms:?} reported for the answer to a query of {}..={}",
            query.start_time,
            query.end_time
        );
        check_seen(&cursor);
    }
    // An id is kept until the latest creation time the pass saw it at settles (ids are not kept
    // for ever): a page that shows it again at a time after that counts it again.
    let settled = cursor.state().settled_through;
    let latest_in_window =
        |id: &str| page.items.iter().filter(|b| b.id == id && in_window(b)).map(|b| b.ctime_ms).max();
    let let_go: HashSet<&str> =
        counted.iter().copied().filter(|id| latest_in_window(id).is_some_and(|t| t <= settled)).collect();
    if !cursor.pass_in_progress() {
        assert_eq!(settled, NOW_MS - OVERLAP_MS);
        // The next poll sees the same bills again.
        cursor.start_poll(NOW_MS + OVERLAP_MS);
        answer_once_counting_nothing_twice(&mut cursor, &page, &counted, &let_go, "at the next poll");
    }
    // A restart from the saved cursor state counts none of them again.
    let mut resumed = BillCursor::resume(cursor.state().clone(), OVERLAP_MS, PAGE_SIZE);
    resumed.start_poll(NOW_MS + OVERLAP_MS);
    answer_once_counting_nothing_twice(&mut resumed, &page, &counted, &let_go, "after a restart");
}

/// The ids kept for deduplication are only those of the unsettled window.
fn check_seen(cursor: &BillCursor) {
    let state = cursor.state();
    let stale = state.seen.iter().find(|(_, ctime)| **ctime <= state.settled_through);
    assert!(stale.is_none(), "id {stale:?} kept although settled through {}", state.settled_through);
}

/// Answers the next query with the page: a bill may be new only if it was not counted before
/// (one created after the first pass's window is counted once the window reaches it), or its id
/// was `let_go` as settled.
fn answer_once_counting_nothing_twice(
    cursor: &mut BillCursor,
    page: &BillPage,
    counted: &HashSet<&str>,
    let_go: &HashSet<&str>,
    when: &str,
) {
    if cursor.next_query().is_some() {
        let accepted = cursor.accept(page);
        let again = |bill: &&Bill| counted.contains(bill.id.as_str()) && !let_go.contains(bill.id.as_str());
        let twice: Vec<&Bill> = accepted.new_bills.iter().filter(again).collect();
        assert_eq!(twice, Vec::<&Bill>::new(), "bills counted twice {when}");
    }
}

/// One whole poll with arbitrary answers, as the poller makes it: answers separated by the byte
/// 0xFF (never in UTF-8 text), each an HTTP status chosen by its first byte and a body. The
/// first answers the account query, the others the bill queries in turn. Each is read by the
/// client's own reader, taken by the poll state (cursor, counters, figures), published and
/// rendered. Invariants: nothing panics; the exposition is well-formed and shows exactly the
/// bills counted; a poll resumed from the checkpoint with the same answers counts none of them
/// again, nor any bill at or before the point the first settled. (It may count a bill the first
/// never saw: its queries differ, so the same answers can show it in range.)
pub fn poll(data: &[u8]) {
    let settings = PollSettings {
        interval: Duration::from_secs(15),
        overlap: Duration::from_millis(OVERLAP_MS as u64),
        // A window of a few milliseconds: a handful of answers reach a crowded millisecond.
        backfill: Duration::from_millis(3),
        bill_queries_per_poll: MAX_QUERIES,
        coins: Coins::default(),
    };
    let mut answers = data.split(|b| *b == 0xFF).map(|answer| match answer.split_first() {
        Some((status, body)) => (http_status(*status), body),
        None => (200, answer),
    });
    let no_headers = http::HeaderMap::new();
    let mut state = PollState::new(Checkpoint::default(), &AccountSnapshot::default(), &settings, &[2]);
    let mut up = true;
    match answers.next().map(|(status, body)| read_account_answer(status, &no_headers, body)) {
        Some(Ok(answer)) => drop(state.take_account(2, answer.value, local_now_ms(), WALL_CLOCK_MS)),
        Some(Err(_)) | None => up = false,
    }
    let bill_answers: Vec<(u16, &[u8])> = answers.take(MAX_QUERIES).collect();
    let (counted, failed, first_ids) = scan(&mut state, WALL_CLOCK_MS, &bill_answers, &no_headers);
    state.compare_ledger();
    up &= !failed;

    let checkpoint = state.checkpoint();
    let in_counters: u64 = checkpoint.counters.bills.values().sum();
    assert_eq!(in_counters, counted, "the counters hold another number of bills than were counted");
    let slot = AccountSlot::new("fuzz");
    slot.publish(state.snapshot(up, Default::default()));
    let samples = check_exposition(&render(vec![slot]));
    let shown: f64 = samples.iter().filter(|(series, _)| series.starts_with("capi_bills_total{")).map(|(_, v)| v).sum();
    assert_eq!(shown, in_counters as f64, "the exposition shows another number of bills than were counted");

    let settled_through = checkpoint.cursor.as_ref().map_or(i64::MIN, |cursor| cursor.settled_through);
    let mut resumed = PollState::new(checkpoint, &AccountSnapshot::default(), &settings, &[2]);
    let (_, _, again) = scan(&mut resumed, WALL_CLOCK_MS + 1, &bill_answers, &no_headers);
    let twice: Vec<_> = again.keys().filter(|id| first_ids.contains_key(*id)).collect();
    assert_eq!(twice, Vec::<&String>::new(), "a poll resumed from the checkpoint counted bills again");
    let settled: Vec<_> = again.iter().filter(|(_, ctime)| **ctime <= settled_through).collect();
    assert_eq!(settled, Vec::<(&String, &i64)>::new(), "a resumed poll counted bills the first had settled");
}

/// Answers the bill queries of one scan in turn, until an answer is an error (which ends the
/// scan as it ends a poll). Returns the bills counted, whether an error ended it, and the
/// counted bills' ids with their creation times; no id is counted twice within the scan.
fn scan(
    state: &mut PollState,
    now_ms: i64,
    answers: &[(u16, &[u8])],
    headers: &http::HeaderMap,
) -> (u64, bool, HashMap<String, i64>) {
    state.start_bill_scan(now_ms);
    let mut counted = 0;
    let mut ids = HashMap::new();
    for (status, body) in answers {
        if state.next_bill_query().is_none() {
            break;
        }
        let Ok(answer) = read_bill_answer(*status, headers, body) else { return (counted, true, ids) };
        for id in state.take_bills(&answer.value).new_bill_ids {
            let ctime = answer.value.items.iter().find(|bill| bill.id == id).map_or(i64::MIN, |bill| bill.ctime_ms);
            assert!(ids.insert(id, ctime).is_none(), "a bill counted twice within a scan");
            counted += 1;
        }
    }
    (counted, false, ids)
}

/// Mostly 200, sometimes a failure the exchange or a proxy sends.
fn http_status(byte: u8) -> u16 {
    match byte {
        0..=199 => 200,
        200..=219 => 400,
        220..=229 => 429,
        230..=239 => 502,
        _ => 404,
    }
}

/// An account answer: decoded leniently, published for an account, rendered. Invariants: every
/// JSON object decodes unless it holds more than [`MAX_RECORDS`] records of one kind; the
/// exposition is well-formed OpenMetrics (see [`check_exposition`]) and shows the account up.
pub fn account_info(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let object = JsonObject::parse(data);
    assert_eq!(object.is_ok(), value.is_object(), "the lazy reader and serde_json disagree on what is an object");
    let Ok(object) = object else { return };
    let Ok(info) = decode_account_info(&object, &mut Vec::new()) else {
        // Each record takes at least `{}` and a comma.
        assert!(data.len() > 2 * MAX_RECORDS, "an answer of fewer than {MAX_RECORDS} records of each kind failed");
        return;
    };
    let has_account = info.account.is_some();
    let slot = AccountSlot::new("fuzz");
    let fetched_at_ms = [(2, local_now_ms())].into();
    slot.publish(AccountSnapshot {
        coins: [(2, Arc::new(info))].into(),
        fetched_at_ms,
        up: true,
        ..Default::default()
    });
    let text = render(vec![slot]);
    let samples = check_exposition(&text);
    assert!(samples.iter().any(|(series, value)| series == "capi_up{account=\"fuzz\"}" && *value == 1.0), "{text}");
    let shown = samples.iter().any(|(series, _)| series.starts_with("capi_account_info{account=\"fuzz\","));
    assert_eq!(shown, has_account, "a fresh account record must be shown, and only one that exists");
}

/// The accounts file: parsed and validated. Invariants: at least one account; names unique,
/// 1 to 64 of `[A-Za-z0-9._-]`; coin ids and credentials non-empty; no API key twice; every
/// error names the file; no secret in `Debug` output or error messages.
pub fn accounts_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // `file:` credentials are read for real: keep away from device and kernel files, which can
    // block or never end (/dev/stdin, /dev/zero, /proc/kmsg).
    let lower = text.to_ascii_lowercase();
    if ["dev", "proc", "sys"].iter().any(|p| lower.contains(p)) {
        return;
    }
    // Each variable holds a secret of its own, as each account's key is its own.
    let result = parse_accounts(Path::new("fuzz.yml"), text, &[2], &|name| Some(format!("{SECRET}{name}")));
    let accounts = match result {
        Ok(file) => file.accounts,
        Err(error) => {
            let message = error.to_string();
            assert!(message.contains("fuzz.yml"), "error does not name the file: {message}");
            assert!(text.contains(SECRET) || !message.contains(SECRET), "secret in an error: {message}");
            return;
        }
    };
    assert!(!accounts.is_empty(), "an accounts file with no account was accepted");
    let mut names = BTreeSet::new();
    let mut keys = BTreeSet::new();
    for account in &accounts {
        let name = &account.name;
        let valid =
            (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        assert!(valid, "invalid account name {name:?} accepted");
        assert!(names.insert(name.clone()), "account name {name:?} accepted twice");
        assert!(keys.insert(account.credentials.api_key.expose()), "account {name:?}: an API key accepted twice");
        assert!(!account.coin_ids.is_empty(), "account {name:?} has no coin id");
        let c = &account.credentials;
        for secret in [&c.api_key, &c.secret, &c.passphrase] {
            assert!(!secret.expose().is_empty(), "account {name:?} has an empty credential");
        }
    }
    let printed = format!("{accounts:?}");
    assert!(text.contains(SECRET) || !printed.contains(SECRET), "secret in Debug output: {printed}");
}

/// A state file's content: parsed, every account restored, its cursor resumed and polled once,
/// its ledger check compared, its counters rendered, as the exporter does at start. Invariants: names are sorted and unique;
/// restoring is repeatable; every error names the file; queries have ordered bounds; the
/// exposition is well-formed.
pub fn state_file(data: &[u8]) {
    let store = match StateStore::from_bytes(Path::new("fuzz.json"), data) {
        Ok(store) => store,
        Err(error) => {
            assert!(error.to_string().contains("fuzz.json"), "error does not name the file: {error}");
            return;
        }
    };
    let names = store.accounts();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "account names not sorted and unique: {names:?}");
    let mut slots = Vec::new();
    for name in &names {
        let restored = match store.restore(name) {
            Ok(restored) => restored.expect("a listed account has an entry"),
            Err(error) => {
                assert!(error.to_string().contains("fuzz.json"), "error does not name the file: {error}");
                assert!(store.restore(name).is_err(), "restoring {name:?} failed once only");
                continue;
            }
        };
        let again = store.restore(name).expect("restoring succeeded once");
        assert_eq!(again.as_ref(), Some(&restored), "restoring {name:?} twice gave two answers");

        let settled_through_ms = restored.cursor.settled_through;
        let mut ledger = restored.ledger;
        ledger.settle(WALL_CLOCK_MS);
        let mut cursor = BillCursor::resume(restored.cursor, OVERLAP_MS, PAGE_SIZE);
        cursor.start_poll(WALL_CLOCK_MS);
        if let Some(query) = cursor.next_query() {
            assert!(query.start_time <= query.end_time, "query bounds out of order: {query:?}");
            assert!(query.end_time <= WALL_CLOCK_MS + 1, "query reaches into the future: {query:?}");
        }
        let slot = AccountSlot::new(name.as_str());
        slot.publish(AccountSnapshot {
            counters: Arc::new(restored.counters),
            settled_through_ms,
            ledger: ledger.differences(),
            up: true,
            ..Default::default()
        });
        slots.push(slot);
    }
    let unlisted = ["", "fuzz-unlisted"].into_iter().find(|n| !names.iter().any(|name| name == n));
    if let Some(unlisted) = unlisted {
        assert!(matches!(store.restore(unlisted), Ok(None)), "an account without an entry must restore as none");
    }
    if !slots.is_empty() {
        check_exposition(&render(slots));
    }
}

/// A web configuration file (exporter-toolkit format): parsed and validated, reading no file.
/// Invariants: the result names no file; parsing is deterministic; errors start with
/// `web config`; and, for text that is also JSON (a subset of YAML, so the fuzzer's JSON-shaped
/// inputs can be inspected with serde_json), basic auth is on iff users are listed, no password
/// hash shows in `Debug` output or in an error, nor does an inline PEM key.
pub fn web_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let base_dir = Path::new("/nonexistent/fuzz-web");
    let result = WebConfig::parse(text, base_dir);
    let again = WebConfig::parse(text, base_dir);
    assert_eq!(format!("{result:?}"), format!("{again:?}"), "parsing the same text twice differs");
    let secrets = serde_json::from_str::<Value>(text).ok().map(|json| web_secrets(&json, base_dir));
    let config = match result {
        Ok(config) => config,
        Err(error) => {
            let message = error.to_string();
            assert!(message.starts_with("web config: "), "unexpected error text: {message}");
            for secret in secrets.iter().flat_map(|s| &s.hashes) {
                assert!(!message.contains(secret.as_str()), "password hash in an error: {message}");
            }
            return;
        }
    };
    assert_eq!(config.file(), None, "parsed text names a file");
    let Some(secrets) = secrets else { return };
    assert_eq!(config.basic_auth_enabled(), secrets.users > 0, "basic auth on iff users are listed");
    let printed = format!("{config:?}");
    for secret in secrets.hashes.iter().chain(&secrets.keys) {
        assert!(!printed.contains(secret.as_str()), "secret {secret:?} in Debug output: {printed}");
    }
}

/// What must stay secret in a JSON-shaped web configuration: password hashes (which contain
/// `$`, never found in `Debug` structure) and inline PEM keys, leaving out any that also occur
/// in another string of the file or in the base folder (those may show legitimately).
struct WebSecrets {
    users: usize,
    hashes: Vec<String>,
    keys: Vec<String>,
}

fn web_secrets(json: &Value, base_dir: &Path) -> WebSecrets {
    let users = json.get("basic_auth_users").and_then(Value::as_object);
    let hashes: Vec<&str> = users.into_iter().flatten().filter_map(|(_, hash)| hash.as_str()).collect();
    let key = json.get("tls_server_config").and_then(|tls| tls.get("key")).and_then(Value::as_str);
    let keys: Vec<&str> = key.filter(|key| key.contains("-----BEGIN")).into_iter().collect();
    let mut others = vec![base_dir.display().to_string().to_lowercase()];
    collect_strings(json, &mut others, &[hashes.as_slice(), keys.as_slice()].concat());
    let secret = |candidate: &str| {
        let lower = candidate.to_lowercase();
        !candidate.is_empty() && !others.iter().any(|other| other.contains(&lower))
    };
    let keep = |candidates: &[&str]| candidates.iter().filter(|c| secret(c)).map(|c| c.to_string()).collect();
    WebSecrets { users: users.map_or(0, |users| users.len()), hashes: keep(&hashes), keys: keep(&keys) }
}

/// Every key and string value of a JSON document, lowercased, except the `skip`ped values.
fn collect_strings(json: &Value, into: &mut Vec<String>, skip: &[&str]) {
    match json {
        Value::String(text) if !skip.contains(&text.as_str()) => into.push(text.to_lowercase()),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, into, skip)),
        Value::Object(map) => {
            for (key, value) in map {
                into.push(key.to_lowercase());
                collect_strings(value, into, skip);
            }
        }
        _ => {}
    }
}

/// The exposition of these accounts, showing figures up to an hour old.
fn render(slots: Vec<Arc<AccountSlot>>) -> String {
    let text = Exposition::new(slots, Duration::from_secs(3600)).page(Format::OpenMetrics).into_bytes();
    String::from_utf8(text).expect("the exposition is written from UTF-8 text only")
}

fn local_now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Checks an OpenMetrics exposition and returns its samples as (series, value): it ends with
/// `# EOF\n` (its only `# EOF`); every other line is `# HELP`, `# TYPE`, `# UNIT` or a sample;
/// families are declared once; label values are quoted and escaped; every value is a float,
/// `NaN`, `+Inf` or `-Inf`; no series appears twice.
fn check_exposition(text: &str) -> Vec<(String, f64)> {
    let body = text.strip_suffix("# EOF\n").unwrap_or_else(|| panic!("exposition does not end with # EOF: {text}"));
    let mut families = HashSet::new();
    let mut series = HashSet::new();
    let mut samples = Vec::new();
    for line in body.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut words = comment.splitn(3, ' ');
            let (kind, name) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            assert!(["HELP", "TYPE", "UNIT"].contains(&kind), "unexpected comment line {line:?}");
            assert!(is_metric_name(name), "bad metric name in {line:?}");
            if kind == "TYPE" {
                assert!(families.insert(name.to_string()), "family {name} declared twice");
            }
            continue;
        }
        let (name, value) = parse_sample(line).unwrap_or_else(|e| panic!("bad sample line {line:?}: {e}\n{text}"));
        assert!(series.insert(name.clone()), "series {name} appears twice");
        samples.push((name, value));
    }
    samples
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Splits `name{label="value",...} value [timestamp]` into the series and its value.
fn parse_sample(line: &str) -> Result<(String, f64), String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    if !is_metric_name(&line[..name_end]) {
        return Err("bad metric name".into());
    }
    let mut rest = &line[name_end..];
    if let Some(labels) = rest.strip_prefix('{') {
        rest = skip_labels(labels)?;
    }
    let series = &line[..line.len() - rest.len()];
    let mut fields = rest.strip_prefix(' ').ok_or("no space before the value")?.split(' ');
    let value = fields.next().unwrap_or("");
    let parsed = match value {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ if value.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) => {
            value.parse().map_err(|_| format!("value {value:?} is not a float"))?
        }
        _ => return Err(format!("value {value:?} is not a float")),
    };
    if let Some(timestamp) = fields.next() {
        timestamp.parse::<f64>().map_err(|_| format!("bad timestamp {timestamp:?}"))?;
    }
    if fields.next().is_some() {
        return Err("text after the timestamp".into());
    }
    Ok((series.to_string(), parsed))
}

/// Skips `label="value",...}` and returns what follows the closing brace.
fn skip_labels(mut rest: &str) -> Result<&str, String> {
    let mut names = HashSet::new();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok(after);
        }
        let equals = rest.find('=').ok_or("label without a value")?;
        let name = &rest[..equals];
        if !is_metric_name(name) || name.contains(':') {
            return Err(format!("bad label name {name:?}"));
        }
        if !names.insert(name) {
            return Err(format!("label {name} twice"));
        }
        let mut chars = rest[equals + 1..].strip_prefix('"').ok_or("label value not quoted")?.char_indices();
        let end = loop {
            match chars.next().ok_or("unterminated label value")? {
                (_, '\\') => match chars.next() {
                    Some((_, '\\' | '"' | 'n')) => {}
                    other => return Err(format!("bad escape {other:?} in a label value")),
                },
                (i, '"') => break i,
                _ => {}
            }
        };
        rest = &rest[equals + 1..][1 + end + 1..];
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if !rest.starts_with('}') {
            return Err("labels not separated by commas".into());
        }
    }
}
