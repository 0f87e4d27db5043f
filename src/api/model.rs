//! Typed models of the two answers (spec sections 2.1 to 2.5) and their lenient decoding.

use super::fields::{record, DecodeProblem, FieldReader, Millis};
use super::json::{Json, JsonObject};
use rust_decimal::Decimal;
use std::collections::BTreeMap;

/// The business types the bill query documents (spec 4.1), used to split a crowded millisecond.
pub const BUSINESS_TYPES: [&str; 21] = [
    "deposit",
    "withdraw",
    "transfer_in",
    "transfer_out",
    "margin_move_in",
    "margin_move_out",
    "position_open_long",
    "position_open_short",
    "position_close_long",
    "position_close_short",
    "position_funding",
    "order_fill_fee_income",
    "order_liquidate_fee_income",
    "start_liquidate",
    "finish_liquidate",
    "order_fix_margin_amount",
    "tracking_follow_pay",
    "tracking_system_pre_receive",
    "tracking_follow_back",
    "tracking_trader_income",
    "tracking_third_party_share",
];

/// One ledger entry (spec 2.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bill {
    /// Exact id text: ids exceed 2^53 and ids one apart are different bills.
    pub id: String,
    pub coin: String,
    pub symbol: String,
    pub business_type: String,
    pub amount: Option<Decimal>,
    pub balance: Option<Decimal>,
    pub fill_fee: Option<Decimal>,
    /// Creation time in milliseconds (`cTime` or `ctime`).
    pub ctime_ms: i64,
}

/// The most bills one query may return (spec 4.1), and the page size the cursor asks for.
pub const MAX_PAGE: u32 = 100;

/// One page of the bill query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BillPage {
    pub has_next_page: bool,
    pub items: Vec<Bill>,
}

/// Decodes the bill query's answer. Items without a usable id or time cannot be counted exactly
/// once, so they are dropped and reported as problems; the rest of the page is kept.
pub fn decode_bill_page(body: &JsonObject<'_>, problems: &mut Vec<DecodeProblem>) -> Result<BillPage, &'static str> {
    let mut reader = FieldReader::new(body, "bill_page", problems);
    let has_next_page = reader.value::<bool>("hasNextPage");
    let items = reader.array("items").ok_or("bill answer has no items array")?;
    // A page longer than asked for answers no query the cursor made; its bills would be held
    // until their millisecond settles, in a number the network would choose.
    if items.len() > MAX_PAGE as usize {
        return Err("bill answer has more items than the 100 asked for");
    }
    // More bills than it lists, yet none listed: taken at its word, the cursor would split the
    // window down to single milliseconds and report them crowded, asking again and again.
    if has_next_page == Some(true) && items.is_empty() {
        return Err("bill answer says more bills follow, yet lists none");
    }
    let has_next_page = has_next_page.unwrap_or_else(|| {
        let (assumed, detail) = match items.is_empty() {
            true => (false, "missing; assumed false as the answer lists no bill"),
            false => (true, "missing; assumed true so the window is split"),
        };
        reader.problem("hasNextPage", detail);
        assumed
    });
    let items = items.into_iter().filter_map(|item| decode_bill(item, reader.problems())).collect();
    Ok(BillPage { has_next_page, items })
}

/// The longest bill id kept (the exchange's have 18 digits): ids are held until their
/// millisecond settles, so their size must not be the network's to choose.
pub const MAX_BILL_ID_BYTES: usize = 64;

fn decode_bill(item: Json<'_>, problems: &mut Vec<DecodeProblem>) -> Option<Bill> {
    let Some(object) = item.object() else {
        DecodeProblem::note(problems, "bill", "items[]", "not an object");
        return None;
    };
    let mut reader = FieldReader::new(&object, "bill", problems);
    // A bill is counted once by its id, at its time: without either it cannot be counted.
    let id = reader.read(&["billId", "billID", "id"], |value| {
        let id = normalize_id(super::fields::text(value)?);
        if id.is_empty() {
            Err("empty; the bill is skipped")
        } else if id.len() > MAX_BILL_ID_BYTES {
            Err("longer than 64 bytes; the bill is skipped")
        } else {
            Ok(id)
        }
    });
    let ctime = reader.read(&["cTime", "ctime"], super::fields::integer);
    if id.is_none() && reader.raw(&["billId", "billID", "id"]).is_none() {
        reader.problem("billId", "missing; the bill is skipped");
    }
    if ctime.is_none() && reader.raw(&["cTime", "ctime"]).is_none() {
        reader.problem("cTime", "missing; the bill is skipped");
    }
    let (Some(id), Some(ctime_ms)) = (id, ctime) else { return None };
    // Counted all the same (the count is by id), but its coin, type, amount or balance is not
    // known: without its balance, `capi_bill_balance` still shows an older bill's.
    for field in ["coin", "businessType", "amount", "balance"] {
        if reader.raw(&[field]).is_none() {
            reader.problem(field, "missing or null; the bill is counted without it");
        }
    }
    Some(Bill {
        id,
        coin: reader.text("coin").unwrap_or_default(),
        symbol: reader.text("symbol").unwrap_or_default(),
        business_type: reader.text("businessType").unwrap_or_default(),
        amount: reader.value("amount"),
        balance: reader.value("balance"),
        fill_fee: reader.value("fillFee"),
        ctime_ms,
    })
}

/// `"0042"` and `42` are the same bill.
fn normalize_id(id: String) -> String {
    let trimmed = id.trim();
    if trimmed.len() > 1 && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        let significant = trimmed.trim_start_matches('0');
        return if significant.is_empty() { "0".into() } else { significant.into() };
    }
    trimmed.to_string()
}

record! {
    /// Fee configuration (spec 2.3.1), the default one or one per futures contract.
    pub struct FeeSetting as "fee_setting" {
        text { contract_id }
        numbers {
            is_set_fee_rate: bool,
            taker_fee_rate: Decimal,
            maker_fee_rate: Decimal,
            is_set_fee_discount: bool,
            fee_discount: Decimal,
            is_set_taker_maker_fee_discount: bool,
            taker_fee_discount: Decimal,
            maker_fee_discount: Decimal,
        }
    }
}

record! {
    /// Mode setting of one futures contract (spec 2.3.3).
    pub struct ModeSetting as "mode_setting" {
        text { contract_id, margin_mode, separated_mode, position_mode }
        numbers {}
    }
}

record! {
    /// Leverage setting of one futures contract (spec 2.3.4).
    pub struct LeverageSetting as "leverage_setting" {
        text { contract_id }
        numbers {
            isolated_long_leverage: Decimal,
            isolated_short_leverage: Decimal,
            cross_leverage: Decimal,
            shared_leverage: Decimal,
        }
    }
}

record! {
    /// The account record's scalar fields (spec 2.3); the per-contract maps are in [`Account`].
    pub struct AccountFields as "account" {
        text { id, user_id, client_account_id, extra_type, extra_data_json, status }
        numbers {
            is_system_account: bool,
            create_order_rate_limit_per_minute: Decimal,
            create_order_delay_milliseconds: Millis,
            created_time: Millis,
            updated_time: Millis,
        }
    }
}

record! {
    /// One collateral record (spec 2.4).
    pub struct Collateral as "collateral" {
        text { account_id, coin_id, margin_mode, cross_contract_id, isolated_position_id }
        numbers {
            amount: Decimal,
            pending_deposit_amount: Decimal,
            pending_withdraw_amount: Decimal,
            pending_transfer_in_amount: Decimal,
            pending_transfer_out_amount: Decimal,
            is_liquidating: bool,
            legacy_amount: Decimal,
            cum_deposit_amount: Decimal,
            cum_withdraw_amount: Decimal,
            cum_transfer_in_amount: Decimal,
            cum_transfer_out_amount: Decimal,
            cum_margin_move_in_amount: Decimal,
            cum_margin_move_out_amount: Decimal,
            cum_position_open_long_amount: Decimal,
            cum_position_open_short_amount: Decimal,
            cum_position_close_long_amount: Decimal,
            cum_position_close_short_amount: Decimal,
            cum_position_fill_fee_amount: Decimal,
            cum_position_liquidate_fee_amount: Decimal,
            cum_position_funding_amount: Decimal,
            cum_order_fill_fee_income_amount: Decimal,
            cum_order_liquidate_fee_income_amount: Decimal,
            created_time: Millis,
            updated_time: Millis,
        }
    }
}

record! {
    /// One position record (spec 2.5).
    pub struct Position as "position" {
        text { id, account_id, coin_id, contract_id, side, margin_mode, separated_mode, separated_open_order_id }
        numbers {
            leverage: Decimal,
            size: Decimal,
            open_value: Decimal,
            open_fee: Decimal,
            funding_fee: Decimal,
            isolated_margin: Decimal,
            is_auto_append_isolated_margin: bool,
            cum_open_size: Decimal,
            cum_open_value: Decimal,
            cum_open_fee: Decimal,
            cum_close_size: Decimal,
            cum_close_value: Decimal,
            cum_close_fee: Decimal,
            cum_funding_fee: Decimal,
            cum_liquidate_fee: Decimal,
            created_match_sequence_id: Decimal,
            updated_match_sequence_id: Decimal,
            created_time: Millis,
            updated_time: Millis,
        }
    }
}

impl Collateral {
    /// The coin id as a number: how the ledger check finds a coin's records. `None` when absent
    /// or not digits.
    pub fn coin_number(&self) -> Option<u64> {
        coin_number(&self.coin_id)
    }

    /// What tells the record from the account's others: its coin, margin mode, cross contract and
    /// isolated position (the labels of its series).
    pub fn identity(&self) -> [&str; 4] {
        [&self.coin_id, &self.margin_mode, &self.cross_contract_id, &self.isolated_position_id].map(or_empty)
    }
}

impl Position {
    pub fn coin_number(&self) -> Option<u64> {
        coin_number(&self.coin_id)
    }

    /// What tells the position from the account's others: its coin, contract, side, margin mode
    /// and id (the labels of its series).
    pub fn identity(&self) -> [&str; 5] {
        [&self.coin_id, &self.contract_id, &self.side, &self.margin_mode, &self.id].map(or_empty)
    }
}

fn coin_number(coin_id: &Option<String>) -> Option<u64> {
    coin_id.as_deref()?.parse().ok()
}

/// A text field, empty when absent.
pub fn or_empty(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

/// The account record (spec 2.3) with its per-contract settings, keyed by futures id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Account {
    pub fields: AccountFields,
    pub default_fee_setting: Option<FeeSetting>,
    pub fee_settings: ByContract<FeeSetting>,
    pub mode_settings: ByContract<ModeSetting>,
    pub leverage_settings: ByContract<LeverageSetting>,
}

/// The account query's answer for one coin (spec 2.2).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountInfo {
    pub account: Option<Account>,
    pub collateral: Vec<Collateral>,
    pub positions: Vec<Position>,
    pub version: Option<Decimal>,
}

/// The most records of one kind (collateral records, positions, settings per contract) an
/// account answer may hold. An account holds a few per contract it trades, and each record
/// decoded is kept until the next poll: 16 MiB of `{}` would be 3 GB of positions.
pub const MAX_RECORDS: usize = 10_000;
const TOO_MANY_RECORDS: &str = "account answer has more than 10000 records of one kind";

/// Decodes the account query's answer. No field can fail it as a whole; more than
/// [`MAX_RECORDS`] records of one kind do.
pub fn decode_account_info(
    body: &JsonObject<'_>,
    problems: &mut Vec<DecodeProblem>,
) -> Result<AccountInfo, &'static str> {
    let mut reader = FieldReader::new(body, "account_info", problems);
    let account = reader.object("account");
    let collateral = reader.array("collateral");
    let positions = reader.array("position");
    let version = reader.value("version");
    let problems = reader.problems();
    let collateral = decode_list(collateral, "collateral", problems, Collateral::decode)?;
    // The ledger check finds a coin's records by their coin id; it must say which it cannot find.
    for _ in collateral.iter().filter(|c| c.coin_id.is_some() && c.coin_number().is_none()) {
        DecodeProblem::note(
            problems,
            "collateral",
            "coin_id",
            "not a coin id (digits); the ledger check leaves the record out",
        );
    }
    let positions = decode_list(positions, "position", problems, Position::decode)?;
    // Two records under one identity would be one series: the page shows one of them.
    for _ in repeated(collateral.iter().map(Collateral::identity)) {
        let detail = "another record has the same coin, margin mode, cross contract and isolated position; one of them is shown (a liquidating one first)";
        DecodeProblem::note(problems, "collateral", "isolated_position_id", detail);
    }
    for _ in repeated(positions.iter().map(Position::identity)) {
        let detail = "another position has the same coin, contract, side, margin mode and id; one of them is shown";
        DecodeProblem::note(problems, "position", "id", detail);
    }
    Ok(AccountInfo {
        account: account.map(|a| decode_account(&a, problems)).transpose()?,
        collateral,
        positions,
        version,
    })
}

/// Each item that an earlier one equals.
fn repeated<T: Ord>(items: impl Iterator<Item = T>) -> impl Iterator<Item = T> {
    let mut seen = std::collections::BTreeSet::new();
    items.filter_map(move |item| {
        if seen.contains(&item) {
            Some(item)
        } else {
            seen.insert(item);
            None
        }
    })
}

fn decode_account(object: &JsonObject<'_>, problems: &mut Vec<DecodeProblem>) -> Result<Account, &'static str> {
    let fields = AccountFields::decode(object, problems);
    let mut reader = FieldReader::again(object, "account", problems);
    let default_fee = reader.object("default_fee_setting");
    let fees = reader.object("contract_id_to_fee_setting");
    let modes = reader.object("contract_id_to_mode_setting");
    let leverages = reader.object("contract_id_to_leverage_setting");
    let problems = reader.problems();
    Ok(Account {
        fields,
        default_fee_setting: default_fee.map(|o| FeeSetting::decode(&o, problems)),
        fee_settings: decode_map(fees, "fee_setting", problems, FeeSetting::decode)?,
        mode_settings: decode_map(modes, "mode_setting", problems, ModeSetting::decode)?,
        leverage_settings: decode_map(leverages, "leverage_setting", problems, LeverageSetting::decode)?,
    })
}

type Decode<T> = fn(&JsonObject<'_>, &mut Vec<DecodeProblem>) -> T;

fn decode_list<T>(
    values: Option<Vec<Json<'_>>>,
    record: &'static str,
    problems: &mut Vec<DecodeProblem>,
    decode: Decode<T>,
) -> Result<Vec<T>, &'static str> {
    let values = values.unwrap_or_default();
    if values.len() > MAX_RECORDS {
        return Err(TOO_MANY_RECORDS);
    }
    // Exactly as many as there are: the records stay in memory until the next poll.
    let mut records = Vec::with_capacity(values.len());
    for value in values {
        match value.object() {
            Some(object) => records.push(decode(&object, problems)),
            None => DecodeProblem::note(problems, record, "[]", "not an object"),
        }
    }
    Ok(records)
}

/// A map keyed by futures id; the key wins over a `contract_id` repeated inside the value.
fn decode_map<T>(
    values: Option<JsonObject<'_>>,
    record: &'static str,
    problems: &mut Vec<DecodeProblem>,
    decode: Decode<T>,
) -> Result<ByContract<T>, &'static str> {
    if values.as_ref().is_some_and(|values| values.iter().count() > MAX_RECORDS) {
        return Err(TOO_MANY_RECORDS);
    }
    let mut records = BTreeMap::new();
    for (key, value) in values.iter().flat_map(JsonObject::iter) {
        match value.object() {
            Some(object) => {
                records.insert(key.to_owned(), decode(&object, problems));
            }
            None => DecodeProblem::note(problems, record, key, "not an object"),
        }
    }
    Ok(ByContract(records.into_iter().collect()))
}

/// Settings per futures contract id, in the order of the ids. A `BTreeMap` node has room for 11
/// entries, and an account trades a few contracts: this holds only what it has, for as long
/// as the answer is kept (until the next poll).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ByContract<T>(Vec<(String, T)>);

impl<T> ByContract<T> {
    pub fn iter(&self) -> impl Iterator<Item = (&String, &T)> {
        self.0.iter().map(|(contract, setting)| (contract, setting))
    }

    pub fn get(&self, contract: &str) -> Option<&T> {
        let found = self.0.binary_search_by(|(id, _)| id.as_str().cmp(contract)).ok()?;
        Some(&self.0[found].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::fields::MAX_PROBLEMS;
    use std::str::FromStr;

    fn page(text: &str) -> (BillPage, Vec<DecodeProblem>) {
        let mut problems = Vec::new();
        let body = JsonObject::parse(text.as_bytes()).unwrap();
        (decode_bill_page(&body, &mut problems).unwrap(), problems)
    }

    fn account_info(text: &str) -> (AccountInfo, Vec<DecodeProblem>) {
        let mut problems = Vec::new();
        let info = decode_account_info(&JsonObject::parse(text.as_bytes()).unwrap(), &mut problems).unwrap();
        (info, problems)
    }

    #[test]
    fn bills_accept_both_time_spellings_and_both_id_types() {
        let (page, problems) = page(
            r#"{"hasNextPage":false,"items":[
                {"billId":686960019383517338,"coin":"USDT","symbol":"cmt_btcusdt","amount":"-0.0031",
                 "businessType":"position_funding","balance":"12.5","fillFee":"0","ctime":1713339011237,
                 "transferReason":"x"},
                {"billId":"686960019383517339","coin":"USDT","symbol":"","amount":5,"businessType":"deposit",
                 "balance":"17.5","fillFee":"0","cTime":"1713339011238"}]}"#,
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert!(!page.has_next_page);
        assert_eq!(page.items[0].id, "686960019383517338");
        assert_eq!(page.items[1].id, "686960019383517339");
        assert_eq!(page.items[0].ctime_ms, 1713339011237);
        assert_eq!(page.items[1].ctime_ms, 1713339011238);
        assert_eq!(page.items[0].amount, Some(Decimal::from_str("-0.0031").unwrap()));
        assert_eq!(page.items[1].amount, Some(Decimal::from(5)));
    }

    #[test]
    fn a_bad_amount_keeps_the_bill_and_a_missing_id_drops_only_that_bill() {
        let (page, problems) = page(
            r#"{"hasNextPage":true,"items":[
                {"billId":1,"coin":"USDT","amount":"1,5","businessType":"deposit","balance":"1","ctime":5},
                {"coin":"USDT","amount":"1","businessType":"deposit","ctime":6},
                {"billId":3,"coin":"USDT","amount":"2","businessType":"deposit","balance":"3","ctime":7},
                {"billId":4,"coin":"USDT","amount":1e400,"fillFee":"1_000","businessType":"deposit","balance":null,"ctime":8}]}"#,
        );
        assert_eq!(page.items.len(), 3);
        assert_eq!(page.items[0].amount, None);
        assert_eq!(page.items[1].amount, Some(Decimal::from(2)));
        assert_eq!((page.items[2].id.as_str(), page.items[2].amount, page.items[2].fill_fee), ("4", None, None));
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["amount", "billId", "balance", "amount", "fillFee"]);
    }

    #[test]
    fn a_bill_without_a_usable_id_or_time_is_skipped_and_the_problem_says_why() {
        let (page, problems) = page(
            r#"{"hasNextPage":false,"items":[
                {"billId":"","ctime":5},
                {"billId":"  ","ctime":5},
                {"billId":7},
                {"billId":8,"ctime":"  9"},
                {"billId":9,"ctime":10},
                {"billId":"1234567890123456789012345678901234567890123456789012345678901234","ctime":11},
                {"billId":"12345678901234567890123456789012345678901234567890123456789012345","ctime":12}]}"#,
        );
        let ids: Vec<&str> = page.items.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["9", "1234567890123456789012345678901234567890123456789012345678901234"]);
        let said: Vec<(&str, &str)> = problems.iter().map(|p| (p.field.as_str(), p.detail)).collect();
        assert_eq!(
            said,
            [
                ("billId", "empty; the bill is skipped"),
                ("billId", "empty; the bill is skipped"),
                ("cTime", "missing; the bill is skipped"),
                ("ctime", "not a whole number (digits and an optional minus)"),
                ("coin", MISSING),
                ("businessType", MISSING),
                ("amount", MISSING),
                ("balance", MISSING),
                ("coin", MISSING),
                ("businessType", MISSING),
                ("amount", MISSING),
                ("balance", MISSING),
                ("billId", "longer than 64 bytes; the bill is skipped"),
            ]
        );
    }

    const MISSING: &str = "missing or null; the bill is counted without it";

    #[test]
    fn a_page_that_says_more_follow_must_list_some() {
        let decode = |text: &str| {
            let mut problems = Vec::new();
            let page = decode_bill_page(&JsonObject::parse(text.as_bytes()).unwrap(), &mut problems);
            (page.map(|page| page.has_next_page), problems.iter().map(|p| p.detail).collect::<Vec<_>>())
        };
        assert_eq!(
            decode(r#"{"hasNextPage":true,"items":[]}"#).0,
            Err("bill answer says more bills follow, yet lists none")
        );
        assert_eq!(decode(r#"{"items":[]}"#), (Ok(false), vec!["missing; assumed false as the answer lists no bill"]));
        let one =
            r#"{"items":[{"billId":1,"cTime":5,"coin":"USDT","businessType":"deposit","amount":"1","balance":"1"}]}"#;
        assert_eq!(decode(one), (Ok(true), vec!["missing; assumed true so the window is split"]));
    }

    #[test]
    fn a_page_longer_than_asked_for_is_refused() {
        let bills = |n: u32| (1..=n).map(|id| format!(r#"{{"billId":{id},"cTime":5}}"#)).collect::<Vec<_>>().join(",");
        let decode = |n| {
            let text = format!(r#"{{"hasNextPage":true,"items":[{}]}}"#, bills(n));
            decode_bill_page(&JsonObject::parse(text.as_bytes()).unwrap(), &mut Vec::new()).map(|page| page.items.len())
        };
        assert_eq!(decode(MAX_PAGE), Ok(100));
        assert_eq!(decode(MAX_PAGE + 1), Err("bill answer has more items than the 100 asked for"));
    }

    #[test]
    fn an_account_answer_with_more_records_of_a_kind_than_any_account_holds_is_refused() {
        let decode = |text: String| decode_account_info(&JsonObject::parse(text.as_bytes()).unwrap(), &mut Vec::new());
        let list = |n: usize| vec!["{}"; n].join(",");
        let map = |n: usize| (0..n).map(|id| format!(r#""{id}":{{}}"#)).collect::<Vec<_>>().join(",");
        let refused = Err("account answer has more than 10000 records of one kind");
        for field in ["collateral", "position"] {
            let info = decode(format!(r#"{{"{field}":[{}]}}"#, list(MAX_RECORDS))).unwrap();
            assert_eq!(info.collateral.len() + info.positions.len(), MAX_RECORDS);
            assert_eq!(decode(format!(r#"{{"{field}":[{}]}}"#, list(MAX_RECORDS + 1))), refused, "{field}");
        }
        for field in ["contract_id_to_fee_setting", "contract_id_to_mode_setting", "contract_id_to_leverage_setting"] {
            let info = decode(format!(r#"{{"account":{{"{field}":{{{}}}}}}}"#, map(MAX_RECORDS))).unwrap();
            let account = info.account.unwrap();
            let kept = account.fee_settings.0.len() + account.mode_settings.0.len() + account.leverage_settings.0.len();
            assert_eq!(kept, MAX_RECORDS, "{field}");
            assert_eq!(
                decode(format!(r#"{{"account":{{"{field}":{{{}}}}}}}"#, map(MAX_RECORDS + 1))),
                refused,
                "{field}"
            );
        }
    }

    #[test]
    fn a_bill_without_its_coin_type_amount_or_balance_is_counted_and_said_to_lack_them() {
        let (page, problems) =
            page(r#"{"hasNextPage":false,"items":[{"billId":1,"ctime":5,"coin":null,"businessType":"deposit"}]}"#);
        assert_eq!(page.items.len(), 1);
        let said: Vec<(&str, &str)> = problems.iter().map(|p| (p.field.as_str(), p.detail)).collect();
        assert_eq!(said, [("coin", MISSING), ("amount", MISSING), ("balance", MISSING)]);
    }

    #[test]
    fn an_answer_of_many_broken_records_keeps_a_bounded_list_of_problems() {
        let records = vec!["1"; MAX_RECORDS].join(",");
        let (info, problems) = account_info(&format!(r#"{{"collateral":[{records}]}}"#));
        assert!(info.collateral.is_empty());
        assert_eq!(problems.len(), MAX_PROBLEMS);
        assert!(problems[..MAX_PROBLEMS - 1].iter().all(|p| (p.record, p.field.as_str()) == ("collateral", "[]")));
        assert_eq!(problems[MAX_PROBLEMS - 1].field, "other");
        let (_, problems) =
            account_info(&format!(r#"{{"account":{{"contract_id_to_fee_setting":{{"{}":1}}}}}}"#, "k".repeat(200)));
        assert_eq!(problems[0].field, "k".repeat(64), "a long key is cut");
    }

    #[test]
    fn a_record_of_more_members_than_any_record_holds_is_said_to_be_cut() {
        let members = (0..=crate::api::json::MAX_ITEMS).map(|i| format!(r#""x{i}":0"#)).collect::<Vec<_>>().join(",");
        let (info, problems) = account_info(&format!(
            r#"{{"account":{{{members},"id":"7"}},"collateral":[{{{members},"coin_id":"2"}}],"position":[{{"id":"1"}}]}}"#
        ));
        assert_eq!(info.account.map(|account| account.fields.id), Some(None), "the id after the cut is not read");
        assert_eq!(info.collateral[0].coin_id, None);
        let said: Vec<(&str, &str, &str)> = problems.iter().map(|p| (p.record, p.field.as_str(), p.detail)).collect();
        let cut = "more members than any record holds; the rest are not read";
        assert_eq!(said, [("collateral", "{}", cut), ("account", "{}", cut)]);
        let bills = format!(r#"{{"hasNextPage":false,"items":[{{{members},"billId":1,"ctime":5}}]}}"#);
        let (_, problems) = page(&bills);
        assert_eq!(problems[0].record, "bill");
        assert_eq!((problems[0].field.as_str(), problems[0].detail), ("{}", cut));
    }

    #[test]
    fn leading_zeros_do_not_make_a_new_bill() {
        assert_eq!(normalize_id("0042".into()), "42");
        assert_eq!(normalize_id("000".into()), "0");
        assert_eq!(normalize_id("abc-1".into()), "abc-1");
    }

    #[test]
    fn the_documented_account_sample_decodes_every_field() {
        let (info, problems) = account_info(include_str!("../../tests/data/account_sample.json"));
        assert!(problems.is_empty(), "{problems:?}");
        let account = info.account.unwrap();
        assert_eq!(account.fields.status.as_deref(), Some("NORMAL"));
        assert_eq!(account.fields.create_order_delay_milliseconds, Some(Millis(0)));
        assert_eq!(account.default_fee_setting, None);
        let fee = account.fee_settings.get("10000001").unwrap();
        assert_eq!(fee.taker_fee_rate, Some(Decimal::from_str("0.0006").unwrap()));
        assert_eq!(account.mode_settings.get("10000001").unwrap().margin_mode.as_deref(), Some("SHARED"));
        assert_eq!(account.leverage_settings.get("10000001").unwrap().cross_leverage, Some(Decimal::from(20)));
        let collateral = &info.collateral[0];
        assert_eq!(collateral.coin_id.as_deref(), Some("2"));
        assert_eq!(collateral.is_liquidating, Some(false));
        assert_eq!(collateral.amount, Some(Decimal::from_str("5000.12345678").unwrap()));
        assert_eq!(collateral.updated_time, Some(Millis(1713339011237)));
        let position = &info.positions[0];
        assert_eq!(position.side.as_deref(), Some("LONG"));
        assert_eq!(position.size, Some(Decimal::from_str("0.5").unwrap()));
        assert_eq!(info.version, Some(Decimal::from(42)));
    }

    #[test]
    fn a_collateral_record_whose_coin_id_is_no_number_is_said_to_be_left_out_of_the_ledger_check() {
        let (info, problems) = account_info(r#"{"collateral": [{"coin_id": "USDT"}, {"coin_id": 2}, {}]}"#);
        assert_eq!(info.collateral.len(), 3);
        let said: Vec<(&str, &str, &str)> = problems.iter().map(|p| (p.record, p.field.as_str(), p.detail)).collect();
        assert_eq!(said, [("collateral", "coin_id", "not a coin id (digits); the ledger check leaves the record out")]);
    }

    #[test]
    fn records_under_one_identity_are_said_to_be_shown_as_one() {
        let isolated = r#"{"coin_id": 2, "margin_mode": "ISOLATED", "isolated_position_id": "7""#;
        let text = format!(
            r#"{{"collateral": [{isolated}, "amount": "1"}}, {isolated}, "amount": "2"}}, {isolated}}}],
                "position": [{{"id": "", "side": "LONG"}}, {{"id": "", "side": "SHORT"}}, {{"id": "", "side": "LONG"}}]}}"#
        );
        let (info, problems) = account_info(&text);
        assert_eq!((info.collateral.len(), info.positions.len()), (3, 3), "every record is kept");
        let said: Vec<(&str, &str)> = problems.iter().map(|p| (p.record, p.field.as_str())).collect();
        assert_eq!(
            said,
            [("collateral", "isolated_position_id"), ("collateral", "isolated_position_id"), ("position", "id")]
        );
    }

    #[test]
    fn wrong_shapes_are_problems_not_failures() {
        let (info, problems) = account_info(r#"{"account": [], "collateral": {}, "position": [1], "version": "x"}"#);
        assert_eq!(info, AccountInfo::default());
        assert_eq!(problems.len(), 4);
    }
}
