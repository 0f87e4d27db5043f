//! A small, fast writer of the OpenMetrics text format for the snapshot families, which are
//! most of `/metrics` (about 190 series per account). It writes bytes straight into one buffer:
//! no per-sample allocation; decimals as their digits, integers through `itoa` and other floats
//! through `ryu`.

use rust_decimal::Decimal;

/// A metric family's type, as written in `# TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// Samples get the `_total` suffix.
    Counter,
}

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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderedLabels(Vec<u8>);

impl RenderedLabels {
    pub fn new(labels: &impl LabelSet) -> Self {
        let mut out = Vec::with_capacity(160);
        labels.write_pairs(&mut Pairs { out: &mut out, first: true });
        Self(out)
    }

    /// The written pairs, opening brace included, closing brace not.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
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

impl Pairs<'_> {
    pub fn pair(&mut self, name: &str, value: &str) {
        self.out.push(if self.first { b'{' } else { b',' });
        self.first = false;
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"=\"");
        escape_into(self.out, value);
        self.out.push(b'"');
    }
}

impl<N: AsRef<str>, V: AsRef<str>> LabelSet for [(N, V)] {
    fn write_pairs(&self, out: &mut Pairs<'_>) {
        for (name, value) in self {
            out.pair(name.as_ref(), value.as_ref());
        }
    }
}

impl<N: AsRef<str>, V: AsRef<str>> LabelSet for Vec<(N, V)> {
    fn write_pairs(&self, out: &mut Pairs<'_>) {
        self.as_slice().write_pairs(out);
    }
}

impl<N: AsRef<str>, V: AsRef<str>, const K: usize> LabelSet for [(N, V); K] {
    fn write_pairs(&self, out: &mut Pairs<'_>) {
        self.as_slice().write_pairs(out);
    }
}

impl<L: LabelSet + ?Sized> LabelSet for &L {
    fn write_pairs(&self, out: &mut Pairs<'_>) {
        (**self).write_pairs(out);
    }

    fn write_braced(&self, out: &mut Vec<u8>) {
        (**self).write_braced(out);
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

/// Appends metric families to a buffer.
#[derive(Debug, Default)]
pub struct TextWriter {
    out: Vec<u8>,
}

impl TextWriter {
    /// Writes into `buffer` (emptied first), reusing its memory: a fresh buffer of tens of MB
    /// costs more in page faults than writing the text into it.
    pub fn reusing(mut buffer: Vec<u8>, expected_bytes: usize) -> Self {
        buffer.clear();
        buffer.reserve(expected_bytes);
        Self { out: buffer }
    }

    /// Writes one family; a family with no samples is left out entirely.
    pub fn family<L: LabelSet, V: SampleValue>(
        &mut self,
        name: &str,
        help: &str,
        kind: Kind,
        samples: impl IntoIterator<Item = (L, V)>,
    ) {
        let mut samples = samples.into_iter().peekable();
        if samples.peek().is_none() {
            return;
        }
        let (type_name, suffix) = match kind {
            Kind::Gauge => ("gauge", ""),
            Kind::Counter => ("counter", "_total"),
        };
        self.line(&["# HELP ", name, " "]);
        escape_into(&mut self.out, help);
        self.line(&["\n# TYPE ", name, " ", type_name, "\n"]);
        for (labels, value) in samples {
            self.out.extend_from_slice(name.as_bytes());
            if !suffix.is_empty() {
                self.out.extend_from_slice(suffix.as_bytes());
            }
            labels.write_braced(&mut self.out);
            self.out.push(b' ');
            value.write_to(&mut self.out);
            self.out.push(b'\n');
        }
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    fn line(&mut self, parts: &[&str]) {
        for part in parts {
            self.out.extend_from_slice(part.as_bytes());
        }
    }
}

/// For the families `prometheus_client` writes.
impl std::fmt::Write for TextWriter {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.out.extend_from_slice(text.as_bytes());
        Ok(())
    }
}

/// Label values and help text escape backslash, double quote and newline, as OpenMetrics wants.
fn escape_into(out: &mut Vec<u8>, text: &str) {
    // Without an early exit the check compiles to vector code; the text is short.
    let special = text.bytes().fold(false, |found, b| found | matches!(b, b'\\' | b'\n' | b'"'));
    if !special {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    for &byte in text.as_bytes() {
        match byte {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'"' => out.extend_from_slice(b"\\\""),
            _ => out.push(byte),
        }
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
/// exchange's own text; and writing digits costs a third of converting to a float and
/// formatting that.
impl SampleValue for Decimal {
    fn write_to(&self, out: &mut Vec<u8>) {
        let mantissa = self.mantissa();
        if mantissa < 0 {
            out.push(b'-');
        }
        let mut buffer = itoa::Buffer::new();
        let digits = match u64::try_from(mantissa.unsigned_abs()) {
            Ok(small) => buffer.format(small),
            Err(_) => buffer.format(mantissa.unsigned_abs()),
        }
        .as_bytes();
        let trailing_zeros = digits.iter().rev().take_while(|d| **d == b'0').count();
        let scale = self.scale() as usize;
        let dropped = trailing_zeros.min(scale);
        let (digits, scale) = (&digits[..digits.len() - dropped], scale - dropped);
        if digits.is_empty() {
            out.push(b'0'); // zero written with decimals, "0.000": no sign either
        } else if scale == 0 {
            out.extend_from_slice(digits);
        } else if digits.len() > scale {
            let (whole, fraction) = digits.split_at(digits.len() - scale);
            out.extend_from_slice(whole);
            out.push(b'.');
            out.extend_from_slice(fraction);
        } else {
            out.extend_from_slice(b"0.");
            out.resize(out.len() + scale - digits.len(), b'0');
            out.extend_from_slice(digits);
        }
    }
}

impl<V: SampleValue> SampleValue for &V {
    fn write_to(&self, out: &mut Vec<u8>) {
        (**self).write_to(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn family<L: LabelSet>(kind: Kind, samples: Vec<(L, f64)>) -> String {
        let mut writer = TextWriter::default();
        writer.family("capi_x", "Help with \\, \"quotes\" and\nnewline", kind, samples);
        String::from_utf8(writer.into_bytes()).unwrap()
    }

    #[test]
    fn a_family_has_help_type_and_escaped_labels() {
        let labels = [("account", "a\"b\\c\nd"), ("coin", "USDT")];
        assert_eq!(
            family(Kind::Counter, vec![(labels, 3.0)]),
            "# HELP capi_x Help with \\\\, \\\"quotes\\\" and\\nnewline\n# TYPE capi_x counter\n\
             capi_x_total{account=\"a\\\"b\\\\c\\nd\",coin=\"USDT\"} 3\n"
        );
    }

    #[test]
    fn empty_families_and_empty_label_sets() {
        assert_eq!(family::<[(&str, &str); 0]>(Kind::Gauge, vec![]), "");
        assert!(family(Kind::Gauge, vec![([] as [(&str, &str); 0], 1.5)]).ends_with("\ncapi_x 1.5\n"));
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
            prop_assert_eq!(written.parse::<Decimal>().unwrap(), value);
            let as_float: f64 = written.parse().unwrap();
            prop_assert_eq!(as_float, value.to_string().parse::<f64>().unwrap());
        }
    }
}
