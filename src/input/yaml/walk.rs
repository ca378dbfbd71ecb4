//! The one walk over the parser's events: where each node sits (a map key,
//! a map value, a list item, a document's root) and its JSON Pointer.
//!
//! Building values ([`super::values`]), recording positions
//! ([`super::Positions`]) and `lint --fix`'s tree of byte ranges each
//! implement [`Visit`]; [`super::load_each_visiting`] runs them together,
//! in one pass over the events.

use std::fmt::Write as _;

use serde_saphyr::granit_parser::{Event, ScanError, Span};

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
    let mut pointer = String::new();
    let mut document = 0;
    for item in events {
        // Matched, not mapped: the event is not moved into a new `Result`.
        let (event, span) = match item {
            Ok(pair) => pair,
            Err(e) => {
                return Err(YamlError {
                    line: e.marker().line() as u64,
                    column: e.marker().col() as u64 + 1,
                    message: e.info(),
                });
            }
        };
        match &event {
            Event::DocumentStart(..) => {
                stack.clear();
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
                visit.node(Place::Value, &pointer, &event, &span)?;
                continue;
            }
            Event::Scalar(..) | Event::Alias(_) | Event::SequenceStart(..) => {}
            Event::MappingStart(..) => {}
            _ => continue,
        }
        let place = place_of(stack.last_mut(), &event, &mut pointer);
        visit.node(place, &pointer, &event, &span)?;
        match event {
            Event::SequenceStart(..) => stack.push(Open::Seq {
                next: 0,
                len: pointer.len(),
            }),
            Event::MappingStart(..) => stack.push(Open::Map {
                expecting_key: true,
                len: pointer.len(),
            }),
            _ => {}
        }
    }
    Ok(())
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
