//! Snapshots to the page scrapers read, in the format each asks for (see [`format`]).
//!
//! Each account's lines are rendered from its snapshot once per publication and kept, as
//! kube-state-metrics keeps each object's lines: a scrape renders the lines of the accounts that
//! published since the last scrape, writes out every account's kept lines family by family, and
//! adds what changes with the clock alone (data age, the process's own figures). So every scrape
//! sees the latest publication of every account, and the page is sent as the kept lines
//! themselves, not as a copy.

mod account;
pub mod format;
mod poller;
mod process;

pub use format::Format;

use crate::api::clock::local_now_ms;
use crate::snapshot::{AccountSlot, AccountSnapshot};
use account::View;
use axum::body::Bytes;
use format::{Family, Lines};
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The version and git revision this binary was built from.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const REVISION: &str = env!("CAPI_REVISION");

const BUILD_INFO: Family =
    Family::gauge("capi_exporter_build_info", "The exporter's version and git revision; value 1");

/// Every account's series, and the exporter's own.
#[derive(Debug)]
pub struct Exposition {
    accounts: Vec<Account>,
    max_age: Duration,
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
    snapshot: Arc<AccountSnapshot>,
    text: Bytes,
    families: Vec<(Family, Range<usize>)>,
}

impl Exposition {
    /// Figures older than `max_age` are withdrawn; their age stays visible.
    pub fn new(slots: Vec<Arc<AccountSlot>>, max_age: Duration) -> Self {
        let accounts = slots.into_iter().map(|slot| Account { slot, rendered: Mutex::new(None) }).collect();
        Self { accounts, max_age }
    }

    /// The page of one scrape, as the pieces to send one after the other.
    pub fn page(&self, format: Format) -> Vec<Bytes> {
        let now_ms = local_now_ms();
        let oldest_ms = now_ms.saturating_sub(i64::try_from(self.max_age.as_millis()).unwrap_or(i64::MAX));
        let rendered: Vec<Arc<Rendered>> = self.accounts.iter().map(|account| account.current(oldest_ms)).collect();
        let mut page = Page { format, pieces: Vec::new() };
        let mut ages = Lines::default();
        for (account, lines) in self.accounts.iter().zip(&rendered) {
            View::new(account.slot.name(), &lines.snapshot, oldest_ms).write_data_age(now_ms, &mut ages);
        }
        let ages = ages.finish().0;
        // Every account's lines hold the same families in the same order; capi_up comes first,
        // then the data age, as it always has.
        let families = rendered.first().map_or(&[][..], |lines| &lines.families[..]);
        for (index, (family, _)) in families.iter().enumerate() {
            page.family(family, rendered.iter().map(|lines| lines.text.slice(lines.families[index].1.clone())));
            if index == 0 {
                page.family(&account::DATA_AGE, [ages.clone()]);
            }
        }
        page.lines(own_lines());
        page.pieces.push(Bytes::from_static(format.end()));
        page.pieces
    }
}

impl Account {
    /// The lines of the account's latest snapshot, rendered now if it published since, or if
    /// some of its figures have become too old to show.
    fn current(&self, oldest_ms: i64) -> Arc<Rendered> {
        let mut rendered = self.rendered.lock().unwrap_or_else(PoisonError::into_inner);
        // The count first: a snapshot published in between is rendered again next time.
        let publication = self.slot.publications();
        if let Some(lines) =
            rendered.as_ref().filter(|r| r.publication == publication && oldest_ms <= r.oldest_shown_ms)
        {
            return lines.clone();
        }
        let snapshot = self.slot.latest().unwrap_or_default();
        let mut lines = Lines::default();
        View::new(self.slot.name(), &snapshot, oldest_ms).write(&mut lines);
        let (text, families) = lines.finish();
        let oldest_shown_ms = snapshot
            .fresh_coins(oldest_ms)
            .filter_map(|(coin, _)| snapshot.fetched_at_ms.get(&coin).copied())
            .min()
            .unwrap_or(i64::MAX);
        let lines = Arc::new(Rendered { publication, oldest_shown_ms, snapshot, text, families });
        *rendered = Some(lines.clone());
        lines
    }
}

/// The exporter's own families, as of now.
fn own_lines() -> Lines {
    let mut lines = Lines::default();
    lines.family(BUILD_INFO, [([("version", VERSION), ("revision", REVISION)], 1.0)]);
    process::write(&mut lines);
    lines
}

/// A page being put together: each family's metadata in the scrape's format, then its lines.
struct Page {
    format: Format,
    pieces: Vec<Bytes>,
}

impl Page {
    /// A family with the lines of each account; left out when none has any.
    fn family(&mut self, family: &Family, lines: impl IntoIterator<Item = Bytes>) {
        let lines: Vec<Bytes> = lines.into_iter().filter(|piece| !piece.is_empty()).collect();
        if !lines.is_empty() {
            self.pieces.push(Bytes::from(self.format.metadata(family)));
            self.pieces.extend(lines);
        }
    }

    fn lines(&mut self, lines: Lines) {
        let (text, families) = lines.finish();
        for (family, range) in families {
            self.family(&family, [text.slice(range)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::stats::AccountStats;

    fn page(exposition: &Exposition, format: Format) -> String {
        String::from_utf8(exposition.page(format).concat()).unwrap()
    }

    #[test]
    fn a_scrape_shows_the_latest_publication_and_renders_only_what_changed() {
        let slot = AccountSlot::new("main");
        let exposition = Exposition::new(vec![slot.clone()], Duration::from_secs(60));
        slot.publish(AccountSnapshot { up: false, ..AccountSnapshot::default() });
        assert!(page(&exposition, Format::Text).contains("capi_up{account=\"main\"} 0\n"));
        let first = exposition.accounts[0].current(0);
        assert!(Arc::ptr_eq(&first, &exposition.accounts[0].current(0)), "kept");
        let stats = Arc::new(AccountStats::new(Duration::from_secs(15)));
        slot.publish(AccountSnapshot { up: true, stats, ..AccountSnapshot::default() });
        let text = page(&exposition, Format::Text);
        assert!(text.contains("capi_up{account=\"main\"} 1\n"), "{text}");
        assert!(text.contains("capi_poll_interval_seconds{account=\"main\"} 15\n"), "{text}");
    }

    #[test]
    fn figures_too_old_are_withdrawn_without_a_new_publication() {
        let slot = AccountSlot::new("main");
        let exposition = Exposition::new(vec![slot.clone()], Duration::from_secs(60));
        let info = crate::api::model::AccountInfo { version: Some(7.into()), ..Default::default() };
        let fetched = local_now_ms() - 59_950;
        let snapshot = AccountSnapshot {
            coins: [(2, Arc::new(info))].into(),
            fetched_at_ms: [(2, fetched)].into(),
            ..AccountSnapshot::default()
        };
        slot.publish(snapshot);
        assert!(page(&exposition, Format::Text).contains("capi_account_version{"));
        std::thread::sleep(Duration::from_millis(100));
        let text = page(&exposition, Format::Text);
        assert!(!text.contains("capi_account_version{"), "{text}");
        let age = text.lines().find_map(|l| l.strip_prefix("capi_data_age_seconds{account=\"main\",coin_id=\"2\"} "));
        assert!(age.and_then(|age| age.parse::<f64>().ok()).is_some_and(|age| age >= 60.0), "{text}");
    }

    #[test]
    fn the_two_formats_differ_only_in_metadata_and_the_end() {
        let slot = AccountSlot::new("main");
        let stats = Arc::new(AccountStats::new(Duration::from_secs(15)));
        slot.publish(AccountSnapshot { stats, ..AccountSnapshot::default() });
        let exposition = Exposition::new(vec![slot], Duration::from_secs(60));
        let (text, openmetrics) = (page(&exposition, Format::Text), page(&exposition, Format::OpenMetrics));
        let samples = |page: &str| page.lines().filter(|l| !l.starts_with('#')).map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(samples(&text), samples(&openmetrics));
        assert!(text.contains("# TYPE capi_api_requests_total counter\n") && !text.contains("# EOF"));
        assert!(openmetrics.contains("# TYPE capi_api_requests counter\n") && openmetrics.ends_with("# EOF\n"));
    }
}
