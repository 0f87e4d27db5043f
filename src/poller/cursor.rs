//! The bill cursor: which bill queries to make so that every bill is counted exactly once.
//!
//! The bill query has no paging cursor, and neither the item order nor the inclusiveness of
//! `startTime`/`endTime` is documented. So the cursor never relies on any of them:
//!
//! - A *pass* covers the time window from the first unsettled millisecond to the pass's start.
//!   A query whose answer says `hasNextPage` is split: halves of the time window down to one
//!   millisecond, then per business type, then per coin, then per symbol: over every value the
//!   account is known to use ([`KnownValues`]), the configured coins and the values on the page.
//!   Where that cannot be proven complete, [`Accepted::shortfall`] says so (see [`Shortfall`]).
//! - Bounds are widened by one millisecond on each side (exact if the exchange treats them as
//!   exclusive, a superset if inclusive) until a bill exactly on a sent bound proves that bound
//!   inclusive; from then on it is sent exactly.
//! - Bills are counted by id, once: a bill is new if its creation time is after the settled point
//!   and its id is not among those already seen. A millisecond is settled once a pass that
//!   started at least `overlap` after it has covered it (at its end, or as it goes), so a bill
//!   that becomes visible up to `overlap` late is still found, and the set of seen ids only
//!   holds the unsettled window. An id shown at several creation times (an exchange that moved
//!   a bill; said in [`Accepted::moved`]) is kept until the latest settles; shown again at a
//!   later time after that, it would count again: bill ids are taken to be unique and creation
//!   times fixed.
//! - A pass that runs out of its per-poll query budget resumes at the next poll, so a burst costs
//!   several polls, never a tight loop, and never stalls. It can settle what it has covered as
//!   it goes ([`BillCursor::settle_covered`]), so that one that does not keep up keeps the ids
//!   of the part of its window still to scan, not all of them until it ends.
//!
//! Pure logic, no I/O: the poller feeds it answers, the tests feed it a model exchange.

use crate::api::clock::UNCORRECTED_LAG_MS;
use crate::api::model::{Bill, BillPage, BUSINESS_TYPES};
use crate::api::BillQuery;
use crate::snapshot::counters::Loss;
use crowded::Crowded;
use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use crowded::{Shortfall, MAX_CROWDED_QUERIES};
pub use known::KnownValues;

mod crowded;
pub mod known;

/// What the exchange's bounds have been proven to be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct KnownBounds {
    start_inclusive: bool,
    end_inclusive: bool,
}

/// The filters of one query below the time window, finest last.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Filter {
    All,
    Type(String),
    Coin(String, String),
    Symbol(String, String, String),
}

impl Filter {
    /// The business type, coin and symbol the filter asks for, each if it does.
    fn parts(&self) -> [Option<&String>; 3] {
        match self {
            Filter::All => [None, None, None],
            Filter::Type(t) => [Some(t), None, None],
            Filter::Coin(t, c) => [Some(t), Some(c), None],
            Filter::Symbol(t, c, s) => [Some(t), Some(c), Some(s)],
        }
    }

    /// The first field, as the exchange names it, in which a bill with these values does not
    /// answer a query with this filter.
    fn mismatch(&self, business_type: &str, coin: &str, symbol: &str) -> Option<&'static str> {
        let values = [("businessType", business_type), ("coin", coin), ("symbol", symbol)];
        let differs = |(want, (_, value)): &(Option<&String>, (&str, &str))| want.is_some_and(|want| want != value);
        self.parts().into_iter().zip(values).find(differs).map(|(_, (field, _))| field)
    }
}

/// One query still to make: a closed window of creation times and a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Task {
    start: i64,
    end: i64,
    filter: Filter,
}

impl Task {
    fn is_one_millisecond(&self) -> bool {
        self.start == self.end
    }
}

/// A pass over one window; its tasks form a stack with the earliest window on top, so the
/// queries of a crowded millisecond are answered one after the other.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pass {
    started_at: i64,
    pending: Vec<Task>,
    crowded: Option<Crowded>,
}

/// What one answer contributed.
#[derive(Debug, Default, PartialEq)]
pub struct Accepted {
    /// Bills never counted before, in the order the exchange listed them.
    pub new_bills: Vec<Bill>,
    /// A crowded millisecond whose queries this answer completed, when it was not reported
    /// before with at least the same loss.
    pub shortfall: Option<Shortfall>,
    /// Bills of the answer that do not answer its query (created outside the window sent, or of
    /// another business type, coin or symbol than asked), each named by the first field that
    /// does not match. They are ignored: an exchange that sends them cannot be trusted with
    /// them, and counting them would let any answer create any number of series.
    pub unmatched: Vec<&'static str>,
    /// The field of each value of the answer's bills that [`KnownValues`] could not keep (too
    /// long, or another value forgotten for it).
    pub unremembered: Vec<&'static str>,
    /// `cTime` for each bill of the answer whose id was counted before at another creation time
    /// (an exchange that moved a bill): counted once while its id is kept.
    pub moved: Vec<&'static str>,
}

/// The persistent part of the cursor, saved in the state file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CursorState {
    /// Every bill created at or before this millisecond has been counted, or is older than
    /// the start of counting.
    pub settled_through: i64,
    /// Ids counted so far whose bills were created after `settled_through`, with creation times.
    pub seen: HashMap<String, i64>,
    /// The values this account's bills have shown.
    pub known: KnownValues,
    /// Shortfalls reported for milliseconds after `settled_through`, which are scanned again.
    pub reported: BTreeMap<i64, Loss>,
}

impl CursorState {
    /// The state of a cursor that counts bills created at or after `count_from_ms`.
    pub fn counting_from(count_from_ms: i64) -> Self {
        Self { settled_through: count_from_ms.saturating_sub(1), ..Self::default() }
    }
}

#[derive(Debug, Clone)]
pub struct BillCursor {
    state: CursorState,
    overlap_ms: i64,
    page_size: u32,
    /// Coin names of the configured coin ids: a crowded millisecond is always split over them.
    configured_coins: Vec<String>,
    bounds: KnownBounds,
    pass: Option<Pass>,
    /// Filters the exchange refused (see [`Self::give_up_refused`]), [`MAX_REFUSED`] at most:
    /// never asked again while the exporter runs, only reported with each crowded millisecond.
    refused: BTreeSet<Filter>,
}

/// Refused filters remembered, at most: each refusal is one failed request a poll, if forgotten.
const MAX_REFUSED: usize = 64;

impl BillCursor {
    /// A cursor that counts bills created at or after `count_from_ms`.
    pub fn new(count_from_ms: i64, overlap_ms: i64, page_size: u32) -> Self {
        Self::resume(CursorState::counting_from(count_from_ms), overlap_ms, page_size)
    }

    /// A cursor continuing from saved state.
    pub fn resume(state: CursorState, overlap_ms: i64, page_size: u32) -> Self {
        let (configured_coins, bounds, refused) = (Vec::new(), KnownBounds::default(), BTreeSet::new());
        Self { state, overlap_ms, page_size, configured_coins, bounds, pass: None, refused }
    }

    /// Coins a crowded millisecond is split over even before a bill has shown them.
    pub fn with_configured_coins(mut self, coins: Vec<String>) -> Self {
        self.configured_coins = coins;
        self
    }

    pub fn state(&self) -> &CursorState {
        &self.state
    }

    /// Takes a restored settled point more than the overlap after `now_ms` for one saved in the
    /// future, and returns it: bills created since the save and dated before it are not counted
    /// (by a clock that was ahead, or from a damaged file), which the caller says. Within the
    /// overlap it is not: clocks move a little when corrected. The point is brought back to the
    /// latest time the exchange's clock can show, if it is later, so that counting does not wait
    /// for it.
    ///
    /// `now_ms` is this machine's estimate of the exchange's clock, which may be behind it by up
    /// to [`UNCORRECTED_LAG_MS`] with nothing to correct it. A bill counted before was created by
    /// the exchange's now, so at most that far after `now_ms`: going back no further than
    /// `now_ms` plus the lag counts none twice. (Going back to `now_ms` itself counted again the
    /// bills between the two whenever the overlap was shorter than the lag.)
    pub fn bring_back_from_the_future(&mut self, now_ms: i64) -> Option<i64> {
        let saved = self.state.settled_through;
        (saved > now_ms.saturating_add(self.overlap_ms)).then(|| {
            self.state.settled_through = saved.min(now_ms.saturating_add(UNCORRECTED_LAG_MS));
            saved
        })
    }

    /// Starts a pass up to `now_ms` by the exchange's clock, unless one is still in progress from
    /// an earlier poll.
    pub fn start_poll(&mut self, now_ms: i64) {
        let start = self.state.settled_through.saturating_add(1);
        if self.pass.is_none() && start <= now_ms {
            let task = Task { start, end: now_ms, filter: Filter::All };
            self.pass = Some(Pass { started_at: now_ms, pending: vec![task], crowded: None });
        }
    }

    /// The next query of the current pass, or `None` when the pass is complete.
    pub fn next_query(&self) -> Option<BillQuery> {
        let task = self.pass.as_ref()?.pending.last()?;
        Some(self.query_for(task))
    }

    /// Takes the answer to the query [`Self::next_query`] returned last.
    pub fn accept(&mut self, page: &BillPage) -> Accepted {
        let Some(task) = self.pass.as_mut().and_then(|pass| pass.pending.pop()) else {
            return Accepted::default();
        };
        let sent = Self::sent_bounds(self.bounds, &task);
        let (page, unmatched) = answering(page, &task.filter, sent);
        let page = page.as_ref();
        let learned = learn_bounds(self.bounds, sent, page);
        let newly_proven = learned != self.bounds;
        self.bounds = learned;
        let (new_bills, moved) = self.count_new(page);
        let unremembered = self.state.known.learn(&page.items);
        if page.has_next_page && task.is_one_millisecond() && newly_proven {
            // The bills of a neighbouring millisecond that proved a bound may be what filled
            // the page: ask again, with the bound now sent exactly.
            self.pass_mut().pending.push(task);
            return Accepted { new_bills, shortfall: None, unmatched, unremembered, moved };
        }
        let children = if page.has_next_page { self.split(&task, page) } else { Vec::new() };
        let (refused, mut children): (Vec<Task>, Vec<Task>) =
            children.into_iter().partition(|child| self.refused.contains(&child.filter));
        let pass = self.pass_mut();
        if task.is_one_millisecond() && (page.has_next_page || pass.crowded.is_some()) {
            let crowded = pass.crowded.get_or_insert_with(|| Crowded::new(task.start));
            crowded.record(&task.filter, sent, page);
            refused.iter().for_each(|child| crowded.unanswered(&child.filter));
            children = crowded.plan(children);
        }
        pass.pending.extend(children);
        let shortfall = self.close_crowded_when_answered();
        self.finish_pass_if_done();
        Accepted { new_bills, shortfall, unmatched, unremembered, moved }
    }

    /// Gives up the query [`Self::next_query`] returned last, which the exchange refused as
    /// invalid, when it is a crowded millisecond's query by business type, coin or symbol: the
    /// exchange took the millisecond's query of every type, so it refuses this filter's value (a
    /// business type it does not document, say), and asking it again at every poll would stop
    /// the count for good. The millisecond is then reported as a possible loss, with the refused
    /// query's business type, and so is every crowded millisecond after it: the filter is not
    /// asked again. `None`, and nothing given up, for any other query.
    pub fn give_up_refused(&mut self) -> Option<Accepted> {
        let pass = self.pass.as_mut()?;
        let crowded = pass.crowded.as_mut()?;
        let task = pass.pending.last()?;
        if !task.is_one_millisecond() || task.start != crowded.ms || task.filter == Filter::All {
            return None;
        }
        crowded.unanswered(&task.filter);
        if self.refused.len() < MAX_REFUSED {
            self.refused.insert(task.filter.clone());
        }
        pass.pending.pop();
        let shortfall = self.close_crowded_when_answered();
        self.finish_pass_if_done();
        Some(Accepted { shortfall, ..Accepted::default() })
    }

    /// Settles what the pass in progress has covered, up to `overlap` before its start: its
    /// queries are stacked earliest first, so every millisecond before the next one's window has
    /// been answered. The ids of that part are let go, and the settled point moves, while the
    /// pass goes on: one that takes many polls (an account booking more bills than its queries
    /// list, which may never end) keeps the ids of what is left of its window, not all of them.
    pub fn settle_covered(&mut self) {
        let Some(pass) = &self.pass else { return };
        let Some(next) = pass.pending.last() else { return };
        let through = next.start.saturating_sub(1).min(pass.started_at.saturating_sub(self.overlap_ms));
        if through > self.state.settled_through {
            self.settle_through(through);
        }
    }

    /// Whether a pass is waiting for more queries (it resumes at the next poll).
    pub fn pass_in_progress(&self) -> bool {
        self.pass.is_some()
    }

    fn pass_mut(&mut self) -> &mut Pass {
        self.pass.as_mut().expect("accept only runs during a pass")
    }

    fn query_for(&self, task: &Task) -> BillQuery {
        let (start_time, end_time) = Self::sent_bounds(self.bounds, task);
        let [business_type, coin, symbol] = task.filter.parts().map(|part| part.cloned());
        BillQuery { coin, symbol, business_type, start_time, end_time, limit: self.page_size }
    }

    /// The bounds to send so the answer covers the task's window whatever the inclusiveness.
    fn sent_bounds(bounds: KnownBounds, task: &Task) -> (i64, i64) {
        let start = if bounds.start_inclusive { task.start } else { task.start.saturating_sub(1) };
        let end = if bounds.end_inclusive { task.end } else { task.end.saturating_add(1) };
        (start, end)
    }

    /// The bills never counted before, and `cTime` for each bill counted before at another
    /// creation time. An id is kept until the latest creation time shown for it settles: one
    /// shown again at another time (by an exchange that moved it) is not new. Ids are not kept
    /// for ever, so one shown again at a time after that would count again: bill ids are taken
    /// to be unique, and creation times fixed.
    fn count_new(&mut self, page: &BillPage) -> (Vec<Bill>, Vec<&'static str>) {
        let settled = self.state.settled_through;
        let seen = &mut self.state.seen;
        let mut moved = Vec::new();
        let mut is_new = |bill: &Bill| match seen.entry(bill.id.clone()) {
            Entry::Occupied(mut kept) => {
                let latest = kept.get_mut();
                if *latest != bill.ctime_ms {
                    moved.push("cTime");
                }
                *latest = (*latest).max(bill.ctime_ms);
                false
            }
            Entry::Vacant(new) => {
                new.insert(bill.ctime_ms);
                true
            }
        };
        let new_bills = page.items.iter().filter(|bill| bill.ctime_ms > settled && is_new(bill)).cloned().collect();
        (new_bills, moved)
    }

    /// The queries that together cover a full one, pushed so that the earliest window is on
    /// top; none when no finer split exists. A crowded millisecond is split over every value
    /// known to the account, not only those on its page.
    fn split(&self, task: &Task, page: &BillPage) -> Vec<Task> {
        if task.start < task.end {
            let middle = task.start + ((i128::from(task.end) - i128::from(task.start)) / 2) as i64;
            let later = Task { start: middle + 1, end: task.end, filter: task.filter.clone() };
            let earlier = Task { start: task.start, end: middle, filter: task.filter.clone() };
            return vec![later, earlier];
        }
        let known = &self.state.known;
        let on_page = |field: fn(&Bill) -> &str| page.items.iter().map(field);
        let filters: Vec<Filter> = match &task.filter {
            Filter::All => {
                let documented = BUSINESS_TYPES.into_iter();
                let seen = known.business_types.keys().map(String::as_str);
                values(documented.chain(seen).chain(on_page(|b| b.business_type.as_str()))).map(Filter::Type).collect()
            }
            Filter::Type(t) => {
                let configured = self.configured_coins.iter().map(String::as_str);
                let seen = known.coins.keys().map(String::as_str);
                let coins = values(configured.chain(seen).chain(on_page(|b| b.coin.as_str())));
                coins.map(|c| Filter::Coin(t.clone(), c)).collect()
            }
            Filter::Coin(t, c) => {
                let symbols = values(known.symbols_of(c).chain(on_page(|b| b.symbol.as_str())));
                symbols.map(|s| Filter::Symbol(t.clone(), c.clone(), s)).collect()
            }
            Filter::Symbol(..) => Vec::new(),
        };
        let at = |filter| Task { start: task.start, end: task.end, filter };
        filters.into_iter().map(at).collect()
    }

    /// Once the last query of a crowded millisecond is answered, its shortfall, unless it was
    /// reported before with at least the same loss (a rescan within the overlap).
    fn close_crowded_when_answered(&mut self) -> Option<Shortfall> {
        let overlap_ms = self.overlap_ms;
        let pass = self.pass_mut();
        let ms = pass.crowded.as_ref()?.ms;
        // The stack holds a crowded millisecond's queries on top, one after the other.
        if pass.pending.last().is_some_and(|next| next.is_one_millisecond() && next.start == ms) {
            return None;
        }
        let last_scan = ms <= pass.started_at.saturating_sub(overlap_ms);
        let mut shortfall = pass.crowded.take()?.shortfall(self.page_size, &self.state.seen);
        if !last_scan {
            // A rescan may still find the bill a full answer proves missing, by a symbol shown
            // since: it is certain only in the scan that settles the millisecond.
            shortfall.loss = Loss::Possible;
        }
        let news = self.state.reported.get(&ms).is_none_or(|reported| *reported < shortfall.loss);
        news.then(|| {
            self.state.reported.insert(ms, shortfall.loss);
            shortfall
        })
    }

    /// A complete pass settles everything that was at least `overlap` old when it started.
    fn finish_pass_if_done(&mut self) {
        let Some(pass) = &self.pass else { return };
        if !pass.pending.is_empty() {
            return;
        }
        let through = pass.started_at.saturating_sub(self.overlap_ms);
        self.pass = None;
        self.settle_through(through);
    }

    /// Takes every bill created up to `through` as counted, if that is later than before, and
    /// lets go of what only the unsettled window needed.
    fn settle_through(&mut self, through: i64) {
        let settled = self.state.settled_through.max(through);
        self.state.settled_through = settled;
        self.state.seen.retain(|_, ctime| *ctime > settled);
        self.state.reported.retain(|ms, _| *ms > settled);
    }
}

/// The bills of a page that answer the query sent with this filter and these bounds, and for
/// each other bill the first field that does not match. A page is copied only when it holds
/// such a bill.
fn answering<'p>(
    page: &'p BillPage,
    filter: &Filter,
    (start, end): (i64, i64),
) -> (Cow<'p, BillPage>, Vec<&'static str>) {
    let mismatch = |bill: &Bill| {
        let inside = (start..=end).contains(&bill.ctime_ms);
        if inside {
            filter.mismatch(&bill.business_type, &bill.coin, &bill.symbol)
        } else {
            Some("cTime")
        }
    };
    let unmatched: Vec<&'static str> = page.items.iter().filter_map(mismatch).collect();
    if unmatched.is_empty() {
        return (Cow::Borrowed(page), unmatched);
    }
    let items = page.items.iter().filter(|bill| mismatch(bill).is_none()).cloned().collect();
    (Cow::Owned(BillPage { has_next_page: page.has_next_page, items }), unmatched)
}

/// A bill exactly on a bound we sent proves the exchange includes that bound.
fn learn_bounds(known: KnownBounds, (start, end): (i64, i64), page: &BillPage) -> KnownBounds {
    KnownBounds {
        start_inclusive: known.start_inclusive || page.items.iter().any(|b| b.ctime_ms == start),
        end_inclusive: known.end_inclusive || page.items.iter().any(|b| b.ctime_ms == end),
    }
}

/// The distinct values to filter by, sorted: not empty, which would be read as no filter at all,
/// and no longer than any exchange's value (see [`known::MAX_VALUE_BYTES`]), which would make a
/// query, and its log lines, of any size.
fn values<'v>(all: impl Iterator<Item = &'v str>) -> impl Iterator<Item = String> + 'v {
    let distinct: BTreeSet<&str> = all.filter(|v| !v.is_empty() && v.len() <= known::MAX_VALUE_BYTES).collect();
    distinct.into_iter().map(str::to_owned)
}

#[cfg(test)]
mod tests;
