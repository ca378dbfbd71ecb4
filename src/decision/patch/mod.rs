//! From findings and policy to one JSON Patch (RFC 6902).
//!
//! Operations are JSON Pointers into the original document: never a
//! re-serialized typed object, so fields the view does not model survive
//! untouched. Every operation is written to apply to the document as it is
//! (field absent, empty, or present), and a patched object yields no new
//! patch, so reinvocation is safe.
//!
//! What the webhook adds on its own (node selectors, `spec.os`, tolerations,
//! the isolation annotation) is in `add`; settling a patch to a fixpoint on
//! the tree in `settle`, on the view in `overlay`.

use std::collections::HashSet;

use serde_json::Value;

use crate::decision::engine::Evaluation;
use crate::decision::finding::{FixKind, PatchOperation};
use crate::decision::policy::Policy;
use crate::decision::view::SpecView;
use crate::decision::workload::Workload;

mod add;
mod settle;

use add::{add_isolation, add_os_selector, add_tolerations, add_windows_build, set_os_name};
pub use settle::{changes_targeting, settle, settle_from};

mod overlay;
pub use overlay::settle_on_view;

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
    pub images: Option<&'c crate::decision::images::KnownImages>,
    /// The cluster's Windows nodes (`Context::nodes`): their builds, for
    /// `mutation.injectWindowsBuild`.
    pub nodes: Option<&'c crate::decision::cluster::WindowsNodes>,
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
            .parse::<crate::decision::version::KubeVersion>()
            .is_ok_and(|v| v < crate::decision::version::KubeVersion::new(1, 25)),
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

pub use crate::decision::targeting::add_node_selector;

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
        push_fixes(&mut m, &eval.findings, |kind| {
            kind == FixKind::InlineCredentialSpec
        });
    }
    let settings = &policy.mutation;
    let (pinned_by, inferred) = windows_by_images(settings, eval);
    if !eval.target.is_windows() && !inferred {
        // Linux-only images in a cluster with Windows nodes: pinned to Linux.
        if settings.pin_linux_images
            && let Some(f) = fix_of(eval, crate::decision::rules::linux_unpinned::ID)
        {
            push_fixes(&mut m, [f], |kind| kind == FixKind::PinByImages);
        }
        return m;
    }
    if eval.target.is_conflicting() {
        return m;
    }

    if settings.inject_node_selector {
        add_os_selector(&mut m, workload, spec, pinned_by);
    }
    if settings.set_os_name && cx.create && spec.os.is_none() && !inferred {
        set_os_name(&mut m, workload, cx.psa_restricted_before_1_25);
    }
    let mut tolerations = settings.tolerations.clone();
    if settings.tolerate_windows_taint {
        tolerations.extend(windows_taint_tolerations(policy, spec, cx.nodes));
    }
    add_tolerations(&mut m, workload, spec, &tolerations);
    if settings.inject_windows_build && !eval.hyperv {
        add_windows_build(&mut m, workload, spec, cx.images, cx.nodes);
    }
    let isolation = cx.namespace_isolation.or(settings.isolation.as_deref());
    if let Some(isolation) = isolation.filter(|i| matches!(*i, "process" | "hyperv")) {
        add_isolation(&mut m, workload, isolation);
    }

    push_fixes(&mut m, &eval.findings, |kind| match kind {
        FixKind::RemoveNoOp => settings.remove_no_op_fields,
        FixKind::EmptyDirOffMemory => settings.empty_dir_off_memory,
        // Node selection is handled above, once; the gMSA contents first.
        FixKind::Scheduling | FixKind::PinByImages | FixKind::InlineCredentialSpec => false,
    });
    m
}

/// The tolerations `spec` lacks for the Windows node taints: the policy's
/// `params.windowsTaint`, else the taint learnt from the nodes
/// ([`WindowsNodes::windows_taints`](crate::decision::cluster::WindowsNodes::windows_taints);
/// WIN-TAINT-TOLERATION reads the same). Never a taint of some nodes only,
/// whatever node the pod names.
fn windows_taint_tolerations(
    policy: &Policy,
    spec: &SpecView<'_>,
    nodes: Option<&crate::decision::cluster::WindowsNodes>,
) -> Vec<Value> {
    use crate::decision::tolerations::{Taint, Tolerates, tolerates};
    let taints: Vec<&Taint> = match &policy.params.windows_taint {
        Some(taint) => vec![taint],
        None => nodes
            .map(|n| n.windows_taints().into_iter().map(|(t, _)| t).collect())
            .unwrap_or_default(),
    };
    taints
        .into_iter()
        .filter(|taint| {
            !spec
                .tolerations
                .iter()
                .flatten()
                .any(|t| tolerates(t, taint) != Tolerates::No)
        })
        .map(Taint::toleration)
        .collect()
}

/// The first finding of `rule` that has a fix.
fn fix_of<'e>(eval: &'e Evaluation, rule: &str) -> Option<&'e crate::decision::finding::Finding> {
    eval.findings
        .iter()
        .find(|f| f.rule == rule && f.fix.is_some())
}

/// Targeting by images: the registry says an image has only Windows
/// platforms, or its name can only be Windows (`pinWindowsImages`, the
/// default), or it merely looks Windows (`inferFromImages`). The finding
/// that explains the pin, and whether the images pin the pod to Windows.
fn windows_by_images<'e>(
    settings: &crate::decision::policy::MutationSettings,
    eval: &'e Evaluation,
) -> (Option<&'e crate::decision::finding::Finding>, bool) {
    let by_facts = fix_of(eval, crate::decision::rules::image_windows_only::ID)
        .filter(|_| settings.pin_windows_images);
    let unpinned = fix_of(eval, crate::decision::rules::unpinned_image::ID);
    let by_name = unpinned.filter(|f| {
        settings.pin_windows_images
            && f.fix
                .as_ref()
                .is_some_and(|x| x.kind == FixKind::PinByImages)
    });
    let inferred = by_facts.is_some()
        || by_name.is_some()
        || (settings.infer_from_images && unpinned.is_some());
    (by_facts.or(by_name), inferred)
}

/// Adds the fixes of the findings whose kind is `wanted`.
fn push_fixes<'f>(
    m: &mut Mutation,
    findings: impl IntoIterator<Item = &'f crate::decision::finding::Finding>,
    wanted: impl Fn(FixKind) -> bool,
) {
    for f in findings {
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
    use crate::decision::engine::Context;

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
            nodes: None,
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
            nodes: None,
        };
        let m = settle(
            &policy,
            &crate::decision::engine::Context::default(),
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
        use crate::decision::images::{ImageFacts, KnownImages, Lookup, Platform};
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
        let node = |name: &str, build: &str| {
            crate::decision::cluster::WindowsNode::from_object(&serde_json::json!({
                "kind": "Node", "metadata": {"name": name, "labels": {
                    "kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": build}}}))
            .unwrap()
        };
        let ws2025_and_2019 = crate::decision::cluster::WindowsNodes {
            nodes: vec![node("a", "10.0.26100"), node("b", "10.0.17763")],
            ..Default::default()
        };
        let ws2025_and_2022 = crate::decision::cluster::WindowsNodes {
            nodes: vec![node("a", "10.0.26100"), node("b", "10.0.20348")],
            ..Default::default()
        };
        let build_on = |images: &[&str],
                        nodes: Option<&crate::decision::cluster::WindowsNodes>|
         -> Option<String> {
            let containers: Vec<Value> = images
                .iter()
                .enumerate()
                .map(|(i, image)| serde_json::json!({"name": format!("c{i}"), "image": image}))
                .collect();
            let doc = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": containers}});
            let cx = Context {
                images: Some(&known),
                nodes,
                ..Context::default()
            };
            let mcx = MutationContext {
                create: true,
                images: Some(&known),
                nodes,
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
        let build_of = |images: &[&str]| build_on(images, None);
        // A 10.0.20348 image runs on 10.0.20348 to 10.0.26100 nodes: without
        // the nodes nothing is pinned (pinning 10.0.20348 would keep it off
        // Windows Server 2025 nodes).
        assert_eq!(build_of(&["contoso/api:1"]), None);
        // With them, the one node build that runs it.
        assert_eq!(
            build_on(&["contoso/api:1"], Some(&ws2025_and_2019)).as_deref(),
            Some("10.0.26100")
        );
        assert_eq!(
            build_on(&["contoso/legacy:1"], Some(&ws2025_and_2019)).as_deref(),
            Some("10.0.17763")
        );
        // Two node builds run it: no nodeSelector can name both.
        assert_eq!(build_on(&["contoso/api:1"], Some(&ws2025_and_2022)), None);
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
            build_on(&["contoso/named:ltsc2019"], Some(&ws2025_and_2019)).as_deref(),
            Some("10.0.26100")
        );
    }
}
