//! Criterion benches of the exporter's hot paths: decoding the exchange's answers, counting
//! bills (a crowded millisecond of made-up values included), the ledger check on an answer of
//! the most records, and rendering `/metrics`. Run `cargo bench --bench exporter`; `cargo test
//! --all-targets` runs each once, so they cannot rot.
//!
//! The inputs come from the simulated exchange in scale mode (the same accounts `capi_sim`
//! serves): 2 coins and 5 positions per account, plus bills of 12 business types per coin.

use capi_exporter::api::fields::Millis;
use capi_exporter::api::json::JsonObject;
use capi_exporter::api::model::{
    decode_account_info, decode_bill_page, AccountInfo, Bill, BillPage, Collateral, BUSINESS_TYPES,
};
use capi_exporter::exposition::{Exposition, Format};
use capi_exporter::poller::cursor::BillCursor;
use capi_exporter::poller::ledger::{self, Ledger};
use capi_exporter::snapshot::counters::BillCounters;
use capi_exporter::snapshot::stats::AccountStats;
use capi_exporter::snapshot::{AccountSlot, AccountSnapshot};
use capi_sim::scale::{populate, ScaleSpec};
use capi_sim::{SimExchange, SimOptions};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const COINS: [u64; 2] = [1, 2];
const COIN_NAMES: [&str; 2] = ["BTC", "USDT"];
/// Business types each coin has bills of, as an active trading account would.
const TYPES_PER_COIN: usize = 6;
const NOW_MS: i64 = 1_760_000_000_000;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The account query's answer for one coin with its positions, as the exchange sends it.
fn account_answer() -> Vec<u8> {
    let exchange = SimExchange::new(SimOptions::default());
    let account = populate(&exchange, &ScaleSpec { accounts: 1, coin_ids: COINS.to_vec(), positions: 5, seed: 1 });
    serde_json::to_vec(&exchange.account_json(&account[0].credentials.api_key, 2)).unwrap()
}

/// A full bill page: 100 bills over the business types, ids above 2^53 as integers.
fn bill_page_answer(first_id: u64) -> Vec<u8> {
    let items: Vec<Value> = (0..100u64)
        .map(|i| {
            json!({
                "billId": first_id + i, "coin": "USDT", "symbol": "cmt_btcusdt",
                "amount": format!("-{}.25", i), "fillFee": "0.0125", "balance": format!("{}.5", 10_000 - i),
                "businessType": BUSINESS_TYPES[i as usize % BUSINESS_TYPES.len()], "ctime": NOW_MS - 1_000 + i as i64,
            })
        })
        .collect();
    serde_json::to_vec(&json!({ "hasNextPage": false, "items": items })).unwrap()
}

fn decode_page(bytes: &[u8]) -> BillPage {
    decode_bill_page(&JsonObject::parse(bytes).unwrap(), &mut Vec::new()).unwrap()
}

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");
    let account = account_answer();
    group.throughput(Throughput::Bytes(account.len() as u64));
    group.bench_function("account_answer", |b| {
        b.iter(|| decode_account_info(&JsonObject::parse(black_box(&account)).unwrap(), &mut Vec::new()).unwrap())
    });
    let page = bill_page_answer(686_960_019_383_517_338);
    group.throughput(Throughput::Bytes(page.len() as u64));
    group.bench_function("bill_page_100", |b| b.iter(|| decode_page(black_box(&page))));
    group.finish();
}

/// One poll's bill work: a pass over the unsettled window answered by one page.
fn count_page(cursor: &mut BillCursor, counters: &mut BillCounters, page: &BillPage) {
    cursor.start_poll(NOW_MS);
    while cursor.next_query().is_some() {
        for bill in cursor.accept(page).new_bills {
            let _ = counters.count(&bill);
        }
    }
}

fn bill_counting(c: &mut Criterion) {
    let mut group = c.benchmark_group("bill_counting");
    let page = decode_page(&bill_page_answer(686_960_019_383_517_338));
    group.throughput(Throughput::Elements(page.items.len() as u64));
    // 100 bills never seen: each is counted.
    group.bench_function("new_page_100", |b| {
        b.iter_batched(
            || (BillCursor::new(NOW_MS - 60_000, 60_000, 100), BillCounters::default()),
            |(mut cursor, mut counters)| {
                count_page(&mut cursor, &mut counters, &page);
                counters
            },
            criterion::BatchSize::SmallInput,
        )
    });
    // The same 100 bills again, as every poll within --bills.overlap sees them: all skipped.
    let mut cursor = BillCursor::new(NOW_MS - 60_000, 60_000, 100);
    let mut counters = BillCounters::default();
    count_page(&mut cursor, &mut counters, &page);
    group.bench_function("seen_page_100", |b| {
        b.iter(|| {
            cursor.start_poll(NOW_MS);
            while cursor.next_query().is_some() {
                assert!(cursor.accept(&page).new_bills.is_empty());
            }
        })
    });
    group.finish();
}

/// A crowded millisecond's whole scan against an exchange that says every page is full and
/// shows 100 new bills of new coins and symbols on each: the split's query bound ends it, and
/// the last answer closes it (which counted the found bills once per full answer: 241 s).
fn crowded_millisecond(c: &mut Criterion) {
    let mut group = c.benchmark_group("bill_counting");
    group.sample_size(10);
    group.bench_function("crowded_millisecond_of_new_values", |b| {
        b.iter(|| {
            let mut cursor = BillCursor::new(NOW_MS, 1_000, 100);
            cursor.start_poll(NOW_MS);
            let mut id = 0u64;
            let mut queries = 0;
            while let Some(query) = cursor.next_query() {
                let mut items: Vec<Bill> = (0..100)
                    .map(|_| {
                        id += 1;
                        Bill {
                            id: id.to_string(),
                            business_type: query.business_type.clone().unwrap_or(format!("t{}", id % 50)),
                            coin: query.coin.clone().unwrap_or(format!("c{}", id % 50)),
                            symbol: query.symbol.clone().unwrap_or(format!("s{id}")),
                            amount: None,
                            balance: None,
                            fill_fee: None,
                            ctime_ms: NOW_MS,
                        }
                    })
                    .collect();
                // Bills on both bounds sent prove them inclusive.
                items[0].ctime_ms = query.start_time;
                items[1].ctime_ms = query.end_time;
                cursor.accept(&BillPage { has_next_page: true, items });
                queries += 1;
            }
            queries
        })
    });
    group.finish();
}

/// Counters as an account trading on both coins has them.
fn counters() -> BillCounters {
    let mut counters = BillCounters::default();
    for (coin_index, coin) in COIN_NAMES.iter().enumerate() {
        for (i, kind) in BUSINESS_TYPES.iter().take(TYPES_PER_COIN).enumerate() {
            let amount = Decimal::new(if i % 2 == 0 { 1250 } else { -1250 }, 2);
            let _ = counters.count(&Bill {
                id: format!("{coin_index}{i}"),
                coin: (*coin).to_owned(),
                symbol: "cmt_btcusdt".to_owned(),
                business_type: (*kind).to_owned(),
                amount: Some(amount),
                balance: Some(Decimal::new(1_000_000, 2)),
                fill_fee: Some(Decimal::new(-3, 2)),
                ctime_ms: NOW_MS,
            });
        }
    }
    counters
}

/// The accounts' slots, each with a snapshot published as its poller would after a good poll.
fn slots_for(accounts: u32) -> Vec<Arc<AccountSlot>> {
    let exchange = SimExchange::new(SimOptions::default());
    let spec = ScaleSpec { accounts, coin_ids: COINS.to_vec(), positions: 5, seed: 1 };
    let counters = Arc::new(counters());
    let mut stats = AccountStats::new(Duration::from_secs(15));
    for endpoint in [capi_exporter::api::Endpoint::Account, capi_exporter::api::Endpoint::Bills] {
        stats.request::<()>(endpoint, &Ok(()), Duration::from_millis(40));
    }
    let stats = Arc::new(stats);
    populate(&exchange, &spec)
        .into_iter()
        .map(|account| {
            let coins = COINS.map(|coin| {
                let body = serde_json::to_vec(&exchange.account_json(&account.credentials.api_key, coin)).unwrap();
                (coin, Arc::new(decode_account_info(&JsonObject::parse(&body).unwrap(), &mut Vec::new()).unwrap()))
            });
            let slot = AccountSlot::new(account.name);
            slot.publish(AccountSnapshot {
                coins: coins.into(),
                fetched_at_ms: COINS.map(|coin| (coin, now_ms())).into(),
                counters: counters.clone(),
                settled_through_ms: NOW_MS,
                // Every running total of every coin compared: the ledger check's series too.
                ledger: COINS.iter().flat_map(|c| ledger::fields().map(|f| ((*c, f), Decimal::ZERO))).collect(),
                up: true,
                stats: stats.clone(),
            });
            slot
        })
        .collect()
}

fn series(text: &[u8]) -> u64 {
    text.split(|&b| b == b'\n').filter(|line| !line.is_empty() && !line.starts_with(b"#")).count() as u64
}

/// Goes through a page as the server sends it, chunk by chunk; returns its length.
fn drain(mut page: capi_exporter::exposition::Page) -> usize {
    std::iter::from_fn(|| page.next_chunk()).map(|chunk| chunk.len()).sum()
}

/// A scrape's page when every account published since the last scrape (each account's lines
/// are rendered), and when none did (the kept lines are sent as they are).
fn render(c: &mut Criterion) {
    let mut group = c.benchmark_group("render");
    group.sample_size(20);
    // About 1k, 10k and 250k series: the cost per series should stay flat.
    for accounts in [4, 40, 1000] {
        let slots = slots_for(accounts);
        let exposition = Exposition::new(slots.clone(), Duration::from_secs(3600));
        let series = series(&exposition.page(Format::Text).into_bytes());
        group.throughput(Throughput::Elements(series));
        group.bench_with_input(BenchmarkId::new("every_account_published", series), &exposition, |b, exposition| {
            b.iter(|| {
                for slot in &slots {
                    slot.publish((*slot.latest().unwrap()).clone());
                }
                drain(exposition.page(Format::Text))
            })
        });
        group.bench_with_input(BenchmarkId::new("none_published", series), &exposition, |b, exposition| {
            b.iter(|| drain(exposition.page(Format::Text)))
        });
    }
    group.finish();
}

/// An answer of USDT with `count` isolated positions' records, the decoder's most: what an
/// exchange that lists every position ever opened would send.
fn positions_answer(count: usize, open: i64) -> AccountInfo {
    let record = |id: usize| Collateral {
        coin_id: Some("2".into()),
        margin_mode: Some("ISOLATED".into()),
        cross_contract_id: Some("0".into()),
        isolated_position_id: Some(id.to_string()),
        created_time: Some(Millis(NOW_MS - 60_000)),
        updated_time: Some(Millis(NOW_MS - 1_000)),
        cum_position_open_long_amount: Some(Decimal::new(open, 0)),
        ..Collateral::default()
    };
    AccountInfo { collateral: (1..=count).map(record).collect(), ..AccountInfo::default() }
}

/// One poll's ledger work for an account whose answer lists 10,000 records, once the comparison
/// has begun: the answer taken, and compared record by record.
fn ledger_check(c: &mut Criterion) {
    let mut group = c.benchmark_group("ledger");
    group.sample_size(10);
    let count = 10_000;
    let (first, next) = (positions_answer(count, 1), positions_answer(count, 2));
    group.throughput(Throughput::Elements(count as u64));
    group.bench_function("answer_of_10000_records", |b| {
        b.iter_batched(
            || {
                let mut ledger = Ledger::default();
                ledger.observe(2, &first, NOW_MS);
                ledger.settle(NOW_MS);
                ledger
            },
            |mut ledger| {
                ledger.observe(2, black_box(&next), NOW_MS + 1);
                ledger.settle(NOW_MS + 1)
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, decode, bill_counting, crowded_millisecond, ledger_check, render);
criterion_main!(benches);
