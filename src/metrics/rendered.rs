//! One rendering of `/metrics`, shared by every scrape it is recent enough for, and its gzip
//! compression, made at most once.
//!
//! A rendering of 1,000 accounts is about 30 MB and takes tens of milliseconds; rendering it for
//! each of several concurrent scrapers (or compressing it for each) would make scrapes queue
//! behind each other, and each would hold its own copy while it is sent. A scrape instead takes
//! the latest rendering if it is less than [`MAX_TIME_LAG`] old and
//! - shows every snapshot published before the scrape arrived, or
//! - was finished less than its own rendering time ago, or
//! - is still being sent to another scraper;
//!
//! else it renders anew, once for all the scrapes waiting. No scrape ever waits for a poll.
//!
//! So rendering takes at most about half a core however hard scrapers push, at most two
//! renderings are in memory, and a scraper alone sees a publication within about three rendering
//! times: well under a millisecond for a few accounts. Scrapers that overlap may see figures up
//! to [`MAX_TIME_LAG`] old.

use axum::body::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio::time::Instant;

/// How far behind the clock a shared rendering may be: what changes with time alone (data age,
/// process CPU and memory) is at most this old.
pub const MAX_TIME_LAG: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Rendered {
    /// The publication count read before rendering began: every snapshot published up to it is in.
    publications: u64,
    started: Instant,
    finished: Instant,
    plain: Bytes,
    gzip: OnceCell<Bytes>,
}

impl Rendered {
    pub(super) fn new(publications: u64, started: Instant, plain: Vec<u8>) -> Self {
        let finished = Instant::now();
        Self { publications, started, finished, plain: Bytes::from(plain), gzip: OnceCell::new() }
    }

    /// Whether this rendering will do for a scrape that arrived at `arrived`, when `publications`
    /// snapshots had been published.
    pub(super) fn serves(&self, publications: u64, arrived: Instant) -> bool {
        let shows_all = self.publications >= publications;
        let just_made = arrived <= self.held_until();
        (shows_all || just_made || self.being_sent()) && self.started + MAX_TIME_LAG >= arrived
    }

    /// Whether a response still holds this rendering's text.
    fn being_sent(&self) -> bool {
        !self.plain.is_unique() || self.gzip.get().is_some_and(|gzip| !gzip.is_unique())
    }

    /// Until when this rendering is served even to scrapes that arrived after a publication.
    pub fn held_until(&self) -> Instant {
        self.finished + (self.finished - self.started)
    }

    /// The text's buffer, when no scrape holds this rendering any more.
    pub(super) fn into_buffer(self: Arc<Self>) -> Option<Vec<u8>> {
        let rendered = Arc::try_unwrap(self).ok()?;
        rendered.plain.try_into_mut().ok().map(Vec::from)
    }

    /// When rendering began.
    pub fn started(&self) -> Instant {
        self.started
    }

    pub fn plain(&self) -> Bytes {
        self.plain.clone()
    }

    /// The gzip-compressed text, compressed on a blocking thread by the first scrape that asks.
    ///
    /// # Errors
    /// When the compressing thread panicked.
    pub async fn gzip(&self) -> Result<Bytes, tokio::task::JoinError> {
        let plain = self.plain.clone();
        let compressed = self.gzip.get_or_try_init(|| tokio::task::spawn_blocking(move || compress(&plain))).await?;
        Ok(compressed.clone())
    }
}

/// Fast compression: scrapes repeat every few seconds, so speed matters more than the last byte.
fn compress(bytes: &[u8]) -> Bytes {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 8), flate2::Compression::fast());
    encoder.write_all(bytes).expect("writing to a Vec cannot fail");
    Bytes::from(encoder.finish().expect("writing to a Vec cannot fail"))
}
