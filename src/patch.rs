//! From findings and policy to one JSON Patch (RFC 6902).
//!
//! Operations are JSON Pointers into the original document: never a
//! re-serialized typed object, so fields the view does not model survive
//! untouched. Every operation is written to apply to the document as it is
//! (field absent, empty, or present), and a patched object yields no new
//! patch, so reinvocation is safe.

use serde_json::{Value, json};

use crate::engine::Evaluation;
use crate::finding::{FixKind, PatchOp};
use crate::path::{FieldPath, escape_pointer};
use crate::policy::Policy;
use crate::rules::hyperv as hyperv_annotation;
use crate::targeting::{OS_LABEL, Os};
use crate::view::SpecView;
use crate::workload::Workload;

/// What the caller knows about the request.
#[derive(Debug, Clone, Copy, Default)]
pub struct MutationContext<'c> {
    /// A CREATE (not an UPDATE): fields immutable on pods may be set.
    pub create: bool,
    /// The namespace's value of the policy's `mutation.isolationNamespaceLabel`.
    pub namespace_isolation: Option<&'c str>,
}

/// A patch and a one-line explanation of each change (for `warnings`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mutation {
    pub ops: Vec<PatchOp>,
    pub explanations: Vec<String>,
}

impl Mutation {
    fn push(&mut self, op: PatchOp, why: impl Into<String>) {
        if self.ops.iter().any(|o| o.path() == op.path()) {
            return;
        }
        self.ops.push(op);
        self.explanations.push(why.into());
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// The operation that adds `kubernetes.io/os: windows` to a pod spec's
/// node selector, whether or not the selector exists.
#[must_use]
pub fn add_node_selector(spec_path: &FieldPath, spec: &SpecView<'_>) -> PatchOp {
    if spec.node_selector.is_some() {
        PatchOp::Add {
            path: spec_path.key("nodeSelector").map_key(OS_LABEL).pointer(),
            value: json!(Os::Windows.as_str()),
        }
    } else {
        PatchOp::Add {
            path: spec_path.key("nodeSelector").pointer(),
            value: json!({ OS_LABEL: Os::Windows.as_str() }),
        }
    }
}

/// The patch the mutating webhook returns (and `lint --fix` applies) for a
/// workload already evaluated. Non-Windows workloads are never patched.
#[must_use]
pub fn mutation(
    policy: &Policy,
    workload: &Workload<'_, '_>,
    eval: &Evaluation,
    cx: MutationContext<'_>,
) -> Mutation {
    let mut m = Mutation::default();
    let Some(spec) = workload.spec else { return m };
    let settings = &policy.mutation;
    let inferred = settings.infer_from_images
        && eval
            .findings
            .iter()
            .any(|f| f.rule == "WIN-UNPINNED-IMAGE" && f.fix.is_some());
    if eval.exempt.is_some()
        || eval.target.is_conflicting()
        || !(eval.target.is_windows() || inferred)
    {
        return m;
    }

    let has_os_label = spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(OS_LABEL))
        .is_some();
    if settings.inject_node_selector && !has_os_label {
        m.push(
            add_node_selector(&workload.spec_path, spec),
            "winadmit added nodeSelector kubernetes.io/os=windows",
        );
    }
    if settings.set_os_name && cx.create && spec.os.is_none() && !inferred {
        m.push(
            PatchOp::Add {
                path: workload.spec_path.key("os").pointer(),
                value: json!({"name": "windows"}),
            },
            "winadmit set spec.os.name=windows",
        );
    }
    add_tolerations(&mut m, workload, spec, &settings.tolerations);
    let isolation = cx.namespace_isolation.or(settings.isolation.as_deref());
    if let Some(isolation) = isolation.filter(|i| matches!(*i, "process" | "hyperv")) {
        add_isolation(&mut m, workload, isolation);
    }

    for f in &eval.findings {
        let Some(fix) = &f.fix else { continue };
        let wanted = match fix.kind {
            FixKind::RemoveNoOp => settings.remove_no_op_fields,
            FixKind::EmptyDirOffMemory => settings.empty_dir_off_memory,
            // Node selection is handled above, once.
            FixKind::Scheduling => false,
        };
        if wanted {
            for op in &fix.ops {
                m.push(
                    op.clone(),
                    format!("winadmit: {} ({}: {})", fix.description, f.rule, f.field),
                );
            }
        }
    }
    m
}

fn add_tolerations(
    m: &mut Mutation,
    workload: &Workload<'_, '_>,
    spec: &SpecView<'_>,
    wanted: &[Value],
) {
    let existing = spec.tolerations.as_deref().unwrap_or_default();
    let mut missing: Vec<&Value> = wanted
        .iter()
        .filter(|t| {
            !existing.iter().any(|e| {
                let same =
                    |field: &str, have: Option<&str>| t.get(field).and_then(Value::as_str) == have;
                same("key", e.key.as_deref())
                    && same("value", e.value.as_deref())
                    && same("effect", e.effect.as_deref())
            })
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    let path = workload.spec_path.key("tolerations");
    if spec.tolerations.is_none() {
        let all: Vec<Value> = missing.drain(..).cloned().collect();
        m.push(
            PatchOp::Add {
                path: path.pointer(),
                value: Value::Array(all),
            },
            "winadmit added the Windows node tolerations",
        );
        return;
    }
    for (n, t) in missing.into_iter().enumerate() {
        let op = PatchOp::Add {
            path: format!("{}/-", path.pointer()),
            value: t.clone(),
        };
        // "/-" paths repeat; keep them distinct for de-duplication.
        if m.ops.iter().all(|o| o != &op) {
            m.ops.push(op);
            m.explanations.push(format!(
                "winadmit added a Windows node toleration ({})",
                n + 1
            ));
        }
    }
}

fn add_isolation(m: &mut Mutation, workload: &Workload<'_, '_>, isolation: &str) {
    let key = hyperv_annotation::ISOLATION_ANNOTATION;
    if workload
        .pod_annotations()
        .and_then(|a| a.get(key))
        .is_some()
    {
        return;
    }
    let meta = FieldPath::keys(workload.kind.pod_metadata_path());
    let why = format!("winadmit set {key}={isolation}");
    let op = match (workload.pod_meta, workload.pod_annotations()) {
        (_, Some(_)) => PatchOp::Add {
            path: format!(
                "{}/{}",
                meta.key("annotations").pointer(),
                escape_pointer(key)
            ),
            value: json!(isolation),
        },
        (Some(_), None) => PatchOp::Add {
            path: meta.key("annotations").pointer(),
            value: json!({ key: isolation }),
        },
        (None, None) => PatchOp::Add {
            path: meta.pointer(),
            value: json!({"annotations": { key: isolation }}),
        },
    };
    m.push(op, why);
}

/// Applies a patch to a document, as the API server would.
///
/// # Errors
/// An operation does not apply (a bug in patch generation, or a document
/// that changed underneath).
pub fn apply(doc: &mut Value, ops: &[PatchOp]) -> Result<(), json_patch::PatchError> {
    json_patch::patch(doc, &to_json_patch(ops))
}

/// Converts to the `json_patch` crate's type (for `AdmissionResponse::with_patch`).
///
/// # Panics
/// Never: `PatchOp` serializes to valid RFC 6902 operations.
#[must_use]
pub fn to_json_patch(ops: &[PatchOp]) -> json_patch::Patch {
    serde_json::from_value(serde_json::to_value(ops).expect("patch ops serialize"))
        .expect("PatchOp serializes to RFC 6902 operations")
}
