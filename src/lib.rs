//! capi_exporter: a Prometheus exporter for a crypto exchange's futures (contract) account API.
//!
//! Data flows exchange -> client -> snapshot -> exposition -> HTTP:
//! - [`sim`]: the simulated exchange (demo mode and tests);
//! - [`api`]: the signed HTTP client and the typed, lenient models of its answers;
//! - [`poller`]: one polling loop per account, the exact bill counter and its state file;
//! - [`metrics`]: immutable snapshots rendered into the exposition format;
//! - [`server`]: the HTTP endpoints;
//! - [`config`]: flags, environment and YAML, validated once at start;
//! - [`app`]: wires them together; [`logging`]: logfmt or JSON logs.

pub mod api;
pub mod app;
pub mod config;
pub mod exposition;
pub mod logging;
pub mod poller;
pub mod server;
pub mod sim;
pub mod snapshot;
pub mod web;
