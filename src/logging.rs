//! Log output in logfmt (default) or JSON. Only this crate logs at the chosen level; libraries
//! log warnings and errors only, so that `--log.level debug` stays readable.

use crate::config::{LogFormat, LogLevel};
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
pub fn init(level: LogLevel, format: LogFormat) {
    let level = match level {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
    };
    let filter = Targets::new().with_target(env!("CARGO_CRATE_NAME"), level).with_default(level.min(LevelFilter::WARN));
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false);
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Logfmt => registry.with(layer.event_format(Logfmt)).init(),
        LogFormat::Json => registry.with(layer.json().flatten_event(true)).init(),
    }
}

/// `ts=... level=info target=... msg="..." key=value`.
pub struct Logfmt;

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        writer.write_str("ts=")?;
        SystemTime.format_time(&mut writer)?;
        let meta = event.metadata();
        write!(writer, " level={} target={}", meta.level().as_str().to_ascii_lowercase(), meta.target())?;
        let mut visitor = LogfmtFields { line: String::new() };
        event.record(&mut visitor);
        writeln!(writer, "{}", visitor.line)
    }
}

struct LogfmtFields {
    line: String,
}

impl Visit for LogfmtFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, &format!("{value:?}"));
    }
}

impl LogfmtFields {
    fn push(&mut self, field: &Field, value: &str) {
        let key = if field.name() == "message" { "msg" } else { field.name() };
        self.line.push(' ');
        self.line.push_str(key);
        self.line.push('=');
        self.line.push_str(&quote(value));
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
            c if c.is_control() => quoted.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn values_are_quoted_only_when_needed() {
        assert_eq!(quote("main"), "main");
        assert_eq!(quote("two words"), "\"two words\"");
        assert_eq!(quote("a=\"b\"\n"), "\"a=\\\"b\\\"\\n\"");
        assert_eq!(quote(""), "\"\"");
    }
}
