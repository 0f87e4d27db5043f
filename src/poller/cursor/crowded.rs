//! A crowded millisecond: one whose bill query stays full at a single millisecond, so that it is
//! split by business type, then coin, then symbol. A full answer says only that more bills match
//! than it shows, and the API has no paging below a millisecond and no way to list the business
//! types, coins and symbols an account uses: a split over the values known so far (the documented
//! types, the configured coins, every value the account's bills have shown) cannot be proven to
//! reach every bill. So every crowded millisecond is reported, once all its queries are answered:
//!
//! - **possible**: every bill found was counted, but a bill of a value never seen, or without the
//!   value (an empty coin cannot be asked for), or of a value over 64 bytes (no exchange's) or one
//!   the exchange refused as a filter, would have been missed, and nothing can tell;
//! - **certain**: a full answer for exactly that millisecond (bounds proven inclusive) proves more
//!   bills of its filter than were found or counted there before: at least one was missed.

use super::Filter;
use crate::api::model::{Bill, BillPage};
use crate::snapshot::counters::Loss;
use std::collections::{BTreeSet, HashMap};

/// A crowded millisecond whose count is not proven complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    pub ms: i64,
    /// The business types whose queries stayed full or were refused, sorted; empty when only the
    /// query of every type did (the bills were spread over types, and one never seen may hide
    /// behind them).
    pub business_types: Vec<String>,
    /// Distinct bills of this millisecond that the queries found, all counted.
    pub bills_found: usize,
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
    /// Queries the exchange refused: their bills beyond the coarser queries' are unknown.
    refused: Vec<Filter>,
}

impl Crowded {
    pub(super) fn new(ms: i64) -> Self {
        Self { ms, found: HashMap::new(), full: Vec::new(), refused: Vec::new() }
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

    /// Takes the refusal of one of its queries: it proves nothing, and leaves its bills unknown.
    pub(super) fn refused(&mut self, filter: &Filter) {
        self.refused.push(filter.clone());
    }

    /// Once every query is answered: what its full answers leave open. `seen` holds the ids
    /// counted so far whose millisecond is not settled, with their creation times.
    pub(super) fn shortfall(&self, page_size: u32, seen: &HashMap<String, i64>) -> Shortfall {
        let proven = self.full.iter().any(|query| self.proves_uncounted(query, page_size, seen));
        let filters = self.full.iter().map(|query| &query.filter).chain(&self.refused);
        let types: BTreeSet<&str> = filters.filter_map(|filter| filter.parts()[0].map(String::as_str)).collect();
        Shortfall {
            ms: self.ms,
            business_types: types.into_iter().map(str::to_owned).collect(),
            bills_found: self.found.values().filter(|b| b.ctime_ms == self.ms).count(),
            loss: if proven { Loss::Certain } else { Loss::Possible },
        }
    }

    /// Whether a full answer sent for exactly this millisecond proves a bill that was never
    /// counted: no more than a page of bills of its filter were found or counted before (ids
    /// counted before, whose values are not kept, are taken to match).
    fn proves_uncounted(&self, query: &FullQuery, page_size: u32, seen: &HashMap<String, i64>) -> bool {
        if query.sent != (self.ms, self.ms) {
            return false;
        }
        let found = self.found.values().filter(|b| b.ctime_ms == self.ms);
        let matching = found.filter(|b| query.filter.mismatch(&b.business_type, &b.coin, &b.symbol).is_none()).count();
        let counted_before =
            seen.iter().filter(|(id, ctime)| **ctime == self.ms && !self.found.contains_key(*id)).count();
        matching.saturating_add(counted_before) <= page_size as usize
    }
}
