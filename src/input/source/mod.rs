//! Reading manifests: YAML (multi-document, CRLF, Helm output) and JSON,
//! with source positions for findings and bounded time and memory for
//! hostile input.
//!
//! Parsing uses serde-saphyr (a maintained, panic-free YAML deserializer
//! with budgets against alias bombs and deep nesting; serde_yaml is
//! deprecated; see [`crate::input::yaml`] for how its parser's events become
//! values). Documents are read one at a time as plain JSON values for the
//! engine, with the line and column of every node recorded in the same
//! pass ([`for_each_document`]), so findings are placed without a second
//! parse and a large file is never held as values all at once.
//!
//! The parts: [`files`] finds and reads the inputs of `lint` and `report
//! --from-file` and runs the first pass ([`prescan`]: the cluster objects
//! of the whole input) for both; [`json`] reads JSON objects as a stream
//! (a `List` of any size, `jq` output, list API responses); this module
//! turns a text into documents with their positions.

pub mod files;
pub mod json;
pub mod prescan;

pub use files::{
    Input, InputProblem, Inputs, Text, dir_has_manifest, looks_like_json, manifest_paths,
};

use std::borrow::Cow;
use std::fmt;

use serde_json::Value;

/// Largest file `lint` reads, so one huge file cannot exhaust memory.
/// The kinds [`crate::decision::cluster::ClusterObjects::learn`] learns from: a text that names none
/// of them is not parsed for them.
pub const CLUSTER_KINDS: [&str; 5] = [
    "Namespace",
    "RuntimeClass",
    "Node",
    crate::decision::gmsa::KIND,
    crate::decision::exceptions::KIND,
];

pub const MAX_FILE_BYTES: usize = 32 * 1024 * 1024;
/// Deepest nesting accepted; real manifests stay under 30.
pub const MAX_DEPTH: usize = 128;

/// A manifest could not be read. Carries the position when known.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InputError {
    pub line: Option<u64>,
    pub column: Option<u64>,
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l} column {c}: {}", self.message),
            (Some(l), None) => write!(f, "line {l}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl InputError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            line: None,
            column: None,
            message: message.into(),
        }
    }
}

/// One Kubernetes object read from a file.
#[derive(Debug, Clone)]
pub struct Document {
    /// Position among the file's objects: empty documents skipped, `List`
    /// items expanded (the `doc#N` of the corpus index).
    pub index: usize,
    /// Which YAML document of the file it came from.
    pub yaml_doc: usize,
    /// JSON Pointer of the object inside its YAML document (`/items/3` for
    /// a `List` member, empty otherwise).
    pub pointer: String,
    pub value: Value,
}

/// Reads `r` up to [`MAX_FILE_BYTES`] and one byte more, so that a text
/// over the limit is known without reading it all, whatever the length a
/// file claims (a file growing underneath, a FIFO, a device such as
/// /dev/zero). `expected` is the length the source claims, to allocate
/// once. Returns the bytes and whether the text is over the limit.
///
/// # Errors
/// Reading fails.
pub fn read_limited(r: &mut impl std::io::Read, expected: u64) -> std::io::Result<(Vec<u8>, bool)> {
    use std::io::Read as _;
    let limit = MAX_FILE_BYTES as u64 + 1;
    // Room for the whole text at once: growing by doubling would hold up
    // to twice a large file while it is read.
    let mut bytes = Vec::with_capacity(usize::try_from(expected.min(limit)).unwrap_or(0) + 1);
    r.take(limit).read_to_end(&mut bytes)?;
    let over = bytes.len() as u64 >= limit;
    Ok((bytes, over))
}

/// Checks that a file is text we can parse: size, encoding, no NULs.
///
/// # Errors
/// The bytes are too many, not UTF-8, or binary.
pub fn decode(bytes: &[u8]) -> Result<&str, InputError> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(InputError::new(format!(
            "file is {} MiB, over the {} MiB limit for manifests",
            bytes.len() / (1024 * 1024),
            MAX_FILE_BYTES / (1024 * 1024)
        )));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Some(at) = memchr_nul(bytes) {
        let line = bytes[..at].iter().filter(|b| **b == b'\n').count() as u64 + 1;
        return Err(InputError {
            line: Some(line),
            column: None,
            message: "binary file (contains NUL bytes), not a manifest".into(),
        });
    }
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = bytes[..at].iter().filter(|b| **b == b'\n').count() as u64 + 1;
        InputError {
            line: Some(line),
            column: None,
            message: format!("invalid UTF-8 at byte {at}"),
        }
    })
}

fn memchr_nul(bytes: &[u8]) -> Option<usize> {
    // A block at a time, the test without an early exit (vectorized),
    // then the byte in the block that has one.
    let mut at = 0;
    for block in bytes.chunks(64) {
        if block.iter().fold(false, |any, b| any | (*b == 0)) {
            return block.iter().position(|b| *b == 0).map(|i| at + i);
        }
        at += block.len();
    }
    None
}

/// Parses every object in a YAML or JSON text.
///
/// # Errors
/// The text is not valid YAML (or JSON), or exceeds a parser budget.
pub fn parse(text: &str) -> Result<Vec<Document>, InputError> {
    parse_with_duplicates(text).map(|(docs, _)| docs)
}

/// The YAML documents of a text, split at `---` lines at the start of a
/// line: (number of lines before the chunk, the chunk). For reading the
/// documents around a broken one; a single chunk when there is no `---`.
#[must_use]
pub fn split_documents(text: &str) -> Vec<(u64, &str)> {
    let mut chunks = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0u64;
    let mut offset = 0usize;
    for (line, l) in (0u64..).zip(text.split_inclusive('\n')) {
        let is_marker =
            l.starts_with("---") && l[3..].chars().next().is_none_or(char::is_whitespace);
        if is_marker && offset > start {
            chunks.push((start_line, &text[start..offset]));
            start = offset;
            start_line = line;
        }
        offset += l.len();
    }
    if offset > start || chunks.is_empty() {
        chunks.push((start_line, &text[start..]));
    }
    chunks
}

/// [`parse`], also returning the keys that appear twice in a map (the last
/// value is used, as kubectl does).
///
/// # Errors
/// As [`parse`].
pub fn parse_with_duplicates(
    text: &str,
) -> Result<(Vec<Document>, Vec<crate::input::yaml::DuplicateKey>), InputError> {
    let mut out = Vec::new();
    let duplicates = for_each_document(text, |part| match part {
        Part::Documents(docs, _) => out.extend(docs),
        Part::Restart => out.clear(),
    })?;
    Ok((out, duplicates))
}

/// [`parse`], also returning the source positions of each YAML document's
/// nodes (indexed by [`Document::yaml_doc`]), from the same pass.
///
/// # Errors
/// As [`parse`].
pub fn parse_located(
    text: &str,
) -> Result<(Vec<Document>, Vec<crate::input::yaml::Positions>), InputError> {
    let mut out = Vec::new();
    let mut positions = Vec::new();
    for_each_document(text, |part| match part {
        Part::Documents(docs, at) => {
            out.extend(docs);
            positions.push(at.clone());
        }
        Part::Restart => {
            out.clear();
            positions.clear();
        }
    })?;
    Ok((out, positions))
}

/// [`parse`], with `extra` visiting the parser's events in the same pass.
///
/// # Errors
/// As [`parse`].
pub fn parse_visiting<V>(text: &str, extra: &mut V) -> Result<Vec<Document>, InputError>
where
    V: for<'e> crate::input::yaml::Visit<'e>,
{
    let mut out = Vec::new();
    for_each_document_visiting(&mut Cow::Borrowed(text), extra, |part| match part {
        Part::Documents(docs, _) => out.extend(docs),
        Part::Restart => out.clear(),
    })?;
    Ok(out)
}

/// What [`for_each_document`] hands over.
pub enum Part<'a> {
    /// The objects of one YAML document (none when it is empty, a `List`'s
    /// items), with the source positions of its nodes.
    Documents(Vec<Document>, &'a crate::input::yaml::Positions),
    /// Forget every part handed so far: the text is read again from the
    /// start (with tabs in quoted scalars made spaces, see below).
    Restart,
}

/// [`parse_with_duplicates`] one YAML document at a time: `each` gets the
/// objects of each document as soon as it is read, so only one document's
/// values are held at a time.
///
/// # Errors
/// As [`parse`]; `each` has then had the documents before the error.
pub fn for_each_document(
    text: &str,
    each: impl FnMut(Part<'_>),
) -> Result<Vec<crate::input::yaml::DuplicateKey>, InputError> {
    for_each_document_in(&mut Cow::Borrowed(text), each)
}

/// [`for_each_document`] of a text that may be owned: the tab retry below
/// then changes the owned text in place instead of parsing a second copy
/// (for a 10 MB file, 10 MB less). On success the text may be left with
/// those tabs made spaces; on error it is as it was.
///
/// # Errors
/// As [`parse`]; `each` has then had the documents before the error.
pub fn for_each_document_in(
    text: &mut Cow<'_, str>,
    each: impl FnMut(Part<'_>),
) -> Result<Vec<crate::input::yaml::DuplicateKey>, InputError> {
    for_each_document_visiting(text, &mut (), each)
}

/// [`for_each_document_in`], with `extra` visiting the parser's events in
/// the same pass (`lint --fix` records the text's node tree so).
///
/// # Errors
/// As [`parse`]; `each` has then had the documents before the error.
pub fn for_each_document_visiting<V>(
    text: &mut Cow<'_, str>,
    extra: &mut V,
    mut each: impl FnMut(Part<'_>),
) -> Result<Vec<crate::input::yaml::DuplicateKey>, InputError>
where
    V: for<'e> crate::input::yaml::Visit<'e>,
{
    use crate::input::yaml::{Threads, load_each_visiting};
    let limits = crate::input::yaml::ParseLimits::for_len(text.len());
    let mut index = 0;
    let mut one = |yaml_doc: usize, value: Value, at: &crate::input::yaml::Positions| {
        let docs = objects(yaml_doc, value, &mut index);
        each(Part::Documents(docs, at));
    };
    let threads = Threads::for_text(text);
    match load_each_visiting(text.as_ref(), limits, threads, extra, &mut one) {
        Ok(duplicates) => Ok(duplicates),
        // The parser rejects tabs at the start of continuation lines inside
        // quoted multi-line scalars, which YAML allows (and real manifests
        // with embedded scripts contain). On that error only, parse again
        // with those tabs turned into spaces: columns stay the same, and the
        // only values that change are script bodies no rule reads.
        Err(e) if e.message.contains("tab") && text.contains("\n\t") => {
            each(Part::Restart);
            extra.restart(&e.message);
            let mut index = 0;
            let tabs = retab(text.to_mut());
            let threads = Threads::for_text(text);
            let retried = load_each_visiting(
                text.as_ref(),
                limits,
                threads,
                extra,
                |yaml_doc, value, at| {
                    let docs = objects(yaml_doc, value, &mut index);
                    each(Part::Documents(docs, at));
                },
            );
            if retried.is_err() {
                untab(text.to_mut(), &tabs);
            }
            retried.map_err(|_| from_yaml_error(e))
        }
        Err(e) => Err(from_yaml_error(e)),
    }
}

/// The objects of one YAML document: none when it is empty, a `List`'s
/// items, or the document itself. `index` counts the file's objects.
fn objects(yaml_doc: usize, value: Value, index: &mut usize) -> Vec<Document> {
    let mut out = Vec::new();
    if value.is_null() {
        return out;
    }
    if is_list(&value) {
        let Value::Object(mut map) = value else {
            unreachable!("is_list checks for an object")
        };
        if let Some(Value::Array(items)) = map.remove("items") {
            out.reserve(items.len());
            for (i, item) in items.into_iter().enumerate() {
                out.push(Document {
                    index: *index,
                    yaml_doc,
                    pointer: format!("/items/{i}"),
                    value: item,
                });
                *index += 1;
            }
        }
        return out;
    }
    out.push(Document {
        index: *index,
        yaml_doc,
        pointer: String::new(),
        value,
    });
    *index += 1;
    out
}

fn from_yaml_error(e: crate::input::yaml::YamlError) -> InputError {
    let mut message = e.message;
    let suffix = format!(" at line {}, column {}", e.line, e.column);
    if let Some(rest) = message.strip_suffix(&suffix) {
        message = rest.to_owned();
    }
    InputError {
        line: Some(e.line),
        column: Some(e.column),
        message,
    }
}

/// `kind: List` (or `*List`, as `kubectl get -o yaml` writes) with `items`.
fn is_list(v: &Value) -> bool {
    v.get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k == "List" || k.ends_with("List"))
        && v.get("items").is_some_and(Value::is_array)
}

/// Replaces tabs with spaces, in place, in the leading whitespace of lines
/// that continue a quoted scalar (where YAML allows them). Tabs used as
/// real indentation are left alone, so they stay an error. Returns where
/// the replaced tabs were, for [`untab`].
fn retab(text: &mut String) -> Vec<usize> {
    let mut tabs = Vec::new();
    let mut quote: Option<char> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if quote.is_some() {
            let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
            tabs.extend(line[..indent].match_indices('\t').map(|(i, _)| at + i));
        }
        quote = quote_state_after(line, quote);
        at += line.len();
    }
    // One ASCII byte for another: the length and every other byte stay.
    for &i in &tabs {
        text.replace_range(i..=i, " ");
    }
    tabs
}

/// Puts back the tabs [`retab`] replaced.
fn untab(text: &mut String, tabs: &[usize]) {
    for &i in tabs {
        text.replace_range(i..=i, "\t");
    }
}

/// Tracks whether a quoted scalar is still open at the end of `line`.
fn quote_state_after(line: &str, mut quote: Option<char>) -> Option<char> {
    let mut chars = line.chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('"'), '\\') => {
                chars.next();
            }
            (Some('"'), '"') => quote = None,
            (Some('\''), '\'') if chars.peek() == Some(&'\'') => {
                chars.next();
            }
            (Some('\''), '\'') => quote = None,
            (None, '#') if prev == ' ' || prev == '\t' => break,
            (None, '"' | '\'') if matches!(prev, ' ' | '\t' | ':' | '[' | '{' | ',' | '-') => {
                quote = Some(c);
            }
            _ => {}
        }
        prev = c;
    }
    quote
}

#[cfg(test)]
mod tests {
    use super::*;

    const MULTI: &str = "\
# Source: chart/templates/a.yaml
apiVersion: v1
kind: ConfigMap
data:
  9000: default/svc:80
---
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: a
  spec:
    containers:
    - name: c
      securityContext:
        privileged: true
";

    #[test]
    fn documents_skip_empties_and_expand_lists() {
        let docs = parse(MULTI).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].value["data"]["9000"], "default/svc:80");
        assert_eq!(docs[1].index, 1);
        assert_eq!(docs[1].pointer, "/items/0");
        assert_eq!(docs[1].value["metadata"]["name"], "a");
        let doc = docs[1].yaml_doc;
        let locs = crate::input::yaml::locate_many(
            MULTI,
            &[
                (doc, "/items/0/spec/containers/0/securityContext/privileged"),
                // A missing field points at its deepest existing ancestor.
                (doc, "/items/0/spec/hostNetwork"),
            ],
        );
        let at = |i: usize| locs[i].map(|p| (p.line, p.column));
        assert_eq!(at(0), Some((19, 9)));
        assert_eq!(at(1), Some((15, 3)));
    }

    #[test]
    fn tabs_inside_quoted_scalars_are_accepted() {
        let text = "kind: Pod\ncmd: \"a\n\t  b\"\nname: x\n";
        let docs = parse(text).unwrap();
        assert_eq!(docs[0].value["name"], "x");
        assert!(
            parse("a:\n\tb: 1\n").is_err(),
            "tab indentation is still an error"
        );
    }

    #[test]
    fn an_owned_text_is_retabbed_in_place_and_restored_on_error() {
        let names = |text: &mut Cow<'_, str>| {
            let mut names = Vec::new();
            let parsed = for_each_document_in(text, |part| match part {
                Part::Documents(docs, _) => {
                    names.extend(docs.into_iter().map(|d| d.value["name"].clone()));
                }
                Part::Restart => names.clear(),
            });
            parsed.map(|_| names)
        };
        let good = "kind: Pod\ncmd: \"a\n\t  b\"\nname: x\n---\nkind: Pod\nname: z2\n";
        let mut owned = Cow::Owned(good.to_owned());
        assert_eq!(names(&mut owned).unwrap(), ["x", "z2"]);
        assert_eq!(
            owned,
            good.replace("\n\t  b", "\n   b"),
            "the one copy, retabbed"
        );
        let mut borrowed = Cow::Borrowed(good);
        assert_eq!(names(&mut borrowed).unwrap(), ["x", "z2"]);

        // Tab indentation after the quoted scalar: still an error, and the
        // text is given back as it was (the caller reads it again by parts).
        let bad = format!("{good}---\na:\n\tb: 1\n");
        let mut owned = Cow::Owned(bad.clone());
        assert!(names(&mut owned).is_err());
        assert_eq!(owned, bad);
    }

    #[test]
    fn crlf_octal_and_duplicate_keys() {
        let text = "kind: Pod\r\nmode: 0644\r\nname: a\r\nname: b\r\n";
        let docs = parse(text).unwrap();
        assert_eq!(docs[0].value["mode"], 420);
        assert_eq!(docs[0].value["name"], "b");
        let at =
            crate::input::yaml::locate_many(text, &[(0, "/mode")])[0].map(|p| (p.line, p.column));
        assert_eq!(at, Some((2, 1)));
    }

    #[test]
    fn bad_input_is_an_error_with_a_position() {
        let e = parse("a: [1, 2\nb: c\n").unwrap_err();
        assert!(e.line.is_some(), "{e:?}");
        let bomb = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
        assert!(parse(bomb).is_err(), "alias bomb must hit the budget");
        let deep = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
        assert!(parse(&deep).is_err());
        assert!(decode(b"a: \xff\n").unwrap_err().message.contains("UTF-8"));
        assert!(
            decode(b"\x00\x01binary")
                .unwrap_err()
                .message
                .contains("binary")
        );
    }
}
