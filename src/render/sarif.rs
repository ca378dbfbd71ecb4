//! `--format sarif`: SARIF 2.1.0 for GitHub code scanning, with rule metadata.
//!
//! Written straight to the output as it is serialized (no JSON tree of the
//! whole log): memory is that of the report, time linear in its size.
//!
//! Locations: a file under the working directory (relative, or absolute
//! below it) is a relative URI against the `uriBaseId` `%SRCROOT%`, which
//! `originalUriBaseIds` defines as the working directory; any other
//! absolute path is a `file://` URI.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::ser::SerializeSeq as _;
use serde_json::{Value, json};

use super::baseline::{self, State};
use super::{FindingRef, Report};
use crate::decision::finding::Severity;
use crate::decision::rules;

/// The base the relative locations are resolved against.
pub const SRCROOT: &str = "%SRCROOT%";

/// The working directory, for [`write`]'s `root`.
#[must_use]
pub fn current_dir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
}

/// Writes the log to `out`; locations under `root` are relative to `%SRCROOT%`.
///
/// # Errors
/// Writing to `out` fails.
pub fn write(report: &impl Report, root: &Path, out: &mut dyn Write) -> serde_json::Result<()> {
    write_compared(report, root, None, out)
}

/// [`write`], each result with its `baselineState` when `states` (one per
/// finding, in output order) are given.
///
/// # Errors
/// Writing to `out` fails.
pub fn write_compared(
    report: &impl Report,
    root: &Path,
    states: Option<&[State]>,
    out: &mut dyn Write,
) -> serde_json::Result<()> {
    let rule_index: HashMap<&str, usize> = rules::ALL
        .iter()
        .enumerate()
        .map(|(i, r)| (r.info.id, i))
        .collect();
    let problems = report
        .input_errors()
        .iter()
        .map(|p| ("error", p))
        .chain(report.input_warnings().iter().map(|p| ("warning", p)));
    let notifications: Vec<Value> = problems
        .map(|(level, p)| {
            let mut loc =
                json!({ "physicalLocation": { "artifactLocation": Artifact::of(&p.file, root) } });
            if let Some(line) = p.line {
                loc["physicalLocation"]["region"] =
                    json!({ "startLine": line, "startColumn": p.column.unwrap_or(1) });
            }
            json!({ "level": level, "message": { "text": p.message }, "locations": [loc] })
        })
        .collect();
    let log = Log {
        schema: "https://json.schemastore.org/sarif-2.1.0.json",
        runs: [Run {
            invocations: [Invocation {
                execution_successful: report.input_errors().is_empty(),
                tool_execution_notifications: notifications,
            }],
            original_uri_base_ids: json!({ SRCROOT: { "uri": directory_uri(root) } }),
            results: Results {
                report,
                rule_index: &rule_index,
                root,
                states,
            },
            tool: json!({ "driver": {
                "name": "winadmit",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://kubernetes.io/docs/concepts/windows/intro/",
                "rules": rule_metadata(),
            }}),
        }],
        version: "2.1.0",
    };
    let mut out = io::BufWriter::new(out);
    serde_json::to_writer_pretty(&mut out, &log)?;
    out.write_all(b"\n").map_err(serde_json::Error::io)?;
    out.flush().map_err(serde_json::Error::io)
}

fn rule_metadata() -> Vec<Value> {
    rules::ALL
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
                "defaultConfiguration": { "level": i.default_level(&crate::decision::cluster::TargetCluster::default()).map_or("none", level) },
                "properties": { "tags": ["kubernetes", "windows"] },
            })
        })
        .collect()
}

// Fields in alphabetical order, as the log was always written.
#[derive(Serialize)]
#[serde(bound(serialize = "R: Report"))]
struct Log<'r, R> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    runs: [Run<'r, R>; 1],
    version: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase", bound(serialize = "R: Report"))]
struct Run<'r, R> {
    invocations: [Invocation; 1],
    original_uri_base_ids: Value,
    results: Results<'r, R>,
    tool: Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Invocation {
    execution_successful: bool,
    tool_execution_notifications: Vec<Value>,
}

/// The results, serialized one by one as they are written.
struct Results<'r, R> {
    report: &'r R,
    rule_index: &'r HashMap<&'static str, usize>,
    root: &'r Path,
    states: Option<&'r [State]>,
}

impl<R: Report> Serialize for Results<'_, R> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = self.report.finding_count() + self.report.excepted_count();
        let mut seq = s.serialize_seq(Some(n))?;
        for (i, f) in self.report.findings().enumerate() {
            let mut out = result(&f, self.rule_index, self.root);
            out.baseline_state = self.states.and_then(|s| s.get(i)).map(|s| s.sarif());
            seq.serialize_element(&out)?;
        }
        // A finding a PolicyException covers: a result suppressed outside
        // the source (kind `external`), the exception's reason as the
        // justification.
        for (f, e) in self.report.excepted_findings() {
            let mut r = result(&f, self.rule_index, self.root);
            r.suppressions = Some([Suppression {
                kind: "external",
                status: "accepted",
                justification: e.reason.clone(),
                properties: json!({
                    "exception": format!("{}/{}", e.namespace, e.name),
                    "ticket": e.ticket,
                    "owner": e.owner,
                    "expiresAt": e.expires_at,
                }),
            }]);
            seq.serialize_element(&r)?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResultOut<'f> {
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline_state: Option<&'static str>,
    level: &'static str,
    locations: [Location<'f>; 1],
    message: Text,
    partial_fingerprints: Fingerprints,
    rule_id: &'static str,
    rule_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suppressions: Option<[Suppression; 1]>,
}

/// SARIF's `suppression`: the finding stands, and is accepted outside the
/// source.
#[derive(Serialize)]
struct Suppression {
    kind: &'static str,
    status: &'static str,
    justification: String,
    properties: Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location<'f> {
    logical_locations: [Logical; 1],
    physical_location: Physical<'f>,
}

#[derive(Serialize)]
struct Logical {
    #[serde(rename = "fullyQualifiedName")]
    fully_qualified_name: String,
    kind: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Physical<'f> {
    artifact_location: Artifact<'f>,
    region: Region,
}

/// A file: `uri` relative to `%SRCROOT%`, or an absolute `file://` URI.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Artifact<'f> {
    uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    uri_base_id: Option<&'f str>,
}

impl Artifact<'static> {
    fn of(file: &str, root: &Path) -> Self {
        let path = Path::new(file);
        if path.is_absolute() {
            match path.strip_prefix(root) {
                Ok(rel) => Self {
                    uri: relative_uri(&rel.to_string_lossy()),
                    uri_base_id: Some(SRCROOT),
                },
                Err(_) => Self {
                    uri: file_uri(file),
                    uri_base_id: None,
                },
            }
        } else {
            Self {
                uri: relative_uri(file),
                uri_base_id: Some(SRCROOT),
            }
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_column: u64,
    start_line: u64,
}

#[derive(Serialize)]
struct Text {
    text: String,
}

#[derive(Serialize)]
struct Fingerprints {
    #[serde(rename = "winadmit/v1")]
    v1: String,
}

fn result<'f>(
    f: &FindingRef<'f>,
    rule_index: &HashMap<&'static str, usize>,
    root: &Path,
) -> ResultOut<'f> {
    let ns = f.namespace.map(|n| format!("{n}/")).unwrap_or_default();
    ResultOut {
        baseline_state: None,
        level: level(f.severity),
        locations: [Location {
            logical_locations: [Logical {
                fully_qualified_name: format!("{}/{ns}{}/{}", f.kind, f.name, f.field),
                kind: "member",
            }],
            physical_location: Physical {
                artifact_location: Artifact::of(f.file, root),
                region: Region {
                    start_column: f.column.max(1),
                    start_line: f.line.max(1),
                },
            },
        }],
        message: Text {
            text: format!(
                "{}: {} ({} {ns}{}). Fix: {}",
                f.field, f.message, f.kind, f.name, f.fix
            ),
        },
        partial_fingerprints: Fingerprints {
            v1: baseline::identity(f),
        },
        rule_id: f.rule,
        rule_index: rule_index.get(f.rule).copied(),
        suppressions: None,
    }
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A relative path as a relative URI reference: forward slashes, no `./`,
/// percent-encoded.
fn relative_uri(file: &str) -> String {
    let mut p = file.replace('\\', "/");
    while let Some(rest) = p.strip_prefix("./") {
        p = rest.to_owned();
    }
    percent_encode(&p)
}

/// An absolute path as a `file://` URI.
fn file_uri(file: &str) -> String {
    let p = file.replace('\\', "/");
    let p = if p.starts_with('/') {
        p
    } else {
        format!("/{p}")
    };
    format!("file://{}", percent_encode(&p))
}

/// The working directory as a `file://` URI ending in `/`.
fn directory_uri(root: &Path) -> String {
    let mut uri = file_uri(&root.to_string_lossy());
    if !uri.ends_with('/') {
        uri.push('/');
    }
    uri
}

/// Percent-encodes everything but unreserved characters and `/` (RFC 3986).
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_relative_to_srcroot_under_the_working_directory() {
        let root = Path::new("/work/repo");
        let a = Artifact::of("/work/repo/deploy/app.yaml", root);
        assert_eq!(a.uri, "deploy/app.yaml");
        assert_eq!(a.uri_base_id, Some(SRCROOT));
        let a = Artifact::of("./deploy/my app.yaml", root);
        assert_eq!(a.uri, "deploy/my%20app.yaml");
        assert_eq!(a.uri_base_id, Some(SRCROOT));
        let a = Artifact::of("/etc/manifests/pod.yaml", root);
        assert_eq!(a.uri, "file:///etc/manifests/pod.yaml");
        assert_eq!(a.uri_base_id, None);
        assert_eq!(directory_uri(root), "file:///work/repo/");
    }
}
