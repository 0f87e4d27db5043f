//! Authentication of one request, as the exchange documents it. The checks run in a fixed
//! order and the first failure names the error code, so a client can be tested against each.
//! Headers are compared as bytes: whatever a client sends, nothing here can panic.

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, Method};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::book::{Account, Book};
use super::reply::{
    BAD_PASSPHRASE, BAD_SIGNATURE, EMPTY_KEY, EMPTY_PASSPHRASE, EMPTY_SIGN, EMPTY_TIMESTAMP, INVALID_CONTENT_TYPE,
    INVALID_KEY, INVALID_TIMESTAMP, TIMESTAMP_EXPIRED,
};

const TIMESTAMP_DIGITS: usize = 13;

/// The parts of a request that are signed, exactly as received.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Incoming<'a> {
    pub(crate) method: &'a Method,
    pub(crate) path: &'a str,
    /// The raw query string, without the `?`.
    pub(crate) query: Option<&'a str>,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: &'a [u8],
}

/// The account a request is signed for, or the documented code of the first check it fails.
pub(crate) fn authenticate<'b>(
    book: &'b Book,
    request: &Incoming,
    now_ms: i64,
    window_ms: i64,
) -> Result<&'b Account, &'static str> {
    let headers = request.headers;
    let key = required(headers, "access-key", EMPTY_KEY)?;
    let signature = required(headers, "access-sign", EMPTY_SIGN)?;
    let timestamp = required(headers, "access-timestamp", EMPTY_TIMESTAMP)?;
    let passphrase = required(headers, "access-passphrase", EMPTY_PASSPHRASE)?;
    let (timestamp, timestamp_ms) = parse_timestamp(timestamp).ok_or(INVALID_TIMESTAMP)?;
    if !is_json(headers) {
        return Err(INVALID_CONTENT_TYPE);
    }
    let account = std::str::from_utf8(key).ok().and_then(|key| book.account(key)).ok_or(INVALID_KEY)?;
    if timestamp_ms.abs_diff(now_ms) > u64::try_from(window_ms).unwrap_or(0) {
        return Err(TIMESTAMP_EXPIRED);
    }
    let credentials = &account.credentials;
    if !text_matches(&credentials.passphrase, passphrase) {
        return Err(BAD_PASSPHRASE);
    }
    let expected = sign(
        &credentials.secret,
        timestamp,
        request.method.as_str(),
        request.path,
        request.query.unwrap_or(""),
        request.body,
    );
    if !text_matches(&expected, signature) {
        return Err(BAD_SIGNATURE);
    }
    Ok(account)
}

/// A header's bytes, or `code` when it is missing or empty.
fn required<'h>(headers: &'h HeaderMap, name: &str, code: &'static str) -> Result<&'h [u8], &'static str> {
    headers.get(name).map(HeaderValue::as_bytes).filter(|value| !value.is_empty()).ok_or(code)
}

/// The timestamp's text and value, when it is exactly 13 digits (milliseconds).
fn parse_timestamp(raw: &[u8]) -> Option<(&str, i64)> {
    if raw.len() != TIMESTAMP_DIGITS || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let text = std::str::from_utf8(raw).ok()?;
    Some((text, text.parse().ok()?))
}

/// `application/json`, with or without parameters such as a charset.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media_type| media_type.trim().eq_ignore_ascii_case("application/json"))
}

/// The signature the exchange expects (facts document, "Signature"): Base64 of the HMAC-SHA256,
/// keyed with the secret, of timestamp, upper-case method, path, `?query` when there is one, and
/// body. Written from the documentation on the exchange's side, apart from the exporter's own
/// signing, so that a mistake in either shows.
pub fn sign(secret: &str, timestamp: &str, method: &str, path: &str, query: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    let separator = if query.is_empty() { "" } else { "?" };
    for part in [timestamp, &method.to_ascii_uppercase(), path, separator, query] {
        mac.update(part.as_bytes());
    }
    mac.update(body);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Constant-time comparison of a secret text with header bytes (false if the lengths differ).
fn text_matches(expected: &str, given: &[u8]) -> bool {
    expected.as_bytes().ct_eq(given).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Credentials;

    const NOW: i64 = 1_591_089_508_404;
    const PATH: &str = "/capi/v2/account/account";

    fn book() -> Book {
        let mut book = Book::default();
        let credentials = Credentials { api_key: "key".into(), secret: "secret".into(), passphrase: "pass".into() };
        book.add_account(credentials, &[2], 0);
        book
    }

    /// Headers of a GET signed with the facts document's worked example.
    fn signed_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("access-key", "key"),
            ("access-sign", "ZJG7QgZ4EX9YtHx67o5b8jg5FvqplvKB1lpiA3zIJr0="),
            ("access-timestamp", "1591089508404"),
            ("access-passphrase", "pass"),
            ("content-type", "application/json"),
        ] {
            headers.insert(name, HeaderValue::from_static(value));
        }
        headers
    }

    fn check(headers: &HeaderMap, query: &str, now_ms: i64) -> Result<(), &'static str> {
        let book = book();
        let request = Incoming { method: &Method::GET, path: PATH, query: Some(query), headers, body: b"" };
        authenticate(&book, &request, now_ms, 30_000).map(|_| ())
    }

    #[test]
    fn the_documented_example_is_accepted() {
        assert_eq!(check(&signed_headers(), "coinId=2", NOW), Ok(()));
    }

    #[test]
    fn each_failure_has_its_code_in_the_documented_order() {
        let cases: [(&str, &str, &str); 12] = [
            ("access-key", "", EMPTY_KEY),
            ("access-sign", "", EMPTY_SIGN),
            ("access-timestamp", "", EMPTY_TIMESTAMP),
            ("access-passphrase", "", EMPTY_PASSPHRASE),
            ("access-timestamp", "159108950840", INVALID_TIMESTAMP),
            ("access-timestamp", "15910895084x4", INVALID_TIMESTAMP),
            ("content-type", "text/plain", INVALID_CONTENT_TYPE),
            ("access-key", "other", INVALID_KEY),
            ("access-timestamp", "1591089538405", TIMESTAMP_EXPIRED),
            ("access-passphrase", "wrong", BAD_PASSPHRASE),
            ("access-sign", "ZJG7QgZ4EX9YtHx67o5b8jg5FvqplvKB1lpiA3zIJr0", BAD_SIGNATURE),
            ("access-timestamp", "1591089508405", BAD_SIGNATURE),
        ];
        for (name, value, code) in cases {
            let mut headers = signed_headers();
            headers.insert(name, HeaderValue::from_static(value));
            assert_eq!(check(&headers, "coinId=2", NOW), Err(code), "{name}: {value:?}");
        }
        let mut headers = signed_headers();
        headers.remove("access-key");
        headers.remove("content-type");
        assert_eq!(check(&headers, "coinId=2", NOW), Err(EMPTY_KEY));
        let mut headers = signed_headers();
        headers.remove("content-type");
        assert_eq!(check(&headers, "coinId=2", NOW), Err(INVALID_CONTENT_TYPE));
        let mut headers = signed_headers();
        headers.insert("access-key", HeaderValue::from_bytes(b"\xffkey").expect("header bytes"));
        assert_eq!(check(&headers, "coinId=2", NOW), Err(INVALID_KEY));
    }

    #[test]
    fn the_query_is_signed_byte_for_byte() {
        assert_eq!(check(&signed_headers(), "coinId=02", NOW), Err(BAD_SIGNATURE));
        assert_eq!(check(&signed_headers(), "coinId=2&", NOW), Err(BAD_SIGNATURE));
    }

    #[test]
    fn the_timestamp_window_is_thirty_seconds_either_way() {
        let headers = signed_headers();
        assert_eq!(check(&headers, "coinId=2", NOW + 30_000), Ok(()));
        assert_eq!(check(&headers, "coinId=2", NOW - 30_000), Ok(()));
        assert_eq!(check(&headers, "coinId=2", NOW + 30_001), Err(TIMESTAMP_EXPIRED));
        assert_eq!(check(&headers, "coinId=2", NOW - 30_001), Err(TIMESTAMP_EXPIRED));
    }

    #[test]
    fn content_type_may_carry_a_charset() {
        let mut headers = signed_headers();
        headers.insert("content-type", HeaderValue::from_static("Application/JSON; charset=utf-8"));
        assert_eq!(check(&headers, "coinId=2", NOW), Ok(()));
    }
}
