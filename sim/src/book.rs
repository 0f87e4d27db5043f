//! The exchange's books: accounts with their collateral and positions, and each account's bills,
//! plus the bill query's filtering. Everything reached from a request returns `Option` or a
//! value; only the scripting entry points (named for tests) panic, on an unknown api key.

use std::collections::BTreeMap;
use std::time::Duration;

use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::records::{account_record, coin_id, coin_name, Collateral, Position, Record};
use super::{Credentials, SimOptions, TimeField};

/// The first bill id: above 2^53, as in the documentation's sample, so float parsing breaks.
const FIRST_BILL_ID: u64 = 686_960_019_383_517_338;
const FIRST_POSITION_ID: u64 = 7_100_000_000_000_001;
const FIRST_ACCOUNT_ID: u64 = 4_100_000_001;
const FIRST_USER_ID: u64 = 8_200_000_001;
const FIRST_SEQUENCE_ID: u64 = 900_000_001;
const STARTING_AMOUNT: Decimal = Decimal::from_parts(10_000, 0, 0, false, 0);

const DEFAULT_LIMIT: i64 = 20;
const MAX_LIMIT: i64 = 100;
/// An extra field the documentation shows on transfer bills; clients must ignore it.
const TRANSFER_REASON: &str = "USER_TRANSFER";

/// A bill to add through [`super::SimExchange::add_bill`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewBill {
    pub coin: String,
    pub symbol: String,
    pub business_type: String,
    pub amount: Decimal,
    pub fill_fee: Decimal,
    /// Creation time; `None` means now.
    pub ctime_ms: Option<i64>,
    /// Delay, from now, before the bill shows in answers; zero means at once, `Duration::MAX`
    /// never: a bill the exchange books (its collateral and running totals move) but never lists.
    pub visible_after: Duration,
}

/// A bill as the exchange stores it, visible or not yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimBill {
    pub id: u64,
    pub coin: String,
    pub symbol: String,
    pub business_type: String,
    pub amount: Decimal,
    pub fill_fee: Decimal,
    /// The coin's collateral amount after this bill.
    pub balance: Decimal,
    pub ctime_ms: i64,
    pub visible_at_ms: i64,
}

/// A position to open through [`super::SimExchange::open_position`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewPosition {
    pub coin_id: u64,
    pub contract_id: u64,
    pub side: String,
    pub margin_mode: String,
    pub leverage: Decimal,
    pub size: Decimal,
    pub open_value: Decimal,
}

/// The body of the bill query (spec 4.1). Empty strings and nulls mean "no filter".
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BillQuery {
    coin: Option<String>,
    symbol: Option<String>,
    business_type: Option<String>,
    start_time: Option<i64>,
    end_time: Option<i64>,
    limit: Option<i64>,
}

impl BillQuery {
    /// `None` when the body is not a valid query: not JSON of that shape, or `limit` outside
    /// 1..=100. An empty body is read as `{}`, since every field is optional.
    pub(crate) fn parse(body: &[u8]) -> Option<Self> {
        let query: Self = if body.iter().all(u8::is_ascii_whitespace) {
            Self::default()
        } else {
            serde_json::from_slice(body).ok()?
        };
        (1..=MAX_LIMIT).contains(&query.limit()).then_some(query)
    }

    /// Whether the query filters by a business type the exchange refuses.
    pub(crate) fn is_refused(&self, options: &SimOptions) -> bool {
        self.business_type.as_ref().is_some_and(|business_type| options.refused_business_types.contains(business_type))
    }

    fn limit(&self) -> i64 {
        self.limit.unwrap_or(DEFAULT_LIMIT)
    }

    fn matches(&self, bill: &SimBill, options: &SimOptions) -> bool {
        fn wanted(filter: Option<&str>, value: &str) -> bool {
            matches!(filter, None | Some("")) || filter == Some(value)
        }
        let time = bill.ctime_ms;
        let after_start = match self.start_time {
            None => true,
            Some(start) => time > start || (options.start_inclusive && time == start),
        };
        let before_end = match self.end_time {
            None => true,
            Some(end) => time < end || (options.end_inclusive && time == end),
        };
        after_start
            && before_end
            && wanted(self.coin.as_deref(), &bill.coin)
            && wanted(self.symbol.as_deref(), &bill.symbol)
            && wanted(self.business_type.as_deref(), &bill.business_type)
    }
}

/// One account: its credentials, records and bills.
#[derive(Debug)]
pub(crate) struct Account {
    pub(crate) credentials: Credentials,
    /// The account id, as the spec writes it (text).
    id: String,
    /// The account query's `account` record.
    record: Value,
    collateral: BTreeMap<u64, Record<Collateral>>,
    positions: BTreeMap<String, Record<Position>>,
    bills: Vec<SimBill>,
    /// The account query's `version`: counts changes.
    version: u64,
}

impl Account {
    /// The account query's answer for one coin; an unknown coin has no collateral or positions.
    pub(crate) fn to_json(&self, coin_id: u64) -> Value {
        let collateral: Vec<Value> = self.collateral.get(&coin_id).map(Record::to_json).into_iter().collect();
        let positions: Vec<Value> =
            self.positions.values().filter(|position| position.value.coin_id == coin_id).map(Record::to_json).collect();
        let mut answer = Map::new();
        answer.insert("account".to_owned(), self.record.clone());
        answer.insert("collateral".to_owned(), Value::from(collateral));
        answer.insert("position".to_owned(), Value::from(positions));
        answer.insert("version".to_owned(), Value::from(self.version.to_string()));
        Value::Object(answer)
    }

    /// The bill query's answer: the first page of the visible bills that match.
    pub(crate) fn bill_page(&self, query: &BillQuery, options: &SimOptions, now_ms: i64) -> Value {
        let mut matched: Vec<&SimBill> =
            self.bills.iter().filter(|bill| bill.visible_at_ms <= now_ms && query.matches(bill, options)).collect();
        matched.sort_by_key(|bill| (bill.ctime_ms, bill.id));
        if options.newest_first {
            matched.reverse();
        }
        let limit = usize::try_from(query.limit()).unwrap_or(0);
        let items: Vec<Value> = matched.iter().take(limit).map(|bill| bill_json(bill, options)).collect();
        let mut page = Map::new();
        page.insert("hasNextPage".to_owned(), Value::Bool(matched.len() > limit));
        page.insert("items".to_owned(), Value::from(items));
        Value::Object(page)
    }

    pub(crate) fn coin_ids(&self) -> Vec<u64> {
        self.collateral.keys().copied().collect()
    }

    pub(crate) fn is_liquidating(&self, coin_id: u64) -> bool {
        self.collateral.get(&coin_id).is_some_and(|c| c.value.is_liquidating)
    }

    /// The typed collateral amount; zero for a coin the account does not hold.
    pub(crate) fn collateral_amount(&self, coin_id: u64) -> Decimal {
        self.collateral.get(&coin_id).map_or(Decimal::ZERO, |c| c.value.amount)
    }

    pub(crate) fn positions_of(&self, coin_id: u64) -> Vec<Position> {
        self.positions
            .values()
            .map(|position| &position.value)
            .filter(|position| position.coin_id == coin_id)
            .cloned()
            .collect()
    }

    /// The coin's collateral record, created empty on first use (a first deposit, say).
    fn collateral_mut(&mut self, coin_id: u64, now_ms: i64) -> &mut Record<Collateral> {
        let account_id = &self.id;
        self.collateral
            .entry(coin_id)
            .or_insert_with(|| Record::new(Collateral::new(account_id, coin_id, Decimal::ZERO, now_ms)))
    }

    /// The balance a bill of a coin without a collateral record continues from.
    fn last_balance(&self, coin: &str) -> Decimal {
        self.bills.iter().rev().find(|bill| bill.coin == coin).map_or(Decimal::ZERO, |bill| bill.balance)
    }
}

fn bill_json(bill: &SimBill, options: &SimOptions) -> Value {
    let mut item = Map::new();
    let id = if options.ids_as_strings { Value::from(bill.id.to_string()) } else { Value::from(bill.id) };
    item.insert("billId".to_owned(), id);
    item.insert("coin".to_owned(), Value::from(bill.coin.clone()));
    item.insert("symbol".to_owned(), Value::from(bill.symbol.clone()));
    item.insert("amount".to_owned(), Value::from(bill.amount.to_string()));
    item.insert("businessType".to_owned(), Value::from(bill.business_type.clone()));
    item.insert("balance".to_owned(), Value::from(bill.balance.to_string()));
    item.insert("fillFee".to_owned(), Value::from(bill.fill_fee.to_string()));
    let (name, time) = match options.time_field {
        TimeField::CtimeInt => ("ctime", Value::from(bill.ctime_ms)),
        TimeField::CTimeString => ("cTime", Value::from(bill.ctime_ms.to_string())),
    };
    item.insert(name.to_owned(), time);
    if bill.business_type.starts_with("transfer_") {
        item.insert("transferReason".to_owned(), Value::from(TRANSFER_REASON));
    }
    Value::Object(item)
}

/// Every account of the exchange, by api key, and the exchange-wide id counters.
#[derive(Debug)]
pub(crate) struct Book {
    accounts: BTreeMap<String, Account>,
    next_account: u64,
    next_bill_id: u64,
    next_position_id: u64,
    next_sequence_id: u64,
}

impl Default for Book {
    fn default() -> Self {
        Self {
            accounts: BTreeMap::new(),
            next_account: 0,
            next_bill_id: FIRST_BILL_ID,
            next_position_id: FIRST_POSITION_ID,
            next_sequence_id: FIRST_SEQUENCE_ID,
        }
    }
}

impl Book {
    pub(crate) fn account(&self, api_key: &str) -> Option<&Account> {
        self.accounts.get(api_key)
    }

    pub(crate) fn api_keys(&self) -> Vec<String> {
        self.accounts.keys().cloned().collect()
    }

    /// The api key of the `number`th account added (from 1), as the demo names them `demo-N`.
    pub(crate) fn api_key_of_number(&self, number: u64) -> Option<String> {
        let id = FIRST_ACCOUNT_ID.checked_add(number.checked_sub(1)?)?.to_string();
        self.accounts.values().find(|account| account.id == id).map(|account| account.credentials.api_key.clone())
    }

    /// Adds (or replaces) the account of these credentials, holding the starting amount of
    /// each coin.
    pub(crate) fn add_account(&mut self, credentials: Credentials, coin_ids: &[u64], now_ms: i64) {
        let id = (FIRST_ACCOUNT_ID + self.next_account).to_string();
        let record = account_record(&id, FIRST_USER_ID + self.next_account, now_ms);
        self.next_account += 1;
        let collateral = coin_ids
            .iter()
            .map(|&coin| (coin, Record::new(Collateral::new(&id, coin, STARTING_AMOUNT, now_ms))))
            .collect();
        let (positions, bills) = (BTreeMap::new(), Vec::new());
        let account = Account { credentials, id, record, collateral, positions, bills, version: 1 };
        self.accounts.insert(account.credentials.api_key.clone(), account);
    }

    /// The account of a scripting call: an unknown key is a mistake in the test script.
    fn scripted(&mut self, api_key: &str) -> &mut Account {
        self.accounts
            .get_mut(api_key)
            .unwrap_or_else(|| panic!("simulated exchange: no account has api key {api_key:?}"))
    }

    pub(crate) fn account_json(&mut self, api_key: &str, coin_id: u64) -> Value {
        self.scripted(api_key).to_json(coin_id)
    }

    pub(crate) fn bills(&mut self, api_key: &str) -> Vec<SimBill> {
        self.scripted(api_key).bills.clone()
    }

    /// Books a bill: moves the coin's collateral and records the new amount as the balance.
    pub(crate) fn add_bill(&mut self, api_key: &str, bill: NewBill, now_ms: i64) -> u64 {
        let id = self.next_bill_id;
        self.next_bill_id += 1;
        let account = self.scripted(api_key);
        let balance = match coin_id(&bill.coin) {
            Some(coin) => account.collateral_mut(coin, now_ms).value.apply_bill(
                &bill.business_type,
                bill.amount,
                bill.fill_fee,
                now_ms,
            ),
            None => account.last_balance(&bill.coin).saturating_add(bill.amount),
        };
        let visible_after_ms = i64::try_from(bill.visible_after.as_millis()).unwrap_or(i64::MAX);
        account.bills.push(SimBill {
            id,
            coin: bill.coin,
            symbol: bill.symbol,
            business_type: bill.business_type,
            amount: bill.amount,
            fill_fee: bill.fill_fee,
            balance,
            ctime_ms: bill.ctime_ms.unwrap_or(now_ms),
            visible_at_ms: now_ms.saturating_add(visible_after_ms),
        });
        account.version += 1;
        id
    }

    pub(crate) fn set_collateral_field(&mut self, api_key: &str, coin_id: u64, field: &str, value: Value, now_ms: i64) {
        let account = self.scripted(api_key);
        account.collateral_mut(coin_id, now_ms).set_field(field, value);
        account.version += 1;
    }

    /// Moves a running total (`cum_*`) of the coin's collateral by `by`, with no bill: what the
    /// exporter's ledger check must notice. `None` when the field is no running total.
    pub(crate) fn move_running_total(
        &mut self,
        api_key: &str,
        coin_id: u64,
        field: &str,
        by: Decimal,
        now_ms: i64,
    ) -> Option<Decimal> {
        if !field.starts_with("cum_") {
            return None;
        }
        let collateral = self.scripted(api_key).collateral_mut(coin_id, now_ms);
        let current: Decimal = collateral.to_json().get(field)?.as_str()?.parse().ok()?;
        let moved = current.checked_add(by)?;
        self.set_collateral_field(api_key, coin_id, field, Value::from(moved.to_string()), now_ms);
        Some(moved)
    }

    /// Starts or ends a liquidation: the flag, and a zero-amount start/finish bill.
    pub(crate) fn set_liquidating(&mut self, api_key: &str, coin_id: u64, on: bool, now_ms: i64) {
        let collateral = &mut self.scripted(api_key).collateral_mut(coin_id, now_ms).value;
        collateral.is_liquidating = on;
        collateral.updated_time = now_ms;
        let business_type = if on { "start_liquidate" } else { "finish_liquidate" };
        let bill = NewBill { coin: coin_name(coin_id), business_type: business_type.to_owned(), ..NewBill::default() };
        self.add_bill(api_key, bill, now_ms);
    }

    pub(crate) fn open_position(&mut self, api_key: &str, new: NewPosition, now_ms: i64) -> String {
        let id = self.next_position_id.to_string();
        self.next_position_id += 1;
        let sequence = self.next_sequence_id();
        let account = self.scripted(api_key);
        let position = Position {
            id: id.clone(),
            account_id: account.id.clone(),
            coin_id: new.coin_id,
            contract_id: new.contract_id,
            side: new.side,
            margin_mode: new.margin_mode,
            separated_mode: "COMBINED".to_owned(),
            separated_open_order_id: "0".to_owned(),
            leverage: new.leverage,
            size: new.size,
            open_value: new.open_value,
            cum_open_size: new.size,
            cum_open_value: new.open_value,
            created_match_sequence_id: sequence.clone(),
            updated_match_sequence_id: sequence,
            created_time: now_ms,
            updated_time: now_ms,
            ..Position::default()
        };
        account.positions.insert(id.clone(), Record::new(position));
        account.version += 1;
        id
    }

    /// Changes a position through its typed record, as a trade or a settlement would: the
    /// update time and match sequence move too. `false` when there is no such position.
    pub(crate) fn edit_position(
        &mut self,
        api_key: &str,
        position_id: &str,
        now_ms: i64,
        edit: impl FnOnce(&mut Position),
    ) -> bool {
        let sequence = self.next_sequence_id();
        let account = self.scripted(api_key);
        let Some(position) = account.positions.get_mut(position_id) else {
            return false;
        };
        edit(&mut position.value);
        position.value.updated_time = now_ms;
        position.value.updated_match_sequence_id = sequence;
        account.version += 1;
        true
    }

    pub(crate) fn update_position(&mut self, api_key: &str, position_id: &str, field: &str, value: Value) {
        let account = self.scripted(api_key);
        scripted_position(account, position_id).set_field(field, value);
        account.version += 1;
    }

    /// Closes a position: it disappears from the answers. `None` when it was not open.
    pub(crate) fn take_position(&mut self, api_key: &str, position_id: &str) -> Option<Position> {
        let account = self.scripted(api_key);
        let position = account.positions.remove(position_id)?;
        account.version += 1;
        Some(position.value)
    }

    fn next_sequence_id(&mut self) -> String {
        self.next_sequence_id += 1;
        (self.next_sequence_id - 1).to_string()
    }
}

/// The position of a scripting call: an unknown id is a mistake in the test script.
fn scripted_position<'a>(account: &'a mut Account, position_id: &str) -> &'a mut Record<Position> {
    account
        .positions
        .get_mut(position_id)
        .unwrap_or_else(|| panic!("simulated exchange: no open position has id {position_id:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "key";

    fn book_with_bills(times: &[i64]) -> Book {
        let mut book = Book::default();
        book.add_account(Credentials { api_key: KEY.into(), secret: "s".into(), passphrase: "p".into() }, &[2], 0);
        for &time in times {
            let bill = NewBill {
                coin: "USDT".into(),
                symbol: "cmt_btcusdt".into(),
                business_type: "deposit".into(),
                amount: Decimal::ONE,
                ctime_ms: Some(time),
                ..NewBill::default()
            };
            book.add_bill(KEY, bill, 10_000);
        }
        book
    }

    fn page_times(book: &Book, body: &str, options: &SimOptions) -> Vec<i64> {
        let query = BillQuery::parse(body.as_bytes()).expect("valid query");
        let page = book.account(KEY).expect("account").bill_page(&query, options, 10_000);
        page["items"].as_array().expect("items").iter().map(|item| item["ctime"].as_i64().expect("ctime")).collect()
    }

    #[test]
    fn time_bounds_follow_the_inclusiveness_options() {
        let book = book_with_bills(&[1000, 2000, 3000, 4000]);
        let body = r#"{"startTime":2000,"endTime":3000}"#;
        let mut options = SimOptions { newest_first: false, ..SimOptions::default() };
        assert_eq!(page_times(&book, body, &options), [2000, 3000]);
        options.start_inclusive = false;
        assert_eq!(page_times(&book, body, &options), [3000]);
        options.end_inclusive = false;
        assert_eq!(page_times(&book, body, &options), Vec::<i64>::new());
        options.start_inclusive = true;
        assert_eq!(page_times(&book, body, &options), [2000]);
        assert_eq!(page_times(&book, r#"{"startTime":null,"endTime":null}"#, &options), [1000, 2000, 3000, 4000]);
    }

    #[test]
    fn order_is_by_time_then_id_in_the_configured_direction() {
        let book = book_with_bills(&[3000, 1000, 2000, 2000]);
        let oldest_first = SimOptions { newest_first: false, ..SimOptions::default() };
        assert_eq!(page_times(&book, "{}", &oldest_first), [1000, 2000, 2000, 3000]);
        assert_eq!(page_times(&book, "{}", &SimOptions::default()), [3000, 2000, 2000, 1000]);
        let query = BillQuery::parse(b"{}").expect("valid");
        let page = book.account(KEY).expect("account").bill_page(&query, &SimOptions::default(), 10_000);
        let ids: Vec<u64> =
            page["items"].as_array().expect("items").iter().map(|i| i["billId"].as_u64().expect("id")).collect();
        assert!(ids[1] > ids[2], "equal times: the higher id is newer");
    }

    #[test]
    fn limit_is_validated_and_has_next_page_says_more_matched() {
        for bad in [
            r#"{"limit":0}"#,
            r#"{"limit":101}"#,
            r#"{"limit":-1}"#,
            r#"{"limit":"5"}"#,
            r#"{"limit":1.5}"#,
            "[",
            "null",
            r#"{"coin":3}"#,
        ] {
            assert!(BillQuery::parse(bad.as_bytes()).is_none(), "{bad}");
        }
        let book = book_with_bills(&(1..=25).collect::<Vec<_>>());
        let account = book.account(KEY).expect("account");
        let page = |body: &str| {
            account.bill_page(&BillQuery::parse(body.as_bytes()).expect("valid"), &SimOptions::default(), 10_000)
        };
        assert_eq!(page("").get("items").and_then(Value::as_array).map(Vec::len), Some(20));
        assert_eq!(page("{}")["hasNextPage"], true);
        assert_eq!(page(r#"{"limit":25}"#)["hasNextPage"], false);
        assert_eq!(page(r#"{"limit":100}"#)["items"].as_array().map(Vec::len), Some(25));
        assert_eq!(page(r#"{"limit":1,"startTime":25}"#)["hasNextPage"], false);
    }

    #[test]
    fn filters_match_exactly_and_empty_means_any() {
        let mut book = book_with_bills(&[1000]);
        let fee = NewBill {
            coin: "BTC".into(),
            business_type: "withdraw".into(),
            amount: Decimal::NEGATIVE_ONE,
            ctime_ms: Some(2000),
            ..NewBill::default()
        };
        book.add_bill(KEY, fee, 10_000);
        let options = SimOptions::default();
        assert_eq!(page_times(&book, r#"{"coin":"","symbol":"","businessType":""}"#, &options), [2000, 1000]);
        assert_eq!(page_times(&book, r#"{"coin":"BTC"}"#, &options), [2000]);
        assert_eq!(page_times(&book, r#"{"symbol":"cmt_btcusdt"}"#, &options), [1000]);
        assert_eq!(page_times(&book, r#"{"businessType":"withdraw","coin":"USDT"}"#, &options), Vec::<i64>::new());
        assert_eq!(page_times(&book, r#"{"coin":null,"unknown":1}"#, &options), [2000, 1000]);
    }

    #[test]
    fn bills_become_visible_after_their_delay() {
        let mut book = book_with_bills(&[]);
        let late = NewBill { coin: "USDT".into(), visible_after: Duration::from_secs(5), ..NewBill::default() };
        book.add_bill(KEY, late, 10_000);
        let account = book.account(KEY).expect("account");
        let query = BillQuery::default();
        assert_eq!(
            account.bill_page(&query, &SimOptions::default(), 14_999)["items"].as_array().map(Vec::len),
            Some(0)
        );
        assert_eq!(
            account.bill_page(&query, &SimOptions::default(), 15_000)["items"].as_array().map(Vec::len),
            Some(1)
        );
    }

    #[test]
    fn balances_follow_the_collateral_and_unknown_coins_keep_their_own() {
        let mut book = book_with_bills(&[1, 2]);
        let doge = |amount| NewBill { coin: "DOGE".into(), amount, ..NewBill::default() };
        book.add_bill(KEY, doge(Decimal::from(5)), 0);
        book.add_bill(KEY, doge(Decimal::from(-7)), 0);
        let balances: Vec<String> = book.bills(KEY).iter().map(|b| b.balance.to_string()).collect();
        assert_eq!(balances, ["10001", "10002", "5", "-2"]);
        let json = book.account_json(KEY, 2);
        assert_eq!(json["collateral"][0]["amount"], "10002");
        assert_eq!(json["collateral"][0]["cum_deposit_amount"], "2");
        assert_eq!(json["version"], "5");
    }

    #[test]
    fn positions_open_change_and_close() {
        let mut book = book_with_bills(&[]);
        let new = NewPosition {
            coin_id: 2,
            contract_id: 10_000_001,
            side: "LONG".into(),
            margin_mode: "SHARED".into(),
            leverage: Decimal::from(10),
            size: Decimal::ONE,
            open_value: Decimal::from(100),
        };
        let id = book.open_position(KEY, new, 5);
        assert_eq!(book.account_json(KEY, 2)["position"][0]["id"], Value::from(id.clone()));
        assert_eq!(book.account_json(KEY, 1)["position"], Value::from(Vec::<Value>::new()));
        book.update_position(KEY, &id, "size", Value::from("oops"));
        assert_eq!(book.account_json(KEY, 2)["position"][0]["size"], "oops");
        assert!(book.edit_position(KEY, &id, 9, |p| p.funding_fee = Decimal::ONE));
        assert_eq!(book.account_json(KEY, 2)["position"][0]["updated_time"], "9");
        assert_eq!(book.take_position(KEY, &id).map(|p| p.id), Some(id.clone()));
        assert!(book.take_position(KEY, &id).is_none());
        assert!(!book.edit_position(KEY, &id, 9, |_| ()));
        assert_eq!(book.account_json(KEY, 2)["position"].as_array().map(Vec::len), Some(0));
    }

    #[test]
    #[should_panic(expected = "no account has api key")]
    fn scripting_an_unknown_key_panics() {
        Book::default().bills("nobody");
    }
}
