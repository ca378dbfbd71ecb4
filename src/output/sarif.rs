//! `--format sarif`: SARIF 2.1.0 for GitHub code scanning, with rule metadata.

use serde_json::{Value, json};

use super::LintReport;
use crate::finding::Severity;
use crate::rules;

/// # Errors
/// Never in practice: the report is plain data.
pub fn render(report: &LintReport) -> serde_json::Result<String> {
    let rules: Vec<Value> = rules::ALL
        .iter()
        .map(|r| {
            let i = &r.info;
            json!({
                "id": i.id,
                "name": i.id.trim_start_matches("WIN-").to_ascii_lowercase().replace('-', "_"),
                "shortDescription": { "text": i.title },
                "fullDescription": { "text": format!("{} {}", i.what, i.why) },
                "helpUri": i.doc_url,
                "help": {
                    "text": format!("{}\n\nFix: {}\n\nSource: {}", i.why, i.fix, i.source),
                    "markdown": format!("{}\n\n**Fix:** {}\n\n**Source:** {}", i.why, i.fix, i.source),
                },
                "defaultConfiguration": { "level": i.default_level(&crate::cluster::Cluster::default()).map_or("none", level) },
                "properties": { "tags": ["kubernetes", "windows"] },
            })
        })
        .collect();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let rule_index = rules::ALL.iter().position(|r| r.info.id == f.rule);
            let ns = f.namespace.as_deref().map(|n| format!("{n}/")).unwrap_or_default();
            json!({
                "ruleId": f.rule,
                "ruleIndex": rule_index,
                "level": level(f.severity),
                "message": { "text": format!("{}: {} ({} {ns}{}). Fix: {}", f.field, f.message, f.kind, f.name, f.fix) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri(&f.file) },
                        "region": { "startLine": f.line.max(1), "startColumn": f.column.max(1) },
                    },
                    "logicalLocations": [{
                        "fullyQualifiedName": format!("{}/{ns}{}/{}", f.kind, f.name, f.field),
                        "kind": "member",
                    }],
                }],
                "partialFingerprints": {
                    "winadmit/v1": format!("{}|{}|{ns}{}|{}", f.rule, f.kind, f.name, f.field),
                },
            })
        })
        .collect();
    let notifications: Vec<Value> = report
        .input_errors
        .iter()
        .map(|p| {
            let mut loc =
                json!({ "physicalLocation": { "artifactLocation": { "uri": uri(&p.file) } } });
            if let Some(line) = p.line {
                loc["physicalLocation"]["region"] =
                    json!({ "startLine": line, "startColumn": p.column.unwrap_or(1) });
            }
            json!({ "level": "error", "message": { "text": p.message }, "locations": [loc] })
        })
        .collect();
    let sarif = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "winadmit",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://kubernetes.io/docs/concepts/windows/intro/",
                "rules": rules,
            }},
            "invocations": [{
                "executionSuccessful": report.input_errors.is_empty(),
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    });
    let mut s = serde_json::to_string_pretty(&sarif)?;
    s.push('\n');
    Ok(s)
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// SARIF wants relative URIs with forward slashes.
fn uri(file: &str) -> String {
    file.trim_start_matches("./").replace('\\', "/")
}
