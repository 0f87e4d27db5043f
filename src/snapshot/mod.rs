//! What the pollers publish and the exposition reads: per account, the last answers of the
//! account query, the bill counters and what the poller did. Neither side imports the other;
//! both import this.

pub mod counters;
mod slot;
pub mod stats;

pub use slot::{AccountSlot, AccountSnapshot};
