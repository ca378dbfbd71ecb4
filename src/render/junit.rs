//! `--format junit`: one test case per checked workload (failing when it has
//! error findings) plus one per unreadable input, for CI test reports.
//!
//! Written straight to the output, and linear in the size of the report:
//! findings are sorted by (file, document) once, then found by binary search.

use std::io::{self, Write};

use super::escape::Markup;
use super::{FindingRef, Report};
use crate::decision::finding::Severity;

/// Writes the report to `out`.
///
/// # Errors
/// Writing to `out` fails.
pub fn write(report: &impl Report, out: &mut dyn Write) -> io::Result<()> {
    // Finding indexes sorted by (file, document), in output order within
    // a document (a stable sort: usually they are in that order already);
    // a test case's findings are found by binary search.
    let key = |i: usize| {
        let f = report.finding(i);
        (f.file, f.document)
    };
    let mut order: Vec<usize> = (0..report.finding_count()).collect();
    order.sort_by_key(|i| key(*i));
    let findings_of = |file: &str, document: usize| {
        let lo = order.partition_point(|i| key(*i) < (file, document));
        let n = order[lo..].partition_point(|i| key(*i) == (file, document));
        order[lo..lo + n].iter().map(|i| report.finding(*i))
    };
    let failures = (0..report.checked_count())
        .map(|i| report.checked(i))
        .filter(|c| findings_of(c.file, c.document).any(|f| f.severity == Severity::Error))
        .count();
    let skipped = report.excepted_count();
    let tests = report.checked_count() + report.input_errors().len() + skipped;
    let errors = report.input_errors().len();
    // Findings PolicyExceptions cover are skipped test cases.
    let skipped = if skipped > 0 {
        format!(" skipped=\"{skipped}\"")
    } else {
        String::new()
    };
    writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
    writeln!(
        out,
        "<testsuites name=\"winadmit\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\"{skipped}>"
    )?;
    writeln!(
        out,
        "  <testsuite name=\"winadmit lint\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\"{skipped}>"
    )?;
    for c in (0..report.checked_count()).map(|i| report.checked(i)) {
        let ns = c.namespace.map(|n| format!("{n}/")).unwrap_or_default();
        let name = format!("{} {ns}{} (document {})", c.kind, c.name, c.document);
        write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\"",
            Markup(c.file),
            Markup(&name)
        )?;
        let mine: Vec<_> = findings_of(c.file, c.document).collect();
        if mine.is_empty() {
            writeln!(out, "/>")?;
            continue;
        }
        writeln!(out, ">")?;
        write_failures(&mine, out)?;
        writeln!(out, "    </testcase>")?;
    }
    write_skipped(report, out)?;
    for p in report.input_errors() {
        writeln!(
            out,
            "    <testcase classname=\"{}\" name=\"read {}\">\n      <error message=\"{}\" type=\"input\"/>\n    </testcase>",
            Markup(&p.file),
            Markup(&p.file),
            Markup(&p.message)
        )?;
    }
    writeln!(out, "  </testsuite>\n</testsuites>")
}

/// A finding a PolicyException covers: a skipped test case naming it.
fn write_skipped(report: &impl Report, out: &mut dyn Write) -> io::Result<()> {
    for (f, e) in report.excepted_findings() {
        let ns = f.namespace.map(|n| format!("{n}/")).unwrap_or_default();
        let name = format!("{} {} {ns}{} {}", f.rule, f.kind, f.name, f.field);
        let why = format!(
            "excepted by {} until {}: {}{}",
            e.title(),
            e.expires_at,
            e.reason,
            e.ticket
                .as_ref()
                .map(|t| format!(" (ticket {t})"))
                .unwrap_or_default()
        );
        writeln!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\">\n      <skipped message=\"{}\"/>\n    </testcase>",
            Markup(f.file),
            Markup(&name),
            Markup(&why)
        )?;
    }
    Ok(())
}

/// A test case's findings: its errors as one `<failure>`, its warnings in
/// `<system-out>`.
fn write_failures(mine: &[FindingRef<'_>], out: &mut dyn Write) -> io::Result<()> {
    let mut errors = mine.iter().filter(|f| f.severity == Severity::Error);
    if let Some(first) = errors.clone().next() {
        let n = errors.clone().count();
        write!(
            out,
            "      <failure message=\"{n} Windows incompatibilit{}\" type=\"{}\">",
            if n == 1 { "y" } else { "ies" },
            Markup(first.rule)
        )?;
        let mut sep = "";
        for f in errors.by_ref() {
            let text = format!(
                "{}:{}:{}: error[{}] {}: {}\nfix: {}",
                f.file, f.line, f.column, f.rule, f.field, f.message, f.fix
            );
            write!(out, "{sep}{}", Markup(&text))?;
            sep = "\n\n";
        }
        writeln!(out, "</failure>")?;
    }
    let mut warnings = mine
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .peekable();
    if warnings.peek().is_some() {
        write!(out, "      <system-out>")?;
        let mut sep = "";
        for f in warnings {
            let text = format!(
                "{}:{}:{}: warning[{}] {}: {}",
                f.file, f.line, f.column, f.rule, f.field, f.message
            );
            write!(out, "{sep}{}", Markup(&text))?;
            sep = "\n";
        }
        writeln!(out, "</system-out>")?;
    }
    Ok(())
}
