//! A crowded millisecond: one whose bill query stays full at a single millisecond, so that it is
//! split by business type, then coin, then symbol. A full answer says only that more bills match
//! than it shows, and the API has no paging below a millisecond and no way to list the business
//! types, coins and symbols an account uses: a split over the values known so far (the documented
//! types, the configured coins, every value the account's bills have shown) cannot be proven to
//! reach every bill. So every crowded millisecond is reported, once all its queries are answered:
//!
//! - **possible**: every bill found was counted, but a bill of a value never seen, or without the
//!   value (an empty coin cannot be asked for), or of a value over 64 bytes (no exchange's) or one
//!   the exchange refused as a filter, or of a query beyond [`MAX_CROWDED_QUERIES`], would have
//!   been missed, and nothing can tell;
//! - **certain**: a full answer for exactly that millisecond (bounds proven inclusive) proves more
//!   bills of its filter than were found or counted there before: at least one was missed. Only
//!   the scan that settles the millisecond says so; one before it says possible, since a rescan
//!   may yet find the bill.

use super::{Filter, Task};
use crate::api::model::{Bill, BillPage};
use crate::snapshot::counters::Loss;
use std::collections::{BTreeSet, HashMap};

/// The queries one crowded millisecond may take in one pass, its first included: 50 polls at
/// the most bill queries a poll makes, 12.5 minutes at 15 s. A funding settlement over 300
/// symbols takes about 330 (the documented types, the coins, then its symbols), a type split
/// over all 2,000 symbols remembered about 2,030. Without a bound, an exchange that showed new
/// values on every page could make a millisecond's split take millions of queries, its ids kept
/// all along.
pub const MAX_CROWDED_QUERIES: usize = 2_500;

/// A crowded millisecond whose count is not proven complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    pub ms: i64,
    /// The business types whose queries stayed full, were refused or were not asked, sorted;
    /// empty when only the query of every type did (the bills were spread over types, and one
    /// never seen may hide behind them).
    pub business_types: Vec<String>,
    /// Distinct bills of this millisecond that the queries found, all counted.
    pub bills_found: usize,
    /// Queries of its split beyond [`MAX_CROWDED_QUERIES`], not asked.
    pub queries_not_asked: usize,
    pub loss: Loss,
}

/// A query that came back full: its filter and the bounds it was sent with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FullQuery {
    filter: Filter,
    sent: (i64, i64),
}

/// The queries of one crowded millisecond and what they found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Crowded {
    pub(super) ms: i64,
    /// Every bill any of its answers showed, by id.
    found: HashMap<String, Bill>,
    full: Vec<FullQuery>,
    /// The business types of the queries the exchange refused or that were not asked: their
    /// bills beyond the coarser queries' are unknown.
    unanswered_types: BTreeSet<String>,
    /// Queries asked or planned, the first included.
    planned: usize,
    not_asked: usize,
}

impl Crowded {
    pub(super) fn new(ms: i64) -> Self {
        let (found, full, unanswered_types) = (HashMap::new(), Vec::new(), BTreeSet::new());
        Self { ms, found, full, unanswered_types, planned: 1, not_asked: 0 }
    }

    /// Keeps of a split's queries those that fit within [`MAX_CROWDED_QUERIES`]: the last ones,
    /// which the stack asks first. The others are not asked.
    pub(super) fn plan(&mut self, mut children: Vec<Task>) -> Vec<Task> {
        let fit = MAX_CROWDED_QUERIES.saturating_sub(self.planned).min(children.len());
        for child in children.drain(..children.len() - fit) {
            self.not_asked = self.not_asked.saturating_add(1);
            self.unanswered(&child.filter);
        }
        self.planned = self.planned.saturating_add(fit);
        children
    }

    /// Takes the answer to one of its queries, sent with bounds `sent`.
    pub(super) fn record(&mut self, filter: &Filter, sent: (i64, i64), page: &BillPage) {
        for bill in &page.items {
            self.found.entry(bill.id.clone()).or_insert_with(|| bill.clone());
        }
        if page.has_next_page {
            self.full.push(FullQuery { filter: filter.clone(), sent });
        }
    }

    /// Takes one of its queries that is not answered (the exchange refused it, or it was not
    /// asked): it proves nothing, and leaves its bills unknown.
    pub(super) fn unanswered(&mut self, filter: &Filter) {
        if let [Some(business_type), ..] = filter.parts() {
            self.unanswered_types.insert(business_type.clone());
        }
    }

    /// Once every query is answered: what its full answers leave open. `seen` holds the ids
    /// counted so far whose millisecond is not settled, with their creation times.
    pub(super) fn shortfall(&self, page_size: u32, seen: &HashMap<String, i64>) -> Shortfall {
        let found: Vec<&Bill> = self.found.values().filter(|b| b.ctime_ms == self.ms).collect();
        let proven = self.proves_uncounted(&found, page_size, seen);
        let full = self.full.iter().filter_map(|query| query.filter.parts()[0]);
        let types: BTreeSet<&String> = full.chain(&self.unanswered_types).collect();
        Shortfall {
            ms: self.ms,
            business_types: types.into_iter().cloned().collect(),
            bills_found: found.len(),
            queries_not_asked: self.not_asked,
            loss: if proven { Loss::Certain } else { Loss::Possible },
        }
    }

    /// Whether a full answer sent for exactly this millisecond proves a bill that was never
    /// counted: no more than a page of bills of its filter were `found` there or counted before
    /// (ids counted before, whose values are not kept, are taken to match). The bills are
    /// counted by filter once, not once per full answer: a millisecond may have thousands of
    /// each.
    fn proves_uncounted(&self, found: &[&Bill], page_size: u32, seen: &HashMap<String, i64>) -> bool {
        let counted_before =
            seen.iter().filter(|(id, ctime)| **ctime == self.ms && !self.found.contains_key(*id)).count();
        let mut matching: HashMap<[Option<&str>; 3], usize> = HashMap::new();
        for bill in found {
            // A bill answers the query of every type, and those of its type, coin and symbol.
            let values = [&bill.business_type, &bill.coin, &bill.symbol].map(|value| Some(value.as_str()));
            for parts in 0..=values.len() {
                let mut key = [None; 3];
                key[..parts].copy_from_slice(&values[..parts]);
                *matching.entry(key).or_default() += 1;
            }
        }
        let exact = self.full.iter().filter(|query| query.sent == (self.ms, self.ms));
        exact
            .map(|query| query.filter.parts().map(|part| part.map(String::as_str)))
            .any(|key| matching.get(&key).copied().unwrap_or(0).saturating_add(counted_before) <= page_size as usize)
    }
}
