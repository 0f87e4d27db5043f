//! The bill counters: exact decimal sums of the bills the cursor found new, and the crowded
//! milliseconds whose count is not proven complete.

use crate::api::fields::DecodeProblem;
use crate::api::model::Bill;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The sign of an amount: money into the account or out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    In,
    Out,
}

impl Direction {
    pub fn of(value: Decimal) -> Self {
        if value.is_sign_negative() {
            Direction::Out
        } else {
            Direction::In
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// How sure it is that bills of a crowded millisecond were missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Loss {
    /// The split rested on coins or symbols the API cannot list.
    Possible,
    /// Fewer bills were found than a full answer proved to exist.
    Certain,
}

impl Loss {
    pub const ALL: [Loss; 2] = [Loss::Certain, Loss::Possible];

    pub fn as_str(self) -> &'static str {
        match self {
            Loss::Possible => "possible",
            Loss::Certain => "certain",
        }
    }
}

/// At most this many coins, and business types, are labels of an account's bill counters; a
/// bill of another once the limit is reached is counted under [`OTHER`], so that no answer can
/// create any number of series, and no bill goes uncounted.
pub const MAX_COINS: usize = 32;
pub const MAX_BUSINESS_TYPES: usize = 64;
/// A coin or business type longer than this is counted under [`OTHER`] (the exchange's are a
/// few bytes long): keys held for the process's life must not be the network's to size.
pub const MAX_LABEL_BYTES: usize = 64;
/// The label value of the coins or business types past the limit.
pub const OTHER: &str = "other";

const UNSUMMABLE: &str = "too large to add to the counted sum; the bill is counted, the value is left out";
const OVER_LIMIT: &str =
    "one value too many for the account's labels, or longer than 64 bytes; the bill is counted under \"other\"";

/// `(coin, business_type)`.
pub type TypeKey = (String, String);
/// `(coin, business_type, direction)`.
pub type FlowKey = (String, String, Direction);

/// The balance after the newest bill of one coin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatestBalance {
    pub ctime_ms: i64,
    pub bill_id: String,
    #[serde(with = "rust_decimal::serde::str")]
    pub balance: Decimal,
}

impl LatestBalance {
    /// Newer by creation time, then by id (ids grow with time; equal times are common in bursts).
    fn is_older_than(&self, ctime_ms: i64, bill_id: &str) -> bool {
        (self.ctime_ms, self.bill_id.len(), self.bill_id.as_str()) < (ctime_ms, bill_id.len(), bill_id)
    }
}

/// Everything counted from bills since counting began (or since the saved state began).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BillCounters {
    pub bills: BTreeMap<TypeKey, u64>,
    /// Sums of absolute amounts, by the amount's sign.
    pub amounts: BTreeMap<FlowKey, Decimal>,
    /// Sums of absolute fill fees, by the fee's sign: paid (out) or rebated (in).
    pub fill_fees: BTreeMap<FlowKey, Decimal>,
    pub balances: BTreeMap<String, LatestBalance>,
    /// Crowded milliseconds whose count is not proven complete, by how sure the loss is.
    pub shortfalls: BTreeMap<Loss, u64>,
    /// The first millisecond since which no bill was passed over: where counting began (the
    /// first start, or a start without saved state), or resumed after skipping ahead. `None`
    /// before counting begins.
    pub counting_since_ms: Option<i64>,
    /// The exchange account whose bills these are (`account.id` of its account answers), once
    /// an answer named it: credentials of another account under the same name are not counted on.
    pub exchange_account_id: Option<String>,
}

impl BillCounters {
    /// Counts one bill. Returns what was not counted as it is: a coin or business type past
    /// the limit (counted as [`OTHER`]), a value that would take its sum out of the decimal
    /// range (left out of the sum). The bill itself is always counted.
    pub fn count(&mut self, bill: &Bill) -> Vec<DecodeProblem> {
        let mut problems = Vec::new();
        let mut problem =
            |field: &str, detail| problems.push(DecodeProblem { record: "bill", field: field.into(), detail });
        let (coin, business_type) = self.labels(bill);
        if coin != bill.coin {
            problem("coin", OVER_LIMIT);
        }
        if business_type != bill.business_type {
            problem("businessType", OVER_LIMIT);
        }
        let count = self.bills.entry((coin.clone(), business_type.clone())).or_default();
        *count = count.saturating_add(1);
        if !add_flow(&mut self.amounts, (&coin, &business_type), bill.amount) {
            problem("amount", UNSUMMABLE);
        }
        if !add_flow(&mut self.fill_fees, (&coin, &business_type), bill.fill_fee) {
            problem("fillFee", UNSUMMABLE);
        }
        // Coins past the limit share `other`: a balance there would be any one of theirs.
        if let Some(balance) = bill.balance.filter(|_| coin != OTHER) {
            let newer = self.balances.get(&coin).is_none_or(|b| b.is_older_than(bill.ctime_ms, &bill.id));
            if newer {
                let latest = LatestBalance { ctime_ms: bill.ctime_ms, bill_id: bill.id.clone(), balance };
                self.balances.insert(coin, latest);
            }
        }
        problems
    }

    /// The coin and business type a bill is counted under: its own, or [`OTHER`] for a value
    /// new to the account once it has the maximum.
    fn labels(&self, bill: &Bill) -> (String, String) {
        let key = (bill.coin.clone(), bill.business_type.clone());
        if self.bills.contains_key(&key) {
            return key; // the common case: a pair counted before
        }
        let coins: BTreeSet<&str> = self.bills.keys().map(|(coin, _)| coin.as_str()).collect();
        let types: BTreeSet<&str> = self.bills.keys().map(|(_, kind)| kind.as_str()).collect();
        let within = |known: &BTreeSet<&str>, value: &str, max| {
            value.len() <= MAX_LABEL_BYTES && (known.contains(value) || known.len() < max - 1)
        };
        let coin = if within(&coins, &bill.coin, MAX_COINS) { key.0 } else { OTHER.to_owned() };
        let business_type =
            if within(&types, &bill.business_type, MAX_BUSINESS_TYPES) { key.1 } else { OTHER.to_owned() };
        (coin, business_type)
    }

    /// Whether every flow the shipped alerts watch is shown for `coin` (see
    /// [`Self::show_watched_flows`]).
    pub fn shows_watched_flows(&self, coin: &str) -> bool {
        watched_amounts(coin).all(|key| self.amounts.contains_key(&key))
            && watched_fill_fees(coin).all(|key| self.fill_fees.contains_key(&key))
    }

    /// Shows the flows of `coin` that the shipped alerts watch with `increase()`, from zero where
    /// no bill moved them yet: funding both ways, and the fill fees of opening and closing
    /// positions (of both signs, as the API does not say which a fee paid has). `increase()`
    /// takes a series' first sample as its start, so the first bill of a series created by that
    /// bill is never seen.
    pub fn show_watched_flows(&mut self, coin: &str) {
        for key in watched_amounts(coin) {
            self.amounts.entry(key).or_default();
        }
        for key in watched_fill_fees(coin) {
            self.fill_fees.entry(key).or_default();
        }
    }

    pub fn note_shortfall(&mut self, loss: Loss) {
        let reported = self.shortfalls.entry(loss).or_default();
        *reported = reported.saturating_add(1);
    }
}

const FUNDING: &str = "position_funding";
const TRADES: [&str; 4] = ["position_open_long", "position_open_short", "position_close_long", "position_close_short"];
const DIRECTIONS: [Direction; 2] = [Direction::In, Direction::Out];

fn watched_amounts(coin: &str) -> impl Iterator<Item = FlowKey> + '_ {
    DIRECTIONS.into_iter().map(move |direction| (coin.to_owned(), FUNDING.to_owned(), direction))
}

fn watched_fill_fees(coin: &str) -> impl Iterator<Item = FlowKey> + '_ {
    TRADES.into_iter().flat_map(move |kind| DIRECTIONS.map(|direction| (coin.to_owned(), kind.to_owned(), direction)))
}

/// Adds a non-zero value's magnitude under its direction; zero moves nothing and adds no series.
/// Returns false, adding nothing, when the sum would leave the decimal range.
fn add_flow(sums: &mut BTreeMap<FlowKey, Decimal>, (coin, kind): (&str, &str), value: Option<Decimal>) -> bool {
    let Some(value) = value.filter(|v| !v.is_zero()) else { return true };
    let key = (coin.to_owned(), kind.to_owned(), Direction::of(value));
    let sum = sums.get(&key).copied().unwrap_or_default();
    let Some(sum) = sum.checked_add(value.abs()) else { return false };
    sums.insert(key, sum);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn bill(id: &str, ctime_ms: i64, kind: &str, amount: &str, fee: &str, balance: &str) -> Bill {
        Bill {
            id: id.into(),
            coin: "USDT".into(),
            symbol: "cmt_btcusdt".into(),
            business_type: kind.into(),
            amount: Decimal::from_str(amount).ok(),
            balance: Decimal::from_str(balance).ok(),
            fill_fee: Decimal::from_str(fee).ok(),
            ctime_ms,
        }
    }

    #[test]
    fn amounts_and_fees_are_summed_exactly_by_direction() {
        let mut counters = BillCounters::default();
        counters.count(&bill("1", 10, "position_open_long", "-100.1", "-0.06", "900"));
        counters.count(&bill("2", 11, "position_open_long", "-0.2", "-0.01", "899.8"));
        counters.count(&bill("3", 12, "position_close_long", "50.3", "0.02", "950.1"));
        counters.count(&bill("4", 13, "position_funding", "0", "0", "950.1"));
        let usdt = |kind: &str, d| ("USDT".to_string(), kind.to_string(), d);
        assert_eq!(counters.bills[&("USDT".into(), "position_open_long".into())], 2);
        assert_eq!(counters.amounts[&usdt("position_open_long", Direction::Out)].to_string(), "100.3");
        assert_eq!(counters.amounts[&usdt("position_close_long", Direction::In)].to_string(), "50.3");
        assert_eq!(counters.fill_fees[&usdt("position_open_long", Direction::Out)].to_string(), "0.07");
        assert_eq!(counters.fill_fees[&usdt("position_close_long", Direction::In)].to_string(), "0.02");
        assert!(!counters.amounts.contains_key(&usdt("position_funding", Direction::In)));
        assert_eq!(counters.bills[&("USDT".into(), "position_funding".into())], 1);
    }

    #[test]
    fn an_amount_that_cannot_be_added_is_left_out_of_the_sum_but_the_bill_is_counted() {
        let mut counters = BillCounters::default();
        let max = Decimal::MAX.to_string();
        let mut fields = |b: Bill| counters.count(&b).into_iter().map(|p| p.field).collect::<Vec<_>>();
        assert_eq!(fields(bill("1", 10, "deposit", &max, "0", "1")), Vec::<String>::new());
        assert_eq!(fields(bill("2", 11, "deposit", &max, &max, "1")), ["amount"]);
        assert_eq!(fields(bill("3", 12, "deposit", "-1", &format!("-{max}"), "1")), Vec::<String>::new());
        assert_eq!(fields(bill("4", 13, "deposit", "0", &format!("-{max}"), "1")), ["fillFee"]);
        assert_eq!(counters.bills[&("USDT".into(), "deposit".into())], 4);
        let usdt = |d| ("USDT".to_string(), "deposit".to_string(), d);
        assert_eq!(counters.amounts[&usdt(Direction::In)], Decimal::MAX);
        assert_eq!(counters.amounts[&usdt(Direction::Out)], Decimal::ONE);
        assert_eq!(counters.fill_fees[&usdt(Direction::In)], Decimal::MAX);
        assert_eq!(counters.fill_fees[&usdt(Direction::Out)], Decimal::MAX);
    }

    #[test]
    fn coins_and_business_types_past_the_limit_are_counted_as_other() {
        let mut counters = BillCounters::default();
        let mut over = 0;
        for i in 0..MAX_BUSINESS_TYPES + 10 {
            let mut b = bill(&i.to_string(), 10, &format!("type_{i}"), "1", "0", "1");
            b.coin = format!("C{}", i % (MAX_COINS + 5));
            over += counters.count(&b).len();
        }
        let coins: BTreeSet<&str> = counters.bills.keys().map(|(c, _)| c.as_str()).collect();
        let types: BTreeSet<&str> = counters.bills.keys().map(|(_, t)| t.as_str()).collect();
        assert_eq!((coins.len(), types.len()), (MAX_COINS, MAX_BUSINESS_TYPES));
        assert!(coins.contains(OTHER) && types.contains(OTHER));
        assert!(!counters.balances.contains_key(OTHER), "no coin's balance stands for the others'");
        assert_eq!(counters.bills.values().sum::<u64>(), (MAX_BUSINESS_TYPES + 10) as u64, "every bill counted");
        // Types 63..=73 are past the limit; so are coins C31..=C36, each time one comes (twice).
        assert_eq!(over, 11 + 2 * 6, "each value past the limit reported");
        // A value counted before stays itself.
        let known = Bill { coin: "C0".into(), ..bill("x", 11, "type_0", "1", "0", "1") };
        assert!(counters.count(&known).is_empty());
    }

    #[test]
    fn values_too_long_for_a_label_are_counted_as_other() {
        let mut counters = BillCounters::default();
        let long = "x".repeat(MAX_LABEL_BYTES + 1);
        let b = Bill { coin: long.clone(), ..bill("1", 10, &long, "1", "0", "1") };
        let fields: Vec<String> = counters.count(&b).into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["coin", "businessType"]);
        assert_eq!(counters.bills, [((OTHER.to_owned(), OTHER.to_owned()), 1)].into());
    }

    #[test]
    fn the_balance_is_the_newest_bills_whatever_the_order_they_arrive_in() {
        let mut counters = BillCounters::default();
        counters.count(&bill("10", 20, "deposit", "1", "0", "3"));
        counters.count(&bill("9", 20, "deposit", "1", "0", "2"));
        counters.count(&bill("8", 19, "deposit", "1", "0", "1"));
        assert_eq!(counters.balances["USDT"].balance.to_string(), "3");
        counters.count(&bill("100", 20, "deposit", "1", "0", "4"));
        assert_eq!(counters.balances["USDT"].balance.to_string(), "4", "id 100 is newer than id 10");
    }
}
