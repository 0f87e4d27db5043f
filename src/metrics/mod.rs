//! Metrics: snapshots from the pollers, rendered into the OpenMetrics text format.

pub mod exporter;
pub mod exposition;
pub mod process;
pub mod rendered;
pub mod snapshot;
pub mod text;

pub use exporter::ExporterMetrics;
pub use snapshot::{AccountSlot, AccountSnapshot};

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rendered::{Rendered, MAX_TIME_LAG};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

/// The Content-Type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The version and git revision this binary was built from.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const REVISION: &str = env!("CAPI_REVISION");

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    revision: &'static str,
}

/// A rendering of /metrics for 1,000 accounts is a 30 MB buffer. glibc's malloc raises its mmap
/// threshold after the first such buffer is freed, and later ones then come from per-thread
/// heaps that keep the memory: RSS grew by tens of MB per rendering thread. A fixed threshold
/// keeps large buffers in their own mappings, returned to the system when freed. Call it before
/// any other thread starts (`main` does; so do the benches, to measure what the server does).
pub fn keep_large_buffers_out_of_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tuning parameter; called, as documented, before other threads
    // exist, it races with no allocation.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Everything `/metrics` shows: the accounts' snapshots, written by [`text::TextWriter`], and the
/// exporter's own metrics in a `prometheus_client` registry.
pub struct Metrics {
    snapshots: exposition::SnapshotExposition,
    registry: Registry,
    /// The size of the last rendering, to allocate the next one at once.
    last_len: AtomicUsize,
    /// The latest rendering.
    latest: Mutex<Option<Arc<Rendered>>>,
    /// Held while a rendering is being made, so that it is made once.
    rendering: Arc<tokio::sync::Mutex<()>>,
    /// The buffer of an earlier rendering no scrape holds any more, for the next one.
    spare: Mutex<Vec<u8>>,
}

/// Leaves out the rendered text and buffers, which can be tens of MB.
impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("snapshots", &self.snapshots).finish_non_exhaustive()
    }
}

impl Metrics {
    /// `max_age`: figures fetched longer ago are withdrawn (their age stays visible).
    pub fn new(slots: Vec<Arc<AccountSlot>>, exporter: &ExporterMetrics, max_age: Duration) -> Self {
        let mut registry = Registry::default();
        let build = Family::<BuildLabels, Gauge>::default();
        build.get_or_create(&BuildLabels { version: VERSION, revision: REVISION }).set(1);
        registry.register("capi_exporter_build_info", "The exporter's version and git revision; value 1", build);
        exporter.register(&mut registry);
        registry.register_collector(Box::new(process::ProcessCollector));
        let snapshots = exposition::SnapshotExposition::new(slots, max_age);
        Self {
            snapshots,
            registry,
            last_len: AtomicUsize::new(0),
            latest: Mutex::new(None),
            rendering: Arc::new(tokio::sync::Mutex::new(())),
            spare: Mutex::new(Vec::new()),
        }
    }

    /// What a scrape arriving now serves: the latest rendering if it is recent enough (see
    /// [`rendered`]), else a new one, rendered on a blocking thread so that a large exposition
    /// does not hold up the pollers' tasks. While a rendering is being made, the last one serves
    /// within the lag; one served only because it is being sent, or near the end of its life,
    /// has its successor made in the background (see `Rendered::renew_due`).
    ///
    /// # Errors
    /// When the rendering thread panicked.
    pub async fn current(self: &Arc<Self>) -> Result<Arc<Rendered>, tokio::task::JoinError> {
        let arrived = Instant::now();
        let published = self.snapshots.publications();
        if let Some(rendered) = self.servable(published, arrived) {
            if rendered.renew_due(published, arrived) {
                self.renew();
            }
            return Ok(rendered);
        }
        let rendering = match self.rendering.clone().try_lock_owned() {
            Ok(rendering) => rendering,
            Err(_) => {
                // While the next rendering is being made, the last one serves within the lag.
                if let Some(rendered) = self.latest().filter(|rendered| rendered.within_lag(arrived)) {
                    return Ok(rendered);
                }
                let rendering = self.rendering.clone().lock_owned().await;
                // The rendering this scrape waited for may serve it.
                if let Some(rendered) = self.servable(published, arrived) {
                    return Ok(rendered);
                }
                rendering
            }
        };
        // A task of its own renders and holds the lock to the end, even if this scrape is
        // cancelled meanwhile: the next scrape then waits for that rendering, not beside it.
        tokio::spawn(self.clone().render_into(rendering)).await?
    }

    fn latest(&self) -> Option<Arc<Rendered>> {
        self.latest.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn servable(&self, published: u64, arrived: Instant) -> Option<Arc<Rendered>> {
        self.latest().filter(|rendered| rendered.serves(published, arrived))
    }

    /// Makes a new rendering in the background, unless one is being made.
    fn renew(self: &Arc<Self>) {
        if let Ok(rendering) = self.rendering.clone().try_lock_owned() {
            tokio::spawn(self.clone().render_into(rendering));
        }
    }

    async fn render_into(
        self: Arc<Self>,
        _rendering: OwnedMutexGuard<()>,
    ) -> Result<Arc<Rendered>, tokio::task::JoinError> {
        let (started, published) = (Instant::now(), self.snapshots.publications());
        let metrics = self.clone();
        let text = tokio::task::spawn_blocking(move || metrics.render()).await?;
        let rendered = Arc::new(Rendered::new(published, started, text));
        // Scrapers that asked for gzip will again: compress before any of them waits for it.
        if self.latest().is_some_and(|latest| latest.compressed()) {
            rendered.gzip().await?;
        }
        let previous = self.latest.lock().unwrap_or_else(PoisonError::into_inner).replace(rendered.clone());
        if let Some(buffer) = previous.and_then(Rendered::into_buffer) {
            self.recycle(buffer);
        }
        tokio::spawn(Self::expire(Arc::downgrade(&self), Arc::downgrade(&rendered)));
        Ok(rendered)
    }

    /// Once a rendering is too old to serve anyone, it and the spare buffer are dropped if no
    /// newer rendering came: an exporter scraped every 15 s then holds no 30 MB text between
    /// scrapes. Under steady scrape load the buffers keep being reused instead.
    async fn expire(metrics: Weak<Self>, rendered: Weak<Rendered>) {
        tokio::time::sleep(MAX_TIME_LAG).await;
        let Some(metrics) = metrics.upgrade() else { return };
        let mut latest = metrics.latest.lock().unwrap_or_else(PoisonError::into_inner);
        if latest.as_ref().is_some_and(|latest| std::ptr::eq(Arc::as_ptr(latest), rendered.as_ptr())) {
            *latest = None;
            metrics.recycle(Vec::new());
        }
    }

    /// The exposition text, ending in `# EOF`, written into the spare buffer if there is one.
    pub fn render(&self) -> Vec<u8> {
        let spare = std::mem::take(&mut *self.spare.lock().unwrap_or_else(PoisonError::into_inner));
        let mut writer = text::TextWriter::reusing(spare, self.last_len.load(Ordering::Relaxed) + 4096);
        self.snapshots.write(&mut writer);
        encode_registry(&mut writer, &self.registry).expect("writing to a Vec cannot fail");
        encode_eof(&mut writer).expect("writing to a Vec cannot fail");
        let bytes = writer.into_bytes();
        self.last_len.store(bytes.len(), Ordering::Relaxed);
        bytes
    }

    /// Hands back a rendering's buffer once nothing reads it, for the next [`Self::render`].
    pub fn recycle(&self, buffer: Vec<u8>) {
        *self.spare.lock().unwrap_or_else(PoisonError::into_inner) = buffer;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    fn metrics() -> (Arc<Metrics>, Arc<AccountSlot>) {
        let slot = AccountSlot::new("main");
        let metrics = Metrics::new(vec![slot.clone()], &ExporterMetrics::new(), Duration::from_secs(60));
        (Arc::new(metrics), slot)
    }

    fn text(rendered: &Rendered) -> String {
        String::from_utf8(rendered.plain().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn scrapes_share_a_rendering_until_a_snapshot_is_published_after_it_was_made() {
        let (metrics, slot) = metrics();
        let first = metrics.current().await.unwrap();
        let second = metrics.current().await.unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert!(text(&first).contains("capi_up{account=\"main\"} 0\n"), "{}", text(&first));

        tokio::time::sleep_until(second.held_until()).await;
        slot.publish(AccountSnapshot { up: true, ..AccountSnapshot::default() });
        let third = metrics.current().await.unwrap();
        assert!(!Arc::ptr_eq(&second, &third));
        assert!(text(&third).contains("capi_up{account=\"main\"} 1\n"), "{}", text(&third));
    }

    #[tokio::test]
    async fn a_cancelled_scrape_still_finishes_its_rendering_for_the_next() {
        let (metrics, _) = metrics();
        let mut scrape = Box::pin(metrics.current());
        let first_poll = std::future::poll_fn(|cx| std::task::Poll::Ready(Future::poll(scrape.as_mut(), cx))).await;
        assert!(first_poll.is_pending(), "the rendering runs in a task the scrape waits for");
        drop(scrape);
        // The test's runtime has one thread: this lets the rendering task begin.
        tokio::task::yield_now().await;
        let asked = Instant::now();
        let next = metrics.current().await.unwrap();
        assert!(next.started() < asked, "the next scrape rendered anew instead of waiting");
    }

    #[tokio::test]
    async fn a_rendering_older_than_the_time_lag_is_never_served() {
        let (metrics, _) = metrics();
        let mut served = metrics.current().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        // A scraper every 20 ms sees renderings come and go; none it gets is too old.
        for _ in 0..3 {
            loop {
                assert!(Instant::now() < deadline, "a rendering was still served after 30 s");
                tokio::time::sleep(Duration::from_millis(20)).await;
                let asked = Instant::now();
                let now = metrics.current().await.unwrap();
                assert!(now.started() + MAX_TIME_LAG >= asked, "served a rendering older than the lag");
                if !Arc::ptr_eq(&served, &now) {
                    served = now;
                    break;
                }
            }
        }
    }

    /// The clock is paused: it moves only by the test's sleeps, so the scrape's arrival within
    /// the renewal margin is exact however busy the machine is.
    #[tokio::test(start_paused = true)]
    async fn a_rendering_near_the_end_of_its_life_is_renewed_without_a_scrape_waiting() {
        let (metrics, slot) = metrics();
        let first = metrics.current().await.unwrap();
        let being_sent = first.plain();
        slot.publish(AccountSnapshot { up: true, ..AccountSnapshot::default() });
        tokio::time::sleep_until(first.started() + MAX_TIME_LAG - rendered::RENEW_MARGIN / 2).await;

        let second = metrics.current().await.unwrap();
        assert!(Arc::ptr_eq(&first, &second), "served at once: the rendering being sent is recent enough");
        let patience = std::time::Instant::now() + Duration::from_secs(30);
        let renewed = loop {
            match metrics.latest() {
                Some(latest) if !Arc::ptr_eq(&latest, &first) => break latest,
                _ => assert!(std::time::Instant::now() < patience, "no renewal within 30 s"),
            }
            // Yields without letting the paused clock jump to the next timer.
            tokio::task::yield_now().await;
        };
        assert!(text(&renewed).contains("capi_up{account=\"main\"} 1\n"), "{}", text(&renewed));
        assert!(renewed.started() < first.started() + MAX_TIME_LAG, "made before the first one expired");
        drop(being_sent);
    }
}
