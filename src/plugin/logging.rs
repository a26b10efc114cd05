//! Logging to stderr as hclog JSON lines, the format go-plugin understands.
//!
//! go-plugin reads the plugin's stderr line by line. A line that parses as JSON with
//! string `@level` / `@message` and an `@timestamp` in the layout
//! `2006-01-02T15:04:05.000000Z07:00` is re-logged by Terraform at that level, with
//! every other key as a structured field; any other line is logged verbatim at debug.
//! So every event becomes one line:
//!
//! ```json
//! {"@level":"info","@message":"serving","@module":"talosboot","@timestamp":"2026-11-29T16:00:00.000000Z","target":"talosboot::plugin","addr":"127.0.0.1:10000"}
//! ```
//!
//! Span fields of the enclosing spans are included (innermost wins), then the event's
//! own fields.
//!
//! # Level
//! `TF_LOG_PROVIDER` if set and non-empty, else `TF_LOG` (case-insensitive):
//! - `trace`, `debug`, `info`, `warn`, `error`: that level;
//! - `off`: nothing (panics are still reported, see below);
//! - `json`: trace (Terraform's "JSON" means trace in JSON format);
//! - any other non-empty value: trace, as Terraform itself treats unknown levels;
//! - unset or empty: `warn` (Terraform discards plugin logs anyway when its own
//!   logging is off; a human running `--debug` sees warnings and errors).
//!
//! The level applies to talosboot's own events. Dependencies are capped at `info`,
//! and the noisy transport crates (h2, hyper, tower, rustls, tonic) at `warn`.
//!
//! # Panics
//! [`install_panic_hook`] replaces the default hook with one that writes an error
//! line (message, location, backtrace if `RUST_BACKTRACE` asks for one) regardless
//! of the configured level, so a crash never goes unexplained.

use std::fmt;
use std::io::Write as _;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber, span};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

use super::clock::Utc;

/// hclog `@module` of every line.
const MODULE: &str = "talosboot";
/// Crates whose debug output is transport noise.
const NOISY: &[&str] = &[
    "h2",
    "hyper",
    "hyper_util",
    "tower",
    "rustls",
    "tokio_rustls",
    "tonic",
];

/// The level chosen from the environment (see the module docs).
pub(crate) fn level_from_env() -> LevelFilter {
    let pick = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    parse_level(
        pick("TF_LOG_PROVIDER")
            .or_else(|| pick("TF_LOG"))
            .as_deref(),
    )
}

fn parse_level(value: Option<&str>) -> LevelFilter {
    let Some(value) = value.map(str::trim) else {
        return LevelFilter::WARN;
    };
    match value.to_ascii_lowercase().as_str() {
        "" => LevelFilter::WARN,
        "off" => LevelFilter::OFF,
        "error" => LevelFilter::ERROR,
        "warn" => LevelFilter::WARN,
        "info" => LevelFilter::INFO,
        "debug" => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE, // "trace", "json" and unknown values
    }
}

/// Installs the global subscriber. Returns false if one was already installed
/// (e.g. by a test harness), which is harmless.
pub(crate) fn init(level: LevelFilter) -> bool {
    let mut targets = Targets::new()
        .with_default(level.min(LevelFilter::INFO))
        .with_target("talosboot", level);
    for noisy in NOISY {
        targets = targets.with_target(*noisy, level.min(LevelFilter::WARN));
    }
    tracing_subscriber::registry()
        .with(HclogJsonLayer.with_filter(targets))
        .try_init()
        .is_ok()
}

/// Replaces the panic hook with one that logs the panic as an hclog error line.
pub(crate) fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_owned());
        let mut fields = Map::new();
        if let Some(location) = info.location() {
            fields.insert("location".into(), Value::String(location.to_string()));
        }
        if let Some(name) = std::thread::current().name() {
            fields.insert("thread".into(), Value::String(name.to_owned()));
        }
        let backtrace = std::backtrace::Backtrace::capture();
        if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
            fields.insert("backtrace".into(), Value::String(backtrace.to_string()));
        }
        write_line(&hclog_line(
            Level::ERROR,
            &format!("talosboot panicked: {message}"),
            "talosboot::panic",
            fields,
        ));
    }));
}

/// Builds one hclog JSON object (without the trailing newline).
pub(crate) fn hclog_line(
    level: Level,
    message: &str,
    target: &str,
    fields: Map<String, Value>,
) -> String {
    let mut line = Map::new();
    line.insert("@level".into(), Value::String(hclog_level(level).into()));
    line.insert("@message".into(), Value::String(message.to_owned()));
    line.insert("@module".into(), Value::String(MODULE.into()));
    line.insert(
        "@timestamp".into(),
        Value::String(Utc::now().rfc3339_micros()),
    );
    line.insert("target".into(), Value::String(target.to_owned()));
    for (key, value) in fields {
        // Never let a field shadow the hclog keys go-plugin type-asserts.
        if !key.starts_with('@') {
            line.insert(key, value);
        }
    }
    Value::Object(line).to_string()
}

fn hclog_level(level: Level) -> &'static str {
    match level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

/// One write per line, so lines from different threads never interleave.
fn write_line(line: &str) {
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line);
    buf.push('\n');
    let mut stderr = std::io::stderr().lock();
    // Nowhere to report a failed write to stderr.
    let _ = stderr.write_all(buf.as_bytes());
    let _ = stderr.flush();
}

/// The tracing layer that writes hclog JSON lines to stderr.
struct HclogJsonLayer;

/// Span fields, kept in the span's extensions.
struct SpanFields(Map<String, Value>);

impl<S> Layer<S> for HclogJsonLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut visitor = JsonVisitor::default();
        attrs.record(&mut visitor);
        span.extensions_mut().insert(SpanFields(visitor.fields));
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(SpanFields(fields)) = extensions.get_mut::<SpanFields>() {
            let mut visitor = JsonVisitor {
                fields: std::mem::take(fields),
                message: None,
            };
            values.record(&mut visitor);
            *fields = visitor.fields;
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Map::new();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(SpanFields(span_fields)) = span.extensions().get::<SpanFields>() {
                    fields.extend(span_fields.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
        }
        let mut visitor = JsonVisitor {
            fields,
            message: None,
        };
        event.record(&mut visitor);
        let meta = event.metadata();
        write_line(&hclog_line(
            *meta.level(),
            visitor.message.as_deref().unwrap_or_default(),
            meta.target(),
            visitor.fields,
        ));
    }
}

/// Collects tracing fields as JSON values; `message` is kept apart.
#[derive(Default)]
struct JsonVisitor {
    fields: Map<String, Value>,
    message: Option<String>,
}

impl JsonVisitor {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                Value::String(s) => s,
                other => other.to_string(),
            });
        } else {
            self.fields.insert(field.name().to_owned(), value);
        }
    }
}

impl Visit for JsonVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        // Display the whole cause chain: "outer: inner: innermost".
        let mut text = value.to_string();
        let mut source = value.source();
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !text.ends_with(&cause_text) {
                text.push_str(": ");
                text.push_str(&cause_text);
            }
            source = cause.source();
        }
        self.put(field, Value::String(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_terraform_conventions() {
        assert_eq!(parse_level(None), LevelFilter::WARN);
        assert_eq!(parse_level(Some("")), LevelFilter::WARN);
        assert_eq!(parse_level(Some("OFF")), LevelFilter::OFF);
        assert_eq!(parse_level(Some("Debug")), LevelFilter::DEBUG);
        assert_eq!(parse_level(Some("JSON")), LevelFilter::TRACE);
        assert_eq!(parse_level(Some("whatever")), LevelFilter::TRACE);
        assert_eq!(parse_level(Some("error")), LevelFilter::ERROR);
    }

    #[test]
    fn line_is_hclog_json() {
        let mut fields = Map::new();
        fields.insert("addr".into(), Value::String("127.0.0.1:1".into()));
        fields.insert("@level".into(), Value::String("spoof".into()));
        let line = hclog_line(Level::INFO, "serving", "talosboot::plugin", fields);
        let parsed: Value = serde_json::from_str(&line).expect("json");
        assert_eq!(parsed["@level"], "info");
        assert_eq!(parsed["@message"], "serving");
        assert_eq!(parsed["@module"], "talosboot");
        assert_eq!(parsed["addr"], "127.0.0.1:1");
        let ts = parsed["@timestamp"].as_str().expect("timestamp");
        assert_eq!(ts.len(), "2026-01-01T00:00:00.000000Z".len(), "{ts}");
        assert!(ts.ends_with('Z'));
        assert!(!line.contains('\n'));
    }
}
