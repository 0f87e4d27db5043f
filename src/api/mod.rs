//! The exchange's API: signing, credentials, lenient models and the HTTP client.

pub mod client;
pub mod clock;
pub mod coins;
pub mod credentials;
pub mod error;
pub mod fields;
pub mod json;
pub mod model;
pub mod sign;

pub use client::{Answer, BillQuery, Client, ClientSettings, Endpoint};
pub use clock::Clock;
pub use coins::Coins;
pub use credentials::{Credentials, Secret};
pub use error::{ApiError, Outcome};
