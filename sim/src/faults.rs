//! Faults injected in front of the exchange, as a proxy or a bad network would produce them.

use std::collections::VecDeque;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};

use super::reply::Reply;

/// What the next requests get instead of a normal answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// This status (e.g. 502) with an HTML body, as from a proxy. An invalid code sends 502.
    HtmlStatus(u16),
    /// HTTP 200 with the normal JSON answer cut in half.
    Truncated,
    /// HTTP 200 with a body that claims to be JSON and is not.
    MalformedJson,
    /// Sleeps this long, then answers normally.
    Hang(Duration),
    /// HTTP 429, with a `Retry-After` header when given.
    RateLimited { retry_after_secs: Option<u64> },
    /// HTTP 400 with the documented error body for this code.
    ExchangeError { code: String },
    /// HTTP 400 with the documented body of a rejected timestamp (40008), telling this time as
    /// the exchange's, as a broken or hostile server might.
    RejectedTimestamp { request_time_ms: i64 },
    /// HTTP 200 with a valid JSON answer padded to this many bytes, as from a broken endpoint.
    Oversized(usize),
    /// This status with a body that echoes the request's headers: for 400 the documented error
    /// body (40009) whose message quotes them, else a proxy's HTML debug page.
    EchoHeaders(u16),
    /// The normal answer, with this many made-up bills added to a bill page: half created 200 ms
    /// ago,
    /// each of a business type and coin never seen, half created in the year 2000, outside any
    /// window asked for. An account answer passes unchanged.
    ForeignBills(usize),
}

impl Fault {
    /// The answer under this fault. `normal` computes the answer the exchange would give; it is
    /// only called by faults that pass the request on (a hang, a truncation).
    pub(crate) fn reply(&self, normal: impl FnOnce() -> Reply, headers: &HeaderMap, now_ms: i64) -> Reply {
        match self {
            Self::HtmlStatus(status) => Reply::html(status_or_bad_gateway(*status), now_ms),
            Self::Truncated => normal().truncated(),
            Self::MalformedJson => Reply::malformed_json(),
            Self::Hang(_) => normal(),
            Self::RateLimited { retry_after_secs } => Reply::too_many_requests(*retry_after_secs, now_ms),
            Self::ExchangeError { code } => Reply::error(code, now_ms),
            Self::RejectedTimestamp { request_time_ms } => {
                Reply::error(super::reply::TIMESTAMP_EXPIRED, *request_time_ms)
            }
            Self::Oversized(bytes) => Reply::padded(*bytes),
            Self::EchoHeaders(status) => Reply::echo(status_or_bad_gateway(*status), headers, now_ms),
            Self::ForeignBills(count) => normal().with_foreign_bills(*count, now_ms),
        }
    }
}

fn status_or_bad_gateway(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY)
}

/// Injected faults in order, each with the number of requests it still applies to.
#[derive(Debug, Default)]
pub(crate) struct FaultQueue(VecDeque<(Fault, usize)>);

impl FaultQueue {
    pub(crate) fn push(&mut self, fault: Fault, times: usize) {
        if times > 0 {
            self.0.push_back((fault, times));
        }
    }

    /// The fault for the next request, if any.
    pub(crate) fn next(&mut self) -> Option<Fault> {
        let (fault, left) = self.0.front_mut()?;
        let fault = fault.clone();
        *left -= 1;
        if *left == 0 {
            self.0.pop_front();
        }
        Some(fault)
    }

    /// How many requests will still get an injected fault.
    pub(crate) fn pending(&self) -> usize {
        self.0.iter().map(|(_, left)| left).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_apply_in_order_the_given_number_of_times() {
        let mut queue = FaultQueue::default();
        queue.push(Fault::Truncated, 2);
        queue.push(Fault::MalformedJson, 0);
        queue.push(Fault::HtmlStatus(502), 1);
        assert_eq!(queue.next(), Some(Fault::Truncated));
        assert_eq!(queue.next(), Some(Fault::Truncated));
        assert_eq!(queue.next(), Some(Fault::HtmlStatus(502)));
        assert_eq!(queue.next(), None);
    }

    #[test]
    fn an_invalid_status_becomes_a_bad_gateway() {
        let reply = Fault::HtmlStatus(1000).reply(|| unreachable!("no normal answer"), &HeaderMap::new(), 0);
        assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    }
}
