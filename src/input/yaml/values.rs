//! Building `serde_json::Value`s from the walk, within the parser's budgets.

use std::collections::HashMap;

use serde_json::{Map, Value};
use serde_saphyr::granit_parser::{Event, Span};

use super::walk::{Place, Visit};
use super::{DuplicateKey, ParseLimits, YamlError, error_at, scalar};

/// A collection being built.
enum Frame {
    Seq {
        items: Vec<Value>,
        anchor: usize,
    },
    Map {
        map: Map<String, Value>,
        key: Option<String>,
        /// Where the current key starts (line, column).
        key_at: (u64, u64),
        anchor: usize,
    },
}

/// Builds each document's value ([`Values::take`] at its end), counting
/// nodes (alias copies included) and nesting against [`ParseLimits`].
pub struct Values {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Value>,
    root: Option<Value>,
    nodes: usize,
    limits: ParseLimits,
    document: usize,
    pub duplicates: Vec<DuplicateKey>,
}

impl Values {
    pub fn new(limits: ParseLimits) -> Self {
        Self {
            stack: Vec::new(),
            anchors: HashMap::new(),
            root: None,
            nodes: 0,
            limits,
            document: 0,
            duplicates: Vec::new(),
        }
    }

    /// The value of the document just ended (`Value::Null` when empty).
    pub fn take(&mut self) -> Value {
        self.root.take().unwrap_or(Value::Null)
    }

    fn count(&mut self, n: usize, span: &Span) -> Result<(), YamlError> {
        self.nodes += n;
        if self.nodes > self.limits.max_nodes {
            return Err(error_at(
                span,
                format!(
                    "exceeds the parser's safety budget of {} nodes (alias expansion or size)",
                    self.limits.max_nodes
                ),
            ));
        }
        Ok(())
    }

    fn open(&mut self, span: &Span) -> Result<(), YamlError> {
        self.count(1, span)?;
        if self.stack.len() >= self.limits.max_depth {
            return Err(error_at(
                span,
                format!(
                    "exceeds the parser's safety budget: nesting deeper than {}",
                    self.limits.max_depth
                ),
            ));
        }
        if let Some(Frame::Map { key: None, .. }) = self.stack.last() {
            return Err(error_at(span, "complex mapping keys are not supported"));
        }
        Ok(())
    }

    fn insert(&mut self, value: Value, anchor: usize, span: &Span) -> Result<(), YamlError> {
        if anchor != 0 {
            self.anchors.insert(anchor, value.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map {
                key: key @ None,
                key_at,
                ..
            }) => {
                *key_at = (span.start.line() as u64, span.start.col() as u64 + 1);
                // An alias or collection used as a key.
                match value {
                    Value::String(s) => *key = Some(s),
                    Value::Object(_) | Value::Array(_) => {
                        return Err(error_at(span, "complex mapping keys are not supported"));
                    }
                    other => *key = Some(other.to_string()),
                }
            }
            Some(Frame::Map {
                map, key, key_at, ..
            }) => {
                let k = key.take().unwrap_or_default();
                if k == "<<" {
                    merge(map, value);
                } else if let Some(duplicate) = set(map, k, value) {
                    // Duplicate keys: the last wins, as in kubectl; noted.
                    self.duplicates.push(DuplicateKey {
                        document: self.document,
                        line: key_at.0,
                        column: key_at.1,
                        key: duplicate,
                    });
                }
            }
        }
        Ok(())
    }
}

impl<'t> Visit<'t> for Values {
    fn node(
        &mut self,
        place: Place,
        _pointer: &str,
        event: &Event<'t>,
        span: &Span,
    ) -> Result<(), YamlError> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                self.count(1, span)?;
                if place == Place::Key {
                    // Keys are strings whatever they look like (`9000:`, `true:`).
                    let Some(Frame::Map { key, key_at, .. }) = self.stack.last_mut() else {
                        unreachable!("a key is in a map");
                    };
                    *key_at = (span.start.line() as u64, span.start.col() as u64 + 1);
                    *key = Some(text.to_string());
                    if *anchor != 0 {
                        self.anchors
                            .insert(*anchor, Value::String(text.to_string()));
                    }
                    return Ok(());
                }
                let value = scalar::resolve(text, *style, tag.as_deref());
                self.insert(value, *anchor, span)
            }
            Event::SequenceStart(_, anchor, _) => {
                self.open(span)?;
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    anchor: *anchor,
                });
                Ok(())
            }
            Event::MappingStart(_, anchor, _) => {
                self.open(span)?;
                self.stack.push(Frame::Map {
                    map: Map::new(),
                    key: None,
                    key_at: (0, 0),
                    anchor: *anchor,
                });
                Ok(())
            }
            Event::SequenceEnd => match self.stack.pop() {
                Some(Frame::Seq { items, anchor }) => {
                    self.insert(Value::Array(items), anchor, span)
                }
                _ => Err(error_at(span, "unbalanced sequence end")),
            },
            Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Map { map, anchor, .. }) => {
                    self.insert(Value::Object(map), anchor, span)
                }
                _ => Err(error_at(span, "unbalanced mapping end")),
            },
            Event::Alias(id) => {
                let Some(value) = self.anchors.get(id).cloned() else {
                    return Err(error_at(span, "alias to an unknown anchor"));
                };
                self.count(size_of(&value), span)?;
                self.insert(value, 0, span)
            }
            _ => Ok(()),
        }
    }

    fn document_start(&mut self) {
        self.root = None;
        self.anchors.clear();
    }

    fn document_end(&mut self, index: usize) {
        self.document = index + 1;
    }
}

/// Sets `map[k]`; returns the key when it was already there.
fn set(map: &mut Map<String, Value>, k: String, value: Value) -> Option<String> {
    match map.entry(k) {
        serde_json::map::Entry::Vacant(e) => {
            e.insert(value);
            None
        }
        serde_json::map::Entry::Occupied(mut e) => {
            e.insert(value);
            Some(e.key().clone())
        }
    }
}

/// `<<: *base` (or a list of them): entries not already present are added.
fn merge(map: &mut Map<String, Value>, value: Value) {
    match value {
        Value::Object(from) => {
            for (k, v) in from {
                map.entry(k).or_insert(v);
            }
        }
        Value::Array(items) => {
            for item in items {
                merge(map, item);
            }
        }
        other => {
            map.insert("<<".into(), other);
        }
    }
}

fn size_of(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(size_of).sum::<usize>(),
        Value::Object(m) => 1 + m.values().map(|v| 1 + size_of(v)).sum::<usize>(),
        _ => 1,
    }
}
