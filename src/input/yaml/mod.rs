//! YAML documents to JSON values, straight from the parser's event stream.
//!
//! serde-saphyr's serde layer costs several times its parser
//! (docs/BENCHMARKS.md, "What was tried and not kept"), so lint
//! builds `serde_json::Value`s from the events of the same parser
//! (`granit-parser`, re-exported by serde-saphyr) and enforces its own
//! budgets: node count (which bounds alias expansion), nesting depth.
//!
//! Scalars resolve as Kubernetes' YAML reader (go-yaml v2, YAML 1.1) does:
//! `yes`/`on` are booleans, `0644` is octal, keys are always strings.
//!
//! One walk over the events ([`walk`]) serves every reader: it says where
//! each node sits and gives its JSON Pointer, and visitors ([`Visit`])
//! build the values, record the positions that place findings
//! ([`Positions`]) and, for `lint --fix`, the text's node tree with byte
//! ranges, all in the same pass.

mod positions;
mod scalar;
mod values;
mod walk;

use serde_json::Value;
use serde_saphyr::granit_parser::{Event, Parser, Span};

pub use positions::{Position, Positions};
use values::Values;
pub use walk::{Place, Visit, walk};

/// A YAML text could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub line: u64,
    pub column: u64,
    pub message: String,
}

/// ParseLimits that keep hostile input bounded in time and memory.
#[derive(Debug, Clone, Copy)]
pub struct ParseLimits {
    /// Nodes created, alias copies included.
    pub max_nodes: usize,
    pub max_depth: usize,
}

impl ParseLimits {
    /// ParseLimits scaled to the input: a real 30 MB bundle has millions of
    /// nodes; an alias bomb is a few hundred bytes that expand to billions.
    #[must_use]
    pub fn for_len(len: usize) -> Self {
        Self {
            max_nodes: (len / 4).clamp(250_000, 4_000_000),
            max_depth: 128,
        }
    }
}

/// A key that appears twice in one map: the last value is used (as kubectl
/// does), but the API server refuses duplicate fields in JSON and warns on
/// YAML, so `lint` says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The document (0-based) and the position of the second key.
    pub document: usize,
    pub line: u64,
    pub column: u64,
    pub key: String,
}

fn error_at(span: &Span, message: impl Into<String>) -> YamlError {
    YamlError {
        line: span.start.line() as u64,
        column: span.start.col() as u64 + 1,
        message: message.into(),
    }
}

/// Parses every document; an empty document is `Value::Null`.
///
/// # Errors
/// Invalid YAML, or a limit exceeded.
pub fn load(text: &str, limits: ParseLimits) -> Result<Vec<Value>, YamlError> {
    load_with_duplicates(text, limits).map(|(docs, _)| docs)
}

/// [`load`], also returning the keys that appear twice in a map.
///
/// # Errors
/// Invalid YAML, or a limit exceeded.
pub fn load_with_duplicates(
    text: &str,
    limits: ParseLimits,
) -> Result<(Vec<Value>, Vec<DuplicateKey>), YamlError> {
    let mut docs = Vec::new();
    let duplicates = load_each(text, limits, |_, value, _| docs.push(value))?;
    Ok((docs, duplicates))
}

/// Parses the documents one by one, handing each to `each` as soon as it
/// is complete, with its index, its value (`Value::Null` when empty) and
/// the source positions of its nodes; only one document is held at a
/// time. Returns the keys that appear twice in a map.
///
/// # Errors
/// Invalid YAML, or a limit exceeded; `each` has then been called for the
/// documents before the error.
pub fn load_each(
    text: &str,
    limits: ParseLimits,
    each: impl FnMut(usize, Value, &Positions),
) -> Result<Vec<DuplicateKey>, YamlError> {
    load_each_on(text, limits, Threads::for_text(text), each)
}

/// Texts at least this long are parsed on a second thread ([`Threads`]).
pub const PIPELINE_MIN_BYTES: usize = 1 << 20;

/// Events handed from the parser's thread to the builder's at a time.
const PIPELINE_BATCH: usize = 256;

/// Where [`load_each`] runs the parser.
///
/// The parser (scanning, tokens, events) takes most of the time and
/// building the values, their positions and the lint the rest
/// (`perf`, docs/BENCHMARKS.md, "lint on one large file"). For a long text the
/// parser runs on a second thread and hands its events over in batches:
/// the builder consumes the same events in the same order, so what it
/// builds, and any error, is the same as on one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    One,
    Two,
}

thread_local! {
    static SECOND_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Whether [`load_each`] on the calling thread may start a second thread.
/// Workers that already keep every core busy (`lint`'s, one per core, each
/// with its own files) say no: the parser's thread would only compete with
/// them (docs/BENCHMARKS.md, "What was tried and not kept").
/// So does `lint` under `WINADMIT_LINT_THREADS=1`.
pub fn allow_second_thread(allowed: bool) {
    SECOND_THREAD.with(|c| c.set(allowed));
}

impl Threads {
    /// Two for a text of [`PIPELINE_MIN_BYTES`] or more when the machine
    /// has a second CPU and the calling thread allows it
    /// ([`allow_second_thread`]).
    #[must_use]
    pub fn for_text(text: &str) -> Self {
        if text.len() < PIPELINE_MIN_BYTES || !SECOND_THREAD.with(std::cell::Cell::get) {
            return Self::One;
        }
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        if cpus > 1 { Self::Two } else { Self::One }
    }
}

/// [`load_each`] with the parser on the thread `threads` says.
///
/// # Errors
/// As [`load_each`].
pub fn load_each_on(
    text: &str,
    limits: ParseLimits,
    threads: Threads,
    each: impl FnMut(usize, Value, &Positions),
) -> Result<Vec<DuplicateKey>, YamlError> {
    load_each_visiting(text, limits, threads, &mut (), each)
}

/// [`load_each_on`], with `extra` visiting the same events in the same
/// pass (after the values and positions are built from each).
///
/// # Errors
/// As [`load_each`], or `extra`'s error.
pub fn load_each_visiting<'t>(
    text: &'t str,
    limits: ParseLimits,
    threads: Threads,
    extra: &mut impl Visit<'t>,
    each: impl FnMut(usize, Value, &Positions),
) -> Result<Vec<DuplicateKey>, YamlError> {
    let mut loader = Loader {
        values: Values::new(limits),
        positions: Positions::default(),
        extra,
        each,
    };
    if threads == Threads::One {
        walk(Parser::new_from_str(text), &mut loader)?;
        return Ok(loader.values.duplicates);
    }
    std::thread::scope(|scope| {
        let (batches, received) = std::sync::mpsc::sync_channel(2);
        let parser = move || {
            let mut batch = Vec::with_capacity(PIPELINE_BATCH);
            for item in Parser::new_from_str(text) {
                let last = item.is_err();
                batch.push(item);
                if batch.len() == PIPELINE_BATCH || last {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(PIPELINE_BATCH));
                    // After the parser's error, or on a closed channel (the
                    // builder stopped at an error of its own): done.
                    if batches.send(full).is_err() || last {
                        return;
                    }
                }
            }
            let _ = batches.send(batch);
        };
        let spawned = std::thread::Builder::new()
            .name("yaml-parser".into())
            .spawn_scoped(scope, parser);
        if let Err(e) = spawned {
            // No second thread to be had: parse here (the closure was
            // consumed, so parse afresh).
            tracing::debug!(error = %e, "yaml: no parser thread; parsing on one");
            walk(Parser::new_from_str(text), &mut loader)?;
        } else {
            walk(received.into_iter().flatten(), &mut loader)?;
        }
        Ok(loader.values.duplicates)
    })
}

/// Builds values and positions, and hands each document over at its end.
struct Loader<'v, V, F> {
    values: Values,
    positions: Positions,
    extra: &'v mut V,
    each: F,
}

impl<'t, V: Visit<'t>, F: FnMut(usize, Value, &Positions)> Visit<'t> for Loader<'_, V, F> {
    fn node(
        &mut self,
        place: Place,
        pointer: &str,
        event: &Event<'t>,
        span: &Span,
    ) -> Result<(), YamlError> {
        self.values.node(place, pointer, event, span)?;
        self.positions.node(place, pointer, event, span)?;
        self.extra.node(place, pointer, event, span)
    }

    fn document_start(&mut self) {
        self.values.document_start();
        self.positions.document_start();
        self.extra.document_start();
    }

    fn document_end(&mut self, index: usize) {
        (self.each)(index, self.values.take(), &self.positions);
        self.values.document_end(index);
        self.extra.document_end(index);
    }
}

/// Visits nothing.
impl<'t> Visit<'t> for () {
    fn node(&mut self, _: Place, _: &str, _: &Event<'t>, _: &Span) -> Result<(), YamlError> {
        Ok(())
    }
}

/// Positions (1-based line, column) of JSON Pointers, in one walk that
/// records positions only (no values). `wants` are (document index,
/// pointer); for a pointer that does not exist, the deepest existing
/// ancestor's position is returned. A map entry's position is its key's.
/// A text that stops being YAML gives what was found before.
#[must_use]
pub fn locate_many(text: &str, wants: &[(usize, &str)]) -> Vec<Option<Position>> {
    struct Locator<'w, 'p> {
        positions: Positions,
        wants: &'w [(usize, &'p str)],
        found: Vec<Option<Position>>,
        /// Documents ended: the index of the one being walked.
        ended: usize,
    }
    impl Locator<'_, '_> {
        fn locate(&mut self, document: usize) {
            let mine: Vec<usize> = (0..self.wants.len())
                .filter(|&i| self.wants[i].0 == document)
                .collect();
            if mine.is_empty() {
                return;
            }
            let pointers: Vec<&str> = mine.iter().map(|&i| self.wants[i].1).collect();
            for (i, at) in mine.into_iter().zip(self.positions.locate(&pointers)) {
                self.found[i] = at;
            }
        }
    }
    impl<'t> Visit<'t> for Locator<'_, '_> {
        fn node(
            &mut self,
            place: Place,
            pointer: &str,
            event: &Event<'t>,
            span: &Span,
        ) -> Result<(), YamlError> {
            self.positions.node(place, pointer, event, span)
        }
        fn document_start(&mut self) {
            self.positions.document_start();
        }
        fn document_end(&mut self, index: usize) {
            self.locate(index);
            self.ended = index + 1;
            self.positions.clear();
        }
    }
    let mut locator = Locator {
        positions: Positions::default(),
        wants,
        found: vec![None; wants.len()],
        ended: 0,
    };
    if walk(Parser::new_from_str(text), &mut locator).is_err() {
        // The document the error is in: what was recorded of it.
        locator.locate(locator.ended);
    }
    locator.found
}

#[cfg(test)]
mod tests;
