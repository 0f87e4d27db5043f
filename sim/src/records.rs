//! The records of the account query (spec 2.3 to 2.5), typed for arithmetic and serialized with
//! exactly the spec's field names: decimals and millisecond times as text, ids as the spec types.
//!
//! Tests need to serve malformed records on purpose, so a collateral or position record is a
//! [`Record`]: the typed value plus raw per-field overrides laid over it when rendered.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

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

/// Spec 2.3.1.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FeeSetting {
    contract_id: String,
    is_set_fee_rate: bool,
    taker_fee_rate: String,
    maker_fee_rate: String,
    is_set_fee_discount: bool,
    fee_discount: String,
    is_set_taker_maker_fee_discount: bool,
    taker_fee_discount: String,
    maker_fee_discount: String,
}

/// Spec 2.3.3.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ModeSetting {
    contract_id: String,
    margin_mode: String,
    separated_mode: String,
    position_mode: String,
}

/// Spec 2.3.4.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LeverageSetting {
    contract_id: String,
    isolated_long_leverage: String,
    isolated_short_leverage: String,
    cross_leverage: String,
    shared_leverage: String,
}

/// Spec 2.3: the account record.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AccountRecord {
    pub(crate) id: String,
    user_id: String,
    client_account_id: String,
    is_system_account: bool,
    /// The documented sample shows null.
    default_fee_setting: Option<FeeSetting>,
    contract_id_to_fee_setting: BTreeMap<String, FeeSetting>,
    contract_id_to_mode_setting: BTreeMap<String, ModeSetting>,
    contract_id_to_leverage_setting: BTreeMap<String, LeverageSetting>,
    create_order_rate_limit_per_minute: i64,
    create_order_delay_milliseconds: i64,
    extra_type: String,
    extra_data_json: String,
    status: String,
    #[serde(with = "text")]
    created_time: i64,
    #[serde(with = "text")]
    updated_time: i64,
}

impl AccountRecord {
    /// A NORMAL account with settings for each of [`CONTRACTS`].
    pub(crate) fn new(id: u64, user_id: u64, now_ms: i64) -> Self {
        let (mut fees, mut modes, mut leverages) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        for (contract, _) in CONTRACTS {
            let contract_id = contract.to_string();
            let fee = FeeSetting {
                contract_id: contract_id.clone(),
                is_set_fee_rate: false,
                taker_fee_rate: TAKER_FEE_RATE.to_string(),
                maker_fee_rate: MAKER_FEE_RATE.to_owned(),
                is_set_fee_discount: false,
                fee_discount: "1".to_owned(),
                is_set_taker_maker_fee_discount: false,
                taker_fee_discount: "1".to_owned(),
                maker_fee_discount: "1".to_owned(),
            };
            let mode = ModeSetting {
                contract_id: contract_id.clone(),
                margin_mode: "SHARED".to_owned(),
                separated_mode: "COMBINED".to_owned(),
                position_mode: "HEDGE".to_owned(),
            };
            let leverage = LeverageSetting {
                contract_id: contract_id.clone(),
                isolated_long_leverage: "20".to_owned(),
                isolated_short_leverage: "20".to_owned(),
                cross_leverage: "20".to_owned(),
                shared_leverage: "20".to_owned(),
            };
            fees.insert(contract_id.clone(), fee);
            modes.insert(contract_id.clone(), mode);
            leverages.insert(contract_id, leverage);
        }
        Self {
            id: id.to_string(),
            user_id: user_id.to_string(),
            client_account_id: "0".to_owned(),
            is_system_account: false,
            default_fee_setting: None,
            contract_id_to_fee_setting: fees,
            contract_id_to_mode_setting: modes,
            contract_id_to_leverage_setting: leverages,
            create_order_rate_limit_per_minute: 0,
            create_order_delay_milliseconds: 0,
            extra_type: String::new(),
            extra_data_json: String::new(),
            status: "NORMAL".to_owned(),
            created_time: now_ms,
            updated_time: now_ms,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        Value::Object(object_of(self))
    }
}

/// Spec 2.4: one collateral record (one per coin, SHARED margin).
#[derive(Debug, Clone, Serialize, Deserialize)]
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
        let zero = Decimal::ZERO;
        Self {
            account_id: account_id.to_owned(),
            coin_id,
            margin_mode: "SHARED".to_owned(),
            cross_contract_id: 0,
            isolated_position_id: "0".to_owned(),
            amount,
            pending_deposit_amount: zero,
            pending_withdraw_amount: zero,
            pending_transfer_in_amount: zero,
            pending_transfer_out_amount: zero,
            is_liquidating: false,
            legacy_amount: zero,
            cum_deposit_amount: zero,
            cum_withdraw_amount: zero,
            cum_transfer_in_amount: zero,
            cum_transfer_out_amount: zero,
            cum_margin_move_in_amount: zero,
            cum_margin_move_out_amount: zero,
            cum_position_open_long_amount: zero,
            cum_position_open_short_amount: zero,
            cum_position_close_long_amount: zero,
            cum_position_close_short_amount: zero,
            cum_position_fill_fee_amount: zero,
            cum_position_liquidate_fee_amount: zero,
            cum_position_funding_amount: zero,
            cum_order_fill_fee_income_amount: zero,
            cum_order_liquidate_fee_income_amount: zero,
            created_time: now_ms,
            updated_time: now_ms,
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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
