//! The signed HTTP client for the two endpoints.

use super::clock::{local_now_ms, Clock};
use super::credentials::{self, Credentials, Known};
use super::error::ApiError;
use super::fields::DecodeProblem;
use super::json::{JsonObject, Scalar, MAX_ITEMS};
use super::model::{decode_account_info, decode_bill_page, AccountInfo, BillPage};
use super::sign::sign;
use bytes::BytesMut;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, DATE, RETRY_AFTER, USER_AGENT};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_rustls::MaybeHttpsStream;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpStream;
use tower::util::BoxCloneSyncService;
use tower::BoxError;

pub const BILLS_PATH: &str = "/capi/v2/account/bills";
pub const ACCOUNT_PATH: &str = "/capi/v2/account/account";
/// The largest answer read. A page of 100 bills is about 25 KiB and an account answer with
/// hundreds of positions a few hundred KiB; anything larger is a broken proxy or endpoint, and
/// reading it whole would hold any amount of memory.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;
/// The longest `Retry-After` honoured: a longer one (or a date further ahead) waits this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3_600);

/// The endpoint label of the exporter's own metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    Bills,
    Account,
}

impl Endpoint {
    pub const ALL: [Endpoint; 2] = [Endpoint::Bills, Endpoint::Account];

    pub fn as_str(self) -> &'static str {
        self.route().0
    }

    /// The label, and the method and path of the endpoint's requests.
    fn route(self) -> (&'static str, Method, &'static str) {
        match self {
            Endpoint::Bills => ("bills", Method::POST, BILLS_PATH),
            Endpoint::Account => ("account", Method::GET, ACCOUNT_PATH),
        }
    }
}

/// The connection pool shared by every account's client: HTTP/1.1 with keep-alive, over TLS
/// (rustls, the Mozilla roots of `webpki-roots`) for `https://` addresses.
pub type HttpPool = hyper_util::client::legacy::Client<Connector, Full<Bytes>>;

/// Makes the pool's connections: TCP, then TLS for `https://`, within one deadline.
pub type Connector = BoxCloneSyncService<Uri, MaybeHttpsStream<TokioIo<TcpStream>>, BoxError>;

const ACCESS_KEY: HeaderName = HeaderName::from_static("access-key");
const ACCESS_SIGN: HeaderName = HeaderName::from_static("access-sign");
const ACCESS_PASSPHRASE: HeaderName = HeaderName::from_static("access-passphrase");
const ACCESS_TIMESTAMP: HeaderName = HeaderName::from_static("access-timestamp");
const LOCALE: HeaderName = HeaderName::from_static("locale");
const USER_AGENT_TEXT: &str = concat!("capi_exporter/", env!("CARGO_PKG_VERSION"));

/// The bill query's body. Unused filters are left out rather than sent empty: every field is
/// optional (spec 4.1), so leaving one out cannot be read as "filter for the empty string".
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct BillQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub business_type: Option<String>,
    pub start_time: i64,
    pub end_time: i64,
    pub limit: u32,
}

/// An answer together with the fields that could not be read in it.
#[derive(Debug)]
pub struct Answer<T> {
    pub value: T,
    pub problems: Vec<DecodeProblem>,
}

/// An endpoint and how to read its answer: the top-level fields of which the answer holds at
/// least one, and the decoder of its records.
struct AnswerFormat<T> {
    endpoint: Endpoint,
    expected: &'static [&'static str],
    decode: fn(&JsonObject<'_>, &mut Vec<DecodeProblem>) -> Result<T, &'static str>,
}

const ACCOUNT_ANSWER: AnswerFormat<AccountInfo> = AnswerFormat {
    endpoint: Endpoint::Account,
    expected: &["account", "collateral", "position"],
    decode: decode_account_info,
};

const BILL_ANSWER: AnswerFormat<BillPage> =
    AnswerFormat { endpoint: Endpoint::Bills, expected: &["items", "hasNextPage"], decode: decode_bill_page };

/// Where and how to reach the exchange.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Without a trailing slash.
    pub base_url: String,
    pub timeout: Duration,
    pub locale: String,
}

/// A client for one account's credentials.
#[derive(Debug, Clone)]
pub struct Client {
    http: HttpPool,
    settings: ClientSettings,
    credentials: Credentials,
    /// Every account's credentials, to be taken out of error texts too.
    known: Known,
    /// The account's own estimate of the exchange's clock: a time read in one account's answer
    /// never moves another account's signing or bill cursor. Clones of the client (a restarted
    /// poller's) share it.
    clock: Arc<Clock>,
}

impl Client {
    pub fn new(
        http: HttpPool,
        settings: ClientSettings,
        credentials: Credentials,
        known: Known,
    ) -> Result<Self, ApiError> {
        // A base URL that is no URL is refused here, at start, rather than at every request.
        endpoint_uri(&settings.base_url, Endpoint::Bills, "")?;
        Ok(Self { http, settings, credentials, known, clock: Arc::default() })
    }

    /// The exchange's clock as estimated so far.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// A connection pool to share between the accounts' clients.
    pub fn http_pool(connect_timeout: Duration) -> HttpPool {
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .build(connector(connect_timeout))
    }

    /// `GET /capi/v2/account/account?coinId=N`.
    pub async fn account(&self, coin_id: u64) -> Result<Answer<AccountInfo>, ApiError> {
        let query = format!("coinId={coin_id}");
        self.send(&ACCOUNT_ANSWER, &query, Vec::new()).await
    }

    /// `POST /capi/v2/account/bills`.
    pub async fn bills(&self, query: &BillQuery) -> Result<Answer<BillPage>, ApiError> {
        let body = serde_json::to_vec(query).map_err(|e| ApiError::Decode(e.to_string()))?;
        self.send(&BILL_ANSWER, "", body).await
    }

    /// Signs and sends one request, returning the decoded records of a successful answer. An
    /// answer that rejects the timestamp (40008) and tells the exchange's time corrects the
    /// clock, so that the caller's next attempt is signed right; a successful one's `Date` can
    /// correct a clock off by less than the exchange rejects.
    async fn send<T>(&self, format: &AnswerFormat<T>, query: &str, body: Vec<u8>) -> Result<Answer<T>, ApiError> {
        let sent_ms = local_now_ms();
        let (_, method, path) = format.endpoint.route();
        let signed_offset_ms = self.clock.offset_ms();
        let timestamp = sent_ms.saturating_add(signed_offset_ms).to_string();
        let signature = sign(self.credentials.secret.expose(), &timestamp, method.as_str(), path, query, &body);
        let mut request = Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = method;
        *request.uri_mut() = endpoint_uri(&self.settings.base_url, format.endpoint, query)?;
        *request.headers_mut() = self.headers(&timestamp, &signature)?;
        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| ApiError::Transport(error_chain(&e)))?;
            let (head, body) = response.into_parts();
            Ok::<_, ApiError>((head, read_limited(body).await?))
        };
        // The whole exchange, from connecting to the answer's last byte.
        let timeout = self.settings.timeout;
        let (head, bytes) = tokio::time::timeout(timeout, exchange).await.map_err(|_| ApiError::Timeout(timeout))??;
        // An error page or message may echo the request: say it without the credentials.
        let others = self.known.all();
        let hidden = Hidden { credentials: &self.credentials, others: &others, signature: &signature };
        let result = read_answer(format, head.status.as_u16(), &head.headers, &bytes, Some(hidden));
        match &result {
            Ok(_) => {
                if let Some(date) = date_ms(&head.headers) {
                    self.clock.correct_from_date(date, signed_offset_ms, sent_ms, local_now_ms());
                }
            }
            Err(e) => {
                if let Some(server_ms) = e.clock_skew_server_time() {
                    self.clock.correct(server_ms, sent_ms, local_now_ms());
                }
            }
        }
        result
    }

    fn headers(&self, timestamp: &str, signature: &str) -> Result<HeaderMap, ApiError> {
        let value = |text: &str| {
            HeaderValue::from_str(text)
                .map_err(|_| ApiError::Transport("a credential contains characters not allowed in HTTP headers".into()))
        };
        let mut headers = HeaderMap::with_capacity(8);
        let mut key = value(self.credentials.api_key.expose())?;
        let mut passphrase = value(self.credentials.passphrase.expose())?;
        key.set_sensitive(true);
        passphrase.set_sensitive(true);
        headers.insert(ACCESS_KEY, key);
        headers.insert(ACCESS_SIGN, value(signature)?);
        headers.insert(ACCESS_PASSPHRASE, passphrase);
        headers.insert(ACCESS_TIMESTAMP, value(timestamp)?);
        headers.insert(LOCALE, value(&self.settings.locale)?);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_TEXT));
        Ok(headers)
    }
}

/// The pool's connector. The request's own timeout bounds a connect it waits for, but when a
/// pooled connection comes free first, hyper finishes the connect in the background: the deadline
/// here covers it, TLS handshake included, so that a peer that stalls the handshake cannot hold
/// sockets. It is a second later than the request's, so that a connect the request waits for ends
/// as the request's timeout, not as a transport error.
fn connector(timeout: Duration) -> Connector {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    // Shared among a name's addresses, so that one that drops the connect leaves time for the next.
    tcp.set_connect_timeout(Some(timeout));
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp);
    BoxCloneSyncService::new(tower::timeout::Timeout::new(tls, timeout + Duration::from_secs(1)))
}

/// Reads a complete answer of the account query as the client does (public for the fuzz
/// targets, which drive exactly this path with arbitrary answers).
pub fn read_account_answer(status: u16, headers: &HeaderMap, body: &[u8]) -> Result<Answer<AccountInfo>, ApiError> {
    read_answer(&ACCOUNT_ANSWER, status, headers, body, None)
}

/// Reads a complete answer of the bill query as the client does (public for the fuzz targets).
pub fn read_bill_answer(status: u16, headers: &HeaderMap, body: &[u8]) -> Result<Answer<BillPage>, ApiError> {
    read_answer(&BILL_ANSWER, status, headers, body, None)
}

fn read_answer<T>(
    format: &AnswerFormat<T>,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    hidden: Option<Hidden<'_>>,
) -> Result<Answer<T>, ApiError> {
    decode_with(interpret(status, retry_after(headers), date_ms(headers), body, hidden)?, format)
}

/// What the texts an error quotes from an answer must not show: the account's credentials,
/// every other account's, and the request's signature. They are taken out of the decoded text (a
/// JSON message with any of its escapes undone, the start of a page), before it is cut to length.
#[derive(Clone, Copy)]
struct Hidden<'a> {
    credentials: &'a Credentials,
    others: &'a [Credentials],
    signature: &'a str,
}

/// `text` without what `hidden` names.
fn shown(text: &str, hidden: Option<Hidden<'_>>) -> String {
    match hidden {
        Some(Hidden { credentials, others, signature }) => credentials::redact(text, credentials, others, signature),
        None => text.to_owned(),
    }
}

/// A whole answer body of at most [`MAX_ANSWER_BYTES`], copied into one buffer as it arrives.
/// (Collecting it would keep every frame hyper hands on, with the read buffer under it: a body
/// sent in chunks of one byte is one frame a byte, and 1 MiB of them took 90 MiB.)
async fn read_limited(mut body: hyper::body::Incoming) -> Result<Bytes, ApiError> {
    let mut bytes = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::Transport(error_chain(&e)))?;
        let Some(data) = frame.data_ref() else { continue };
        if data.len() > MAX_ANSWER_BYTES - bytes.len() {
            return Err(ApiError::Decode(format!(
                "the answer is larger than {} MiB; a proxy or the endpoint is broken",
                MAX_ANSWER_BYTES >> 20
            )));
        }
        bytes.extend_from_slice(data);
    }
    Ok(bytes.freeze())
}

/// `<base_url><endpoint path>[?<query>]`.
fn endpoint_uri(base_url: &str, endpoint: Endpoint, query: &str) -> Result<Uri, ApiError> {
    let (_, _, path) = endpoint.route();
    let separator = if query.is_empty() { "" } else { "?" };
    Uri::try_from(format!("{base_url}{path}{separator}{query}"))
        .map_err(|e| ApiError::Transport(format!("the exchange address {base_url:?} is not a URL: {e}")))
}

/// Turns a complete HTTP answer into its JSON object or the error it carries.
fn interpret<'a>(
    status: u16,
    retry_after: Option<Duration>,
    date_ms: Option<i64>,
    body: &'a [u8],
    hidden: Option<Hidden<'_>>,
) -> Result<JsonObject<'a>, ApiError> {
    if status == 429 {
        return Err(ApiError::RateLimited { retry_after });
    }
    let json = JsonObject::parse(body);
    if let Some(error) = json.as_ref().ok().and_then(|json| exchange_error(json, date_ms, hidden)) {
        return Err(error);
    }
    match (status, json) {
        (200..=299, Ok(json)) if json.is_cut() => {
            Err(ApiError::Decode(format!("more than {MAX_ITEMS} members at its top level")))
        }
        (200..=299, Ok(json)) => Ok(json),
        (200..=299, Err(error)) => {
            let (what, start) = (json_problem(&error), snippet(body, hidden));
            Err(ApiError::Decode(format!("not a JSON object ({what}) of {} bytes: {start}", body.len())))
        }
        (status, _) => Err(ApiError::Http { status, snippet: snippet(body, hidden) }),
    }
}

/// What is wrong with an answer that is no JSON object, in words of our own: serde_json's message
/// quotes the value it found, and with it a whole string answer (an echo of the credentials, or
/// 16 MiB). A value of another type has no place to name: it is the whole answer.
fn json_problem(error: &serde_json::Error) -> String {
    let place = format!("line {}, column {}", error.line(), error.column());
    match error.classify() {
        serde_json::error::Category::Data => "a value of another type".to_owned(),
        serde_json::error::Category::Eof => format!("cut short, {place}"),
        serde_json::error::Category::Syntax | serde_json::error::Category::Io => format!("not JSON, {place}"),
    }
}

/// The documented error body `{"code":"40009","msg":"...","requestTime":...}`; the code may be a
/// string or a number. Success bodies never carry a `code`, so its presence alone marks an error
/// unless it is one of the usual "OK" codes some gateways add. The exchange's time comes from
/// `requestTime` (milliseconds) or else the `Date` header (seconds).
fn exchange_error(object: &JsonObject<'_>, date_ms: Option<i64>, hidden: Option<Hidden<'_>>) -> Option<ApiError> {
    let code = match object.get("code")?.scalar() {
        Scalar::Text(s) => s.into_owned(),
        Scalar::Number(n) => n.to_owned(),
        _ => return None,
    };
    if matches!(code.as_str(), "0" | "00000" | "200") {
        return None;
    }
    // A code that is part of a credential would go into a label: an echo of the request.
    let echoed = hidden.is_some_and(|Hidden { credentials, others, signature }| {
        credentials::is_part_of_one(&code, credentials, others, signature)
    });
    let kept = super::error::is_documented_code(&code) || (is_plain_code(&code) && !echoed);
    let code = if kept { code } else { OTHER_CODE.to_owned() };
    let message = match object.get("msg").map(|m| m.scalar()) {
        Some(Scalar::Text(message)) => quoted(&message, false, hidden, 200),
        _ => String::new(),
    };
    let request_time = object.get("requestTime").and_then(|t| super::fields::integer(t).ok());
    Some(ApiError::Exchange { code, message, server_time_ms: request_time.or(date_ms) })
}

/// The code of an error answer that is not a short run of digits and letters, which could
/// otherwise create any number of `code` label values.
pub const OTHER_CODE: &str = "other";

fn is_plain_code(code: &str) -> bool {
    (1..=16).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Decodes an answer whose top level must hold at least one of the format's fields.
fn decode_with<T>(body: JsonObject<'_>, format: &AnswerFormat<T>) -> Result<Answer<T>, ApiError> {
    let expected = format.expected;
    if !expected.iter().any(|k| body.get(k).is_some()) {
        return Err(ApiError::Decode(format!("none of the fields {expected:?} in the answer")));
    }
    let mut problems = Vec::new();
    let value = (format.decode)(&body, &mut problems).map_err(|e| ApiError::Decode(e.to_string()))?;
    Ok(Answer { value, problems })
}

/// The answer's `Date`.
fn date(headers: &HeaderMap) -> Option<SystemTime> {
    httpdate::parse_http_date(headers.get(DATE)?.to_str().ok()?).ok()
}

fn date_ms(headers: &HeaderMap) -> Option<i64> {
    Some(date(headers)?.duration_since(UNIX_EPOCH).ok()?.as_millis() as i64)
}

/// `Retry-After` in seconds or as an HTTP date, at most [`MAX_RETRY_AFTER`]. A date is read
/// against the answer's own `Date` when it has one: this machine's clock may be off by more
/// than the wait.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let seconds = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let wait = if seconds {
        // Digits beyond u64 are still a wait in seconds, a long one.
        Duration::from_secs(text.parse().unwrap_or(u64::MAX))
    } else {
        let now = date(headers).unwrap_or_else(SystemTime::now);
        httpdate::parse_http_date(text).ok()?.duration_since(now).unwrap_or_default()
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The start of a body, on one line, for error messages (HTML error pages can be long).
fn snippet(body: &[u8], hidden: Option<Hidden<'_>>) -> String {
    let start = &body[..body.len().min(QUOTED_BYTES)];
    quoted(&String::from_utf8_lossy(start), body.len() > QUOTED_BYTES, hidden, 120)
}

/// How much of an answer's text an error looks at to quote its start: a body can be 16 MiB.
const QUOTED_BYTES: usize = 64 * 1024;

/// The start of `text` (itself the start of a longer text if `cut_before`) as an error quotes it:
/// on one line (runs of white space as one space), without what `hidden` names, cut after
/// `max_chars` characters. The credentials are taken out of the line, not the text: one with a
/// space in it may be quoted across a line break. And only as much as may be quoted is looked
/// at, with room for a credential's longest form at its end; if the text goes on beyond, that
/// room is dropped after, so that a credential cut there shows no part of itself.
fn quoted(text: &str, cut_before: bool, hidden: Option<Hidden<'_>>, max_chars: usize) -> String {
    let room = credentials::LONGEST_FORM_CHARS;
    let mut chars = text.split_whitespace().flat_map(|word| std::iter::once(' ').chain(word.chars())).skip(1);
    let line: String = chars.by_ref().take(max_chars + 2 * room).collect();
    let goes_on = cut_before || chars.next().is_some();
    let mut line: Vec<char> = shown(&line, hidden).chars().collect();
    if goes_on {
        line.truncate(line.len().saturating_sub(room));
    }
    let cut = goes_on || line.len() > max_chars;
    let mut quoted: String = line.into_iter().take(max_chars).collect();
    if cut {
        quoted.push_str("...");
    }
    quoted
}

/// The HTTP client's message plus its causes ("connection refused" lives in a source error).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tls_handshake_that_stalls_is_given_up_at_the_connect_deadline() {
        // A peer that accepts connections and never says a word.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("https://{}/", listener.local_addr().unwrap()).parse().unwrap();
        let _mute = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let mut connector = connector(Duration::from_millis(200));
        let connecting = tower::ServiceExt::oneshot(&mut connector, uri);
        let result =
            tokio::time::timeout(Duration::from_secs(20), connecting).await.expect("the connect gave up by itself");
        assert!(result.is_err_and(|e| e.is::<tower::timeout::error::Elapsed>()));
    }

    #[test]
    fn the_bill_body_is_compact_and_leaves_out_unused_filters() {
        let query = BillQuery { start_time: 1, end_time: 2, limit: 100, ..Default::default() };
        assert_eq!(serde_json::to_string(&query).unwrap(), r#"{"startTime":1,"endTime":2,"limit":100}"#);
        let query = BillQuery { business_type: Some("deposit".into()), ..query };
        assert_eq!(
            serde_json::to_string(&query).unwrap(),
            r#"{"businessType":"deposit","startTime":1,"endTime":2,"limit":100}"#
        );
    }

    #[test]
    fn error_bodies_become_typed_errors() {
        let exchange = interpret(400, None, None, br#"{"code":40009,"msg":"bad sign","requestTime":1}"#, None);
        assert!(
            matches!(exchange, Err(ApiError::Exchange { ref code, server_time_ms: Some(1), .. }) if code == "40009")
        );
        let dated = interpret(400, None, Some(5_000), br#"{"code":"40008","msg":"expired"}"#, None);
        assert!(matches!(dated, Err(ApiError::Exchange { server_time_ms: Some(5_000), .. })));
        let html = interpret(502, None, None, b"<html>\n<body>Bad Gateway</body></html>", None);
        assert!(
            matches!(html, Err(ApiError::Http { status: 502, ref snippet }) if snippet == "<html> <body>Bad Gateway</body></html>")
        );
        let missing = interpret(404, None, None, b"Not Found", None).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "HTTP 404 from the exchange: Not Found (no such path there: check --api.base-url)"
        );
        let limited = interpret(429, Some(Duration::from_secs(3)), None, b"", None);
        assert!(matches!(limited, Err(ApiError::RateLimited { retry_after: Some(d) }) if d.as_secs() == 3));
        let truncated = interpret(200, None, None, br#"{"hasNextPage":false,"ite"#, None);
        assert!(matches!(truncated, Err(ApiError::Decode(_))));
        assert!(interpret(200, None, None, br#"{"code":"00000","items":[]}"#, None).is_ok());
        assert!(matches!(interpret(200, None, None, b"[]", None), Err(ApiError::Decode(_))));
    }

    proptest::proptest! {
        /// Any header text from the network: the wait is at most an hour, the date any time
        /// at all, and nothing panics.
        #[test]
        fn any_retry_after_or_date_is_bounded(value in "[ -~]{0,40}", seconds: u64) {
            for text in [value.clone(), seconds.to_string(), format!("{seconds}{value}")] {
                let Ok(header) = HeaderValue::from_str(&text) else { continue };
                let headers = HeaderMap::from_iter([(RETRY_AFTER, header.clone()), (DATE, header)]);
                proptest::prop_assert!(retry_after(&headers).is_none_or(|wait| wait <= MAX_RETRY_AFTER));
                let _ = date_ms(&headers);
            }
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds_or_as_a_date_and_capped() {
        let headers = |value: &str| HeaderMap::from_iter([(RETRY_AFTER, HeaderValue::from_str(value).unwrap())]);
        assert_eq!(retry_after(&headers("42")), Some(Duration::from_secs(42)));
        assert_eq!(retry_after(&headers("18446744073709551615")), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after(&headers("99999999999999999999")), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after(&headers("Sun, 06 Nov 1994 08:49:37 GMT")), Some(Duration::ZERO));
        let in_two_minutes = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(121));
        let wait = retry_after(&headers(&in_two_minutes)).unwrap();
        assert!(Duration::from_secs(110) < wait && wait <= Duration::from_secs(121), "{wait:?}");
        assert_eq!(retry_after(&headers("Fri, 31 Dec 9999 23:59:59 GMT")), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after(&headers("soon")), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn a_retry_after_date_is_read_against_the_answers_own_date() {
        let headers = HeaderMap::from_iter([
            (RETRY_AFTER, HeaderValue::from_static("Sun, 06 Nov 1994 08:51:37 GMT")),
            (DATE, HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT")),
        ]);
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(120)));
    }

    fn credentials(api_key: &str, secret: &str, passphrase: &str) -> Credentials {
        use super::super::credentials::Secret;
        Credentials { api_key: Secret::new(api_key), secret: Secret::new(secret), passphrase: Secret::new(passphrase) }
    }

    #[test]
    fn an_echo_of_the_credentials_is_hidden_however_the_answer_escapes_it() {
        let credentials = credentials("bg_3f9a", "s3cret", "4000pässe");
        let hidden = Some(Hidden { credentials: &credentials, others: &[], signature: "Rg+jv/w=" });
        let error = |status, body: &str| interpret(status, None, None, body.as_bytes(), hidden).unwrap_err();
        // Escapes serde_json would not write: `+` as .NET writes it, non-ASCII as Python does.
        let echo = r#"{"code":"40008","msg":"bad sign Rg\u002Bjv\/w= for p=4000p\u00e4sse, key bg_3f9a"}"#;
        let echoed = error(400, echo);
        assert!(echoed.is_clock_skew(), "a passphrase of digits leaves the code alone: {echoed:?}");
        assert_eq!(
            echoed.to_string(),
            format!("{}: bad sign [REDACTED] for p=[REDACTED], key [REDACTED]", {
                "exchange refused the request: code 40008 (timestamp expired: check this machine's clock)"
            })
        );
        let as_code = error(400, r#"{"code":"bg_3f9a","msg":"no"}"#);
        assert_eq!(as_code.exchange_code(), Some(OTHER_CODE), "a credential is no label value");
        // A page quoting the key where its start is cut to length shows none of it.
        let page = format!("<pre>{}ACCESS-KEY: bg_3f9a</pre>", "x".repeat(98));
        let ApiError::Http { snippet, .. } = error(502, &page) else { panic!() };
        assert!(snippet.ends_with("ACCESS-KEY: [REDA..."), "{snippet}");
    }

    #[test]
    fn an_echo_wrapped_cut_short_or_escaped_otherwise_shows_no_part_of_a_credential() {
        let credentials = credentials("weex_33db7430", "s3cret40012", "correct horse+battery/staple");
        let hidden = Some(Hidden { credentials: &credentials, others: &[], signature: "1e/x7iu+ACD=" });
        let error = |status, body: &str| interpret(status, None, None, body.as_bytes(), hidden).unwrap_err();
        let padding = " ".repeat(QUOTED_BYTES - 7);
        for (status, body, expected) in [
            // Wrapped across lines, as a page wraps its text.
            (403, "<pre>denied: correct\n horse+battery/staple</pre>".to_string(), "<pre>denied: [REDACTED]</pre>"),
            // As .NET's JSON writer escapes it, and as Python's quote() writes it in a link.
            (401, r#"{"passphrase":"correct horse\u002Bbattery/staple"}"#.into(), r#"{"passphrase":"[REDACTED]"}"#),
            (
                302,
                "<a href=\"/?s=1e/x7iu%2BACD%3D&p=correct%20horse%2Bbattery/staple\">".into(),
                "<a href=\"/?s=[REDACTED]&p=[REDACTED]\">",
            ),
            // Where the body is cut to be read, after white space that the line joins.
            (502, format!("{padding}weex_33db7430 denied"), "..."),
        ] {
            let ApiError::Http { snippet, .. } = error(status, &body) else { panic!("{body}") };
            assert_eq!(snippet, expected);
        }
        // A message is read whole, however much white space it begins with.
        let message = error(400, &format!(r#"{{"code":"40012","msg":"{padding}weex_33db7430 wrong"}}"#));
        assert!(message.to_string().ends_with("passphrase): [REDACTED] wrong"), "{message}");
        // A code that is part of a credential would be a label value; a documented one never is.
        assert_eq!(error(400, r#"{"code":"correct","msg":"x"}"#).exchange_code(), Some(OTHER_CODE));
        assert_eq!(message.exchange_code(), Some("40012"));
    }

    #[test]
    fn another_accounts_credentials_that_a_shared_proxy_quotes_are_hidden_too() {
        let (own, other) =
            (credentials("weex_own", "s-own", "pp-own"), credentials("weex_94e1893e", "s-other", "6RbATqZhrymXVuqB"));
        let configured = [own.clone(), other];
        let hidden = Some(Hidden { credentials: &own, others: &configured, signature: "sig" });
        let body =
            "<pre>upstream error; last request: ACCESS-KEY: weex_94e1893e ACCESS-PASSPHRASE: 6RbATqZhrymXVuqB</pre>";
        let ApiError::Http { snippet, .. } = interpret(502, None, None, body.as_bytes(), hidden).unwrap_err() else {
            panic!()
        };
        assert_eq!(
            snippet,
            "<pre>upstream error; last request: ACCESS-KEY: [REDACTED] ACCESS-PASSPHRASE: [REDACTED]</pre>"
        );
    }

    #[test]
    fn a_success_answer_that_is_no_object_is_described_without_its_text() {
        let credentials = credentials("bg_3f9a", "s3", "p4");
        let hidden = Some(Hidden { credentials: &credentials, others: &[], signature: "Rg+jv/w=" });
        let decode_error = |body: &[u8]| match interpret(200, None, None, body, hidden) {
            Err(ApiError::Decode(text)) => text,
            other => panic!("{other:?}"),
        };
        // serde_json's own message quotes a string answer whole, past the redaction and the cut.
        let echo = decode_error(br#""denied: ACCESS-KEY=bg_3f9a""#);
        assert_eq!(echo, r#"not a JSON object (a value of another type) of 28 bytes: "denied: ACCESS-KEY=[REDACTED]""#);
        let long = decode_error(format!("\"{}\"", "x".repeat(1 << 20)).as_bytes());
        assert!(long.len() < 300, "{} bytes", long.len());
        assert_eq!(decode_error(b"{\"a\":"), "not a JSON object (cut short, line 1, column 5) of 5 bytes: {\"a\":");
        assert_eq!(decode_error(b"<html>"), "not a JSON object (not JSON, line 1, column 1) of 6 bytes: <html>");
    }

    #[test]
    fn an_answer_of_more_members_than_any_answer_holds_is_refused() {
        let members = (0..=super::super::json::MAX_ITEMS).map(|i| format!(r#""{i}":0"#)).collect::<Vec<_>>();
        let body = format!(r#"{{{},"hasNextPage":false,"items":[]}}"#, members.join(","));
        let Err(error) = interpret(200, None, None, body.as_bytes(), None) else { panic!("taken") };
        assert_eq!(error.to_string(), "unreadable answer: more than 10001 members at its top level");
    }

    #[test]
    fn a_long_body_is_quoted_by_its_start_on_one_line() {
        let body = format!("<h1>Bad\n\n  Gateway</h1>{}", " word".repeat(4_000_000));
        let ApiError::Http { snippet, .. } = interpret(502, None, None, body.as_bytes(), None).unwrap_err() else {
            panic!()
        };
        assert_eq!(snippet, format!("<h1>Bad Gateway</h1> {}...", ["word"; 20].join(" ")));
        assert_eq!(snippet.chars().count(), 123);
    }

    #[test]
    fn only_short_codes_of_digits_and_letters_are_kept() {
        let code = |body: String| match interpret(400, None, None, body.as_bytes(), None) {
            Err(ApiError::Exchange { code, .. }) => code,
            other => panic!("{other:?}"),
        };
        assert_eq!(code(r#"{"code":"40009"}"#.into()), "40009");
        assert_eq!(code(r#"{"code":40015}"#.into()), "40015");
        assert_eq!(code(r#"{"code":"E_LIMIT1"}"#.into()), OTHER_CODE);
        assert_eq!(code(format!(r#"{{"code":"{}"}}"#, "9".repeat(5_000))), OTHER_CODE);
        assert_eq!(code(r#"{"code":"4000\n9"}"#.into()), OTHER_CODE);
        assert_eq!(code(r#"{"code":-1}"#.into()), OTHER_CODE);
    }

    #[test]
    fn an_answer_without_the_expected_fields_is_a_decode_error() {
        let body = JsonObject::parse(br#"{"something": 1}"#).unwrap();
        assert!(matches!(decode_with(body, &BILL_ANSWER), Err(ApiError::Decode(_))));
    }
}
