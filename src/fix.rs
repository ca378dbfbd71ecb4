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

use serde_json::Value;

use crate::engine::Context;
use crate::finding::PatchOp;
use crate::patch::{self, MutationContext};
use crate::path::escape_pointer;
use crate::policy::Policy;
use crate::source;
use crate::workload::{Workload, type_of};
use crate::yaml::Position;

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
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };

    // The operations each object needs, and the positions they depend on.
    let mut planned: Vec<Planned> = Vec::new();
    let mut wants: Vec<(usize, String)> = Vec::new();
    for doc in &docs {
        let Some((api, kind)) = type_of(&doc.value) else {
            continue;
        };
        if policy.pod_templates.kind_of(api, kind).is_none() {
            continue;
        }
        let Ok(view) = policy.pod_templates.read(&doc.value) else {
            continue;
        };
        let Some(workload) = Workload::from_view(&view) else {
            continue;
        };
        // The same settled patch the mutating webhook would send on CREATE.
        let mcx = MutationContext {
            create: true,
            namespace_isolation: None,
            psa_restricted_before_1_25: false,
        };
        let m = patch::settle(policy, cx, mcx, &doc.value, None, &|_| true);
        for op in m.ops {
            let pointer = format!("{}{}", doc.pointer, op.path());
            let first_want = wants.len();
            match &op {
                PatchOp::Remove { .. } => wants.push((doc.yaml_doc, pointer.clone())),
                PatchOp::Add { path, .. } => {
                    // Where the new entry goes: before the parent's first key.
                    let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
                    if let Some(Value::Object(siblings)) = doc.value.pointer(parent) {
                        for k in siblings.keys() {
                            wants.push((
                                doc.yaml_doc,
                                format!("{}{parent}/{}", doc.pointer, escape_pointer(k)),
                            ));
                        }
                    }
                }
                PatchOp::Replace { .. } => {}
            }
            planned.push(Planned {
                doc: doc.index,
                name: workload.name.to_owned(),
                op,
                pointer,
                wants: first_want..wants.len(),
            });
        }
    }
    if planned.is_empty() {
        return (None, outcome);
    }
    let refs: Vec<(usize, &str)> = wants.iter().map(|(d, p)| (*d, p.as_str())).collect();
    let positions = source::locate_many(text, &refs);

    let mut edits = Vec::new();
    let mut applied: Vec<(usize, PatchOp)> = Vec::new();
    for p in planned {
        let found: Vec<Position> = positions[p.wants.clone()]
            .iter()
            .flatten()
            .filter(|x| x.exact)
            .copied()
            .collect();
        match edit_for(&p.op, &p.pointer, &found, &lines, newline) {
            Some(edit) => {
                edits.push(edit);
                applied.push((p.doc, p.op));
            }
            None => outcome.skipped.push(format!("{} {}", p.name, p.op.path())),
        }
    }
    if edits.is_empty() {
        return (None, outcome);
    }
    // The patched objects the fixed text must read back as.
    let mut expected: Vec<(usize, Value)> = Vec::new();
    for doc in &docs {
        let ops: Vec<PatchOp> = applied
            .iter()
            .filter(|(d, _)| *d == doc.index)
            .map(|(_, op)| op.clone())
            .collect();
        if ops.is_empty() {
            continue;
        }
        let mut patched = doc.value.clone();
        if patch::apply(&mut patched, &ops).is_ok() {
            expected.push((doc.index, patched));
        }
    }
    outcome.applied = applied.len();

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

/// One operation to make as a text edit.
struct Planned {
    doc: usize,
    name: String,
    op: PatchOp,
    pointer: String,
    /// Indices into the position lookups this edit needs.
    wants: std::ops::Range<usize>,
}

/// The text edit for one operation, if it can be made safely. `found` are
/// the exact positions looked up for it: the field itself for a removal,
/// the parent's keys for an addition.
fn edit_for(
    op: &PatchOp,
    pointer: &str,
    found: &[Position],
    lines: &[&str],
    nl: &str,
) -> Option<Edit> {
    match op {
        PatchOp::Remove { .. } => {
            let at = found.first()?;
            let start = usize::try_from(at.line).ok()? - 1;
            let indent = usize::try_from(at.column).ok()? - 1;
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
                if !trimmed.is_empty() && depth <= indent {
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
            let (_, key) = pointer.rsplit_once('/')?;
            if key == "-" {
                return None;
            }
            let key = key.replace("~1", "/").replace("~0", "~");
            let first = found.iter().min_by_key(|p| (p.line, p.column))?;
            let at = usize::try_from(first.line).ok()? - 1;
            let indent = usize::try_from(first.column).ok()? - 1;
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
        let text = "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\nspec:\r\n  nodeSelector: {kubernetes.io/os: windows}\r\n  containers:\r\n  - name: c\r\n    image: x\r\n    securityContext: {runAsUser: 1000}\r\n";
        let (fixed, outcome) = fix(text);
        assert_eq!(fixed, None);
        assert_eq!(outcome.skipped.len(), 1, "{outcome:?}");
        let block = text.replace(
            "    securityContext: {runAsUser: 1000}\r\n",
            "    securityContext:\r\n      runAsUser: 1000\r\n      runAsNonRoot: true\r\n",
        );
        let fixed = fix(&block).0.unwrap();
        assert!(
            fixed.contains("    securityContext:\r\n      runAsNonRoot: true\r\n"),
            "{fixed}"
        );
        assert!(!fixed.contains("capabilities"));
    }
}
