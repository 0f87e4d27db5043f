//! capi_exporter: a Prometheus exporter for a crypto exchange's futures (contract) account API.
//!
//! Data flows exchange -> client -> poller -> snapshot -> exposition -> HTTP; no module imports
//! one later in that flow (the helpers at the end are used by any):
//! - [`api`]: the signed HTTP client and the lenient typed models of its answers;
//! - [`poller`]: one polling loop per account, the bill cursor and the state file;
//! - [`snapshot`]: what the pollers publish and the exposition reads;
//! - [`exposition`]: snapshots to the page scrapers read, in the format each asks for;
//! - [`web`]: the HTTP endpoints and the server around them (TLS, auth, limits);
//! - [`app`]: wires them together, and reloads the configuration files;
//! - [`config`]: flags, environment and files, validated once at start;
//! - [`duration`]: the two duration notations the configuration reads;
//! - [`files`]: reading the files an operator names, bounded;
//! - [`logging`]: logfmt or JSON logs;
//! - [`version`]: what this binary is and how it was built.

#![forbid(unsafe_code)]

pub mod api;
pub mod app;
pub mod config;
pub mod duration;
pub mod exposition;
pub mod files;
pub mod logging;
pub mod poller;
pub mod snapshot;
pub mod version;
pub mod web;
