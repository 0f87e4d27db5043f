//! Everything HTTP: the endpoints ([`app`]: `/metrics`, the landing page, the probes) and the
//! server around them (exporter-toolkit web configuration, TLS, basic auth and limits).
//!
//! [`WebConfig`] reads a web configuration file in the format of Prometheus's exporter-toolkit
//! (`--web.config.file`), so files written for other exporters work unchanged. A [`WebStack`] is
//! an [`axum::Router`] with what the file asks for (TLS, client certificates, basic auth, extra
//! headers, a rate limit) and what [`WebSettings`] bounds (requests in flight, time per request,
//! time to send the request headers); [`serve()`] answers requests on listeners with the latest
//! stack, which a reload replaces.
//!
//! Every request passes, from the outside in: the configured headers (set on every response,
//! refusals included); the rate limit (429); the request timeout (503); basic auth (401); and
//! only then the router, where the metrics route has its limit on scrapes at once (503 at once,
//! never a queue) and counts its answers.

mod auth;
mod config;
mod pipeline;
mod rate_limit;
mod routes;
mod serve;
mod status;
mod tls;

#[cfg(test)]
mod test_support;

pub use config::WebConfig;
pub use routes::{app, AppState, ReloadRequest, RELOAD_PATH};
pub use serve::{bind, serve, WebStack};
pub use status::POLL_LOG_PATH;

use crate::files::describe_io_error;
use std::path::PathBuf;
use std::time::Duration;

/// How [`serve()`] runs: the optional web configuration and the limits that flags set.
#[derive(Clone, Debug)]
pub struct WebSettings {
    /// The parsed web configuration file; `None` serves plain HTTP without authentication.
    pub config: Option<WebConfig>,
    /// Scrapes answered at the same time; the next one gets 503 at once. 0 means no limit.
    /// ([`app`] applies it, to the metrics route only.)
    pub max_requests: usize,
    /// Time to produce a whole response, else 503, and to send a scrape's page; and the longest a
    /// client may take in no byte of one. Past either, its connection is closed.
    pub request_timeout: Duration,
    /// Time for a client to finish its TLS handshake and to send request headers, else the
    /// connection is closed.
    pub header_read_timeout: Duration,
}

impl WebSettings {
    /// The limit on requests in flight that node_exporter uses by default (`--web.max-requests`).
    pub const DEFAULT_MAX_REQUESTS: usize = 40;
}

impl Default for WebSettings {
    fn default() -> Self {
        WebSettings {
            config: None,
            max_requests: Self::DEFAULT_MAX_REQUESTS,
            request_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

/// What can go wrong in this module: only setting up, since serving never fails as a whole
/// (a bad client or a failed handshake closes that one connection).
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The web configuration, or a certificate or key it names, is unusable.
    #[error("web config{}: {problem}", describe_file(file))]
    Config {
        /// The web configuration file when it was loaded from one.
        file: Option<PathBuf>,
        /// One line that never holds a secret.
        problem: String,
    },
    #[error("cannot listen on {address}: {}; choose another --web.listen-address", describe_io_error(.error))]
    Listen { address: String, error: std::io::Error },
}

impl WebError {
    fn config(problem: impl Into<String>) -> Self {
        WebError::Config { file: None, problem: problem.into() }
    }

    /// Names the file the problem was found in, for errors found before the file was known.
    fn in_file(self, path: &std::path::Path) -> Self {
        match self {
            WebError::Config { problem, .. } => WebError::Config { file: Some(path.to_path_buf()), problem },
            listen @ WebError::Listen { .. } => listen,
        }
    }
}

fn describe_file(file: &Option<PathBuf>) -> String {
    file.as_ref().map(|path| format!(" {}", path.display())).unwrap_or_default()
}
