//! Scripting over HTTP, for tools outside the process (the end-to-end test, a curious demo
//! user), on the `N`th account added (the demo's `demo-N`); the real exchange has no such paths:
//! - `POST /sim/liquidation?account=N&coin_id=C&on=true|false` starts or ends a liquidation, as
//!   [`super::SimExchange::set_liquidating`] does;
//! - `POST /sim/hidden-bill?account=N&coin_id=C&business_type=T&amount=A` books a bill that the
//!   bill query never lists: the collateral and its running totals move, no bill shows;
//! - `POST /sim/running-total?account=N&coin_id=C&field=F&by=X` moves a running total (`cum_*`)
//!   with no bill at all.
//!
//! The last two break the ledger on purpose: what the exporter's ledger check is for.

use super::records::coin_name;
use super::{NewBill, SimExchange};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use rust_decimal::Decimal;
use serde::Deserialize;
use std::time::Duration;

pub(crate) const LIQUIDATION_PATH: &str = "/sim/liquidation";
pub(crate) const HIDDEN_BILL_PATH: &str = "/sim/hidden-bill";
pub(crate) const RUNNING_TOTAL_PATH: &str = "/sim/running-total";

#[derive(Debug, Deserialize)]
struct Liquidation {
    account: u64,
    coin_id: u64,
    on: bool,
}

#[derive(Debug, Deserialize)]
struct HiddenBill {
    account: u64,
    coin_id: u64,
    business_type: String,
    amount: Decimal,
}

#[derive(Debug, Deserialize)]
struct RunningTotal {
    account: u64,
    coin_id: u64,
    field: String,
    by: Decimal,
}

pub(crate) fn routes(router: Router<SimExchange>) -> Router<SimExchange> {
    router
        .route(LIQUIDATION_PATH, post(liquidation))
        .route(HIDDEN_BILL_PATH, post(hidden_bill))
        .route(RUNNING_TOTAL_PATH, post(running_total))
}

/// An answer of the control routes: the refusals are answers too.
type Answer = Result<(StatusCode, String), (StatusCode, String)>;

/// The api key of the `account`th account, if it holds the coin.
fn account_key(sim: &SimExchange, account: u64, coin_id: u64) -> Result<String, (StatusCode, String)> {
    let key = sim.with_book(|book, _| {
        let key = book.api_key_of_number(account)?;
        book.account(&key)?.coin_ids().contains(&coin_id).then_some(key)
    });
    key.ok_or_else(|| (StatusCode::NOT_FOUND, format!("no account {account} with coin {coin_id}\n")))
}

async fn hidden_bill(State(sim): State<SimExchange>, Query(request): Query<HiddenBill>) -> Answer {
    let key = account_key(&sim, request.account, request.coin_id)?;
    let bill = NewBill {
        coin: coin_name(request.coin_id),
        business_type: request.business_type,
        amount: request.amount,
        visible_after: Duration::MAX,
        ..NewBill::default()
    };
    let id = sim.add_bill(&key, bill);
    Ok((StatusCode::OK, format!("bill {id} booked on account {}, never listed\n", request.account)))
}

async fn running_total(State(sim): State<SimExchange>, Query(request): Query<RunningTotal>) -> Answer {
    let key = account_key(&sim, request.account, request.coin_id)?;
    let Some(total) = sim.move_running_total(&key, request.coin_id, &request.field, request.by) else {
        return Err((StatusCode::BAD_REQUEST, format!("{} is no running total of the collateral\n", request.field)));
    };
    Ok((StatusCode::OK, format!("{} of account {} is now {total}, with no bill\n", request.field, request.account)))
}

async fn liquidation(State(sim): State<SimExchange>, Query(request): Query<Liquidation>) -> Answer {
    let key = account_key(&sim, request.account, request.coin_id)?;
    sim.set_liquidating(&key, request.coin_id, request.on);
    let state = if request.on { "started" } else { "ended" };
    Ok((StatusCode::OK, format!("liquidation of account {} coin {} {state}\n", request.account, request.coin_id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credentials, SimOptions};
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    async fn post_to(sim: &SimExchange, path: &str, query: &str) -> StatusCode {
        let request = Request::post(format!("{path}?{query}")).body(Body::empty()).unwrap();
        sim.router().oneshot(request).await.unwrap().status()
    }

    async fn post(sim: &SimExchange, query: &str) -> StatusCode {
        post_to(sim, LIQUIDATION_PATH, query).await
    }

    #[tokio::test]
    async fn a_hidden_bill_or_a_moved_total_breaks_the_ledger() {
        let sim = SimExchange::new(SimOptions::default());
        let account = Credentials::generate(1);
        sim.add_account(account.clone(), &[2]);
        let query = "account=1&coin_id=2&business_type=deposit&amount=2.5";
        assert_eq!(post_to(&sim, HIDDEN_BILL_PATH, query).await, StatusCode::OK);
        let collateral = &sim.account_json(&account.api_key, 2)["collateral"][0];
        assert_eq!((&collateral["cum_deposit_amount"], &collateral["amount"]), (&"2.5".into(), &"10002.5".into()));
        let booked = sim.bills(&account.api_key);
        assert_eq!(booked.len(), 1);
        assert_eq!(booked[0].visible_at_ms, i64::MAX, "never listed");
        assert_eq!(
            post_to(&sim, HIDDEN_BILL_PATH, "account=2&coin_id=2&business_type=deposit&amount=1").await,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            post_to(&sim, HIDDEN_BILL_PATH, "account=1&coin_id=2&business_type=deposit&amount=x").await,
            StatusCode::BAD_REQUEST
        );
    }

    #[tokio::test]
    async fn the_nth_account_added_starts_and_ends_a_liquidation() {
        let sim = SimExchange::new(SimOptions::default());
        let (first, second) = (Credentials::generate(1), Credentials::generate(2));
        sim.add_account(first.clone(), &[2]);
        sim.add_account(second.clone(), &[2]);
        let liquidating = |key: &str| sim.account_json(key, 2)["collateral"][0]["is_liquidating"].as_bool();

        assert_eq!(post(&sim, "account=2&coin_id=2&on=true").await, StatusCode::OK);
        assert_eq!(liquidating(&second.api_key), Some(true));
        assert_eq!(liquidating(&first.api_key), Some(false));
        let kinds: Vec<String> = sim.bills(&second.api_key).into_iter().map(|b| b.business_type).collect();
        assert_eq!(kinds, ["start_liquidate"]);

        assert_eq!(post(&sim, "account=2&coin_id=2&on=false").await, StatusCode::OK);
        assert_eq!(liquidating(&second.api_key), Some(false));
        assert_eq!(post(&sim, "account=3&coin_id=2&on=true").await, StatusCode::NOT_FOUND);
        assert_eq!(post(&sim, "account=1&coin_id=9&on=true").await, StatusCode::NOT_FOUND);
        assert_eq!(post(&sim, "account=0&coin_id=2&on=true").await, StatusCode::NOT_FOUND);
        assert_eq!(post(&sim, "account=x").await, StatusCode::BAD_REQUEST);
    }
}
