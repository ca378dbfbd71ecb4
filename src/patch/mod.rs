//! From findings and policy to one JSON Patch (RFC 6902).
//!
//! Operations are JSON Pointers into the original document: never a
//! re-serialized typed object, so fields the view does not model survive
//! untouched. Every operation is written to apply to the document as it is
//! (field absent, empty, or present), and a patched object yields no new
//! patch, so reinvocation is safe.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::engine::Evaluation;
use crate::finding::{FixKind, PatchOperation};
use crate::policy::Policy;
use crate::targeting::OS_LABEL;
use crate::view::SpecView;
use crate::workload::Workload;

mod overlay;
pub use overlay::settle as settle_on_view;

/// What the caller knows about the request.
#[derive(Debug, Clone, Copy, Default)]
pub struct MutationContext<'c> {
    /// A CREATE (not an UPDATE): fields immutable on pods may be set.
    pub create: bool,
    /// The namespace's value of the policy's `mutation.isolationNamespaceLabel`.
    pub namespace_isolation: Option<&'c str>,
    /// The namespace enforces Pod Security `restricted` at a version older
    /// than v1.25, which still requires the Linux-only fields of pods with
    /// `spec.os.name: windows`: setting `spec.os` would get the pod refused.
    pub psa_restricted_before_1_25: bool,
    /// What registries say of the images (`Context::images`): their
    /// Windows builds, for `mutation.injectWindowsBuild`.
    pub images: Option<&'c crate::images::KnownImages>,
}

/// Does a namespace with these Pod Security labels refuse `spec.os.name:
/// windows` pods that lack the Linux-only restricted fields? Pod Security
/// exempts Windows pods from them only from v1.25 on (docs/verdicts.md,
/// "Pod Security Admission"; kubernetes/pod-security-admission policy/check_*.go).
#[must_use]
pub fn psa_restricted_before_1_25(enforce: Option<&str>, version: Option<&str>) -> bool {
    if enforce != Some("restricted") {
        return false;
    }
    match version.map(str::trim) {
        None | Some("" | "latest") => false,
        Some(v) => v
            .parse::<crate::version::KubeVersion>()
            .is_ok_and(|v| v < crate::version::KubeVersion::new(1, 25)),
    }
}

/// The namespace labels Pod Security Admission reads.
pub const PSA_ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const PSA_ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";

/// A patch and a one-line explanation of each change (for `warnings`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mutation {
    pub ops: Vec<PatchOperation>,
    pub explanations: Vec<String>,
    /// For each operation (same index), the finding it fixes; `None` for
    /// what the policy adds on its own (the node selector, `spec.os`,
    /// tolerations, the isolation annotation).
    pub fixes: Vec<Option<Fixed>>,
    /// Warnings about changes not made (e.g. `spec.os` left unset).
    pub notes: Vec<String>,
    /// The paths [`Mutation::push`] has added, so de-duplication is a hash
    /// lookup (a scan made a pod with thousands of fixes quadratic).
    pushed: HashSet<String>,
}

/// The finding a patch operation fixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixed {
    pub rule: &'static str,
    /// The finding's field path.
    pub field: String,
    /// What the fix does (the rule's fix description).
    pub description: String,
}

impl Mutation {
    fn push(&mut self, op: PatchOperation, why: impl Into<String>, fixed: Option<Fixed>) {
        if !self.pushed.insert(op.path().as_str().to_owned()) {
            return;
        }
        self.ops.push(op);
        self.explanations.push(why.into());
        self.fixes.push(fixed);
    }

    /// Keeps the first `len` operations, with their explanations and rules.
    fn truncate(&mut self, len: usize) {
        self.ops.truncate(len);
        self.explanations.truncate(len);
        self.fixes.truncate(len);
    }

    /// The rules whose findings this patch fixes, each once, in order.
    #[must_use]
    pub fn fixed_rules(&self) -> Vec<&'static str> {
        let mut ids: Vec<&'static str> = Vec::new();
        for fixed in self.fixes.iter().flatten() {
            if !ids.contains(&fixed.rule) {
                ids.push(fixed.rule);
            }
        }
        ids
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

pub use crate::targeting::add_node_selector;

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
    if eval.exempt.is_some() {
        return m;
    }
    // The gMSA credential spec is filled in for every pod that is not
    // bound to Linux, as the upstream gMSA webhook does (it looks at no
    // OS): a pod naming a gMSA is a Windows pod whatever it selects.
    if !eval.target.is_linux() {
        push_fixes(&mut m, eval, |kind| kind == FixKind::InlineCredentialSpec);
    }
    let settings = &policy.mutation;
    // Targeting by facts: the registry says an image has only Windows
    // platforms (always), or its name says Windows (when the policy asks).
    let by_facts = eval
        .findings
        .iter()
        .find(|f| f.rule == crate::rules::IMAGE_WINDOWS_ONLY && f.fix.is_some());
    let inferred = by_facts.is_some()
        || (settings.infer_from_images
            && eval
                .findings
                .iter()
                .any(|f| f.rule == crate::rules::UNPINNED_IMAGE && f.fix.is_some()));
    if eval.target.is_conflicting() || !(eval.target.is_windows() || inferred) {
        return m;
    }

    let has_os_label = spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(OS_LABEL))
        .is_some();
    if settings.inject_node_selector && !has_os_label {
        let (why, fixed) = match by_facts {
            Some(f) => {
                let description = f.fix.as_ref().map_or("", |fix| fix.description.as_str());
                (
                    format!("winadmit: {description} ({}: {})", f.rule, f.field),
                    Some(Fixed {
                        rule: f.rule,
                        field: f.field.to_string(),
                        description: description.to_owned(),
                    }),
                )
            }
            None => (
                "winadmit added nodeSelector kubernetes.io/os=windows".to_owned(),
                None,
            ),
        };
        m.push(add_node_selector(&workload.spec_path, spec), why, fixed);
    }
    if settings.set_os_name && cx.create && spec.os.is_none() && !inferred {
        if cx.psa_restricted_before_1_25 {
            m.notes.push(
                "winadmit left spec.os unset: Pod Security restricted before v1.25 here would refuse the pod".to_owned(),
            );
        } else {
            m.push(
                crate::finding::add_op(workload.spec_path.key("os"), json!({"name": "windows"})),
                "winadmit set spec.os.name=windows",
                None,
            );
        }
    }
    let mut tolerations = settings.tolerations.clone();
    if settings.tolerate_windows_taint
        && let Some(taint) = &policy.params.windows_taint
        && !spec
            .tolerations
            .iter()
            .flatten()
            .any(|t| crate::tolerations::tolerates(t, taint) != crate::tolerations::Tolerates::No)
    {
        tolerations.push(taint.toleration());
    }
    add_tolerations(&mut m, workload, spec, &tolerations);
    if settings.inject_windows_build && !eval.hyperv {
        add_windows_build(&mut m, workload, spec, cx.images);
    }
    let isolation = cx.namespace_isolation.or(settings.isolation.as_deref());
    if let Some(isolation) = isolation.filter(|i| matches!(*i, "process" | "hyperv")) {
        add_isolation(&mut m, workload, isolation);
    }

    push_fixes(&mut m, eval, |kind| match kind {
        FixKind::RemoveNoOp => settings.remove_no_op_fields,
        FixKind::EmptyDirOffMemory => settings.empty_dir_off_memory,
        // Node selection is handled above, once; the gMSA contents first.
        FixKind::Scheduling | FixKind::InlineCredentialSpec => false,
    });
    m
}

/// Adds the fixes of the findings whose kind is `wanted`.
fn push_fixes(m: &mut Mutation, eval: &Evaluation, wanted: impl Fn(FixKind) -> bool) {
    for f in &eval.findings {
        let Some(fix) = &f.fix else { continue };
        if wanted(fix.kind) {
            for op in &fix.ops {
                m.push(
                    op.clone(),
                    format!("winadmit: {} ({}: {})", fix.description, f.rule, f.field),
                    Some(Fixed {
                        rule: f.rule,
                        field: f.field.to_string(),
                        description: fix.description.to_string(),
                    }),
                );
            }
        }
    }
}

/// Adds `node.kubernetes.io/windows-build` when the images whose build is
/// known leave exactly one build they can all run on, the pod does not
/// select a build yet, and it is not a HostProcess pod (HostProcess
/// containers need no matching build). An image's builds are the registry's
/// facts where known (its Windows platforms' `os.version`: an index with
/// 10.0.17763 and 10.0.20348 runs on either), else the build its tag names.
fn add_windows_build(
    m: &mut Mutation,
    workload: &Workload<'_, '_>,
    spec: &SpecView<'_>,
    images: Option<&crate::images::KnownImages>,
) {
    use crate::windows_builds::{WINDOWS_BUILD_LABEL, image_build};
    if spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(WINDOWS_BUILD_LABEL))
        .is_some()
        || crate::engine::host_process(spec).all
    {
        return;
    }
    let mut common: Option<Vec<crate::windows_builds::Build>> = None;
    let mut by_facts = false;
    for image in [
        &spec.init_containers,
        &spec.containers,
        &spec.ephemeral_containers,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .filter_map(|c| c.image.as_deref())
    {
        let builds = match images.and_then(|k| k.facts(image)) {
            Some(facts) => {
                by_facts = true;
                facts.windows_builds()
            }
            None => image_build(image).into_iter().collect(),
        };
        if builds.is_empty() {
            continue;
        }
        common = Some(match common {
            None => builds,
            Some(mut c) => {
                c.retain(|b| builds.contains(b));
                c
            }
        });
    }
    let Some([build]) = common.as_deref() else {
        return;
    };
    let build = *build;
    let source = if by_facts {
        "the images' Windows build, by the registry's facts"
    } else {
        "the images' Windows build"
    };
    let selector = workload.spec_path.key("nodeSelector");
    let selector_pointer = selector.pointer();
    let created = m.ops.iter().any(|o| o.path().as_str() == selector_pointer);
    let op = if spec.node_selector.is_some() || created {
        crate::finding::add_op(
            selector.map_key(WINDOWS_BUILD_LABEL),
            json!(build.to_string()),
        )
    } else {
        crate::finding::add_op(&selector, json!({ WINDOWS_BUILD_LABEL: build.to_string() }))
    };
    m.push(
        op,
        format!("winadmit added nodeSelector {WINDOWS_BUILD_LABEL}={build} ({source})"),
        None,
    );
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
            crate::finding::add_op(&path, Value::Array(all)),
            "winadmit added the Windows node tolerations",
            None,
        );
        return;
    }
    for (n, t) in missing.into_iter().enumerate() {
        let op = crate::finding::append_op(&path, t.clone());
        // "/-" paths repeat; keep them distinct for de-duplication.
        if m.ops.iter().all(|o| o != &op) {
            m.ops.push(op);
            m.explanations.push(format!(
                "winadmit added a Windows node toleration ({})",
                n + 1
            ));
            m.fixes.push(None);
        }
    }
}

fn add_isolation(m: &mut Mutation, workload: &Workload<'_, '_>, isolation: &str) {
    let key = crate::targeting::ISOLATION_ANNOTATION;
    if workload
        .pod_annotations()
        .and_then(|a| a.get(key))
        .is_some()
    {
        return;
    }
    let meta = workload.pod_metadata_path();
    let why = format!("winadmit set {key}={isolation}");
    let op = match (workload.pod_meta, workload.pod_annotations()) {
        (_, Some(_)) => {
            crate::finding::add_op(meta.key("annotations").map_key(key), json!(isolation))
        }
        (Some(_), None) => {
            crate::finding::add_op(meta.key("annotations"), json!({ key: isolation }))
        }
        (None, None) => crate::finding::add_op(&meta, json!({"annotations": { key: isolation }})),
    };
    m.push(op, why, None);
}

/// Rounds of re-evaluation before giving up on a fixpoint.
const SETTLE_ROUNDS: usize = 4;

/// Does this operation change how the pod is targeted (`spec.os`,
/// `nodeSelector`)? Only then can the next evaluation find new fixes:
/// removals only remove findings; tolerations and annotations carry none.
#[must_use]
pub fn changes_targeting(op: &PatchOperation, spec_pointer: &str) -> bool {
    op.path()
        .as_str()
        .strip_prefix(spec_pointer)
        .is_some_and(|rest| {
            rest == "/os" || rest.starts_with("/os/") || rest.starts_with("/nodeSelector")
        })
}

/// The mutation for a document, settled to a fixpoint.
///
/// One fix can make another necessary: setting `spec.os.name: windows`
/// makes the API server reject Linux-only fields it ignored before (even
/// `allowPrivilegeEscalation: false`). This applies the patch to a copy of
/// the document, evaluates the result with the same engine and policy, and
/// appends what the next round would patch, until nothing new appears, so
/// one answer is reinvocation-safe. If the settled object would still carry
/// a field the API server forbids on `spec.os.name: windows` pods, setting
/// `spec.os.name` would get the object rejected: the mutation is computed
/// again without it. `keep` filters operations (e.g. a pod UPDATE may only
/// touch ephemeral containers); `namespace` fills in an object without one.
#[must_use]
pub fn settle(
    policy: &Policy,
    cx: &crate::engine::Context<'_>,
    mcx: MutationContext<'_>,
    doc: &Value,
    namespace: Option<&str>,
    keep: &dyn Fn(&PatchOperation) -> bool,
) -> Mutation {
    settle_from(policy, cx, mcx, doc, namespace, keep, None)
}

/// [`settle`], given the first round's mutation when the caller has it
/// already ([`mutation`] of the same document's evaluation, filtered by
/// `keep`): the document is then evaluated from the second round on.
#[must_use]
pub fn settle_from(
    policy: &Policy,
    cx: &crate::engine::Context<'_>,
    mcx: MutationContext<'_>,
    doc: &Value,
    namespace: Option<&str>,
    keep: &dyn Fn(&PatchOperation) -> bool,
    first: Option<Mutation>,
) -> Mutation {
    let settled = mutate_doc(policy, cx, mcx, doc, namespace, keep, first, true);
    let Some((m, settled)) = settled else {
        return Mutation::default();
    };
    if m.sets_os() && forbids_os_fields(policy, cx, &settled, namespace) {
        return mutate_doc(policy, cx, mcx, doc, namespace, keep, None, false)
            .map(|(m, _)| m)
            .unwrap_or_default();
    }
    m
}

/// One settled mutation and the patched document, or `None` when the
/// document is not a workload. `first` is the first round's mutation, when
/// known; `set_os_name: false` overrides the policy.
#[allow(clippy::too_many_arguments)] // settle's inputs, passed through
fn mutate_doc(
    policy: &Policy,
    cx: &crate::engine::Context<'_>,
    mcx: MutationContext<'_>,
    doc: &Value,
    namespace: Option<&str>,
    keep: &dyn Fn(&PatchOperation) -> bool,
    first: Option<Mutation>,
    set_os_name: bool,
) -> Option<(Mutation, Value)> {
    let mut patched = doc.clone();
    let start = usize::from(first.is_some());
    let mut m = first.unwrap_or_default();
    let mut applied = 0;
    let policy = if set_os_name {
        policy
    } else {
        policy.without_os_name()
    };
    for round in start..=SETTLE_ROUNDS {
        if apply(&mut patched, &m.ops[applied..]).is_err() {
            // A generated patch that does not apply is a bug: send nothing
            // rather than something the API server would refuse.
            m.truncate(applied);
            return Some((m, patched));
        }
        applied = m.ops.len();
        let view = policy.pod_templates.read(&patched).ok()?;
        let mut w = Workload::from_view(&view)?;
        if w.namespace.is_none() {
            w.namespace = namespace;
        }
        let eval = crate::engine::evaluate(policy, &w, cx);
        let mut next = mutation(policy, &w, &eval, mcx);
        next.retain(keep);
        let more = m.absorb(next, &w.spec_path.pointer());
        if !more || round == SETTLE_ROUNDS {
            break;
        }
    }
    if apply(&mut patched, &m.ops[applied..]).is_err() {
        m.truncate(applied);
    }
    Some((m, patched))
}

/// Would the API server reject this (patched) object for a field it
/// forbids on Windows pods?
fn forbids_os_fields(
    policy: &Policy,
    cx: &crate::engine::Context<'_>,
    doc: &Value,
    namespace: Option<&str>,
) -> bool {
    let Ok(view) = policy.pod_templates.read(doc) else {
        return false;
    };
    let Some(mut w) = Workload::from_view(&view) else {
        return false;
    };
    if w.namespace.is_none() {
        w.namespace = namespace;
    }
    forbids_os_fields_in(policy, cx, &w)
}

/// [`forbids_os_fields`] of a workload already read (the settled tree's,
/// or the view with the patch applied).
fn forbids_os_fields_in(
    policy: &Policy,
    cx: &crate::engine::Context<'_>,
    w: &Workload<'_, '_>,
) -> bool {
    // Only the API server mirror, so that fields other rules report (and
    // a policy may have turned off) are counted too.
    !crate::engine::evaluate(policy.api_server_mirror(), w, cx)
        .findings
        .is_empty()
}

impl Mutation {
    /// Appends the next settling round: its operations and explanations,
    /// and its notes not given yet. Returns whether that round changes
    /// targeting (`spec_pointer` is the pod spec's), so another round
    /// must follow.
    fn absorb(&mut self, next: Mutation, spec_pointer: &str) -> bool {
        let more = next
            .ops
            .iter()
            .any(|op| changes_targeting(op, spec_pointer));
        self.ops.extend(next.ops);
        self.explanations.extend(next.explanations);
        self.fixes.extend(next.fixes);
        for note in next.notes {
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
        }
        more
    }

    /// Does this patch set `spec.os`?
    fn sets_os(&self) -> bool {
        self.ops
            .iter()
            .any(|op| op.path().as_str().ends_with("/os"))
    }

    /// Keeps the operations (and their explanations) that `keep` accepts.
    pub fn retain(&mut self, keep: &dyn Fn(&PatchOperation) -> bool) {
        let kept: Vec<bool> = self.ops.iter().map(keep).collect();
        let mut k = kept.iter();
        self.ops.retain(|_| *k.next().unwrap_or(&false));
        let mut k = kept.iter();
        self.explanations.retain(|_| *k.next().unwrap_or(&false));
        let mut k = kept.iter();
        self.fixes.retain(|_| *k.next().unwrap_or(&false));
    }
}

/// Applies a patch to a document, as the API server would.
///
/// # Errors
/// An operation does not apply (a bug in patch generation, or a document
/// that changed underneath).
pub fn apply(doc: &mut Value, ops: &[PatchOperation]) -> Result<(), json_patch::PatchError> {
    json_patch::patch(doc, ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Context;

    fn pod(security: &str) -> Value {
        serde_json::from_str(&format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p"}},"spec":{{"nodeSelector":{{"kubernetes.io/os":"windows"}},
            "containers":[{{"name":"c","image":"x","securityContext":{security}}}]}}}}"#
        ))
        .unwrap()
    }

    fn settled(policy: &str, doc: &Value) -> Vec<String> {
        let policy = Policy::from_yaml("p.yaml", policy).unwrap();
        let mcx = MutationContext {
            create: true,
            namespace_isolation: None,
            psa_restricted_before_1_25: false,
            images: None,
        };
        let m = settle(&policy, &Context::default(), mcx, doc, Some("ns"), &|_| {
            true
        });
        let mut patched = doc.clone();
        apply(&mut patched, &m.ops).unwrap();
        let again = settle(
            &policy,
            &Context::default(),
            mcx,
            &patched,
            Some("ns"),
            &|_| true,
        );
        assert!(again.is_empty(), "not reinvocation-safe: {:?}", again.ops);
        m.ops
            .iter()
            .map(|o| {
                format!(
                    "{} {}",
                    serde_json::to_value(o).unwrap()["op"].as_str().unwrap(),
                    o.path()
                )
            })
            .collect()
    }

    #[test]
    fn pod_security_before_1_25_keeps_spec_os_unset() {
        assert!(psa_restricted_before_1_25(
            Some("restricted"),
            Some("v1.24")
        ));
        assert!(!psa_restricted_before_1_25(
            Some("restricted"),
            Some("v1.25")
        ));
        assert!(!psa_restricted_before_1_25(
            Some("restricted"),
            Some("latest")
        ));
        assert!(!psa_restricted_before_1_25(Some("restricted"), None));
        assert!(!psa_restricted_before_1_25(Some("baseline"), Some("v1.22")));
        let policy = Policy::from_yaml("p", "mutation: {setOsName: true}\n").unwrap();
        let doc = pod("{}");
        let mcx = MutationContext {
            create: true,
            namespace_isolation: None,
            psa_restricted_before_1_25: true,
            images: None,
        };
        let m = settle(
            &policy,
            &crate::engine::Context::default(),
            mcx,
            &doc,
            None,
            &|_| true,
        );
        assert!(
            !m.ops.iter().any(|op| op.path().as_str().ends_with("/os")),
            "{m:?}"
        );
        assert_eq!(m.notes.len(), 1, "{m:?}");
        assert!(m.notes[0].contains("Pod Security"), "{m:?}");
    }

    #[test]
    fn setting_os_name_also_removes_what_it_makes_forbidden() {
        let ops = settled(
            "mutation: {setOsName: true}\n",
            &pod(r#"{"allowPrivilegeEscalation":false}"#),
        );
        assert_eq!(
            ops,
            [
                "add /spec/os",
                "remove /spec/containers/0/securityContext/allowPrivilegeEscalation"
            ]
        );
    }

    #[test]
    fn os_name_is_not_set_when_the_api_server_would_then_reject_the_pod() {
        // runAsUser cannot be removed safely; with its rule off the pod is
        // admitted, and setting spec.os.name would get it rejected.
        let ops = settled(
            "mutation: {setOsName: true}\nrules: {WIN-RUNASUSER: off}\n",
            &pod(r#"{"runAsUser":1000}"#),
        );
        assert!(ops.is_empty(), "{ops:?}");
    }

    /// `injectWindowsBuild` reads the registry's facts: the one build every
    /// image can run on, none when they leave several or none.
    #[test]
    fn windows_build_from_image_facts() {
        use crate::images::{ImageFacts, KnownImages, Lookup, Platform};
        let win = |v: &str| Platform {
            os: "windows".into(),
            architecture: "amd64".into(),
            variant: None,
            os_version: Some(v.into()),
            os_features: Vec::new(),
        };
        let mut known = KnownImages::default();
        for (image, builds) in [
            // The tag names ltsc2019; the registry says 10.0.20348.
            ("contoso/named:ltsc2019", vec!["10.0.20348.1"]),
            ("contoso/api:1", vec!["10.0.20348.2527"]),
            ("contoso/both:1", vec!["10.0.17763.5830", "10.0.20348.2527"]),
            ("contoso/legacy:1", vec!["10.0.17763.5830"]),
        ] {
            known.insert(
                image,
                Lookup::Known(ImageFacts {
                    digest: None,
                    platforms: builds.into_iter().map(win).collect(),
                }),
            );
        }
        let policy = Policy::from_yaml("p.yaml", "mutation: {injectWindowsBuild: true}\n").unwrap();
        let build_of = |images: &[&str]| -> Option<String> {
            let containers: Vec<Value> = images
                .iter()
                .enumerate()
                .map(|(i, image)| serde_json::json!({"name": format!("c{i}"), "image": image}))
                .collect();
            let doc = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": containers}});
            let cx = Context {
                images: Some(&known),
                ..Context::default()
            };
            let mcx = MutationContext {
                create: true,
                images: Some(&known),
                ..MutationContext::default()
            };
            let m = settle(&policy, &cx, mcx, &doc, Some("ns"), &|_| true);
            let mut patched = doc.clone();
            apply(&mut patched, &m.ops).unwrap();
            let build = patched["spec"]["nodeSelector"]["node.kubernetes.io/windows-build"]
                .as_str()
                .map(str::to_owned);
            if build.is_some() {
                assert!(
                    m.explanations
                        .iter()
                        .any(|e| e.contains("by the registry's facts")),
                    "{:?}",
                    m.explanations
                );
            }
            build
        };
        assert_eq!(build_of(&["contoso/api:1"]).as_deref(), Some("10.0.20348"));
        // An index with two builds alone: the runtime picks; with a
        // one-build image, the build they share.
        assert_eq!(build_of(&["contoso/both:1"]), None);
        assert_eq!(
            build_of(&["contoso/both:1", "contoso/legacy:1"]).as_deref(),
            Some("10.0.17763")
        );
        // No build they all run on: nothing (WIN-BUILD-* say why).
        assert_eq!(build_of(&["contoso/api:1", "contoso/legacy:1"]), None);
        // The facts win over a build the tag names.
        assert_eq!(
            build_of(&["contoso/named:ltsc2019"]).as_deref(),
            Some("10.0.20348")
        );
    }
}
