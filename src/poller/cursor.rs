//! The bill cursor: which bill queries to make so that every bill is counted exactly once.
//!
//! The bill query has no paging cursor, and neither the item order nor the inclusiveness of
//! `startTime`/`endTime` is documented. So the cursor never relies on any of them:
//!
//! - A *pass* covers the time window from the first unsettled millisecond to the pass's start.
//!   A query whose answer says `hasNextPage` is split: halves of the time window down to one
//!   millisecond, then per business type, then per coin, then per symbol. Only a query that is
//!   still full at the finest split is a shortfall, reported by [`Accepted::truncated`].
//! - Bounds are widened by one millisecond on each side (exact if the exchange treats them as
//!   exclusive, a superset if inclusive) until a bill exactly on a sent bound proves that bound
//!   inclusive; from then on it is sent exactly.
//! - Bills are counted by id, once: a bill is new if its creation time is after the settled point
//!   and its id is not among those already seen. A millisecond is settled once a complete pass that
//!   started at least `overlap` after it has covered it, so a bill that becomes visible up to
//!   `overlap` late is still found, and the set of seen ids only holds the unsettled window.
//! - A pass that runs out of its per-poll query budget resumes at the next poll, so a burst costs
//!   several polls, never a tight loop, and never stalls.
//!
//! Pure logic, no I/O: the poller feeds it answers, the tests feed it a model exchange.

use crate::api::model::{Bill, BillPage, BUSINESS_TYPES};
use crate::api::BillQuery;
use std::collections::{BTreeSet, HashMap};

/// What the exchange's bounds have been proven to be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct KnownBounds {
    start_inclusive: bool,
    end_inclusive: bool,
}

/// The filters of one query below the time window, finest last.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Filter {
    All,
    Type(String),
    Coin(String, String),
    Symbol(String, String, String),
}

/// One query still to make: a closed window of creation times and a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Task {
    start: i64,
    end: i64,
    filter: Filter,
}

/// A pass over one window; its tasks form a stack with the earliest window on top.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pass {
    started_at: i64,
    pending: Vec<Task>,
}

/// What one answer contributed.
#[derive(Debug, Default, PartialEq)]
pub struct Accepted {
    /// Bills never counted before, in the order the exchange listed them.
    pub new_bills: Vec<Bill>,
    /// The query was still full after every possible split: at least one bill was not seen.
    pub truncated: bool,
}

/// The persistent part of the cursor, saved in the state file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorState {
    /// Every bill created at or before this millisecond has been counted, or is older than
    /// the start of counting.
    pub settled_through: i64,
    /// Ids counted so far whose bills were created after `settled_through`, with creation times.
    pub seen: HashMap<String, i64>,
}

#[derive(Debug, Clone)]
pub struct BillCursor {
    state: CursorState,
    overlap_ms: i64,
    page_size: u32,
    bounds: KnownBounds,
    pass: Option<Pass>,
}

impl BillCursor {
    /// A cursor that counts bills created at or after `count_from_ms`.
    pub fn new(count_from_ms: i64, overlap_ms: i64, page_size: u32) -> Self {
        let state = CursorState { settled_through: count_from_ms - 1, seen: HashMap::new() };
        Self::resume(state, overlap_ms, page_size)
    }

    /// A cursor continuing from saved state.
    pub fn resume(state: CursorState, overlap_ms: i64, page_size: u32) -> Self {
        Self { state, overlap_ms, page_size, bounds: KnownBounds::default(), pass: None }
    }

    pub fn state(&self) -> &CursorState {
        &self.state
    }

    /// Starts a pass up to `now_ms`, unless one is still in progress from an earlier poll.
    pub fn start_poll(&mut self, now_ms: i64) {
        let start = self.state.settled_through.saturating_add(1);
        if self.pass.is_none() && start <= now_ms {
            let task = Task { start, end: now_ms, filter: Filter::All };
            self.pass = Some(Pass { started_at: now_ms, pending: vec![task] });
        }
    }

    /// The next query of the current pass, or `None` when the pass is complete.
    pub fn next_query(&self) -> Option<BillQuery> {
        let task = self.pass.as_ref()?.pending.last()?;
        Some(self.query_for(task))
    }

    /// Takes the answer to the query [`Self::next_query`] returned last.
    pub fn accept(&mut self, page: &BillPage) -> Accepted {
        let Some(pass) = self.pass.as_mut() else { return Accepted::default() };
        let Some(task) = pass.pending.pop() else { return Accepted::default() };
        let sent = Self::sent_bounds(self.bounds, &task);
        self.bounds = learn_bounds(self.bounds, sent, page);
        let new_bills = self.count_new(page);
        let mut truncated = false;
        if page.has_next_page {
            match split(&task, page) {
                Some(children) => self.pass_mut().pending.extend(children),
                None => truncated = true,
            }
        }
        self.finish_pass_if_done();
        Accepted { new_bills, truncated }
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
        let (business_type, coin, symbol) = match &task.filter {
            Filter::All => (None, None, None),
            Filter::Type(t) => (Some(t.clone()), None, None),
            Filter::Coin(t, c) => (Some(t.clone()), Some(c.clone()), None),
            Filter::Symbol(t, c, s) => (Some(t.clone()), Some(c.clone()), Some(s.clone())),
        };
        BillQuery { coin, symbol, business_type, start_time, end_time, limit: self.page_size }
    }

    /// The bounds to send so the answer covers the task's window whatever the inclusiveness.
    fn sent_bounds(bounds: KnownBounds, task: &Task) -> (i64, i64) {
        let start = if bounds.start_inclusive { task.start } else { task.start.saturating_sub(1) };
        let end = if bounds.end_inclusive { task.end } else { task.end.saturating_add(1) };
        (start, end)
    }

    fn count_new(&mut self, page: &BillPage) -> Vec<Bill> {
        let settled = self.state.settled_through;
        let seen = &mut self.state.seen;
        page.items
            .iter()
            .filter(|bill| bill.ctime_ms > settled && seen.insert(bill.id.clone(), bill.ctime_ms).is_none())
            .cloned()
            .collect()
    }

    /// A complete pass settles everything that was at least `overlap` old when it started.
    fn finish_pass_if_done(&mut self) {
        let Some(pass) = &self.pass else { return };
        if !pass.pending.is_empty() {
            return;
        }
        let settled = self.state.settled_through.max(pass.started_at.saturating_sub(self.overlap_ms));
        self.state.settled_through = settled;
        self.state.seen.retain(|_, ctime| *ctime > settled);
        self.pass = None;
    }
}

/// A bill exactly on a bound we sent proves the exchange includes that bound.
fn learn_bounds(known: KnownBounds, (start, end): (i64, i64), page: &BillPage) -> KnownBounds {
    KnownBounds {
        start_inclusive: known.start_inclusive || page.items.iter().any(|b| b.ctime_ms == start),
        end_inclusive: known.end_inclusive || page.items.iter().any(|b| b.ctime_ms == end),
    }
}

/// The queries that together cover a full one, pushed so that the earliest window is on top;
/// `None` when no finer split exists.
fn split(task: &Task, page: &BillPage) -> Option<Vec<Task>> {
    if task.start < task.end {
        let middle = task.start + ((i128::from(task.end) - i128::from(task.start)) / 2) as i64;
        let later = Task { start: middle + 1, end: task.end, filter: task.filter.clone() };
        let earlier = Task { start: task.start, end: middle, filter: task.filter.clone() };
        return Some(vec![later, earlier]);
    }
    let at = |filter| Task { start: task.start, end: task.end, filter };
    let filters: Vec<Filter> = match &task.filter {
        Filter::All => {
            // Every documented type, plus any undocumented one the page shows.
            let mut types: BTreeSet<&str> = BUSINESS_TYPES.into_iter().collect();
            types.extend(page.items.iter().map(|b| b.business_type.as_str()));
            types.into_iter().map(|t| Filter::Type(t.to_string())).collect()
        }
        Filter::Type(t) => distinct(page, |b| &b.coin).map(|c| Filter::Coin(t.clone(), c)).collect(),
        Filter::Coin(t, c) => distinct(page, |b| &b.symbol).map(|s| Filter::Symbol(t.clone(), c.clone(), s)).collect(),
        Filter::Symbol(..) => Vec::new(),
    };
    (!filters.is_empty()).then(|| filters.into_iter().map(at).collect())
}

/// The distinct non-empty values of one field among a page's bills.
fn distinct<'p>(page: &'p BillPage, field: impl Fn(&'p Bill) -> &'p String) -> impl Iterator<Item = String> + 'p {
    let values: BTreeSet<&String> = page.items.iter().map(field).filter(|v| !v.is_empty()).collect();
    values.into_iter().cloned()
}

#[cfg(test)]
mod tests;
