//! Polling: one loop per account, the bill cursor and counters, and the state file.

pub mod counters;
pub mod cursor;
pub mod state;
