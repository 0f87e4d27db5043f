//! Made-up account activity for the demo, reproducible from a seed.
//!
//! Every tick, for every account and coin: funding settles on open positions every few ticks,
//! positions sometimes grow, and at most one position opens or closes; a coin without a position
//! opens one at once, so that a demo shows every kind of figure from its first tick on. Every change
//! goes through the same book operations as scripted tests, so bills, balances, `cum_*`
//! accumulators, update times and `version` stay consistent.
//!
//! This is a desk's normal day, on which no shipped alert fires: small trades and funding, never
//! a deposit, withdrawal, transfer or liquidation (those are what the alerts are for; a test or a
//! demo user starts them through the control route, see `control.rs`). The test
//! `normal_activity_stays_under_every_shipped_alert_threshold` holds it to the thresholds.
//!
//! Collateral follows spec 4.1: buying (opening a long, closing a short) takes the traded value
//! out of the collateral, selling puts it in, and the fill fee is paid from it too. Trades are
//! kept small against the collateral so that it stays positive and steady.

use std::time::Duration;

use rust_decimal::Decimal;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::book::{Account, Book, NewBill, NewPosition};
use super::records::{coin_name, contract_symbol, Position, CONTRACTS, TAKER_FEE_RATE};
use super::SimExchange;

const FUNDING_EVERY_TICKS: u64 = 3;
const MAX_POSITIONS_PER_COIN: usize = 2;
/// The value of one contract, in collateral units: a position's size is its value over this.
const CONTRACT_VALUE: Decimal = Decimal::from_parts(100, 0, 0, false, 0);
/// A position grows no further once its value reaches this share of the collateral.
const MAX_POSITION_SHARE: Decimal = Decimal::from_parts(3, 0, 0, false, 2);
/// How often the demo's activity ticks: about 230 small trades an hour per account and coin.
pub const DEMO_TICK: Duration = Duration::from_secs(10);

pub(crate) fn spawn(sim: SimExchange, seed: u64, tick: Duration) -> JoinHandle<()> {
    let mut activity = Activity::new(seed);
    tokio::spawn(async move {
        // A zero period would make `interval` panic. The first tick comes one period after the
        // start: a demo's exporter has begun counting bills by then, so it counts the first trades.
        let period = tick.max(Duration::from_millis(1));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            sim.with_book(|book, now_ms| activity.step(book, now_ms));
        }
    })
}

/// The generator's own state: its random sequence and its count of ticks.
#[derive(Debug)]
pub(crate) struct Activity {
    rng: fastrand::Rng,
    tick: u64,
}

/// One account's coin during one tick: where the generator's changes go.
struct Desk<'a> {
    book: &'a mut Book,
    api_key: &'a str,
    coin_id: u64,
    now_ms: i64,
}

impl Desk<'_> {
    fn account(&self) -> Option<&Account> {
        self.book.account(self.api_key)
    }

    fn collateral(&self) -> Decimal {
        self.account().map_or(Decimal::ZERO, |account| account.collateral_amount(self.coin_id))
    }

    fn positions(&self) -> Vec<Position> {
        self.account().map_or_else(Vec::new, |account| account.positions_of(self.coin_id))
    }

    fn book_bill(&mut self, business_type: &str, symbol: String, amount: Decimal, fill_fee: Decimal) {
        let bill = NewBill {
            coin: coin_name(self.coin_id),
            symbol,
            business_type: business_type.to_owned(),
            amount,
            fill_fee,
            ..NewBill::default()
        };
        self.book.add_bill(self.api_key, bill, self.now_ms);
    }

    /// Books a trade of `value` on a position: the bill, with its fee paid from the collateral.
    fn book_trade(&mut self, side: &str, contract_id: u64, opening: bool, value: Decimal, fee: Decimal) {
        let long = side == "LONG";
        let action = if opening { "open" } else { "close" };
        let business_type = format!("position_{action}_{}", if long { "long" } else { "short" });
        let buying = long == opening;
        let amount = if buying { -value } else { value };
        // A fee paid is money leaving the account: negative, like the amount (the README's
        // assumption, since the API does not show the sign).
        self.book_bill(&business_type, contract_symbol(contract_id), amount - fee, -fee);
    }

    fn edit_position(&mut self, position_id: &str, edit: impl FnOnce(&mut Position)) {
        self.book.edit_position(self.api_key, position_id, self.now_ms, edit);
    }
}

/// A decimal amount as the exchange would show it: at most 8 places, no trailing zeros.
fn money(value: Decimal) -> Decimal {
    value.round_dp(8).normalize()
}

fn fee_on(value: Decimal) -> Decimal {
    money(value * TAKER_FEE_RATE)
}

impl Activity {
    pub(crate) fn new(seed: u64) -> Self {
        Self { rng: fastrand::Rng::with_seed(seed), tick: 0 }
    }

    /// One tick over every account and coin, in key and coin order so a seed replays exactly.
    pub(crate) fn step(&mut self, book: &mut Book, now_ms: i64) {
        self.tick += 1;
        for api_key in book.api_keys() {
            let coin_ids = book.account(&api_key).map(Account::coin_ids).unwrap_or_default();
            for coin_id in coin_ids {
                self.step_coin(&mut Desk { book, api_key: &api_key, coin_id, now_ms });
            }
        }
    }

    fn step_coin(&mut self, desk: &mut Desk) {
        if desk.account().is_some_and(|account| account.is_liquidating(desk.coin_id)) {
            return; // a liquidation someone started (a test, the control route) is theirs to end
        }
        let collateral = desk.collateral();
        for position in desk.positions() {
            if self.tick.is_multiple_of(FUNDING_EVERY_TICKS) {
                self.settle_funding(desk, &position);
            }
            if self.rng.u8(..6) == 0 && position.open_value < collateral * MAX_POSITION_SHARE {
                self.grow(desk, &position);
            }
        }
        let positions = desk.positions();
        let event = self.rng.u64(0..=99);
        let chosen = self.rng.choice(&positions).map(|position| position.id.clone());
        match (event, chosen) {
            (_, None) => self.open(desk),
            (0..=11, _) if positions.len() < MAX_POSITIONS_PER_COIN => self.open(desk),
            (12..=19, Some(position_id)) => {
                let price_change = self.basis_points(-300, 300);
                close(desk, &position_id, |_| price_change);
            }
            _ => {}
        }
    }

    /// A fraction drawn uniformly from `low..=high` basis points (hundredths of a percent).
    fn basis_points(&mut self, low: i64, high: i64) -> Decimal {
        let drawn = Decimal::from(low) + Decimal::from(self.rng.u64(0..=high.abs_diff(low)));
        drawn / Decimal::from(10_000)
    }

    /// Opens a position worth 0.5-1.5% of the collateral.
    fn open(&mut self, desk: &mut Desk) {
        let Some(&(contract_id, _)) = self.rng.choice(&CONTRACTS) else {
            return;
        };
        let side = if self.rng.bool() { "LONG" } else { "SHORT" };
        let leverage = Decimal::from(self.rng.u64(5..=20));
        let open_value = money(desk.collateral() * self.basis_points(50, 150));
        if open_value <= Decimal::ZERO {
            return;
        }
        let new = NewPosition {
            coin_id: desk.coin_id,
            contract_id,
            side: side.to_owned(),
            margin_mode: "SHARED".to_owned(),
            leverage,
            size: money(open_value / CONTRACT_VALUE),
            open_value,
        };
        let position_id = desk.book.open_position(desk.api_key, new, desk.now_ms);
        let fee = fee_on(open_value);
        desk.edit_position(&position_id, |position| {
            position.open_fee = fee;
            position.cum_open_fee = fee;
        });
        desk.book_trade(side, contract_id, true, open_value, fee);
    }

    /// Adds 5-20% to a position.
    fn grow(&mut self, desk: &mut Desk, position: &Position) {
        let added = money(position.open_value * self.basis_points(500, 2000));
        let added_size = money(added / CONTRACT_VALUE);
        let fee = fee_on(added);
        desk.edit_position(&position.id, |position| {
            position.size += added_size;
            position.open_value += added;
            position.open_fee += fee;
            position.cum_open_size += added_size;
            position.cum_open_value += added;
            position.cum_open_fee += fee;
        });
        desk.book_trade(&position.side, position.contract_id, true, added, fee);
    }

    /// Settles funding at -3 to +3 basis points of the position's value: longs pay a positive
    /// rate to shorts.
    fn settle_funding(&mut self, desk: &mut Desk, position: &Position) {
        let paid = money(position.open_value * self.basis_points(-3, 3));
        let amount = if position.side == "LONG" { -paid } else { paid };
        desk.edit_position(&position.id, |position| {
            position.funding_fee += amount;
            position.cum_funding_fee += amount;
        });
        desk.book_bill("position_funding", contract_symbol(position.contract_id), amount, Decimal::ZERO);
    }
}

/// Closes a position, if still open, at its value moved by `price_change` (a fraction).
fn close(desk: &mut Desk, position_id: &str, price_change: impl FnOnce(&Position) -> Decimal) {
    let Some(position) = desk.book.take_position(desk.api_key, position_id) else {
        return;
    };
    let close_value = money(position.open_value * (Decimal::ONE + price_change(&position)));
    desk.book_trade(&position.side, position.contract_id, false, close_value, fee_on(close_value));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credentials, SimBill};
    use std::collections::BTreeMap;

    fn run(seed: u64, ticks: i64) -> Book {
        let mut book = Book::default();
        book.add_account(Credentials::generate(1), &[1, 2], 0);
        book.add_account(Credentials::generate(2), &[2], 0);
        let mut activity = Activity::new(seed);
        for tick in 0..ticks {
            activity.step(&mut book, tick * 1000);
        }
        book
    }

    /// Each account's bills, in the order booked.
    fn bills_by_account(book: &mut Book) -> Vec<Vec<SimBill>> {
        book.api_keys().iter().map(|key| book.bills(key)).collect()
    }

    fn kinds_and_amounts(bills: &[SimBill]) -> Vec<(String, Decimal)> {
        bills.iter().map(|bill| (bill.business_type.clone(), bill.amount)).collect()
    }

    #[test]
    fn a_liquidation_started_from_outside_is_left_alone() {
        let mut book = run(3, 50);
        let key = Credentials::generate(2).api_key;
        book.set_liquidating(&key, 2, true, 50_000);
        let booked = book.bills(&key).len();
        let mut activity = Activity::new(3);
        for tick in 51..200 {
            activity.step(&mut book, tick * 1000);
        }
        assert!(book.account(&key).unwrap().is_liquidating(2));
        assert_eq!(book.bills(&key).len(), booked, "no activity on a coin under liquidation");
    }

    #[test]
    fn the_same_seed_replays_the_same_bills() {
        let first = bills_by_account(&mut run(7, 300)).concat();
        let again = bills_by_account(&mut run(7, 300)).concat();
        let other = bills_by_account(&mut run(8, 300)).concat();
        assert!(first.len() > 100, "{} bills", first.len());
        assert_eq!(kinds_and_amounts(&first), kinds_and_amounts(&again));
        assert_ne!(kinds_and_amounts(&first), kinds_and_amounts(&other));
    }

    #[test]
    fn activity_is_varied_and_believable() {
        let mut book = run(42, 2000);
        let by_account = bills_by_account(&mut book);
        let bills = by_account.concat();
        for kind in [
            "position_open_long",
            "position_open_short",
            "position_close_long",
            "position_close_short",
            "position_funding",
        ] {
            assert!(bills.iter().any(|bill| bill.business_type == kind), "no {kind} bill");
        }
        for bill in &bills {
            assert!(bill.balance > Decimal::ZERO, "balance {} after {:?}", bill.balance, bill);
            for value in [bill.amount, bill.fill_fee, bill.balance] {
                assert!(value.scale() <= 8, "{value} in {bill:?}");
            }
        }
        for (key, bills) in book.api_keys().into_iter().zip(by_account) {
            for coin_id in book.account(&key).map(Account::coin_ids).unwrap_or_default() {
                let json = book.account_json(&key, coin_id);
                assert!(json["position"].as_array().map_or(0, Vec::len) <= MAX_POSITIONS_PER_COIN);
                let last = bills.iter().rev().find(|bill| bill.coin == coin_name(coin_id));
                let amount = json["collateral"][0]["amount"].as_str().map(str::to_owned);
                assert_eq!(amount, last.map(|bill| bill.balance.to_string()));
            }
        }
    }

    /// The running totals of each collateral record are what its bills add up to: by magnitude
    /// for trades, signed for funding and fees (what the exporter's ledger check compares).
    #[test]
    fn running_totals_follow_the_bills() {
        let mut book = run(11, 500);
        for key in book.api_keys() {
            let bills = book.bills(&key);
            for coin_id in book.account(&key).map(Account::coin_ids).unwrap_or_default() {
                let collateral = book.account_json(&key, coin_id)["collateral"][0].clone();
                let of_coin: Vec<&SimBill> = bills.iter().filter(|b| b.coin == coin_name(coin_id)).collect();
                let total = |field: &str| collateral[field].as_str().unwrap().parse::<Decimal>().unwrap();
                for kind in ["position_open_long", "position_open_short", "position_close_long", "position_close_short"]
                {
                    let sum: Decimal = of_coin.iter().filter(|b| b.business_type == kind).map(|b| b.amount.abs()).sum();
                    assert_eq!(total(&format!("cum_{kind}_amount")), sum, "{kind}");
                }
                let funding: Decimal =
                    of_coin.iter().filter(|b| b.business_type == "position_funding").map(|b| b.amount).sum();
                assert_eq!(total("cum_position_funding_amount"), funding);
                assert_eq!(total("cum_position_fill_fee_amount"), of_coin.iter().map(|b| b.fill_fee).sum::<Decimal>());
                assert!(funding != Decimal::ZERO && of_coin.len() > 100, "{} bills", of_coin.len());
            }
        }
    }

    /// The value of a `capi:alert_threshold:*` recording rule of the shipped rules.
    fn threshold(name: &str) -> Decimal {
        let rules = include_str!("../../deploy/prometheus/rules.yml");
        let rule = rules.split(&format!("record: capi:alert_threshold:{name}\n")).nth(1).expect("the rule");
        let value = rule.split("vector(").nth(1).and_then(|rest| rest.split(')').next()).expect("vector(N)");
        value.parse().expect("a number")
    }

    /// A demo hour at the demo's tick, on both accounts: none of the alerts that watch the
    /// money fires on it, by a margin of two.
    #[test]
    fn normal_activity_stays_under_every_shipped_alert_threshold() {
        let ticks_an_hour = (3600 / DEMO_TICK.as_secs()) as i64;
        let tick_ms = DEMO_TICK.as_millis() as i64;
        for seed in [1, 7, 42] {
            let mut book = Book::default();
            book.add_account(Credentials::generate(1), &[1, 2], 0);
            book.add_account(Credentials::generate(2), &[2], 0);
            let mut activity = Activity::new(seed);
            let mut collateral: BTreeMap<(String, u64), Vec<Decimal>> = BTreeMap::new();
            for tick in 0..3 * ticks_an_hour {
                activity.step(&mut book, tick * tick_ms);
                for key in book.api_keys() {
                    for coin_id in book.account(&key).map(Account::coin_ids).unwrap_or_default() {
                        let amount = book.account(&key).unwrap().collateral_amount(coin_id);
                        collateral.entry((key.clone(), coin_id)).or_default().push(amount);
                    }
                }
            }
            let fifteen_minutes = (900 / DEMO_TICK.as_secs()) as usize;
            for ((key, coin_id), amounts) in &collateral {
                let worst_drop = amounts
                    .windows(fifteen_minutes + 1)
                    .map(|window| (window[0] - window[fifteen_minutes]) / window[0])
                    .max()
                    .unwrap();
                assert!(
                    worst_drop * Decimal::TWO < threshold("collateral_drop_ratio_15m"),
                    "{key} {coin_id}: {worst_drop}"
                );
            }
            for key in book.api_keys() {
                let bills = book.bills(&key);
                for hour in 0..3 {
                    let of_hour = |bill: &&SimBill| bill.ctime_ms / (ticks_an_hour * tick_ms) == hour;
                    let fees: Decimal = bills.iter().filter(of_hour).map(|bill| -bill.fill_fee).sum();
                    let funding_paid: Decimal = bills
                        .iter()
                        .filter(of_hour)
                        .filter(|bill| bill.business_type == "position_funding" && bill.amount < Decimal::ZERO)
                        .map(|bill| -bill.amount)
                        .sum();
                    assert!(
                        fees * Decimal::TWO < threshold("fill_fee_per_hour"),
                        "seed {seed} hour {hour}: fees {fees}"
                    );
                    assert!(funding_paid * Decimal::TWO < threshold("funding_paid_per_hour"), "{funding_paid}");
                }
                let unexpected = bills.iter().find(|bill| !bill.business_type.starts_with("position_"));
                assert_eq!(unexpected, None, "deposits, transfers and liquidations are not a normal day");
            }
        }
    }
}
