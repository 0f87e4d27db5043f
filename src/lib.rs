//! capi_exporter: a Prometheus exporter for a crypto exchange's futures (contract) account API.
//!
//! Data flows exchange -> client -> poller -> snapshot -> exposition -> HTTP, and each module
//! imports only those before it:
//! - [`api`]: the signed HTTP client and the typed, lenient models of its answers;
//! - [`poller`]: one polling loop per account, the bill cursor and its state file;
//! - [`snapshot`]: what the pollers publish and the exposition reads;
//! - [`exposition`]: snapshots to the page scrapers read, in the format each asks for;
//! - [`web`]: the HTTP endpoints, and the server around them (TLS, auth, limits);
//! - [`config`]: flags, environment and YAML, validated once at start; [`duration`]: the two
//!   duration notations it reads;
//! - [`app`]: wires them together; [`logging`]: logfmt or JSON logs; [`version`]: what this
//!   binary is and how it was built.

#![forbid(unsafe_code)]

pub mod api;
pub mod app;
pub mod config;
pub mod duration;
pub mod exposition;
pub mod logging;
pub mod poller;
pub mod snapshot;
pub mod version;
pub mod web;
