//! `--format json`: the lint contract.

use super::LintReport;

/// # Errors
/// Never in practice: the report is plain data.
pub fn render(report: &LintReport) -> serde_json::Result<String> {
    let mut s = serde_json::to_string_pretty(report)?;
    s.push('\n');
    Ok(s)
}
