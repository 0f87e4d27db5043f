//! Durations in the two notations the exporter reads: Prometheus's for flags (`500ms`, `15s`,
//! `1h30m`, `7d`: whole numbers, units from the largest to the smallest, each at most once, as
//! Prometheus's own flags take them) and Go's `time.ParseDuration` for the exporter-toolkit web
//! configuration file (`300ms`, `1.5s`, `1h2m`, up to Go's limit of 2^63 ns, about 292 years),
//! which the Go exporters read that way. White space around a flag's duration is ignored, as an
//! environment variable written from a file often ends in a newline.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{0:?} is not a duration; write it like 500ms, 15s, 2m, 1h30m or 7d (units from the largest, each once)")]
    NotPrometheus(String),
    #[error("{0:?} is not a duration; write it like 100ms, 1.5s or 1h2m")]
    NotGo(String),
    #[error("{0:?} is zero; give a duration above zero")]
    Zero(String),
}

/// Prometheus's units, from the largest: a duration names them in this order, each at most once.
const PROMETHEUS_UNITS: [(&str, u64); 7] = [
    ("y", 31_536_000_000),
    ("w", 604_800_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// A Prometheus duration above zero, such as `1h30m`.
pub fn parse_prometheus(text: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::NotPrometheus(text.to_string());
    // Prometheus's own zero, without a unit.
    if text.trim() == "0" {
        return Err(DurationError::Zero(text.to_string()));
    }
    let parts = parts(text.trim()).ok_or_else(invalid)?;
    let mut previous_unit = None;
    let mut total_ms = 0u64;
    for (number, unit) in parts {
        let position = PROMETHEUS_UNITS.iter().position(|(name, _)| *name == unit).ok_or_else(invalid)?;
        if previous_unit.is_some_and(|previous| position <= previous) {
            return Err(invalid());
        }
        previous_unit = Some(position);
        let number: u64 = number.parse().map_err(|_| invalid())?;
        let part = number.checked_mul(PROMETHEUS_UNITS[position].1).ok_or_else(invalid)?;
        total_ms = total_ms.checked_add(part).ok_or_else(invalid)?;
    }
    if total_ms == 0 {
        return Err(DurationError::Zero(text.to_string()));
    }
    Ok(Duration::from_millis(total_ms))
}

/// The longest duration Go's `time.Duration` holds: 2^63 - 1 nanoseconds.
const GO_LONGEST: Duration = Duration::from_nanos(i64::MAX as u64);

/// A non-negative Go duration: `0`, or parts such as `1.5s` in any order.
pub fn parse_go(text: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::NotGo(text.to_string());
    let unsigned = text.strip_prefix('+').unwrap_or(text);
    if unsigned == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    for (number, unit) in parts(unsigned).ok_or_else(invalid)? {
        let seconds_per_unit = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let part = Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| invalid())?;
        total = total.checked_add(part).filter(|total| *total <= GO_LONGEST).ok_or_else(invalid)?;
    }
    Ok(total)
}

/// `text` cut into `(number, unit)` parts, a number being digits and dots; `None` when it is
/// empty or a part lacks its number or its unit.
fn parts(text: &str) -> Option<Vec<(&str, &str)>> {
    let is_number = |c: char| c.is_ascii_digit() || c == '.';
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !is_number(c)).unwrap_or(rest.len());
        let (number, after_number) = rest.split_at(number_len);
        let unit_len = after_number.find(is_number).unwrap_or(after_number.len());
        let (unit, after_unit) = after_number.split_at(unit_len);
        if number.is_empty() || unit.is_empty() {
            return None;
        }
        parts.push((number, unit));
        rest = after_unit;
    }
    (!parts.is_empty()).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_durations_parse() {
        assert_eq!(parse_prometheus("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_prometheus("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_prometheus("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_prometheus("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_prometheus("7d"), Ok(Duration::from_secs(7 * 86400)));
        let every_unit = 31_536_000_000 + 2 * 604_800_000 + 3 * 86_400_000 + 4 * 3_600_000 + 5 * 60_000 + 6_007;
        assert_eq!(parse_prometheus("1y2w3d4h5m6s7ms"), Ok(Duration::from_millis(every_unit)));
    }

    #[test]
    fn bad_prometheus_durations_say_how_to_write_one() {
        let bad =
            ["", "15", "s", "1.5s", "5x", "-1s", "99999999999999999999s", "1s1s", "30m1h", "1ms1s", "0s1s", "1µs"];
        for text in bad {
            assert_eq!(parse_prometheus(text), Err(DurationError::NotPrometheus(text.into())), "{text}");
        }
        assert_eq!(parse_prometheus("0s"), Err(DurationError::Zero("0s".into())));
        assert_eq!(parse_prometheus("0"), Err(DurationError::Zero("0".into())));
        assert_eq!(parse_prometheus(" 15s\n"), Ok(Duration::from_secs(15)), "white space around it");
        assert!(DurationError::NotPrometheus("1s1s".into()).to_string().contains("write it like 500ms"));
    }

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_go("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_go("1h2m"), Ok(Duration::from_secs(3720)));
        assert_eq!(parse_go("10µs"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_go("+1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_go("2562047h"), Ok(Duration::from_secs(2_562_047 * 3600)), "Go's longest whole hours");
    }

    #[test]
    fn other_text_is_not_a_go_duration() {
        for bad in
            ["", "1", "s", ".s", "-1s", "1x", "1d", "1s2", "1e9s", "99999999999999999999999h", "1..5s", "2562048h"]
        {
            assert_eq!(parse_go(bad), Err(DurationError::NotGo(bad.into())), "{bad}");
        }
    }
}
