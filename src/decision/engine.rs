//! The one pure decision: `evaluate(policy, workload, context)`.
//!
//! No I/O, no async, no clock, no client. The webhook, `lint` and `report`
//! all call this and differ only in how they decode input and encode output.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::decision::cluster::{TargetCluster, WindowsNodes};
use crate::decision::exceptions::{ExceptionRef, ExceptionSet};
use crate::decision::finding::{Finding, Severity};
use crate::decision::policy::{Policy, SKIP_ANNOTATION_PREFIX};
use crate::decision::rules::{self, RuleContext, RuleFindings, Scope};
use crate::decision::targeting::{self, RuntimeClassInfo, RuntimeClasses, Target};
use crate::decision::version::KubeVersion;
use crate::decision::view::SpecView;
use crate::decision::workload::Workload;

/// What the engine knows beyond the object and the policy.
#[derive(Debug, Clone, Default)]
pub struct Context<'c> {
    /// The cluster the verdict is about: version, runtime, stance.
    pub cluster: TargetCluster,
    /// RuntimeClasses known from the input or the cluster, beyond the
    /// policy's `windowsRuntimeClasses`.
    pub runtime_classes: Option<&'c RuntimeClasses>,
    /// The cluster's Windows nodes, when known (live cluster, or Node
    /// objects in the input): their builds, and the facts a pod's node
    /// selection narrows `cluster` to.
    pub nodes: Option<&'c WindowsNodes>,
    /// What registries say of the images (digest, platforms), resolved
    /// before the decision: `--image-facts`, `--registry`. An image
    /// without an entry is judged by its name.
    pub images: Option<&'c crate::decision::images::KnownImages>,
    /// The cluster's gMSA credential specs and authorization answers, when
    /// the entry point knows the resource; `None` keeps the gMSA rules silent.
    pub gmsa: Option<&'c crate::decision::gmsa::Facts>,
    /// The `PolicyException`s in force at the entry point's "now";
    /// `None`: none.
    pub exceptions: Option<&'c ExceptionSet>,
}

impl Context<'_> {
    /// The default target at Kubernetes `version`.
    #[must_use]
    pub fn at(version: KubeVersion) -> Self {
        Self {
            cluster: TargetCluster::at(version),
            runtime_classes: None,
            nodes: None,
            images: None,
            gmsa: None,
            exceptions: None,
        }
    }

    #[must_use]
    pub fn version(&self) -> KubeVersion {
        self.cluster.kubernetes_version
    }

    /// What is known of RuntimeClass `name`, in one order for every fact:
    /// the cluster's own RuntimeClass object (the input's, or the server's
    /// cache) first, then the policy's `windowsRuntimeClasses` for what the
    /// object does not say (or when the class is not seen).
    #[must_use]
    pub fn runtime_class(&self, policy: &Policy, name: &str) -> Option<RuntimeClassInfo> {
        RuntimeClassInfo::merged(
            self.runtime_classes.and_then(|rc| rc.get(name)),
            policy.runtime_classes.get(name),
        )
    }
}

/// A rule the workload opted out of (annotation) or an exception covers,
/// and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub rule: String,
    pub reason: String,
    /// The `PolicyException` that covers the rule's findings; `None`: the
    /// workload's own `winadmit.io/skip.<RULE>` annotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exception: Option<ExceptionRef>,
}

/// A finding a `PolicyException` covers: kept, marked, not counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Excepted {
    pub finding: Finding,
    pub exception: ExceptionRef,
}

/// The verdict on one workload.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Evaluation {
    pub target: Target,
    pub findings: Vec<Finding>,
    /// Set when policy exempts the whole object; then there are no findings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exempt: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// The findings exceptions cover (not in `findings`: they count for nothing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excepted: Vec<Excepted>,
    /// The pod runs Hyper-V isolated (by its RuntimeClass), so its images
    /// need not match the node's Windows build. For the mutation step.
    #[serde(skip)]
    pub hyperv: bool,
}

impl Evaluation {
    #[must_use]
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// Evaluates one workload against a policy.
#[must_use]
pub fn evaluate(policy: &Policy, workload: &Workload<'_, '_>, cx: &Context<'_>) -> Evaluation {
    let Some(spec) = workload.spec else {
        return Evaluation::default();
    };
    let target = target_of(policy, spec, cx);
    let mut eval = Evaluation {
        target,
        ..Evaluation::default()
    };

    if let Some(reason) = policy.exempt_object(workload.namespace, || labels_of(workload)) {
        eval.exempt = Some(reason);
        return eval;
    }

    let class_name = spec.runtime_class_name.as_deref();
    let runtime_class = class_name.and_then(|name| cx.runtime_class(policy, name));
    let hyperv = class_name.is_some_and(|name| {
        policy.params.is_hyperv_runtime(
            name,
            runtime_class.as_ref().and_then(|c| c.handler.as_deref()),
        )
    });
    // With the cluster's Windows nodes known, the facts learnt from them
    // hold for the nodes this pod may land on (its node name, selector
    // and affinity).
    let narrowed;
    let cluster = match cx.nodes.filter(|n| !n.is_empty()) {
        Some(nodes) => {
            narrowed = cx
                .cluster
                .narrowed(&WindowsNodes::observed(&nodes.for_pod(spec)));
            &narrowed
        }
        None => &cx.cluster,
    };
    let rule_cx = RuleContext {
        workload,
        spec,
        target: &eval.target,
        version: cluster.kubernetes_version,
        cluster,
        nodes: cx.nodes,
        registry: cx.images.filter(|i| !i.is_empty()),
        gmsa: cx.gmsa,
        host_process: host_process(spec),
        params: &policy.params,
        runtime_class: runtime_class.as_ref(),
        hyperv,
        images: rules::Images::default(),
        all_containers: crate::decision::view::containers_of(spec),
    };
    (eval.findings, eval.skipped) = run_rules(policy, workload, &rule_cx, cluster);
    if let Some(set) = cx.exceptions.filter(|s| !s.is_empty()) {
        except(policy, set, workload, &mut eval);
    }
    eval.hyperv = hyperv;
    eval
}

/// Runs every rule in scope of the target at its level on the cluster,
/// and drops the findings of the rules the workload skips (with a reason)
/// where the policy lets an annotation skip them (`skips`; never a rule
/// that guards a security boundary). The same test holds on every
/// operation, so an UPDATE or an ephemeral container cannot do what a
/// CREATE could not.
fn run_rules(
    policy: &Policy,
    workload: &Workload<'_, '_>,
    rule_cx: &RuleContext<'_, '_, '_>,
    cluster: &TargetCluster,
) -> (Vec<Finding>, Vec<Skipped>) {
    let mut sink = RuleFindings::new();
    let mut skipped = Vec::new();
    for (i, rule) in rules::ALL.iter().enumerate() {
        let info = &rule.info;
        let in_scope = match info.scope {
            Scope::Windows => rule_cx.target.is_windows(),
            Scope::Linux => rule_cx.target.is_linux(),
            Scope::Any => true,
        };
        if !in_scope {
            continue;
        }
        let Some(severity) = policy.level(i, cluster) else {
            continue;
        };
        sink.rule = info.id;
        sink.severity = severity;
        let before = sink.findings.len();
        (rule.check)(rule_cx, &mut sink);
        if sink.findings.len() > before
            && policy.skippable(info.id, workload.namespace)
            && let Some(reason) = skip_reason(workload, info.id)
        {
            sink.truncate(before);
            skipped.push(Skipped {
                rule: info.id.to_owned(),
                reason: reason.to_owned(),
                exception: None,
            });
        }
    }
    (sink.into_findings(), skipped)
}

/// Moves the findings an exception in force covers from `findings` to
/// `excepted`, and names each (rule, exception) once among `skipped`.
fn except(policy: &Policy, set: &ExceptionSet, w: &Workload<'_, '_>, eval: &mut Evaluation) {
    let findings = std::mem::take(&mut eval.findings);
    for f in findings {
        match set.covering(
            &policy.exceptions,
            w,
            (f.rule, rules::is_boundary(f.rule)),
            &f.field,
        ) {
            Some(by) => {
                if !eval
                    .skipped
                    .iter()
                    .any(|s| s.rule == f.rule && s.exception.as_ref() == Some(by))
                {
                    eval.skipped.push(Skipped {
                        rule: f.rule.to_owned(),
                        reason: by.reason.clone(),
                        exception: Some(by.clone()),
                    });
                }
                eval.excepted.push(Excepted {
                    finding: f,
                    exception: by.clone(),
                });
            }
            None => eval.findings.push(f),
        }
    }
}

/// The reason a workload gives for skipping a rule, from the annotation
/// `winadmit.io/skip.<RULE-ID>` on the object or its pod template. An empty
/// reason does not count: an opt-out must say why.
fn skip_reason<'v>(workload: &Workload<'v, '_>, rule: &str) -> Option<&'v str> {
    let has_prefix = |a: Option<&crate::decision::view::StrMap<'_>>| {
        a.is_some_and(|a| a.iter().any(|(k, _)| k.starts_with(SKIP_ANNOTATION_PREFIX)))
    };
    if !has_prefix(workload.annotations) && !has_prefix(workload.pod_annotations()) {
        return None;
    }
    let key = format!("{SKIP_ANNOTATION_PREFIX}{rule}");
    workload.annotation(&key).filter(|r| !r.trim().is_empty())
}

fn labels_of(workload: &Workload<'_, '_>) -> BTreeMap<String, String> {
    workload
        .labels
        .into_iter()
        .chain(workload.pod_labels())
        .flat_map(super::view::StrMap::iter)
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

pub use crate::decision::targeting::host_process;

/// How a pod spec targets an OS, resolving RuntimeClasses with
/// [`Context::runtime_class`].
#[must_use]
pub fn target_of(policy: &Policy, spec: &SpecView<'_>, cx: &Context<'_>) -> Target {
    let mut target = targeting::classify(spec, |name| {
        cx.runtime_class(policy, name)
            .as_ref()
            .and_then(RuntimeClassInfo::os)
    });
    // Before 1.23 the API server drops spec.os: it pins nothing there.
    if !cx.cluster.version_at_least(1, 23) {
        target.windows.retain(|s| *s != targeting::Signal::OsName);
        target.linux.retain(|s| *s != targeting::Signal::OsName);
    }
    if target.windows.is_empty()
        && target.linux.is_empty()
        && let Some(nodes) = windows_only_placement(spec, cx)
    {
        target.windows.push(targeting::Signal::Placement { nodes });
    }
    target
}

/// The Windows nodes a pod spec that selects no OS admits, when its node
/// name, selector or affinity admit no other node of all those known (the
/// cluster's nodes, or the input's Node objects): such a pod can only run
/// on Windows, and is a Windows pod. `None` when the other nodes are not
/// known, or the spec constrains nothing, or admits no node or a Linux one.
fn windows_only_placement(spec: &SpecView<'_>, cx: &Context<'_>) -> Option<Vec<String>> {
    let nodes = cx.nodes.filter(|n| !n.is_empty() && n.linux_known)?;
    if !crate::decision::cluster::placement::constrains(spec) {
        return None;
    }
    let admitted = nodes.admitted(spec);
    (admitted.linux == 0 && !admitted.windows.is_empty())
        .then(|| admitted.windows.iter().map(|n| (*n).to_owned()).collect())
}
