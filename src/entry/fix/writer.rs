//! The difference between an object and its fixed form, as text edits at
//! the positions of the text's node tree.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::Edit;
use super::style::{
    block_key, block_scalar, block_style, flow_value, indent_width, is_scalar, json_str, line_start,
};
use super::tree::{Entry, Node, NodeKind};

/// Writes the difference between two values as text edits.
pub(super) struct Writer<'t> {
    pub(super) text: &'t str,
    nl: &'static str,
    /// Indentation step of nested block maps.
    unit: usize,
    /// Extra indentation of block list items under their key (0 or `unit`).
    seq_indent: usize,
    /// The file is JSON: flow values are written as JSON, not YAML.
    json: bool,
}

/// `Err` holds the JSON Pointer of what cannot be changed in place.
type Diff = Result<(), String>;

/// A map (its entries) or list (its items) being changed, at `at`.
struct Collection<'a, C> {
    node: &'a Node,
    flow: bool,
    children: &'a [C],
    at: &'a str,
}

/// The runs of `true` in `flags`, as (first, last) indices.
fn runs(flags: &[bool]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        if !flags[i] {
            i += 1;
            continue;
        }
        let a = i;
        while i < flags.len() && flags[i] {
            i += 1;
        }
        out.push((a, i - 1));
    }
    out
}

impl<'t> Writer<'t> {
    pub(super) fn new(text: &'t str) -> Self {
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

    pub(super) fn diff(
        &self,
        node: &Node,
        old: &Value,
        new: &Value,
        at: &str,
        out: &mut Vec<Edit>,
    ) -> Diff {
        if old == new {
            return Ok(());
        }
        match (&node.kind, old, new) {
            (NodeKind::Map { flow, entries }, Value::Object(o), Value::Object(n)) => {
                let map = Collection {
                    node,
                    flow: *flow,
                    children: entries,
                    at,
                };
                self.diff_map(&map, o, n, out)
            }
            (NodeKind::Seq { flow, items }, Value::Array(o), Value::Array(n)) => {
                let seq = Collection {
                    node,
                    flow: *flow,
                    children: items,
                    at,
                };
                self.diff_seq(&seq, o, n, out)
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

    fn diff_map(
        &self,
        map: &Collection<'_, Entry>,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        out: &mut Vec<Edit>,
    ) -> Diff {
        let keys: BTreeSet<&str> = map.children.iter().map(|e| e.key.as_str()).collect();
        if keys.len() != map.children.len() || keys.len() != old.len() {
            // Duplicate keys or merge keys: the text is not the value.
            return Err(map.at.to_owned());
        }
        let removed: Vec<bool> = map
            .children
            .iter()
            .map(|e| !new.contains_key(&e.key))
            .collect();
        for (e, gone) in map.children.iter().zip(&removed) {
            if !*gone {
                self.diff_entry(map, e, &old[&e.key], &new[&e.key], out)?;
            }
        }
        for (a, b) in runs(&removed) {
            self.remove_entries(map, a, b, out)?;
        }
        // Added entries, before the first key (or after it, when it opens a
        // list item), in the parent's style.
        let added: Vec<(&String, &Value)> =
            new.iter().filter(|(k, _)| !old.contains_key(*k)).collect();
        if added.is_empty() {
            Ok(())
        } else if map.flow {
            self.add_flow_entries(map, &added, out);
            Ok(())
        } else {
            self.add_block_entries(map, &added, out)
        }
    }

    /// A kept entry whose value changes: changed in place where its shape
    /// stays, else written again.
    fn diff_entry(
        &self,
        map: &Collection<'_, Entry>,
        e: &Entry,
        o: &Value,
        n: &Value,
        out: &mut Vec<Edit>,
    ) -> Diff {
        if o == n {
            return Ok(());
        }
        let here = format!(
            "{}/{}",
            map.at,
            crate::decision::path::escape_pointer(&e.key)
        );
        let emptied = matches!(n, Value::Object(m) if m.is_empty())
            || matches!(n, Value::Array(a) if a.is_empty());
        let same_shape = matches!(
            (&e.value.kind, o, n),
            (NodeKind::Map { .. }, Value::Object(_), Value::Object(_))
                | (NodeKind::Seq { .. }, Value::Array(_), Value::Array(_))
        ) || (matches!(e.value.kind, NodeKind::Scalar { block: false })
            && is_scalar(n));
        if same_shape && (map.flow || e.value.is_flow() || !emptied) {
            return self.diff(&e.value, o, n, &here, out);
        }
        if map.flow {
            out.push(Edit {
                start: e.value.start,
                end: e.value.end,
                text: self.flow(n, None),
            });
            return Ok(());
        }
        let end = self.entry_end(map.children, e)?;
        let col = self.col(e.key_start);
        let mut text = String::new();
        self.block_entry(&mut text, "", &self.text[e.key_start..e.key_end], n, col);
        out.push(Edit {
            start: e.key_start,
            end,
            text,
        });
        Ok(())
    }

    /// Removes the entries `a..=b`.
    fn remove_entries(
        &self,
        map: &Collection<'_, Entry>,
        a: usize,
        b: usize,
        out: &mut Vec<Edit>,
    ) -> Diff {
        let (node, entries) = (map.node, map.children);
        let last = b + 1 == entries.len();
        let (start, end) = if map.flow {
            match (a, last) {
                (0, true) => (node.start + 1, node.end - 1),
                (_, false) => (entries[a].key_start, entries[b + 1].key_start),
                (_, true) => (entries[a - 1].value.end, entries[b].value.end),
            }
        } else if self.own_line(entries[a].key_start) {
            (
                line_start(self.text, entries[a].key_start),
                self.entry_end(entries, &entries[b])?,
            )
        } else if !last {
            // `- key: ...` opening a list item: the next kept key moves up.
            (entries[a].key_start, entries[b + 1].key_start)
        } else {
            return Err(format!("{}/{}", map.at, entries[a].key));
        };
        out.push(Edit {
            start,
            end,
            text: String::new(),
        });
        Ok(())
    }

    /// New entries of a flow map, before its first key, one a line when
    /// its entries are.
    fn add_flow_entries(
        &self,
        map: &Collection<'_, Entry>,
        added: &[(&String, &Value)],
        out: &mut Vec<Edit>,
    ) {
        let node = map.node;
        let Some(first) = map.children.first() else {
            let body: Vec<String> = added
                .iter()
                .map(|(k, v)| format!("{}: {}", self.flow_key(k), self.flow(v, None)))
                .collect();
            out.push(Edit {
                start: node.start + 1,
                end: node.end - 1,
                text: body.join(", "),
            });
            return;
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
    }

    /// New entries of a block map, at its first key's column: before it,
    /// or after it when it opens a list item (`- key:`).
    fn add_block_entries(
        &self,
        map: &Collection<'_, Entry>,
        added: &[(&String, &Value)],
        out: &mut Vec<Edit>,
    ) -> Diff {
        let Some(first) = map.children.first() else {
            return Err(map.at.to_owned());
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
            self.entry_end(map.children, first)?
        };
        self.insert_at_end_of_lines(pos, text, out);
        Ok(())
    }

    /// Inserts lines at `pos`; at the end of a file without a final
    /// newline, a line is started first.
    fn insert_at_end_of_lines(&self, pos: usize, mut text: String, out: &mut Vec<Edit>) {
        if pos == self.text.len() && !self.text.ends_with('\n') {
            text.insert_str(0, self.nl);
        }
        out.push(Edit {
            start: pos,
            end: pos,
            text,
        });
    }

    fn diff_seq(
        &self,
        seq: &Collection<'_, Node>,
        old: &[Value],
        new: &[Value],
        out: &mut Vec<Edit>,
    ) -> Diff {
        let items = seq.children;
        if items.len() != old.len() {
            return Err(seq.at.to_owned());
        }
        if old.len() == new.len() {
            for (i, ((item, o), n)) in items.iter().zip(old).zip(new).enumerate() {
                self.diff(item, o, n, &format!("{}/{i}", seq.at), out)?;
            }
            return Ok(());
        }
        if new.len() > old.len() && new.starts_with(old) {
            let added = &new[old.len()..];
            if seq.flow {
                self.append_flow_items(seq, added, out);
                return Ok(());
            }
            return self.append_block_items(seq, added, out);
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
        if j != new.len() || new.is_empty() && !seq.flow {
            return Err(seq.at.to_owned());
        }
        let removed: Vec<bool> = keep.iter().map(|k| !k).collect();
        for (a, b) in runs(&removed) {
            self.remove_items(seq, a, b, out)?;
        }
        Ok(())
    }

    /// New items at the end of a flow list, spaced as its first item.
    fn append_flow_items(&self, seq: &Collection<'_, Node>, added: &[Value], out: &mut Vec<Edit>) {
        let (node, items) = (seq.node, seq.children);
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
    }

    /// New items after the last item of a block list, at its dash.
    fn append_block_items(
        &self,
        seq: &Collection<'_, Node>,
        added: &[Value],
        out: &mut Vec<Edit>,
    ) -> Diff {
        let items = seq.children;
        let Some(last) = items.last() else {
            return Err(seq.at.to_owned());
        };
        let dash = self.dash(last.start).ok_or_else(|| seq.at.to_owned())?;
        let mut text = String::new();
        for v in added {
            self.block_item(&mut text, dash, v);
        }
        let pos = self.item_end(items, items.len() - 1, dash);
        self.insert_at_end_of_lines(pos, text, out);
        Ok(())
    }

    /// Removes the items `a..=b`.
    fn remove_items(
        &self,
        seq: &Collection<'_, Node>,
        a: usize,
        b: usize,
        out: &mut Vec<Edit>,
    ) -> Diff {
        let (node, items) = (seq.node, seq.children);
        let last = b + 1 == items.len();
        let (start, end) = if seq.flow {
            match (a, last) {
                (0, true) => (node.start + 1, node.end - 1),
                (_, false) => (items[a].start, items[b + 1].start),
                (_, true) => (items[a - 1].end, items[b].end),
            }
        } else {
            let dash = self
                .dash(items[a].start)
                .ok_or_else(|| format!("{}/{a}", seq.at))?;
            (line_start(self.text, dash), self.item_end(items, b, dash))
        };
        out.push(Edit {
            start,
            end,
            text: String::new(),
        });
        Ok(())
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
