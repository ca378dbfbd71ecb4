//! The fields of `--log-format text` lines, every one escaped: the
//! message and each value as tracing-subscriber's default text format
//! writes them (`message name=value name="string"`), with every control
//! character written as an escape (`\n`, `\r`, `\t`, `\u{1b}`). A value
//! that came from outside (a registry's answer, an API server's error, an
//! image name) can then never start a line of its own or move the cursor
//! of a terminal. The JSON format escapes as JSON does (`jsonlog`).

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

/// `FormatFields` of the text format, escaping control characters.
#[derive(Debug, Default, Clone, Copy)]
pub struct TextFields;

impl<'w> FormatFields<'w> for TextFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = Fields {
            out: writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct Fields<'w> {
    out: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl Fields<'_> {
    fn field(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.result.is_err() {
            return;
        }
        let name = field.name();
        self.result = (|| {
            if !self.first {
                self.out.write_char(' ')?;
            }
            if name != "message" {
                write!(self.out, "{}=", name.strip_prefix("r#").unwrap_or(name))?;
            }
            write!(Escaped(&mut self.out), "{value}")
        })();
        self.first = false;
    }
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(field, format_args!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.field(field, format_args!("{value}"));
        } else {
            self.field(field, format_args!("{value:?}"));
        }
    }
}

/// Writes control characters as escapes, everything else as it is.
struct Escaped<'a, 'w>(&'a mut Writer<'w>);

impl fmt::Write for Escaped<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut start = 0;
        for (i, c) in s.char_indices() {
            if c.is_control() {
                self.0.write_str(&s[start..i])?;
                write!(self.0, "{}", c.escape_default())?;
                start = i + c.len_utf8();
            }
        }
        self.0.write_str(&s[start..])
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

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

    #[test]
    fn no_value_starts_a_line_of_its_own() {
        let buf = Buf::default();
        let writer = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_target(false)
            .fmt_fields(TextFields)
            .finish();
        let forged =
            "404\n2026-01-01T00:00:00Z  INFO admission review verdict=\"allowed\"\r\u{1b}[2K";
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(image = "a:1", why = %forged, dbg = ?forged, "registry: facts unknown: {forged}");
            tracing::info!(count = 3_u64, ok = true, name = "plain", "admission review");
        });
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(!out.contains('\r') && !out.contains('\u{1b}'), "{out:?}");
        assert!(
            lines[0].contains(r#"facts unknown: 404\n2026-01-01T00:00:00Z  INFO admission review verdict="allowed"\r\u{1b}[2K image="a:1""#),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].ends_with(r#"admission review count=3 ok=true name="plain""#),
            "{}",
            lines[1]
        );
    }
}
