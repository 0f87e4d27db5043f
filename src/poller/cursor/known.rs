//! The business types, coins and symbols an account's bills have shown. A crowded millisecond is
//! split over all of them, not only over those its first, full page shows: the API cannot list
//! the values an account uses, so what its bills have ever shown is the best list there is.
//!
//! Bounded, because the values come from the network: a value longer than [`MAX_VALUE_BYTES`] is
//! not remembered, and past a limit per kind the value seen longest ago is forgotten. Either is
//! reported (a crowded millisecond's split may then miss that value's bills, which its
//! `loss="possible"` report already allows for). Saved in the state file with the cursor.

use crate::api::model::Bill;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// At most this many business types are remembered (21 are documented).
pub const MAX_BUSINESS_TYPES: usize = 64;
/// At most this many coins are remembered.
pub const MAX_COINS: usize = 64;
/// At most this many symbols are remembered, over all coins (an exchange lists a few hundred
/// contracts).
pub const MAX_SYMBOLS: usize = 2_000;

/// Values longer than this are not remembered (the exchange's are a few bytes long).
pub const MAX_VALUE_BYTES: usize = 64;

/// Each value with the creation time of the newest bill that showed it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownValues {
    pub business_types: BTreeMap<String, i64>,
    pub coins: BTreeMap<String, i64>,
    /// Symbols by the coin of the bills that showed them.
    pub symbols: BTreeMap<String, BTreeMap<String, i64>>,
}

impl KnownValues {
    /// Remembers the non-empty values of these bills, and returns the field of each value that
    /// was too long to remember or made another be forgotten.
    pub fn learn(&mut self, bills: &[Bill]) -> Vec<&'static str> {
        let mut unremembered = Vec::new();
        for bill in bills {
            let at = bill.ctime_ms;
            let mut note = |field: &'static str, complete: bool| {
                if !complete {
                    unremembered.push(field);
                }
            };
            note("businessType", remember(&mut self.business_types, &bill.business_type, at, MAX_BUSINESS_TYPES));
            note("coin", remember(&mut self.coins, &bill.coin, at, MAX_COINS));
            if !bill.coin.is_empty() && !bill.symbol.is_empty() {
                note("symbol", self.remember_symbol(&bill.coin, &bill.symbol, at));
            }
        }
        unremembered
    }

    /// The symbols bills of `coin` have shown.
    pub fn symbols_of<'a>(&'a self, coin: &str) -> impl Iterator<Item = &'a str> {
        self.symbols.get(coin).into_iter().flat_map(|symbols| symbols.keys().map(String::as_str))
    }

    pub fn symbol_count(&self) -> usize {
        self.symbols.values().map(BTreeMap::len).sum()
    }

    /// Like [`remember`], for a symbol of a coin.
    fn remember_symbol(&mut self, coin: &str, symbol: &str, at: i64) -> bool {
        if let Some(seen) = self.symbols.get_mut(coin).and_then(|symbols| symbols.get_mut(symbol)) {
            *seen = (*seen).max(at);
            return true;
        }
        if coin.len() > MAX_VALUE_BYTES || symbol.len() > MAX_VALUE_BYTES {
            return false;
        }
        let full = self.symbol_count() >= MAX_SYMBOLS;
        if full {
            self.forget_oldest_symbol();
        }
        self.symbols.entry(coin.to_owned()).or_default().insert(symbol.to_owned(), at);
        !full
    }

    fn forget_oldest_symbol(&mut self) {
        let oldest = self
            .symbols
            .iter()
            .flat_map(|(coin, symbols)| symbols.iter().map(move |(symbol, at)| (*at, coin, symbol)))
            .min()
            .map(|(_, coin, symbol)| (coin.clone(), symbol.clone()));
        if let Some((coin, symbol)) = oldest {
            let symbols = self.symbols.entry(coin.clone()).or_default();
            symbols.remove(&symbol);
            if symbols.is_empty() {
                self.symbols.remove(&coin);
            }
        }
    }
}

/// Notes `value` as seen at `at`, forgetting the value seen longest ago when `max` are known.
/// False when the value was too long to keep or another was forgotten for it.
fn remember(values: &mut BTreeMap<String, i64>, value: &str, at: i64, max: usize) -> bool {
    if value.is_empty() {
        return true;
    }
    if let Some(seen) = values.get_mut(value) {
        *seen = (*seen).max(at);
        return true;
    }
    if value.len() > MAX_VALUE_BYTES {
        return false;
    }
    let full = values.len() >= max;
    if full {
        let oldest = values.iter().min_by_key(|(_, at)| **at).map(|(value, _)| value.clone());
        oldest.map(|value| values.remove(&value));
    }
    values.insert(value.to_owned(), at);
    !full
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bill(kind: &str, coin: &str, symbol: &str, ctime_ms: i64) -> Bill {
        Bill {
            id: "1".into(),
            coin: coin.into(),
            symbol: symbol.into(),
            business_type: kind.into(),
            amount: None,
            balance: None,
            fill_fee: None,
            ctime_ms,
        }
    }

    #[test]
    fn values_are_remembered_with_the_newest_time_and_empty_ones_are_not() {
        let mut known = KnownValues::default();
        let unremembered = known.learn(&[bill("deposit", "USDT", "", 5), bill("deposit", "BTC", "cmt_btcusd", 3)]);
        assert!(unremembered.is_empty());
        assert!(known.learn(&[bill("deposit", "USDT", "cmt_btcusdt", 4)]).is_empty());
        assert_eq!(known.business_types, [("deposit".to_string(), 5)].into());
        assert_eq!(known.coins, [("BTC".to_string(), 3), ("USDT".to_string(), 5)].into());
        assert_eq!(known.symbols_of("USDT").collect::<Vec<_>>(), ["cmt_btcusdt"]);
        assert_eq!(known.symbols_of("BTC").collect::<Vec<_>>(), ["cmt_btcusd"]);
        assert_eq!(known.symbols_of("ETH").count(), 0);
    }

    #[test]
    fn past_the_limit_the_value_seen_longest_ago_is_forgotten() {
        let mut known = KnownValues::default();
        let coins: Vec<Bill> = (0..MAX_COINS as i64 + 1).map(|i| bill("", &format!("C{i}"), "", i)).collect();
        assert_eq!(known.learn(&coins), ["coin"], "the one value that made another be forgotten");
        assert_eq!(known.coins.len(), MAX_COINS);
        assert!(!known.coins.contains_key("C0"), "the oldest goes");
        assert!(known.coins.contains_key(&format!("C{MAX_COINS}")), "the newest stays");

        let mut known = KnownValues::default();
        let symbols: Vec<Bill> =
            (0..MAX_SYMBOLS as i64 + 10).map(|i| bill("", &format!("C{}", i % 3), &format!("S{i}"), i)).collect();
        assert_eq!(known.learn(&symbols), ["symbol"; 10]);
        assert_eq!(known.symbol_count(), MAX_SYMBOLS);
        assert!(known.symbols_of("C0").all(|s| s != "S0"), "the first seen are forgotten first");
    }

    #[test]
    fn values_too_long_are_not_remembered_and_said() {
        let mut known = KnownValues::default();
        let long = "x".repeat(MAX_VALUE_BYTES + 1);
        let fits = "y".repeat(MAX_VALUE_BYTES);
        let unremembered = known.learn(&[bill(&long, &long, "s", 1), bill(&fits, "USDT", &long, 2)]);
        assert_eq!(unremembered, ["businessType", "coin", "symbol", "symbol"]);
        assert_eq!(known.business_types.keys().collect::<Vec<_>>(), [&fits]);
        assert_eq!(known.coins.keys().collect::<Vec<_>>(), ["USDT"]);
        assert_eq!(known.symbol_count(), 0);
    }
}
