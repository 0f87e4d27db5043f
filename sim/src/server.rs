//! The HTTP side: the two endpoints, and the pipeline every request goes through (fault, IP
//! weight, authentication, UID weight, parameters, answer), counted in [`RequestStats`].

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::header::DATE;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{on, MethodFilter};
use axum::{Extension, Router};

use super::auth::{authenticate, Incoming};
use super::book::{Account, BillQuery};
use super::reply::{Reply, BAD_PARAMETER};
use super::{DateHeader, Fault, SimExchange, SimOptions, State as SimState};

/// How each request ended, as counted in [`RequestStats::by_outcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Auth,
    RateLimited,
    /// An injected fault applied, whatever the answer under it would have been.
    Fault,
    BadRequest,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Auth => "auth",
            Self::RateLimited => "rate_limited",
            Self::Fault => "fault",
            Self::BadRequest => "bad_request",
        }
    }
}

/// Requests seen by the two endpoints (unknown paths are not counted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestStats {
    pub total: u64,
    pub by_path: BTreeMap<String, u64>,
    /// Keys: "ok", "auth", "rate_limited", "fault", "bad_request".
    pub by_outcome: BTreeMap<String, u64>,
    /// Requests that got an injected fault, by path.
    pub faulted_by_path: BTreeMap<String, u64>,
}

impl RequestStats {
    fn record(&mut self, path: &str, outcome: Outcome) {
        self.total += 1;
        *self.by_path.entry(path.to_owned()).or_default() += 1;
        *self.by_outcome.entry(outcome.label().to_owned()).or_default() += 1;
        if outcome == Outcome::Fault {
            *self.faulted_by_path.entry(path.to_owned()).or_default() += 1;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Account,
    Bills,
}

impl Endpoint {
    const ALL: [Self; 2] = [Self::Account, Self::Bills];

    /// Path, method, and (IP weight, UID weight) of spec section 8.
    fn route(self) -> (&'static str, MethodFilter, (u32, u32)) {
        match self {
            Self::Account => ("/capi/v2/account/account", MethodFilter::GET, (1, 1)),
            Self::Bills => ("/capi/v2/account/bills", MethodFilter::POST, (2, 5)),
        }
    }

    fn path(self) -> &'static str {
        self.route().0
    }

    /// The answer for an authenticated request, or `None` when its parameters are invalid.
    fn answer(
        self,
        account: &Account,
        request: &Incoming,
        options: &SimOptions,
        now_ms: i64,
    ) -> Option<serde_json::Value> {
        match self {
            Self::Account => coin_id_param(request.query).map(|coin_id| account.to_json(coin_id)),
            Self::Bills => BillQuery::parse(request.body)
                .filter(|query| !query.is_refused(options))
                .map(|query| account.bill_page(&query, options, now_ms)),
        }
    }
}

/// `coinId` of the query string: required, digits only.
fn coin_id_param(query: Option<&str>) -> Option<u64> {
    let value = query?.split('&').find_map(|pair| pair.strip_prefix("coinId="))?;
    value.bytes().all(|b| b.is_ascii_digit()).then(|| value.parse().ok()).flatten()
}

pub(crate) fn router(sim: SimExchange) -> Router {
    let endpoints = Endpoint::ALL.into_iter().fold(Router::new(), |router, endpoint| {
        router.route(endpoint.path(), on(endpoint.route().1, handle).layer(Extension(endpoint)))
    });
    super::control::routes(endpoints).with_state(sim)
}

/// Every endpoint's handler. The raw query and body bytes are kept as received, since they are
/// what the signature covers. (`Uri` rather than `OriginalUri`: axum's `original-uri` feature
/// is off, and the router is never nested, so the path is the one the client signed.)
async fn handle(
    State(sim): State<SimExchange>,
    Extension(endpoint): Extension<Endpoint>,
    method: Method,
    uri: Uri,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let fault = sim.lock().faults.next();
    if let Some(Fault::Hang(pause)) = &fault {
        tokio::time::sleep(*pause).await;
    }
    let request =
        Incoming { method: &method, path: uri.path(), query: query.as_deref(), headers: &headers, body: &body };
    let mut response = sim.answer(endpoint, &request, fault.as_ref()).into_response();
    response.headers_mut().insert(DATE, sim.date());
    response
}

impl SimExchange {
    /// The `Date` of an answer, as [`SimOptions::date`] has it.
    fn date(&self) -> HeaderValue {
        let now_ms = match self.shared.options.date {
            DateHeader::ExchangeClock => self.now_ms(),
            DateHeader::Skewed(ahead_ms) => self.now_ms().saturating_add(ahead_ms),
            DateHeader::Blank => return HeaderValue::from_static(""),
        };
        let now = UNIX_EPOCH + Duration::from_millis(u64::try_from(now_ms).unwrap_or_default());
        HeaderValue::from_str(&httpdate::fmt_http_date(now)).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    fn answer(&self, endpoint: Endpoint, request: &Incoming, fault: Option<&Fault>) -> Reply {
        let now_ms = self.now_ms();
        let options = &self.shared.options;
        let mut state = self.lock();
        let (reply, outcome) = match fault {
            None => serve(&mut state, options, endpoint, request, now_ms),
            Some(fault) => {
                let normal = || serve(&mut state, options, endpoint, request, now_ms).0;
                (fault.reply(normal, request.headers, now_ms), Outcome::Fault)
            }
        };
        state.stats.record(request.path, outcome);
        reply
    }
}

/// The exchange proper: rate limits, authentication, parameters, answer.
fn serve(
    state: &mut SimState,
    options: &SimOptions,
    endpoint: Endpoint,
    request: &Incoming,
    now_ms: i64,
) -> (Reply, Outcome) {
    let (ip_weight, uid_weight) = endpoint.route().2;
    if !state.limiter.spend_ip(ip_weight, now_ms) {
        return (Reply::too_many_requests(None, now_ms), Outcome::RateLimited);
    }
    let account = match authenticate(&state.book, request, now_ms, options.timestamp_window_ms) {
        Ok(account) => account,
        Err(code) => return (Reply::error(code, now_ms), Outcome::Auth),
    };
    if !state.limiter.spend_uid(&account.credentials.api_key, uid_weight, now_ms) {
        return (Reply::too_many_requests(None, now_ms), Outcome::RateLimited);
    }
    match endpoint.answer(account, request, options, now_ms) {
        Some(answer) => (Reply::json(StatusCode::OK, &answer), Outcome::Ok),
        None => (Reply::error(BAD_PARAMETER, now_ms), Outcome::BadRequest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::sign;
    use crate::Credentials;
    use axum::http::HeaderValue;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// Runs one request through the whole pipeline, signed or with `raw_header` as every
    /// authentication header.
    fn serve_once(endpoint: Endpoint, query: &str, body: &[u8], raw_header: Option<&[u8]>) -> (Reply, Outcome) {
        let sim = SimExchange::new(SimOptions::default());
        let credentials = Credentials::generate(1);
        sim.add_account(credentials.clone(), &[2]);
        let now = sim.now_ms();
        let timestamp = now.to_string();
        let method = if endpoint == Endpoint::Account { Method::GET } else { Method::POST };
        let signature = sign(&credentials.secret, &timestamp, method.as_str(), endpoint.path(), query, body);
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("access-key", credentials.api_key.as_bytes()),
            ("access-sign", signature.as_bytes()),
            ("access-timestamp", timestamp.as_bytes()),
            ("access-passphrase", credentials.passphrase.as_bytes()),
            ("content-type", b"application/json".as_slice()),
        ] {
            let value = raw_header.map_or(HeaderValue::from_bytes(value), HeaderValue::from_bytes);
            if let Ok(value) = value {
                headers.insert(name, value);
            }
        }
        let request = Incoming { method: &method, path: endpoint.path(), query: Some(query), headers: &headers, body };
        let result = serve(&mut sim.lock(), &sim.shared.options, endpoint, &request, now);
        result
    }

    proptest! {
        #[test]
        fn no_request_input_makes_the_exchange_panic(
            query in vec(any::<u8>(), 0..40),
            body in vec(any::<u8>(), 0..80),
            header in vec(any::<u8>(), 0..20),
        ) {
            let query = String::from_utf8_lossy(&query);
            for endpoint in Endpoint::ALL {
                let (reply, outcome) = serve_once(endpoint, &query, &body, None);
                prop_assert!(matches!(outcome, Outcome::Ok | Outcome::BadRequest), "{:?}", reply);
                let (_, outcome) = serve_once(endpoint, &query, &body, Some(&header));
                prop_assert_eq!(outcome, Outcome::Auth);
            }
        }
    }

    #[test]
    fn a_signed_request_reaches_its_answer() {
        let (reply, outcome) = serve_once(Endpoint::Bills, "", br#"{"limit":1}"#, None);
        assert_eq!((reply.status, outcome), (StatusCode::OK, Outcome::Ok));
        let (reply, outcome) = serve_once(Endpoint::Account, "coinId=x", b"", None);
        assert_eq!((reply.status, outcome), (StatusCode::BAD_REQUEST, Outcome::BadRequest));
    }

    #[test]
    fn coin_id_must_be_digits() {
        assert_eq!(coin_id_param(Some("coinId=2")), Some(2));
        assert_eq!(coin_id_param(Some("x=1&coinId=17&coinId=3")), Some(17));
        for bad in [
            None,
            Some(""),
            Some("coinId="),
            Some("coinId=+2"),
            Some("coinId=-2"),
            Some("coinId=2x"),
            Some("xcoinId=2"),
            Some("coinId=99999999999999999999"),
        ] {
            assert_eq!(coin_id_param(bad), None, "{bad:?}");
        }
    }
}
