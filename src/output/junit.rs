//! `--format junit`: one test case per checked workload (failing when it has
//! error findings) plus one per unreadable input, for CI test reports.

use std::fmt::Write;

use super::LintReport;
use crate::finding::Severity;

#[must_use]
pub fn render(report: &LintReport) -> String {
    let failures = report
        .checked
        .iter()
        .filter(|c| {
            report.findings.iter().any(|f| {
                f.file == c.file && f.document == c.document && f.severity == Severity::Error
            })
        })
        .count();
    let tests = report.checked.len() + report.input_errors.len();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"winadmit\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{}\">",
        report.input_errors.len()
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"winadmit lint\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{}\">",
        report.input_errors.len()
    );
    for c in &report.checked {
        let ns = c
            .namespace
            .as_deref()
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        let name = format!("{} {ns}{} (document {})", c.kind, c.name, c.document);
        let _ = write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\"",
            escape(&c.file),
            escape(&name)
        );
        let mine: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.file == c.file && f.document == c.document)
            .collect();
        if mine.is_empty() {
            out.push_str("/>\n");
            continue;
        }
        out.push_str(">\n");
        let errors: Vec<_> = mine
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .collect();
        if !errors.is_empty() {
            let body: Vec<String> = errors
                .iter()
                .map(|f| {
                    format!(
                        "{}:{}:{}: error[{}] {}: {}\nfix: {}",
                        f.file, f.line, f.column, f.rule, f.field, f.message, f.fix
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "      <failure message=\"{} Windows incompatibilit{}\" type=\"{}\">{}</failure>",
                errors.len(),
                if errors.len() == 1 { "y" } else { "ies" },
                escape(errors[0].rule),
                escape(&body.join("\n\n"))
            );
        }
        let warnings: Vec<String> = mine
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .map(|f| {
                format!(
                    "{}:{}:{}: warning[{}] {}: {}",
                    f.file, f.line, f.column, f.rule, f.field, f.message
                )
            })
            .collect();
        if !warnings.is_empty() {
            let _ = writeln!(
                out,
                "      <system-out>{}</system-out>",
                escape(&warnings.join("\n"))
            );
        }
        out.push_str("    </testcase>\n");
    }
    for p in &report.input_errors {
        let _ = writeln!(
            out,
            "    <testcase classname=\"{}\" name=\"read {}\">\n      <error message=\"{}\" type=\"input\"/>\n    </testcase>",
            escape(&p.file),
            escape(&p.file),
            escape(&p.message)
        );
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// XML attribute and text escaping.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}
