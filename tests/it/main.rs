//! The integration tests, one module per concern, linked into one test binary: every binary links
//! the whole exporter, and one of them builds faster and takes a tenth of the disk of sixteen.
//! `cargo test --test it golden` runs one module's tests.

mod common;

mod bills;
mod cli;
mod dashboard_lint;
mod exact_or_loud;
mod exchange_tls;
mod faults;
mod figures;
mod fuzz_regressions;
mod golden;
mod http;
mod layering;
mod ledger;
mod load_test_files;
mod promtool;
mod reload;
mod restart;
mod runbook;
mod secrets;
mod shards;
mod status_page;
mod web;
