//! Coins by id and by name. The account query takes and answers a coin id (`coinId=2`); bills
//! name their coin (`"coin":"USDT"`). Every coin-scoped series carries both, so that account
//! figures and bill counters join on either; the mapping is the exchange's documented one (2 is
//! USDT), extended by the configuration.

use std::collections::BTreeMap;

/// The coins the exchange documents: only 2, USDT.
const DOCUMENTED: [(u64, &str); 1] = [(2, "USDT")];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coins {
    names: BTreeMap<u64, String>,
}

impl Default for Coins {
    /// The documented coins.
    fn default() -> Self {
        Self { names: DOCUMENTED.iter().map(|(id, name)| (*id, (*name).to_owned())).collect() }
    }
}

impl Coins {
    /// The documented coins and these, which may rename a documented one.
    pub fn with(mut self, names: impl IntoIterator<Item = (u64, String)>) -> Self {
        self.names.extend(names);
        self
    }

    /// The documented coins the configuration renamed: (id, documented name, name given).
    pub fn renamed_documented(&self) -> impl Iterator<Item = (u64, &'static str, &str)> {
        DOCUMENTED.iter().filter_map(|(id, documented)| {
            self.name(*id).filter(|name| name != documented).map(|name| (*id, *documented, name))
        })
    }

    /// The name of the coin of this id, if known.
    pub fn name(&self, id: u64) -> Option<&str> {
        self.names.get(&id).map(String::as_str)
    }

    /// The name of the coin of this id in its text form (as records give it), if known.
    pub fn name_of_text(&self, id: &str) -> Option<&str> {
        self.name(id.parse().ok()?)
    }

    /// A name given to two coin ids (the lower id first), if the configuration did that.
    pub fn name_given_twice(&self) -> Option<(&str, u64, u64)> {
        let mut ids = BTreeMap::new();
        self.names.iter().find_map(|(id, name)| Some((name.as_str(), ids.insert(name.as_str(), *id)?, *id)))
    }

    /// The id of the coin of this name, if known.
    pub fn id(&self, name: &str) -> Option<u64> {
        self.names.iter().find(|(_, known)| *known == name).map(|(id, _)| *id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_coin_is_known_and_the_configuration_adds_or_renames() {
        let coins = Coins::default();
        assert_eq!((coins.name(2), coins.id("USDT"), coins.name(1)), (Some("USDT"), Some(2), None));
        let coins = coins.with([(1, "BTC".to_owned()), (2, "USDT2".to_owned())]);
        assert_eq!((coins.name(1), coins.id("BTC"), coins.name_of_text("2")), (Some("BTC"), Some(1), Some("USDT2")));
        assert_eq!((coins.id("USDT"), coins.name_of_text("x")), (None, None));
    }
}
