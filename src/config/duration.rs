//! Durations in Prometheus's notation: `500ms`, `15s`, `2m`, `1h30m`, `7d`.

use std::time::Duration;

/// Parses a duration such as `1h30m`; every part needs a unit, and the total must not be zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("{text:?} is not a duration; write it like 500ms, 15s, 2m, 1h30m or 7d");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let units = rest[digits..].bytes().take_while(u8::is_ascii_alphabetic).count();
        if digits == 0 || units == 0 {
            return Err(invalid());
        }
        let number: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        let unit_ms = match &rest[digits..digits + units] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            "y" => 31_536_000_000,
            _ => return Err(invalid()),
        };
        let part = number.checked_mul(unit_ms).ok_or_else(invalid)?;
        total = total.checked_add(Duration::from_millis(part)).ok_or_else(invalid)?;
        rest = &rest[digits + units..];
    }
    if total.is_zero() {
        return Err(format!("{text:?} is zero; give a duration above zero"));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86400)));
    }

    #[test]
    fn bad_durations_say_how_to_write_one() {
        for bad in ["", "15", "s", "1.5s", "5x", "-1s", "99999999999999999999s"] {
            let error = parse_duration(bad).unwrap_err();
            assert!(error.contains("is not a duration"), "{bad}: {error}");
        }
        assert!(parse_duration("0s").unwrap_err().contains("zero"));
    }
}
