//! Durations as Go's `time.ParseDuration` writes them (`300ms`, `1.5s`, `1h2m`), since the
//! exporter-toolkit's `rate_limit.interval` is a Go duration (unlike the rest of this exporter's
//! configuration, which uses Prometheus's notation).

use std::time::Duration;

/// Parses a non-negative Go duration; `None` when the text is not one (or overflows).
pub(crate) fn parse_go_duration(text: &str) -> Option<Duration> {
    let text = text.strip_prefix('+').unwrap_or(text);
    if text == "0" {
        return Some(Duration::ZERO);
    }
    if text.is_empty() {
        return None;
    }
    let mut rest = text;
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let (part, after) = parse_part(rest)?;
        total = total.checked_add(part)?;
        rest = after;
    }
    Some(total)
}

/// One `<number><unit>` part, e.g. `1.5s`, and the text after it.
fn parse_part(text: &str) -> Option<(Duration, &str)> {
    let number_len = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, after_number) = text.split_at(number_len);
    if number.is_empty() || number == "." {
        return None;
    }
    let unit_len = after_number.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after_number.len());
    let (unit, rest) = after_number.split_at(unit_len);
    let seconds_per_unit = match unit {
        "ns" => 1e-9,
        "us" | "µs" | "μs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    let part = Duration::try_from_secs_f64(value * seconds_per_unit).ok()?;
    Some((part, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("1h2m"), Some(Duration::from_secs(3720)));
        assert_eq!(parse_go_duration("10µs"), Some(Duration::from_micros(10)));
        assert_eq!(parse_go_duration("+1s"), Some(Duration::from_secs(1)));
    }

    #[test]
    fn other_text_is_not_a_duration() {
        for bad in ["", "1", "s", ".s", "-1s", "1x", "1d", "1s2", "1e9s", "99999999999999999999999h", "1..5s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }
}
