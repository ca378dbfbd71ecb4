//! `--format text`: compiler-style lines, `file:line:col: error[RULE] field: message`.

use std::io::{self, Write};

use super::{LintReport, Report};
use crate::finding::Severity;

/// Renders the report; `color` adds ANSI colours (for terminals).
#[must_use]
pub fn render(report: &LintReport, color: bool) -> String {
    let mut out = Vec::new();
    write(report, color, &mut out).expect("writing to memory does not fail");
    String::from_utf8(out).expect("the report is UTF-8")
}

/// [`render`], written to `out` as it is rendered (no copy of a large
/// report in memory).
///
/// # Errors
/// Writing to `out` failed.
pub fn write(report: &impl Report, color: bool, out: &mut dyn Write) -> io::Result<()> {
    let paint = |code: &str, s: &str| {
        if color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    };
    let problems = report
        .input_errors()
        .iter()
        .map(|p| (p, paint("1;31", "input error")))
        .chain(
            report
                .input_warnings()
                .iter()
                .map(|p| (p, paint("1;33", "input warning"))),
        );
    for (p, label) in problems {
        let at = match (p.line, p.column) {
            (Some(l), Some(c)) => format!(":{l}:{c}"),
            (Some(l), None) => format!(":{l}"),
            _ => String::new(),
        };
        writeln!(out, "{}{at}: {label}: {}", p.file, p.message)?;
    }
    for n in report.notes() {
        let at = match (n.line, n.column) {
            (Some(l), Some(c)) => format!(":{l}:{c}"),
            _ => String::new(),
        };
        writeln!(out, "{}{at}: note: {}", n.file, n.message)?;
    }
    // Written piece by piece: no string per finding.
    for f in report.findings() {
        let (word, code) = match f.severity {
            Severity::Error => ("error", "1;31"),
            Severity::Warning => ("warning", "1;33"),
            Severity::Info => ("info", "1;36"),
        };
        write!(out, "{}:{}:{}: ", f.file, f.line, f.column)?;
        if color {
            write!(out, "\x1b[{code}m{word}[{}]\x1b[0m", f.rule)?;
        } else {
            write!(out, "{word}[{}]", f.rule)?;
        }
        writeln!(out, " {}: {}", f.field, f.message)?;
        match f.namespace {
            Some(ns) => writeln!(out, "  = object: {} {ns}/{}", f.kind, f.name)?,
            None => writeln!(out, "  = object: {} {}", f.kind, f.name)?,
        }
        writeln!(out, "  = fix: {}\n  = see: {}", f.fix, f.doc_url)?;
    }
    let s = report.summary();
    writeln!(
        out,
        "{} error(s), {} warning(s){} in {} object(s) ({} Windows workload(s)) from {} file(s); {} non-Kubernetes document(s) skipped; {} input error(s){}",
        s.errors,
        s.warnings,
        if s.infos > 0 {
            format!(", {} info", s.infos)
        } else {
            String::new()
        },
        s.objects,
        s.windows_workloads,
        s.files,
        s.skipped,
        s.input_errors,
        if s.fixed > 0 {
            format!("; {} fix(es) written", s.fixed)
        } else {
            String::new()
        }
    )?;
    Ok(())
}
