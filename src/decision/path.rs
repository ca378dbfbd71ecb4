//! Field paths: one value, two renderings.
//!
//! Findings name a field twice: in Kubernetes notation for people
//! (`spec.containers[0].securityContext.privileged`) and as an RFC 6901 JSON
//! Pointer for machines (`/spec/containers/0/securityContext/privileged`),
//! which is what JSON Patch fixes and source-position lookups use.

use std::borrow::Cow;
use std::fmt;

/// One step from a parent node to a child.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    /// A struct field: `.name` (field names are mostly literals: borrowed).
    Key(Cow<'static, str>),
    /// A map entry (labels, annotations, nodeSelector, resource lists):
    /// `[key]`, as the API server writes map keys.
    MapKey(Box<str>),
    Index(usize),
}

/// A path from the root of a Kubernetes object to one of its fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath(Vec<Segment>);

impl FieldPath {
    #[must_use]
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// Builds a path from dotted keys, e.g. `FieldPath::keys(&["spec", "template"])`.
    #[must_use]
    pub fn keys(keys: &[&'static str]) -> Self {
        Self(
            keys.iter()
                .map(|k| Segment::Key(Cow::Borrowed(k)))
                .collect(),
        )
    }

    /// This path followed by field `key` (a literal, or an owned name).
    #[must_use]
    pub fn key(&self, key: impl Into<Cow<'static, str>>) -> Self {
        let mut next = Self(Vec::with_capacity(self.0.len() + 1));
        next.0.extend(self.0.iter().cloned());
        next.0.push(Segment::Key(key.into()));
        next
    }

    /// This path followed by the field names `keys`, in place.
    pub fn push_keys(&mut self, keys: &[&'static str]) {
        self.0
            .extend(keys.iter().map(|k| Segment::Key(Cow::Borrowed(k))));
    }

    /// A map entry, rendered `[key]`.
    #[must_use]
    pub fn map_key(&self, key: &str) -> Self {
        let mut next = self.clone();
        next.0.push(Segment::MapKey(key.into()));
        next
    }

    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        let mut next = self.clone();
        next.0.push(Segment::Index(index));
        next
    }

    /// This path followed by `rest`.
    #[must_use]
    pub fn join(&self, rest: &FieldPath) -> Self {
        let mut next = self.clone();
        next.0.extend(rest.0.iter().cloned());
        next
    }

    #[must_use]
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    #[must_use]
    pub fn starts_with(&self, prefix: &FieldPath) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// RFC 6901 JSON Pointer: `~` becomes `~0` and `/` becomes `~1`.
    #[must_use]
    pub fn pointer(&self) -> String {
        let mut out = String::new();
        self.push_pointer(&mut out);
        out
    }

    /// Appends [`pointer`](Self::pointer) to `out`, without a string per
    /// segment.
    pub fn push_pointer(&self, out: &mut String) {
        for seg in &self.0 {
            out.push('/');
            let name: &str = match seg {
                Segment::Key(k) => k,
                Segment::MapKey(k) => k,
                Segment::Index(i) => {
                    push_index(out, *i);
                    continue;
                }
            };
            if name.bytes().any(|b| b == b'~' || b == b'/') {
                out.push_str(&escape_pointer(name));
            } else {
                out.push_str(name);
            }
        }
    }
}

impl From<&FieldPath> for json_patch::jsonptr::PointerBuf {
    /// The path as an RFC 6901 pointer (the crate escapes each token).
    fn from(path: &FieldPath) -> Self {
        Self::from_tokens(path.segments().iter().map(|seg| match seg {
            Segment::Key(k) => json_patch::jsonptr::Token::new(&**k),
            Segment::MapKey(k) => json_patch::jsonptr::Token::new(&**k),
            Segment::Index(i) => json_patch::jsonptr::Token::new(i.to_string()),
        }))
    }
}

impl From<FieldPath> for json_patch::jsonptr::PointerBuf {
    fn from(path: FieldPath) -> Self {
        Self::from(&path)
    }
}

/// Appends `i` in decimal (no formatting machinery: a pointer per finding).
fn push_index(out: &mut String, mut i: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|d| char::from(*d)));
}

/// Escapes one JSON Pointer reference token (`kubernetes.io/os` -> `kubernetes.io~1os`).
#[must_use]
pub fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Kubernetes notation: dotted keys, `[i]` indices, and `[key]` for keys that
/// contain dots or slashes (as the API server writes map keys, e.g.
/// `metadata.annotations[kubernetes.io/os]`).
impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Piece by piece: `write!` per segment was most of the cost.
        let bracket = |f: &mut fmt::Formatter<'_>, k: &str| {
            f.write_str("[")?;
            f.write_str(k)?;
            f.write_str("]")
        };
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::MapKey(k) => bracket(f, k)?,
                Segment::Key(k) if k.bytes().any(|b| b == b'.' || b == b'/') => bracket(f, k)?,
                Segment::Key(k) if i == 0 => f.write_str(k)?,
                Segment::Key(k) => {
                    f.write_str(".")?;
                    f.write_str(k)?;
                }
            }
        }
        Ok(())
    }
}

impl serde::Serialize for FieldPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_kubernetes_notation_and_pointer() {
        let p = FieldPath::keys(&["spec", "containers"])
            .index(0)
            .key("securityContext")
            .key("privileged");
        assert_eq!(
            p.to_string(),
            "spec.containers[0].securityContext.privileged"
        );
        assert_eq!(p.pointer(), "/spec/containers/0/securityContext/privileged");
        let p = FieldPath::keys(&["spec", "volumes"])
            .index(120)
            .key("a.b/c~d");
        assert_eq!(p.to_string(), "spec.volumes[120][a.b/c~d]");
        assert_eq!(p.pointer(), "/spec/volumes/120/a.b~1c~0d");
    }

    #[test]
    fn escapes_map_keys() {
        let p = FieldPath::keys(&["spec", "nodeSelector"]).map_key("kubernetes.io/os");
        assert_eq!(p.to_string(), "spec.nodeSelector[kubernetes.io/os]");
        assert_eq!(p.pointer(), "/spec/nodeSelector/kubernetes.io~1os");
        assert_eq!(escape_pointer("a~b/c"), "a~0b~1c");
        let limits = FieldPath::keys(&["resources", "limits"]).map_key("hugepages-2Mi");
        assert_eq!(limits.to_string(), "resources.limits[hugepages-2Mi]");
    }
}
