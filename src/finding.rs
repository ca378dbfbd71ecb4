//! What the engine reports: findings, their severity, and their fixes.

use serde::Serialize;
use serde_json::Value;

use crate::path::FieldPath;

/// How serious a finding is. `Error` findings deny admission and fail lint.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Advice that holds for Windows nodes; never an admission warning
    /// unless a policy raises it.
    Info,
    Warning,
    Error,
}

impl Severity {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// One RFC 6902 operation, with its path as a JSON Pointer into the
/// original document.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum PatchOp {
    Add { path: String, value: Value },
    Remove { path: String },
    Replace { path: String, value: Value },
}

impl PatchOp {
    #[must_use]
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Remove { path } | Self::Replace { path, .. } => path,
        }
    }
}

/// What kind of change a fix makes; the policy's `mutation` section decides
/// which kinds the mutating webhook and `lint --fix` apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FixKind {
    /// Removes a Linux-only setting that has no effect on Windows
    /// (`mutation.removeNoOpFields`).
    RemoveNoOp,
    /// Moves an `emptyDir` from memory to node disk (`mutation.emptyDirOffMemory`).
    EmptyDirOffMemory,
    /// Adds scheduling constraints (`mutation.injectNodeSelector`).
    Scheduling,
}

/// A safe, automatic fix: what it does, and the operations that do it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fix {
    pub kind: FixKind,
    pub description: String,
    pub ops: Vec<PatchOp>,
}

/// One violated rule at one field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    /// Kubernetes notation from the object root.
    pub field: FieldPath,
    /// What is wrong, naming the value, without the path or rule id (the
    /// renderers add those).
    pub message: String,
    /// The safe fix, when one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}
