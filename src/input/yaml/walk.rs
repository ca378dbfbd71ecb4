//! The one walk over the parser's events: where each node sits (a map key,
//! a map value, a list item, a document's root) and its JSON Pointer.
//!
//! Building values ([`super::values`]), recording positions
//! ([`super::Positions`]) and `lint --fix`'s tree of byte ranges each
//! implement [`Visit`]; [`super::load_each_visiting`] runs them together,
//! in one pass over the events.

use std::fmt::Write as _;

use serde_saphyr::granit_parser::{Event, ScanError, Span, StructureStyle};

use super::YamlError;

/// Where a node sits in its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A document's top node; its pointer is empty.
    Root,
    /// A list item; its pointer ends in its index.
    Item,
    /// A map key that is a scalar; its pointer is its entry's.
    Key,
    /// A map key that is not a scalar (an alias, or a collection, which
    /// readers of Kubernetes manifests refuse); its pointer ends in `/`.
    OtherKey,
    /// A map value; its pointer is its key's.
    Value,
}

/// What is done with each event of the walk.
pub trait Visit<'t> {
    /// Every node (scalar, alias, start of a list or map) with its place
    /// and JSON Pointer (keys escaped as RFC 6901 says), and every end of
    /// a list or map (with the pointer of the collection and
    /// [`Place::Value`]).
    ///
    /// # Errors
    /// The visitor refuses what it was given: the walk stops there.
    fn node(
        &mut self,
        place: Place,
        pointer: &str,
        event: &Event<'t>,
        span: &Span,
    ) -> Result<(), YamlError>;

    /// A document begins.
    fn document_start(&mut self) {}

    /// Document `index` (0-based) ends.
    fn document_end(&mut self, index: usize) {
        let _ = index;
    }

    /// The text is read again from the start (`why`: what the first
    /// reading stopped at); what was visited before is to be forgotten.
    fn restart(&mut self, why: &str) {
        let _ = why;
    }
}

/// A collection being walked.
enum Open {
    Seq {
        next: usize,
        /// Length of the pointer of the collection itself.
        len: usize,
    },
    Map {
        expecting_key: bool,
        len: usize,
    },
}

/// Walks the events, telling `visit` about each node. Stops at the first
/// error of the parser or of the visitor.
///
/// # Errors
/// The parser's error (with its position) or the visitor's.
pub fn walk<'t>(
    events: impl Iterator<Item = Result<(Event<'t>, Span), ScanError>>,
    visit: &mut impl Visit<'t>,
) -> Result<(), YamlError> {
    let mut stack: Vec<Open> = Vec::new();
    // Where each collection of `stack` starts (line, column), and its
    // bracket if it is a flow collection.
    let mut opened: Vec<(u64, u64, Option<char>)> = Vec::new();
    let mut pointer = String::new();
    let mut document = 0;
    for item in events {
        // Matched, not mapped: the event is not moved into a new `Result`.
        let (event, span) = match item {
            Ok(pair) => pair,
            Err(e) => return Err(parse_error(&e, opened.last().copied())),
        };
        match &event {
            Event::DocumentStart(..) => {
                stack.clear();
                opened.clear();
                pointer.clear();
                visit.document_start();
                continue;
            }
            Event::DocumentEnd => {
                visit.document_end(document);
                document += 1;
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(Open::Seq { len, .. } | Open::Map { len, .. }) = stack.pop() {
                    pointer.truncate(len);
                }
                opened.pop();
                visit.node(Place::Value, &pointer, &event, &span)?;
                continue;
            }
            Event::Scalar(..) | Event::Alias(_) | Event::SequenceStart(..) => {}
            Event::MappingStart(..) => {}
            _ => continue,
        }
        let place = place_of(stack.last_mut(), &event, &mut pointer);
        visit.node(place, &pointer, &event, &span)?;
        let (line, column) = (span.start.line() as u64, span.start.col() as u64 + 1);
        let flow = |style: &StructureStyle, bracket: char| {
            matches!(style, StructureStyle::Flow).then_some(bracket)
        };
        match event {
            Event::SequenceStart(style, ..) => {
                stack.push(Open::Seq {
                    next: 0,
                    len: pointer.len(),
                });
                opened.push((line, column, flow(&style, '[')));
            }
            Event::MappingStart(style, ..) => {
                stack.push(Open::Map {
                    expecting_key: true,
                    len: pointer.len(),
                });
                opened.push((line, column, flow(&style, '{')));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The parser's error at its position; inside a flow collection opened
/// on an earlier line (`{a: b` or `[a, b` and more lines: most often a
/// bracket never closed), at the bracket that opened it, naming where the
/// parser stopped.
fn parse_error(e: &ScanError, innermost: Option<(u64, u64, Option<char>)>) -> YamlError {
    let (line, column) = (e.marker().line() as u64, e.marker().col() as u64 + 1);
    let message = e.info();
    match innermost {
        Some((l, c, Some(bracket))) if l < line => YamlError {
            line: l,
            column: c,
            message: format!(
                "the '{bracket}' here is not closed before line {line}, column {column}: {message}"
            ),
        },
        _ => YamlError {
            line,
            column,
            message: message.to_owned(),
        },
    }
}

/// The place of a node under `parent`, with `pointer` set to its own.
#[inline]
fn place_of(parent: Option<&mut Open>, event: &Event<'_>, pointer: &mut String) -> Place {
    match parent {
        None => {
            pointer.clear();
            Place::Root
        }
        Some(Open::Seq { next, len }) => {
            pointer.truncate(*len);
            pointer.push('/');
            let _ = write!(pointer, "{next}");
            *next += 1;
            Place::Item
        }
        Some(Open::Map {
            expecting_key: expecting @ true,
            len,
        }) => {
            *expecting = false;
            pointer.truncate(*len);
            pointer.push('/');
            let Event::Scalar(key, ..) = event else {
                return Place::OtherKey;
            };
            if key.contains(['~', '/']) {
                pointer.push_str(&crate::decision::path::escape_pointer(key));
            } else {
                pointer.push_str(key);
            }
            Place::Key
        }
        // The value of the current key: the pointer is already its key's.
        Some(Open::Map { expecting_key, .. }) => {
            *expecting_key = true;
            Place::Value
        }
    }
}
