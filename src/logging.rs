//! Log output in logfmt (default) or JSON. Only this crate logs at the chosen level; libraries
//! log warnings and errors only, so that `--log.level debug` stays readable.

use crate::config::LogFormat;
use serde_json::Value;
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// Installs the global subscriber, writing to standard error.
pub fn init(level: LevelFilter, format: LogFormat) {
    let filter = Targets::new().with_target(env!("CARGO_CRATE_NAME"), level).with_default(level.min(LevelFilter::WARN));
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false);
    tracing_subscriber::registry().with(filter).with(layer.event_format(Lines(format))).init();
}

/// The error that stops the process, as its last line: plain in logfmt (what a person at a
/// terminal reads, as a usage error is), an error event in JSON (what a log pipeline parses).
pub fn fatal(format: LogFormat, error: &str) {
    match format {
        LogFormat::Logfmt => eprintln!("capi_exporter: error: {error}"),
        LogFormat::Json => tracing::error!(error, "capi_exporter stopped by an error"),
    }
}

/// One line per event, in either format with the same keys: `ts`, `level`, `target`, `msg`, then
/// the event's own fields. logfmt: `ts=... level=info target=... msg="..." key=value`.
struct Lines(LogFormat);

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut ts = String::new();
        SystemTime.format_time(&mut Writer::new(&mut ts))?;
        let meta = event.metadata();
        let mut fields = Fields(vec![
            ("ts", Value::from(ts)),
            ("level", Value::from(meta.level().as_str().to_ascii_lowercase())),
            ("target", Value::from(meta.target())),
        ]);
        event.record(&mut fields);
        let pairs = fields.0.iter().map(|(key, value)| match (self.0, value) {
            // logfmt quotes text when needed; numbers and booleans stay as they are.
            (LogFormat::Logfmt, Value::String(text)) => format!("{key}={}", quote(text)),
            (LogFormat::Logfmt, other) => format!("{key}={other}"),
            (LogFormat::Json, value) => format!("{}:{value}", Value::from(*key)),
        });
        let pairs: Vec<String> = pairs.collect();
        match self.0 {
            LogFormat::Logfmt => writeln!(writer, "{}", pairs.join(" ")),
            LogFormat::Json => writeln!(writer, "{{{}}}", pairs.join(",")),
        }
    }
}

/// An event's fields in order, `message` named `msg`; numbers and booleans stay typed for JSON.
struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    fn push(&mut self, field: &Field, value: Value) {
        let key = if field.name() == "message" { "msg" } else { field.name() };
        self.0.push((key, value));
    }
}

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, Value::from(value));
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.push(field, u64::try_from(value).map_or_else(|_| Value::from(value.to_string()), Value::from));
    }

    /// A number in JSON (`null` if it is not finite, which JSON cannot write).
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Value::from(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Value::from(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, Value::from(format!("{value:?}")));
    }
}

/// Quotes a value when it holds spaces, quotes, `=` or control characters, as logfmt asks.
fn quote(value: &str) -> String {
    let plain =
        !value.is_empty() && !value.chars().any(|c| c.is_whitespace() || c == '"' || c == '=' || c.is_control());
    if plain {
        return value.to_string();
    }
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            // As Go's strconv.Quote writes them, which logfmt readers decode.
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What one event logs in `format`.
    fn logged(format: LogFormat) -> String {
        logged_event(format, || tracing::warn!(accounts = 2, path = "/a b", "serving"))
    }

    /// What `event` logs in `format`.
    fn logged_event(format: LogFormat, event: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let sink = buffer.clone();
        let layer = tracing_subscriber::fmt::layer().with_writer(move || sink.clone()).event_format(Lines(format));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, event);
        let text = buffer.0.lock().unwrap().clone();
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn both_formats_use_the_same_keys() {
        let logfmt = logged(LogFormat::Logfmt);
        let rest = " level=warn target=capi_exporter::logging::tests msg=serving accounts=2 path=\"/a b\"\n";
        assert!(logfmt.starts_with("ts=") && logfmt.ends_with(rest), "{logfmt}");
        let json: serde_json::Map<String, Value> = serde_json::from_str(&logged(LogFormat::Json)).unwrap();
        let keys: Vec<&str> = json.keys().map(String::as_str).collect();
        assert_eq!(keys, ["accounts", "level", "msg", "path", "target", "ts"]);
        assert_eq!(
            (json["level"].as_str(), json["msg"].as_str(), json["accounts"].as_u64()),
            (Some("warn"), Some("serving"), Some(2))
        );
    }

    #[test]
    fn values_are_quoted_only_when_needed() {
        assert_eq!(quote("main"), "main");
        assert_eq!(quote("two words"), "\"two words\"");
        assert_eq!(quote("a=\"b\"\n"), "\"a=\\\"b\\\"\\n\"");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("\u{1b}[31m\tx\r"), "\"\\u001b[31m\\tx\\r\"");
    }

    #[test]
    fn numbers_stay_numbers_in_json() {
        let line = logged_event(LogFormat::Json, || {
            tracing::info!(duration_ms = std::time::Duration::from_millis(7).as_millis(), seconds = 1.5, "polled")
        });
        let json: serde_json::Map<String, Value> = serde_json::from_str(&line).unwrap();
        assert_eq!((json["duration_ms"].as_u64(), json["seconds"].as_f64()), (Some(7), Some(1.5)), "{line}");
    }
}
