//! Lenient decoding of single JSON fields.
//!
//! The exchange's documentation disagrees with its own samples (strings versus numbers, `cTime`
//! versus `ctime`), so every field accepts each form that carries the same value. A field that
//! cannot be read is recorded as a [`DecodeProblem`] and left empty: one bad field never throws
//! away the record or the response around it.

use super::json::{Json, JsonObject, Scalar};
use rust_decimal::Decimal;

/// One field that was present but could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeProblem {
    /// The record kind, e.g. `collateral`.
    pub record: &'static str,
    /// The field name as the exchange spells it.
    pub field: String,
    /// What was wrong, without the value itself (values may be large).
    pub detail: &'static str,
}

/// At most this many problems are kept of one answer, the last saying that more were left out:
/// an answer of a million broken records must not take memory in proportion. A page of 100
/// bills each missing every field it can stays well under it, so that a bill skipped is never
/// hidden behind the notes of bills counted.
pub const MAX_PROBLEMS: usize = 1_000;
/// Field names are cut to this length: a map key is the exchange's to choose.
const MAX_FIELD_BYTES: usize = 64;

impl DecodeProblem {
    /// Adds a problem to those of one answer, within [`MAX_PROBLEMS`].
    pub fn note(problems: &mut Vec<DecodeProblem>, record: &'static str, field: &str, detail: &'static str) {
        let problem = match (problems.len() + 1).cmp(&MAX_PROBLEMS) {
            std::cmp::Ordering::Less => {
                DecodeProblem { record, field: field[..field.floor_char_boundary(MAX_FIELD_BYTES)].to_owned(), detail }
            }
            std::cmp::Ordering::Equal => {
                DecodeProblem { record, field: "other".into(), detail: "more problems in this answer than are listed" }
            }
            std::cmp::Ordering::Greater => return,
        };
        problems.push(problem);
    }

    /// One answer's problems on one line, for a log: each kind once (`record.field: detail`,
    /// with how many times when more than once), at most `SUMMARIZED` kinds.
    pub fn summary(problems: &[DecodeProblem]) -> String {
        let mut kinds: Vec<(&DecodeProblem, usize)> = Vec::new();
        for problem in problems {
            match kinds.iter_mut().find(|(kind, _)| *kind == problem) {
                Some((_, times)) => *times += 1,
                None => kinds.push((problem, 1)),
            }
        }
        let mut parts: Vec<String> = kinds
            .iter()
            .take(SUMMARIZED)
            .map(|(p, times)| {
                let repeated = if *times > 1 { format!(" ({times} times)") } else { String::new() };
                format!("{}.{}: {}{repeated}", p.record, p.field, p.detail)
            })
            .collect();
        if kinds.len() > SUMMARIZED {
            parts.push(format!("{} more kinds", kinds.len() - SUMMARIZED));
        }
        parts.join("; ")
    }
}

/// The kinds of problem a log line lists; the metric counts every one.
const SUMMARIZED: usize = 10;

/// A value type that a record field can hold.
pub trait FieldValue: Sized {
    fn decode(value: Json<'_>) -> Result<Self, &'static str>;
}

impl FieldValue for Decimal {
    fn decode(value: Json<'_>) -> Result<Self, &'static str> {
        decimal(value)
    }
}

impl FieldValue for bool {
    fn decode(value: Json<'_>) -> Result<Self, &'static str> {
        match value.scalar() {
            Scalar::Bool(b) => Ok(b),
            Scalar::Text(s) if s.eq_ignore_ascii_case("true") => Ok(true),
            Scalar::Text(s) if s.eq_ignore_ascii_case("false") => Ok(false),
            Scalar::Number("0") => Ok(false),
            Scalar::Number("1") => Ok(true),
            _ => Err("not a boolean"),
        }
    }
}

/// Milliseconds: a time since the epoch, or a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Millis(pub i64);

impl FieldValue for Millis {
    fn decode(value: Json<'_>) -> Result<Self, &'static str> {
        integer(value).map(Millis)
    }
}

/// Decimal text in the spec's plain form (`-123.45`: an optional minus, digits, an optional
/// point and digits; no spaces, signs, separators or exponents), or a JSON number, from its exact
/// digits either way.
pub fn decimal(value: Json<'_>) -> Result<Decimal, &'static str> {
    match value.scalar() {
        Scalar::Text(s) if is_plain_decimal(&s) => exact_decimal(&s),
        Scalar::Text(_) => Err("text that is not a plain decimal (digits, an optional minus and point)"),
        Scalar::Number(n) => exact_decimal(n),
        _ => Err("not a decimal"),
    }
}

/// The decimal with exactly these digits (a JSON number's exponent included), or an error:
/// `Decimal::from_str` and `from_scientific` round digits beyond the 28th, and a rounded figure
/// would be shown as if it were the exchange's.
fn exact_decimal(digits: &str) -> Result<Decimal, &'static str> {
    let (mantissa, exponent) = match digits.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i64>().map_err(|_| OUT_OF_RANGE)?),
        None => (digits, 0),
    };
    // Without trailing zeros, which an exact parse would count as digits beyond the 28th, and
    // which leaves the most room to move the point.
    let mantissa = match mantissa.contains('.') {
        true => mantissa.trim_end_matches('0').trim_end_matches('.'),
        false => mantissa,
    };
    let mut value = Decimal::from_str_exact(mantissa).map_err(|_| OUT_OF_RANGE)?.normalize();
    if value.is_zero() {
        return Ok(value); // zero at any exponent, which may be beyond the scale's range
    }
    // The exponent moves the point: within the scale while it can, then by multiplying by ten.
    let scale = i64::from(value.scale()).saturating_sub(exponent);
    let shifts = match u32::try_from(scale) {
        Ok(scale) => return value.set_scale(scale).map(|()| value).map_err(|_| OUT_OF_RANGE),
        Err(_) => scale.unsigned_abs().min(u64::from(Decimal::MAX_SCALE) + 1),
    };
    value.set_scale(0).map_err(|_| OUT_OF_RANGE)?;
    (0..shifts).try_fold(value, |value, _| value.checked_mul(Decimal::TEN)).ok_or(OUT_OF_RANGE)
}

const OUT_OF_RANGE: &str = "a number beyond the decimal range (28 digits), which would be rounded";

fn is_plain_decimal(text: &str) -> bool {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = unsigned.split_once('.').map_or((unsigned, None), |(w, f)| (w, Some(f)));
    is_digits(whole) && fraction.is_none_or(is_digits)
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// A whole number, from a JSON integer or digit text (an optional minus and digits); never
/// through a float.
pub fn integer(value: Json<'_>) -> Result<i64, &'static str> {
    match value.scalar() {
        Scalar::Number(n) if is_integer_text(n) => n.parse().map_err(|_| "an integer beyond 64 bits"),
        Scalar::Text(s) if is_integer_text(&s) => s.parse().map_err(|_| "an integer beyond 64 bits"),
        Scalar::Number(_) | Scalar::Text(_) => Err("not a whole number (digits and an optional minus)"),
        _ => Err("not an integer"),
    }
}

/// Identifier or label text: strings as they are, integers as their exact digits.
pub fn text(value: Json<'_>) -> Result<String, &'static str> {
    match value.scalar() {
        Scalar::Text(s) => Ok(s.into_owned()),
        Scalar::Number(n) if is_integer_text(n) => Ok(n.to_owned()),
        Scalar::Bool(b) => Ok(b.to_string()),
        _ => Err("not text"),
    }
}

fn is_integer_text(s: &str) -> bool {
    is_digits(s.strip_prefix('-').unwrap_or(s))
}

/// Reads the fields of one JSON object, collecting problems instead of failing.
pub struct FieldReader<'r, 'a> {
    object: &'r JsonObject<'a>,
    record: &'static str,
    problems: &'r mut Vec<DecodeProblem>,
}

impl<'r, 'a> FieldReader<'r, 'a> {
    /// Reads `object` as a `record`. One of more members than [`super::json::MAX_ITEMS`] is a
    /// problem: the fields past them are not read.
    pub fn new(object: &'r JsonObject<'a>, record: &'static str, problems: &'r mut Vec<DecodeProblem>) -> Self {
        if object.is_cut() {
            DecodeProblem::note(problems, record, "{}", "more members than any record holds; the rest are not read");
        }
        Self::again(object, record, problems)
    }

    /// Reads more fields of a record that a reader made by [`Self::new`] read, which said
    /// already what is wrong with the record as a whole.
    pub fn again(object: &'r JsonObject<'a>, record: &'static str, problems: &'r mut Vec<DecodeProblem>) -> Self {
        Self { object, record, problems }
    }

    /// The raw value of the first of `names` that is present and not null.
    pub fn raw<'n>(&self, names: &[&'n str]) -> Option<(Json<'a>, &'n str)> {
        names.iter().find_map(|name| self.object.get(name).filter(|v| !v.is_null()).map(|v| (v, *name)))
    }

    /// Decodes a field that may be spelled several ways; absent or null gives `None` silently.
    pub fn read<T>(&mut self, names: &[&str], decode: impl Fn(Json<'a>) -> Result<T, &'static str>) -> Option<T> {
        let (value, name) = self.raw(names)?;
        self.decode(name, value, decode)
    }

    /// Decodes the value of member `name`, found by the caller; null gives `None` silently.
    pub fn decode<T>(
        &mut self,
        name: &str,
        value: Json<'a>,
        decode: impl Fn(Json<'a>) -> Result<T, &'static str>,
    ) -> Option<T> {
        if value.is_null() {
            return None;
        }
        match decode(value) {
            Ok(v) => Some(v),
            Err(detail) => {
                self.problem(name, detail);
                None
            }
        }
    }

    pub fn value<T: FieldValue>(&mut self, name: &str) -> Option<T> {
        self.read(&[name], T::decode)
    }

    pub fn text(&mut self, name: &str) -> Option<String> {
        self.read(&[name], text)
    }

    /// A nested object; anything else but absence or null is a problem.
    pub fn object(&mut self, name: &str) -> Option<JsonObject<'a>> {
        self.read(&[name], |v| v.object().ok_or("not an object"))
    }

    pub fn array(&mut self, name: &str) -> Option<Vec<Json<'a>>> {
        self.read(&[name], |v| v.array().ok_or("not an array"))
    }

    pub fn problem(&mut self, field: &str, detail: &'static str) {
        DecodeProblem::note(self.problems, self.record, field, detail);
    }

    pub fn problems(&mut self) -> &mut Vec<DecodeProblem> {
        self.problems
    }
}

/// Declares a record once: its typed struct (fields named as the exchange spells them), its
/// lenient decoder and the names of its numeric fields, against which the exposition's tests
/// check that each has its gauge.
macro_rules! record {
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $kind:literal {
            text { $($text:ident),* $(,)? }
            numbers { $($num:ident : $ty:ty),* $(,)? }
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct $name {
            $(pub $text: Option<String>,)*
            $(pub $num: Option<$ty>,)*
        }

        impl $name {
            /// The names of the numeric fields, in declaration order.
            pub const NUMERIC_FIELDS: &'static [&'static str] = &[$(stringify!($num),)*];

            /// Finds the fields in one walk over the object's members (the last of a repeated
            /// name counts), then decodes them.
            pub fn decode(
                object: &$crate::api::json::JsonObject<'_>,
                problems: &mut Vec<$crate::api::fields::DecodeProblem>,
            ) -> Self {
                #[allow(non_camel_case_types)]
                enum Field { $($text,)* $($num,)* }
                const COUNT: usize = [$(stringify!($text),)* $(stringify!($num),)*].len();
                let mut found: [Option<$crate::api::json::Json<'_>>; COUNT] = [const { None }; COUNT];
                for (key, value) in object.iter() {
                    let field = match key {
                        $(stringify!($text) => Field::$text,)*
                        $(stringify!($num) => Field::$num,)*
                        _ => continue,
                    };
                    found[field as usize] = Some(value);
                }
                #[allow(unused_mut)]
                let mut reader = $crate::api::fields::FieldReader::new(object, $kind, problems);
                Self {
                    $($text: found[Field::$text as usize].take().and_then(|value| {
                        reader.decode(stringify!($text), value, $crate::api::fields::text)
                    }),)*
                    $($num: found[Field::$num as usize].take().and_then(|value| {
                        reader.decode(stringify!($num), value, <$ty as $crate::api::fields::FieldValue>::decode)
                    }),)*
                }
            }
        }
    };
}
pub(crate) use record;

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    /// Decodes one field's JSON text with `decode`.
    fn read<T>(text: &str, decode: fn(Json<'_>) -> Result<T, &'static str>) -> Result<T, &'static str> {
        decode(Json::parse(text.as_bytes()).unwrap())
    }

    #[test]
    fn decimals_come_from_text_or_exact_json_numbers() {
        assert_eq!(read(r#""-0.0031""#, decimal), Ok(Decimal::from_str("-0.0031").unwrap()));
        assert_eq!(read("0.1000000000000000055511", decimal).unwrap().to_string(), "0.1000000000000000055511");
        assert_eq!(read("1E-3", decimal).unwrap().to_string(), "0.001", "a JSON number may have an exponent");
        assert_eq!(read(r#""12""#, decimal), Ok(Decimal::from(12)));
        let not_plain = Err("text that is not a plain decimal (digits, an optional minus and point)");
        for text in
            [r#""1e-3""#, r#"" 2.5 ""#, r#""  1""#, r#""1_000""#, r#""+1""#, r#""1.""#, r#"".5""#, r#""abc""#, r#""""#]
        {
            assert_eq!(read(text, decimal), not_plain, "{text}");
        }
        assert_eq!(read("1e400", decimal), Err(OUT_OF_RANGE));
        assert_eq!(read(r#""79228162514264337593543950336""#, decimal), Err(OUT_OF_RANGE));
        let rounded = [
            r#""0.00000000000000000000000000001""#,
            "0.1000000000000000055511151231257827",
            "1.5e-28",
            "1.000000000000000000000000000001e0",
            "79228162514264337593543950335e1",
        ];
        for rounded in rounded {
            assert_eq!(read(rounded, decimal), Err(OUT_OF_RANGE), "{rounded}");
        }
        let zeros = [("0.000000000000000000000000000000", "0"), ("123456789012.000000000000000000", "123456789012")];
        for (text, exact) in zeros {
            assert_eq!(read(&format!("{text:?}"), decimal).unwrap().to_string(), exact, "{text}");
            assert_eq!(read(&format!("{text}e0"), decimal).unwrap().to_string(), exact, "{text}");
        }
        for (number, exact) in
            [("2.5e2", "250"), ("25e-1", "2.5"), ("1.50E+1", "15"), ("7e0", "7"), ("0e5", "0"), ("0.0e-40", "0")]
        {
            assert_eq!(read(number, decimal).unwrap().to_string(), exact, "{number}");
        }
        assert_eq!(read("true", decimal), Err("not a decimal"));
    }

    proptest::proptest! {
        /// A number with an exponent is decoded to exactly its value, or refused when a decimal
        /// cannot hold that value.
        #[test]
        fn an_exponent_moves_the_point_exactly_or_is_refused(mantissa: i64, scale in 0u32..=28, exponent in -40i64..40) {
            let written = Decimal::new(mantissa, scale).normalize();
            // The value is digits x 10^-scale with this scale; below 0, it is a whole number.
            let scale = i64::from(written.scale()) - exponent;
            let whole = u32::try_from(-scale).ok().and_then(|zeros| written.mantissa().checked_mul(10i128.checked_pow(zeros)?));
            match exact_decimal(&format!("{written}e{exponent}")) {
                Ok(value) if written.is_zero() => proptest::prop_assert!(value.is_zero()),
                Ok(value) if scale >= 0 => {
                    let exact = Decimal::try_from_i128_with_scale(written.mantissa(), u32::try_from(scale).unwrap_or(u32::MAX));
                    proptest::prop_assert_eq!(Ok(value), exact.map_err(drop));
                }
                Ok(value) => proptest::prop_assert_eq!(Some(value.mantissa()), whole),
                Err(_) => proptest::prop_assert!(
                    !written.is_zero() && (scale > 28 || whole.is_none_or(|n| n.abs() > Decimal::MAX.mantissa()))
                ),
            }
        }
    }

    #[test]
    fn ids_above_two_to_the_53_keep_every_digit() {
        assert_eq!(read("686960019383517339", text).unwrap(), "686960019383517339");
        assert_eq!(read("123456789012345678901234567890", text).unwrap(), "123456789012345678901234567890");
        assert_eq!(read(r#""cmt_btcusdt""#, text).unwrap(), "cmt_btcusdt");
        assert_eq!(read("1.5", text), Err("not text"));
        assert_eq!(read("[1]", text), Err("not text"));
    }

    #[test]
    fn integers_never_go_through_floats() {
        assert_eq!(read(r#""1713339011237""#, integer), Ok(1713339011237));
        assert_eq!(read("1713339011237", integer), Ok(1713339011237));
        assert_eq!(read(r#""-5""#, integer), Ok(-5));
        let not_whole = Err("not a whole number (digits and an optional minus)");
        for text in ["1.5", "1e3", r#""12a""#, r#""  1""#, r#""1_000""#, r#""+1""#, r#""""#] {
            assert_eq!(read(text, integer), not_whole, "{text}");
        }
        assert_eq!(read("9223372036854775808", integer), Err("an integer beyond 64 bits"));
        assert_eq!(read("[1]", integer), Err("not an integer"));
    }

    #[test]
    fn booleans_come_as_json_text_or_zero_and_one() {
        assert_eq!(read("true", bool::decode), Ok(true));
        assert_eq!(read(r#""False""#, bool::decode), Ok(false));
        assert_eq!(read("1", bool::decode), Ok(true));
        assert_eq!(read("0", bool::decode), Ok(false));
        assert_eq!(read("2", bool::decode), Err("not a boolean"));
        assert_eq!(read(r#""yes""#, bool::decode), Err("not a boolean"));
    }

    #[test]
    fn a_summary_lists_each_kind_once_with_its_count() {
        let mut problems = Vec::new();
        for _ in 0..3 {
            DecodeProblem::note(&mut problems, "bill", "amount", "not a decimal");
        }
        DecodeProblem::note(&mut problems, "collateral", "is_liquidating", "not a boolean");
        assert_eq!(
            DecodeProblem::summary(&problems),
            "bill.amount: not a decimal (3 times); collateral.is_liquidating: not a boolean"
        );
        let mut problems = Vec::new();
        for field in 0..MAX_PROBLEMS + 5 {
            DecodeProblem::note(&mut problems, "bill", &field.to_string(), "missing");
        }
        let summary = DecodeProblem::summary(&problems);
        assert!(summary.starts_with("bill.0: missing; bill.1: missing;"), "{summary}");
        assert!(summary.ends_with("; 990 more kinds"), "{summary}");
    }

    #[test]
    fn a_bad_field_is_a_problem_and_the_others_survive() {
        let object = JsonObject::parse(br#"{"a": "1.5", "b": "oops", "c": null}"#).unwrap();
        let mut problems = Vec::new();
        let mut reader = FieldReader::new(&object, "test", &mut problems);
        assert_eq!(reader.value::<Decimal>("a"), Some(Decimal::from_str("1.5").unwrap()));
        assert_eq!(reader.value::<Decimal>("b"), None);
        assert_eq!(reader.value::<Decimal>("c"), None);
        assert_eq!(reader.value::<Decimal>("missing"), None);
        let detail = "text that is not a plain decimal (digits, an optional minus and point)";
        assert_eq!(problems, vec![DecodeProblem { record: "test", field: "b".into(), detail }]);
    }
}
