//! What the pollers publish and the exposition reads: per account, the last answers of the
//! account query, the bill counters and what the poller did; and what the metrics handler did.
//! Neither side imports the other; both import this.

pub mod counters;
pub mod handler;
mod slot;
pub mod stats;

pub use slot::{AccountSlot, AccountSnapshot, RECENT_LINES};
