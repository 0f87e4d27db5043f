//! Metrics: snapshots from the pollers, rendered into the OpenMetrics text format.

pub mod exporter;
pub mod exposition;
pub mod process;
pub mod snapshot;

pub use exporter::ExporterMetrics;
pub use snapshot::{AccountSlot, AccountSnapshot};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;

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

/// Everything `/metrics` shows.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// `max_age`: figures fetched longer ago are withdrawn (their age stays visible).
    pub fn new(slots: Vec<Arc<AccountSlot>>, exporter: &ExporterMetrics, max_age: Duration) -> Self {
        let mut registry = Registry::default();
        let build = Family::<BuildLabels, Gauge>::default();
        build.get_or_create(&BuildLabels { version: VERSION, revision: REVISION }).set(1);
        registry.register("capi_exporter_build_info", "The exporter's version and git revision; value 1", build);
        registry.register_collector(Box::new(exposition::SnapshotCollector::new(slots, max_age)));
        exporter.register(&mut registry);
        registry.register_collector(Box::new(process::ProcessCollector));
        Self { registry }
    }

    /// The exposition text, ending in `# EOF`.
    pub fn render(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}
