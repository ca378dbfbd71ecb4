//! `--log-format json` lines written straight into the line buffer: the
//! same object tracing-subscriber's JSON format (flattened, no target, no
//! current span) writes, `{"timestamp":…,"level":…,"message":…,<fields>}`,
//! without its per-field detours (a `String` for every `Display`/`Debug`
//! field, a UTF-8 check for every punctuation mark it writes). The
//! request log line is one per review, so its cost is per review
//! (docs/BENCHMARKS.md, "What was tried and not kept"). An event
//! inside a span is handed to tracing-subscriber's formatter unchanged,
//! so lines with spans keep their `spans` list.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Json, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The JSON line format of `winadmit serve --log-format json`.
pub struct JsonLines {
    /// For events inside a span.
    spans: Format<Json, SystemTime>,
}

impl Default for JsonLines {
    fn default() -> Self {
        Self {
            spans: Format::default()
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_target(false),
        }
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if event
            .parent()
            .and_then(|id| ctx.span(id))
            .or_else(|| ctx.lookup_current())
            .is_some()
        {
            return self.spans.format_event(ctx, writer, event);
        }
        writer.write_str("{\"timestamp\":\"")?;
        SystemTime.format_time(&mut writer)?;
        write!(
            writer,
            "\",\"level\":\"{}\"",
            event.metadata().level().as_str()
        )?;
        let mut fields = Fields {
            out: &mut writer,
            result: Ok(()),
        };
        event.record(&mut fields);
        fields.result?;
        writer.write_str("}\n")
    }
}

/// Writes each field as `,"name":value`.
struct Fields<'w, 'a> {
    out: &'w mut Writer<'a>,
    result: fmt::Result,
}

impl Fields<'_, '_> {
    fn key(&mut self, field: &Field) -> fmt::Result {
        self.out.write_char(',')?;
        string(self.out, field.name())?;
        self.out.write_char(':')
    }

    fn entry(&mut self, field: &Field, value: impl FnOnce(&mut Writer<'_>) -> fmt::Result) {
        if self.result.is_ok() {
            self.result = self.key(field).and_then(|()| value(self.out));
        }
    }
}

impl Visit for Fields<'_, '_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.entry(field, |out| {
            out.write_char('"')?;
            write!(Escaped(out), "{value:?}")?;
            out.write_char('"')
        });
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.entry(field, |out| string(out, value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.entry(field, |out| {
            out.write_str(if value { "true" } else { "false" })
        });
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.entry(field, |out| write!(out, "{value}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.entry(field, |out| write!(out, "{value}"));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // As serde_json: a number, or null when not finite.
        self.entry(field, |out| {
            if value.is_finite() {
                write!(out, "{value:?}")
            } else {
                out.write_str("null")
            }
        });
    }
}

/// A JSON string.
fn string(out: &mut Writer<'_>, s: &str) -> fmt::Result {
    out.write_char('"')?;
    Escaped(out).write_str(s)?;
    out.write_char('"')
}

/// Escapes what it is given as the inside of a JSON string (as
/// serde_json does: `\"`, `\\`, the short forms, `\u00XX`).
struct Escaped<'w, 'a>(&'w mut Writer<'a>);

impl fmt::Write for Escaped<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let bytes = s.as_bytes();
        let mut start = 0;
        // Runs of bytes that need no escape are written whole.
        while let Some(run) = bytes[start..]
            .iter()
            .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
        {
            let i = start + run;
            self.0.write_str(&s[start..i])?;
            match bytes[i] {
                b'"' => self.0.write_str("\\\""),
                b'\\' => self.0.write_str("\\\\"),
                b'\n' => self.0.write_str("\\n"),
                b'\r' => self.0.write_str("\\r"),
                b'\t' => self.0.write_str("\\t"),
                0x08 => self.0.write_str("\\b"),
                0x0c => self.0.write_str("\\f"),
                b => write!(self.0, "\\u{b:04x}"),
            }?;
            start = i + 1;
        }
        self.0.write_str(&s[start..])
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    fn log_all() {
        let uid = "7d0c8a4e-\"quoted\"\\back\nslash\u{1}";
        tracing::info!(
            endpoint = "validate",
            uid = %uid,
            kind = %"Pod",
            dry_run = false,
            patch_ops = 3_usize,
            delta = -4_i64,
            ratio = 0.25_f64,
            nan = f64::NAN,
            note = "é ünïcode…",
            dbg = ?Some("x"),
            "admission review"
        );
        tracing::warn!(error = %"bad\tthing", "bad admission request");
        let span = tracing::info_span!("outer", id = 7);
        let _in = span.enter();
        tracing::info!(inside = true, "in a span");
    }

    fn lines(mine: bool) -> Vec<serde_json::Value> {
        let buf = Buf::default();
        let builder = tracing_subscriber::fmt()
            .with_writer(buf.clone())
            .with_ansi(false)
            .with_target(false)
            .json()
            .flatten_event(true)
            .with_current_span(false);
        if mine {
            let sub = builder.event_format(JsonLines::default()).finish();
            tracing::subscriber::with_default(sub, log_all);
        } else {
            tracing::subscriber::with_default(builder.finish(), log_all);
        }
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        out.lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                let ts = v["timestamp"].as_str().unwrap().to_owned();
                assert!(ts.ends_with('Z') && ts.len() == 27, "{ts}");
                v["timestamp"] = "T".into();
                v
            })
            .collect()
    }

    #[test]
    fn lines_are_the_objects_tracing_subscriber_writes() {
        let (mine, theirs) = (lines(true), lines(false));
        assert_eq!(mine.len(), 3);
        assert_eq!(mine, theirs);
        assert_eq!(mine[0]["uid"], "7d0c8a4e-\"quoted\"\\back\nslash\u{1}");
        assert_eq!(mine[0]["message"], "admission review");
        assert_eq!(mine[0]["patch_ops"], 3);
        assert!(mine[2]["spans"].is_array(), "{}", mine[2]);
    }
}
