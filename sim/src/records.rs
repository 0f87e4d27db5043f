//! The records of the account query (spec 2.3 to 2.5), typed for arithmetic and serialized with
//! exactly the spec's field names: decimals and millisecond times as text, ids as the spec types.
//!
//! Tests need to serve malformed records on purpose, so a collateral or position record is a
//! [`Record`]: the typed value plus raw per-field overrides laid over it when rendered.

use std::fmt::Display;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};

/// The taker fee rate the simulated accounts are configured with; the generator charges it.
pub(crate) const TAKER_FEE_RATE: Decimal = Decimal::from_parts(6, 0, 0, false, 4);
const MAKER_FEE_RATE: &str = "0.0002";

/// The two futures every simulated account has settings for: (contract id, symbol).
pub(crate) const CONTRACTS: [(u64, &str); 2] = [(10_000_001, "cmt_btcusdt"), (10_000_002, "cmt_ethusdt")];

/// Coin names of the demo: id 2 is USDT as documented; the others are made up.
const COINS: [(u64, &str); 3] = [(1, "BTC"), (2, "USDT"), (3, "ETH")];
const UNKNOWN_COIN_PREFIX: &str = "COIN";

pub(crate) fn coin_name(coin_id: u64) -> String {
    COINS
        .iter()
        .find(|(id, _)| *id == coin_id)
        .map_or_else(|| format!("{UNKNOWN_COIN_PREFIX}{coin_id}"), |(_, name)| (*name).to_owned())
}

/// The inverse of [`coin_name`]; `None` for a name no coin id produces.
pub(crate) fn coin_id(name: &str) -> Option<u64> {
    COINS
        .iter()
        .find(|(_, known)| *known == name)
        .map(|(id, _)| *id)
        .or_else(|| name.strip_prefix(UNKNOWN_COIN_PREFIX)?.parse().ok())
        .filter(|id| coin_name(*id) == name)
}

pub(crate) fn contract_symbol(contract_id: u64) -> String {
    CONTRACTS
        .iter()
        .find(|(id, _)| *id == contract_id)
        .map_or_else(|| format!("cmt_{contract_id}"), |(_, symbol)| (*symbol).to_owned())
}

/// Serde adapter: a value carried as its text form (`"12.5"`, `"1713339011237"`).
mod text {
    use super::*;

    pub(super) fn serialize<T: Display, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(value)
    }

    pub(super) fn deserialize<'de, T, D>(deserializer: D) -> Result<T, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// A typed record plus raw overrides of single fields, which may be deliberately malformed.
#[derive(Debug, Clone)]
pub(crate) struct Record<T> {
    pub(crate) value: T,
    overrides: Map<String, Value>,
}

impl<T: Serialize + DeserializeOwned> Record<T> {
    pub(crate) fn new(value: T) -> Self {
        Self { value, overrides: Map::new() }
    }

    /// Sets one field. A well-typed value of a known field goes into the typed record, so later
    /// arithmetic continues from it; anything else is served as given until replaced.
    pub(crate) fn set_field(&mut self, field: &str, raw: Value) {
        let mut fields = object_of(&self.value);
        if fields.contains_key(field) {
            fields.insert(field.to_owned(), raw.clone());
            if let Ok(value) = serde_json::from_value(Value::Object(fields)) {
                self.value = value;
                self.overrides.remove(field);
                return;
            }
        }
        self.overrides.insert(field.to_owned(), raw);
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut fields = object_of(&self.value);
        fields.extend(self.overrides.clone());
        Value::Object(fields)
    }
}

fn object_of<T: Serialize>(value: &T) -> Map<String, Value> {
    // The records are plain structs of strings, numbers and booleans: serializing cannot fail.
    match serde_json::to_value(value) {
        Ok(Value::Object(fields)) => fields,
        _ => Map::new(),
    }
}

/// Spec 2.3: the account record of a NORMAL account with settings (2.3.1, 2.3.3, 2.3.4) for each
/// of [`CONTRACTS`].
pub(crate) fn account_record(id: &str, user_id: u64, now_ms: i64) -> Value {
    let per_contract = |setting: fn(&str) -> Value| -> Map<String, Value> {
        CONTRACTS.iter().map(|(contract, _)| (contract.to_string(), setting(&contract.to_string()))).collect()
    };
    json!({
        "id": id,
        "user_id": user_id.to_string(),
        "client_account_id": "0",
        "is_system_account": false,
        "default_fee_setting": null, // as the documented sample shows
        "contract_id_to_fee_setting": per_contract(|contract_id| json!({
            "contract_id": contract_id,
            "is_set_fee_rate": false,
            "taker_fee_rate": TAKER_FEE_RATE.to_string(),
            "maker_fee_rate": MAKER_FEE_RATE,
            "is_set_fee_discount": false,
            "fee_discount": "1",
            "is_set_taker_maker_fee_discount": false,
            "taker_fee_discount": "1",
            "maker_fee_discount": "1",
        })),
        "contract_id_to_mode_setting": per_contract(|contract_id| json!({
            "contract_id": contract_id,
            "margin_mode": "SHARED",
            "separated_mode": "COMBINED",
            "position_mode": "HEDGE",
        })),
        "contract_id_to_leverage_setting": per_contract(|contract_id| json!({
            "contract_id": contract_id,
            "isolated_long_leverage": "20",
            "isolated_short_leverage": "20",
            "cross_leverage": "20",
            "shared_leverage": "20",
        })),
        "create_order_rate_limit_per_minute": 0,
        "create_order_delay_milliseconds": 0,
        "extra_type": "",
        "extra_data_json": "",
        "status": "NORMAL",
        "created_time": now_ms.to_string(),
        "updated_time": now_ms.to_string(),
    })
}

/// Spec 2.4: one collateral record (one per coin, SHARED margin).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Collateral {
    pub(crate) account_id: String,
    pub(crate) coin_id: u64,
    pub(crate) margin_mode: String,
    pub(crate) cross_contract_id: u64,
    pub(crate) isolated_position_id: String,
    #[serde(with = "text")]
    pub(crate) amount: Decimal,
    #[serde(with = "text")]
    pub(crate) pending_deposit_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) pending_withdraw_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) pending_transfer_in_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) pending_transfer_out_amount: Decimal,
    pub(crate) is_liquidating: bool,
    #[serde(with = "text")]
    pub(crate) legacy_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_deposit_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_withdraw_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_transfer_in_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_transfer_out_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_margin_move_in_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_margin_move_out_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_position_open_long_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_position_open_short_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_position_close_long_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_position_close_short_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_position_fill_fee_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_position_liquidate_fee_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_position_funding_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_order_fill_fee_income_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_order_liquidate_fee_income_amount: Decimal,
    #[serde(with = "text")]
    pub(crate) created_time: i64,
    #[serde(with = "text")]
    pub(crate) updated_time: i64,
}

impl Collateral {
    pub(crate) fn new(account_id: &str, coin_id: u64, amount: Decimal, now_ms: i64) -> Self {
        Self {
            account_id: account_id.to_owned(),
            coin_id,
            margin_mode: "SHARED".to_owned(),
            isolated_position_id: "0".to_owned(),
            amount,
            created_time: now_ms,
            updated_time: now_ms,
            ..Self::default()
        }
    }

    /// Books one bill: the amount moves the collateral, and the accumulator named after the
    /// business type grows. Accumulators count magnitudes, except funding, which can go either
    /// way and so keeps its sign, and fill fees, kept signed (negative when paid). Returns the
    /// new amount, the bill's balance.
    pub(crate) fn apply_bill(
        &mut self,
        business_type: &str,
        amount: Decimal,
        fill_fee: Decimal,
        now_ms: i64,
    ) -> Decimal {
        // Saturating: tests book amounts near the decimal range's end on purpose.
        self.amount = self.amount.saturating_add(amount);
        if business_type == "position_funding" {
            self.cum_position_funding_amount = self.cum_position_funding_amount.saturating_add(amount);
        } else if let Some(total) = self.accumulator(business_type) {
            *total = total.saturating_add(amount.abs());
        }
        // Every bill's fill fee, as the exporter's ledger check compares it (only trades have
        // fees in practice).
        self.cum_position_fill_fee_amount = self.cum_position_fill_fee_amount.saturating_add(fill_fee);
        self.updated_time = now_ms;
        self.amount
    }

    fn accumulator(&mut self, business_type: &str) -> Option<&mut Decimal> {
        Some(match business_type {
            "deposit" => &mut self.cum_deposit_amount,
            "withdraw" => &mut self.cum_withdraw_amount,
            "transfer_in" => &mut self.cum_transfer_in_amount,
            "transfer_out" => &mut self.cum_transfer_out_amount,
            "margin_move_in" => &mut self.cum_margin_move_in_amount,
            "margin_move_out" => &mut self.cum_margin_move_out_amount,
            "position_open_long" => &mut self.cum_position_open_long_amount,
            "position_open_short" => &mut self.cum_position_open_short_amount,
            "position_close_long" => &mut self.cum_position_close_long_amount,
            "position_close_short" => &mut self.cum_position_close_short_amount,
            "order_fill_fee_income" => &mut self.cum_order_fill_fee_income_amount,
            "order_liquidate_fee_income" => &mut self.cum_order_liquidate_fee_income_amount,
            _ => return None,
        })
    }
}

/// Spec 2.5: one open position.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Position {
    pub(crate) id: String,
    pub(crate) account_id: String,
    pub(crate) coin_id: u64,
    pub(crate) contract_id: u64,
    pub(crate) side: String,
    pub(crate) margin_mode: String,
    pub(crate) separated_mode: String,
    pub(crate) separated_open_order_id: String,
    #[serde(with = "text")]
    pub(crate) leverage: Decimal,
    #[serde(with = "text")]
    pub(crate) size: Decimal,
    #[serde(with = "text")]
    pub(crate) open_value: Decimal,
    #[serde(with = "text")]
    pub(crate) open_fee: Decimal,
    #[serde(with = "text")]
    pub(crate) funding_fee: Decimal,
    #[serde(with = "text")]
    pub(crate) isolated_margin: Decimal,
    pub(crate) is_auto_append_isolated_margin: bool,
    #[serde(with = "text")]
    pub(crate) cum_open_size: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_open_value: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_open_fee: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_close_size: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_close_value: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_close_fee: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_funding_fee: Decimal,
    #[serde(with = "text")]
    pub(crate) cum_liquidate_fee: Decimal,
    pub(crate) created_match_sequence_id: String,
    pub(crate) updated_match_sequence_id: String,
    #[serde(with = "text")]
    pub(crate) created_time: i64,
    #[serde(with = "text")]
    pub(crate) updated_time: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn coin_names_round_trip() {
        assert_eq!(coin_name(2), "USDT");
        assert_eq!(coin_name(42), "COIN42");
        for id in [1, 2, 3, 42] {
            assert_eq!(coin_id(&coin_name(id)), Some(id));
        }
        assert_eq!(coin_id("DOGE"), None);
        assert_eq!(coin_id("COIN2"), None, "coin 2 is called USDT");
        assert_eq!(coin_id("COIN"), None);
        assert_eq!(contract_symbol(10_000_001), "cmt_btcusdt");
        assert_eq!(contract_symbol(7), "cmt_7");
    }

    #[test]
    fn well_typed_fields_go_into_the_record_and_malformed_ones_are_served_raw() {
        let mut record = Record::new(Collateral::new("1", 2, Decimal::from(10), 5));
        record.set_field("amount", json!("12.5"));
        assert_eq!(record.value.amount, Decimal::new(125, 1));
        record.set_field("amount", json!("abc"));
        assert_eq!(record.value.amount, Decimal::new(125, 1));
        assert_eq!(record.to_json()["amount"], json!("abc"));
        record.set_field("brand_new", json!(1));
        assert_eq!(record.to_json()["brand_new"], json!(1));
        record.set_field("amount", json!("3"));
        assert_eq!(record.to_json()["amount"], json!("3"));
        assert_eq!(record.to_json()["created_time"], json!("5"));
    }

    #[test]
    fn bills_move_the_amount_and_their_accumulators() {
        let mut c = Collateral::new("1", 2, Decimal::from(100), 0);
        assert_eq!(c.apply_bill("withdraw", Decimal::from(-30), Decimal::ZERO, 1), Decimal::from(70));
        assert_eq!(c.cum_withdraw_amount, Decimal::from(30));
        c.apply_bill("position_funding", Decimal::from(-2), Decimal::ZERO, 2);
        c.apply_bill("position_open_long", Decimal::from(-10), Decimal::ONE, 3);
        assert_eq!(c.cum_position_funding_amount, Decimal::from(-2));
        assert_eq!(c.cum_position_open_long_amount, Decimal::from(10));
        assert_eq!(c.cum_position_fill_fee_amount, Decimal::ONE);
        assert_eq!(c.amount, Decimal::from(58));
        assert_eq!(c.updated_time, 3);
    }
}
