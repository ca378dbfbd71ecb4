//! `--format text`: compiler-style lines, `file:line:col: error[RULE] field: message`.

use std::io::{self, Write};

use super::ansi::{self, Tone, paint};
use super::{InputProblem, Report};

/// Writes the report to `out` as it is rendered (no copy of a large
/// report in memory); `color` adds ANSI colours (for terminals).
///
/// # Errors
/// Writing to `out` failed.
pub fn write(report: &impl Report, color: bool, out: &mut dyn Write) -> io::Result<()> {
    write_problems(report, color, out)?;
    // Each finding's four lines are put together in one buffer, kept for
    // the next, and written at once: no formatting machinery per piece.
    let mut buf = String::new();
    for f in report.findings() {
        buf.clear();
        push_finding(&mut buf, &f, color);
        out.write_all(buf.as_bytes())?;
    }
    for (f, e) in report.excepted_findings() {
        let ns = f.namespace.map(|n| format!("{n}/")).unwrap_or_default();
        writeln!(
            out,
            "{}:{}:{}: skipped[{}] {}: excepted by {} until {}: {}\n  = object: {} {ns}{}",
            f.file,
            f.line,
            f.column,
            f.rule,
            f.field,
            e.title(),
            e.expires_at,
            e.reason,
            f.kind,
            f.name
        )?;
    }
    write_summary(report.summary(), out)
}

/// The input errors and warnings, then the notes, one a line.
fn write_problems(report: &impl Report, color: bool, out: &mut dyn Write) -> io::Result<()> {
    let problems = report
        .input_errors()
        .iter()
        .map(|p| (p, paint(color, Tone::Error, "input error")))
        .chain(
            report
                .input_warnings()
                .iter()
                .map(|p| (p, paint(color, Tone::Warning, "input warning"))),
        );
    for (p, label) in problems {
        writeln!(out, "{}: {label}: {}", Location(p), p.message)?;
    }
    for n in report.notes() {
        writeln!(out, "{}: note: {}", Location(n), n.message)?;
    }
    Ok(())
}

/// Where an input problem is, as compilers say it: `file`, `file:line` or
/// `file:line:column` (the `lint` and `report` text formats).
pub struct Location<'p>(pub &'p InputProblem);

impl std::fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.0;
        f.write_str(&p.file)?;
        match (p.line, p.column) {
            (Some(l), Some(c)) => write!(f, ":{l}:{c}"),
            (Some(l), None) => write!(f, ":{l}"),
            _ => Ok(()),
        }
    }
}

/// One finding's four lines.
fn push_finding(buf: &mut String, f: &super::FindingRef<'_>, color: bool) {
    buf.push_str(f.file);
    buf.push(':');
    push_number(buf, f.line);
    buf.push(':');
    push_number(buf, f.column);
    buf.push_str(": ");
    ansi::start(buf, color, Tone::of(f.severity));
    buf.push_str(f.severity.as_str());
    buf.push('[');
    buf.push_str(f.rule);
    buf.push(']');
    ansi::end(buf, color);
    for piece in [" ", f.field, ": ", f.message, "\n  = object: ", f.kind, " "] {
        buf.push_str(piece);
    }
    if let Some(ns) = f.namespace {
        buf.push_str(ns);
        buf.push('/');
    }
    for piece in [f.name, "\n  = fix: ", f.fix, "\n  = see: ", f.doc_url, "\n"] {
        buf.push_str(piece);
    }
}

/// The closing line: counts of findings, objects, files and problems.
fn write_summary(s: &super::LintSummary, out: &mut dyn Write) -> io::Result<()> {
    let n = crate::decision::decide::plural;
    writeln!(
        out,
        "{}, {}{} in {} ({}) from {}; {}{}{}",
        n(s.errors, "error", "errors"),
        n(s.warnings, "warning", "warnings"),
        if s.infos > 0 {
            format!(", {}", n(s.infos, "info finding", "info findings"))
        } else {
            String::new()
        },
        n(s.objects, "object", "objects"),
        n(s.windows_workloads, "Windows workload", "Windows workloads"),
        n(s.files, "file", "files"),
        n(s.input_errors, "input error", "input errors"),
        if s.skipped > 0 {
            format!(
                "; {} skipped",
                n(
                    s.skipped,
                    "non-Kubernetes document",
                    "non-Kubernetes documents"
                )
            )
        } else {
            String::new()
        },
        if s.fixed > 0 {
            format!("; {} written", n(s.fixed, "fix", "fixes"))
        } else {
            String::new()
        }
    )
}

/// Appends `n` in decimal.
fn push_number(buf: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for d in &digits[at..] {
        buf.push(char::from(*d));
    }
}

#[cfg(test)]
mod tests {
    use super::push_number;

    #[test]
    fn numbers_are_written_in_decimal() {
        let mut buf = String::new();
        for n in [0, 7, 10, 1_234_567_890, u64::MAX] {
            buf.clear();
            push_number(&mut buf, n);
            assert_eq!(buf, n.to_string());
        }
    }
}
