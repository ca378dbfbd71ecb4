//! YAML documents to JSON values, straight from the parser's event stream.
//!
//! serde-saphyr's serde layer costs about three times its parser (measured:
//! 465 ms vs 159 ms for 10,000 Deployments, docs/BENCHMARKS.md), so lint
//! builds `serde_json::Value`s from the events of the same parser
//! (`granit-parser`, re-exported by serde-saphyr) and enforces its own
//! budgets: node count (which bounds alias expansion), nesting depth.
//!
//! Scalars resolve as Kubernetes' YAML reader (go-yaml v2, YAML 1.1) does:
//! `yes`/`on` are booleans, `0644` is octal, keys are always strings.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, ScanError, Span, Tag};

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

enum Frame {
    Seq {
        items: Vec<Value>,
        anchor: usize,
        /// Length of [`Builder::pointer`] for this node.
        len: usize,
    },
    Map {
        map: Map<String, Value>,
        key: Option<String>,
        /// Where the current key starts (line, column).
        key_at: (u64, u64),
        anchor: usize,
        /// Length of [`Builder::pointer`] for this node.
        len: usize,
    },
}

/// Source positions of one YAML document's nodes, recorded while its
/// value is built, to place findings without parsing the text again.
///
/// One entry per map entry (at its key), sequence item and the root, in
/// event order, keyed by JSON Pointer (keys escaped as RFC 6901 says). The
/// pointers are those of the YAML as written: a merge key is `/<<`, an
/// alias's contents have no entries of their own.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Positions {
    /// The entries' pointers, one after the other.
    text: String,
    /// (end of the pointer in `text`, line, column); each starts where the
    /// previous one ends.
    entries: Vec<(usize, u64, u64)>,
}

impl Positions {
    fn clear(&mut self) {
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

struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Value>,
    root: Option<Value>,
    nodes: usize,
    limits: ParseLimits,
    document: usize,
    duplicates: Vec<DuplicateKey>,
    /// JSON Pointer of the current node.
    pointer: String,
    positions: Positions,
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
/// The parser (scanning, tokens, events) is about two thirds of the time
/// and building the values, their positions and the lint the rest
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
/// them (four 10 MB files on two cores: 1.18 s without, 1.3-1.5 s with).
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
    if threads == Threads::One {
        return build(Parser::new_from_str(text), limits, each);
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
            return build(Parser::new_from_str(text), limits, each);
        }
        build(received.into_iter().flatten(), limits, each)
    })
}

/// Builds the documents from the parser's events.
fn build<'t>(
    events: impl Iterator<Item = Result<(Event<'t>, Span), ScanError>>,
    limits: ParseLimits,
    mut each: impl FnMut(usize, Value, &Positions),
) -> Result<Vec<DuplicateKey>, YamlError> {
    let mut b = Builder {
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        nodes: 0,
        limits,
        document: 0,
        duplicates: Vec::new(),
        pointer: String::new(),
        positions: Positions::default(),
    };
    for item in events {
        let (event, span) = item.map_err(|e| YamlError {
            line: e.marker().line() as u64,
            column: e.marker().col() as u64 + 1,
            message: e.info(),
        })?;
        match event {
            Event::DocumentStart(..) => {
                b.root = None;
                b.anchors.clear();
                b.positions.clear();
            }
            Event::DocumentEnd => {
                each(
                    b.document,
                    b.root.take().unwrap_or(Value::Null),
                    &b.positions,
                );
                b.positions.clear();
                b.document += 1;
            }
            Event::Scalar(text, style, anchor, tag) => {
                b.count(1, &span)?;
                if let Some(Frame::Map {
                    key: key @ None,
                    key_at,
                    len,
                    ..
                }) = b.stack.last_mut()
                {
                    // Keys are strings whatever they look like (`9000:`, `true:`).
                    *key_at = (span.start.line() as u64, span.start.col() as u64 + 1);
                    b.pointer.truncate(*len);
                    b.pointer.push('/');
                    if text.contains(['~', '/']) {
                        b.pointer.push_str(&crate::path::escape_pointer(&text));
                    } else {
                        b.pointer.push_str(&text);
                    }
                    *key = Some(text.into_owned());
                    if anchor != 0 {
                        b.anchors
                            .insert(anchor, Value::String(key.clone().unwrap_or_default()));
                    }
                    b.positions.note(&b.pointer, &span);
                    continue;
                }
                b.note_value(&span);
                let value = resolve(&text, style, tag.as_deref());
                b.insert(value, anchor, &span)?;
            }
            Event::SequenceStart(_, anchor, _) => {
                b.open(&span)?;
                b.note_value(&span);
                b.stack.push(Frame::Seq {
                    items: Vec::new(),
                    anchor,
                    len: b.pointer.len(),
                });
            }
            Event::MappingStart(_, anchor, _) => {
                b.open(&span)?;
                b.note_value(&span);
                b.stack.push(Frame::Map {
                    map: Map::new(),
                    key: None,
                    key_at: (0, 0),
                    anchor,
                    len: b.pointer.len(),
                });
            }
            Event::SequenceEnd => match b.stack.pop() {
                Some(Frame::Seq { items, anchor, .. }) => {
                    b.insert(Value::Array(items), anchor, &span)?;
                }
                _ => return Err(error_at(&span, "unbalanced sequence end")),
            },
            Event::MappingEnd => match b.stack.pop() {
                Some(Frame::Map { map, anchor, .. }) => {
                    b.insert(Value::Object(map), anchor, &span)?;
                }
                _ => return Err(error_at(&span, "unbalanced mapping end")),
            },
            Event::Alias(id) => {
                let Some(value) = b.anchors.get(&id).cloned() else {
                    return Err(error_at(&span, "alias to an unknown anchor"));
                };
                b.count(size_of(&value), &span)?;
                b.note_value(&span);
                b.insert(value, 0, &span)?;
            }
            _ => {}
        }
    }
    Ok(b.duplicates)
}

impl Builder {
    /// Records where a node in value position (not a map key) starts: a
    /// sequence item or the root gets a pointer and an entry; a map value's
    /// pointer is its key's, already recorded.
    fn note_value(&mut self, span: &Span) {
        match self.stack.last() {
            None => {
                self.pointer.clear();
                self.positions.note("", span);
            }
            Some(Frame::Seq { items, len, .. }) => {
                self.pointer.truncate(*len);
                self.pointer.push('/');
                let _ = write!(self.pointer, "{}", items.len());
                self.positions.note(&self.pointer, span);
            }
            // A key that is not a plain scalar (an alias; anything else is
            // refused): no entry, and its value's pointer ends in `/`.
            Some(Frame::Map { key: None, len, .. }) => {
                self.pointer.truncate(*len);
                self.pointer.push('/');
            }
            // A map value: its key's pointer is current, and recorded.
            Some(Frame::Map { .. }) => {}
        }
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
                } else {
                    // Duplicate keys: the last wins, as in kubectl; noted
                    // (the key copied only then).
                    match map.entry(k) {
                        serde_json::map::Entry::Vacant(e) => {
                            e.insert(value);
                        }
                        serde_json::map::Entry::Occupied(mut e) => {
                            e.insert(value);
                            self.duplicates.push(DuplicateKey {
                                document: self.document,
                                line: key_at.0,
                                column: key_at.1,
                                key: e.key().clone(),
                            });
                        }
                    }
                }
            }
        }
        Ok(())
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

const CORE: &str = "tag:yaml.org,2002:";

/// A scalar's value: quoted and block scalars are strings; plain scalars
/// resolve to null, booleans and numbers as YAML 1.1 readers do.
fn resolve(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Value {
    if let Some(tag) = tag {
        if tag.handle() == CORE {
            match tag.suffix() {
                "str" | "binary" | "timestamp" => return Value::String(text.to_owned()),
                "null" => return Value::Null,
                _ => {}
            }
        } else {
            return Value::String(text.to_owned());
        }
    }
    if style != ScalarStyle::Plain {
        return Value::String(text.to_owned());
    }
    resolve_plain(text).unwrap_or_else(|| Value::String(text.to_owned()))
}

fn resolve_plain(s: &str) -> Option<Value> {
    let first = s.chars().next()?;
    if !(first.is_ascii_digit()
        || matches!(
            first,
            '-' | '+' | '.' | '~' | 'n' | 'N' | 't' | 'T' | 'f' | 'F' | 'y' | 'Y' | 'o' | 'O'
        ))
    {
        return None;
    }
    match s {
        "~" | "null" | "Null" | "NULL" => return Some(Value::Null),
        "true" | "True" | "TRUE" | "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Some(Value::Bool(true));
        }
        "false" | "False" | "FALSE" | "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Some(Value::Bool(false));
        }
        _ => {}
    }
    if !(first.is_ascii_digit() || matches!(first, '-' | '+' | '.')) {
        return None;
    }
    int(s).map(Value::Number).or_else(|| float(s))
}

fn int(s: &str) -> Option<Number> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let digits = body.replace('_', "");
    if digits.is_empty() {
        return None;
    }
    let (radix, digits) = if let Some(h) = digits.strip_prefix("0x") {
        (16, h.to_owned())
    } else if let Some(o) = digits.strip_prefix("0o") {
        (8, o.to_owned())
    } else if let Some(b) = digits.strip_prefix("0b") {
        (2, b.to_owned())
    } else if digits.len() > 1
        && digits.starts_with('0')
        && digits.bytes().all(|c| (b'0'..=b'7').contains(&c))
    {
        (8, digits[1..].to_owned())
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(&digits, radix).ok()?;
    if negative {
        let v = i64::try_from(magnitude).ok()?;
        Some(Number::from(-v))
    } else {
        Some(Number::from(magnitude))
    }
}

fn float(s: &str) -> Option<Value> {
    let body = s.trim_start_matches(['-', '+']);
    if matches!(body, ".inf" | ".Inf" | ".INF" | ".nan" | ".NaN" | ".NAN") {
        // JSON has no infinities; keep the text.
        return None;
    }
    let ok = body
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'-' | b'+' | b'_'))
        && body.bytes().any(|c| c.is_ascii_digit());
    if !ok {
        return None;
    }
    let v: f64 = s.replace('_', "").parse().ok()?;
    Number::from_f64(v).map(Value::Number)
}

/// Where a JSON Pointer was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u64,
    pub column: u64,
    /// False when the field does not exist and this is its deepest
    /// existing ancestor.
    pub exact: bool,
}

/// Positions (1-based line, column) of JSON Pointers in one pass over the
/// events. `wants` are (document index, pointer); for a pointer that does
/// not exist, the deepest existing ancestor's position is returned. A map
/// entry's position is its key's.
#[must_use]
pub fn locate_many(text: &str, wants: &[(usize, &str)]) -> Vec<Option<Position>> {
    let mut found: Vec<Option<Position>> = vec![None; wants.len()];
    let mut best: Vec<usize> = vec![0; wants.len()];
    enum F {
        Seq { next: usize, len: usize },
        Map { expecting_key: bool, len: usize },
    }
    let mut doc = 0usize;
    let mut pointer = String::new();
    let mut stack: Vec<F> = Vec::new();
    // Wants by document, so each node is compared only with its own
    // document's wants (a big file with many findings stays linear).
    let mut by_doc: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, (d, _)) in wants.iter().enumerate() {
        by_doc.entry(*d).or_default().push(i);
    }
    let mut note = |doc: usize, pointer: &str, span: &Span, found: &mut Vec<Option<Position>>| {
        let Some(mine) = by_doc.get(&doc) else { return };
        for &i in mine {
            let want = wants[i].1;
            let hit = want == pointer
                || (want.starts_with(pointer) && want.as_bytes().get(pointer.len()) == Some(&b'/'));
            if hit && (found[i].is_none() || pointer.len() >= best[i]) {
                found[i] = Some(Position {
                    line: span.start.line() as u64,
                    column: span.start.col() as u64 + 1,
                    exact: want == pointer,
                });
                best[i] = pointer.len();
            }
        }
    };
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { break };
        if !by_doc.contains_key(&doc) {
            // Nothing wanted in this document: skip to its end.
            if matches!(event, Event::DocumentEnd) {
                doc += 1;
            }
            continue;
        }
        // A node in value position: compute its pointer from its parent.
        let is_node = matches!(
            event,
            Event::Scalar(..)
                | Event::SequenceStart(..)
                | Event::MappingStart(..)
                | Event::Alias(..)
        );
        if is_node {
            match stack.last_mut() {
                Some(F::Map {
                    expecting_key: expecting @ true,
                    len,
                }) => {
                    // A key: its position is the entry's.
                    *expecting = false;
                    pointer.truncate(*len);
                    pointer.push('/');
                    if let Event::Scalar(k, ..) = &event {
                        if k.contains(['~', '/']) {
                            pointer.push_str(&crate::path::escape_pointer(k));
                        } else {
                            pointer.push_str(k);
                        }
                        note(doc, &pointer, &span, &mut found);
                    }
                    // A complex key's contents are not addressable, but its
                    // frame must be tracked so its end event balances.
                    match event {
                        Event::SequenceStart(..) => stack.push(F::Seq {
                            next: 0,
                            len: pointer.len(),
                        }),
                        Event::MappingStart(..) => stack.push(F::Map {
                            expecting_key: true,
                            len: pointer.len(),
                        }),
                        _ => {}
                    }
                    continue;
                }
                Some(F::Map { expecting_key, .. }) => {
                    // The value of the current key: the pointer is already set.
                    *expecting_key = true;
                }
                Some(F::Seq { next, len }) => {
                    pointer.truncate(*len);
                    pointer.push('/');
                    let _ = write!(pointer, "{next}");
                    *next += 1;
                    note(doc, &pointer, &span, &mut found);
                }
                None => {
                    pointer.clear();
                    note(doc, "", &span, &mut found);
                }
            }
        }
        match event {
            Event::SequenceStart(..) => stack.push(F::Seq {
                next: 0,
                len: pointer.len(),
            }),
            Event::MappingStart(..) => stack.push(F::Map {
                expecting_key: true,
                len: pointer.len(),
            }),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(F::Seq { len, .. } | F::Map { len, .. }) = stack.pop() {
                    pointer.truncate(len);
                }
            }
            Event::DocumentEnd => {
                doc += 1;
                stack.clear();
                pointer.clear();
            }
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> Value {
        load(text, ParseLimits::for_len(text.len()))
            .unwrap()
            .remove(0)
    }

    #[test]
    fn resolves_scalars_like_kubectl() {
        let v = one(
            "a: 0644\nb: 10\nc: -3\nd: 1.5\ne: yes\nf: \"yes\"\ng: ~\nh: 0x1F\ni: 1_000\nj: 08\nk: .inf\nl: on\nm: 12:30\nn: 1e3\n9000: svc\n",
        );
        assert_eq!(
            v,
            json!({"a": 420, "b": 10, "c": -3, "d": 1.5, "e": true, "f": "yes", "g": null, "h": 31,
                   "i": 1000, "j": 8, "k": ".inf", "l": true, "m": "12:30", "n": 1000.0, "9000": "svc"})
        );
    }

    #[test]
    fn anchors_merges_and_duplicates() {
        let v = one("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\nlist: [*b]\ndup: 1\ndup: 2\n");
        assert_eq!(v["use"], json!({"x": 1, "y": 3}));
        assert_eq!(v["list"][0]["x"], 1);
        assert_eq!(v["dup"], 2);
    }

    /// Everything [`load_each_on`] hands over and returns, to compare the
    /// one- and two-thread runs.
    fn record(text: &str, limits: ParseLimits, threads: Threads) -> String {
        let mut out = String::new();
        let r = load_each_on(text, limits, threads, |doc, value, at| {
            let _ = writeln!(out, "{doc} {value} {at:?}");
        });
        let _ = write!(out, "{r:?}");
        out
    }

    #[test]
    fn the_parser_on_a_second_thread_changes_nothing() {
        // Many batches of events: anchors, merges, duplicate keys, lists,
        // block and quoted scalars, empty documents.
        let doc = |i: usize| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  labels: &l {{app: a{i}}}\nspec:\n  nodeSelector:\n    <<: *l\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: \"mcr.microsoft.com/windows/nanoserver:ltsc2022\"\n    command: [cmd, /c, 'echo hi']\n    args:\n    - |\n      line one\n      line two\n  dup: 1\n  dup: 2\n---\n---\n"
            )
        };
        let text: String = (0..3000).map(doc).collect();
        let limits = ParseLimits::for_len(text.len());
        let one = record(&text, limits, Threads::One);
        assert!(
            one.contains("Ok([DuplicateKey { document: 0,")
                && one.contains("DuplicateKey { document: 5998,"),
            "{}",
            &one[one.len() - 200..]
        );
        assert_eq!(record(&text, limits, Threads::Two), one);

        // The parser's error, after many documents.
        let broken = format!("{text}a: [1, 2\n");
        let one = record(&broken, limits, Threads::One);
        assert!(one.contains("Err(YamlError"), "{}", &one[one.len() - 200..]);
        assert_eq!(record(&broken, limits, Threads::Two), one);

        // The builder's error (the node budget), mid-stream: the parser's
        // thread stops too.
        let small = ParseLimits {
            max_nodes: 20_000,
            max_depth: 128,
        };
        let one = record(&text, small, Threads::One);
        assert!(one.contains("safety budget"), "{}", &one[one.len() - 200..]);
        assert_eq!(record(&text, small, Threads::Two), one);
    }

    #[test]
    fn documents_and_limits() {
        let docs = load("a: 1\n---\n---\nb: 2\n", ParseLimits::for_len(0)).unwrap();
        assert_eq!(docs, vec![json!({"a": 1}), Value::Null, json!({"b": 2})]);
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert!(
            load(&deep, ParseLimits::for_len(deep.len()))
                .unwrap_err()
                .message
                .contains("nesting")
        );
        let e = load("a: [1, 2\n", ParseLimits::for_len(9)).unwrap_err();
        assert!(e.line >= 1 && !e.message.is_empty(), "{e:?}");
    }

    /// Positions recorded while building values agree with a separate pass
    /// over the events ([`locate_many`]), for every pointer of every node
    /// and for missing ones, through anchors, merges, duplicates, escaped
    /// keys, flow collections, Lists and several documents.
    #[test]
    fn positions_from_the_first_parse_match_locate_many() {
        let text = "\
a: 1
b: &base
  c:
  - x
  - y: 2
    \"k/e~y\": [1, {z: 3}]
use:
  <<: *base
  c: []
dup: 1
dup: {d: 2}
list: [*base, 5]
s: &s sk
*s : aliased-key
after: 1
---
---
kind: List
items:
- metadata: {name: a}
  spec:
    containers:
    - name: c
";
        let wants_per_doc: Vec<(usize, Vec<&str>)> = vec![
            (
                0,
                vec![
                    "",
                    "/a",
                    "/b",
                    "/b/c",
                    "/b/c/0",
                    "/b/c/1/y",
                    "/b/c/1/k~1e~0y/1/z",
                    "/b/c/1/k~1e~0y/1/missing/deeper",
                    "/use/<<",
                    "/use/c",
                    "/use/c/0",
                    "/dup",
                    "/dup/d",
                    "/list/0",
                    "/list/0/c",
                    "/list/1",
                    "/s",
                    "/sk",
                    "/after",
                    "/nothing",
                ],
            ),
            (1, vec!["", "/x"]),
            (
                2,
                vec![
                    "/items/0",
                    "/items/0/spec/containers/0/name",
                    "/items/0/spec/hostNetwork",
                    "/items/1",
                ],
            ),
        ];
        let flat: Vec<(usize, &str)> = wants_per_doc
            .iter()
            .flat_map(|(d, ws)| ws.iter().map(move |w| (*d, *w)))
            .collect();
        let expected = locate_many(text, &flat);
        let mut got = Vec::new();
        let mut docs = 0;
        load_each(text, ParseLimits::for_len(text.len()), |doc, _, at| {
            docs += 1;
            let wants = &wants_per_doc.iter().find(|(d, _)| *d == doc).unwrap().1;
            got.extend(at.locate(wants));
            // The indexed lookup (many wants) agrees with the linear one.
            let many: Vec<&str> = wants.iter().copied().cycle().take(5000).collect();
            let indexed = at.locate(&many);
            assert_eq!(&indexed[..wants.len()], &at.locate(wants)[..]);
        })
        .unwrap();
        assert_eq!(docs, 3);
        assert_eq!(got, expected);
        assert_eq!(
            got[5].map(|p| (p.line, p.column, p.exact)),
            Some((5, 5, true))
        );
        assert!(!got[7].unwrap().exact, "a missing field is its ancestor's");
    }

    #[test]
    fn locates_keys_items_and_missing_fields() {
        let text = "a: 1\nb:\n  c:\n  - x\n  - y: 2\n---\nz: 1\n";
        let got: Vec<_> = locate_many(
            text,
            &[
                (0, "/b/c/1/y"),
                (0, "/b/missing"),
                (0, "/b/c/0"),
                (1, "/z"),
                (1, ""),
            ],
        )
        .into_iter()
        .map(|p| p.map(|p| (p.line, p.column, p.exact)))
        .collect();
        assert_eq!(
            got,
            vec![
                Some((5, 5, true)),
                Some((2, 1, false)),
                Some((4, 5, true)),
                Some((7, 1, true)),
                Some((7, 1, true))
            ]
        );
    }
}
