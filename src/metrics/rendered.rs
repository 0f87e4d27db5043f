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

pub struct Rendered {
    /// The publication count read before rendering began: every snapshot published up to it is in.
    publications: u64,
    started: Instant,
    finished: Instant,
    plain: Bytes,
    gzip: OnceCell<Bytes>,
}

/// Leaves out the text, which can be tens of MB.
impl std::fmt::Debug for Rendered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rendered")
            .field("publications", &self.publications)
            .field("bytes", &self.plain.len())
            .finish_non_exhaustive()
    }
}

impl Rendered {
    /// A rendering that began at `started`, when `publications` snapshots had been published,
    /// and was finished just now.
    pub(super) fn new(publications: u64, started: Instant, plain: Vec<u8>) -> Self {
        Self::made(publications, started, Instant::now(), plain)
    }

    fn made(publications: u64, started: Instant, finished: Instant, plain: Vec<u8>) -> Self {
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
    #[cfg(test)]
    pub(super) fn started(&self) -> Instant {
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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Rendered from t0 to t0 + 40 ms, showing 5 publications.
    fn rendering(t0: Instant) -> Rendered {
        Rendered::made(5, t0, t0 + 40 * MS, b"capi_up 1\n# EOF\n".to_vec())
    }

    #[test]
    fn a_rendering_serves_scrapes_that_arrive_before_the_next_publication() {
        let t0 = Instant::now();
        let rendered = rendering(t0);
        assert!(rendered.serves(5, t0 + 500 * MS));
        assert!(rendered.serves(4, t0 + 999 * MS));
        assert!(!rendered.serves(5, t0 + 1001 * MS), "older than MAX_TIME_LAG");
    }

    #[test]
    fn after_a_publication_it_serves_only_for_its_own_rendering_time() {
        let t0 = Instant::now();
        let rendered = rendering(t0);
        assert_eq!(rendered.held_until(), t0 + 80 * MS);
        assert!(rendered.serves(6, t0 + 80 * MS));
        assert!(!rendered.serves(6, t0 + 81 * MS));
    }

    #[tokio::test]
    async fn while_it_is_being_sent_it_serves_scrapes_up_to_the_time_lag() {
        let t0 = Instant::now();
        let rendered = rendering(t0);
        let in_flight = rendered.plain();
        assert!(rendered.serves(6, t0 + 900 * MS));
        assert!(!rendered.serves(6, t0 + 1001 * MS));
        drop(in_flight);
        assert!(!rendered.serves(6, t0 + 900 * MS));

        let compressed = rendered.gzip().await.unwrap();
        assert!(rendered.serves(6, t0 + 900 * MS), "the gzip text is being sent");
        drop(compressed);
        assert!(!rendered.serves(6, t0 + 900 * MS));
    }
}
