//! What an account's polls have learned: the bill cursor, the counters and the last answers of
//! the account query. Changed only by answers, free of I/O, so a poll can be driven by anything:
//! the poller by the exchange, the fuzz target by arbitrary bytes.

use super::cursor::{Accepted, BillCursor, CursorState, Shortfall};
use super::ledger::{Changed, Ledger};
use super::{Checkpoint, PollSettings};
use crate::api::fields::DecodeProblem;
use crate::api::model::{AccountInfo, BillPage, MAX_PAGE};
use crate::api::BillQuery;
use crate::snapshot::counters::{BillCounters, MAX_LABEL_BYTES};
use crate::snapshot::stats::AccountStats;
use crate::snapshot::AccountSnapshot;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a bill that does not answer its query is reported as.
const UNMATCHED: &str = "does not match the query it answers; the bill is ignored";
/// What a bill shown again at another creation time is reported as.
const MOVED: &str = "a bill id counted before, shown again at another creation time; counted once while its id is kept";
/// What a value the cursor could not remember is reported as.
const UNREMEMBERED: &str =
    "counted, but not remembered for splitting crowded milliseconds (too long, or past the number of values kept)";

/// What one bill answer brought.
#[derive(Debug, Default, PartialEq)]
pub struct Counted {
    /// The ids of the bills this answer counted, in its order.
    pub new_bill_ids: Vec<String>,
    /// Values of new bills not counted as they are: left out of a sum they would have taken
    /// out of range, or a coin or business type past the limit, counted as `other`.
    pub miscounted: Vec<DecodeProblem>,
    /// Bills ignored because they do not answer the query, by the field that does not match.
    pub unmatched: Vec<DecodeProblem>,
    /// Values of the answer's bills the cursor could not remember.
    pub unremembered: Vec<DecodeProblem>,
    /// Bills whose id was counted before at another creation time.
    pub moved: Vec<DecodeProblem>,
    pub shortfall: Option<Shortfall>,
}

#[derive(Debug, Clone)]
pub struct PollState {
    overlap_ms: i64,
    backfill_ms: i64,
    /// Coin names of the configured coin ids: a crowded millisecond is split over them too.
    configured_coins: Vec<String>,
    /// `None` until the first bill scan of a fresh start: counting starts then, by the
    /// exchange's clock as the first answers corrected it, not this machine's.
    cursor: Option<BillCursor>,
    /// Whether the cursor was restored and not yet checked against the exchange's clock.
    restored_unchecked: bool,
    /// Another exchange account than the counts are of, named in this many polls in a row.
    other_account: Option<(String, u32)>,
    /// Whether an answer of this poll named the other account already (it counts once a poll).
    other_named_this_poll: bool,
    /// When this poll's first account answer was asked for, by the exchange's clock: a fresh
    /// count starts there, so that the answer can begin the ledger check.
    poll_asked_ms: Option<i64>,
    /// Shared with the published snapshot: copied on write, only when bills arrive.
    counters: Arc<BillCounters>,
    /// Shared with the checkpoint between polls: copied on write.
    ledger: Arc<Ledger>,
    /// The polled coins by name, as bills give it, for the ledger check.
    coin_ids_by_name: BTreeMap<String, u64>,
    /// Shared with the published snapshots: each answer is held once, however many read it.
    coins: BTreeMap<u64, Arc<AccountInfo>>,
    /// When each coin's figures were last fetched (this machine's clock, ms).
    fetched_at_ms: BTreeMap<u64, i64>,
}

/// The exchange account whose bills were counted under a name, and the one they are now counted
/// of, afresh.
#[derive(Debug, PartialEq, Eq)]
pub struct AccountChange {
    pub counted: String,
    pub now: String,
}

/// In how many polls in a row answers must name another exchange account than the counts are
/// of before they begin afresh for it (see [`PollState::claim_account`]).
const POLLS_TO_CHANGE_ACCOUNT: u32 = 3;

impl PollState {
    /// Continues from `checkpoint`, showing the figures of `published` until new ones arrive;
    /// those of coins no longer in `coin_ids` go, since nothing would ever replace them.
    pub fn new(checkpoint: Checkpoint, published: &AccountSnapshot, settings: &PollSettings, coin_ids: &[u64]) -> Self {
        let coin_ids_by_name: BTreeMap<String, u64> =
            coin_ids.iter().filter_map(|id| Some((settings.coins.name(*id)?.to_owned(), *id))).collect();
        let configured_coins = coin_ids_by_name.keys().cloned().collect();
        let mut ledger = checkpoint.ledger;
        Arc::make_mut(&mut ledger).retain_coins(&coin_ids_by_name.values().copied().collect::<Vec<_>>());
        let mut state = Self {
            overlap_ms: millis(settings.overlap),
            backfill_ms: millis(settings.backfill),
            configured_coins,
            cursor: None,
            restored_unchecked: checkpoint.cursor.is_some(),
            other_account: None,
            other_named_this_poll: false,
            poll_asked_ms: None,
            counters: checkpoint.counters,
            ledger,
            coin_ids_by_name,
            coins: only_coins(&published.coins, coin_ids),
            fetched_at_ms: only_coins(&published.fetched_at_ms, coin_ids),
        };
        state.cursor = checkpoint.cursor.map(|cursor| state.bill_cursor(cursor));
        state
    }

    /// Takes a coin's account answer, fetched at `now_ms` by this machine's clock and asked for
    /// at `asked_at_ms` by the exchange's. Returns the exchange accounts the counts were of and
    /// are of now, when they begin afresh for another (see `claim_account`).
    pub fn take_account(
        &mut self,
        coin: u64,
        info: AccountInfo,
        now_ms: i64,
        asked_at_ms: i64,
    ) -> Option<AccountChange> {
        self.poll_asked_ms.get_or_insert(asked_at_ms);
        let named = info.account.as_ref().and_then(|account| account.fields.id.clone());
        let replaced = named.and_then(|id| self.claim_account(id));
        let info = with_coin_id(info, coin);
        // Bills name their coin: a coin without a name has no bills to compare with. An answer
        // that may be another account's would set the ledger's baseline wrong.
        if self.coin_ids_by_name.values().any(|id| *id == coin) && self.other_account.is_none() {
            Arc::make_mut(&mut self.ledger).observe(coin, &info, asked_at_ms);
        }
        self.coins.insert(coin, Arc::new(info));
        self.fetched_at_ms.insert(coin, now_ms);
        replaced
    }

    /// Begins a poll: the other account's polls in a row are counted once each.
    pub fn begin_poll(&mut self) {
        self.other_named_this_poll = false;
        self.poll_asked_ms = None;
    }

    /// Records whose bills are counted. Counts of another exchange account (its credentials now
    /// under this name, by a mistake in the accounts file) are not added to: once answers name
    /// the other account in [`POLLS_TO_CHANGE_ACCOUNT`] polls in a row, the counts, cursor and
    /// ledger check begin afresh from now (the backfill is a first start's). Until then the bill
    /// scan waits ([`Self::account_in_doubt`]), so that one odd answer changes nothing.
    fn claim_account(&mut self, id: String) -> Option<AccountChange> {
        // No account is named by an empty or zero id; one longer than a label would be refused by
        // the state file's reader.
        if id.is_empty() || id == "0" || id.len() > MAX_LABEL_BYTES {
            return None;
        }
        let Some(counted) = self.counters.exchange_account_id.clone() else {
            Arc::make_mut(&mut self.counters).exchange_account_id = Some(id);
            return None;
        };
        if counted == id {
            self.other_account = None;
            return None;
        }
        let polls = match self.other_account.take() {
            Some((other, polls)) if other == id && self.other_named_this_poll => polls,
            Some((other, polls)) if other == id => polls.saturating_add(1),
            _ => 1,
        };
        self.other_named_this_poll = true;
        if polls < POLLS_TO_CHANGE_ACCOUNT {
            self.other_account = Some((id, polls));
            return None;
        }
        self.cursor = None;
        self.restored_unchecked = false;
        self.backfill_ms = 0;
        self.ledger = Arc::default();
        self.counters = Arc::new(BillCounters { exchange_account_id: Some(id.clone()), ..BillCounters::default() });
        Some(AccountChange { counted, now: id })
    }

    /// The other exchange account the last answers named, while the counts are not yet taken
    /// for its: bills are not scanned meanwhile.
    pub fn account_in_doubt(&self) -> Option<String> {
        self.other_account.as_ref().map(|(id, _)| id.clone())
    }

    /// Starts a bill scan up to `now_ms` by the exchange's clock, unless one is in progress;
    /// the first scan of a fresh start counts from when this poll's first answer was asked for
    /// (or `now_ms`), minus the backfill. From the answer, not the scan: a bill booked between
    /// the two is in every later running total, and must be counted for the ledger check to
    /// begin with that answer. The first scan of a restored cursor returns its settled point if
    /// it moved it back from the future (see [`BillCursor::bring_back_from_the_future`]); only
    /// then, by the clock the first answers corrected, so that a later step of the clock cannot
    /// take it back.
    pub fn start_bill_scan(&mut self, now_ms: i64) -> Option<i64> {
        // Not before 1970, whatever the backfill, so that the settled point (one before) stays a
        // time the state file takes back.
        let from_ms = self.poll_asked_ms.map_or(now_ms, |asked| asked.min(now_ms));
        let start = CursorState::counting_from(from_ms.saturating_sub(self.backfill_ms).max(1));
        let fresh = self.cursor.is_none();
        let cursor = match &mut self.cursor {
            Some(cursor) => cursor,
            None => self.cursor.insert(self.bill_cursor(start)),
        };
        // Not before the first scan of a fresh start is done: the bills of a backfill are
        // history, and the watched flows they start would be taken for new bills.
        let counting = !fresh && !cursor.pass_in_progress();
        let moved =
            std::mem::take(&mut self.restored_unchecked).then(|| cursor.bring_back_from_the_future(now_ms)).flatten();
        if fresh || moved.is_some() {
            let since = cursor.state().settled_through.saturating_add(1);
            Arc::make_mut(&mut self.counters).counting_since_ms = Some(since);
            Arc::make_mut(&mut self.ledger).count_from(since);
        }
        cursor.start_poll(now_ms);
        if counting {
            self.show_watched_flows();
        }
        moved
    }

    /// Shows the flows the shipped alerts watch for every configured coin with a name, from zero
    /// where no bill moved them yet (see [`BillCounters::show_watched_flows`]).
    fn show_watched_flows(&mut self) {
        if self.configured_coins.iter().all(|coin| self.counters.shows_watched_flows(coin)) {
            return; // the counters shared with the snapshot stay as they are
        }
        let counters = Arc::make_mut(&mut self.counters);
        for coin in &self.configured_coins {
            counters.show_watched_flows(coin);
        }
    }

    /// The first millisecond whose bills are not final yet (on a fresh start: where counting
    /// starts); `None` before counting starts.
    pub fn unsettled_from_ms(&self) -> Option<i64> {
        self.cursor.as_ref().map(|cursor| cursor.state().settled_through.saturating_add(1))
    }

    pub fn next_bill_query(&self) -> Option<BillQuery> {
        self.cursor.as_ref()?.next_query()
    }

    /// Takes the answer to the query [`Self::next_bill_query`] returned last.
    pub fn take_bills(&mut self, page: &BillPage) -> Counted {
        let Some(cursor) = &mut self.cursor else { return Counted::default() };
        let accepted = cursor.accept(page);
        // Not in the first scan of a count: a backfill's bills are history until it ends (the
        // watched flows show from then on, and the alerts take a cursor still where counting
        // began for a backfill under way).
        if self.counters.counting_since_ms.is_some_and(|since| cursor.state().settled_through >= since) {
            cursor.settle_covered();
        }
        self.count(accepted)
    }

    /// Gives up the bill query asked last, which the exchange refused as invalid, when the cursor
    /// can do without it (see [`BillCursor::give_up_refused`]); `None` when it cannot.
    pub fn give_up_refused_bill_query(&mut self) -> Option<Counted> {
        let accepted = self.cursor.as_mut()?.give_up_refused()?;
        Some(self.count(accepted))
    }

    /// Counts what one answer to the cursor brought.
    fn count(&mut self, accepted: Accepted) -> Counted {
        let problems = |fields: &[&'static str], detail| {
            fields.iter().map(|field| DecodeProblem { record: "bill", field: (*field).into(), detail }).collect()
        };
        let unmatched = problems(&accepted.unmatched, UNMATCHED);
        let unremembered = problems(&accepted.unremembered, UNREMEMBERED);
        let moved = problems(&accepted.moved, MOVED);
        if accepted.new_bills.is_empty() && accepted.shortfall.is_none() {
            // The counters shared with the snapshot stay as they are.
            return Counted { unmatched, unremembered, moved, ..Counted::default() };
        }
        let counters = Arc::make_mut(&mut self.counters);
        let miscounted = accepted.new_bills.iter().flat_map(|bill| counters.count(bill)).collect();
        for bill in &accepted.new_bills {
            if let Some(coin_id) = self.coin_ids_by_name.get(&bill.coin) {
                Arc::make_mut(&mut self.ledger).count(bill, *coin_id);
            }
        }
        if let Some(shortfall) = &accepted.shortfall {
            counters.note_shortfall(shortfall.loss);
        }
        let new_bill_ids = accepted.new_bills.iter().map(|bill| bill.id.clone()).collect();
        Counted { new_bill_ids, miscounted, unmatched, unremembered, moved, shortfall: accepted.shortfall }
    }

    /// Whether the bill scan stopped before its end (it resumes at the next scan).
    pub fn bill_scan_in_progress(&self) -> bool {
        self.cursor.as_ref().is_some_and(BillCursor::pass_in_progress)
    }

    /// Compares the running totals of every answer dated up to the settled point with the
    /// bills; returns the differences that changed.
    pub fn compare_ledger(&mut self) -> Vec<Changed> {
        match &self.cursor {
            Some(cursor) => Arc::make_mut(&mut self.ledger).settle(cursor.state().settled_through),
            None => Vec::new(),
        }
    }

    /// The cursor, counters and ledger, consistent with each other between two polls.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            cursor: self.cursor.as_ref().map(|c| c.state().clone()),
            counters: self.counters.clone(),
            ledger: self.ledger.clone(),
            ..Checkpoint::default()
        }
    }

    pub fn snapshot(&self, up: bool, stats: Arc<AccountStats>) -> AccountSnapshot {
        AccountSnapshot {
            coins: self.coins.clone(),
            fetched_at_ms: self.fetched_at_ms.clone(),
            counters: self.counters.clone(),
            settled_through_ms: self.cursor.as_ref().map_or(0, |c| c.state().settled_through),
            ledger: self.ledger.differences(),
            up,
            stats,
        }
    }

    fn bill_cursor(&self, state: CursorState) -> BillCursor {
        BillCursor::resume(state, self.overlap_ms, MAX_PAGE).with_configured_coins(self.configured_coins.clone())
    }
}

fn only_coins<T: Clone>(by_coin: &BTreeMap<u64, T>, coin_ids: &[u64]) -> BTreeMap<u64, T> {
    by_coin.iter().filter(|(coin, _)| coin_ids.contains(coin)).map(|(coin, value)| (*coin, value.clone())).collect()
}

fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Records without a readable `coin_id` take the coin they were queried for, so that they keep
/// a `coin_id` label and two coins' records cannot collide.
fn with_coin_id(mut info: AccountInfo, coin: u64) -> AccountInfo {
    let coin = || Some(coin.to_string());
    for collateral in info.collateral.iter_mut().filter(|c| c.coin_id.is_none()) {
        collateral.coin_id = coin();
    }
    for position in info.positions.iter_mut().filter(|p| p.coin_id.is_none()) {
        position.coin_id = coin();
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::model::{Collateral, Position};

    #[test]
    fn a_missing_coin_id_is_the_queried_coin_and_a_present_one_stays() {
        let info = AccountInfo {
            collateral: vec![Collateral::default(), Collateral { coin_id: Some("9".into()), ..Collateral::default() }],
            positions: vec![Position::default()],
            ..AccountInfo::default()
        };
        let info = with_coin_id(info, 2);
        assert_eq!(info.collateral[0].coin_id.as_deref(), Some("2"));
        assert_eq!(info.collateral[1].coin_id.as_deref(), Some("9"));
        assert_eq!(info.positions[0].coin_id.as_deref(), Some("2"));
    }

    #[test]
    fn figures_of_coins_no_longer_polled_are_not_carried_over() {
        let info = Arc::new(AccountInfo::default());
        let published = AccountSnapshot {
            coins: [(1, info.clone()), (2, info)].into(),
            fetched_at_ms: [(1, 1_000), (2, 1_000)].into(),
            ..AccountSnapshot::default()
        };
        let snapshot =
            PollState::new(Checkpoint::default(), &published, &settings(), &[2]).snapshot(true, Arc::default());
        assert_eq!(snapshot.coins.keys().collect::<Vec<_>>(), [&2]);
        assert_eq!(snapshot.fetched_at_ms.keys().collect::<Vec<_>>(), [&2], "no age of a coin never fetched again");
    }

    #[test]
    fn only_the_first_scan_of_a_restored_cursor_brings_it_back_from_the_future() {
        let restored = |through_ms| Checkpoint {
            cursor: Some(CursorState::counting_from(through_ms + 1_i64)),
            ..Checkpoint::default()
        };
        let since = |state: &PollState| state.checkpoint().counters.counting_since_ms;
        let mut ahead = PollState::new(restored(500_000), &AccountSnapshot::default(), &settings(), &[2]);
        assert_eq!(ahead.start_bill_scan(100_000), Some(500_000));
        let latest_possible = 100_000 + crate::api::clock::UNCORRECTED_LAG_MS;
        assert_eq!(ahead.unsettled_from_ms(), Some(latest_possible + 1));
        assert_eq!(since(&ahead), Some(latest_possible + 1), "bills before it were passed over");
        let mut state = PollState::new(restored(100_000), &AccountSnapshot::default(), &settings(), &[2]);
        assert_eq!(state.start_bill_scan(200_000), None);
        assert_eq!(since(&state), None, "a resumed count goes on from where it began");
        state.take_bills(&BillPage { has_next_page: false, items: Vec::new() });
        assert_eq!(state.unsettled_from_ms(), Some(140_001), "settled through the pass's start less the overlap");
        // The exchange's clock as estimated steps back by more than the overlap.
        assert_eq!(state.start_bill_scan(10_000), None);
        assert_eq!(state.unsettled_from_ms(), Some(140_001), "nothing counted is scanned again");
    }

    #[test]
    fn counts_of_another_exchange_account_begin_afresh_and_their_own_go_on() {
        use crate::api::model::{Account, AccountFields};
        let named = |id: &str| AccountInfo {
            account: Some(Account {
                fields: AccountFields { id: Some(id.into()), ..AccountFields::default() },
                ..Account::default()
            }),
            ..AccountInfo::default()
        };
        let mut state = PollState::new(Checkpoint::default(), &AccountSnapshot::default(), &settings(), &[2]);
        assert_eq!(state.take_account(2, named("41"), 0, 1_000), None, "the first answer names whose bills they are");
        state.start_bill_scan(100_000);
        Arc::make_mut(&mut state.counters).bills.insert(("USDT".into(), "deposit".into()), 3);
        assert_eq!(state.take_account(2, named("41"), 0, 101_000), None);
        assert_eq!(state.checkpoint().counters.bills.len(), 1, "the same account's counts go on");
        // One odd answer changes nothing, but holds the bill scan; three polls in a row begin
        // afresh, however many coins' answers each poll has.
        state.begin_poll();
        assert_eq!(state.take_account(2, named("42"), 0, 102_000), None);
        assert_eq!(state.account_in_doubt().as_deref(), Some("42"));
        assert_eq!(state.take_account(2, named(""), 0, 102_000), None, "an empty id names no account");
        assert_eq!(state.take_account(2, named("41"), 0, 102_000), None);
        assert_eq!((state.account_in_doubt(), state.checkpoint().counters.bills.len()), (None, 1));
        for _ in 0..2 {
            state.begin_poll();
            for _ in 0..3 {
                assert_eq!(state.take_account(2, named("42"), 0, 102_000), None, "three coins, one poll");
            }
        }
        state.begin_poll();
        let change = AccountChange { counted: "41".into(), now: "42".into() };
        assert_eq!(state.take_account(2, named("42"), 0, 102_000), Some(change));
        let counters = state.checkpoint().counters;
        assert!(counters.bills.is_empty() && counters.counting_since_ms.is_none(), "{counters:?}");
        assert_eq!(counters.exchange_account_id.as_deref(), Some("42"));
        assert_eq!(state.unsettled_from_ms(), None, "the cursor too: counting begins at the next scan");
        let long = "4".repeat(MAX_LABEL_BYTES + 1);
        assert_eq!(state.take_account(2, named(&long), 0, 103_000), None, "an id too long to save is not taken");
    }

    /// A USDT deposit of no amount.
    fn deposit(id: i64, ctime_ms: i64) -> crate::api::model::Bill {
        crate::api::model::Bill {
            id: id.to_string(),
            coin: "USDT".into(),
            business_type: "deposit".into(),
            symbol: String::new(),
            amount: None,
            balance: None,
            fill_fee: None,
            ctime_ms,
        }
    }

    #[test]
    fn a_bill_shown_again_at_another_creation_time_is_counted_once_and_reported() {
        let settings = PollSettings { backfill: std::time::Duration::from_secs(60), ..settings() };
        let mut state = PollState::new(Checkpoint::default(), &AccountSnapshot::default(), &settings, &[2]);
        state.start_bill_scan(100_000);
        let counted =
            state.take_bills(&BillPage { has_next_page: false, items: vec![deposit(7, 90_000), deposit(7, 95_000)] });
        assert_eq!(counted.new_bill_ids, ["7"]);
        let moved = DecodeProblem { record: "bill", field: "cTime".into(), detail: MOVED };
        assert_eq!(counted.moved, [moved]);
    }

    #[test]
    fn a_scan_settles_as_it_goes_once_the_first_scan_of_the_count_is_done() {
        let full = BillPage { has_next_page: true, items: (0..100).map(|i| deposit(i, 3_950_000 + i)).collect() };
        let rest = |items| BillPage { has_next_page: false, items };
        let settings = PollSettings { backfill: std::time::Duration::from_secs(3_600), ..settings() };
        let mut state = PollState::new(Checkpoint::default(), &AccountSnapshot::default(), &settings, &[2]);
        state.start_bill_scan(4_000_000);
        state.take_bills(&full);
        state.take_bills(&rest(Vec::new()));
        assert_eq!(state.unsettled_from_ms(), Some(400_000), "a backfill's bills are history until its scan ends");
        state.take_bills(&rest(full.items.clone()));
        assert_eq!(state.unsettled_from_ms(), Some(3_940_001));

        state.start_bill_scan(4_015_000);
        state.take_bills(&full);
        state.take_bills(&rest(Vec::new()));
        assert!(state.bill_scan_in_progress());
        assert_eq!(state.unsettled_from_ms(), Some(3_955_001), "covered, and an overlap old at the scan's start");
    }

    #[test]
    fn a_backfill_beyond_1970_counts_from_1970() {
        let settings = PollSettings { backfill: std::time::Duration::from_secs(100 * 365 * 86_400), ..settings() };
        let mut state = PollState::new(Checkpoint::default(), &AccountSnapshot::default(), &settings, &[2]);
        state.start_bill_scan(1_700_000_000_000);
        assert_eq!(state.unsettled_from_ms(), Some(1));
        assert_eq!(state.checkpoint().counters.counting_since_ms, Some(1), "where counting began");
    }

    #[test]
    fn the_watched_flows_are_shown_from_zero_once_the_first_scan_is_done() {
        use crate::api::model::Bill;
        use crate::snapshot::counters::Direction;
        let settings = PollSettings { backfill: std::time::Duration::from_secs(3_600), ..settings() };
        let mut state = PollState::new(Checkpoint::default(), &AccountSnapshot::default(), &settings, &[2]);
        let funding = Bill {
            id: "1".into(),
            coin: "USDT".into(),
            business_type: "position_funding".into(),
            symbol: "cmt_btcusdt".into(),
            amount: Some(rust_decimal::Decimal::new(-5, 1)),
            balance: None,
            fill_fee: None,
            ctime_ms: 50_000_000,
        };
        let shown = |state: &PollState| {
            let counters = state.checkpoint().counters;
            (counters.amounts.len(), counters.fill_fees.len())
        };
        state.start_bill_scan(51_000_000);
        state.take_bills(&BillPage { has_next_page: true, items: vec![funding] });
        state.start_bill_scan(51_015_000);
        assert_eq!(shown(&state), (1, 0), "the backfill's history is still being scanned");
        while state.next_bill_query().is_some() {
            state.take_bills(&BillPage { has_next_page: false, items: Vec::new() });
        }
        state.start_bill_scan(51_030_000);
        assert_eq!(shown(&state), (2, 8), "funding both ways, and fees of both signs of four trade types");
        let counters = state.checkpoint().counters;
        let out = ("USDT".to_string(), "position_funding".to_string(), Direction::Out);
        assert_eq!(counters.amounts[&out], rust_decimal::Decimal::new(5, 1), "a counted sum stays as it is");
        assert!(counters.bills.len() == 1 && counters.fill_fees.values().all(|fee| fee.is_zero()));

        // A restored cursor resumes counting: they are shown at its first scan.
        let checkpoint = Checkpoint { cursor: Some(CursorState::counting_from(51_000_000)), ..Checkpoint::default() };
        let mut restored = PollState::new(checkpoint, &AccountSnapshot::default(), &settings, &[2]);
        restored.start_bill_scan(51_015_000);
        assert_eq!(shown(&restored), (2, 8));
    }

    fn settings() -> PollSettings {
        PollSettings {
            interval: std::time::Duration::from_secs(15),
            overlap: std::time::Duration::from_secs(60),
            backfill: std::time::Duration::ZERO,
            bill_queries_per_poll: 8,
            coins: crate::api::Coins::default(),
        }
    }

    /// The deposits' running total of a coin in an account answer.
    fn deposited(coin_id: u64, total: i64) -> AccountInfo {
        AccountInfo {
            collateral: vec![Collateral {
                coin_id: Some(coin_id.to_string()),
                cum_deposit_amount: Some(rust_decimal::Decimal::from(total)),
                ..Collateral::default()
            }],
            ..AccountInfo::default()
        }
    }

    /// Runs a bill scan at `now_ms` that finds nothing, and compares.
    fn scan_nothing(state: &mut PollState, now_ms: i64) {
        state.start_bill_scan(now_ms);
        state.take_bills(&BillPage { has_next_page: false, items: Vec::new() });
        state.compare_ledger();
    }

    #[test]
    fn a_fresh_count_starts_at_the_first_answer_so_that_the_ledger_check_begins_with_it() {
        // The first answers come before the first scan. A deposit of 5 booked at 1_080, between
        // the answer and the scan, is in the later totals: counted, the two views agree.
        let mut state = PollState::new(Checkpoint::default(), &AccountSnapshot::default(), &settings(), &[2]);
        state.begin_poll();
        state.take_account(2, deposited(2, 100), 0, 1_000);
        state.start_bill_scan(1_120);
        let deposit = crate::api::model::Bill {
            id: "1".into(),
            coin: "USDT".into(),
            business_type: "deposit".into(),
            symbol: String::new(),
            amount: Some(rust_decimal::Decimal::from(5)),
            balance: None,
            fill_fee: None,
            ctime_ms: 1_080,
        };
        state.take_bills(&BillPage { has_next_page: false, items: vec![deposit] });
        state.compare_ledger();
        assert_eq!(state.checkpoint().counters.counting_since_ms, Some(1_000));
        state.begin_poll();
        state.take_account(2, deposited(2, 105), 0, 16_000);
        scan_nothing(&mut state, 100_000);
        let ledger = state.snapshot(true, Default::default()).ledger;
        assert_eq!(ledger.get(&(2, "cum_deposit_amount")), Some(&rust_decimal::Decimal::ZERO), "{ledger:?}");
        assert_eq!(state.checkpoint().counters.bills.values().sum::<u64>(), 1);
    }

    #[test]
    fn an_answer_of_a_poll_before_counting_began_does_not_begin_the_ledger_check() {
        // The first poll answers for BTC, then gets a 429: no scan. The second answers for USDT
        // alone and counts from then. A BTC deposit of 5 booked at 8_000 is in BTC's later
        // totals but was never counted: the first poll's answer cannot begin BTC's check.
        let settings = PollSettings { coins: crate::api::Coins::default().with([(1, "BTC".into())]), ..settings() };
        let mut state = PollState::new(Checkpoint::default(), &AccountSnapshot::default(), &settings, &[1, 2]);
        state.begin_poll();
        state.take_account(1, deposited(1, 100), 0, 1_000);
        state.begin_poll();
        state.take_account(2, deposited(2, 50), 0, 16_000);
        scan_nothing(&mut state, 16_100);
        state.begin_poll();
        state.take_account(1, deposited(1, 105), 0, 31_000);
        state.take_account(2, deposited(2, 50), 0, 31_000);
        scan_nothing(&mut state, 100_000);
        let ledger = state.snapshot(true, Default::default()).ledger;
        assert_eq!(ledger.get(&(1, "cum_deposit_amount")), Some(&rust_decimal::Decimal::ZERO), "{ledger:?}");
    }

    #[test]
    fn only_coins_with_a_name_are_compared_with_their_bills() {
        let mut state = PollState::new(Checkpoint::default(), &AccountSnapshot::default(), &settings(), &[2, 9]);
        let answer = |coin: &str| AccountInfo {
            collateral: vec![Collateral {
                coin_id: Some(coin.into()),
                cum_deposit_amount: Some(rust_decimal::Decimal::ONE),
                ..Collateral::default()
            }],
            ..AccountInfo::default()
        };
        state.take_account(2, answer("2"), 0, 1_000);
        state.take_account(9, answer("9"), 0, 1_000);
        state.start_bill_scan(100_000);
        assert_eq!(state.compare_ledger().len(), 1);
        let compared: Vec<(u64, &str)> = state.snapshot(true, Default::default()).ledger.into_keys().collect();
        assert_eq!(compared, [(2, "cum_deposit_amount")], "coin 9 has no name: its bills could not be told");
    }
}
