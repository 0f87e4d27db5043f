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
use rendered::Rendered;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
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

/// Everything `/metrics` shows: the accounts' snapshots, written by [`text::TextWriter`], and the
/// exporter's own metrics in a `prometheus_client` registry.
#[derive(Debug)]
pub struct Metrics {
    snapshots: exposition::SnapshotExposition,
    registry: Registry,
    /// The size of the last rendering, to allocate the next one at once.
    last_len: AtomicUsize,
    /// The size of the exporter's own metrics in it.
    own_len: AtomicUsize,
    /// The latest rendering; locked while one is being made, so that it is made once.
    latest: tokio::sync::Mutex<Option<Arc<Rendered>>>,
    /// The buffer of an earlier rendering no scrape holds any more, for the next one.
    spare: Mutex<Vec<u8>>,
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
            own_len: AtomicUsize::new(0),
            latest: tokio::sync::Mutex::new(None),
            spare: Mutex::new(Vec::new()),
        }
    }

    /// What a scrape arriving now serves: the latest rendering if it is recent enough (see
    /// [`rendered`]), else a new one, rendered on a blocking thread so that a large exposition
    /// does not hold up the pollers' tasks.
    ///
    /// # Errors
    /// When the rendering thread panicked.
    pub async fn current(self: &Arc<Self>) -> Result<Arc<Rendered>, tokio::task::JoinError> {
        let arrived = Instant::now();
        let published = snapshot::publications();
        let mut latest = self.latest.lock().await;
        if let Some(rendered) = latest.as_ref().filter(|r| r.serves(published, arrived)) {
            return Ok(rendered.clone());
        }
        let (started, published) = (Instant::now(), snapshot::publications());
        let metrics = self.clone();
        let text = tokio::task::spawn_blocking(move || metrics.render()).await?;
        let rendered = Arc::new(Rendered::new(published, started, text));
        if let Some(buffer) = latest.replace(rendered.clone()).and_then(Rendered::into_buffer) {
            self.recycle(buffer);
        }
        Ok(rendered)
    }

    /// The exposition text, ending in `# EOF`, written into the spare buffer if there is one.
    pub fn render(&self) -> Vec<u8> {
        let spare = std::mem::take(&mut *self.spare.lock().unwrap_or_else(PoisonError::into_inner));
        let mut writer = text::TextWriter::reusing(spare, self.last_len.load(Ordering::Relaxed) + 4096);
        self.snapshots.write(&mut writer);
        let mut own = String::with_capacity(self.own_len.load(Ordering::Relaxed) + 4096);
        encode_registry(&mut own, &self.registry).expect("writing to a String cannot fail");
        encode_eof(&mut own).expect("writing to a String cannot fail");
        writer.extend(own.as_bytes());
        self.own_len.store(own.len(), Ordering::Relaxed);
        let bytes = writer.into_bytes();
        self.last_len.store(bytes.len(), Ordering::Relaxed);
        bytes
    }

    /// Hands back a rendering's buffer once nothing reads it, for the next [`Self::render`].
    pub fn recycle(&self, buffer: Vec<u8>) {
        *self.spare.lock().unwrap_or_else(PoisonError::into_inner) = buffer;
    }
}
