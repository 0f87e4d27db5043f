//! What the pollers publish and the exposition reads: per account, the last answers of the
//! account query, the bill counters, the ledger check and what the poller did; what the metrics handler did; and
//! whether the last reload of the configuration succeeded.
//! Neither side imports the other; both import this.

pub mod counters;
pub mod handler;
pub mod reload;
mod slot;
pub mod stats;

pub use slot::{AccountSlot, AccountSnapshot, LedgerDifferences, RECENT_LOG_BYTES};
