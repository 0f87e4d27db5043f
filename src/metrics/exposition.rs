//! Snapshot to exposition: fresh series from the latest snapshots at every scrape.
//!
//! Every numeric field of a record becomes one gauge named after it (the tables live with the
//! models, see [`crate::api::fields::NumericField`]), so a field cannot be decoded and forgotten.
//! Series exist only for records in the latest snapshot: a closed position's series disappear at
//! the next poll.

use super::snapshot::{AccountSlot, AccountSnapshot};
use super::text::{Kind, RenderedLabels, TextWriter};
use crate::api::clock::local_now_ms;
use crate::api::fields::{NumericField, Unit};
use crate::api::model::{Account, AccountInfo, ByContract};
use crate::api::model::{AccountFields, Collateral, FeeSetting, LeverageSetting, Position};
use crate::poller::cursor::Loss;
use rust_decimal::Decimal;
use std::sync::Arc;
use std::time::Duration;

const UP_HELP: &str = "Whether every request of the account's last poll succeeded (1) or not (0). The exchange \
     API is rate-limited, so the exporter polls it in the background every --poll.interval and \
     scrapes read the last poll's figures; a scrape never calls the exchange";

/// Renders every account's latest snapshot.
#[derive(Debug)]
pub struct SnapshotExposition {
    slots: Vec<Arc<AccountSlot>>,
    max_age: Duration,
}

impl SnapshotExposition {
    /// Figures older than `max_age` are withdrawn; their age stays visible.
    pub fn new(slots: Vec<Arc<AccountSlot>>, max_age: Duration) -> Self {
        Self { slots, max_age }
    }

    /// Snapshots published so far by all the accounts.
    pub fn publications(&self) -> u64 {
        self.slots.iter().map(|slot| slot.publications()).sum()
    }

    /// Writes the families of every account's latest snapshot.
    pub fn write(&self, encoder: &mut TextWriter) {
        // One read of each slot, so that capi_up and the figures come from the same snapshot.
        let latest: Vec<(&str, Option<Arc<AccountSnapshot>>)> =
            self.slots.iter().map(|slot| (slot.name(), slot.latest())).collect();
        let up = latest.iter().map(|(name, snapshot)| {
            let up = snapshot.as_ref().is_some_and(|s| s.up);
            ([("account", *name)], f64::from(u8::from(up)))
        });
        encoder.family("capi_up", UP_HELP, Kind::Gauge, up);
        let snapshots: Vec<(&str, &AccountSnapshot)> =
            latest.iter().filter_map(|(name, snapshot)| snapshot.as_deref().map(|s| (*name, s))).collect();
        let now_ms = local_now_ms();
        let oldest_ms = now_ms.saturating_sub(i64::try_from(self.max_age.as_millis()).unwrap_or(i64::MAX));
        let snapshots: Vec<View> =
            snapshots.into_iter().map(|(name, snapshot)| View::new(name, snapshot, oldest_ms)).collect();
        encode_data_age(encoder, &snapshots, now_ms);
        encode_account(encoder, &snapshots);
        encode_collateral(encoder, &snapshots);
        encode_positions(encoder, &snapshots);
        encode_bills(encoder, &snapshots);
    }
}

/// One account's latest snapshot, and what counts as fresh in it at this scrape.
struct View<'a> {
    name: &'a str,
    /// `{account="..."`, written once for all the account's series.
    account: RenderedLabels,
    snapshot: &'a AccountSnapshot,
    oldest_ms: i64,
}

impl<'a> View<'a> {
    fn new(name: &'a str, snapshot: &'a AccountSnapshot, oldest_ms: i64) -> Self {
        Self { name, account: RenderedLabels::new(&[("account", name)]), snapshot, oldest_ms }
    }

    fn coins(&self) -> impl Iterator<Item = (u64, &'a AccountInfo)> {
        self.snapshot.fresh_coins(self.oldest_ms)
    }

    fn account(&self) -> Option<&'a Account> {
        self.snapshot.fresh_account(self.oldest_ms)
    }
}

/// How old each coin's figures are, whether or not they are still shown.
fn encode_data_age(encoder: &mut TextWriter, snapshots: &[View], now_ms: i64) {
    let ages = snapshots.iter().flat_map(|view| {
        view.snapshot
            .fetched_at_ms
            .iter()
            .map(move |(coin, at)| ((&view.account, [("coin_id", coin.to_string())]), (now_ms - at) as f64 / 1000.0))
    });
    encoder.family("capi_data_age_seconds",
        "Time since the account's figures for this coin were last fetched; beyond --data.max-age they are withdrawn from /metrics",
        Kind::Gauge,
        ages,
    );
}

fn encode_account(encoder: &mut TextWriter, snapshots: &[View]) {
    let accounts: Vec<_> = snapshots.iter().filter_map(|view| view.account().map(|a| (&view.account, a))).collect();
    let rows: Vec<(RenderedLabels, &AccountFields)> =
        accounts.iter().map(|(account, a)| ((*account).clone(), &a.fields)).collect();
    write_record_fields(encoder, "capi_account", AccountFields::NUMERIC_FIELDS, &rows);

    let info = accounts.iter().map(|(account, a)| {
        let f = &a.fields;
        let labels = [
            ("account_id", text(&f.id)),
            ("user_id", text(&f.user_id)),
            ("client_account_id", text(&f.client_account_id)),
            ("status", text(&f.status)),
            ("extra_type", text(&f.extra_type)),
            ("extra_data_json", text(&f.extra_data_json)),
        ];
        ((*account, labels), 1.0)
    });
    encoder.family("capi_account_info", "Text fields of the account record; value 1", Kind::Gauge, info);

    let versions = snapshots.iter().flat_map(|view| {
        view.coins().filter_map(move |(coin, info)| {
            let version = info.version?;
            Some(((&view.account, [("coin_id", coin.to_string())]), version))
        })
    });
    encoder.family("capi_account_version", "The account query's version value, per coin", Kind::Gauge, versions);

    encode_fee_settings(encoder, &accounts);
    encode_contract_settings(encoder, &accounts)
}

/// How fee setting fields group into metrics: (metric suffix, help, label name, [(label value, field)]).
type FeeGroup = (&'static str, &'static str, &'static str, &'static [(&'static str, &'static str)]);

const FEE_GROUPS: [FeeGroup; 6] = [
    ("fee_rate", "Fee rate by role", "role", &[("taker", "taker_fee_rate"), ("maker", "maker_fee_rate")]),
    ("fee_rate_set", "Whether fee rates are set (1) or not (0)", "", &[("", "is_set_fee_rate")]),
    ("fee_discount", "Fee rate discount", "", &[("", "fee_discount")]),
    ("fee_discount_set", "Whether fee discounts are enabled (1) or not (0)", "", &[("", "is_set_fee_discount")]),
    (
        "fee_role_discount",
        "Fee rate discount by role",
        "role",
        &[("taker", "taker_fee_discount"), ("maker", "maker_fee_discount")],
    ),
    (
        "fee_role_discount_set",
        "Whether separate taker and maker discounts apply (1) or not (0)",
        "",
        &[("", "is_set_taker_maker_fee_discount")],
    ),
];

/// One row per futures contract of every account, its labels written once for all its samples.
fn contract_rows<'a, T>(
    accounts: &[(&RenderedLabels, &'a Account)],
    settings: fn(&'a Account) -> &'a ByContract<T>,
) -> Vec<(RenderedLabels, &'a T)> {
    let rows = accounts.iter().flat_map(|(account, a)| {
        settings(a).iter().map(|(contract, setting)| {
            (RenderedLabels::new(&(*account, [("contract_id", contract.as_str())])), setting)
        })
    });
    rows.collect()
}

/// Per-contract fee settings as `capi_account_<group>{contract_id}` and the default setting,
/// when present, as `capi_account_default_<group>`.
fn encode_fee_settings(encoder: &mut TextWriter, accounts: &[(&RenderedLabels, &Account)]) {
    let per_contract = contract_rows(accounts, |a| &a.fee_settings);
    let defaults: Vec<(RenderedLabels, &FeeSetting)> = accounts
        .iter()
        .filter_map(|(account, a)| a.default_fee_setting.as_ref().map(|s| ((*account).clone(), s)))
        .collect();
    for (suffix, help, label, members) in FEE_GROUPS {
        let members: Vec<_> =
            members.iter().map(|(value, field)| (*value, field_getter(FeeSetting::NUMERIC_FIELDS, field))).collect();
        for (prefix, rows) in [("capi_account_", &per_contract), ("capi_account_default_", &defaults)] {
            let samples = rows.iter().flat_map(|(labels, setting)| {
                members.iter().filter_map(move |(value, get)| {
                    let extra = (!label.is_empty()).then_some([(label, *value)]);
                    get(setting).map(|v| ((labels, extra), v))
                })
            });
            encoder.family(&format!("{prefix}{suffix}"), help, Kind::Gauge, samples);
        }
    }
}

/// Leverage settings as one metric with a `kind` label, and mode settings as an info gauge.
fn encode_contract_settings(encoder: &mut TextWriter, accounts: &[(&RenderedLabels, &Account)]) {
    let kinds: Vec<_> = LeverageSetting::NUMERIC_FIELDS
        .iter()
        .map(|f| ([("kind", f.name.trim_end_matches("_leverage"))], f.value))
        .collect();
    let rows = contract_rows(accounts, |a| &a.leverage_settings);
    let leverage = rows.iter().flat_map(|(labels, setting)| {
        kinds.iter().filter_map(move |(kind, value)| value(setting).map(|v| ((labels, kind), v)))
    });
    encoder.family(
        "capi_account_leverage_setting",
        "Leverage setting per futures contract and kind",
        Kind::Gauge,
        leverage,
    );

    let modes = accounts.iter().flat_map(|(account, a)| {
        a.mode_settings.iter().map(move |(contract, m)| {
            let labels = [
                ("contract_id", contract.as_str()),
                ("margin_mode", text(&m.margin_mode)),
                ("separated_mode", text(&m.separated_mode)),
                ("position_mode", text(&m.position_mode)),
            ];
            ((*account, labels), 1.0)
        })
    });
    encoder.family("capi_contract_mode_info", "Mode settings per futures contract; value 1", Kind::Gauge, modes);
}

fn encode_collateral(encoder: &mut TextWriter, snapshots: &[View]) {
    let rows = snapshots.iter().flat_map(|view| {
        view.coins()
            .flat_map(|(_, info)| info.collateral.iter())
            .map(move |c| (view.name, collateral_labels(&view.account, c), c))
    });
    write_record_fields(encoder, "capi_collateral", Collateral::NUMERIC_FIELDS, &unique(rows))
}

fn collateral_labels(account: &RenderedLabels, c: &Collateral) -> RenderedLabels {
    RenderedLabels::new(&(
        account,
        [
            ("coin_id", text(&c.coin_id)),
            ("margin_mode", text(&c.margin_mode)),
            ("cross_contract_id", text(&c.cross_contract_id)),
            ("isolated_position_id", text(&c.isolated_position_id)),
        ],
    ))
}

fn encode_positions(encoder: &mut TextWriter, snapshots: &[View]) {
    let positions = snapshots.iter().flat_map(|view| {
        view.coins()
            .flat_map(|(_, info)| info.positions.iter())
            .map(move |p| (view.name, position_labels(&view.account, p), p))
    });
    let rows = unique(positions);
    write_record_fields(encoder, "capi_position", Position::NUMERIC_FIELDS, &rows);
    let info = rows.iter().map(|(labels, p)| {
        let extra = [
            ("separated_mode", text(&p.separated_mode)),
            ("separated_open_order_id", text(&p.separated_open_order_id)),
            ("account_id", text(&p.account_id)),
        ];
        ((labels, extra), 1.0)
    });
    encoder.family("capi_position_info", "Text fields of a position record; value 1", Kind::Gauge, info);
}

fn position_labels(account: &RenderedLabels, p: &Position) -> RenderedLabels {
    RenderedLabels::new(&(
        account,
        [
            ("coin_id", text(&p.coin_id)),
            ("contract_id", text(&p.contract_id)),
            ("side", text(&p.side)),
            ("margin_mode", text(&p.margin_mode)),
            ("position_id", text(&p.id)),
        ],
    ))
}

fn encode_bills(encoder: &mut TextWriter, snapshots: &[View]) {
    let counts = snapshots.iter().flat_map(|view| {
        view.snapshot.counters.bills.iter().map(move |((coin, kind), n)| {
            ((&view.account, [("coin", coin.as_str()), ("business_type", kind.as_str())]), *n as f64)
        })
    });
    encoder.family("capi_bills", "Bills counted by coin and business type, each exactly once", Kind::Counter, counts);
    for (name, help, pick) in [
        (
            "capi_bill_amount",
            "Sum of the absolute amounts of bills, by the amount's sign: in (>0) or out (<0)",
            Flow::Amount,
        ),
        (
            "capi_bill_fill_fee",
            "Sum of the absolute fill fees of bills, by the fee's sign: in (>0, a rebate) or out (<0, paid)",
            Flow::FillFee,
        ),
    ] {
        let sums = snapshots.iter().flat_map(|view| {
            let sums = match pick {
                Flow::Amount => &view.snapshot.counters.amounts,
                Flow::FillFee => &view.snapshot.counters.fill_fees,
            };
            sums.iter().map(move |((coin, kind, direction), sum)| {
                let labels =
                    [("coin", coin.as_str()), ("business_type", kind.as_str()), ("direction", direction.as_str())];
                ((&view.account, labels), *sum)
            })
        });
        encoder.family(name, help, Kind::Counter, sums);
    }
    let balances = snapshots.iter().flat_map(|view| {
        view.snapshot
            .counters
            .balances
            .iter()
            .map(move |(coin, b)| ((&view.account, [("coin", coin.as_str())]), b.balance))
    });
    encoder.family("capi_bill_balance", "Balance after the newest bill counted, per coin", Kind::Gauge, balances);
    let shortfalls = snapshots.iter().flat_map(|view| {
        Loss::ALL.into_iter().map(move |loss| {
            let reported = view.snapshot.counters.shortfalls.get(&loss).copied().unwrap_or(0);
            ((&view.account, [("loss", loss.as_str())]), reported as f64)
        })
    });
    encoder.family("capi_bill_pages_truncated",
        "Crowded milliseconds (more bills of one business type than a page holds) whose count is not proven complete: loss=certain, at least one bill was not counted; loss=possible, the split rested on the coins and symbols known to the account, which the API cannot list",
        Kind::Counter,
        shortfalls,
    );
    // Absent until counting has started.
    let cursor = snapshots
        .iter()
        .filter(|view| view.snapshot.settled_through_ms > 0)
        .map(|view| (&view.account, view.snapshot.settled_through_ms as f64 / 1000.0));
    encoder.family(
        "capi_bill_cursor_timestamp_seconds",
        "Bills created up to this time are final in the bill counters; newer ones may still arrive late",
        Kind::Gauge,
        cursor,
    );
}

#[derive(Clone, Copy)]
enum Flow {
    Amount,
    FillFee,
}

/// One gauge per numeric field, over all rows, whose labels were written once, not per field.
fn write_record_fields<R>(
    encoder: &mut TextWriter,
    prefix: &str,
    fields: &[NumericField<R>],
    rows: &[(RenderedLabels, &R)],
) {
    for field in fields {
        let samples = rows.iter().filter_map(|(labels, record)| (field.value)(record).map(|v| (labels, v)));
        encoder.family(&metric_name(prefix, field.name, field.unit), field.help, Kind::Gauge, samples);
    }
}

/// Millisecond times become seconds: `updated_time` -> `updated_timestamp_seconds`,
/// `create_order_delay_milliseconds` -> `create_order_delay_seconds`.
pub fn metric_name(prefix: &str, field: &str, unit: Unit) -> String {
    match unit {
        Unit::TimestampMillis => format!("{prefix}_{}_timestamp_seconds", field.trim_end_matches("_time")),
        Unit::DurationMillis => format!("{prefix}_{}_seconds", field.trim_end_matches("_milliseconds")),
        Unit::Plain | Unit::Boolean => format!("{prefix}_{field}"),
    }
}

/// The rows with distinct label sets, the first of each. Two records with the same labels (the
/// same position in two coins' answers, say) would make duplicate series, and Prometheus rejects
/// a whole scrape that has any. Labels start with the account, so only rows of one account can
/// be alike, and `rows` come account by account: each row is compared with its account's only.
fn unique<'a, R>(rows: impl IntoIterator<Item = (&'a str, RenderedLabels, &'a R)>) -> Vec<(RenderedLabels, &'a R)> {
    let mut kept: Vec<(RenderedLabels, &R)> = Vec::new();
    let (mut account, mut account_start) = ("", 0);
    for (name, labels, record) in rows {
        if name != account {
            (account, account_start) = (name, kept.len());
        }
        if !kept[account_start..].iter().any(|(seen, _)| *seen == labels) {
            kept.push((labels, record));
        }
    }
    kept
}

fn field_getter<R>(fields: &[NumericField<R>], name: &str) -> fn(&R) -> Option<Decimal> {
    fields.iter().find(|f| f.name == name).map(|f| f.value).unwrap_or_else(|| panic!("no field {name}"))
}

fn text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millisecond_fields_are_named_in_seconds() {
        assert_eq!(
            metric_name("capi_collateral", "updated_time", Unit::TimestampMillis),
            "capi_collateral_updated_timestamp_seconds"
        );
        assert_eq!(
            metric_name("capi_account", "create_order_delay_milliseconds", Unit::DurationMillis),
            "capi_account_create_order_delay_seconds"
        );
        assert_eq!(metric_name("capi_collateral", "is_liquidating", Unit::Boolean), "capi_collateral_is_liquidating");
    }

    #[test]
    fn the_same_position_in_two_coins_answers_is_one_series() {
        let position =
            Position { id: Some("7".into()), coin_id: Some("2".into()), size: Some(1.into()), ..Position::default() };
        let info = crate::api::model::AccountInfo { positions: vec![position], ..Default::default() };
        let now = local_now_ms();
        let snapshot = AccountSnapshot {
            coins: [(1, Arc::new(info.clone())), (2, Arc::new(info))].into(),
            fetched_at_ms: [(1, now), (2, now)].into(),
            ..AccountSnapshot::default()
        };
        let slot = AccountSlot::new("main");
        slot.publish(snapshot);
        let mut writer = TextWriter::default();
        SnapshotExposition::new(vec![slot], Duration::from_secs(60)).write(&mut writer);
        let text = String::from_utf8(writer.into_bytes()).unwrap();
        assert_eq!(text.matches("capi_position_size{").count(), 1, "{text}");
    }

    #[test]
    fn every_fee_group_names_real_fields() {
        for (_, _, _, members) in FEE_GROUPS {
            for (_, field) in members {
                field_getter(FeeSetting::NUMERIC_FIELDS, field);
            }
        }
    }
}
