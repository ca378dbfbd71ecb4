//! What the engine reports: findings, their severity, and their fixes.

use serde::Serialize;
use serde_json::Value;

use crate::decision::path::FieldPath;

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
/// original document: the `json_patch` crate's type, so patches are
/// applied and sent without conversion.
pub use json_patch::PatchOperation;

/// `add` of `value` at `path`.
#[must_use]
pub fn add_op(path: impl Into<json_patch::jsonptr::PointerBuf>, value: Value) -> PatchOperation {
    PatchOperation::Add(json_patch::AddOperation {
        path: path.into(),
        value,
    })
}

/// `add` of `value` at the end of the array at `path` (`path/-`).
#[must_use]
pub fn append_op(path: &FieldPath, value: Value) -> PatchOperation {
    let mut pointer = json_patch::jsonptr::PointerBuf::from(path);
    pointer.push_back("-");
    add_op(pointer, value)
}

/// `remove` of what is at `path`.
#[must_use]
pub fn remove_op(path: impl Into<json_patch::jsonptr::PointerBuf>) -> PatchOperation {
    PatchOperation::Remove(json_patch::RemoveOperation { path: path.into() })
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
    /// Pins a pod that selects no OS to the only OS its images run on
    /// (`mutation.pinWindowsImages`, `mutation.pinLinuxImages`).
    PinByImages,
    /// Fills `gmsaCredentialSpec` in from the GMSACredentialSpec a Pod
    /// names (always, as the upstream gMSA webhook does; turn the rule
    /// WIN-GMSA-INLINE off to stop it).
    InlineCredentialSpec,
}

/// A safe, automatic fix: what it does, and the operations that do it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fix {
    pub kind: FixKind,
    pub description: String,
    pub ops: Vec<PatchOperation>,
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
