//! Where each node of a document starts, recorded in the walk.

use std::collections::HashMap;

use serde_saphyr::granit_parser::{Event, Span};

use super::YamlError;
use super::walk::{Place, Visit};

/// Where a JSON Pointer was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u64,
    pub column: u64,
    /// False when the field does not exist and this is its deepest
    /// existing ancestor.
    pub exact: bool,
}

/// Source positions of one YAML document's nodes, recorded while its
/// value is built, to place findings without parsing the text again.
///
/// One entry per map entry (at its key), sequence item and the root, in
/// event order, keyed by JSON Pointer (keys escaped as RFC 6901 says). The
/// pointers are those of the YAML as written: a merge key is `/<<`, an
/// alias's contents have no entries of their own.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Positions {
    /// The entries' pointers, one after the other.
    text: String,
    /// (end of the pointer in `text`, line, column); each starts where the
    /// previous one ends.
    entries: Vec<(usize, u64, u64)>,
}

impl Positions {
    pub(super) fn clear(&mut self) {
        self.text.clear();
        self.entries.clear();
    }

    fn note(&mut self, pointer: &str, span: &Span) {
        self.text.push_str(pointer);
        self.entries.push((
            self.text.len(),
            span.start.line() as u64,
            span.start.col() as u64 + 1,
        ));
    }

    fn iter(&self) -> impl Iterator<Item = (&str, u64, u64)> {
        let mut start = 0;
        self.entries.iter().map(move |&(end, line, column)| {
            let p = &self.text[start..end];
            start = end;
            (p, line, column)
        })
    }

    /// Positions (1-based line, column) of JSON Pointers into this
    /// document; for a pointer that does not exist, its deepest existing
    /// ancestor's, not `exact`. Where a pointer occurs twice (a duplicate
    /// key), the last occurrence, whose value is the one used.
    #[must_use]
    pub fn locate(&self, wants: &[&str]) -> Vec<Option<Position>> {
        if wants.is_empty() {
            return Vec::new();
        }
        // A few wants in a small document: compare with every entry. Many
        // (a large `List`): index the entries once.
        if wants.len() * self.entries.len() <= 4096 {
            return wants
                .iter()
                .map(|want| {
                    let mut best: Option<(usize, Position)> = None;
                    for (p, line, column) in self.iter() {
                        let hit = want.starts_with(p)
                            && (want.len() == p.len() || want.as_bytes()[p.len()] == b'/');
                        if hit && best.is_none_or(|(len, _)| p.len() >= len) {
                            let exact = want.len() == p.len();
                            best = Some((
                                p.len(),
                                Position {
                                    line,
                                    column,
                                    exact,
                                },
                            ));
                        }
                    }
                    best.map(|(_, at)| at)
                })
                .collect();
        }
        let mut index: HashMap<&str, (u64, u64)> = HashMap::with_capacity(self.entries.len());
        for (p, line, column) in self.iter() {
            index.insert(p, (line, column));
        }
        wants
            .iter()
            .map(|want| {
                let mut p: &str = want;
                loop {
                    if let Some(&(line, column)) = index.get(p) {
                        return Some(Position {
                            line,
                            column,
                            exact: p.len() == want.len(),
                        });
                    }
                    let cut = p.rfind('/')?;
                    p = &p[..cut];
                }
            })
            .collect()
    }
}

impl<'t> Visit<'t> for Positions {
    /// An entry for the root, each list item and each map key that is a
    /// scalar; a map value's position is its key's.
    fn node(
        &mut self,
        place: Place,
        pointer: &str,
        _event: &Event<'t>,
        span: &Span,
    ) -> Result<(), YamlError> {
        if matches!(place, Place::Root | Place::Item | Place::Key) {
            self.note(pointer, span);
        }
        Ok(())
    }

    fn document_start(&mut self) {
        self.clear();
    }
}
