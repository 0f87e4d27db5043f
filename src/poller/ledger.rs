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
//! Signs are compared by magnitude: `|change of the total| - |signed sum of its bills|`. The API
//! does not say whether a withdrawal total grows while its bills are negative, or whether funding
//! is kept signed; this holds for a total that follows the signed sum of its bills or its
//! negative, and for one that adds the magnitudes of bills that share one sign. A missed bill
//! of such a type shows as its amount's magnitude.
//!
//! Several records of one coin (isolated positions have their own) are compared as one: a record
//! that appears after the comparison began counts from zero when it was created since; one that
//! disappears keeps what it had moved by the last answer that showed it.
//!
//! Free of I/O, like the cursor: it is driven by answers and saved with them in the state file.

use crate::api::model::{AccountInfo, Bill, Collateral};
use crate::snapshot::LedgerDifferences as Differences;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// Every running total with a bill type of its own. `cum_position_liquidate_fee_amount` has none
/// (a liquidation fee is no business type of the bill query) and is left out.
const RUNNING_TOTALS: [RunningTotal; 14] = [
    RunningTotal { field: "cum_deposit_amount", read: |c| c.cum_deposit_amount, follows: Follows::Amount("deposit") },
    RunningTotal {
        field: "cum_withdraw_amount",
        read: |c| c.cum_withdraw_amount,
        follows: Follows::Amount("withdraw"),
    },
    RunningTotal {
        field: "cum_transfer_in_amount",
        read: |c| c.cum_transfer_in_amount,
        follows: Follows::Amount("transfer_in"),
    },
    RunningTotal {
        field: "cum_transfer_out_amount",
        read: |c| c.cum_transfer_out_amount,
        follows: Follows::Amount("transfer_out"),
    },
    RunningTotal {
        field: "cum_margin_move_in_amount",
        read: |c| c.cum_margin_move_in_amount,
        follows: Follows::Amount("margin_move_in"),
    },
    RunningTotal {
        field: "cum_margin_move_out_amount",
        read: |c| c.cum_margin_move_out_amount,
        follows: Follows::Amount("margin_move_out"),
    },
    RunningTotal {
        field: "cum_position_open_long_amount",
        read: |c| c.cum_position_open_long_amount,
        follows: Follows::Amount("position_open_long"),
    },
    RunningTotal {
        field: "cum_position_open_short_amount",
        read: |c| c.cum_position_open_short_amount,
        follows: Follows::Amount("position_open_short"),
    },
    RunningTotal {
        field: "cum_position_close_long_amount",
        read: |c| c.cum_position_close_long_amount,
        follows: Follows::Amount("position_close_long"),
    },
    RunningTotal {
        field: "cum_position_close_short_amount",
        read: |c| c.cum_position_close_short_amount,
        follows: Follows::Amount("position_close_short"),
    },
    RunningTotal {
        field: "cum_position_funding_amount",
        read: |c| c.cum_position_funding_amount,
        follows: Follows::Amount("position_funding"),
    },
    RunningTotal {
        field: "cum_position_fill_fee_amount",
        read: |c| c.cum_position_fill_fee_amount,
        follows: Follows::FillFee,
    },
    RunningTotal {
        field: "cum_order_fill_fee_income_amount",
        read: |c| c.cum_order_fill_fee_income_amount,
        follows: Follows::Amount("order_fill_fee_income"),
    },
    RunningTotal {
        field: "cum_order_liquidate_fee_income_amount",
        read: |c| c.cum_order_liquidate_fee_income_amount,
        follows: Follows::Amount("order_liquidate_fee_income"),
    },
];

/// The names of the running totals compared, as the `field` label shows them.
pub fn fields() -> impl Iterator<Item = &'static str> {
    RUNNING_TOTALS.iter().map(|total| total.field)
}

/// Answers kept waiting to settle, oldest dropped first: only the newest settled one of each
/// coin is compared, so a long wait (a deferred bill scan) loses no comparison, only older ones.
const MAX_PENDING: usize = 256;

/// How far a record's `updated_time` may be ahead of the request's time by this machine's idea of
/// the exchange's clock, which is off by up to its 30 s window (more until a rejected timestamp
/// corrects it): a day, as far as a learned clock offset goes.
const MAX_AHEAD_MS: i64 = 86_400_000;

/// Values by running total's field name.
type Totals = BTreeMap<String, Decimal>;

/// One account's comparison: its state is saved in the state file with the cursor and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// Per coin id, from its first settled answer on.
    coins: BTreeMap<u64, CoinLedger>,
    /// Answers not settled yet, oldest first. Not saved: after a restart the next answers take
    /// their place (the comparison then waits one overlap longer), and a state file stays small.
    #[serde(skip)]
    pending: Vec<Observation>,
    /// Signed sums of counted bills not yet compared: creation ms -> coin id -> field.
    uncompared: BTreeMap<i64, BTreeMap<u64, Totals>>,
}

/// The running totals of one coin's records in one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observation {
    coin_id: u64,
    /// By the exchange's clock: every bill created up to this time is in these totals.
    at_ms: i64,
    /// By record (margin mode, cross contract, isolated position).
    records: BTreeMap<String, RecordTotals>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RecordTotals {
    created_ms: Option<i64>,
    totals: Totals,
}

/// One coin's comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CoinLedger {
    /// The settled answer the comparison began with.
    since_ms: i64,
    /// Per record shown since: its totals when it entered the comparison, and at the latest.
    records: BTreeMap<String, Compared>,
    /// What records no longer shown had moved by the last answer that showed them.
    gone: Totals,
    /// Signed sums of the bills counted since the comparison began, up to the latest answer.
    bills: Totals,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Compared {
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
    pub fn observe(&mut self, coin_id: u64, info: &AccountInfo, asked_at_ms: i64) {
        let mine =
            info.collateral.iter().filter(|c| c.coin_id.as_deref().and_then(|id| id.parse().ok()) == Some(coin_id));
        let mut at_ms = asked_at_ms;
        let mut records = BTreeMap::new();
        for collateral in mine {
            // A record cannot have changed after the answer; a time far beyond the request (another
            // unit, a glitch) would keep the answer waiting for ever, so it is not taken.
            let updated =
                collateral.updated_time.map(|t| t.0).filter(|t| *t <= asked_at_ms.saturating_add(MAX_AHEAD_MS));
            at_ms = at_ms.max(updated.unwrap_or(i64::MIN));
            let totals = RUNNING_TOTALS
                .iter()
                .filter_map(|total| Some((total.field.to_owned(), (total.read)(collateral)?)))
                .collect();
            let created_ms = collateral.created_time.map(|t| t.0);
            records.insert(record_key(collateral), RecordTotals { created_ms, totals });
        }
        if records.is_empty() {
            // Nothing to compare; and an answer without the records an earlier one showed is
            // more likely a glitch than every record gone, which would lose what they moved since.
            return;
        }
        if self.pending.len() == MAX_PENDING {
            self.pending.remove(0);
        }
        self.pending.push(Observation { coin_id, at_ms, records });
    }

    /// Takes a bill just counted, of the coin with this id.
    pub fn count(&mut self, bill: &Bill, coin_id: u64) {
        for total in &RUNNING_TOTALS {
            let value = match total.follows {
                Follows::Amount(kind) if kind == bill.business_type => bill.amount,
                Follows::Amount(_) => None,
                Follows::FillFee => bill.fill_fee,
            };
            if let Some(value) = value.filter(|v| !v.is_zero()) {
                let sums = self.uncompared.entry(bill.ctime_ms).or_default().entry(coin_id).or_default();
                add(sums, total.field, value);
            }
        }
    }

    /// Compares the newest answer of each coin dated at or before `settled_through_ms`, up to
    /// which every bill is final. Returns the differences that changed.
    pub fn settle(&mut self, settled_through_ms: i64) -> Vec<Changed> {
        let before = self.differences();
        let (settled, waiting): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|o| o.at_ms <= settled_through_ms);
        self.pending = waiting;
        let mut newest: BTreeMap<u64, Observation> = BTreeMap::new();
        for observation in settled {
            if newest.get(&observation.coin_id).is_none_or(|n| n.at_ms <= observation.at_ms) {
                newest.insert(observation.coin_id, observation);
            }
        }
        let mut compared_at = BTreeMap::new();
        for (coin_id, observation) in newest {
            compared_at.insert(coin_id, observation.at_ms);
            self.compare(observation);
        }
        // A coin not compared yet begins after this point: its bills up to it are not needed.
        for sums in self.uncompared.range_mut(..=settled_through_ms).map(|(_, sums)| sums) {
            sums.retain(|coin_id, _| self.coins.contains_key(coin_id));
        }
        self.uncompared.retain(|_, sums| !sums.is_empty());
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

    fn compare(&mut self, observation: Observation) {
        let bills = self.take_bills(observation.coin_id, observation.at_ms);
        let Some(ledger) = self.coins.get_mut(&observation.coin_id) else {
            // The first settled answer: the bills up to it are in its totals already.
            let records = observation
                .records
                .into_iter()
                .map(|(key, r)| (key, Compared { from_zero: false, start: r.totals.clone(), latest: r.totals }))
                .collect();
            let ledger = CoinLedger { since_ms: observation.at_ms, records, gone: Totals::new(), bills: Totals::new() };
            self.coins.insert(observation.coin_id, ledger);
            return;
        };
        for (field, value) in bills {
            add(&mut ledger.bills, &field, value);
        }
        let gone: Vec<String> =
            ledger.records.keys().filter(|key| !observation.records.contains_key(*key)).cloned().collect();
        for key in gone {
            if let Some(record) = ledger.records.remove(&key) {
                for (field, moved) in record.moved() {
                    add(&mut ledger.gone, field, moved);
                }
            }
        }
        for (key, shown) in observation.records {
            let since_ms = ledger.since_ms;
            let record = ledger.records.entry(key).or_insert_with(|| {
                // Created since the comparison began: everything it holds came since.
                let from_zero = shown.created_ms.is_some_and(|created| created > since_ms);
                Compared { from_zero, start: Totals::new(), latest: Totals::new() }
            });
            for (field, value) in shown.totals {
                // A field first readable now starts now, unless the record counts from zero.
                if !record.from_zero {
                    record.start.entry(field.clone()).or_insert(value);
                }
                record.latest.insert(field, value);
            }
        }
    }

    /// Removes and sums the uncompared bills of a coin created up to `through_ms`.
    fn take_bills(&mut self, coin_id: u64, through_ms: i64) -> Totals {
        let mut sums = Totals::new();
        for by_coin in self.uncompared.range_mut(..=through_ms).map(|(_, by_coin)| by_coin) {
            for (field, value) in by_coin.remove(&coin_id).unwrap_or_default() {
                add(&mut sums, &field, value);
            }
        }
        self.uncompared.retain(|_, by_coin| !by_coin.is_empty());
        sums
    }

    /// For each coin compared and each running total its records show: `|change of the total|
    /// - |signed sum of its bills|`.
    pub fn differences(&self) -> Differences {
        let mut differences = Differences::new();
        for (coin_id, ledger) in &self.coins {
            for total in &RUNNING_TOTALS {
                let Some(moved) = ledger.moved(total.field) else { continue };
                let bills = ledger.bills.get(total.field).copied().unwrap_or_default();
                differences.insert((*coin_id, total.field), moved.abs().saturating_sub(bills.abs()));
            }
        }
        differences
    }

    /// Forgets the coins no longer polled.
    pub fn retain_coins(&mut self, coin_ids: &[u64]) {
        self.coins.retain(|coin_id, _| coin_ids.contains(coin_id));
        self.pending.retain(|o| coin_ids.contains(&o.coin_id));
        for by_coin in self.uncompared.values_mut() {
            by_coin.retain(|coin_id, _| coin_ids.contains(coin_id));
        }
        self.uncompared.retain(|_, by_coin| !by_coin.is_empty());
    }

    /// Whether a saved ledger holds only what this exporter writes: known fields, plausible
    /// times, and no more coins than the counters keep.
    pub fn check(&self, plausible_ms: &std::ops::RangeInclusive<i64>, max_coins: usize) -> Result<(), String> {
        let known = |field: &String| RUNNING_TOTALS.iter().any(|total| total.field == field);
        let ledgers = self.coins.values();
        let mut totals: Vec<&Totals> = ledgers.clone().flat_map(|l| [&l.gone, &l.bills]).collect();
        totals.extend(ledgers.flat_map(|l| l.records.values()).flat_map(|r| [&r.start, &r.latest]));
        totals.extend(self.uncompared.values().flat_map(BTreeMap::values));
        if let Some(field) = totals.iter().flat_map(|t| t.keys()).find(|f| !known(f)) {
            return Err(format!("ledger field {field:?} is no running total this exporter compares"));
        }
        let times = self.coins.values().map(|l| l.since_ms).chain(self.uncompared.keys().copied());
        if let Some(bad) = times.into_iter().find(|t| !plausible_ms.contains(t)) {
            return Err(format!("ledger time {bad} is not a plausible time in milliseconds"));
        }
        if self.coins.len() > max_coins {
            return Err(format!(
                "the ledger holds {} coins, more than the {max_coins} this exporter keeps",
                self.coins.len()
            ));
        }
        Ok(())
    }
}

impl CoinLedger {
    /// How much a running total moved since the comparison began, over every record; `None`
    /// when no record shows it.
    fn moved(&self, field: &str) -> Option<Decimal> {
        let shown = self.records.values().filter_map(|r| r.moved().find(|(f, _)| *f == field).map(|(_, m)| m));
        let gone = self.gone.get(field).copied();
        shown.chain(gone).reduce(Decimal::saturating_add)
    }
}

impl Compared {
    /// What each field moved since the record entered the comparison.
    fn moved(&self) -> impl Iterator<Item = (&str, Decimal)> {
        self.latest.iter().map(|(field, latest)| {
            let start = self.start.get(field).copied().unwrap_or_default();
            (field.as_str(), latest.saturating_sub(start))
        })
    }
}

/// A record is one margin mode's, one cross contract's or one isolated position's.
fn record_key(collateral: &Collateral) -> String {
    let part = |value: &Option<String>| value.clone().unwrap_or_default();
    format!(
        "{}/{}/{}",
        part(&collateral.margin_mode),
        part(&collateral.cross_contract_id),
        part(&collateral.isolated_position_id)
    )
}

/// Adds to a sum. Saturating: values near the decimal range's end are not the exchange's, and
/// a sum pinned there shows as a difference rather than a panic.
fn add(sums: &mut Totals, field: &str, value: Decimal) {
    let sum = sums.entry(field.to_owned()).or_default();
    *sum = sum.saturating_add(value);
}

#[cfg(test)]
mod tests;
