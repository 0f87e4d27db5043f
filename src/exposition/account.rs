//! One account's series, from its snapshot: the figures of the account query, the bill counters
//! and what the poller did. Every account's lines list the same families in the same order, so
//! that a page is written family by family over all accounts.
//!
//! Every numeric field of a record becomes one gauge, named here, in the tables below: renaming a
//! field of the models renames no metric, and a test checks that every numeric field the models
//! decode has its gauge. Series exist only for records in the latest snapshot: a closed
//! position's series disappear at the next poll.

use super::format::{Family, Lines, RenderedLabels};
use crate::api::fields::Millis;
use crate::api::model::{or_empty, Account, AccountInfo, ByContract};
use crate::api::model::{AccountFields, Collateral, FeeSetting, LeverageSetting, Position};
use crate::api::Coins;
use crate::snapshot::counters::{FlowKey, Loss};
use crate::snapshot::AccountSnapshot;
use rust_decimal::Decimal;
use std::collections::{BTreeMap, BTreeSet};

pub(super) const UP: Family = Family::gauge(
    "capi_up",
    "Whether every request of the account's last poll succeeded (1) or not (0). The exchange \
     API is rate-limited, so the exporter polls it in the background every --poll.interval and \
     scrapes read the last poll's figures; a scrape never calls the exchange",
);
pub(super) const DATA_AGE: Family = Family::gauge(
    "capi_data_age_seconds",
    "Time since the account's figures for this coin were last fetched; beyond --data.max-age they are withdrawn from /metrics",
);

const ACCOUNT_INFO: Family = Family::gauge("capi_account_info", "Text fields of the account record; value 1");
const ACCOUNT_VERSION: Family = Family::gauge("capi_account_version", "The account query's version value, per coin");
const LEVERAGE: Family =
    Family::gauge("capi_account_leverage_setting", "Leverage setting per futures contract and kind");
const CONTRACT_MODE: Family = Family::gauge("capi_contract_mode_info", "Mode settings per futures contract; value 1");
const POSITION_INFO: Family = Family::gauge("capi_position_info", "Text fields of a position record; value 1");
const BILLS: Family = Family::counter("capi_bills", "Bills counted by coin and business type, each exactly once");
const BILL_AMOUNT: Family = Family::counter(
    "capi_bill_amount",
    "Sum of the absolute amounts of bills, in the bill's coin, by the amount's sign: in (>0, collateral coming in) or out (<0, going out)",
);
const BILL_FILL_FEE: Family = Family::counter(
    "capi_bill_fill_fee",
    "Sum of the absolute fill fees of bills, in the bill's coin, by the fee's sign: out (<0, a fee paid) or in (>0, a rebate); the API does not show the sign, this is the exporter's assumption",
);
const BILL_BALANCE: Family = Family::gauge(
    "capi_bill_balance",
    "Balance after the newest bill counted, in the bill's coin, signed as the exchange reports it",
);
const SHORTFALLS: Family = Family::counter(
    "capi_bill_pages_truncated",
    "Crowded milliseconds (more bills of one business type than a page holds) whose count is not proven complete: loss=certain, at least one bill was not counted; loss=possible, the split rested on the coins and symbols known to the account, which the API cannot list",
);
const BILL_CURSOR: Family = Family::gauge(
    "capi_bill_cursor_timestamp_seconds",
    "Bills created up to this time are final in the bill counters; newer ones may still arrive late",
);
const COUNTING_START: Family = Family::gauge(
    "capi_bill_counting_start_timestamp_seconds",
    "Bills created since this time are all in the bill counters: when counting began (the first start, or a start without a state file or with one that could not be read) or resumed after skipping ahead; it moves later only when bills before it were not counted",
);

const LEDGER_DIFFERENCE: Family = Family::gauge(
    "capi_ledger_difference",
    "The ledger check, in the coin's unit: how much the exchange's running total (field, a cum_* of the collateral records) moved since the comparison began, minus what the counted bills of its business type (all fill fees for cum_position_fill_fee_amount) account for, each side by its magnitude until two comparisons that agree show which way each runs, then with that sign; compared only up to settled time; 0 when the two views agree; for a total that only grows, above 0 when bills are missing",
);

/// One account's latest snapshot, and what counts as fresh in it.
pub(super) struct View<'a> {
    /// `{account="..."`, written once for all the account's series.
    account: RenderedLabels,
    snapshot: &'a AccountSnapshot,
    oldest_ms: i64,
    /// Every coin-scoped series carries the coin's name and id: records give the id, bills the name.
    coins: &'a Coins,
}

impl<'a> View<'a> {
    /// Figures fetched before `oldest_ms` are withdrawn.
    pub(super) fn new(name: &str, snapshot: &'a AccountSnapshot, oldest_ms: i64, coins: &'a Coins) -> Self {
        Self { account: RenderedLabels::new(&[("account", name)]), snapshot, oldest_ms, coins }
    }

    /// The name of the coin of an id in a record's text, or nothing when it is not known.
    fn coin_name(&self, id: &str) -> &'a str {
        self.coins.name_of_text(id).unwrap_or_default()
    }

    fn coins(&self) -> impl Iterator<Item = (u64, &'a AccountInfo)> {
        self.snapshot.fresh_coins(self.oldest_ms)
    }

    /// The records of every fresh answer, a coin's taken from its own answer alone while that is
    /// fresh: another coin's answer may be older, and still list a position closed since.
    fn records<R>(&self, list: fn(&'a AccountInfo) -> &'a Vec<R>, coin_of: fn(&R) -> Option<u64>) -> Vec<&'a R> {
        let fresh: BTreeSet<u64> = self.coins().map(|(coin, _)| coin).collect();
        let from_its_answer =
            |answer: u64, record: &R| coin_of(record).is_none_or(|own| own == answer || !fresh.contains(&own));
        self.coins()
            .flat_map(|(answer, info)| list(info).iter().filter(move |record| from_its_answer(answer, record)))
            .collect()
    }

    /// Writes every family of the account but the data age, which changes with the clock.
    pub(super) fn write(&self, lines: &mut Lines) {
        lines.family(&UP, [(&self.account, f64::from(u8::from(self.snapshot.up)))]);
        self.write_account(lines);
        self.write_collateral(lines);
        self.write_positions(lines);
        self.write_bills(lines);
        self.write_ledger(lines);
        super::poller::write(&self.account, &self.snapshot.stats, lines);
    }

    fn write_account(&self, lines: &mut Lines) {
        let account = self.snapshot.fresh_account(self.oldest_ms);
        let rows: Vec<(&RenderedLabels, &AccountFields)> = account.iter().map(|a| (&self.account, &a.fields)).collect();
        write_record_fields(lines, ACCOUNT_GAUGES, &rows);
        let info = account.map(|a| {
            let f = &a.fields;
            let labels = [
                ("account_id", or_empty(&f.id)),
                ("user_id", or_empty(&f.user_id)),
                ("client_account_id", or_empty(&f.client_account_id)),
                ("status", or_empty(&f.status)),
                ("extra_type", or_empty(&f.extra_type)),
                ("extra_data_json", or_empty(&f.extra_data_json)),
            ];
            ((&self.account, labels), 1.0)
        });
        lines.family(&ACCOUNT_INFO, info);
        let versions = self
            .coins()
            .filter_map(|(coin, info)| Some(((&self.account, coin_labels(self.coins, coin)), info.version?)));
        lines.family(&ACCOUNT_VERSION, versions);
        self.write_fee_settings(lines, account);
        self.write_contract_settings(lines, account);
    }

    /// Per-contract fee settings as `capi_account_<group>{contract_id}` and the default setting,
    /// when present, as `capi_account_default_<group>`.
    fn write_fee_settings(&self, lines: &mut Lines, account: Option<&Account>) {
        let per_contract = contract_rows(&self.account, account, |a| &a.fee_settings);
        let defaults: Vec<(RenderedLabels, &FeeSetting)> = account
            .and_then(|a| a.default_fee_setting.as_ref())
            .map(|setting| (self.account.clone(), setting))
            .into_iter()
            .collect();
        for group in &FEE_GROUPS {
            for (family, rows) in [(&group.per_contract, &per_contract), (&group.default, &defaults)] {
                let samples = rows.iter().flat_map(|(labels, setting)| {
                    group.members.iter().filter_map(move |(label_value, get)| {
                        let extra = (!group.label.is_empty()).then_some([(group.label, *label_value)]);
                        get(setting).map(|v| ((labels, extra), v))
                    })
                });
                lines.family(family, samples);
            }
        }
    }

    /// Leverage settings as one metric with a `kind` label, and mode settings as an info gauge.
    fn write_contract_settings(&self, lines: &mut Lines, account: Option<&Account>) {
        let rows = contract_rows(&self.account, account, |a| &a.leverage_settings);
        let leverage = rows.iter().flat_map(|(labels, setting)| {
            LEVERAGE_KINDS.iter().filter_map(move |(kind, get)| get(setting).map(|v| ((labels, [("kind", *kind)]), v)))
        });
        lines.family(&LEVERAGE, leverage);
        let modes = account.into_iter().flat_map(|a| {
            a.mode_settings.iter().map(|(contract, m)| {
                let labels = [
                    ("contract_id", contract.as_str()),
                    ("margin_mode", or_empty(&m.margin_mode)),
                    ("separated_mode", or_empty(&m.separated_mode)),
                    ("position_mode", or_empty(&m.position_mode)),
                ];
                ((&self.account, labels), 1.0)
            })
        });
        lines.family(&CONTRACT_MODE, modes);
    }

    /// Of records under the same labels, a liquidating one is shown: a liquidation must show.
    fn write_collateral(&self, lines: &mut Lines) {
        let mut records = self.records(|info| &info.collateral, Collateral::coin_number);
        records.sort_by_key(|c| c.is_liquidating != Some(true));
        let rows = records.into_iter().map(|c| {
            let [coin_id, margin_mode, cross_contract_id, isolated_position_id] = c.identity();
            let labels = [
                ("coin", self.coin_name(coin_id)),
                ("coin_id", coin_id),
                ("margin_mode", margin_mode),
                ("cross_contract_id", cross_contract_id),
                ("isolated_position_id", isolated_position_id),
            ];
            (RenderedLabels::new(&(&self.account, labels)), c)
        });
        let rows = unique(rows);
        write_record_fields(lines, COLLATERAL_GAUGES, &rows.iter().map(|(l, c)| (l, *c)).collect::<Vec<_>>());
    }

    fn write_positions(&self, lines: &mut Lines) {
        let positions = self.records(|info| &info.positions, Position::coin_number);
        let rows = positions.into_iter().map(|p| {
            let [coin_id, contract_id, side, margin_mode, position_id] = p.identity();
            let labels = [
                ("coin", self.coin_name(coin_id)),
                ("coin_id", coin_id),
                ("contract_id", contract_id),
                ("side", side),
                ("margin_mode", margin_mode),
                ("position_id", position_id),
            ];
            (RenderedLabels::new(&(&self.account, labels)), p)
        });
        let rows = unique(rows);
        write_record_fields(lines, POSITION_GAUGES, &rows.iter().map(|(l, p)| (l, *p)).collect::<Vec<_>>());
        let info = rows.iter().map(|(labels, p)| {
            let extra = [
                ("separated_mode", or_empty(&p.separated_mode)),
                ("separated_open_order_id", or_empty(&p.separated_open_order_id)),
                ("account_id", or_empty(&p.account_id)),
            ];
            ((labels, extra), 1.0)
        });
        lines.family(&POSITION_INFO, info);
    }

    fn write_bills(&self, lines: &mut Lines) {
        let counters = &self.snapshot.counters;
        let coin_id = |coin: &str| self.coins.id(coin).map_or_else(String::new, |id| id.to_string());
        let coin_labels = |coin: &str| [("coin", coin.to_owned()), ("coin_id", coin_id(coin))];
        let counts = counters.bills.iter().map(|((coin, kind), n)| {
            (((&self.account, coin_labels(coin)), [("business_type", kind.as_str())]), *n as f64)
        });
        lines.family(&BILLS, counts);
        let flows = |sums: &'a std::collections::BTreeMap<FlowKey, Decimal>| {
            sums.iter().map(move |((coin, kind, direction), sum)| {
                let labels = [("business_type", kind.as_str()), ("direction", direction.as_str())];
                (((&self.account, coin_labels(coin)), labels), *sum)
            })
        };
        lines.family(&BILL_AMOUNT, flows(&counters.amounts));
        lines.family(&BILL_FILL_FEE, flows(&counters.fill_fees));
        let balances = counters.balances.iter().map(|(coin, b)| ((&self.account, coin_labels(coin)), b.balance));
        lines.family(&BILL_BALANCE, balances);
        let shortfalls = Loss::ALL.into_iter().map(|loss| {
            let reported = counters.shortfalls.get(&loss).copied().unwrap_or(0);
            ((&self.account, [("loss", loss.as_str())]), reported as f64)
        });
        lines.family(&SHORTFALLS, shortfalls);
        // Absent until counting has started.
        let settled = self.snapshot.settled_through_ms;
        let cursor = (settled > 0).then(|| (&self.account, settled as f64 / 1000.0));
        lines.family(&BILL_CURSOR, cursor);
        let since = counters.counting_since_ms.map(|since| (&self.account, since as f64 / 1000.0));
        lines.family(&COUNTING_START, since);
    }

    /// The ledger check's differences. Like the bill counters they hold as of the settled time,
    /// and stay when the coin's figures are withdrawn: a difference found is not disproved by an
    /// outage or a restart, and its alert must not start its wait again.
    fn write_ledger(&self, lines: &mut Lines) {
        // The account's and coin's labels rendered once per coin, not once per field.
        let compared: BTreeSet<u64> = self.snapshot.ledger.keys().map(|(coin, _)| *coin).collect();
        let coins: BTreeMap<u64, RenderedLabels> = compared
            .into_iter()
            .map(|coin| (coin, RenderedLabels::new(&(&self.account, coin_labels(self.coins, coin)))))
            .collect();
        let samples = self
            .snapshot
            .ledger
            .iter()
            .filter_map(|((coin, field), difference)| Some(((coins.get(coin)?, [("field", *field)]), *difference)));
        lines.family(&LEDGER_DIFFERENCE, samples);
    }
}

/// How old each coin's figures of each account are, whether or not they are still shown: one
/// family for all accounts, since a family's lines must stand together.
pub(super) fn write_data_ages<'a>(
    accounts: impl Iterator<Item = (&'a str, &'a BTreeMap<u64, i64>)>,
    now_ms: i64,
    coins: &Coins,
    lines: &mut Lines,
) {
    let ages = accounts.flat_map(|(account, fetched_at_ms)| {
        fetched_at_ms.iter().map(move |(coin, at)| {
            let age = now_ms.saturating_sub(*at) as f64 / 1000.0;
            (([("account", account)], coin_labels(coins, *coin)), age)
        })
    });
    lines.family(&DATA_AGE, ages);
}

/// `coin` and `coin_id` of a coin id; the name is empty when it is not known.
fn coin_labels(coins: &Coins, id: u64) -> [(&'static str, String); 2] {
    [("coin", coins.name(id).unwrap_or_default().to_owned()), ("coin_id", id.to_string())]
}

/// How a field's value is shown: exact, with milliseconds as seconds (three decimals).
trait GaugeValue {
    fn gauge(&self) -> Decimal;
}

impl GaugeValue for Decimal {
    fn gauge(&self) -> Decimal {
        *self
    }
}

impl GaugeValue for bool {
    fn gauge(&self) -> Decimal {
        Decimal::from(u8::from(*self))
    }
}

impl GaugeValue for Millis {
    fn gauge(&self) -> Decimal {
        Decimal::new(self.0, 3)
    }
}

fn value<T: GaugeValue>(field: &Option<T>) -> Option<Decimal> {
    field.as_ref().map(GaugeValue::gauge)
}

/// How a gauge's value is read from a record.
type Read<R> = fn(&R) -> Option<Decimal>;

/// The gauge of one numeric field of a record.
struct FieldGauge<R> {
    family: Family,
    value: Read<R>,
}

/// `field => "metric name", "help";` for each numeric field of a record.
macro_rules! field_gauges {
    ($record:ty { $($field:ident => $name:literal, $help:literal;)* }) => {
        &[$(FieldGauge::<$record> { family: Family::gauge($name, $help), value: |record| value(&record.$field) },)*]
    };
}

const ACCOUNT_GAUGES: &[FieldGauge<AccountFields>] = field_gauges!(AccountFields {
    is_system_account => "capi_account_is_system_account", "Whether the account is a system account (1) or not (0)";
    create_order_rate_limit_per_minute => "capi_account_create_order_rate_limit_per_minute", "Order creation rate limit per minute";
    create_order_delay_milliseconds => "capi_account_create_order_delay_seconds", "Order creation delay";
    created_time => "capi_account_created_timestamp_seconds", "Account creation time";
    updated_time => "capi_account_updated_timestamp_seconds", "Account update time";
});

const COLLATERAL_GAUGES: &[FieldGauge<Collateral>] = field_gauges!(Collateral {
    amount => "capi_collateral_amount", "Collateral amount, in the coin of coin_id, signed as the exchange reports it";
    pending_deposit_amount => "capi_collateral_pending_deposit_amount", "Pending deposit amount, in the coin of coin_id, signed as the exchange reports it";
    pending_withdraw_amount => "capi_collateral_pending_withdraw_amount", "Pending withdrawal amount, in the coin of coin_id, signed as the exchange reports it";
    pending_transfer_in_amount => "capi_collateral_pending_transfer_in_amount", "Pending inbound transfer amount, in the coin of coin_id, signed as the exchange reports it";
    pending_transfer_out_amount => "capi_collateral_pending_transfer_out_amount", "Pending outbound transfer amount, in the coin of coin_id, signed as the exchange reports it";
    is_liquidating => "capi_collateral_is_liquidating", "Whether liquidation is in progress (1) or not (0)";
    legacy_amount => "capi_collateral_legacy_amount", "Legacy balance, display only, in the coin of coin_id, signed as the exchange reports it";
    cum_deposit_amount => "capi_collateral_cum_deposit_amount", "Accumulated deposits, as reported by the exchange, in the coin of coin_id, signed as the exchange reports it";
    cum_withdraw_amount => "capi_collateral_cum_withdraw_amount", "Accumulated withdrawals, as reported by the exchange, in the coin of coin_id, signed as the exchange reports it";
    cum_transfer_in_amount => "capi_collateral_cum_transfer_in_amount", "Accumulated inbound transfers, as reported by the exchange, in the coin of coin_id, signed as the exchange reports it";
    cum_transfer_out_amount => "capi_collateral_cum_transfer_out_amount", "Accumulated outbound transfers, as reported by the exchange, in the coin of coin_id, signed as the exchange reports it";
    cum_margin_move_in_amount => "capi_collateral_cum_margin_move_in_amount", "Accumulated margin moved in, as reported by the exchange, in the coin of coin_id, signed as the exchange reports it";
    cum_margin_move_out_amount => "capi_collateral_cum_margin_move_out_amount", "Accumulated margin moved out, as reported by the exchange, in the coin of coin_id, signed as the exchange reports it";
    cum_position_open_long_amount => "capi_collateral_cum_position_open_long_amount", "Accumulated collateral for long position openings, in the coin of coin_id, signed as the exchange reports it";
    cum_position_open_short_amount => "capi_collateral_cum_position_open_short_amount", "Accumulated collateral for short position openings, in the coin of coin_id, signed as the exchange reports it";
    cum_position_close_long_amount => "capi_collateral_cum_position_close_long_amount", "Accumulated collateral for long position closings, in the coin of coin_id, signed as the exchange reports it";
    cum_position_close_short_amount => "capi_collateral_cum_position_close_short_amount", "Accumulated collateral for short position closings, in the coin of coin_id, signed as the exchange reports it";
    cum_position_fill_fee_amount => "capi_collateral_cum_position_fill_fee_amount", "Accumulated trading fees for filled orders, in the coin of coin_id, signed as the exchange reports it";
    cum_position_liquidate_fee_amount => "capi_collateral_cum_position_liquidate_fee_amount", "Accumulated liquidation fees, in the coin of coin_id, signed as the exchange reports it";
    cum_position_funding_amount => "capi_collateral_cum_position_funding_amount", "Accumulated funding fees, in the coin of coin_id, signed as the exchange reports it";
    cum_order_fill_fee_income_amount => "capi_collateral_cum_order_fill_fee_income_amount", "Accumulated order fee income, in the coin of coin_id, signed as the exchange reports it";
    cum_order_liquidate_fee_income_amount => "capi_collateral_cum_order_liquidate_fee_income_amount", "Accumulated liquidation fee income, in the coin of coin_id, signed as the exchange reports it";
    created_time => "capi_collateral_created_timestamp_seconds", "Collateral record creation time";
    updated_time => "capi_collateral_updated_timestamp_seconds", "Collateral record update time";
});

const POSITION_GAUGES: &[FieldGauge<Position>] = field_gauges!(Position {
    leverage => "capi_position_leverage", "Position leverage";
    size => "capi_position_size", "Current position size";
    open_value => "capi_position_open_value", "Initial value at opening, in the coin of coin_id, signed as the exchange reports it";
    open_fee => "capi_position_open_fee", "Opening fee, in the coin of coin_id, signed as the exchange reports it";
    funding_fee => "capi_position_funding_fee", "Funding fee, in the coin of coin_id, signed as the exchange reports it";
    isolated_margin => "capi_position_isolated_margin", "Isolated margin, in the coin of coin_id, signed as the exchange reports it";
    is_auto_append_isolated_margin => "capi_position_is_auto_append_isolated_margin", "Whether isolated margin is topped up automatically (1) or not (0)";
    cum_open_size => "capi_position_cum_open_size", "Accumulated opened size";
    cum_open_value => "capi_position_cum_open_value", "Accumulated value of openings, in the coin of coin_id, signed as the exchange reports it";
    cum_open_fee => "capi_position_cum_open_fee", "Accumulated fees for openings, in the coin of coin_id, signed as the exchange reports it";
    cum_close_size => "capi_position_cum_close_size", "Accumulated closed size";
    cum_close_value => "capi_position_cum_close_value", "Accumulated value of closings, in the coin of coin_id, signed as the exchange reports it";
    cum_close_fee => "capi_position_cum_close_fee", "Accumulated fees for closings, in the coin of coin_id, signed as the exchange reports it";
    cum_funding_fee => "capi_position_cum_funding_fee", "Accumulated settled funding fees, in the coin of coin_id, signed as the exchange reports it";
    cum_liquidate_fee => "capi_position_cum_liquidate_fee", "Accumulated liquidation fees, in the coin of coin_id, signed as the exchange reports it";
    created_match_sequence_id => "capi_position_created_match_sequence_id", "Matching engine sequence id at creation (exact up to 2^53)";
    updated_match_sequence_id => "capi_position_updated_match_sequence_id", "Matching engine sequence id at the last update (exact up to 2^53)";
    created_time => "capi_position_created_timestamp_seconds", "Position creation time";
    updated_time => "capi_position_updated_timestamp_seconds", "Position update time";
});

/// One gauge per numeric field, over the rows, whose labels were written once, not per field.
fn write_record_fields<R>(lines: &mut Lines, gauges: &'static [FieldGauge<R>], rows: &[(&RenderedLabels, &R)]) {
    for gauge in gauges {
        let samples = rows.iter().filter_map(|(labels, record)| (gauge.value)(record).map(|v| (labels, v)));
        lines.family(&gauge.family, samples);
    }
}

/// How fee setting fields group into families: per contract and default, the label that tells
/// the members apart (if any), and each member's label value and field.
struct FeeGroup {
    per_contract: Family,
    default: Family,
    label: &'static str,
    members: &'static [(&'static str, Read<FeeSetting>)],
}

/// `per-contract family, help / default family, help, label [member => field, ...];`
macro_rules! fee_groups {
    ($($name:literal, $help:literal / $default:literal, $default_help:literal, $label:literal
        [$($member:literal => $field:ident),*];)*) => {
        [$(FeeGroup {
            per_contract: Family::gauge($name, $help),
            default: Family::gauge($default, $default_help),
            label: $label,
            members: &[$(($member, |f| value(&f.$field))),*],
        },)*]
    };
}

const FEE_GROUPS: [FeeGroup; 6] = fee_groups! {
    "capi_account_fee_rate", "Fee rate by role, per futures contract"
        / "capi_account_default_fee_rate", "Default fee rate by role, for contracts without a setting of their own",
        "role" ["taker" => taker_fee_rate, "maker" => maker_fee_rate];
    "capi_account_fee_rate_set", "Whether fee rates are set (1) or not (0)"
        / "capi_account_default_fee_rate_set", "Whether default fee rates are set (1) or not (0)",
        "" ["" => is_set_fee_rate];
    "capi_account_fee_discount", "Fee rate discount"
        / "capi_account_default_fee_discount", "Default fee rate discount",
        "" ["" => fee_discount];
    "capi_account_fee_discount_set", "Whether fee discounts are enabled (1) or not (0)"
        / "capi_account_default_fee_discount_set", "Whether default fee discounts are enabled (1) or not (0)",
        "" ["" => is_set_fee_discount];
    "capi_account_fee_role_discount", "Fee rate discount by role"
        / "capi_account_default_fee_role_discount", "Default fee rate discount by role",
        "role" ["taker" => taker_fee_discount, "maker" => maker_fee_discount];
    "capi_account_fee_role_discount_set", "Whether separate taker and maker discounts apply (1) or not (0)"
        / "capi_account_default_fee_role_discount_set", "Whether separate default taker and maker discounts apply (1) or not (0)",
        "" ["" => is_set_taker_maker_fee_discount];
};

/// The `kind` label of `capi_account_leverage_setting`, and its field.
const LEVERAGE_KINDS: [(&str, Read<LeverageSetting>); 4] = [
    ("isolated_long", |s| value(&s.isolated_long_leverage)),
    ("isolated_short", |s| value(&s.isolated_short_leverage)),
    ("cross", |s| value(&s.cross_leverage)),
    ("shared", |s| value(&s.shared_leverage)),
];

/// One row per futures contract of the account, its labels written once for all its samples.
fn contract_rows<'a, T>(
    account_labels: &RenderedLabels,
    account: Option<&'a Account>,
    settings: fn(&'a Account) -> &'a ByContract<T>,
) -> Vec<(RenderedLabels, &'a T)> {
    let rows = account.into_iter().flat_map(|a| {
        settings(a).iter().map(|(contract, setting)| {
            (RenderedLabels::new(&(account_labels, [("contract_id", contract.as_str())])), setting)
        })
    });
    rows.collect()
}

/// The rows with distinct label sets, the first of each. Two records with the same labels (the
/// same position in two coins' answers, say) would make duplicate series, and Prometheus rejects
/// a whole scrape that has any. (Two in one answer are counted as a decode problem.)
fn unique<'a, R>(rows: impl IntoIterator<Item = (RenderedLabels, &'a R)>) -> Vec<(RenderedLabels, &'a R)> {
    let mut seen = std::collections::HashSet::new();
    rows.into_iter().filter(|(labels, _)| seen.insert(labels.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::clock::steady_now_ms;
    use std::sync::Arc;

    #[test]
    fn every_numeric_field_of_the_models_has_its_gauge() {
        assert_eq!(ACCOUNT_GAUGES.len(), AccountFields::NUMERIC_FIELDS.len());
        assert_eq!(COLLATERAL_GAUGES.len(), Collateral::NUMERIC_FIELDS.len());
        assert_eq!(POSITION_GAUGES.len(), Position::NUMERIC_FIELDS.len());
        assert_eq!(LEVERAGE_KINDS.len(), LeverageSetting::NUMERIC_FIELDS.len());
        let fee_members: usize = FEE_GROUPS.iter().map(|group| group.members.len()).sum();
        assert_eq!(fee_members, FeeSetting::NUMERIC_FIELDS.len());
        fn names<R>(gauges: &[FieldGauge<R>]) -> Vec<&'static str> {
            gauges.iter().map(|gauge| gauge.family.name).collect()
        }
        let mut all = [names(ACCOUNT_GAUGES), names(COLLATERAL_GAUGES), names(POSITION_GAUGES)].concat();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "a metric name is used twice");
    }

    #[test]
    fn millisecond_fields_are_shown_in_seconds() {
        assert_eq!(Millis(1_713_339_011_237).gauge(), Decimal::new(1_713_339_011_237, 3));
        assert_eq!(Millis(250).gauge(), Decimal::new(250, 3));
        assert_eq!((true.gauge(), false.gauge()), (Decimal::ONE, Decimal::ZERO));
    }

    #[test]
    fn the_same_position_in_two_coins_answers_is_one_series() {
        let position =
            Position { id: Some("7".into()), coin_id: Some("2".into()), size: Some(1.into()), ..Position::default() };
        let info = AccountInfo { positions: vec![position], ..Default::default() };
        let now = steady_now_ms();
        let snapshot = AccountSnapshot {
            coins: [(1, Arc::new(info.clone())), (2, Arc::new(info))].into(),
            fetched_at_ms: [(1, now), (2, now)].into(),
            ..AccountSnapshot::default()
        };
        let mut lines = Lines::default();
        View::new("main", &snapshot, now - 60_000, &Coins::default()).write(&mut lines);
        let text = String::from_utf8(lines.finish().0.to_vec()).unwrap();
        assert_eq!(text.matches("capi_position_size{").count(), 1, "{text}");
    }

    #[test]
    fn a_record_shows_its_own_coins_answer_alone_while_fresh_and_of_two_alike_the_liquidating_one() {
        let usdt = |amount: i64, liquidating: bool| Collateral {
            coin_id: Some("2".into()),
            margin_mode: Some("ISOLATED".into()),
            isolated_position_id: Some("10000001".into()),
            amount: Some(amount.into()),
            is_liquidating: Some(liquidating),
            ..Collateral::default()
        };
        let position = |size: i64| Position {
            id: Some("7".into()),
            coin_id: Some("2".into()),
            size: Some(size.into()),
            ..Position::default()
        };
        let page_at = |btc: AccountInfo, own: AccountInfo, own_age_ms: i64| {
            let now = steady_now_ms();
            let snapshot = AccountSnapshot {
                coins: [(1, Arc::new(btc)), (2, Arc::new(own))].into(),
                fetched_at_ms: [(1, now), (2, now - own_age_ms)].into(),
                ..AccountSnapshot::default()
            };
            let mut lines = Lines::default();
            View::new("main", &snapshot, now - 60_000, &Coins::default()).write(&mut lines);
            String::from_utf8(lines.finish().0.to_vec()).unwrap()
        };
        let page = |btc, own| page_at(btc, own, 0);
        let labels = r#"{account="main",coin="USDT",coin_id="2",margin_mode="ISOLATED",cross_contract_id="",isolated_position_id="10000001"}"#;
        // Coin 1's answer also lists the USDT record and position, as they were a while ago.
        let btc =
            AccountInfo { collateral: vec![usdt(777, false)], positions: vec![position(5)], ..Default::default() };
        let own = AccountInfo { collateral: vec![usdt(12, false)], positions: vec![position(1)], ..Default::default() };
        let text = page(btc.clone(), own);
        assert!(text.contains(&format!("capi_collateral_amount{labels} 12\n")), "{text}");
        let size = r#"capi_position_size{account="main",coin="USDT",coin_id="2",contract_id="",side="",margin_mode="",position_id="7"}"#;
        assert!(text.contains(&format!("{size} 1\n")), "{text}");
        // Closed since coin 1's answer: gone with USDT's own answer, shown again once that is withdrawn.
        let closed = AccountInfo { collateral: vec![usdt(12, false)], ..Default::default() };
        let text = page(btc.clone(), closed.clone());
        assert!(!text.contains("capi_position_size{"), "{text}");
        let text = page_at(btc.clone(), closed, 61_000);
        assert!(text.contains(&format!("{size} 5\n")), "{text}");
        assert!(text.contains(&format!("capi_collateral_amount{labels} 777\n")), "{text}");
        // USDT's own answer lists two records under the same labels, the second liquidating.
        let own = AccountInfo { collateral: vec![usdt(100, false), usdt(250, true)], ..Default::default() };
        let text = page(btc, own);
        assert!(text.contains(&format!("capi_collateral_amount{labels} 250\n")), "{text}");
        assert!(text.contains(&format!("capi_collateral_is_liquidating{labels} 1\n")), "{text}");
        assert_eq!(text.matches("capi_collateral_amount{").count(), 1, "{text}");
    }

    #[test]
    fn every_account_lists_the_same_families_in_the_same_order() {
        let families = |snapshot: &AccountSnapshot| {
            let mut lines = Lines::default();
            View::new("a", snapshot, 0, &Coins::default()).write(&mut lines);
            lines.finish().1.into_iter().map(|(family, _)| family.name).collect::<Vec<_>>()
        };
        let info = AccountInfo { positions: vec![Position::default()], ..Default::default() };
        let full = AccountSnapshot {
            coins: [(2, Arc::new(info))].into(),
            fetched_at_ms: [(2, 1)].into(),
            ..Default::default()
        };
        assert_eq!(families(&AccountSnapshot::default()), families(&full));
    }
}
