//! What the simulated exchange sends back: the documented error codes and bodies, and every
//! other shape of answer (JSON, 429, the HTML and broken bodies of faults), built as plain bytes
//! so a fault can cut them.

use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

pub(crate) const EMPTY_KEY: &str = "40001";
pub(crate) const EMPTY_SIGN: &str = "40002";
pub(crate) const EMPTY_TIMESTAMP: &str = "40003";
pub(crate) const INVALID_TIMESTAMP: &str = "40005";
pub(crate) const INVALID_KEY: &str = "40006";
pub(crate) const INVALID_CONTENT_TYPE: &str = "40007";
pub(crate) const TIMESTAMP_EXPIRED: &str = "40008";
pub(crate) const BAD_SIGNATURE: &str = "40009";
pub(crate) const EMPTY_PASSPHRASE: &str = "40011";
pub(crate) const BAD_PASSPHRASE: &str = "40012";
pub(crate) const BAD_PARAMETER: &str = "40017";

/// The documented error codes and their messages (facts document, "Errors").
const MESSAGES: [(&str, &str); 16] = [
    (EMPTY_KEY, "ACCESS_KEY cannot be empty"),
    (EMPTY_SIGN, "ACCESS_SIGN cannot be empty"),
    (EMPTY_TIMESTAMP, "ACCESS_TIMESTAMP cannot be empty"),
    (INVALID_TIMESTAMP, "Invalid ACCESS_TIMESTAMP"),
    (INVALID_KEY, "Invalid ACCESS_KEY"),
    (INVALID_CONTENT_TYPE, "Invalid Content_Type, please use application/json format"),
    (TIMESTAMP_EXPIRED, "Request timestamp expired"),
    (BAD_SIGNATURE, "Signature verification failed"),
    (EMPTY_PASSPHRASE, "ACCESS_PASSPHRASE cannot be empty"),
    (BAD_PASSPHRASE, "Incorrect API key or passphrase"),
    ("40013", "User has been frozen"),
    ("40014", "Incorrect permissions"),
    ("40015", "System error"),
    ("40016", "The user must bind a phone or authenticator"),
    (BAD_PARAMETER, "Parameter verification failed"),
    ("40018", "Invalid IP request"),
];

fn message(code: &str) -> &'static str {
    MESSAGES.iter().find(|(known, _)| *known == code).map_or("Unknown error", |(_, msg)| msg)
}

/// One answer, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    content_type: &'static str,
    pub(crate) body: Vec<u8>,
    retry_after_secs: Option<u64>,
}

impl Reply {
    pub(crate) fn json(status: StatusCode, value: &Value) -> Self {
        // A `Value` always serializes; an empty body would only show a bug, never panic.
        let body = serde_json::to_vec(value).unwrap_or_default();
        Self { status, content_type: "application/json", body, retry_after_secs: None }
    }

    /// The documented failure: HTTP 400 with `{"code","msg","requestTime"}`.
    pub(crate) fn error(code: &str, now_ms: i64) -> Self {
        Self::json(StatusCode::BAD_REQUEST, &json!({ "code": code, "msg": message(code), "requestTime": now_ms }))
    }

    /// HTTP 429. The exchange documents no Retry-After; a fault may add one.
    pub(crate) fn too_many_requests(retry_after_secs: Option<u64>, now_ms: i64) -> Self {
        let body = json!({ "code": "429", "msg": "Too Many Requests", "requestTime": now_ms });
        Self { retry_after_secs, ..Self::json(StatusCode::TOO_MANY_REQUESTS, &body) }
    }

    /// What a proxy in front of the exchange sends: an HTML error page.
    /// A proxy's error page; like a CDN's, it names the request (by the time it came).
    pub(crate) fn html(status: StatusCode, now_ms: i64) -> Self {
        let body = format!("<html>\r\n<head><title>{status} (request {now_ms:x})</title></head>\r\n<body>\r\n<center><h1>{status}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n");
        Self { status, content_type: "text/html", body: body.into_bytes(), retry_after_secs: None }
    }

    /// `status` with a body that echoes the request's headers: the documented error body whose
    /// message quotes them for a 400, else a proxy's HTML debug page listing them.
    pub(crate) fn echo(status: StatusCode, headers: &HeaderMap, now_ms: i64) -> Self {
        let listed: Vec<String> = headers
            .iter()
            .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())))
            .collect();
        if status == StatusCode::BAD_REQUEST {
            let msg = format!("{} for request headers {}", message(BAD_SIGNATURE), listed.join("; "));
            return Self::json(status, &json!({ "code": BAD_SIGNATURE, "msg": msg, "requestTime": now_ms }));
        }
        let body = format!("<html><body><h1>{status}</h1><pre>{}</pre></body></html>", listed.join("\n"));
        Self { status, content_type: "text/html", body: body.into_bytes(), retry_after_secs: None }
    }

    /// A 200 that says it is JSON and is not (whole, but with syntax errors).
    pub(crate) fn malformed_json() -> Self {
        let body = br#"{"hasNextPage":false "items":[{"billId":,}]}"#.to_vec();
        Self { status: StatusCode::OK, content_type: "application/json", body, retry_after_secs: None }
    }

    /// An empty bill page padded with an unknown field to `bytes` bytes in all.
    pub(crate) fn padded(bytes: usize) -> Self {
        let mut body = br#"{"hasNextPage":false,"items":[],"padding":""#.to_vec();
        body.resize(bytes.saturating_sub(2).max(body.len()), b' ');
        body.extend_from_slice(b"\"}");
        Self { status: StatusCode::OK, content_type: "application/json", body, retry_after_secs: None }
    }

    /// A bill page with `count` made-up bills added (see [`super::Fault::ForeignBills`]); any
    /// other answer as it is.
    pub(crate) fn with_foreign_bills(mut self, count: usize, now_ms: i64) -> Self {
        let Ok(mut page) = serde_json::from_slice::<Value>(&self.body) else { return self };
        let Some(items) = page.get_mut("items").and_then(Value::as_array_mut) else { return self };
        const YEAR_2000_MS: i64 = 946_684_800_000;
        for i in 0..count {
            // A moment ago, so as to fall in the window the query asked for.
            let ctime = if i % 2 == 0 { now_ms - 200 } else { YEAR_2000_MS };
            items.push(json!({
                "billId": format!("9{now_ms}{i:04}"),
                "coin": format!("F{now_ms}{i}"),
                "symbol": "",
                "amount": "1",
                "businessType": format!("foreign_{now_ms}_{i}"),
                "balance": "1",
                "fillFee": "0",
                "ctime": ctime,
            }));
        }
        self.body = serde_json::to_vec(&page).unwrap_or_default();
        self
    }

    /// The first half of this answer, as when a connection is cut mid-body.
    pub(crate) fn truncated(mut self) -> Self {
        self.body.truncate(self.body.len() / 2);
        self
    }

    pub(crate) fn into_response(self) -> Response {
        let mut response = (self.status, [(CONTENT_TYPE, self.content_type)], self.body).into_response();
        if let Some(secs) = self.retry_after_secs {
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_carry_the_documented_shape() {
        let reply = Reply::error(BAD_SIGNATURE, 17);
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        let body: Value = serde_json::from_slice(&reply.body).expect("json");
        assert_eq!(body, json!({ "code": "40009", "msg": "Signature verification failed", "requestTime": 17 }));
        let unknown: Value = serde_json::from_slice(&Reply::error("99999", 1).body).expect("json");
        assert_eq!(unknown["msg"], "Unknown error");
    }

    #[test]
    fn broken_bodies_are_not_json() {
        let whole = Reply::json(StatusCode::OK, &json!({ "items": [1, 2, 3] }));
        let cut = whole.clone().truncated();
        assert_eq!(cut.body.len(), whole.body.len() / 2);
        assert!(whole.body.starts_with(&cut.body));
        assert!(serde_json::from_slice::<Value>(&cut.body).is_err());
        assert!(serde_json::from_slice::<Value>(&Reply::malformed_json().body).is_err());
        let padded = Reply::padded(1_000);
        assert_eq!(padded.body.len(), 1_000);
        assert!(serde_json::from_slice::<Value>(&padded.body).is_ok());
        let response = Reply::too_many_requests(Some(3), 0).into_response();
        assert_eq!(response.headers()[RETRY_AFTER], "3");
    }
}
