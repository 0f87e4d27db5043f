//! The ledger check: the exchange's own running totals against the bills counted.
//!
//! Every collateral record carries running totals (`cum_deposit_amount`, ...) and the bill
//! history lists the entries of the business types with the same names. If every bill is
//! counted, the change of a running total since the comparison began equals the sum of the
//! counted bills of its type (all fill fees for `cum_position_fill_fee_amount`). The difference
//! is published per account, coin and field: 0 when the two views agree.
//!
//! Only settled time is compared. An account answer is dated by the exchange's clock (the
//! latest `updated_time` of the coin's records, or the request's time if later) and waits until
//! the bill cursor has settled through that time: by then every bill created up to it is final
//! in the counters, so a late bill cannot make a difference that then goes away. Bills are kept
//! by creation millisecond until the answer they belong to is compared.
//!
//! The API does not say whether a withdrawal total grows while its bills are negative, or
//! whether funding is kept signed. So each side is first taken by its magnitude: `|change of the
//! total| - |signed sum of its bills|`, which holds for a total that follows the signed sum of its
//! bills or its negative, and for one that adds the magnitudes of bills that share one sign.
//! Comparisons where the two agree, with bills summing to something other than zero, show which
//! way each side runs (two of them, see `Signs`): from then on each is taken with its sign. For
//! a type whose bills have one sign nothing changes; for funding and fill fees (paid and
//! received), a missed bill then shows as its exact amount, where by magnitude a few could
//! cancel out.
//!
//! Several records of one coin (isolated positions have their own) are compared as one: a record
//! that appears after the comparison began counts from zero when it was created since; one that
//! disappears keeps what it had moved by the last answer that showed it, and resumes from there if
//! it comes back (a record left out of one answer would otherwise lose, or count twice, what it
//! moved meanwhile). A record shown under a known key with a later creation time is a new record.
//!
//! Free of I/O, like the cursor: it is driven by answers and saved with them in the state file.

use crate::api::model::{AccountInfo, Bill, Collateral};
use crate::snapshot::LedgerDifferences as Differences;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

/// What a running total follows: the amounts of one business type, or every bill's fill fee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Follows {
    Amount(&'static str),
    FillFee,
}

/// A running total of the collateral record, and the bills it follows.
struct RunningTotal {
    field: &'static str,
    read: fn(&Collateral) -> Option<Decimal>,
    follows: Follows,
}

/// `field => what it follows,` for each running total: its name is the collateral record's field.
macro_rules! running_totals {
    ($($field:ident => $follows:expr,)*) => {
        [$(RunningTotal { field: stringify!($field), read: |c| c.$field, follows: $follows },)*]
    };
}

/// Every running total with a bill type of its own. `cum_position_liquidate_fee_amount` has none
/// (a liquidation fee is no business type of the bill query) and is left out.
const RUNNING_TOTALS: [RunningTotal; 14] = running_totals! {
    cum_deposit_amount => Follows::Amount("deposit"),
    cum_withdraw_amount => Follows::Amount("withdraw"),
    cum_transfer_in_amount => Follows::Amount("transfer_in"),
    cum_transfer_out_amount => Follows::Amount("transfer_out"),
    cum_margin_move_in_amount => Follows::Amount("margin_move_in"),
    cum_margin_move_out_amount => Follows::Amount("margin_move_out"),
    cum_position_open_long_amount => Follows::Amount("position_open_long"),
    cum_position_open_short_amount => Follows::Amount("position_open_short"),
    cum_position_close_long_amount => Follows::Amount("position_close_long"),
    cum_position_close_short_amount => Follows::Amount("position_close_short"),
    cum_position_funding_amount => Follows::Amount("position_funding"),
    cum_position_fill_fee_amount => Follows::FillFee,
    cum_order_fill_fee_income_amount => Follows::Amount("order_fill_fee_income"),
    cum_order_liquidate_fee_income_amount => Follows::Amount("order_liquidate_fee_income"),
};

/// The names of the running totals compared, as the `field` label shows them.
pub fn fields() -> impl Iterator<Item = &'static str> {
    RUNNING_TOTALS.iter().map(|total| total.field)
}

/// Answers kept waiting to settle. When they are this many, a newer answer is not taken: the
/// oldest settle first, and one pushed out before it settled, by answers that come as fast,
/// would leave the comparison waiting for as long as they come. The comparisons of a long wait
/// (a deferred bill scan) are then of fewer answers, none of them lost.
const MAX_PENDING: usize = 256;

/// The records the answers kept waiting may hold together (about 350 bytes each): beyond, a
/// newer answer is not taken, as beyond [`MAX_PENDING`]. An account shows a few a coin; an answer
/// of thousands (the decoder takes up to 10,000) waits alone, where 256 of them would hold 860 MB.
const MAX_PENDING_RECORDS: usize = 4_096;

/// How far a record's `updated_time` may be ahead of the request's time by this machine's idea of
/// the exchange's clock, which is off by up to its 30 s window (more until a rejected timestamp
/// corrects it): a day, as far as a learned clock offset goes.
const MAX_AHEAD_MS: i64 = 86_400_000;

/// Records no longer shown that are kept, per coin, to resume if they come back (about 600 bytes
/// each: 10 KB a coin at most, and only for accounts that closed as many isolated positions).
/// Beyond, the longest hidden isolated position's record is folded into what gone records moved,
/// since a closed position's record never comes back; only if there is none, the longest hidden.
/// A record folded and then shown again starts afresh, which counts what it moved wrong.
const MAX_HIDDEN: usize = 16;

/// A value per running total, in the order of [`RUNNING_TOTALS`]: a fixed array, since a
/// map keyed by field names took a quarter of the exporter's memory at 1,000 accounts. Saved as
/// a map from field name to value; a name that is no running total is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PerTotal<T>([Option<T>; RUNNING_TOTALS.len()]);

/// A sum per running total.
type Totals = PerTotal<Decimal>;

impl<T> Default for PerTotal<T> {
    fn default() -> Self {
        Self(std::array::from_fn(|_| None))
    }
}

impl<T: Copy> PerTotal<T> {
    fn values(&self) -> impl Iterator<Item = (usize, T)> + '_ {
        self.0.iter().enumerate().filter_map(|(i, value)| Some((i, (*value)?)))
    }
}

impl Totals {
    /// Each running total a record shows.
    fn of(collateral: &Collateral) -> Self {
        Self(RUNNING_TOTALS.map(|total| (total.read)(collateral)))
    }

    /// Adds to a sum. Saturating: values near the decimal range's end are not the exchange's,
    /// and a sum pinned there shows as a difference rather than a panic.
    fn add(&mut self, i: usize, value: Decimal) {
        let sum = self.0[i].get_or_insert_default();
        *sum = sum.saturating_add(value);
    }

    fn add_all(&mut self, other: &Totals) {
        for (i, value) in other.values() {
            self.add(i, value);
        }
    }
}

impl<T: Copy + Serialize> Serialize for PerTotal<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.values().map(|(i, value)| (RUNNING_TOTALS[i].field, value)))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for PerTotal<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut per_total = PerTotal::default();
        for (field, value) in BTreeMap::<String, T>::deserialize(deserializer)? {
            let Some(i) = RUNNING_TOTALS.iter().position(|total| total.field == field) else {
                return Err(serde::de::Error::custom(format!("{field:?} is no running total this exporter compares")));
            };
            per_total.0[i] = Some(value);
        }
        Ok(per_total)
    }
}

/// Which way a value runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Sign {
    #[serde(rename = "+")]
    Up,
    #[serde(rename = "-")]
    Down,
}

impl Sign {
    /// Down for a value below zero.
    fn of(value: Decimal) -> Self {
        if value.is_sign_negative() && !value.is_zero() {
            Sign::Down
        } else {
            Sign::Up
        }
    }

    /// `value` times this sign (never overflows: a decimal's range is symmetric).
    fn times(self, value: Decimal) -> Decimal {
        match self {
            Sign::Up => value,
            Sign::Down => -value,
        }
    }
}

/// Which way a running total and its bills run, as comparisons that agreed showed it: the sign
/// the total's change and the bills' sum had at the first of them. It counts once a later one
/// agrees, with another sum of bills, in the same relation (the two the same way, or opposite):
/// one agreement may be a coincidence, as when a bill booked while an answer was read makes the
/// two differ by exactly twice the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Signs {
    moved: Sign,
    bills: Sign,
    bills_then: Decimal,
    confirmed: bool,
}

impl Signs {
    /// Takes a comparison that agreed by magnitude, with bills summing to `bills` (not zero).
    fn learn(signs: &mut Option<Signs>, moved: Decimal, bills: Decimal) {
        let seen = Signs { moved: Sign::of(moved), bills: Sign::of(bills), bills_then: bills, confirmed: false };
        match signs {
            Some(known) if known.confirmed || known.bills_then == bills => {}
            Some(known) if (known.moved == known.bills) == (seen.moved == seen.bills) => known.confirmed = true,
            _ => *signs = Some(seen),
        }
    }
}

/// One account's comparison: its state is saved in the state file with the cursor and counters.
///
/// Lists, not maps, hold the coins, records and bills: there are few of each, and a B-tree
/// node holds room for eleven values, which for values of this size took 40 KB per account.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// One per coin, from its first settled answer on.
    coins: Vec<CoinLedger>,
    /// Answers not settled yet, oldest first. Not saved: after a restart the next answers take
    /// their place (the comparison then waits one overlap longer), and a state file stays small.
    #[serde(skip)]
    pending: Vec<Observation>,
    /// Counted bills not compared yet, each with its signed amount (or fee) under its totals.
    uncompared: Vec<Uncompared>,
}

/// The running totals of one coin's records in one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observation {
    coin_id: u64,
    /// By the exchange's clock, the answer's time: its comparison takes the bills created up to
    /// it (one booked just after the answer makes that comparison differ, and the next agree).
    at_ms: i64,
    /// The records' latest `updated_time`: every bill booked before the answer is up to it.
    updated_ms: Option<i64>,
    records: Vec<ObservedRecord>,
}

impl Observation {
    /// Up to when a comparison begun with this answer finds the bills in its totals already;
    /// those created later go to the comparison after it.
    fn begins_after_ms(&self) -> i64 {
        self.updated_ms.unwrap_or(self.at_ms)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ObservedRecord {
    key: String,
    created_ms: Option<i64>,
    totals: Totals,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Uncompared {
    ctime_ms: i64,
    coin_id: u64,
    totals: Totals,
}

/// One coin's comparison.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct CoinLedger {
    coin_id: u64,
    /// When the comparison began: the latest update of the first settled answer's records.
    since_ms: i64,
    /// Each record the latest answer showed: its totals when it entered the comparison, and at
    /// the latest.
    records: Vec<ComparedRecord>,
    /// Records the latest answer did not show, the longest gone first (at most [`MAX_HIDDEN`]).
    #[serde(default)]
    hidden: Vec<ComparedRecord>,
    /// What records gone beyond [`MAX_HIDDEN`], or replaced by a new record of their key, had moved
    /// by the last answer that showed them.
    gone: Totals,
    /// Signed sums of the bills counted since the comparison began, up to the latest answer.
    bills: Totals,
    /// Per running total, which way it and its bills run, once comparisons showed it.
    #[serde(default)]
    signs: PerTotal<Signs>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct ComparedRecord {
    /// Margin mode, cross contract and isolated position.
    key: String,
    /// The record's `created_time`, when an answer showed it.
    #[serde(default)]
    created_ms: Option<i64>,
    /// Created after the comparison began: every field counts from zero.
    from_zero: bool,
    start: Totals,
    latest: Totals,
}

/// A comparison whose result changed, for the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Changed {
    pub coin_id: u64,
    pub field: &'static str,
    /// `None` when the field is compared for the first time.
    pub before: Option<Decimal>,
    pub difference: Decimal,
    /// The answer compared, by the exchange's clock.
    pub at_ms: i64,
}

impl Ledger {
    /// Takes one coin's account answer, asked for at `asked_at_ms` by the exchange's clock.
    ///
    /// The answer is dated by its records' latest `updated_time`, or by the millisecond before
    /// the request if later: a bill of that very millisecond may have been booked just after the
    /// answer, while one booked before it moved `updated_time` to its own time.
    pub fn observe(&mut self, coin_id: u64, info: &AccountInfo, asked_at_ms: i64) {
        let mine = info.collateral.iter().filter(|c| c.coin_number() == Some(coin_id));
        let mut updated_ms = None;
        let mut records: Vec<ObservedRecord> = Vec::new();
        let mut keys = HashSet::new();
        for collateral in mine {
            // A record cannot have changed after the answer; a time far beyond the request (another
            // unit, a glitch) would keep the answer waiting for ever, and one before the epoch (-1
            // for "never") is no time a comparison can begin at, so neither is taken.
            let plausible = 0..=asked_at_ms.saturating_add(MAX_AHEAD_MS);
            let updated = collateral.updated_time.map(|t| t.0).filter(|t| plausible.contains(t));
            updated_ms = updated_ms.max(updated);
            let key = record_key(collateral);
            if keys.insert(key.clone()) {
                // A record listed twice is taken once, as the first listing shows it.
                let created_ms = collateral.created_time.map(|t| t.0);
                records.push(ObservedRecord { key, created_ms, totals: Totals::of(collateral) });
            }
        }
        if records.is_empty() {
            // Nothing to compare; and an answer without the records an earlier one showed is
            // more likely a glitch than every record gone, which would lose what they moved since.
            return;
        }
        let held: usize = self.pending.iter().map(|o| o.records.len()).sum();
        if !self.pending.is_empty() && (self.pending.len() == MAX_PENDING || held + records.len() > MAX_PENDING_RECORDS)
        {
            return;
        }
        let at_ms = asked_at_ms.saturating_sub(1).max(updated_ms.unwrap_or(i64::MIN));
        self.pending.push(Observation { coin_id, at_ms, updated_ms, records });
    }

    /// Counting begins (or begins again after a gap) with the bills created at `since_ms`:
    /// forgets the answers, of coins not compared yet, asked before then. A bill booked between
    /// such an answer and the start of counting is in every later total but never counted, and a
    /// comparison begun with that answer would differ by it for good.
    pub fn count_from(&mut self, since_ms: i64) {
        let coins = &self.coins;
        self.pending.retain(|o| coins.iter().any(|c| c.coin_id == o.coin_id) || o.at_ms >= since_ms.saturating_sub(1));
    }

    /// Takes a bill just counted, of the coin with this id.
    pub fn count(&mut self, bill: &Bill, coin_id: u64) {
        let mut totals = Totals::default();
        for (i, total) in RUNNING_TOTALS.iter().enumerate() {
            let value = match total.follows {
                Follows::Amount(kind) if kind == bill.business_type => bill.amount,
                Follows::Amount(_) => None,
                Follows::FillFee => bill.fill_fee,
            };
            if let Some(value) = value.filter(|v| !v.is_zero()) {
                totals.add(i, value);
            }
        }
        if totals.values().next().is_some() {
            self.uncompared.push(Uncompared { ctime_ms: bill.ctime_ms, coin_id, totals });
        }
    }

    /// Compares each answer dated at or before `settled_through_ms`, up to which every bill is
    /// final, oldest first: a record shown only by one of them (a position closed since) enters
    /// the comparison with its last movements. Returns the differences that changed.
    pub fn settle(&mut self, settled_through_ms: i64) -> Vec<Changed> {
        let before = self.differences();
        let (mut settled, waiting): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|o| o.at_ms <= settled_through_ms);
        self.pending = waiting;
        settled.sort_by_key(|o| o.at_ms);
        let mut compared_at: BTreeMap<u64, i64> = BTreeMap::new();
        for observation in settled {
            compared_at.insert(observation.coin_id, observation.at_ms);
            self.compare(observation);
        }
        self.fold_settled_bills(settled_through_ms);
        let after = self.differences();
        after
            .into_iter()
            .filter(|(key, difference)| before.get(key).is_none_or(|b| b != difference))
            .map(|((coin_id, field), difference)| {
                let at_ms = compared_at.get(&coin_id).copied().unwrap_or_default();
                let before = before.get(&(coin_id, field)).copied();
                Changed { coin_id, field, before, difference, at_ms }
            })
            .collect()
    }

    /// A coin not compared yet begins with an answer still waiting, or one dated after
    /// `settled_through_ms`: its bills up to that answer's records' last update are in its
    /// totals, and are not needed; those after it go to the comparison after (see
    /// [`Self::begin`]), so they are kept. The bills of a compared coin all go to its next
    /// comparison (every answer to come is dated after that point), so they are kept as one sum
    /// per coin, dated as the newest of them: however long the account query fails while bills
    /// are counted, what waits stays bounded.
    fn fold_settled_bills(&mut self, settled_through_ms: i64) {
        let (settled, newer): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.uncompared).into_iter().partition(|bill| bill.ctime_ms <= settled_through_ms);
        let mut sums: BTreeMap<u64, Uncompared> = BTreeMap::new();
        let mut kept = Vec::new();
        for bill in settled {
            if self.coins.iter().any(|c| c.coin_id == bill.coin_id) {
                let sum = sums.entry(bill.coin_id).or_insert_with(|| Uncompared { totals: Totals::default(), ..bill });
                sum.ctime_ms = sum.ctime_ms.max(bill.ctime_ms);
                sum.totals.add_all(&bill.totals);
            } else if self.pending.iter().any(|o| o.coin_id == bill.coin_id && o.begins_after_ms() < bill.ctime_ms) {
                kept.push(bill);
            }
        }
        self.uncompared = sums.into_values().chain(kept).chain(newer).collect();
    }

    fn compare(&mut self, observation: Observation) {
        let Some(index) = self.coins.iter().position(|c| c.coin_id == observation.coin_id) else {
            return self.begin(observation);
        };
        let bills = self.take_bills(observation.coin_id, observation.at_ms);
        let ledger = &mut self.coins[index];
        ledger.bills.add_all(&bills);
        ledger.hide_and_resume(&observation.records);
        let mut positions = ledger.records.iter().enumerate().map(|(i, r)| (r.key.clone(), i)).collect();
        for observed in observation.records {
            let record = ledger.record_for(&mut positions, observed.key, observed.created_ms);
            for (i, value) in observed.totals.values() {
                // A field first readable now starts now, unless the record counts from zero.
                if !record.from_zero {
                    record.start.0[i].get_or_insert(value);
                }
                record.latest.0[i] = Some(value);
            }
        }
        ledger.learn_signs();
    }

    /// Begins a coin's comparison with its first settled answer. A bill booked before the answer
    /// moved a record's `updated_time` to its own time or later, so the bills up to the latest are
    /// in the totals already and are let go. Those after it, up to the answer's time, were booked
    /// after the answer (which this machine's clock, a little ahead, can date late): they go to the
    /// next comparison, which would otherwise differ by them for good.
    fn begin(&mut self, observation: Observation) {
        let since_ms = observation.begins_after_ms();
        self.take_bills(observation.coin_id, since_ms);
        let records = observation
            .records
            .into_iter()
            .map(|r| ComparedRecord {
                key: r.key,
                created_ms: r.created_ms,
                from_zero: false,
                start: r.totals,
                latest: r.totals,
            })
            .collect();
        self.coins.push(CoinLedger { coin_id: observation.coin_id, since_ms, records, ..CoinLedger::default() });
    }

    /// Removes and sums the uncompared bills of a coin created up to `through_ms`.
    fn take_bills(&mut self, coin_id: u64, through_ms: i64) -> Totals {
        let mut sums = Totals::default();
        self.uncompared.retain(|bill| {
            let taken = bill.coin_id == coin_id && bill.ctime_ms <= through_ms;
            if taken {
                sums.add_all(&bill.totals);
            }
            !taken
        });
        sums
    }

    /// For each coin compared and each running total its records show: the change of the total
    /// less the signed sum of its bills, each taken with the sign comparisons showed (see
    /// `Signs`), or until then by its magnitude.
    pub fn differences(&self) -> Differences {
        let mut differences = Differences::new();
        for ledger in &self.coins {
            for (i, moved) in ledger.moved().values() {
                let bills = ledger.bills.0[i].unwrap_or_default();
                let (moved_sign, bills_sign) = match ledger.signs.0[i] {
                    Some(signs) if signs.confirmed => (signs.moved, signs.bills),
                    _ => (Sign::of(moved), Sign::of(bills)),
                };
                let difference = moved_sign.times(moved).saturating_sub(bills_sign.times(bills));
                differences.insert((ledger.coin_id, RUNNING_TOTALS[i].field), difference);
            }
        }
        differences
    }

    /// Forgets the coins no longer polled.
    pub fn retain_coins(&mut self, coin_ids: &[u64]) {
        self.coins.retain(|c| coin_ids.contains(&c.coin_id));
        self.pending.retain(|o| coin_ids.contains(&o.coin_id));
        self.uncompared.retain(|bill| coin_ids.contains(&bill.coin_id));
    }

    /// Whether a saved ledger's times are plausible (its fields were checked as it was read).
    /// Its coins are the configured ones: those no longer polled are dropped at start.
    pub fn check(&self, plausible_ms: &std::ops::RangeInclusive<i64>) -> Result<(), String> {
        let times = self.coins.iter().map(|c| c.since_ms).chain(self.uncompared.iter().map(|b| b.ctime_ms));
        match times.into_iter().find(|t| !plausible_ms.contains(t)) {
            Some(bad) => Err(format!("ledger time {bad} is not a plausible time in milliseconds")),
            None => Ok(()),
        }
    }
}

impl CoinLedger {
    /// Learns which way each running total and its bills run from a comparison where they agree
    /// by magnitude, with bills summing to something other than zero.
    fn learn_signs(&mut self) {
        for (i, moved) in self.moved().values() {
            let bills = self.bills.0[i].unwrap_or_default();
            if !bills.is_zero() && moved.abs() == bills.abs() {
                Signs::learn(&mut self.signs.0[i], moved, bills);
            }
        }
    }

    /// How much each running total moved since the comparison began, over every record; none
    /// for a total no record shows.
    fn moved(&self) -> Totals {
        let mut moved = self.gone;
        for record in self.records.iter().chain(&self.hidden) {
            moved.add_all(&record.moved());
        }
        moved
    }

    /// Resumes the hidden records an answer shows and hides those it does not; beyond
    /// [`MAX_HIDDEN`], folds one into `gone` (see there which).
    fn hide_and_resume(&mut self, observed: &[ObservedRecord]) {
        let keys: HashSet<&str> = observed.iter().map(|r| r.key.as_str()).collect();
        let is_shown = |record: &ComparedRecord| keys.contains(record.key.as_str());
        let (resumed, still_hidden): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.hidden).into_iter().partition(is_shown);
        let (shown, missing): (Vec<_>, Vec<_>) = std::mem::take(&mut self.records).into_iter().partition(is_shown);
        self.records = shown.into_iter().chain(resumed).collect();
        self.hidden = still_hidden.into_iter().chain(missing).collect();
        while self.hidden.len() > MAX_HIDDEN {
            let folded = self.hidden.iter().position(ComparedRecord::is_isolated_position).unwrap_or(0);
            let record = self.hidden.remove(folded);
            self.gone.add_all(&record.moved());
        }
    }

    /// The record an answer shows under `key`: the one compared before unless a later creation
    /// time says it is another, else a new one. `positions` holds the index in `records` of each
    /// key, since an answer may list thousands of records.
    fn record_for(
        &mut self,
        positions: &mut HashMap<String, usize>,
        key: String,
        created_ms: Option<i64>,
    ) -> &mut ComparedRecord {
        // Created since the comparison began: everything it holds came since.
        let from_zero = created_ms.is_some_and(|created| created > self.since_ms);
        let new = |key| ComparedRecord { key, created_ms, from_zero, ..ComparedRecord::default() };
        let Some(&i) = positions.get(&key) else {
            let i = self.records.len();
            positions.insert(key.clone(), i);
            self.records.push(new(key));
            return &mut self.records[i];
        };
        let record = &mut self.records[i];
        match (record.created_ms, created_ms) {
            // Only later: two records that share a key (fields left out) must not take turns at
            // being new, each time counting what it holds again.
            (Some(before), Some(now)) if now > before => {
                let replaced = std::mem::replace(record, new(key));
                self.gone.add_all(&replaced.moved());
            }
            _ => record.created_ms = record.created_ms.or(created_ms),
        }
        &mut self.records[i]
    }
}

impl ComparedRecord {
    /// Whether it is an isolated position's record (see [`record_key`]), which goes for good when
    /// the position closes.
    fn is_isolated_position(&self) -> bool {
        let id = self.key.rsplit('/').next().unwrap_or_default();
        self.key.starts_with("ISOLATED/") && !id.is_empty() && id != "0"
    }

    /// What each running total moved since the record entered the comparison.
    fn moved(&self) -> Totals {
        let mut moved = Totals::default();
        for (i, latest) in self.latest.values() {
            moved.add(i, latest.saturating_sub(self.start.0[i].unwrap_or_default()));
        }
        moved
    }
}

/// A record is one margin mode's, one cross contract's or one isolated position's:
/// `margin_mode/cross_contract_id/isolated_position_id`, the last `0` (or empty) but for an
/// isolated position.
fn record_key(c: &Collateral) -> String {
    let part = |value: &Option<String>| value.as_deref().unwrap_or_default().to_owned();
    format!("{}/{}/{}", part(&c.margin_mode), part(&c.cross_contract_id), part(&c.isolated_position_id))
}

#[cfg(test)]
mod tests;
