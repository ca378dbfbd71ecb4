//! `lint --fix`: write the safe fixes back into manifest files, keeping
//! comments, key order, quoting and layout.
//!
//! The fix for each object is the settled patch the mutating webhook would
//! send on CREATE (`patch::settle`). Applying it gives the object the file
//! should hold; the file is then changed by text edits at the positions the
//! YAML parser reports, only where the patched object differs from the
//! original: removed entries lose their lines (or their text and comma in
//! flow style and JSON), added entries are written at the indentation of
//! their siblings, in the style (block, flow, pretty JSON) of their parent.
//!
//! A map or list the patch empties is removed with its key when Kubernetes
//! reads an empty value as an absent one (`securityContext`,
//! `capabilities`, `nodeSelector`, any list); elsewhere (`emptyDir: {}`,
//! whose presence chooses the volume type) the empty value is written.
//! The fixed text must parse back to exactly that object, or the object's
//! edits are dropped and it is reported as not fixed.

mod extent;
mod files;
mod style;
mod tree;
mod writer;

use std::collections::BTreeSet;

use serde_json::Value;

use crate::decision::decide;
use crate::decision::engine::Context;
use crate::decision::policy::Policy;
use crate::decision::workload::{Workload, type_of};
use crate::input::source;

pub use files::apply_to_files;
use tree::{Node, Tree};
use writer::Writer;

/// What fixing one file did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FixOutcome {
    /// Patch operations applied.
    pub applied: usize,
    /// Objects (or files) whose fixes could not be made as text edits.
    pub skipped: Vec<String>,
    /// What was changed, in the order of the text: the line (1-based) of
    /// the field in the original text (or of the nearest enclosing field
    /// for an added one), and the rule and field it fixes, or what the
    /// change is for when it fixes no finding.
    pub changes: Vec<(u64, String)>,
}

/// Keys whose value Kubernetes reads the same empty as absent: when the
/// patch empties one, the key goes too.
const EMPTY_IS_ABSENT: &[&str] = &[
    "securityContext",
    "seLinuxOptions",
    "windowsOptions",
    "capabilities",
    "seccompProfile",
    "appArmorProfile",
    "nodeSelector",
    "annotations",
    "labels",
    "resources",
    "limits",
    "requests",
];

/// The object the file should hold after the fix: the patched object,
/// without the maps and lists the patch emptied where empty means absent.
#[must_use]
pub fn fixed_object(original: &Value, patched: &Value) -> Value {
    let mut out = patched.clone();
    prune_emptied(original, &mut out);
    out
}

fn prune_emptied(original: &Value, new: &mut Value) {
    match (original, new) {
        (Value::Object(old), Value::Object(new)) => {
            let keys: Vec<String> = new.keys().cloned().collect();
            for k in keys {
                let Some(before) = old.get(&k) else { continue };
                let Some(after) = new.get_mut(&k) else {
                    continue;
                };
                prune_emptied(before, after);
                let emptied = match (before, &*after) {
                    (Value::Object(b), Value::Object(a)) => {
                        !b.is_empty() && a.is_empty() && EMPTY_IS_ABSENT.contains(&k.as_str())
                    }
                    (Value::Array(b), Value::Array(a)) => !b.is_empty() && a.is_empty(),
                    _ => false,
                };
                if emptied {
                    new.remove(&k);
                }
            }
        }
        (Value::Array(old), Value::Array(new)) if old.len() == new.len() => {
            for (b, a) in old.iter().zip(new.iter_mut()) {
                prune_emptied(b, a);
            }
        }
        _ => {}
    }
}

/// One text edit: replace bytes `start..end` with `text`.
#[derive(Debug)]
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// An object to fix: where it is, how many operations, what it becomes.
struct Plan {
    index: usize,
    yaml_doc: usize,
    pointer: String,
    name: String,
    ops: usize,
    /// (JSON Pointer under the object, what the change fixes) per operation.
    changes: Vec<(String, String)>,
    /// The same, placed: (line, what).
    lines: Vec<(u64, String)>,
    target: Value,
    edits: Vec<Edit>,
}

/// Fixes one file's text. Returns the new text (or `None` when nothing
/// changed) and what was done.
#[must_use]
pub fn fix_text(text: &str, policy: &Policy, cx: &Context<'_>) -> (Option<String>, FixOutcome) {
    let mut outcome = FixOutcome::default();
    // The objects and the text's node tree, in one pass.
    let mut tree = Tree::new(text);
    let Ok(docs) = source::parse_visiting(text, &mut tree) else {
        return (None, outcome);
    };
    let plans = plan(&docs, policy, cx);
    if plans.is_empty() {
        return (None, outcome);
    }
    let roots = match tree.finish() {
        Ok(roots) => roots,
        Err(why) => {
            for p in &plans {
                outcome.skipped.push(format!("{}: {why}", p.name));
            }
            return (None, outcome);
        }
    };
    let ok = edit(text, &roots, &docs, plans, &mut outcome);
    let fixed = write(text, &docs, ok, &mut outcome);
    (fixed, outcome)
}

/// What each object becomes: the decision's settled patch, what the
/// mutating webhook would send on CREATE.
fn plan(docs: &[source::Document], policy: &Policy, cx: &Context<'_>) -> Vec<Plan> {
    let mut plans = Vec::new();
    for doc in docs {
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
        let decision = decide::decide(
            policy,
            cx,
            &workload,
            &decide::Request::manifest(decide::PatchSource::Preview(&doc.value)),
        );
        let Some(patched) = decision.patched else {
            continue;
        };
        plans.push(Plan {
            index: doc.index,
            yaml_doc: doc.yaml_doc,
            pointer: doc.pointer.clone(),
            name: format!("{kind}/{}", workload.name),
            ops: decision.patch.ops.len(),
            changes: decision
                .patch
                .ops
                .iter()
                .zip(&decision.patch.fixes)
                .zip(&decision.patch.explanations)
                .map(|((op, fixed), why)| {
                    let what = match fixed {
                        Some(f) => format!("{} at {}", f.rule, f.field),
                        None => why.clone(),
                    };
                    (op.path().as_str().to_owned(), what)
                })
                .collect(),
            lines: Vec::new(),
            target: fixed_object(&doc.value, &patched),
            edits: Vec::new(),
        });
    }
    plans
}

/// The text edits that turn each object into its target; an object whose
/// changes cannot be made in place is left out, and said so.
fn edit(
    text: &str,
    roots: &[Option<Node>],
    docs: &[source::Document],
    plans: Vec<Plan>,
    outcome: &mut FixOutcome,
) -> Vec<Plan> {
    let writer = Writer::new(text);
    let mut ok: Vec<Plan> = Vec::new();
    for mut plan in plans {
        let node = roots
            .get(plan.yaml_doc)
            .and_then(Option::as_ref)
            .and_then(|root| root.at(&plan.pointer));
        let Some(node) = node else {
            outcome
                .skipped
                .push(format!("{}: not found in the text", plan.name));
            continue;
        };
        plan.lines = plan
            .changes
            .iter()
            .map(|(path, what)| (line_of(text, nearest(node, path).start), what.clone()))
            .collect();
        let original = &docs[plan.index].value;
        match writer.diff(node, original, &plan.target, "", &mut plan.edits) {
            Ok(()) => ok.push(plan),
            Err(at) => outcome.skipped.push(format!(
                "{} {at}: cannot be rewritten in place; fix it by hand",
                plan.name
            )),
        }
    }
    ok
}

/// The node at `path` under `node`, or its nearest ancestor there (an
/// added field's parent).
fn nearest<'a>(node: &'a Node, path: &str) -> &'a Node {
    let mut p = path;
    loop {
        if let Some(n) = node.at(p) {
            return n;
        }
        match p.rfind('/') {
            Some(i) => p = &p[..i],
            None => return node,
        }
    }
}

/// The 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> u64 {
    let upto = &text.as_bytes()[..at.min(text.len())];
    memchr::memchr_iter(b'\n', upto).count() as u64 + 1
}

/// Writes the edits; an object whose fixed text does not read back as its
/// target is dropped and the rest written again.
fn write(
    text: &str,
    docs: &[source::Document],
    mut ok: Vec<Plan>,
    outcome: &mut FixOutcome,
) -> Option<String> {
    loop {
        if ok.is_empty() {
            return None;
        }
        let Some(fixed) = apply_edits(text, ok.iter().flat_map(|p| &p.edits)) else {
            drop_overlapping(text, &mut ok, outcome);
            continue;
        };
        let Ok(reread) = source::parse(&fixed) else {
            for p in ok.drain(..) {
                outcome.skipped.push(format!(
                    "{}: the fixed text did not parse; left unchanged",
                    p.name
                ));
            }
            return None;
        };
        let wrong: BTreeSet<usize> = if reread.len() == docs.len() {
            ok.iter()
                .filter(|p| reread[p.index].value != p.target)
                .map(|p| p.index)
                .collect()
        } else {
            ok.iter().map(|p| p.index).collect()
        };
        let others_kept = reread.len() == docs.len()
            && docs
                .iter()
                .filter(|d| ok.iter().all(|p| p.index != d.index))
                .all(|d| reread[d.index].value == d.value);
        if wrong.is_empty() && others_kept {
            outcome.applied = ok.iter().map(|p| p.ops).sum();
            outcome.changes = ok.iter().flat_map(|p| p.lines.iter().cloned()).collect();
            outcome.changes.sort();
            return Some(fixed);
        }
        let before = ok.len();
        ok.retain(|p| {
            let bad = wrong.contains(&p.index);
            if bad {
                outcome.skipped.push(format!(
                    "{}: the fixed text did not read back as the patched object; left unchanged",
                    p.name
                ));
            }
            !bad
        });
        if ok.len() == before {
            // Nothing to blame: give up on the file.
            for p in ok.drain(..) {
                outcome.skipped.push(format!(
                    "{}: fixing changed another object; left unchanged",
                    p.name
                ));
            }
        }
    }
}

/// Overlapping edits: drops the objects whose own edits overlap, else all
/// but the first object.
fn drop_overlapping(text: &str, ok: &mut Vec<Plan>, outcome: &mut FixOutcome) {
    let before = ok.len();
    ok.retain(|p| {
        let fine = apply_edits(text, p.edits.iter()).is_some();
        if !fine {
            outcome.skipped.push(format!(
                "{}: its changes overlap in the text; fix it by hand",
                p.name
            ));
        }
        fine
    });
    if ok.len() == before {
        for p in ok.split_off(1) {
            outcome.skipped.push(format!(
                "{}: its changes overlap another object's; run --fix again",
                p.name
            ));
        }
    }
}

/// Applies non-overlapping edits; insertions at a position come before a
/// replacement starting there. `None` when two edits overlap.
fn apply_edits<'e>(text: &str, edits: impl Iterator<Item = &'e Edit>) -> Option<String> {
    let mut edits: Vec<&Edit> = edits.collect();
    edits.sort_by_key(|e| (e.start, e.end));
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    for e in edits {
        if e.start < cursor {
            return None;
        }
        out.push_str(&text[cursor..e.start]);
        out.push_str(&e.text);
        cursor = e.end;
    }
    out.push_str(&text[cursor..]);
    Some(out)
}

#[cfg(test)]
mod tests;
