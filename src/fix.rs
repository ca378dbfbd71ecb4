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

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Map, Value};
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Span, StructureStyle};

use crate::decide;
use crate::engine::Context;
use crate::policy::Policy;
use crate::source;
use crate::workload::{Workload, type_of};

/// What fixing one file did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FixOutcome {
    /// Patch operations applied.
    pub applied: usize,
    /// Objects (or files) whose fixes could not be made as text edits.
    pub skipped: Vec<String>,
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
    target: Value,
    edits: Vec<Edit>,
}

/// Fixes one file's text. Returns the new text (or `None` when nothing
/// changed) and what was done.
#[must_use]
pub fn fix_text(text: &str, policy: &Policy, cx: &Context<'_>) -> (Option<String>, FixOutcome) {
    let mut outcome = FixOutcome::default();
    let Ok(docs) = source::parse(text) else {
        return (None, outcome);
    };
    let plans = plan(&docs, policy, cx);
    if plans.is_empty() {
        return (None, outcome);
    }
    let roots = match read_tree(text) {
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

/// A YAML node with its byte positions.
#[derive(Debug)]
struct Node {
    start: usize,
    /// Exact for scalars, aliases and flow collections; not used for block
    /// collections, whose extent is found from indentation.
    end: usize,
    kind: NodeKind,
}

#[derive(Debug)]
enum NodeKind {
    Scalar { block: bool },
    Alias,
    Map { flow: bool, entries: Vec<Entry> },
    Seq { flow: bool, items: Vec<Node> },
}

#[derive(Debug)]
struct Entry {
    key: String,
    key_start: usize,
    key_end: usize,
    value: Node,
}

impl Node {
    /// The node a JSON Pointer names.
    fn at(&self, pointer: &str) -> Option<&Node> {
        let mut node = self;
        for token in pointer.split('/').skip(1) {
            let token = token.replace("~1", "/").replace("~0", "~");
            node = match &node.kind {
                NodeKind::Map { entries, .. } => {
                    &entries.iter().rev().find(|e| e.key == token)?.value
                }
                NodeKind::Seq { items, .. } => items.get(token.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(node)
    }

    fn is_flow(&self) -> bool {
        match &self.kind {
            NodeKind::Map { flow, .. } | NodeKind::Seq { flow, .. } => *flow,
            NodeKind::Scalar { .. } | NodeKind::Alias => true,
        }
    }
}

enum Frame {
    Map {
        flow: bool,
        start: usize,
        entries: Vec<Entry>,
        key: Option<(String, usize, usize)>,
    },
    Seq {
        flow: bool,
        start: usize,
        items: Vec<Node>,
    },
}

fn byte_range(span: &Span) -> Result<(usize, usize), String> {
    match (span.start.byte_offset(), span.end.byte_offset()) {
        (Some(s), Some(e)) => Ok((s, e)),
        _ => Err("the parser gave no byte positions".into()),
    }
}

/// Every YAML document's node tree (`None` for an empty document).
fn read_tree(text: &str) -> Result<Vec<Option<Node>>, String> {
    let mut roots = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Node> = None;
    for item in Parser::new_from_str(text) {
        let (event, span) =
            item.map_err(|e| format!("cannot be read for editing: {}", e.info()))?;
        let (start, end) = byte_range(&span)?;
        let node = match event {
            Event::DocumentStart(..) => {
                root = None;
                continue;
            }
            Event::DocumentEnd => {
                roots.push(root.take());
                continue;
            }
            Event::Scalar(value, style, ..) => {
                if let Some(Frame::Map {
                    key: key @ None, ..
                }) = stack.last_mut()
                {
                    *key = Some((value.into_owned(), start, end));
                    continue;
                }
                Node {
                    start,
                    end,
                    kind: NodeKind::Scalar {
                        block: matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
                            || text[start..end].contains('\n'),
                    },
                }
            }
            Event::Alias(_) => Node {
                start,
                end,
                kind: NodeKind::Alias,
            },
            Event::MappingStart(style, ..) => {
                stack.push(Frame::Map {
                    flow: matches!(style, StructureStyle::Flow),
                    start,
                    entries: Vec::new(),
                    key: None,
                });
                continue;
            }
            Event::SequenceStart(style, ..) => {
                stack.push(Frame::Seq {
                    flow: matches!(style, StructureStyle::Flow),
                    start,
                    items: Vec::new(),
                });
                continue;
            }
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map {
                    flow,
                    start,
                    entries,
                    ..
                }) => Node {
                    start,
                    end,
                    kind: NodeKind::Map { flow, entries },
                },
                _ => return Err("unbalanced mapping".into()),
            },
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { flow, start, items }) => Node {
                    start,
                    end,
                    kind: NodeKind::Seq { flow, items },
                },
                _ => return Err("unbalanced sequence".into()),
            },
            _ => continue,
        };
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => {
                let Some((key, key_start, key_end)) = key.take() else {
                    return Err("complex mapping keys are not supported".into());
                };
                entries.push(Entry {
                    key,
                    key_start,
                    key_end,
                    value: node,
                });
            }
        }
    }
    Ok(roots)
}

/// Writes the difference between two values as text edits.
struct Writer<'t> {
    text: &'t str,
    nl: &'static str,
    /// Indentation step of nested block maps.
    unit: usize,
    /// Extra indentation of block list items under their key (0 or `unit`).
    seq_indent: usize,
    /// The file is JSON: flow values are written as JSON, not YAML.
    json: bool,
}

type Diff = Result<(), String>;

impl<'t> Writer<'t> {
    fn new(text: &'t str) -> Self {
        let (unit, seq_indent) = block_style(text);
        Self {
            text,
            nl: if text.contains("\r\n") { "\r\n" } else { "\n" },
            unit,
            seq_indent,
            json: text.trim_start().starts_with(['{', '[']),
        }
    }

    /// A value in the file's flow style.
    fn flow(&self, v: &Value, pretty: Option<(usize, usize)>) -> String {
        flow_value(v, pretty, self.nl, !self.json)
    }

    /// A map key in the file's flow style.
    fn flow_key(&self, k: &str) -> String {
        if self.json { json_str(k) } else { block_key(k) }
    }

    fn diff(&self, node: &Node, old: &Value, new: &Value, at: &str, out: &mut Vec<Edit>) -> Diff {
        if old == new {
            return Ok(());
        }
        match (&node.kind, old, new) {
            (NodeKind::Map { flow, entries }, Value::Object(o), Value::Object(n)) => {
                self.diff_map(node, *flow, entries, o, n, at, out)
            }
            (NodeKind::Seq { flow, items }, Value::Array(o), Value::Array(n)) => {
                self.diff_seq(node, *flow, items, o, n, at, out)
            }
            (NodeKind::Scalar { block: false }, _, n) if is_scalar(n) => {
                out.push(Edit {
                    start: node.start,
                    end: node.end,
                    text: if self.json {
                        n.to_string()
                    } else {
                        block_scalar(n)
                    },
                });
                Ok(())
            }
            _ => Err(at.to_owned()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn diff_map(
        &self,
        node: &Node,
        flow: bool,
        entries: &[Entry],
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        at: &str,
        out: &mut Vec<Edit>,
    ) -> Diff {
        let keys: BTreeSet<&str> = entries.iter().map(|e| e.key.as_str()).collect();
        if keys.len() != entries.len() || keys.len() != old.len() {
            // Duplicate keys or merge keys: the text is not the value.
            return Err(at.to_owned());
        }
        let removed: Vec<bool> = entries.iter().map(|e| !new.contains_key(&e.key)).collect();
        for (e, gone) in entries.iter().zip(&removed) {
            if *gone {
                continue;
            }
            let (o, n) = (&old[&e.key], &new[&e.key]);
            if o == n {
                continue;
            }
            let here = format!("{at}/{}", crate::path::escape_pointer(&e.key));
            let emptied = matches!(n, Value::Object(m) if m.is_empty())
                || matches!(n, Value::Array(a) if a.is_empty());
            let same_shape = matches!(
                (&e.value.kind, o, n),
                (NodeKind::Map { .. }, Value::Object(_), Value::Object(_))
                    | (NodeKind::Seq { .. }, Value::Array(_), Value::Array(_))
            ) || (matches!(e.value.kind, NodeKind::Scalar { block: false })
                && is_scalar(n));
            if same_shape && (flow || e.value.is_flow() || !emptied) {
                self.diff(&e.value, o, n, &here, out)?;
            } else if flow {
                out.push(Edit {
                    start: e.value.start,
                    end: e.value.end,
                    text: self.flow(n, None),
                });
            } else {
                let end = self.entry_end(entries, e, node)?;
                let col = self.col(e.key_start);
                let mut text = String::new();
                self.block_entry(&mut text, "", &self.text[e.key_start..e.key_end], n, col);
                out.push(Edit {
                    start: e.key_start,
                    end,
                    text,
                });
            }
        }
        // Runs of removed entries.
        let mut i = 0;
        while i < entries.len() {
            if !removed[i] {
                i += 1;
                continue;
            }
            let a = i;
            while i < entries.len() && removed[i] {
                i += 1;
            }
            let b = i - 1;
            let last = b + 1 == entries.len();
            if flow {
                let (start, end) = match (a, last) {
                    (0, true) => (node.start + 1, node.end - 1),
                    (_, false) => (entries[a].key_start, entries[b + 1].key_start),
                    (_, true) => (entries[a - 1].value.end, entries[b].value.end),
                };
                out.push(Edit {
                    start,
                    end,
                    text: String::new(),
                });
            } else if self.own_line(entries[a].key_start) {
                out.push(Edit {
                    start: line_start(self.text, entries[a].key_start),
                    end: self.entry_end(entries, &entries[b], node)?,
                    text: String::new(),
                });
            } else if !last {
                // `- key: ...` opening a list item: the next kept key moves up.
                out.push(Edit {
                    start: entries[a].key_start,
                    end: entries[b + 1].key_start,
                    text: String::new(),
                });
            } else {
                return Err(format!("{at}/{}", entries[a].key));
            }
        }
        // Added entries, before the first key (or after it, when it opens a
        // list item), in the parent's style.
        let added: Vec<(&String, &Value)> =
            new.iter().filter(|(k, _)| !old.contains_key(*k)).collect();
        if added.is_empty() {
            return Ok(());
        }
        if flow {
            let Some(first) = entries.first() else {
                let body: Vec<String> = added
                    .iter()
                    .map(|(k, v)| format!("{}: {}", self.flow_key(k), self.flow(v, None)))
                    .collect();
                out.push(Edit {
                    start: node.start + 1,
                    end: node.end - 1,
                    text: body.join(", "),
                });
                return Ok(());
            };
            let gap = &self.text[node.start + 1..first.key_start];
            let (sep, pretty) = match gap.rfind('\n') {
                Some(nl_at) if gap[nl_at + 1..].chars().all(|c| c == ' ') => {
                    let indent = gap.len() - nl_at - 1;
                    let unit = indent
                        .saturating_sub(indent_width(self.text, node.start))
                        .max(1);
                    (
                        format!("{}{}", self.nl, " ".repeat(indent)),
                        Some((indent, unit)),
                    )
                }
                _ => (" ".to_owned(), None),
            };
            let mut text = String::new();
            for (k, v) in added {
                text.push_str(&self.flow_key(k));
                text.push_str(": ");
                text.push_str(&self.flow(v, pretty));
                text.push(',');
                text.push_str(&sep);
            }
            out.push(Edit {
                start: first.key_start,
                end: first.key_start,
                text,
            });
            return Ok(());
        }
        let Some(first) = entries.first() else {
            return Err(at.to_owned());
        };
        let col = self.col(first.key_start);
        let pad = " ".repeat(col);
        let mut text = String::new();
        for (k, v) in added {
            self.block_entry(&mut text, &pad, &block_key(k), v, col);
        }
        let pos = if self.own_line(first.key_start) {
            line_start(self.text, first.key_start)
        } else {
            self.entry_end(entries, first, node)?
        };
        // At the end of a file without a final newline, start a line.
        if pos == self.text.len() && !self.text.ends_with('\n') {
            text.insert_str(0, self.nl);
        }
        out.push(Edit {
            start: pos,
            end: pos,
            text,
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn diff_seq(
        &self,
        node: &Node,
        flow: bool,
        items: &[Node],
        old: &[Value],
        new: &[Value],
        at: &str,
        out: &mut Vec<Edit>,
    ) -> Diff {
        if items.len() != old.len() {
            return Err(at.to_owned());
        }
        if old.len() == new.len() {
            for (i, ((item, o), n)) in items.iter().zip(old).zip(new).enumerate() {
                self.diff(item, o, n, &format!("{at}/{i}"), out)?;
            }
            return Ok(());
        }
        if new.len() > old.len() && new.starts_with(old) {
            let added = &new[old.len()..];
            if flow {
                let text = if items.is_empty() {
                    added
                        .iter()
                        .map(|v| self.flow(v, None))
                        .collect::<Vec<_>>()
                        .join(", ")
                } else {
                    let gap = &self.text[node.start + 1..items[0].start];
                    let sep = match gap.rfind('\n') {
                        Some(p) => format!("{}{}", self.nl, &gap[p + 1..]),
                        None => " ".to_owned(),
                    };
                    added
                        .iter()
                        .map(|v| format!(",{sep}{}", self.flow(v, None)))
                        .collect::<String>()
                };
                let pos = items.last().map_or(node.start + 1, |l| l.end);
                out.push(Edit {
                    start: pos,
                    end: pos,
                    text,
                });
                return Ok(());
            }
            let Some(last) = items.last() else {
                return Err(at.to_owned());
            };
            let dash = self.dash(last.start).ok_or_else(|| at.to_owned())?;
            let mut text = String::new();
            for v in added {
                self.block_item(&mut text, dash, v);
            }
            let pos = self.item_end(items, items.len() - 1, dash);
            if pos == self.text.len() && !self.text.ends_with('\n') {
                text.insert_str(0, self.nl);
            }
            out.push(Edit {
                start: pos,
                end: pos,
                text,
            });
            return Ok(());
        }
        // Items removed, the rest unchanged and in order.
        let mut keep = vec![false; old.len()];
        let mut j = 0;
        for (i, o) in old.iter().enumerate() {
            if j < new.len() && *o == new[j] {
                keep[i] = true;
                j += 1;
            }
        }
        if j != new.len() || new.is_empty() && !flow {
            return Err(at.to_owned());
        }
        let mut i = 0;
        while i < items.len() {
            if keep[i] {
                i += 1;
                continue;
            }
            let a = i;
            while i < items.len() && !keep[i] {
                i += 1;
            }
            let b = i - 1;
            let last = b + 1 == items.len();
            let (start, end) = if flow {
                match (a, last) {
                    (0, true) => (node.start + 1, node.end - 1),
                    (_, false) => (items[a].start, items[b + 1].start),
                    (_, true) => (items[a - 1].end, items[b].end),
                }
            } else {
                let dash = self
                    .dash(items[a].start)
                    .ok_or_else(|| format!("{at}/{a}"))?;
                (line_start(self.text, dash), self.item_end(items, b, dash))
            };
            out.push(Edit {
                start,
                end,
                text: String::new(),
            });
        }
        Ok(())
    }

    /// Column (0-based, in bytes) of a position.
    fn col(&self, pos: usize) -> usize {
        pos - line_start(self.text, pos)
    }

    /// Does the text before this position on its line hold only spaces?
    fn own_line(&self, pos: usize) -> bool {
        self.text[line_start(self.text, pos)..pos]
            .chars()
            .all(|c| c == ' ')
    }

    /// The `-` of the block list item starting at `pos`, when it has its own line.
    fn dash(&self, pos: usize) -> Option<usize> {
        let before = &self.text[line_start(self.text, pos)..pos];
        let trimmed = before.trim_end_matches(' ');
        let lead = trimmed.strip_suffix('-')?;
        lead.chars()
            .all(|c| c == ' ')
            .then(|| line_start(self.text, pos) + lead.len())
    }

    /// Where a block map entry's lines end (the start of the next line
    /// that is not part of it). Comments and blank lines just before the
    /// next key belong to that key.
    fn entry_end(&self, entries: &[Entry], e: &Entry, _map: &Node) -> Result<usize, String> {
        let col = self.col(e.key_start);
        let idx = entries
            .iter()
            .position(|x| std::ptr::eq(x, e))
            .ok_or_else(|| e.key.clone())?;
        if let Some(next) = entries.get(idx + 1) {
            let mut end = line_start(self.text, next.key_start);
            if !self.own_line(next.key_start) {
                return Err(next.key.clone());
            }
            end = self.back_over_trailing(end, line_start(self.text, e.key_start), col);
            return Ok(end);
        }
        let block_seq_value = matches!(e.value.kind, NodeKind::Seq { flow: false, .. });
        let end = self.extent(next_line(self.text, e.key_start), col, block_seq_value);
        Ok(self.back_over_trailing(end, line_start(self.text, e.key_start), col))
    }

    /// Where a block list item's lines end.
    fn item_end(&self, items: &[Node], idx: usize, dash: usize) -> usize {
        let col = self.col(dash);
        if let Some(next) = items.get(idx + 1)
            && let Some(next_dash) = self.dash(next.start)
        {
            let end = line_start(self.text, next_dash);
            return self.back_over_trailing(end, line_start(self.text, dash), col);
        }
        let end = self.extent(next_line(self.text, dash), col, false);
        self.back_over_trailing(end, line_start(self.text, dash), col)
    }

    /// From `pos`, the end of the lines indented deeper than `col` (or at
    /// `col` starting with `- `, when `dashes`).
    fn extent(&self, mut pos: usize, col: usize, dashes: bool) -> usize {
        while pos < self.text.len() {
            let next = next_line(self.text, pos);
            let line = self.text[pos..next].trim_end_matches(['\r', '\n']);
            let body = line.trim_start_matches(' ');
            let indent = line.len() - body.len();
            let deeper = indent > col
                || (dashes && indent == col && (body.starts_with("- ") || body == "-"));
            if !(body.is_empty() || deeper) {
                break;
            }
            pos = next;
        }
        pos
    }

    /// Moves `end` back over blank lines and comments at `col` or less
    /// (they belong to what follows), never before `floor`'s next line.
    fn back_over_trailing(&self, mut end: usize, floor: usize, col: usize) -> usize {
        let floor = next_line(self.text, floor);
        while end > floor {
            let prev = line_start(self.text, end - 1);
            let line = self.text[prev..end].trim_end_matches(['\r', '\n']);
            let body = line.trim_start_matches(' ');
            let indent = line.len() - body.len();
            if body.is_empty() || (body.starts_with('#') && indent <= col) {
                end = prev;
            } else {
                break;
            }
        }
        end
    }

    /// Writes `key: value` in block style: `first` before the key, nested
    /// lines indented from `col`.
    fn block_entry(&self, out: &mut String, first: &str, key: &str, v: &Value, col: usize) {
        let nl = self.nl;
        match v {
            Value::Object(m) if !m.is_empty() => {
                out.push_str(&format!("{first}{key}:{nl}"));
                let pad = " ".repeat(col + self.unit);
                for (k, x) in m {
                    self.block_entry(out, &pad, &block_key(k), x, col + self.unit);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                out.push_str(&format!("{first}{key}:{nl}"));
                for x in a {
                    self.block_item(out, col + self.seq_indent, x);
                }
            }
            v => out.push_str(&format!("{first}{key}: {}{nl}", block_scalar(v))),
        }
    }

    /// Writes `- item` in block style with its dash at `dash`.
    fn block_item(&self, out: &mut String, dash: usize, v: &Value) {
        let first = format!("{}- ", " ".repeat(dash));
        match v {
            Value::Object(m) if !m.is_empty() => {
                let pad = " ".repeat(dash + 2);
                for (i, (k, x)) in m.iter().enumerate() {
                    let lead = if i == 0 { &first } else { &pad };
                    self.block_entry(out, lead, &block_key(k), x, dash + 2);
                }
            }
            v => out.push_str(&format!("{first}{}{}", block_scalar(v), self.nl)),
        }
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

fn line_start(text: &str, pos: usize) -> usize {
    text[..pos].rfind('\n').map_or(0, |i| i + 1)
}

fn next_line(text: &str, pos: usize) -> usize {
    text[pos..].find('\n').map_or(text.len(), |i| pos + i + 1)
}

/// Spaces at the start of the line holding `pos`.
fn indent_width(text: &str, pos: usize) -> usize {
    let start = line_start(text, pos);
    text[start..].len() - text[start..].trim_start_matches(' ').len()
}

/// The file's block indentation: the step of nested maps, and whether list
/// items are indented under their key (`key:\n  - a`) or not (`key:\n- a`).
fn block_style(text: &str) -> (usize, usize) {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#')
        })
        .collect();
    let key_col = |l: &str| l.len() - l.trim_start_matches([' ', '-']).len();
    let (mut unit, mut seq) = (None, None);
    for pair in lines.windows(2) {
        let (a, b) = (pair[0].trim_end(), pair[1]);
        if !a.ends_with(':') {
            continue;
        }
        let (ka, ib) = (key_col(a), b.len() - b.trim_start().len());
        if b.trim_start().starts_with('-') {
            seq.get_or_insert(ib.saturating_sub(ka));
        } else if ib > ka {
            unit.get_or_insert(ib - ka);
        }
        if unit.is_some() && seq.is_some() {
            break;
        }
    }
    (unit.unwrap_or(2), seq.unwrap_or(0))
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A value in flow style: JSON, or YAML flow style (`{key: value}`, plain
/// scalars where safe) when `yaml`; pretty as `(indent, unit)` puts nested
/// entries on their own lines.
fn flow_value(v: &Value, pretty: Option<(usize, usize)>, nl: &str, yaml: bool) -> String {
    let inner = pretty.map(|(i, u)| (i + u, u));
    let (open, close, parts): (&str, &str, Vec<String>) = match v {
        Value::Object(m) if !m.is_empty() => (
            "{",
            "}",
            m.iter()
                .map(|(k, x)| {
                    let key = if yaml { block_key(k) } else { json_str(k) };
                    format!("{key}: {}", flow_value(x, inner, nl, yaml))
                })
                .collect(),
        ),
        Value::Array(a) if !a.is_empty() => (
            "[",
            "]",
            a.iter().map(|x| flow_value(x, inner, nl, yaml)).collect(),
        ),
        v if yaml => return block_scalar(v),
        v => return v.to_string(),
    };
    match pretty {
        Some((indent, unit)) => {
            let inner = " ".repeat(indent + unit);
            let body = parts.join(&format!(",{nl}{inner}"));
            format!("{open}{nl}{inner}{body}{nl}{}{close}", " ".repeat(indent))
        }
        None => format!("{open}{}{close}", parts.join(", ")),
    }
}

/// A scalar (or empty collection) in block style.
fn block_scalar(v: &Value) -> String {
    match v {
        Value::String(s) => block_key(s),
        Value::Null => "null".into(),
        Value::Object(m) if m.is_empty() => "{}".into(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
        Value::Object(_) | Value::Array(_) => flow_value(v, None, "\n", true),
    }
}

/// A plain scalar when safe, else a JSON (double-quoted) string.
fn block_key(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-' | '_'))
        && !s.starts_with(['-', '.'])
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | "null" | "~"
        )
        && s.parse::<f64>().is_err()
        && !s.starts_with(|c: char| c.is_ascii_digit());
    if plain { s.to_owned() } else { json_str(s) }
}

/// Fixes files in place; returns the number of operations applied and,
/// for each file or object not fixed, why.
///
/// Each file is edited the way a careful editor saves: a symbolic link is
/// followed and its target rewritten (the link stays); the new text goes to
/// a temporary file created exclusively (`O_EXCL`, a random name) in the
/// target's directory, given the original's mode, owner and group, synced,
/// and renamed over the target only if the target still holds the text the
/// fix was computed from. A byte-order mark and the line endings are kept.
/// A file that is read-only, has other hard links, cannot be given back to
/// its owner, or changed meanwhile is left alone, and said so.
///
/// # Errors
/// A temporary file cannot be created, written or renamed.
pub fn apply_to_files(
    files: &[std::path::PathBuf],
    policy: &Policy,
    cx: &Context<'_>,
) -> anyhow::Result<(usize, Vec<String>)> {
    let mut applied = 0;
    let mut skipped = Vec::new();
    for file in files {
        let Ok(target) = std::fs::canonicalize(file) else {
            continue;
        };
        let Ok(Some(original)) = read_regular(&target) else {
            continue;
        };
        let Ok(text) = source::decode(&original.bytes) else {
            continue;
        };
        let (fixed, outcome) = fix_text(text, policy, cx);
        let not_fixed = |why: String| format!("{}: {why}", file.display());
        if let Some(fixed) = fixed {
            let bom = &original.bytes[..original.bytes.len() - text.len()];
            match replace(&target, &original, bom, &fixed)? {
                Replaced::Yes => applied += outcome.applied,
                Replaced::No(why) => {
                    skipped.push(not_fixed(why));
                    continue;
                }
            }
        }
        skipped.extend(outcome.skipped.into_iter().map(not_fixed));
    }
    Ok((applied, skipped))
}

/// A regular file's bytes and what identifies it.
struct Original {
    bytes: Vec<u8>,
    meta: std::fs::Metadata,
}

/// The file's bytes (at most [`source::MAX_FILE_BYTES`]), or `None` when it
/// is not a regular file or is over the limit.
fn read_regular(path: &Path) -> std::io::Result<Option<Original>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() > source::MAX_FILE_BYTES as u64 {
        return Ok(None);
    }
    let limit = source::MAX_FILE_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    if bytes.len() as u64 >= limit {
        return Ok(None);
    }
    Ok(Some(Original { bytes, meta }))
}

enum Replaced {
    Yes,
    /// Left alone, and why.
    No(String),
}

/// Replaces `target` (no symbolic link) with `bom` + `text`, keeping its
/// mode, owner and group, if it still holds `original`.
fn replace(target: &Path, original: &Original, bom: &[u8], text: &str) -> anyhow::Result<Replaced> {
    use std::io::Write as _;
    use std::os::unix::fs::MetadataExt as _;

    use anyhow::Context as _;
    let meta = &original.meta;
    if meta.nlink() > 1 {
        return Ok(Replaced::No(format!(
            "has {} hard links, which a new file would split apart; not fixed: fix it by hand",
            meta.nlink()
        )));
    }
    // Writable, as an editor asks before saving: renaming over a file
    // would bypass its mode. A mode with no write bit is read-only by
    // intent, also for root, whom the access check lets through.
    if meta.mode() & 0o222 == 0 {
        return Ok(Replaced::No(format!(
            "is read-only (mode {:o}); not fixed: make it writable to fix it",
            meta.mode() & 0o7777
        )));
    }
    if let Err(e) = std::fs::OpenOptions::new().write(true).open(target) {
        return Ok(Replaced::No(format!(
            "cannot be written ({e}); not fixed: make it writable to fix it"
        )));
    }
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    // Created with O_EXCL and a random name, mode 0600 until it is complete.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".winadmit-fix")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    let tmp_name = tmp.path().display().to_string();
    if let Err(e) = std::os::unix::fs::fchown(tmp.as_file(), Some(meta.uid()), Some(meta.gid())) {
        return Ok(Replaced::No(format!(
            "its owner and group ({}:{}) cannot be kept ({e}); not fixed: run lint --fix as its owner",
            meta.uid(),
            meta.gid()
        )));
    }
    tmp.as_file()
        .set_permissions(meta.permissions())
        .with_context(|| format!("setting the mode of {tmp_name}"))?;
    tmp.write_all(bom)
        .and_then(|()| tmp.write_all(text.as_bytes()))
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {tmp_name}"))?;
    // The fix was computed from `original`: a file changed since (an editor
    // saving, a formatter, a checkout) keeps its new text.
    let unchanged = std::fs::symlink_metadata(target)
        .is_ok_and(|now| now.is_file() && now.dev() == meta.dev() && now.ino() == meta.ino())
        && read_regular(target)
            .ok()
            .flatten()
            .is_some_and(|now| now.bytes == original.bytes);
    if !unchanged {
        return Ok(Replaced::No(
            "changed while it was being fixed; left as it is now: run lint --fix again".to_owned(),
        ));
    }
    tmp.persist(target)
        .map_err(|e| e.error)
        .with_context(|| format!("replacing {}", target.display()))?;
    Ok(Replaced::Yes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window between reading a file and renaming its fixed text over
    /// it, made deterministic: the file changes after it was read.
    #[test]
    fn a_file_changed_after_it_was_read_keeps_its_new_text() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("web.yaml");
        std::fs::write(&file, "kind: Pod\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let original = read_regular(&file).unwrap().unwrap();
        std::fs::write(&file, "kind: Pod # edited meanwhile\n").unwrap();
        let Replaced::No(why) = replace(&file, &original, b"", "kind: Fixed\n").unwrap() else {
            panic!("replaced a file that changed meanwhile");
        };
        assert!(why.contains("changed while it was being fixed"), "{why}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "kind: Pod # edited meanwhile\n"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "the temporary file is removed");

        // Unchanged: replaced, with its mode.
        let original = read_regular(&file).unwrap().unwrap();
        assert!(matches!(
            replace(&file, &original, b"\xEF\xBB\xBF", "kind: Fixed\n").unwrap(),
            Replaced::Yes
        ));
        assert_eq!(std::fs::read(&file).unwrap(), b"\xEF\xBB\xBFkind: Fixed\n");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640);
    }

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
    fn crlf_is_kept_and_flow_style_is_fixed_in_place() {
        let text = "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\nspec:\r\n  nodeSelector: {kubernetes.io/os: windows}\r\n  containers:\r\n  - name: c\r\n    image: x\r\n    securityContext: {runAsUser: 1000, runAsNonRoot: true}\r\n";
        let (fixed, outcome) = fix(text);
        assert!(outcome.skipped.is_empty(), "{outcome:?}");
        assert_eq!(
            fixed.unwrap(),
            text.replace(
                "{runAsUser: 1000, runAsNonRoot: true}",
                "{runAsNonRoot: true}"
            )
        );
    }

    #[test]
    fn a_removal_that_empties_its_parent_removes_the_parent() {
        let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  nodeSelector:
    kubernetes.io/os: windows
  securityContext:
    # ignored on Windows
    runAsUser: 1000
  containers:
  - securityContext:
      seLinuxOptions:
        level: s0
    name: c   # keep me
    image: x
  volumes:
  - name: scratch
    emptyDir:
      medium: Memory
";
        let mut policy = Policy::default_policy();
        policy.mutation.empty_dir_off_memory = true;
        let (fixed, outcome) = fix_text(text, &policy, &Context::default());
        assert!(outcome.skipped.is_empty(), "{outcome:?}");
        assert_eq!(
            fixed.unwrap(),
            "\
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  nodeSelector:
    kubernetes.io/os: windows
  containers:
  - name: c   # keep me
    image: x
  volumes:
  - name: scratch
    emptyDir: {}
",
            "emptyDir: {{}} stays (it chooses the volume type)"
        );
    }

    #[test]
    fn yaml_flow_maps_get_yaml_flow_entries() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {os: {name: windows}, containers: [{name: c, image: x, securityContext: {capabilities: {drop: [ALL]}, runAsNonRoot: true}}]}\n";
        let (fixed, outcome) = fix(text);
        assert!(outcome.skipped.is_empty(), "{outcome:?}");
        assert_eq!(
            fixed.unwrap(),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeSelector: {kubernetes.io/os: windows}, os: {name: windows}, containers: [{name: c, image: x, securityContext: {runAsNonRoot: true}}]}\n"
        );
    }

    #[test]
    fn an_alias_whose_value_changes_is_written_out_and_the_anchor_stays() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nx-sc: &sc\n  runAsUser: 1000\n  runAsNonRoot: true\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: x\n    securityContext: *sc\n";
        let (fixed, outcome) = fix(text);
        assert!(outcome.skipped.is_empty(), "{outcome:?}");
        assert_eq!(
            fixed.unwrap(),
            text.replace(
                "    securityContext: *sc\n",
                "    securityContext:\n      runAsNonRoot: true\n"
            )
        );
    }

    const JSON_POD: &str = r#"{
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {
        "os": {"name": "windows"},
        "containers": [
            {
                "name": "c",
                "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022",
                "securityContext": {
                    "runAsNonRoot": true,
                    "capabilities": {"drop": ["ALL"]}
                }
            }
        ]
    }
}
"#;

    #[test]
    fn json_files_are_fixed_keeping_their_indentation() {
        let (fixed, outcome) = fix(JSON_POD);
        assert!(outcome.skipped.is_empty(), "{outcome:?}");
        let fixed = fixed.expect("a fix");
        assert!(outcome.applied >= 2, "{outcome:?}");
        assert!(
            fixed.contains(
                "    \"spec\": {\n        \"nodeSelector\": {\n            \"kubernetes.io/os\": \"windows\"\n        },\n        \"os\""
            ),
            "{fixed}"
        );
        assert!(
            fixed.contains("\"securityContext\": {\n                    \"runAsNonRoot\": true\n                }"),
            "{fixed}"
        );
        serde_json::from_str::<Value>(&fixed).expect("still JSON");
        assert_eq!(fix(&fixed).0, None, "fixing twice changes nothing");
        // One line, two spaces: the same.
        let compact =
            serde_json::to_string(&serde_json::from_str::<Value>(JSON_POD).unwrap()).unwrap();
        let fixed = fix(&compact).0.expect("a fix");
        serde_json::from_str::<Value>(&fixed).expect("still JSON");
        assert_eq!(fix(&fixed).0, None);
    }
}
