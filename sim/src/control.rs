//! Scripting over HTTP, for tools outside the process (the end-to-end test, a curious demo
//! user): `POST /sim/liquidation?account=N&coin_id=C&on=true|false` starts or ends a
//! liquidation of the `N`th account added (the demo's `demo-N`), as
//! [`super::SimExchange::set_liquidating`] does. The real exchange has no such path.

use super::SimExchange;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;

pub(crate) const LIQUIDATION_PATH: &str = "/sim/liquidation";

#[derive(Debug, Deserialize)]
struct Liquidation {
    account: u64,
    coin_id: u64,
    on: bool,
}

pub(crate) fn routes(router: Router<SimExchange>) -> Router<SimExchange> {
    router.route(LIQUIDATION_PATH, post(liquidation))
}

async fn liquidation(State(sim): State<SimExchange>, Query(request): Query<Liquidation>) -> (StatusCode, String) {
    let key = sim.with_book(|book, _| {
        let key = book.api_key_of_number(request.account)?;
        book.account(&key)?.coin_ids().contains(&request.coin_id).then_some(key)
    });
    let Some(key) = key else {
        return (StatusCode::NOT_FOUND, format!("no account {} with coin {}\n", request.account, request.coin_id));
    };
    sim.set_liquidating(&key, request.coin_id, request.on);
    let state = if request.on { "started" } else { "ended" };
    (StatusCode::OK, format!("liquidation of account {} coin {} {state}\n", request.account, request.coin_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credentials, SimOptions};
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    async fn post(sim: &SimExchange, query: &str) -> StatusCode {
        let request = Request::post(format!("{LIQUIDATION_PATH}?{query}")).body(Body::empty()).unwrap();
        sim.router().oneshot(request).await.unwrap().status()
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
