//! capi_exporter: a Prometheus exporter for a crypto exchange's futures (contract) account API.
//!
//! Data flows exchange -> client -> poller -> snapshot -> exposition -> HTTP. The modules are
//! listed so that each imports only those above it, and the helpers at the end: [`snapshot`], the
//! hand-off that the pollers write and the exposition reads, comes before both, and the two never
//! import each other (`tests/it/layering.rs` holds the code to this list).
//! - [`api`]: the signed HTTP client and the lenient typed models of its answers;
//! - [`snapshot`]: what the pollers publish and the exposition reads;
//! - [`poller`]: one polling loop per account, the bill cursor and the state file;
//! - [`exposition`]: snapshots to the page scrapers read, in the format each asks for;
//! - [`web`]: the HTTP endpoints and the server around them (TLS, auth, limits);
//! - [`config`]: flags, environment and files, validated once at start;
//! - [`app`]: wires them together, and reloads the configuration files;
//! - [`logging`]: logfmt or JSON logs;
//! - [`duration`]: the two duration notations the configuration reads;
//! - [`files`]: reading the files an operator names, bounded;
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
