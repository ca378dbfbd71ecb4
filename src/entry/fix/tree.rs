//! The text's node tree with byte positions, for editing in place: built
//! in the same walk over the parser's events as the objects' values.

use serde_saphyr::granit_parser::{Event, ScalarStyle, Span, StructureStyle};

use crate::input::yaml::{Place, Visit, YamlError};

/// A YAML node with its byte positions.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) start: usize,
    /// Exact for scalars, aliases and flow collections; not used for block
    /// collections, whose extent is found from indentation.
    pub(super) end: usize,
    pub(super) kind: NodeKind,
}

#[derive(Debug)]
pub(super) enum NodeKind {
    Scalar { block: bool },
    Alias,
    Map { flow: bool, entries: Vec<Entry> },
    Seq { flow: bool, items: Vec<Node> },
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) key: String,
    pub(super) key_start: usize,
    pub(super) key_end: usize,
    pub(super) value: Node,
}

impl Node {
    /// The node a JSON Pointer names.
    pub(super) fn at(&self, pointer: &str) -> Option<&Node> {
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

    pub(super) fn is_flow(&self) -> bool {
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

/// Builds every YAML document's node tree as it visits the events; the
/// first thing it cannot represent is kept as the reason the text cannot be
/// edited, and the walk goes on (the values are still wanted).
pub(super) struct Tree<'t> {
    text: &'t str,
    roots: Vec<Option<Node>>,
    stack: Vec<Frame>,
    root: Option<Node>,
    error: Option<String>,
}

impl<'t> Tree<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        Self {
            text,
            roots: Vec::new(),
            stack: Vec::new(),
            root: None,
            error: None,
        }
    }

    /// Every YAML document's node tree (`None` for an empty document).
    pub(super) fn finish(self) -> Result<Vec<Option<Node>>, String> {
        match self.error {
            Some(why) => Err(why),
            None => Ok(self.roots),
        }
    }

    fn step(&mut self, event: &Event<'_>, span: &Span) -> Result<(), String> {
        let (start, end) = byte_range(span)?;
        let node = match event {
            Event::Scalar(value, style, ..) => {
                if let Some(Frame::Map {
                    key: key @ None, ..
                }) = self.stack.last_mut()
                {
                    *key = Some((value.to_string(), start, end));
                    return Ok(());
                }
                Node {
                    start,
                    end,
                    kind: NodeKind::Scalar {
                        block: matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
                            || self.text[start..end].contains('\n'),
                    },
                }
            }
            Event::Alias(_) => Node {
                start,
                end,
                kind: NodeKind::Alias,
            },
            Event::MappingStart(style, ..) => {
                self.stack.push(Frame::Map {
                    flow: matches!(style, StructureStyle::Flow),
                    start,
                    entries: Vec::new(),
                    key: None,
                });
                return Ok(());
            }
            Event::SequenceStart(style, ..) => {
                self.stack.push(Frame::Seq {
                    flow: matches!(style, StructureStyle::Flow),
                    start,
                    items: Vec::new(),
                });
                return Ok(());
            }
            Event::MappingEnd => match self.stack.pop() {
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
            Event::SequenceEnd => match self.stack.pop() {
                Some(Frame::Seq { flow, start, items }) => Node {
                    start,
                    end,
                    kind: NodeKind::Seq { flow, items },
                },
                _ => return Err("unbalanced sequence".into()),
            },
            _ => return Ok(()),
        };
        self.place(node)
    }

    /// Puts a complete node in its parent.
    fn place(&mut self, node: Node) -> Result<(), String> {
        match self.stack.last_mut() {
            None => self.root = Some(node),
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
        Ok(())
    }
}

impl<'e> Visit<'e> for Tree<'_> {
    fn node(
        &mut self,
        _place: Place,
        _pointer: &str,
        event: &Event<'e>,
        span: &Span,
    ) -> Result<(), YamlError> {
        if self.error.is_none()
            && let Err(why) = self.step(event, span)
        {
            self.error = Some(why);
        }
        Ok(())
    }

    fn document_start(&mut self) {
        self.root = None;
    }

    fn document_end(&mut self, _index: usize) {
        self.roots.push(self.root.take());
    }

    /// The text had to be changed to be read (tabs made spaces): it is
    /// not edited.
    fn restart(&mut self, why: &str) {
        self.error
            .get_or_insert_with(|| format!("cannot be read for editing: {why}"));
    }
}
