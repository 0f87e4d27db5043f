//! Snapshots to the page scrapers read, in the format each asks for (see [`mod@format`]).
//!
//! Each account's lines are rendered from its snapshot once per publication and kept, as
//! kube-state-metrics keeps each object's lines: a scrape renders the lines of the accounts that
//! published since the last scrape, writes out every account's kept lines family by family, and
//! adds what changes with the clock alone (data age, the process's own figures). So every scrape
//! sees the latest publication of every account, and the page is sent a piece at a time from the
//! kept lines themselves: a scrape of 1,000 accounts (30 MB) holds neither a copy of the lines
//! nor a list of its 100,000-odd pieces, only where it has got to.

mod account;
pub mod format;
mod poller;
mod process;

pub use format::Format;

use crate::api::clock::steady_now_ms;
use crate::api::Coins;
use crate::snapshot::handler::HandlerStats;
use crate::snapshot::reload::ReloadStatus;
use crate::snapshot::AccountSlot;
use crate::version::{BRANCH, REVISION, RUST_VERSION, VERSION};
use account::View;
use axum::body::Bytes;
use bytes::BytesMut;
use format::{Family, Lines};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long the parts of a page sent are. The web server asks for the next part only once the
/// last is nearly sent, so a scrape holds about one part: with 256 KiB parts and hyper's 400 KB
/// queue, 1,000 accounts under 8 concurrent scrapes peaked at 118 MiB, with these at 103.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Room for an account's lines to grow beyond their last size without a new buffer: the series
/// that appear once counting begins (funding and fees shown from zero, about 1.3 KB) fit.
const SLACK_BYTES: usize = 4096;

const HANDLER_REQUESTS: Family =
    Family::counter("promhttp_metric_handler_requests", "Total number of scrapes by HTTP status code.");
const HANDLER_IN_FLIGHT: Family =
    Family::gauge("promhttp_metric_handler_requests_in_flight", "Current number of scrapes being served.");
const RELOAD_SUCCESSFUL: Family = Family::gauge(
    "capi_config_last_reload_successful",
    "Whether the last reload of the configuration files (SIGHUP or /-/reload) succeeded: 1, or 0 while the configuration before it keeps running",
);
const RELOAD_SUCCESS_TIME: Family = Family::gauge(
    "capi_config_last_reload_success_timestamp_seconds",
    "Unix time of the last successful reload of the configuration files, or of the start",
);
const BUILD_INFO: Family =
    Family::gauge("capi_exporter_build_info", "The exporter's version and how it was built; value 1");

/// Every account's series, and the exporter's own.
#[derive(Debug)]
pub struct Exposition {
    accounts: Vec<Account>,
    max_age: Duration,
    handler: Arc<HandlerStats>,
    reload: Arc<ReloadStatus>,
    coins: Coins,
}

/// An account's slot and the lines last rendered from it.
#[derive(Debug)]
struct Account {
    slot: Arc<AccountSlot>,
    rendered: Mutex<Option<Arc<Rendered>>>,
}

/// One account's lines, as of one publication.
#[derive(Debug)]
struct Rendered {
    publication: u64,
    /// When the oldest figures shown were fetched: once that is before the oldest time figures
    /// may be from, they are to be withdrawn.
    oldest_shown_ms: i64,
    /// When each coin's figures were fetched, for their age at each scrape. (Not the snapshot:
    /// the decoded answers it holds would then outlive the next publication.)
    fetched_at_ms: BTreeMap<u64, i64>,
    lines: Arc<LineSet>,
}

impl Rendered {
    /// The memory of the lines, unless a scrape still sends them.
    fn into_buffer(self: Arc<Self>) -> Option<Vec<u8>> {
        let lines = Arc::try_unwrap(Arc::try_unwrap(self).ok()?.lines).ok()?;
        lines.text.try_into_mut().ok().map(Vec::from)
    }
}

/// Lines of some families: the text, and each family with the range of its lines in it.
struct LineSet {
    text: Bytes,
    families: Vec<(&'static Family, Range<usize>)>,
}

/// Leaves out the text, which can be tens of KB per account.
impl std::fmt::Debug for LineSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineSet").field("bytes", &self.text.len()).field("families", &self.families.len()).finish()
    }
}

impl LineSet {
    fn new(lines: Lines) -> Self {
        let (text, families) = lines.finish();
        Self { text, families }
    }

    /// The lines of the family at `index`.
    fn of(&self, index: usize) -> &[u8] {
        self.families.get(index).map_or(&[], |(_, range)| &self.text[range.clone()])
    }
}

impl Exposition {
    /// Figures older than `max_age` are withdrawn; their age stays visible.
    pub fn new(slots: Vec<Arc<AccountSlot>>, max_age: Duration) -> Self {
        let accounts = slots.into_iter().map(|slot| Account { slot, rendered: Mutex::new(None) }).collect();
        Self { accounts, max_age, handler: Arc::default(), reload: Arc::default(), coins: Coins::default() }
    }

    /// The exposition of a reloaded configuration: the exporter's own counts go on.
    pub fn successor(&self, slots: Vec<Arc<AccountSlot>>, max_age: Duration, coins: Coins) -> Self {
        Self { handler: self.handler.clone(), reload: self.reload.clone(), coins, ..Self::new(slots, max_age) }
    }

    /// The accounts shown, in order.
    pub fn slots(&self) -> impl Iterator<Item = &Arc<AccountSlot>> {
        self.accounts.iter().map(|account| &account.slot)
    }

    /// Where reloads are recorded.
    pub fn reload_status(&self) -> Arc<ReloadStatus> {
        self.reload.clone()
    }

    /// The names of coin ids beyond the documented ones.
    pub fn with_coins(self, coins: Coins) -> Self {
        Self { coins, ..self }
    }

    /// Where the web layer counts the scrapes it serves.
    pub fn handler_stats(&self) -> Arc<HandlerStats> {
        self.handler.clone()
    }

    /// The page of one scrape.
    pub fn page(&self, format: Format) -> Page {
        let now_ms = steady_now_ms();
        let oldest_ms = now_ms.saturating_sub(i64::try_from(self.max_age.as_millis()).unwrap_or(i64::MAX));
        let accounts: Vec<Arc<Rendered>> =
            self.accounts.iter().map(|account| account.current(oldest_ms, &self.coins)).collect();
        let mut ages = Lines::default();
        let fetched = self.accounts.iter().zip(&accounts).map(|(a, rendered)| (a.slot.name(), &rendered.fetched_at_ms));
        account::write_data_ages(fetched, now_ms, &self.coins, &mut ages);
        Page::new(
            format,
            accounts.into_iter().map(|rendered| rendered.lines.clone()).collect(),
            ages,
            own_lines(&self.handler, &self.reload),
        )
    }
}

impl Account {
    /// The lines of the account's latest snapshot, rendered now if it published since, or if
    /// some of its figures have become too old to show.
    fn current(&self, oldest_ms: i64, coins: &Coins) -> Arc<Rendered> {
        let mut rendered = self.rendered.lock().unwrap_or_else(PoisonError::into_inner);
        // The count first: a snapshot published in between is rendered again next time.
        let publication = self.slot.publications();
        if let Some(lines) =
            rendered.as_ref().filter(|r| r.publication == publication && oldest_ms <= r.oldest_shown_ms)
        {
            return lines.clone();
        }
        let snapshot = self.slot.latest().unwrap_or_default();
        let previous = rendered.take();
        let size = previous.as_ref().map_or(0, |r| r.lines.text.len() + SLACK_BYTES);
        let mut lines = Lines::reusing(previous.and_then(Rendered::into_buffer).unwrap_or_default(), size);
        View::new(self.slot.name(), &snapshot, oldest_ms, coins).write(&mut lines);
        let lines = Arc::new(LineSet::new(lines));
        let oldest_shown_ms = snapshot
            .fresh_coins(oldest_ms)
            .filter_map(|(coin, _)| snapshot.fetched_at_ms.get(&coin).copied())
            .min()
            .unwrap_or(i64::MAX);
        let fetched_at_ms = snapshot.fetched_at_ms.clone();
        let current = Arc::new(Rendered { publication, oldest_shown_ms, fetched_at_ms, lines });
        *rendered = Some(current.clone());
        current
    }
}

/// The exporter's own families, as of now.
fn own_lines(handler: &HandlerStats, reload: &ReloadStatus) -> Lines {
    let mut lines = Lines::default();
    let by_code = handler.by_code().into_iter().map(|(code, n)| ([("code", code.to_string())], n as f64));
    lines.family(&HANDLER_REQUESTS, by_code);
    let unlabelled = |value: f64| [([] as [(&str, &str); 0], value)];
    lines.family(&HANDLER_IN_FLIGHT, unlabelled(handler.in_flight() as f64));
    let labels = [("version", VERSION), ("revision", REVISION), ("branch", BRANCH), ("rustversion", RUST_VERSION)];
    lines.family(&BUILD_INFO, [(labels, 1.0)]);
    let (successful, success_time) = reload.last();
    lines.family(&RELOAD_SUCCESSFUL, unlabelled(f64::from(u8::from(successful))));
    lines.family(&RELOAD_SUCCESS_TIME, unlabelled(success_time));
    process::write(&mut lines);
    lines
}

/// A scrape's page, sent a piece at a time: each family's metadata in the scrape's format, then
/// the lines of each account (or of the data age, or of the exporter itself) that has any.
#[derive(Debug)]
pub struct Page {
    /// The line sets, each of the same families in the same order: the accounts', then the data
    /// age's, then the exporter's own.
    sets: Vec<Arc<LineSet>>,
    /// Per family, in the order of the page: its metadata, and which sets hold its lines, at
    /// which index of their families.
    sections: Vec<Section>,
    /// What ends the page.
    end: &'static [u8],
    /// Where the sending has got to: the section, the set within it, whether the metadata went.
    section: usize,
    set: usize,
    described: bool,
    remaining: u64,
    buffer: BytesMut,
}

#[derive(Debug)]
struct Section {
    metadata: Vec<u8>,
    sets: Range<usize>,
    family: usize,
}

impl Page {
    fn new(format: Format, accounts: Vec<Arc<LineSet>>, ages: Lines, own: Lines) -> Self {
        let accounts_end = accounts.len();
        let mut sets = accounts;
        sets.push(Arc::new(LineSet::new(ages)));
        sets.push(Arc::new(LineSet::new(own)));
        let (ages_at, own_at) = (accounts_end, accounts_end + 1);
        let section = |family: &Family, sets: Range<usize>, index: usize| Section {
            metadata: format.metadata(family),
            sets,
            family: index,
        };
        // Every account's lines hold the same families in the same order; capi_up comes first,
        // then the data age, as it always has.
        let account_families = sets.first().filter(|_| accounts_end > 0).map_or(&[][..], |set| &set.families[..]);
        let mut sections = Vec::new();
        for (index, (family, _)) in account_families.iter().enumerate() {
            sections.push(section(family, 0..accounts_end, index));
            if index == 0 {
                sections.push(section(&account::DATA_AGE, ages_at..ages_at + 1, 0));
            }
        }
        for (index, (family, _)) in sets[own_at].families.iter().enumerate() {
            sections.push(section(family, own_at..own_at + 1, index));
        }
        let mut page = Self {
            sets,
            sections,
            end: format.end(),
            section: 0,
            set: 0,
            described: false,
            remaining: 0,
            buffer: BytesMut::new(),
        };
        page.remaining = page.length();
        page
    }

    /// The page's length in bytes.
    fn length(&self) -> u64 {
        let lines = |section: &Section| -> u64 {
            self.sets[section.sets.clone()].iter().map(|set| set.of(section.family).len() as u64).sum()
        };
        let sections = self.sections.iter().map(|section| match lines(section) {
            0 => 0,
            bytes => bytes + section.metadata.len() as u64,
        });
        sections.sum::<u64>() + self.end.len() as u64
    }

    /// How many bytes are still to be sent.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// The next part of the page, about [`CHUNK_BYTES`] long, or `None` at its end. The lines
    /// are copied into it: sending each account's lines of each family as a frame of its own
    /// (100,000-odd for 1,000 accounts) costs the server more than the copy. The chunks are
    /// written into one buffer, whose memory comes back to it once the chunk sent before is
    /// dropped: a scrape allocates a chunk or two, not one per chunk.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.reserve(CHUNK_BYTES);
        self.fill(&mut buffer);
        self.remaining -= buffer.len() as u64;
        let chunk = buffer.split().freeze();
        self.buffer = buffer;
        (!chunk.is_empty()).then_some(chunk)
    }

    /// Appends the next pieces of the page to `out` until it holds a chunk, or the page ends.
    fn fill(&mut self, out: &mut BytesMut) {
        while out.len() < CHUNK_BYTES {
            let Some(section) = self.sections.get(self.section) else {
                out.extend_from_slice(std::mem::take(&mut self.end));
                return;
            };
            let Some(set) = self.sets.get(section.sets.start + self.set).filter(|_| self.set < section.sets.len())
            else {
                (self.section, self.set, self.described) = (self.section + 1, 0, false);
                continue;
            };
            let lines = set.of(section.family);
            if lines.is_empty() {
                self.set += 1;
            } else if !self.described {
                self.described = true;
                out.extend_from_slice(&section.metadata);
            } else {
                self.set += 1;
                out.extend_from_slice(lines);
            }
        }
    }

    /// The whole page at once (tests, fuzzing, benches).
    pub fn into_bytes(mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(usize::try_from(self.remaining).unwrap_or(0));
        while let Some(chunk) = self.next_chunk() {
            out.extend_from_slice(&chunk);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::stats::AccountStats;
    use crate::snapshot::AccountSnapshot;

    fn page(exposition: &Exposition, format: Format) -> String {
        let page = exposition.page(format);
        let length = page.remaining();
        let text = String::from_utf8(page.into_bytes()).unwrap();
        assert_eq!(text.len() as u64, length, "the announced length");
        text
    }

    #[test]
    fn a_scrape_shows_the_latest_publication_and_renders_only_what_changed() {
        let slot = AccountSlot::new("main");
        let exposition = Exposition::new(vec![slot.clone()], Duration::from_secs(60));
        slot.publish(AccountSnapshot { up: false, ..AccountSnapshot::default() });
        assert!(page(&exposition, Format::Text).contains("capi_up{account=\"main\"} 0\n"));
        let first = exposition.accounts[0].current(0, &exposition.coins);
        assert!(Arc::ptr_eq(&first, &exposition.accounts[0].current(0, &exposition.coins)), "kept");
        let stats = Arc::new(AccountStats::new(Duration::from_secs(15)));
        slot.publish(AccountSnapshot { up: true, stats, ..AccountSnapshot::default() });
        let text = page(&exposition, Format::Text);
        assert!(text.contains("capi_up{account=\"main\"} 1\n"), "{text}");
        assert!(text.contains("capi_poll_interval_seconds{account=\"main\"} 15\n"), "{text}");
    }

    #[test]
    fn a_rendering_writes_over_the_last_ones_memory_unless_a_page_still_sends_it() {
        let slot = AccountSlot::new("main");
        let exposition = Exposition::new(vec![slot.clone()], Duration::from_secs(60));
        let text_of = |exposition: &Exposition| exposition.accounts[0].current(0, &exposition.coins).lines.text.clone();
        let publish = |up| slot.publish(AccountSnapshot { up, ..AccountSnapshot::default() });
        publish(false);
        text_of(&exposition);
        publish(false); // now with room to grow
        let first = text_of(&exposition).as_ptr();
        publish(true);
        assert_eq!(text_of(&exposition).as_ptr(), first, "the same memory");

        let sending = exposition.page(Format::Text);
        publish(false);
        assert_ne!(text_of(&exposition).as_ptr(), first, "new memory while a page sends the last lines");
        let sent = String::from_utf8(sending.into_bytes()).unwrap();
        assert!(sent.contains("capi_up{account=\"main\"} 1\n"), "the page in flight is unchanged: {sent}");
    }

    #[test]
    fn figures_too_old_are_withdrawn_without_a_new_publication() {
        let slot = AccountSlot::new("main");
        let exposition = Exposition::new(vec![slot.clone()], Duration::from_secs(60));
        let info = crate::api::model::AccountInfo { version: Some(7.into()), ..Default::default() };
        let fetched = steady_now_ms() - 59_000;
        let snapshot = AccountSnapshot {
            coins: [(2, Arc::new(info))].into(),
            fetched_at_ms: [(2, fetched)].into(),
            ..AccountSnapshot::default()
        };
        slot.publish(snapshot);
        assert!(page(&exposition, Format::Text).contains("capi_account_version{"));
        let text = loop {
            let text = page(&exposition, Format::Text);
            if !text.contains("capi_account_version{") {
                break text;
            }
            assert!(steady_now_ms() - fetched < 70_000, "still shown 10 s past the age limit: {text}");
            std::thread::sleep(Duration::from_millis(20));
        };
        let age = text
            .lines()
            .find_map(|l| l.strip_prefix("capi_data_age_seconds{account=\"main\",coin=\"USDT\",coin_id=\"2\"} "));
        assert!(age.and_then(|age| age.parse::<f64>().ok()).is_some_and(|age| age >= 60.0), "{text}");
    }

    #[test]
    fn every_account_shows_the_age_of_its_figures() {
        let slots = [AccountSlot::new("main"), AccountSlot::new("second")];
        let fetched = steady_now_ms() - 5_000;
        for slot in &slots {
            slot.publish(AccountSnapshot { fetched_at_ms: [(2, fetched)].into(), ..AccountSnapshot::default() });
        }
        let exposition = Exposition::new(slots.to_vec(), Duration::from_secs(60));
        let text = page(&exposition, Format::Text);
        let ages: Vec<&str> = text.lines().filter(|l| l.starts_with("capi_data_age_seconds{")).collect();
        assert_eq!(ages.len(), 2, "{text}");
        for (line, account) in ages.iter().zip(["main", "second"]) {
            let prefix = format!("capi_data_age_seconds{{account=\"{account}\",coin=\"USDT\",coin_id=\"2\"}} ");
            let age = line.strip_prefix(&prefix).and_then(|age| age.parse::<f64>().ok());
            assert!(age.is_some_and(|age| (5.0..60.0).contains(&age)), "{line}");
        }
        assert_eq!(text.matches("# TYPE capi_data_age_seconds gauge\n").count(), 1);
    }

    #[test]
    fn the_two_formats_differ_only_in_metadata_and_the_end() {
        let slot = AccountSlot::new("main");
        let stats = Arc::new(AccountStats::new(Duration::from_secs(15)));
        slot.publish(AccountSnapshot { stats, ..AccountSnapshot::default() });
        let exposition = Exposition::new(vec![slot], Duration::from_secs(60));
        let (text, openmetrics) = (page(&exposition, Format::Text), page(&exposition, Format::OpenMetrics));
        // process_* figures (memory, CPU) may move between the two pages.
        let samples = |page: &str| {
            page.lines()
                .filter(|l| !l.starts_with('#') && !l.starts_with("process_"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(samples(&text), samples(&openmetrics));
        assert!(text.contains("# TYPE capi_api_requests_total counter\n") && !text.contains("# EOF"));
        assert!(openmetrics.contains("# TYPE capi_api_requests counter\n") && openmetrics.ends_with("# EOF\n"));
    }
}
