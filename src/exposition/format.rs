//! The two text formats Prometheus reads, written by one writer: the classic text format
//! (`text/plain; version=0.0.4`) and OpenMetrics 1.0.0, chosen per scrape by its `Accept`
//! header as every Prometheus exporter does. Their sample lines are the same; they differ in the
//! metadata lines (OpenMetrics names a counter family without `_total`, says the unit, and ends
//! with `# EOF`). So samples are written once, and each scrape adds the metadata of its format.
//!
//! `prometheus-client` writes OpenMetrics only, hence this writer. It writes bytes straight into
//! one buffer, with no allocation per sample: decimals as their digits, integers through `itoa`,
//! other floats through `ryu`.

use crate::snapshot::stats::{Histogram, LATENCY_BUCKETS};
use axum::body::Bytes;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::io::Write;
use std::ops::Range;

/// The classic text format's content type.
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// OpenMetrics' content type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Which text format a scrape gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
}

/// How strongly one range of an `Accept` header asks for a format, in the order client_golang's
/// negotiation (goautoneg) sorts ranges: by weight (in thousandths), then a named type before a
/// wildcard, then the one listed first.
type Preference = (u32, bool, Reverse<usize>);

impl Format {
    /// The format an `Accept` header prefers: OpenMetrics if it weighs OpenMetrics (1.0.0 or
    /// 0.0.1, or no version) above the classic text format, else the classic text format, as
    /// for a client that sends no `Accept` (`curl`) or asks for `text/plain` or anything. Ranges
    /// of equal weight are ordered as client_golang's negotiation orders them (see `Preference`).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let mut openmetrics: Option<Preference> = None;
        let mut text: Option<Preference> = None;
        for (index, range) in accept.unwrap_or("").split(',').enumerate() {
            let mut parts = range.split(';').map(str::trim);
            let media_type = parts.next().unwrap_or_default().to_ascii_lowercase();
            let (mut weight, mut version) = (1.0f32, None);
            for parameter in parts {
                let (name, value) = parameter.split_once('=').unwrap_or((parameter, ""));
                match name.trim().to_ascii_lowercase().as_str() {
                    "q" => weight = value.trim().parse().unwrap_or(0.0),
                    "version" => version = Some(value.trim().to_owned()),
                    _ => {}
                }
            }
            // q has at most three decimals (RFC 9110); thousandths compare exactly.
            let thousandths = (weight.clamp(0.0, 1.0) * 1000.0).round() as u32;
            let preference = Some((thousandths, !media_type.contains('*'), Reverse(index)));
            match media_type.as_str() {
                "application/openmetrics-text" if version.as_deref().is_none_or(|v| v == "1.0.0" || v == "0.0.1") => {
                    openmetrics = openmetrics.max(preference);
                }
                "text/plain" | "text/*" | "*/*" => text = text.max(preference),
                _ => {}
            }
        }
        match openmetrics {
            Some(best) if best.0 > 0 && openmetrics > text => Format::OpenMetrics,
            _ => Format::Text,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => TEXT,
            Format::OpenMetrics => OPENMETRICS,
        }
    }

    /// The lines that describe a family in this format.
    pub fn metadata(self, family: &Family) -> Vec<u8> {
        let mut out = Vec::with_capacity(family.help.len() + 2 * family.name.len() + 40);
        let type_name = match family.kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Histogram => "histogram",
        };
        // The classic format names a counter family as its samples are named, with `_total`.
        let name = match self {
            Format::Text => family.sample_name(),
            Format::OpenMetrics => family.name.to_owned(),
        };
        // Writing into a Vec cannot fail.
        let _ = write!(out, "# HELP {name} ");
        escape_help(&mut out, family.help, self == Format::OpenMetrics);
        let _ = writeln!(out, "\n# TYPE {name} {type_name}");
        if let (Format::OpenMetrics, Some(unit)) = (self, family.unit()) {
            let _ = writeln!(out, "# UNIT {name} {unit}");
        }
        out
    }

    /// What ends a page: OpenMetrics' `# EOF`, nothing for the classic format.
    pub fn end(self) -> &'static [u8] {
        match self {
            Format::Text => b"",
            Format::OpenMetrics => b"# EOF\n",
        }
    }
}

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// Samples get the `_total` suffix.
    Counter,
    Histogram,
}

/// A metric family: its name (a counter's without `_total`), help text and type. These are the
/// exporter's public interface; the golden files in `tests/it/snapshots` pin them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
}

impl Family {
    pub const fn gauge(name: &'static str, help: &'static str) -> Self {
        Self { name, help, kind: Kind::Gauge }
    }

    pub const fn counter(name: &'static str, help: &'static str) -> Self {
        Self { name, help, kind: Kind::Counter }
    }

    pub const fn histogram(name: &'static str, help: &'static str) -> Self {
        Self { name, help, kind: Kind::Histogram }
    }

    /// The unit OpenMetrics states, from the name's suffix, as Prometheus's naming rules give it.
    pub fn unit(&self) -> Option<&'static str> {
        let (_, last) = self.name.rsplit_once('_')?;
        ["seconds", "bytes"].contains(&last).then_some(last)
    }

    fn sample_name(&self) -> String {
        match self.kind {
            Kind::Counter => format!("{}_total", self.name),
            Kind::Gauge | Kind::Histogram => self.name.to_owned(),
        }
    }
}

use rust_decimal::Decimal;

/// The labels of one sample, written as `name="value"` pairs in order.
pub trait LabelSet {
    fn write_pairs(&self, out: &mut Pairs<'_>);

    /// The whole label part, `{...}`, or nothing when there are no labels.
    fn write_braced(&self, out: &mut Vec<u8>) {
        let mut pairs = Pairs { out, first: true };
        self.write_pairs(&mut pairs);
        if !pairs.first {
            out.push(b'}');
        }
    }
}

/// A label set written once and copied into every sample that has it: a record's labels are
/// the same for each of its 20-odd fields. Further pairs can follow it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RenderedLabels(Vec<u8>);

impl RenderedLabels {
    pub fn new(labels: &impl LabelSet) -> Self {
        let mut out = Vec::with_capacity(160);
        labels.write_pairs(&mut Pairs { out: &mut out, first: true });
        Self(out)
    }
}

impl LabelSet for RenderedLabels {
    fn write_pairs(&self, out: &mut Pairs<'_>) {
        if !self.0.is_empty() {
            out.out.extend_from_slice(&self.0);
            out.first = false;
        }
    }
}

/// Writes the separators between label pairs.
pub struct Pairs<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

/// Label values longer than this (free text from the exchange, such as `extra_data_json`) are
/// cut to as many of their first bytes, then `…` and a hash of the whole value, so that two long
/// values stay two series and a page stays bounded. A value cut is longer than this, so it never
/// reads as another value left whole (an exchange could send one): two never share a series.
pub const MAX_LABEL_VALUE_BYTES: usize = 200;

fn bounded(value: &str) -> Cow<'_, str> {
    if value.len() <= MAX_LABEL_VALUE_BYTES {
        return Cow::Borrowed(value);
    }
    // SHA-256, not std's hasher, whose output may change with the Rust release: the series would.
    let hash: String = Sha256::digest(value.as_bytes())[..8].iter().map(|byte| format!("{byte:02x}")).collect();
    Cow::Owned(format!("{}…{hash}", &value[..value.floor_char_boundary(MAX_LABEL_VALUE_BYTES)]))
}

impl Pairs<'_> {
    pub fn pair(&mut self, name: &str, value: &str) {
        self.out.push(if self.first { b'{' } else { b',' });
        self.first = false;
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"=\"");
        escape_into(self.out, &bounded(value));
        self.out.push(b'"');
    }
}

impl<N: AsRef<str>, V: AsRef<str>, const K: usize> LabelSet for [(N, V); K] {
    fn write_pairs(&self, out: &mut Pairs<'_>) {
        for (name, value) in self {
            out.pair(name.as_ref(), value.as_ref());
        }
    }
}

impl<L: LabelSet + ?Sized> LabelSet for &L {
    fn write_pairs(&self, out: &mut Pairs<'_>) {
        (**self).write_pairs(out);
    }
}

/// A label set that may be absent.
impl<L: LabelSet> LabelSet for Option<L> {
    fn write_pairs(&self, out: &mut Pairs<'_>) {
        if let Some(labels) = self {
            labels.write_pairs(out);
        }
    }
}

/// Two label sets, one after the other.
impl<A: LabelSet, B: LabelSet> LabelSet for (A, B) {
    fn write_pairs(&self, out: &mut Pairs<'_>) {
        self.0.write_pairs(out);
        self.1.write_pairs(out);
    }
}

/// Sample lines of metric families, written one family after the other into one buffer, with
/// where each family's lines are: what an account's rendering keeps, and what a scrape sends.
#[derive(Debug, Default)]
pub struct Lines {
    out: Vec<u8>,
    families: Vec<(&'static Family, Range<usize>)>,
}

impl Lines {
    /// Lines written into `buffer`'s memory, emptied first, with room for about `bytes`. An
    /// account's lines are rendered again at each of its publications, at about the size they
    /// had: written over the memory of the last rendering, they need no new buffer. A scrape that
    /// renders a thousand accounts otherwise freed a thousand buffers while it took as many new
    /// ones, and the allocator kept both until it purged: 40 MiB more at the peak. A buffer more
    /// than twice as large as needed (an account that closed most of its positions) is given
    /// back, and a new one taken.
    pub fn reusing(mut buffer: Vec<u8>, bytes: usize) -> Self {
        if buffer.capacity() / 2 > bytes {
            buffer = Vec::new();
        }
        buffer.clear();
        buffer.reserve_exact(bytes);
        Self { out: buffer, families: Vec::new() }
    }

    /// Writes one family's samples (none is fine: the family is still recorded, so that every
    /// account's lines list the same families in the same order).
    pub fn family<L: LabelSet, V: SampleValue>(
        &mut self,
        family: &'static Family,
        samples: impl IntoIterator<Item = (L, V)>,
    ) {
        let start = self.out.len();
        let name = family.sample_name();
        for (labels, value) in samples {
            self.sample(&name, &labels, &value);
        }
        self.families.push((family, start..self.out.len()));
    }

    /// Writes a histogram family: per label set, the cumulative buckets, the count and the sum.
    pub fn histogram<'h, L: LabelSet>(
        &mut self,
        family: &'static Family,
        samples: impl IntoIterator<Item = (L, &'h Histogram)>,
    ) {
        let start = self.out.len();
        let bucket = format!("{}_bucket", family.name);
        let (count, sum) = (format!("{}_count", family.name), format!("{}_sum", family.name));
        for (labels, histogram) in samples {
            let bounds = LATENCY_BUCKET_LABELS.iter().zip(histogram.buckets);
            for (bound, observed) in bounds.chain([(&"+Inf", histogram.count)]) {
                self.sample(&bucket, &(&labels, [("le", *bound)]), &(observed as f64));
            }
            self.sample(&count, &labels, &(histogram.count as f64));
            self.sample(&sum, &labels, &histogram.sum);
        }
        self.families.push((family, start..self.out.len()));
    }

    fn sample(&mut self, name: &str, labels: &impl LabelSet, value: &impl SampleValue) {
        self.out.extend_from_slice(name.as_bytes());
        labels.write_braced(&mut self.out);
        self.out.push(b' ');
        value.write_to(&mut self.out);
        self.out.push(b'\n');
    }

    /// The text, and each family with the range of its lines in it. The text keeps its buffer's
    /// room to grow, for the next rendering (see [`Self::reusing`]).
    pub fn finish(mut self) -> (Bytes, Vec<(&'static Family, Range<usize>)>) {
        self.families.shrink_to_fit();
        (Bytes::from(self.out), self.families)
    }
}

/// The bucket bounds of [`LATENCY_BUCKETS`] as `le` label values: floats as Go and
/// OpenMetrics write them, `1.0` rather than `1`.
const LATENCY_BUCKET_LABELS: [&str; LATENCY_BUCKETS.len()] =
    ["0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "30.0"];

/// Help text escapes backslash and newline; OpenMetrics' also double quotes.
fn escape_help(out: &mut Vec<u8>, help: &str, quotes: bool) {
    for &byte in help.as_bytes() {
        match byte {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'"' if quotes => out.extend_from_slice(b"\\\""),
            _ => out.push(byte),
        }
    }
}

/// Label values escape backslash, double quote and newline, in both formats.
fn escape_into(out: &mut Vec<u8>, text: &str) {
    // Without an early exit the check compiles to vector code; the text is short.
    let special = text.bytes().fold(false, |found, b| found | matches!(b, b'\\' | b'\n' | b'"'));
    if special {
        escape_help(out, text, true);
    } else {
        out.extend_from_slice(text.as_bytes());
    }
}

/// A sample's value, as it is written.
pub trait SampleValue {
    fn write_to(&self, out: &mut Vec<u8>);
}

/// Whole numbers below 2^53 as integers (counts, flags); other values in the shortest form that
/// reads back as the same float.
impl SampleValue for f64 {
    fn write_to(&self, out: &mut Vec<u8>) {
        const EXACT: f64 = 9_007_199_254_740_992.0;
        let value = *self;
        if value.is_nan() {
            out.extend_from_slice(b"NaN");
        } else if value.is_infinite() {
            out.extend_from_slice(if value > 0.0 { b"+Inf" } else { b"-Inf" });
        } else if value.fract() == 0.0 && value.abs() < EXACT {
            out.extend_from_slice(itoa::Buffer::new().format(value as i64).as_bytes());
        } else {
            out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
        }
    }
}

/// The exchange's figures exactly as their digits, without trailing zeros: `1.50` as `1.5`,
/// `20.00` as `20`. Prometheus reads the float nearest to them, as it would from the
/// exchange's own text; and writing digits costs less than converting to a float and
/// formatting that. The digits are the mantissa's, written by `itoa`, with the point put in
/// by hand: `Decimal`'s `Display` took a sixth of a full render (32 instead of 28 ms per
/// 200,000 series), and most series are decimals.
impl SampleValue for Decimal {
    fn write_to(&self, out: &mut Vec<u8>) {
        // `normalize` drops trailing zeros and the sign of zero.
        let value = self.normalize();
        if value.is_sign_negative() {
            out.push(b'-');
        }
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(value.mantissa().unsigned_abs()).as_bytes();
        // At most 28 decimal places, so the scale always fits.
        let scale = value.scale() as usize;
        match digits.len().checked_sub(scale) {
            Some(whole) if whole > 0 => {
                out.extend_from_slice(&digits[..whole]);
                if scale > 0 {
                    out.push(b'.');
                    out.extend_from_slice(&digits[whole..]);
                }
            }
            _ => {
                out.extend_from_slice(b"0.");
                out.resize(out.len() + scale - digits.len(), b'0');
                out.extend_from_slice(digits);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lines<L: LabelSet>(family: &'static Family, samples: Vec<(L, f64)>) -> String {
        let mut lines = Lines::default();
        lines.family(family, samples);
        String::from_utf8(lines.finish().0.to_vec()).unwrap()
    }

    const COUNTER: Family = Family::counter("capi_x", "Help with \\, \"quotes\" and\nnewline");

    #[test]
    fn samples_have_escaped_labels_and_counters_their_total() {
        let labels = [("account", "a\"b\\c\nd"), ("coin", "USDT")];
        assert_eq!(lines(&COUNTER, vec![(labels, 3.0)]), "capi_x_total{account=\"a\\\"b\\\\c\\nd\",coin=\"USDT\"} 3\n");
        assert_eq!(lines::<[(&str, &str); 0]>(&COUNTER, vec![]), "");
        const GAUGE: Family = Family::gauge("capi_x", "");
        assert_eq!(lines(&GAUGE, vec![([] as [(&str, &str); 0], 1.5)]), "capi_x 1.5\n");
    }

    #[test]
    fn each_format_describes_a_family_its_own_way() {
        let text = |format: Format, family: Family| String::from_utf8(format.metadata(&family)).unwrap();
        assert_eq!(
            text(Format::Text, COUNTER),
            "# HELP capi_x_total Help with \\\\, \"quotes\" and\\nnewline\n# TYPE capi_x_total counter\n"
        );
        assert_eq!(
            text(Format::OpenMetrics, COUNTER),
            "# HELP capi_x Help with \\\\, \\\"quotes\\\" and\\nnewline\n# TYPE capi_x counter\n"
        );
        let seconds = Family::gauge("capi_age_seconds", "Age");
        assert_eq!(text(Format::Text, seconds), "# HELP capi_age_seconds Age\n# TYPE capi_age_seconds gauge\n");
        assert_eq!(
            text(Format::OpenMetrics, seconds),
            "# HELP capi_age_seconds Age\n# TYPE capi_age_seconds gauge\n# UNIT capi_age_seconds seconds\n"
        );
        assert_eq!((Format::Text.end(), Format::OpenMetrics.end()), (&b""[..], &b"# EOF\n"[..]));
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_a_count_and_a_sum() {
        let mut histogram = Histogram::default();
        histogram.observe(0.03);
        histogram.observe(12.0);
        let mut lines = Lines::default();
        const HISTOGRAM: Family = Family::histogram("capi_h_seconds", "H");
        lines.histogram(&HISTOGRAM, [([("endpoint", "bills")], &histogram)]);
        let text = String::from_utf8(lines.finish().0.to_vec()).unwrap();
        assert!(text.starts_with("capi_h_seconds_bucket{endpoint=\"bills\",le=\"0.01\"} 0\n"), "{text}");
        assert!(text.contains("capi_h_seconds_bucket{endpoint=\"bills\",le=\"0.05\"} 1\n"), "{text}");
        assert!(text.contains("capi_h_seconds_bucket{endpoint=\"bills\",le=\"30.0\"} 2\n"), "{text}");
        let end = "le=\"+Inf\"} 2\ncapi_h_seconds_count{endpoint=\"bills\"} 2\ncapi_h_seconds_sum{endpoint=\"bills\"} 12.03\n";
        assert!(text.ends_with(end), "{text}");
    }

    #[test]
    fn the_format_follows_the_accept_header() {
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        let prometheus_3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(Format::negotiate(Some(prometheus_3)), Format::OpenMetrics);
        for text in [
            None,
            Some(""),
            Some("*/*"),
            Some("text/plain"),
            Some("text/plain;version=0.0.4"),
            Some("application/json"),
        ] {
            assert_eq!(Format::negotiate(text), Format::Text, "{text:?}");
        }
        assert_eq!(Format::negotiate(Some("text/plain;q=0.9,application/openmetrics-text;q=0.5")), Format::Text);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text")), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text;version=2.0.0")), Format::Text);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text;q=0")), Format::Text);
        // Equal weights: the range listed first, unless it is a wildcard; as a Go exporter answers.
        assert_eq!(Format::negotiate(Some("application/openmetrics-text, text/plain")), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("text/plain, application/openmetrics-text")), Format::Text);
        assert_eq!(Format::negotiate(Some("*/*, application/openmetrics-text")), Format::OpenMetrics);
        let versioned = "text/plain, application/openmetrics-text;version=1.0.0";
        assert_eq!(Format::negotiate(Some(versioned)), Format::Text, "parameters do not count");
        assert_eq!(Format::negotiate(Some("text/plain;q=0.5, application/openmetrics-text;q=0.5000")), Format::Text);
    }

    fn text(value: impl SampleValue) -> String {
        let mut out = Vec::new();
        value.write_to(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn special_values_are_spelled_as_openmetrics_does() {
        assert_eq!(text(f64::NAN), "NaN");
        assert_eq!(text(f64::INFINITY), "+Inf");
        assert_eq!(text(f64::NEG_INFINITY), "-Inf");
        assert_eq!(text(-0.0), "0");
        assert_eq!(text(1_713_339_011_237.0), "1713339011237");
        assert_eq!(text(9_007_199_254_740_992.0), "9007199254740992.0");
        assert_eq!(text(0.1 + 0.2), "0.30000000000000004");
    }

    #[test]
    fn decimals_are_their_digits_without_trailing_zeros() {
        let decimal = |text: &str| text.parse::<Decimal>().unwrap();
        assert_eq!(text(decimal("1.50")), "1.5");
        assert_eq!(text(decimal("20.00")), "20");
        assert_eq!(text(decimal("-0.0031")), "-0.0031");
        assert_eq!(text(decimal("-12.5")), "-12.5");
        assert_eq!(text(decimal("0.05")), "0.05");
        assert_eq!(text(decimal("0.000")), "0");
        assert_eq!(text(decimal("-0.000")), "0");
        assert_eq!(text(decimal("1000")), "1000");
        assert_eq!(text(Decimal::new(1_713_339_011_230, 3)), "1713339011.23");
        assert_eq!(text(decimal("0.0000000000000000000000000001")), "0.0000000000000000000000000001");
        assert_eq!(text(Decimal::MAX), "79228162514264337593543950335");
        assert_eq!(text(Decimal::MIN), "-79228162514264337593543950335");
    }

    proptest! {
        /// Every finite value reads back as exactly the same float, as Prometheus parses it.
        #[test]
        fn values_read_back_exactly(value in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
            let parsed: f64 = text(value).parse().unwrap();
            prop_assert_eq!(parsed.to_bits(), if value == 0.0 { 0.0f64.to_bits() } else { value.to_bits() });
        }

        /// Every decimal reads back as exactly itself, and as the float its own text gives.
        #[test]
        fn decimals_read_back_exactly(mantissa in any::<i128>(), scale in 0u32..=28) {
            let value = Decimal::from_i128_with_scale(mantissa % (1i128 << 96), scale);
            let written = text(value);
            prop_assert_eq!(&written, &value.normalize().to_string(), "rust_decimal's own text");
            prop_assert_eq!(written.parse::<Decimal>().unwrap(), value);
            let as_float: f64 = written.parse().unwrap();
            prop_assert_eq!(as_float, value.to_string().parse::<f64>().unwrap());
        }
    }

    #[test]
    fn long_label_values_are_cut_and_stay_distinct() {
        let long = |tail: &str| format!("{}{tail}", "é".repeat(150));
        let (a, b) = (long("a"), long("b"));
        const GAUGE: Family = Family::gauge("capi_x", "");
        let write = |value: &str| lines(&GAUGE, vec![([("v", value)], 1.0)]);
        let (a_line, b_line) = (write(&a), write(&b));
        assert_ne!(a_line, b_line);
        let value = a_line.trim_start_matches("capi_x{v=\"").split('"').next().unwrap().to_string();
        assert!(
            value.len() <= MAX_LABEL_VALUE_BYTES + "…".len() + 16 && value.starts_with(&"é".repeat(100)),
            "{value}"
        );
        // A value sent as it reads once cut is not that series either.
        assert_ne!(write(&value), a_line);
        assert_eq!(write("short"), "capi_x{v=\"short\"} 1\n");
    }
}
