//! Everything a request to the exchange can end in, besides an answer.

use std::time::Duration;

/// The label value of `capi_api_requests_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Success,
    RateLimited,
    AuthError,
    ExchangeError,
    HttpError,
    Timeout,
    TransportError,
    DecodeError,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Success,
        Outcome::RateLimited,
        Outcome::AuthError,
        Outcome::ExchangeError,
        Outcome::HttpError,
        Outcome::Timeout,
        Outcome::TransportError,
        Outcome::DecodeError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::RateLimited => "rate_limited",
            Outcome::AuthError => "auth_error",
            Outcome::ExchangeError => "exchange_error",
            Outcome::HttpError => "http_error",
            Outcome::Timeout => "timeout",
            Outcome::TransportError => "transport_error",
            Outcome::DecodeError => "decode_error",
        }
    }
}

/// A failed request. Messages carry no secret: the client never puts headers into them.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("exchange refused the request: code {code} ({}): {message}", code_meaning(.code))]
    Exchange {
        code: String,
        message: String,
        /// The exchange's clock when it answered (`requestTime` or the `Date` header), if given.
        server_time_ms: Option<i64>,
    },
    #[error("rate limited by the exchange (HTTP 429){}", .retry_after.map(|d| format!(", retry after {}s", d.as_secs())).unwrap_or_default())]
    RateLimited { retry_after: Option<Duration> },
    #[error("HTTP {status} from the exchange: {snippet}{}", status_hint(*.status))]
    Http { status: u16, snippet: String },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot reach the exchange: {0}")]
    Transport(String),
    #[error("unreadable answer: {0}")]
    Decode(String),
}

impl ApiError {
    pub fn outcome(&self) -> Outcome {
        match self {
            ApiError::Exchange { code, .. } if is_auth_code(code) => Outcome::AuthError,
            ApiError::Exchange { .. } => Outcome::ExchangeError,
            ApiError::RateLimited { .. } => Outcome::RateLimited,
            // Refused before the exchange answered (a firewall, an IP not on the key's list).
            ApiError::Http { status: 401 | 403, .. } => Outcome::AuthError,
            ApiError::Http { .. } => Outcome::HttpError,
            ApiError::Timeout(_) => Outcome::Timeout,
            ApiError::Transport(_) => Outcome::TransportError,
            ApiError::Decode(_) => Outcome::DecodeError,
        }
    }

    /// Whether the exchange rejected the request's timestamp as too far from its clock.
    pub fn is_clock_skew(&self) -> bool {
        self.exchange_code() == Some(CLOCK_SKEW_CODE)
    }

    /// The exchange's clock when it rejected the timestamp, if it said: what corrects ours.
    pub fn clock_skew_server_time(&self) -> Option<i64> {
        match self {
            ApiError::Exchange { server_time_ms, .. } if self.is_clock_skew() => *server_time_ms,
            _ => None,
        }
    }

    /// Whether the exchange refused the request's parameters: the same request is refused again.
    pub fn is_parameter_refusal(&self) -> bool {
        self.exchange_code() == Some(PARAMETER_REFUSED_CODE)
    }

    /// The exchange's error code, when it gave one.
    pub fn exchange_code(&self) -> Option<&str> {
        match self {
            ApiError::Exchange { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// What to check after an HTTP status that usually means the exporter asks the wrong place.
fn status_hint(status: u16) -> &'static str {
    match status {
        404 => " (no such path there: check --api.base-url)",
        _ => "",
    }
}

/// "Timestamp expired": the request's timestamp is more than 30 s from the exchange's clock.
pub const CLOCK_SKEW_CODE: &str = "40008";

/// "Parameter verification failed".
pub const PARAMETER_REFUSED_CODE: &str = "40017";

/// Each documented error code, what it means (for logs that a person can act on), and whether it
/// says the key, its signature or its permissions are not accepted: retrying the same request
/// cannot help, a person has to act.
const CODES: [(&str, &str, bool); 16] = [
    ("40001", "ACCESS-KEY header is empty", true),
    ("40002", "ACCESS-SIGN header is empty", true),
    ("40003", "ACCESS-TIMESTAMP header is empty", true),
    ("40005", "invalid ACCESS-TIMESTAMP", true),
    ("40006", "invalid API key", true),
    ("40007", "invalid Content-Type", false),
    ("40008", "timestamp expired: check this machine's clock", true),
    ("40009", "signature verification failed: check the API secret", true),
    ("40011", "ACCESS-PASSPHRASE header is empty", true),
    ("40012", "wrong API key or passphrase", true),
    ("40013", "user is frozen", true),
    ("40014", "the API key lacks the permission for this endpoint", true),
    ("40015", "exchange system error", false),
    ("40016", "the account must bind a phone or authenticator", true),
    ("40017", "parameter verification failed", false),
    ("40018", "request from an IP address the key does not allow", true),
];

/// Whether the code says the key, its signature or its permissions are not accepted.
pub fn is_auth_code(code: &str) -> bool {
    CODES.iter().any(|(known, _, auth)| *known == code && *auth)
}

/// Whether the exchange documents the code.
pub fn is_documented_code(code: &str) -> bool {
    CODES.iter().any(|(known, ..)| *known == code)
}

/// What the code means, or "undocumented code".
pub fn code_meaning(code: &str) -> &'static str {
    CODES.iter().find(|(known, ..)| *known == code).map_or("undocumented code", |(_, meaning, _)| *meaning)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_codes_and_other_codes_get_their_own_outcomes() {
        let exchange =
            |code: &str| ApiError::Exchange { code: code.into(), message: String::new(), server_time_ms: None };
        assert_eq!(exchange("40009").outcome(), Outcome::AuthError);
        assert_eq!(exchange("40018").outcome(), Outcome::AuthError);
        assert_eq!(exchange("40015").outcome(), Outcome::ExchangeError);
        assert_eq!(exchange("40017").outcome(), Outcome::ExchangeError);
        assert!(exchange("40008").to_string().contains("clock"));
    }

    #[test]
    fn a_refusal_before_the_exchange_is_an_auth_error_and_other_statuses_http_errors() {
        let http = |status| ApiError::Http { status, snippet: String::new() };
        assert_eq!(http(401).outcome(), Outcome::AuthError);
        assert_eq!(http(403).outcome(), Outcome::AuthError);
        assert_eq!(http(502).outcome(), Outcome::HttpError);
        assert_eq!(http(404).outcome(), Outcome::HttpError);
    }
}
