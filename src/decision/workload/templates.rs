//! The kinds a policy declares under `podTemplates`: checked when the
//! policy loads, and the pod template read from an object by its path.

use super::{CUSTOM_RESOURCES, Kind, group_of, type_of};
use crate::decision::path::FieldPath;
use crate::decision::view::{ObjectView, TemplateView};

/// One `podTemplates` entry of a policy: a kind winadmit is told the pod
/// template path of.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredKind {
    /// The API group (`example.com`), without version.
    pub group: String,
    pub kind: String,
    /// Dotted keys from the object root to the pod template, the object
    /// with `metadata` and `spec` (`spec.template`, `spec.worker.template`).
    pub path: String,
}

/// The kinds a policy declares, checked and ready to look up.
#[derive(Debug, Clone, Default)]
pub struct PodTemplates {
    declared: Vec<(DeclaredKind, FieldPath)>,
}

/// `podTemplates` in a policy is not usable.
#[derive(Debug, thiserror::Error)]
pub enum PodTemplatesError {
    #[error("podTemplates[{index}]: {field} must not be empty")]
    Empty { index: usize, field: &'static str },
    #[error(
        "podTemplates[{index}]: group {group:?} looks like an apiVersion; give the group alone (`{bare}`): every version is matched"
    )]
    Versioned {
        index: usize,
        group: String,
        bare: String,
    },
    #[error(
        "podTemplates[{index}]: path {path:?} is not dotted keys (`spec.template`); list indices and wildcards are not supported"
    )]
    Path { index: usize, path: String },
    #[error(
        "podTemplates[{index}]: {group} {kind} is built in (pod template at {builtin}); remove the entry"
    )]
    BuiltIn {
        index: usize,
        group: String,
        kind: String,
        builtin: String,
    },
    #[error("podTemplates[{index}]: {group} {kind} is declared twice; keep one entry")]
    Duplicate {
        index: usize,
        group: String,
        kind: String,
    },
}

/// A workload object could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The object does not fit the shape of a Kubernetes object.
    #[error("not a valid Kubernetes object: {0}")]
    Invalid(#[source] serde_json::Error),
    /// A field does not fit its type (an array where an object is
    /// required, ...), at this field path.
    #[error("not a valid Kubernetes object: {path}: {source}")]
    InvalidAt {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    /// A declared kind's path does not lead to a pod template on this object.
    #[error(
        "{kind} {name}: {path} {problem}, but the policy's podTemplates says {group} {kind} keeps its pod template there; fix the object or the podTemplates entry"
    )]
    NoTemplate {
        group: String,
        kind: String,
        name: String,
        path: String,
        problem: &'static str,
    },
}

impl ReadError {
    /// The error reading `value` as a `T`, at the field path where it
    /// happens (below `prefix`, the path of `value` in its object).
    fn invalid<'de, T: serde::Deserialize<'de>>(
        value: &'de serde_json::Value,
        prefix: &str,
        fallback: serde_json::Error,
    ) -> Self {
        match crate::decision::strict::located_in_value::<T>(value) {
            Some((path, source)) => {
                let path = match (prefix, path.as_str()) {
                    (p, ".") => p.to_owned(),
                    ("", rest) => rest.to_owned(),
                    (p, rest) => format!("{p}.{rest}"),
                };
                if path.is_empty() || path == "." {
                    Self::Invalid(source)
                } else {
                    Self::InvalidAt { path, source }
                }
            }
            None => Self::Invalid(fallback),
        }
    }
}

impl PodTemplates {
    /// Checks a policy's `podTemplates` entries.
    ///
    /// # Errors
    /// An entry is empty, names a version, has a path that is not dotted
    /// keys, repeats another or names a built-in kind.
    pub fn new(entries: Vec<DeclaredKind>) -> Result<Self, PodTemplatesError> {
        let mut declared: Vec<(DeclaredKind, FieldPath)> = Vec::with_capacity(entries.len());
        for (index, e) in entries.into_iter().enumerate() {
            for (field, value) in [("group", &e.group), ("kind", &e.kind), ("path", &e.path)] {
                if value.trim().is_empty() {
                    return Err(PodTemplatesError::Empty { index, field });
                }
            }
            if let Some((bare, _)) = e.group.split_once('/') {
                return Err(PodTemplatesError::Versioned {
                    index,
                    bare: bare.to_owned(),
                    group: e.group,
                });
            }
            let keys: Vec<&str> = e.path.split('.').collect();
            let valid_key = |k: &&str| {
                !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            };
            if !keys.iter().all(valid_key) {
                return Err(PodTemplatesError::Path {
                    index,
                    path: e.path,
                });
            }
            if let Some(k) = Kind::from_type(&format!("{}/v1", e.group), &e.kind) {
                let builtin = CUSTOM_RESOURCES
                    .iter()
                    .find(|r| r.kind == k)
                    .map_or("a place winadmit knows", |r| r.template);
                return Err(PodTemplatesError::BuiltIn {
                    index,
                    builtin: builtin.to_owned(),
                    group: e.group,
                    kind: e.kind,
                });
            }
            if declared
                .iter()
                .any(|(d, _)| d.group == e.group && d.kind == e.kind)
            {
                return Err(PodTemplatesError::Duplicate {
                    index,
                    group: e.group,
                    kind: e.kind,
                });
            }
            let path = keys
                .iter()
                .fold(FieldPath::root(), |p, k| p.key((*k).to_owned()));
            declared.push((e, path));
        }
        Ok(Self { declared })
    }

    /// The declared entries, in policy order.
    pub fn iter(&self) -> impl Iterator<Item = &DeclaredKind> {
        self.declared.iter().map(|(d, _)| d)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.declared.is_empty()
    }

    /// The declared entry for an `apiVersion`/`kind`, in any version.
    #[must_use]
    pub fn declared(&self, api_version: &str, kind: &str) -> Option<(&DeclaredKind, &FieldPath)> {
        let group = group_of(api_version);
        self.declared
            .iter()
            .find(|(d, _)| d.group == group && d.kind == kind)
            .map(|(d, p)| (d, p))
    }

    /// The kind of an `apiVersion`/`kind`: built in or declared.
    #[must_use]
    pub fn kind_of(&self, api_version: &str, kind: &str) -> Option<Kind> {
        Kind::from_type(api_version, kind)
            .or_else(|| self.declared(api_version, kind).map(|_| Kind::Declared))
    }

    /// Reads an object into the view, with the pod template of a declared
    /// kind found at its path.
    ///
    /// # Errors
    /// The object is not a Kubernetes object, or it is of a declared kind
    /// and its path does not hold a pod template (an object with a `spec`
    /// object): that is an input error, not something to skip silently.
    pub fn read<'a>(&self, value: &'a serde_json::Value) -> Result<ObjectView<'a>, ReadError> {
        let mut view: ObjectView<'a> = crate::decision::strict::from_value(value)
            .map_err(|e| ReadError::invalid::<ObjectView<'_>>(value, "", e))?;
        let Some((api_version, kind)) = type_of(value) else {
            return Ok(view);
        };
        if Kind::from_type(api_version, kind).is_some() {
            return Ok(view);
        }
        let Some((declared, path)) = self.declared(api_version, kind) else {
            return Ok(view);
        };
        let no_template = |problem: &'static str| ReadError::NoTemplate {
            group: declared.group.clone(),
            kind: declared.kind.clone(),
            name: value
                .pointer("/metadata/name")
                .or_else(|| value.pointer("/metadata/generateName"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("(unnamed)")
                .to_owned(),
            path: path.to_string(),
            problem,
        };
        let at = value
            .pointer(&path.pointer())
            .ok_or_else(|| no_template("does not exist"))?;
        if !at.is_object() {
            return Err(no_template("is not an object"));
        }
        if !at.get("spec").is_some_and(serde_json::Value::is_object) {
            return Err(no_template("has no pod spec (no `spec` object)"));
        }
        let template: TemplateView<'a> = crate::decision::strict::from_value(at)
            .map_err(|e| ReadError::invalid::<TemplateView<'_>>(at, &path.to_string(), e))?;
        view.declared = Some(Box::new(crate::decision::view::DeclaredTemplate {
            path: path.clone(),
            template,
        }));
        Ok(view)
    }
}
