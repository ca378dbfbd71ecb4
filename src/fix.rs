//! `lint --fix`: write the safe fixes back into manifest files, keeping
//! comments and layout.
//!
//! The fixes are the operations the mutating webhook would send for each
//! object (`patch::mutation`), applied as text edits at the positions the
//! YAML parser reports: removing a field deletes its lines, adding a map
//! entry inserts lines at the indentation of its siblings. Edits that text
//! surgery cannot make safely (flow style, a field opening a list item,
//! appends to lists, adding to an empty map) are left for a person and
//! reported as not fixed. A fixed file must parse again and yield the
//! patched objects; otherwise it is not written.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::engine::{self, Context};
use crate::finding::PatchOp;
use crate::patch::{self, MutationContext};
use crate::policy::Policy;
use crate::source::{self, Locator};
use crate::view::ObjectView;
use crate::workload::{Kind, Workload};

/// What fixing one file did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FixOutcome {
    /// Operations applied.
    pub applied: usize,
    /// Operations that could not be made as text edits.
    pub skipped: Vec<String>,
}

/// One text edit: replace lines `start..end` (0-based, end exclusive) with `insert`.
struct Edit {
    start: usize,
    end: usize,
    insert: Vec<String>,
}

/// Fixes one file's text. Returns the new text (or `None` when nothing
/// changed) and what was done.
#[must_use]
pub fn fix_text(text: &str, policy: &Policy, cx: &Context<'_>) -> (Option<String>, FixOutcome) {
    let mut outcome = FixOutcome::default();
    let Ok(docs) = source::parse(text) else {
        return (None, outcome);
    };
    let Ok(locator) = source::locator(text) else {
        return (None, outcome);
    };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut edits = Vec::new();
    let mut expected: Vec<(usize, Value)> = Vec::new();
    for doc in &docs {
        let api = doc.value["apiVersion"].as_str().unwrap_or_default();
        let kind = doc.value["kind"].as_str().unwrap_or_default();
        if Kind::from_type(api, kind).is_none() {
            continue;
        }
        let Ok(view) = ObjectView::deserialize(&doc.value) else {
            continue;
        };
        let Some(workload) = Workload::from_view(&view) else {
            continue;
        };
        let eval = engine::evaluate(policy, &workload, cx);
        let m = patch::mutation(
            policy,
            &workload,
            &eval,
            MutationContext {
                create: true,
                namespace_isolation: None,
            },
        );
        let mut applied_here = Vec::new();
        for op in &m.ops {
            let pointer = format!("{}{}", doc.pointer, op.path());
            match edit_for(op, &pointer, doc.yaml_doc, &locator, &lines, newline) {
                Some(edit) => {
                    edits.push(edit);
                    applied_here.push(op.clone());
                }
                None => outcome
                    .skipped
                    .push(format!("{} {}", workload.name, op.path())),
            }
        }
        if !applied_here.is_empty() {
            let mut patched = doc.value.clone();
            if patch::apply(&mut patched, &applied_here).is_ok() {
                expected.push((doc.index, patched));
            }
            outcome.applied += applied_here.len();
        }
    }
    if edits.is_empty() {
        return (None, outcome);
    }
    // Apply bottom-up so earlier line numbers stay valid; overlapping
    // edits (a field inside a removed field) keep the outer one.
    edits.sort_by(|a, b| b.start.cmp(&a.start).then(b.end.cmp(&a.end)));
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    let mut floor = usize::MAX;
    for e in edits {
        if e.end > floor {
            continue;
        }
        out.splice(e.start..e.end, e.insert);
        floor = e.start;
    }
    let fixed = out.concat();
    // The fixed text must read back as exactly the patched objects.
    let Ok(reread) = source::parse(&fixed) else {
        outcome
            .skipped
            .push("the fixed file did not parse; left unchanged".into());
        outcome.applied = 0;
        return (None, outcome);
    };
    for (index, want) in &expected {
        if reread.get(*index).map(|d| &d.value) != Some(want) {
            outcome.skipped.push(format!(
                "document {index} did not match the patched object; file left unchanged"
            ));
            outcome.applied = 0;
            return (None, outcome);
        }
    }
    (Some(fixed), outcome)
}

/// The text edit for one operation, if it can be made safely.
fn edit_for(
    op: &PatchOp,
    pointer: &str,
    yaml_doc: usize,
    locator: &Locator,
    lines: &[&str],
    nl: &str,
) -> Option<Edit> {
    match op {
        PatchOp::Remove { .. } => {
            let (line, col) = locator.key_position(yaml_doc, pointer)?;
            let start = usize::try_from(line).ok()? - 1;
            let indent = usize::try_from(col).ok()? - 1;
            // Block style only: the key starts its line.
            let text = lines.get(start)?;
            if text.len() < indent || !text[..indent].chars().all(|c| c == ' ') {
                return None;
            }
            let mut end = start + 1;
            while let Some(l) = lines.get(end) {
                let t = l.trim_end_matches(['\r', '\n']);
                let trimmed = t.trim_start();
                let depth = t.len() - trimmed.len();
                if !trimmed.is_empty() && !trimmed.starts_with('#') && depth <= indent {
                    break;
                }
                if trimmed.starts_with('#') && depth <= indent {
                    break;
                }
                end += 1;
            }
            Some(Edit {
                start,
                end,
                insert: Vec::new(),
            })
        }
        PatchOp::Add { value, .. } => {
            let (parent, key) = pointer.rsplit_once('/')?;
            if key == "-" {
                return None;
            }
            let key = key.replace("~1", "/").replace("~0", "~");
            let (line, col) = locator.first_key_position(yaml_doc, parent)?;
            let at = usize::try_from(line).ok()? - 1;
            let indent = usize::try_from(col).ok()? - 1;
            let text = lines.get(at)?;
            if text.len() < indent || !text[..indent].chars().all(|c| c == ' ') {
                return None;
            }
            let pad = " ".repeat(indent);
            let insert = match value {
                Value::Object(map) => {
                    let mut out = vec![format!("{pad}{}:{nl}", yaml_scalar(&key))];
                    for (k, v) in map {
                        out.push(format!("{pad}  {}: {}{nl}", yaml_scalar(k), yaml_value(v)?));
                    }
                    out
                }
                v => vec![format!(
                    "{pad}{}: {}{nl}",
                    yaml_scalar(&key),
                    yaml_value(v)?
                )],
            };
            Some(Edit {
                start: at,
                end: at,
                insert,
            })
        }
        PatchOp::Replace { .. } => None,
    }
}

fn yaml_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(yaml_scalar(s)),
        Value::Bool(_) | Value::Number(_) => Some(v.to_string()),
        _ => None,
    }
}

/// A plain scalar when safe, else a JSON (double-quoted) string.
fn yaml_scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-' | '_'))
        && !matches!(
            s,
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~"
        )
        && s.parse::<f64>().is_err();
    if plain {
        s.to_owned()
    } else {
        Value::String(s.to_owned()).to_string()
    }
}

/// Fixes files in place; returns the number of operations applied.
///
/// # Errors
/// A file cannot be written.
pub fn apply_to_files(
    files: &[std::path::PathBuf],
    policy: &Policy,
    cx: &Context<'_>,
) -> anyhow::Result<(usize, Vec<String>)> {
    let mut applied = 0;
    let mut skipped = Vec::new();
    for file in files {
        let Ok(bytes) = std::fs::read(file) else {
            continue;
        };
        let Ok(text) = source::decode(&bytes) else {
            continue;
        };
        let (fixed, outcome) = fix_text(text, policy, cx);
        if let Some(fixed) = fixed {
            write_atomically(file, &fixed)?;
        }
        applied += outcome.applied;
        skipped.extend(
            outcome
                .skipped
                .into_iter()
                .map(|s| format!("{}: {s}", file.display())),
        );
    }
    Ok((applied, skipped))
}

fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let tmp = path.with_extension("winadmit-fix.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(text: &str) -> (Option<String>, FixOutcome) {
        fix_text(text, &Policy::default_policy(), &Context::default())
    }

    #[test]
    fn removes_no_op_fields_keeping_comments_and_injects_the_selector() {
        let text = "\
# web tier
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      os:
        name: windows  # required for the API server's checks
      containers:
      - name: iis   # the site
        image: mcr.microsoft.com/windows/servercore/iis
        securityContext:
          privileged: false
          capabilities:
            drop:
            - ALL
          runAsNonRoot: true
";
        let (fixed, outcome) = fix(text);
        let fixed = fixed.expect("a fix");
        assert_eq!(outcome.applied, 3, "{outcome:?}");
        assert_eq!(
            fixed,
            "\
# web tier
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      nodeSelector:
        kubernetes.io/os: windows
      os:
        name: windows  # required for the API server's checks
      containers:
      - name: iis   # the site
        image: mcr.microsoft.com/windows/servercore/iis
        securityContext:
          runAsNonRoot: true
"
        );
        assert_eq!(fix(&fixed).0, None, "fixing twice changes nothing");
    }

    #[test]
    fn crlf_is_kept_and_flow_style_is_left_alone() {
        let text = "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\nspec:\r\n  nodeSelector: {kubernetes.io/os: windows}\r\n  containers:\r\n  - name: c\r\n    image: x\r\n    securityContext: {capabilities: {drop: [ALL]}}\r\n";
        let (fixed, outcome) = fix(text);
        assert_eq!(fixed, None);
        assert_eq!(outcome.skipped.len(), 1, "{outcome:?}");
        let block = text.replace("    securityContext: {capabilities: {drop: [ALL]}}\r\n", "    securityContext:\r\n      capabilities:\r\n        drop: [ALL]\r\n      runAsNonRoot: true\r\n");
        let fixed = fix(&block).0.unwrap();
        assert!(
            fixed.contains("    securityContext:\r\n      runAsNonRoot: true\r\n"),
            "{fixed}"
        );
        assert!(!fixed.contains("capabilities"));
    }
}
