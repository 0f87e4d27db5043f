//! Polling: one loop per account, the bill cursor and counters, and the state file.

pub mod cursor;
