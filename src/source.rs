//! Reading manifests: YAML (multi-document, CRLF, Helm output) and JSON,
//! with source positions for findings and bounded time and memory for
//! hostile input.
//!
//! Parsing uses serde-saphyr (a maintained, panic-free YAML deserializer
//! with budgets against alias bombs and deep nesting; serde_yaml is
//! deprecated). Documents are first read as plain JSON values for the
//! engine; only files with findings are read a second time, as a tree of
//! spanned nodes, to turn JSON Pointers into line and column.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use serde_saphyr::{DuplicateKeyPolicy, Options, Spanned};

use crate::view::Text;

/// Largest file `lint` reads, so one huge file cannot exhaust memory.
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

    fn from_yaml(err: &serde_saphyr::Error) -> Self {
        let loc = err.location().filter(|l| l.line() > 0);
        let mut message = err.without_snippet().to_string();
        // The crate prefixes "error: line L column C: "; keep only the cause.
        if let Some(rest) = message.strip_prefix("error: ") {
            message = rest.to_owned();
        }
        if let Some(l) = loc {
            let prefix = format!("line {} column {}: ", l.line(), l.column());
            if let Some(rest) = message.strip_prefix(&prefix) {
                message = rest.to_owned();
            }
        }
        let mut message = message.lines().next().unwrap_or_default().trim().to_owned();
        // Some causes repeat the position at the end.
        if let Some(l) = loc {
            let suffix = format!(" at line {}, column {}", l.line(), l.column());
            if let Some(rest) = message.strip_suffix(&suffix) {
                message = rest.to_owned();
            }
        }
        if message.contains("budget breached") || message.contains("recursion limit") {
            message = format!(
                "exceeds the parser's safety budget (alias expansion, size or nesting depth): {message}"
            );
        }
        Self {
            line: loc.map(|l| l.line()),
            column: loc.map(|l| l.column()),
            message,
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

fn yaml_options() -> Options {
    let mut o = Options::default();
    // kubectl's YAML reader keeps the last of duplicate keys.
    o.duplicate_keys = DuplicateKeyPolicy::LastWins;
    // kubectl reads `defaultMode: 0644` as octal (YAML 1.1).
    o.legacy_octal_numbers = true;
    o.with_snippet = false;
    #[allow(clippy::field_reassign_with_default)]
    if let Some(b) = o.budget.as_mut() {
        b.max_depth = MAX_DEPTH;
    }
    o
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
    bytes.iter().position(|b| *b == 0)
}

/// Parses every object in a YAML or JSON text.
///
/// # Errors
/// The text is not valid YAML (or JSON), or exceeds a parser budget.
pub fn parse(text: &str) -> Result<Vec<Document>, InputError> {
    let docs: Vec<Json> = parse_multiple(text)?;
    let mut out = Vec::with_capacity(docs.len());
    for (yaml_doc, Json(value)) in docs.into_iter().enumerate() {
        if value.is_null() {
            continue;
        }
        if is_list(&value) {
            let Value::Object(mut map) = value else {
                unreachable!("is_list checks for an object")
            };
            if let Some(Value::Array(items)) = map.remove("items") {
                for (i, item) in items.into_iter().enumerate() {
                    let index = out.len();
                    out.push(Document {
                        index,
                        yaml_doc,
                        pointer: format!("/items/{i}"),
                        value: item,
                    });
                }
            }
            continue;
        }
        let index = out.len();
        out.push(Document {
            index,
            yaml_doc,
            pointer: String::new(),
            value,
        });
    }
    Ok(out)
}

/// `kind: List` (or `*List`, as `kubectl get -o yaml` writes) with `items`.
fn is_list(v: &Value) -> bool {
    v.get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k == "List" || k.ends_with("List"))
        && v.get("items").is_some_and(Value::is_array)
}

/// Line and column (1-based) of the field a JSON Pointer names inside YAML
/// document `yaml_doc` of `text`: the key's position for a map entry, the
/// item's for a sequence entry. When the field does not exist (a finding
/// about a missing field), the deepest existing ancestor is returned.
#[must_use]
pub fn locate(text: &str, yaml_doc: usize, pointer: &str) -> Option<(u64, u64)> {
    locator(text).ok()?.locate(yaml_doc, pointer)
}

/// A file parsed once for positions, for many lookups.
pub struct Locator {
    docs: Vec<Spanned<Node>>,
}

/// Parses `text` for position lookups.
///
/// # Errors
/// The text does not parse (it parsed before, so this is unexpected).
pub fn locator(text: &str) -> Result<Locator, InputError> {
    Ok(Locator {
        docs: parse_multiple(text)?,
    })
}

/// Parses every document of a text as `T`.
///
/// The YAML parser rejects tabs at the start of continuation lines inside
/// quoted multi-line scalars, which YAML allows (and which real manifests
/// with embedded scripts contain). On that error only, the text is parsed
/// again with leading tabs turned into spaces: columns stay the same, and
/// the only values that can change are script bodies no rule reads.
fn parse_multiple<T: for<'de> Deserialize<'de>>(text: &str) -> Result<Vec<T>, InputError> {
    match serde_saphyr::from_multiple_with_options(text, yaml_options()) {
        Ok(docs) => Ok(docs),
        Err(e) if e.to_string().contains("tab") && text.contains("\n\t") => {
            serde_saphyr::from_multiple_with_options(&retab(text), yaml_options())
                .map_err(|_| InputError::from_yaml(&e))
        }
        Err(e) => Err(InputError::from_yaml(&e)),
    }
}

/// Replaces tabs with spaces in the leading whitespace of lines that
/// continue a quoted scalar (where YAML allows them). Tabs used as real
/// indentation are left alone, so they stay an error.
fn retab(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    for line in text.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        if quote.is_some() {
            out.extend(
                line[..indent]
                    .chars()
                    .map(|c| if c == '\t' { ' ' } else { c }),
            );
            out.push_str(&line[indent..]);
        } else {
            out.push_str(line);
        }
        quote = quote_state_after(line, quote);
    }
    out
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

impl Locator {
    #[must_use]
    pub fn locate(&self, yaml_doc: usize, pointer: &str) -> Option<(u64, u64)> {
        let mut node = self.docs.get(yaml_doc)?;
        let mut at = position(node);
        if pointer.is_empty() {
            return at;
        }
        for token in pointer.split('/').skip(1) {
            let token = token.replace("~1", "/").replace("~0", "~");
            let next = match &node.value {
                Node::Map(entries) => {
                    entries
                        .iter()
                        .rev()
                        .find(|(k, _)| k.value == token)
                        .map(|(k, v)| {
                            at = position_of(&k.referenced);
                            v
                        })
                }
                Node::Seq(items) => token
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get(i))
                    .inspect(|v| {
                        at = position(v);
                    }),
                Node::Scalar => None,
            };
            match next {
                Some(n) => node = n,
                None => return at,
            }
        }
        at
    }
}

impl Locator {
    /// The node a JSON Pointer names, exactly (no ancestor fallback).
    fn node(&self, yaml_doc: usize, pointer: &str) -> Option<&Spanned<Node>> {
        let mut node = self.docs.get(yaml_doc)?;
        for token in pointer.split('/').skip(1) {
            let token = token.replace("~1", "/").replace("~0", "~");
            node = match &node.value {
                Node::Map(entries) => entries
                    .iter()
                    .rev()
                    .find(|(k, _)| k.value == token)
                    .map(|(_, v)| v)?,
                Node::Seq(items) => items.get(token.parse::<usize>().ok()?)?,
                Node::Scalar => return None,
            };
        }
        Some(node)
    }

    /// Position of the key of the map entry a pointer names, if it exists.
    #[must_use]
    pub fn key_position(&self, yaml_doc: usize, pointer: &str) -> Option<(u64, u64)> {
        let (parent, last) = pointer.rsplit_once('/')?;
        let last = last.replace("~1", "/").replace("~0", "~");
        match &self.node(yaml_doc, parent)?.value {
            Node::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k.value == last)
                .and_then(|(k, _)| position_of(&k.referenced)),
            _ => None,
        }
    }

    /// Position of the first key of the mapping a pointer names, if it is a
    /// non-empty mapping.
    #[must_use]
    pub fn first_key_position(&self, yaml_doc: usize, pointer: &str) -> Option<(u64, u64)> {
        match &self.node(yaml_doc, pointer)?.value {
            Node::Map(entries) => entries
                .first()
                .and_then(|(k, _)| position_of(&k.referenced)),
            _ => None,
        }
    }
}

fn position(n: &Spanned<Node>) -> Option<(u64, u64)> {
    position_of(&n.referenced)
}

fn position_of(l: &serde_saphyr::Location) -> Option<(u64, u64)> {
    (l.line() > 0).then(|| (l.line(), l.column()))
}

/// A YAML node with positions, for lookups only.
enum Node {
    Scalar,
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<String>, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any YAML node")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_i128<E>(self, _: i128) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_u128<E>(self, _: u128) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_str<E>(self, _: &str) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_bytes<E>(self, _: &[u8]) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_none<E>(self) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<Node>>()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(k) = map.next_key::<Spanned<KeyText>>()? {
                    let v = map.next_value::<Spanned<Node>>()?;
                    entries.push((
                        Spanned {
                            value: k.value.0,
                            referenced: k.referenced,
                            defined: k.defined,
                        },
                        v,
                    ));
                }
                Ok(Node::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

/// A map key of any scalar type, as text.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Text::deserialize(d).map(|t| KeyText(t.0.into_owned()))
    }
}

/// A document as a JSON value, with non-string map keys (`9000: svc:80` in
/// an ingress-nginx ConfigMap) kept as their text, as Kubernetes' YAML
/// reader does.
struct Json(Value);

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
                Ok(Json(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
                Ok(Json(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
                Ok(Json(v.into()))
            }
            fn visit_i128<E>(self, v: i128) -> Result<Json, E> {
                Ok(Json(Value::String(v.to_string())))
            }
            fn visit_u128<E>(self, v: u128) -> Result<Json, E> {
                Ok(Json(Value::String(v.to_string())))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
                Ok(Json(
                    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
                ))
            }
            fn visit_str<E>(self, v: &str) -> Result<Json, E> {
                Ok(Json(Value::String(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Json, E> {
                Ok(Json(Value::String(v)))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Json, E> {
                Ok(Json(Value::String(String::from_utf8_lossy(v).into_owned())))
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json(Value::Null))
            }
            fn visit_none<E>(self) -> Result<Json, E> {
                Ok(Json(Value::Null))
            }
            fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
                Json::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(Json(item)) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Json(Value::Array(items)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
                let mut out = Map::new();
                while let Some(KeyText(k)) = map.next_key()? {
                    let Json(v) = map.next_value()?;
                    out.insert(k, v);
                }
                Ok(Json(Value::Object(out)))
            }
        }
        d.deserialize_any(V)
    }
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
        let loc = locate(
            MULTI,
            docs[1].yaml_doc,
            "/items/0/spec/containers/0/securityContext/privileged",
        );
        assert_eq!(loc, Some((19, 9)));
        // A missing field points at its deepest existing ancestor.
        let loc = locate(MULTI, docs[1].yaml_doc, "/items/0/spec/hostNetwork");
        assert_eq!(loc, Some((15, 3)));
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
    fn crlf_octal_and_duplicate_keys() {
        let text = "kind: Pod\r\nmode: 0644\r\nname: a\r\nname: b\r\n";
        let docs = parse(text).unwrap();
        assert_eq!(docs[0].value["mode"], 420);
        assert_eq!(docs[0].value["name"], "b");
        assert_eq!(locate(text, 0, "/mode"), Some((2, 1)));
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
