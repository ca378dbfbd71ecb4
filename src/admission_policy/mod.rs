//! The rules as `ValidatingAdmissionPolicy` and `MutatingAdmissionPolicy`
//! objects: enforcement by the API server itself, with no webhook to run.
//!
//! Pure: from a policy and a target cluster to JSON objects and the list of
//! what could not be exported (and why). The CEL mirrors the rule files at
//! that target ([`probes`]); `tests/admission_policy.rs` evaluates it on the
//! corpus and checks it agrees with [`crate::engine::evaluate`];
//! `tests/e2e_admission_policy.rs` checks that a real API server enforcing
//! them gives what it gives with the webhook.
//!
//! CEL cost: every validation is a fixed number of `.exists()` over one
//! list (containers, volumes) or two nested ones (container x volumeMounts),
//! each body a constant-size field test, so the cost grows linearly with
//! the number of containers (and mounts). The field paths in the messages
//! find each element's index by its name (`indexOf` on the list of names),
//! which is quadratic in string comparisons; the API server evaluates every
//! `messageExpression` on every request, failed or not, so that cost counts
//! always. See docs/admission-policy.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::finding::Severity;
use crate::policy::{Mode, Policy, SKIP_ANNOTATION_PREFIX};
use crate::rules;
use crate::targeting::Os;
use crate::version::KubeVersion;

pub mod probes;

use probes::{Export as RuleExport, Field, Probe, ProbeScope};

/// The API group of the admission policies.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// `ValidatingAdmissionPolicy` is GA (v1) from this version.
pub const VAP_SINCE: KubeVersion = KubeVersion::new(1, 30);
/// `MutatingAdmissionPolicy` v1beta1 from this version (v1 from 1.36).
pub const MAP_SINCE: KubeVersion = KubeVersion::new(1, 34);

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The target is older than ValidatingAdmissionPolicy v1.
    #[error(
        "ValidatingAdmissionPolicy is GA (admissionregistration.k8s.io/v1) from Kubernetes 1.30; the target is {0}: pass --kubernetes-version 1.30 or later, or use the webhook (`winadmit manifests`), which works on every version"
    )]
    TooOld(KubeVersion),
}

/// One exported rule, as CEL.
#[derive(Debug, Clone)]
pub struct Validation {
    pub rule: &'static str,
    pub severity: Severity,
    /// The rule's own mode (`rules: {ID: {mode: ...}}`), if the policy gives one.
    pub rule_mode: Option<Mode>,
    /// True when the object passes.
    pub expression: String,
    /// The message: the field paths, the rule's message, its id and fix.
    pub message_expression: String,
    /// The static message, for when the expression cannot be evaluated.
    pub message: String,
    /// JSON Patch removals (a CEL list of `JSONPatch`), if the rule's
    /// findings are removable.
    pub removals: Option<String>,
    /// The field paths `removals` removes (a CEL list of strings), for the
    /// removal record.
    pub removed_paths: Option<String>,
    /// True when the rule does not apply to the object (scope, exemption,
    /// skip annotation).
    pub unless: String,
    /// The offending field paths (a CEL list of strings): not empty exactly
    /// when the rule's probes find something.
    pub paths: String,
    /// What follows the paths in the message (`: message (ID). Fix: ...`).
    pub text: String,
}

/// A rule that is not exported, or not completely, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub rule: &'static str,
    pub reason: String,
    /// `true`: the rule is exported but without this part.
    pub partial: bool,
}

/// What `winadmit admission-policy` prints.
#[derive(Debug, Clone)]
pub struct Exported {
    pub documents: Vec<Value>,
    pub gaps: Vec<Gap>,
}

/// A CEL string literal: single-quoted, with `\\`, `'` and every control
/// character escaped.
#[must_use]
pub fn cel_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Every other control character as a \u escape (CEL's grammar
            // refuses a raw carriage return or newline in a quoted string).
            c if c.is_control() => {
                use std::fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A CEL list of string literals.
#[must_use]
pub fn cel_list<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| cel_str(s.as_ref())).collect();
    format!("[{}]", inner.join(", "))
}

/// `(pod kind expr, CronJob expr, other templates expr)` chosen by kind.
fn by_kind(pod: &str, cronjob: &str, template: &str) -> String {
    format!(
        "object.kind == 'Pod' ? ({pod}) : (object.kind == 'CronJob' ? ({cronjob}) : ({template}))"
    )
}

const CONTAINER_LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];

/// The policy's variables, in order (later ones use earlier ones).
#[must_use]
pub fn variables(policy: &Policy) -> Vec<(&'static str, String)> {
    let meta_map = |field: &str| {
        by_kind(
            &format!("has(object.metadata.{field}) ? object.metadata.{field} : {{}}"),
            &format!(
                "has(object.spec.jobTemplate.spec.template.metadata) && has(object.spec.jobTemplate.spec.template.metadata.{field}) ? object.spec.jobTemplate.spec.template.metadata.{field} : {{}}"
            ),
            &format!(
                "has(object.spec.template.metadata) && has(object.spec.template.metadata.{field}) ? object.spec.template.metadata.{field} : {{}}"
            ),
        )
    };
    let mut vars = vec![
        (
            "spec",
            by_kind(
                "object.spec",
                "object.spec.jobTemplate.spec.template.spec",
                "object.spec.template.spec",
            ),
        ),
        (
            "prefix",
            by_kind(
                "'spec'",
                "'spec.jobTemplate.spec.template.spec'",
                "'spec.template.spec'",
            ),
        ),
        (
            "pointer",
            by_kind(
                "'/spec'",
                "'/spec/jobTemplate/spec/template/spec'",
                "'/spec/template/spec'",
            ),
        ),
        (
            "metaPrefix",
            by_kind(
                "'metadata'",
                "'spec.jobTemplate.spec.template.metadata'",
                "'spec.template.metadata'",
            ),
        ),
        (
            "annotations",
            "has(object.metadata.annotations) ? object.metadata.annotations : {}".to_owned(),
        ),
        ("podAnnotations", meta_map("annotations")),
        (
            "labels",
            "has(object.metadata.labels) ? object.metadata.labels : {}".to_owned(),
        ),
        ("podLabels", meta_map("labels")),
    ];
    for list in CONTAINER_LISTS.into_iter().chain(["volumes"]) {
        vars.push((
            list,
            format!("has(variables.spec.{list}) ? variables.spec.{list} : []"),
        ));
    }
    // Names are unique in each list (the API server validates it): a
    // field path finds its element's index by name, which costs a string
    // comparison per element, where `indexOf` on the element compares
    // whole objects.
    vars.extend([
        (
            "initContainersNames",
            "variables.initContainers.map(x, x.name)".to_owned(),
        ),
        (
            "containersNames",
            "variables.containers.map(x, x.name)".to_owned(),
        ),
        (
            "ephemeralContainersNames",
            "variables.ephemeralContainers.map(x, x.name)".to_owned(),
        ),
        (
            "volumesNames",
            "variables.volumes.map(x, x.name)".to_owned(),
        ),
    ]);
    let hp = probes::C_HOST_PROCESS;
    vars.extend([
        (
            "podHostProcessSet",
            "has(variables.spec.securityContext) && has(variables.spec.securityContext.windowsOptions) && has(variables.spec.securityContext.windowsOptions.hostProcess)".to_owned(),
        ),
        (
            "podHostProcess",
            "variables.podHostProcessSet && variables.spec.securityContext.windowsOptions.hostProcess == true".to_owned(),
        ),
        (
            "anyHostProcess",
            format!(
                "variables.initContainers.exists(c, {hp}) || variables.containers.exists(c, {hp}) || variables.ephemeralContainers.exists(c, {hp})"
            ),
        ),
        (
            "allHostProcess",
            format!(
                "size(variables.initContainers) + size(variables.containers) + size(variables.ephemeralContainers) > 0 && variables.initContainers.all(c, {hp}) && variables.containers.all(c, {hp}) && variables.ephemeralContainers.all(c, {hp})"
            ),
        ),
        (
            "osWindows",
            "has(variables.spec.os) && has(variables.spec.os.name) && variables.spec.os.name == 'windows'".to_owned(),
        ),
        ("exempt", exempt_labels(policy)),
        // On a pod UPDATE the API server takes nothing but ephemeral
        // containers (through pods/ephemeralcontainers): the mutation
        // leaves the rest alone, as /mutate does.
        (
            "podUpdate",
            "object.kind == 'Pod' && has(request.operation) && request.operation == 'UPDATE'"
                .to_owned(),
        ),
        (
            "ephemeralUpdate",
            "variables.podUpdate && has(request.subResource) && request.subResource == 'ephemeralcontainers'"
                .to_owned(),
        ),
        // The engine's targeting (`targeting::classify`) of the pod spec.
        (
            "windows",
            format!(
                "[variables.spec].exists(s, {})",
                any_of(windows_signals(policy, true))
            ),
        ),
        (
            "linux",
            format!(
                "!variables.windows && [variables.spec].exists(s, {})",
                any_of(linux_signals(policy, true))
            ),
        ),
        (
            "hyperv",
            if policy.params.hyperv_runtime_classes.is_empty() {
                "false".to_owned()
            } else {
                format!(
                    "has(variables.spec.runtimeClassName) && variables.spec.runtimeClassName in {}",
                    cel_list(&policy.params.hyperv_runtime_classes)
                )
            },
        ),
    ]);
    vars.extend(probes::image_variables(policy));
    vars
}

/// CEL bools `||`-ed, each in parentheses.
fn any_of(signals: Vec<String>) -> String {
    let any: Vec<String> = signals.into_iter().map(|s| format!("({s})")).collect();
    any.join(" || ")
}

/// `exemptions.labelSelectors` as CEL over the object's and its pods'
/// labels (the pods' labels win, as in the engine).
fn exempt_labels(policy: &Policy) -> String {
    let label = |k: &str| {
        let k = cel_str(k);
        (
            format!("({k} in variables.podLabels || {k} in variables.labels)"),
            format!(
                "({k} in variables.podLabels ? variables.podLabels[{k}] : variables.labels[{k}])"
            ),
        )
    };
    let mut any = Vec::new();
    for sel in &policy.exemptions.label_selectors {
        let mut all = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            let (has, val) = label(k);
            all.push(format!("({has} && {val} == {})", cel_str(v)));
        }
        for req in sel.match_expressions.iter().flatten() {
            let (has, val) = label(&req.key);
            let values = cel_list(req.values.as_deref().unwrap_or_default());
            all.push(match req.operator.as_str() {
                "In" => format!("({has} && {val} in {values})"),
                "NotIn" => format!("(!{has} || !({val} in {values}))"),
                "Exists" => has,
                "DoesNotExist" => format!("!{has}"),
                // The policy loader rejects other operators.
                _ => "false".to_owned(),
            });
        }
        if all.is_empty() {
            // An empty selector matches everything.
            all.push("true".to_owned());
        }
        any.push(format!("({})", all.join(" && ")));
    }
    if any.is_empty() {
        "false".to_owned()
    } else {
        any.join(" || ")
    }
}

/// The match conditions: a pod spec is there, the user is not exempt, and
/// the pod targets Windows.
#[must_use]
pub fn match_conditions(policy: &Policy, cluster: &Cluster) -> Vec<(&'static str, String)> {
    let mut out = vec![(
        "has-pod-spec",
        format!(
            "has(object.spec) && ({})",
            by_kind(
                "true",
                "has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) && has(object.spec.jobTemplate.spec.template.spec)",
                "has(object.spec.template) && has(object.spec.template.spec)",
            )
        ),
    )];
    let ex = &policy.exemptions;
    if !ex.users.is_empty() || !ex.groups.is_empty() {
        out.push((
            "user-not-exempt",
            format!(
                "!(request.userInfo.username in {}) && !(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {}))",
                cel_list(&ex.users),
                cel_list(&ex.groups)
            ),
        ));
    }
    out.push(("targets-windows", targets_windows(policy, cluster)));
    out
}

/// The match conditions of the mutating policy: those of the validating
/// ones for Windows-targeted pods, no Linux signal (the engine does not
/// mutate a pod whose targeting contradicts itself: it may land on
/// Linux), and something to change (`needs-mutation`): an object the
/// mutation would leave as it is is not matched at all, so the API server
/// stores it exactly as sent (a matched object is decoded again after the
/// mutation, which, for one, no longer gives a Job without labels its
/// template's generated labels).
#[must_use]
pub fn mutation_match_conditions(
    policy: &Policy,
    cluster: &Cluster,
) -> Vec<(&'static str, String)> {
    let mut out = match_conditions(policy, cluster);
    let spec = by_kind(
        "object.spec",
        "object.spec.jobTemplate.spec.template.spec",
        "object.spec.template.spec",
    );
    out.push((
        "no-linux-targeting",
        format!(
            "![{spec}].exists(s, {})",
            any_of(linux_signals(policy, cluster.version_at_least(1, 23)))
        ),
    ));
    out.push(("needs-mutation", needs_mutation(policy, cluster)));
    out
}

/// The engine's Linux signals as CEL over the spec `s`.
fn linux_signals(policy: &Policy, os_name: bool) -> Vec<String> {
    let mut signals = vec![
        "has(s.nodeSelector) && ((('kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['kubernetes.io/os'] == 'linux') || (('beta.kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['beta.kubernetes.io/os'] == 'linux'))".to_owned(),
    ];
    if os_name {
        signals.push("has(s.os) && has(s.os.name) && s.os.name == 'linux'".to_owned());
    }
    let terms =
        "s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    signals.push(format!(
        "has(s.affinity) && has(s.affinity.nodeAffinity) && has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && has({terms}) && size({terms}) > 0 && {terms}.all(t, has(t.matchExpressions) && t.matchExpressions.exists(r, r.key in ['kubernetes.io/os', 'beta.kubernetes.io/os'] && r.operator == 'In' && has(r.values) && size(r.values) > 0 && r.values.all(x, x == 'linux')))"
    ));
    let classes = policy.runtime_classes.names_for(Os::Linux);
    if !classes.is_empty() {
        signals.push(format!(
            "has(s.runtimeClassName) && s.runtimeClassName in {}",
            cel_list(&classes)
        ));
    }
    signals
}

/// The engine's Windows signals (`targeting::classify`) as CEL over the spec `s`.
fn windows_signals(policy: &Policy, os_name: bool) -> Vec<String> {
    let mut signals = vec![
        "has(s.nodeSelector) && ((('kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['kubernetes.io/os'] == 'windows') || (('beta.kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['beta.kubernetes.io/os'] == 'windows') || ('node.kubernetes.io/windows-build' in s.nodeSelector) || (('kubernetes.azure.com/os-sku' in s.nodeSelector) && s.nodeSelector['kubernetes.azure.com/os-sku'] in ".to_owned()
            + &cel_list(crate::targeting::WINDOWS_OS_SKUS)
            + "))",
    ];
    if os_name {
        signals.push("has(s.os) && has(s.os.name) && s.os.name == 'windows'".to_owned());
    }
    let terms =
        "s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let has_terms = "has(s.affinity) && has(s.affinity.nodeAffinity) && has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms)";
    signals.push(format!(
        "{has_terms} && size({terms}) > 0 && ({terms}.all(t, has(t.matchExpressions) && t.matchExpressions.exists(r, r.key in ['kubernetes.io/os', 'beta.kubernetes.io/os'] && r.operator == 'In' && has(r.values) && size(r.values) > 0 && r.values.all(x, x == 'windows'))) || {terms}.all(t, has(t.matchExpressions) && t.matchExpressions.exists(r, r.key == 'node.kubernetes.io/windows-build' && r.operator in ['In', 'Exists'])))"
    ));
    let hp = "(has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.hostProcess) && c.securityContext.windowsOptions.hostProcess == true)";
    signals.push(format!(
        "(has(s.securityContext) && has(s.securityContext.windowsOptions) && has(s.securityContext.windowsOptions.hostProcess) && s.securityContext.windowsOptions.hostProcess == true) || (has(s.initContainers) && s.initContainers.exists(c, {hp})) || (has(s.containers) && s.containers.exists(c, {hp})) || (has(s.ephemeralContainers) && s.ephemeralContainers.exists(c, {hp}))"
    ));
    let classes = policy.runtime_classes.names_for(Os::Windows);
    if !classes.is_empty() {
        signals.push(format!(
            "has(s.runtimeClassName) && s.runtimeClassName in {}",
            cel_list(&classes)
        ));
    }
    signals
}

/// The pod spec is Windows-targeted (a match condition: no variables).
fn targets_windows(policy: &Policy, cluster: &Cluster) -> String {
    let spec = by_kind(
        "object.spec",
        "object.spec.jobTemplate.spec.template.spec",
        "object.spec.template.spec",
    );
    format!(
        "[{spec}].exists(s, {})",
        any_of(windows_signals(policy, cluster.version_at_least(1, 23)))
    )
}

/// The match conditions of the validating policies: a pod spec is there,
/// the user is not exempt, and the pod may run on Windows or names
/// something only Windows has (`may-target-windows`, the webhooks'
/// matchCondition of the same name, with the policy's image patterns): a
/// Windows signal, the Hyper-V isolation annotation, `windowsOptions`, a
/// Windows hostPath, or an image that is Windows by `params.windowsImages`
/// or names a Windows build. The rules for Windows-targeted pods then
/// check `variables.windows`, those for Linux-targeted pods
/// `variables.linux`, as the engine scopes them.
#[must_use]
pub fn validation_match_conditions(
    policy: &Policy,
    cluster: &Cluster,
) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = match_conditions(policy, cluster)
        .into_iter()
        .filter(|(name, _)| *name != "targets-windows")
        .collect();
    let pod = by_kind(
        "object",
        "object.spec.jobTemplate.spec.template",
        "object.spec.template",
    );
    let (_, _, word, _) = probes::build_regexes();
    let mut image = format!("c.image.matches({})", cel_str(&format!("(?i){word}")));
    if let Some(re) = probes::globs_regex(&policy.params.windows_images) {
        image = format!("c.image.lowerAscii().matches({}) || {image}", cel_str(&re));
    }
    let windows_path = cel_str(probes::WINDOWS_PATH);
    let mut signals = windows_signals(policy, cluster.version_at_least(1, 23));
    signals.extend([
        format!(
            "has(p.metadata) && has(p.metadata.annotations) && {} in p.metadata.annotations",
            cel_str(crate::rules::hyperv::ISOLATION_ANNOTATION)
        ),
        "(has(s.securityContext) && has(s.securityContext.windowsOptions)) || [has(s.initContainers) ? s.initContainers : [], has(s.containers) ? s.containers : [], has(s.ephemeralContainers) ? s.ephemeralContainers : []].exists(l, l.exists(c, has(c.securityContext) && has(c.securityContext.windowsOptions)))".to_owned(),
        format!(
            "has(s.volumes) && s.volumes.exists(v, has(v.hostPath) && has(v.hostPath.path) && v.hostPath.path.matches({windows_path}))"
        ),
        format!(
            "[has(s.initContainers) ? s.initContainers : [], has(s.containers) ? s.containers : [], has(s.ephemeralContainers) ? s.ephemeralContainers : []].exists(l, l.exists(c, has(c.image) && ({image})))"
        ),
    ]);
    out.push((
        "may-target-windows",
        format!("[{pod}].exists(p, [p.spec].exists(s, {}))", any_of(signals)),
    ));
    out
}

/// The CEL expression naming an element's path, e.g. `spec.containers[2]`.
fn element(scope: ProbeScope, list: &str, pointer: bool) -> String {
    let (root, sep, open, close) = if pointer {
        ("variables.pointer", "/", "/", "")
    } else {
        ("variables.prefix", ".", "[", "]")
    };
    match scope {
        ProbeScope::Pod => root.to_owned(),
        ProbeScope::Volume => format!(
            "{root} + '{sep}volumes{open}' + string(variables.volumesNames.indexOf(v.name)) + '{close}'"
        ),
        ProbeScope::Container | ProbeScope::Mount => {
            let c = format!(
                "{root} + '{sep}{list}{open}' + string(variables.{list}Names.indexOf(c.name)) + '{close}'"
            );
            if scope == ProbeScope::Mount {
                format!(
                    "{c} + '{sep}volumeMounts{open}' + string(c.volumeMounts.map(x, x.mountPath).indexOf(m.mountPath)) + '{close}'"
                )
            } else {
                c
            }
        }
    }
}

fn keys_suffix(keys: &[&str], sep: char) -> String {
    keys.iter().fold(String::new(), |mut s, k| {
        s.push(sep);
        s.push_str(k);
        s
    })
}

/// The probe's field paths (or JSON pointers) as a CEL list of strings.
fn paths(p: &Probe, pointer: bool) -> Vec<String> {
    let one = |scope: ProbeScope, list: &str| -> String {
        let elem = element(scope, list, pointer);
        match &p.field {
            Field::Keys(keys) => {
                let suffix = keys_suffix(keys, if pointer { '/' } else { '.' });
                if suffix.is_empty() {
                    elem
                } else {
                    format!("{elem} + {}", cel_str(&suffix))
                }
            }
            Field::Suffixes(list) => format!("({list}).map(x, {elem} + x).join(', ')"),
            Field::Absolute(list) => format!("({list}).join(', ')"),
        }
    };
    let hit = &p.hit;
    match p.scope {
        ProbeScope::Pod => {
            let e = one(ProbeScope::Pod, "");
            vec![format!("({hit} ? [{e}] : [])")]
        }
        ProbeScope::Volume => vec![format!(
            "variables.volumes.filter(v, {hit}).map(v, {})",
            one(ProbeScope::Volume, "")
        )],
        ProbeScope::Container => CONTAINER_LISTS
            .iter()
            .map(|l| {
                format!(
                    "variables.{l}.filter(c, {hit}).map(c, {})",
                    one(ProbeScope::Container, l)
                )
            })
            .collect(),
        ProbeScope::Mount => CONTAINER_LISTS
            .iter()
            .map(|l| {
                format!(
                    "variables.{l}.filter(c, {}).map(c, c.volumeMounts.filter(m, {hit}).map(m, {}).join(', '))",
                    mount_container(p),
                    one(ProbeScope::Mount, l)
                )
            })
            .collect(),
    }
}

fn mount_container(p: &Probe) -> String {
    let hit = &p.hit;
    let base = format!("has(c.volumeMounts) && c.volumeMounts.exists(m, {hit})");
    match &p.container_hit {
        Some(ch) => format!("({ch}) && {base}"),
        None => base,
    }
}

/// Some probe finds something: CEL bools to `||`. The probes of one scope
/// share one comprehension per list, so a rule costs at most one pass over
/// each container list and one over the volumes, whatever its probe count.
fn any(probes: &[Probe]) -> Vec<String> {
    let of = |scope: ProbeScope| -> Vec<String> {
        probes
            .iter()
            .filter(|p| p.scope == scope)
            .map(|p| match scope {
                ProbeScope::Mount => format!("({})", mount_container(p)),
                _ => format!("({})", p.hit),
            })
            .collect()
    };
    let mut out = Vec::new();
    let pod = of(ProbeScope::Pod);
    if !pod.is_empty() {
        out.push(pod.join(" || "));
    }
    let volume = of(ProbeScope::Volume);
    if !volume.is_empty() {
        out.push(format!(
            "variables.volumes.exists(v, {})",
            volume.join(" || ")
        ));
    }
    let mut container = of(ProbeScope::Container);
    container.extend(of(ProbeScope::Mount));
    if !container.is_empty() {
        let body = container.join(" || ");
        for l in CONTAINER_LISTS {
            out.push(format!("variables.{l}.exists(c, {body})"));
        }
    }
    out
}

/// The rule was skipped by annotation with a reason: the pod template's
/// annotation first, the object's otherwise (as the engine reads it).
fn skip(rule: &str) -> String {
    let k = cel_str(&format!("{SKIP_ANNOTATION_PREFIX}{rule}"));
    format!(
        "({k} in variables.podAnnotations ? variables.podAnnotations[{k}].trim() != '' : ({k} in variables.annotations && variables.annotations[{k}].trim() != ''))"
    )
}

/// The effective own mode of a rule, if the policy sets one.
fn rule_mode(policy: &Policy, id: &str) -> Option<Mode> {
    let own = policy.mode_for(id, Some(Mode::Warn)) != Mode::Warn
        || policy.mode_for(id, Some(Mode::Audit)) != Mode::Audit;
    own.then(|| policy.mode_for(id, None))
}

/// Every rule as a validation, or a gap. Works at any target (the command
/// refuses targets without ValidatingAdmissionPolicy; tests use older ones).
#[must_use]
pub fn validations(policy: &Policy, cluster: &Cluster) -> (Vec<Validation>, Vec<Gap>) {
    let mut out = Vec::new();
    let mut gaps = Vec::new();
    for (i, rule) in rules::ALL.iter().enumerate() {
        let id = rule.info.id;
        let Some(severity) = policy.level(i, cluster) else {
            gaps.push(Gap {
                rule: id,
                reason: "off for this policy and target: nothing to enforce".into(),
                partial: false,
            });
            continue;
        };
        if severity == Severity::Info {
            gaps.push(Gap {
                rule: id,
                reason: "info (advice): never an admission action; see `winadmit lint`".into(),
                partial: false,
            });
            continue;
        }
        let (probes, message, partial) = match probes::export(id, cluster, policy) {
            RuleExport::Gap(reason) => {
                gaps.push(Gap {
                    rule: id,
                    reason: reason.into(),
                    partial: false,
                });
                continue;
            }
            RuleExport::Cel {
                probes,
                message,
                partial,
            } => (probes, message, partial),
        };
        if let Some(reason) = partial {
            gaps.push(Gap {
                rule: id,
                reason: reason.into(),
                partial: true,
            });
        }
        // The engine's scope: the policies match every pod that may run on
        // Windows (`may-target-windows`). HostProcess and a contradiction
        // are about pods with a Windows signal.
        let guard = match rule.info.scope {
            _ if matches!(id, rules::HOSTPROCESS | rules::OS_CONFLICT) => "!variables.windows || ",
            rules::Scope::Windows => "!variables.windows || ",
            rules::Scope::Linux => "!variables.linux || ",
            rules::Scope::Any => "",
        };
        let anys = any(&probes);
        let lists: Vec<String> = probes.iter().flat_map(|p| paths(p, false)).collect();
        // One line: the API server ignores a message with line breaks.
        let fix = rule
            .info
            .fix
            .replace('`', "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let unless = format!("{guard}variables.exempt || {}", skip(id));
        let expression = format!("{unless} || !({})", anys.join(" || "));
        let text = cel_str(&format!(": {message} ({id}). Fix: {fix}"));
        let message_expression = format!("({}).join(', ') + {text}", lists.join(" + "));
        let removable: Vec<&Probe> = probes
            .iter()
            .filter(|p| p.removable && matches!(p.field, Field::Keys(_)))
            .collect();
        // On a pod UPDATE only ephemeral containers (pods/ephemeralcontainers).
        let gated = |p: &Probe, pointer: bool| -> Vec<String> {
            paths(p, pointer)
                .into_iter()
                .enumerate()
                .map(|(i, l)| {
                    let ephemeral = matches!(p.scope, ProbeScope::Container | ProbeScope::Mount)
                        && CONTAINER_LISTS[i] == "ephemeralContainers";
                    let gate = if ephemeral {
                        "variables.podUpdate && !variables.ephemeralUpdate"
                    } else {
                        "variables.podUpdate"
                    };
                    format!("({gate} ? [] : {l})")
                })
                .collect()
        };
        let removals = (!removable.is_empty()).then(|| {
            let lists: Vec<String> = removable
                .iter()
                .flat_map(|p| gated(p, true))
                .map(|l| format!("{l}.map(p, JSONPatch{{op: 'remove', path: p}})"))
                .collect();
            format!(
                "variables.exempt || {} ? [] : {}",
                skip(id),
                lists.join(" + ")
            )
        });
        let removed_paths = (!removable.is_empty()).then(|| {
            let lists: Vec<String> = removable.iter().flat_map(|p| gated(p, false)).collect();
            format!(
                "variables.exempt || {} ? [] : {}",
                skip(id),
                lists.join(" + ")
            )
        });
        out.push(Validation {
            rule: id,
            severity,
            rule_mode: rule_mode(policy, id),
            expression,
            message_expression,
            message: format!("{id}: {message}"),
            removals,
            removed_paths,
            unless,
            paths: lists.join(" + "),
            text,
        });
    }
    (out, gaps)
}

/// The mutation that adds `kubernetes.io/os: windows` to the node selector
/// of a Windows-targeted pod spec without an OS label (a CEL list of
/// `JSONPatch`; nothing on a pod UPDATE, where the spec is immutable).
pub const NODE_SELECTOR: &str = "variables.exempt || variables.podUpdate ? [] : (!has(variables.spec.nodeSelector) ? [JSONPatch{op: 'add', path: variables.pointer + '/nodeSelector', value: {'kubernetes.io/os': 'windows'}}] : (('kubernetes.io/os' in variables.spec.nodeSelector) ? [] : [JSONPatch{op: 'add', path: variables.pointer + '/nodeSelector/kubernetes.io~1os', value: 'windows'}]))";

/// A 64-bit FNV-1a hash, hex: stable across builds and platforms.
fn fnv(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The annotation prefix of the removal records: the mutating policy
/// records the fields it removed for rule `R` in `winadmit.io/removed.R`,
/// and the validating policy `winadmit-warnings` turns each record into a
/// warning (a mutation cannot return warnings).
pub const REMOVED_PREFIX: &str = "winadmit.io/removed.";

/// The validations whose removals the mutating policy makes.
fn mutated<'a>(policy: &Policy, all: &'a [Validation]) -> Vec<&'a Validation> {
    all.iter()
        .filter(|x| {
            x.removals.is_some()
                && (x.rule == rules::EMPTYDIR_MEMORY || policy.mutation.remove_no_op_fields)
        })
        .collect()
}

/// `expr` for a match condition, which cannot read the policy's
/// variables: each variable it uses (and those they use) is bound once, in
/// order, by a comprehension over a one-element list
/// (`[DEF].map(v_NAME, ...)[0]`), and `variables.NAME` becomes `v_NAME`.
#[must_use]
pub fn bind_variables(expr: &str, vars: &[(&'static str, String)]) -> String {
    bind(expr, vars, false)
}

/// `expr` evaluated on `oldObject` instead of `object`, with the variables
/// it uses bound as in [`bind_variables`], each on `oldObject` too.
#[must_use]
pub fn on_old_object(expr: &str, vars: &[(&'static str, String)]) -> String {
    bind(expr, vars, true)
}

fn bind(expr: &str, vars: &[(&'static str, String)], old: bool) -> String {
    const AT: &str = "variables.";
    // The names `text` reads, and `text` with them renamed (and `object`
    // read as `oldObject` when `old`).
    let rename = |text: &str| -> (Vec<String>, String) {
        let text = if old {
            old_object(text)
        } else {
            text.to_owned()
        };
        let mut used = Vec::new();
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(i) = rest.find(AT) {
            out.push_str(&rest[..i]);
            let after = &rest[i + AT.len()..];
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let name = &after[..len];
            if !used.iter().any(|u| u == name) {
                used.push(name.to_owned());
            }
            out.push_str("v_");
            out.push_str(name);
            rest = &after[len..];
        }
        out.push_str(rest);
        (used, out)
    };
    let (mut needed, body) = rename(expr);
    // Close over the variables' own dependencies (definitions read only
    // earlier variables).
    for (name, def) in vars.iter().rev() {
        if needed.iter().any(|n| n == name) {
            for dep in rename(def).0 {
                if !needed.contains(&dep) {
                    needed.push(dep);
                }
            }
        }
    }
    let mut out = body;
    for (name, def) in vars.iter().rev() {
        if needed.iter().any(|n| n == name) {
            out = format!("[{}].map(v_{name}, {out})[0]", rename(def).1);
        }
    }
    out
}

/// `text` with the identifier `object` read as `oldObject`.
fn old_object(text: &str) -> String {
    const OBJECT: &str = "object";
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(OBJECT) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + OBJECT.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(|c| ident(c) || c == '.') || after.is_some_and(ident) {
            out.push_str(OBJECT);
        } else {
            out.push_str("oldObject");
        }
        rest = &rest[i + OBJECT.len()..];
    }
    out.push_str(rest);
    out
}

/// The `needs-mutation` match condition: the node selector to add, a field
/// to remove, or a removal record to clear.
fn needs_mutation(policy: &Policy, cluster: &Cluster) -> String {
    let (all, _) = validations(policy, cluster);
    let mut any = Vec::new();
    if policy.mutation.inject_node_selector {
        any.push("!variables.exempt && !variables.podUpdate && (!has(variables.spec.nodeSelector) || !('kubernetes.io/os' in variables.spec.nodeSelector))".to_owned());
    }
    for x in mutated(policy, &all) {
        if let Some(paths) = &x.removed_paths {
            any.push(format!("size({paths}) > 0"));
        }
    }
    any.push(format!(
        "!variables.podUpdate && has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.startsWith({}))",
        cel_str(REMOVED_PREFIX)
    ));
    bind_variables(&any_of(any), &variables(policy))
}

/// The JSON Patch expressions of the mutating policy, as few as the
/// removals allow: the API server encodes and decodes the whole object
/// for every mutation, even one that patches nothing, so each costs about
/// as much as a webhook call (docs/BENCHMARKS.md).
///
/// The first mutation adds the node selector, records every rule's
/// removals and makes them, all computed on the object as sent: these
/// rules remove distinct fields, so their operations apply in one list.
/// WIN-OS-FIELDS removes what the API server refuses in a Windows pod,
/// fields the other rules remove too: its record and removals are a second
/// mutation, computed on the object the first one left.
fn mutation_expressions(policy: &Policy, mutated: &[&Validation]) -> Vec<String> {
    let (last, first): (Vec<&Validation>, Vec<&Validation>) =
        mutated.iter().partition(|x| x.rule == rules::OS_FIELDS);
    let mut expressions = Vec::new();
    let mut parts = Vec::new();
    if policy.mutation.inject_node_selector {
        parts.push(NODE_SELECTOR.to_owned());
    }
    parts.extend(records(&first));
    parts.extend(first.iter().filter_map(|x| x.removals.clone()));
    if !parts.is_empty() {
        expressions.push(concatenated(&parts));
    }
    if !last.is_empty() {
        let mut parts = records(&last);
        parts.extend(last.iter().filter_map(|x| x.removals.clone()));
        expressions.push(concatenated(&parts));
    }
    expressions
}

/// CEL lists joined with `+`.
fn concatenated(parts: &[String]) -> String {
    match parts {
        [one] => one.clone(),
        _ => parts
            .iter()
            .map(|p| format!("({p})"))
            .collect::<Vec<_>>()
            .join(" + "),
    }
}

/// The operations that record the removals of `xs` (before they happen),
/// in one list: `winadmit.io/removed.RULE` set to the removed field
/// paths, or cleared when this write removes nothing of the rule (a record
/// copied from another object, or left by an earlier write). The
/// annotations map is added first when the object has none. Nothing on a
/// pod UPDATE.
fn records(xs: &[&Validation]) -> Vec<String> {
    let recorded: Vec<(&Validation, &String)> = xs
        .iter()
        .filter_map(|x| x.removed_paths.as_ref().map(|p| (*x, p)))
        .collect();
    if recorded.is_empty() {
        return Vec::new();
    }
    let any = recorded
        .iter()
        .map(|(_, paths)| format!("size({paths}) > 0"))
        .collect::<Vec<_>>()
        .join(" || ");
    let mut parts = vec![format!(
        "variables.podUpdate || has(object.metadata.annotations) || !({any}) ? [] : [JSONPatch{{op: 'add', path: '/metadata/annotations', value: {{}}}}]"
    )];
    parts.extend(recorded.iter().map(|(x, paths)| record(x.rule, paths)));
    parts
}

/// The longest removal record kept whole; a longer one names the first
/// field and how many more.
const MAX_RECORD_CHARS: usize = 2000;

/// The operation that records `rule`'s removals (`paths`, a CEL list of
/// strings), once the annotations map exists ([`records`]).
fn record(rule: &str, paths: &str) -> String {
    let key = format!("{REMOVED_PREFIX}{rule}");
    let pointer = format!(
        "/metadata/annotations/{}",
        key.replace('~', "~0").replace('/', "~1")
    );
    let (key, pointer) = (cel_str(&key), cel_str(&pointer));
    // At most MAX_RECORD_CHARS a record: annotations total 256 KiB at most.
    let value = format!(
        "[p.join(', ')].map(v, size(v) <= {MAX_RECORD_CHARS} ? v : p[0] + ' and ' + string(size(p) - 1) + ' more fields')[0]"
    );
    format!(
        "variables.podUpdate ? [] : [{paths}].map(p, size(p) > 0 ? [JSONPatch{{op: 'add', path: {pointer}, value: {value}}}] : (has(object.metadata.annotations) && {key} in object.metadata.annotations ? [JSONPatch{{op: 'remove', path: {pointer}}}] : []))[0]"
    )
}

/// The warning for a removal record of `x` (`winadmit-warnings`).
fn removal_notice(x: &Validation, message: &str) -> Value {
    let key = cel_str(&format!("{REMOVED_PREFIX}{}", x.rule));
    let text = message
        .strip_prefix(&format!("{}: ", x.rule))
        .unwrap_or(message);
    json!({
        "expression": format!("variables.podUpdate || !({key} in variables.annotations)"),
        "messageExpression": format!(
            "({key} in variables.annotations ? variables.annotations[{key}] : '') + {}",
            cel_str(&format!(
                ": removed by the MutatingAdmissionPolicy winadmit-mutate (recorded in the annotation {REMOVED_PREFIX}{}): {text} ({})",
                x.rule, x.rule
            ))
        ),
        "message": format!("{}: removed by the MutatingAdmissionPolicy winadmit-mutate: {text}", x.rule),
        "reason": "Invalid",
    })
}

/// The API server refuses an expression longer than 100,000 characters:
/// the old object's findings are split into maps no longer than this.
const MAX_OLD_CHARS: usize = 80_000;

/// The variables of a validating policy over `group`: the shared ones,
/// `update`, and the field paths each rule finds on the old object of an
/// UPDATE, as maps from rule id to paths (`old1`, `old2`...: as few as the
/// limit on an expression's length allows; empty maps on a CREATE).
///
/// Each rule's own test is written into the validation and its message,
/// not into variables of its own: the API server builds every variable of
/// a policy anew, read or not, for each list of expressions it evaluates
/// (the match conditions, the validations, the messages), and looks up
/// each `variables.NAME` it reads with a regular expression
/// (benches/policy-cel measures it).
///
/// Returns the variables and, for each rule, the CEL of its old paths.
fn policy_variables(
    shared: &[(&'static str, String)],
    group: &[Validation],
) -> (Vec<(String, String)>, BTreeMap<&'static str, String>) {
    let mut out: Vec<(String, String)> = shared
        .iter()
        .map(|(n, e)| ((*n).to_owned(), e.clone()))
        .collect();
    out.push((UPDATE.0.to_owned(), UPDATE.1.to_owned()));
    let mut maps: Vec<Vec<String>> = Vec::new();
    let mut size = MAX_OLD_CHARS;
    let mut old = BTreeMap::new();
    for x in group {
        let entry = format!("{}: {}", cel_str(x.rule), on_old_object(&found(x), shared));
        if size + entry.len() > MAX_OLD_CHARS {
            maps.push(Vec::new());
            size = 0;
        }
        size += entry.len() + 2;
        maps.last_mut().expect("a map was pushed").push(entry);
        old.insert(
            x.rule,
            format!("variables.old{}[{}]", maps.len(), cel_str(x.rule)),
        );
    }
    for (i, entries) in maps.iter().enumerate() {
        out.push((
            format!("old{}", i + 1),
            format!("variables.update ? {{{}}} : {{}}", entries.join(", ")),
        ));
    }
    (out, old)
}

/// The request is an UPDATE (with the old object).
const UPDATE: (&str, &str) = (
    "update",
    "has(request.operation) && request.operation == 'UPDATE' ? oldObject != null : false",
);

/// The field paths the rule finds (a CEL list): empty when it does not
/// apply.
fn found(x: &Validation) -> String {
    format!("{} ? [] : {}", x.unless, x.paths)
}

/// The paths of `rs` an UPDATE does not count (`/validate` counts only
/// the findings an update introduces): all of them when the old object had
/// each (`old`), and on `pods/ephemeralcontainers`, all but the new
/// ephemeral containers'.
fn unchanged(rs: &str, old: &str) -> String {
    format!(
        "variables.update && (variables.ephemeralUpdate ? {rs}.filter(p, p.startsWith('spec.ephemeralContainers[')) : {rs}).all(p, p in {old})"
    )
}

/// The rule passes: it finds nothing (its linear test: the field paths,
/// quadratic in the number of elements, are worked out only on an UPDATE
/// and for the message), or, on an UPDATE, nothing the old object did not
/// have.
fn passes(x: &Validation, old: &str) -> String {
    format!(
        "({}) || (variables.update && [{}].map(rs, {})[0])",
        x.expression,
        found(x),
        unchanged("rs", old)
    )
}

/// Messages longer than this (in characters) give way to the list of rule
/// ids: the API server drops a message over 5 KiB for the static one.
const MAX_MESSAGE_CHARS: usize = 4000;

/// What a policy's one validation says before the list of its rules'
/// messages (`l`: the rules that do not pass).
#[derive(Clone, Copy)]
enum Head {
    /// `winadmit: 2 problems Windows nodes cannot run: `
    Problems,
    /// `winadmit: ` for one warning, `winadmit: 2 warnings: ` for more.
    Warnings,
}

impl Head {
    fn cel(self) -> &'static str {
        match self {
            Self::Problems => {
                "'winadmit: ' + string(size(l)) + (size(l) == 1 ? ' problem' : ' problems') + ' Windows nodes cannot run: '"
            }
            Self::Warnings => {
                "'winadmit: ' + (size(l) == 1 ? '' : string(size(l)) + ' warnings: ')"
            }
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Problems => {
                "winadmit: this workload has problems Windows nodes cannot run (winadmit lint lists them)"
            }
            Self::Warnings => {
                "winadmit: this workload has settings Windows nodes ignore or may not honour (winadmit lint lists them)"
            }
        }
    }
}

/// The one validation of a policy: every rule of `group` must pass, and
/// the message names each one that does not. The API server reports only
/// the first validation that denies a request, so one validation per rule
/// would name one rule of several; and it evaluates every message, failed
/// or not, so one message costs less than one per rule.
fn combined(group: &[Validation], old: &BTreeMap<&'static str, String>, head: Head) -> Value {
    let expression: Vec<String> = group
        .iter()
        .map(|x| format!("({})", passes(x, &old[x.rule])))
        .collect();
    let pairs: Vec<String> = group
        .iter()
        .map(|x| {
            // `; ` separates the rules: no final period before it.
            let text = x
                .text
                .strip_suffix(".'")
                .map_or_else(|| x.text.clone(), |t| format!("{t}'"));
            format!(
                "[{}, ({}) ? '' : [{}].map(rs, {} ? '' : rs.join(', ') + {text})[0]]",
                cel_str(x.rule),
                x.expression,
                found(x),
                unchanged("rs", &old[x.rule]),
            )
        })
        .collect();
    let says = head.cel();
    let message = format!(
        "[[{}].filter(p, p[1] != '')].map(l, [l.map(p, p[1]).join('; ')].map(m, size(m) <= {MAX_MESSAGE_CHARS} ? {says} + m : {says} + l.map(p, p[0]).join(', ') + ' (the fields are too many to list here: winadmit lint or winadmit explain RULE)')[0])[0]",
        pairs.join(", ")
    );
    json!({
        "expression": expression.join(" && "),
        "messageExpression": message,
        "message": head.message(),
        "reason": if group.iter().any(|x| x.severity == Severity::Error) { "Forbidden" } else { "Invalid" },
    })
}

/// Match conditions as one: the API server evaluates every condition of a
/// list before it looks at their results, while `&&` stops at the first
/// that fails (a Linux pod costs one test).
fn one_condition(name: &'static str, list: &[(&'static str, String)]) -> Value {
    let all: Vec<String> = list.iter().map(|(_, e)| format!("({e})")).collect();
    json!([{"name": name, "expression": all.join(" && ")}])
}

fn match_constraints() -> Value {
    json!({
        "resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
             "resources": ["pods", "pods/ephemeralcontainers", "replicationcontrollers"]},
            {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
             "resources": ["deployments", "daemonsets", "statefulsets", "replicasets"]},
            {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
             "resources": ["jobs", "cronjobs"]}
        ]
    })
}

/// The mutating policy's resources: the validating ones less two, as the
/// mutating webhook (manifests/base/webhooks.yaml): no ReplicaSets (the
/// Deployment controller compares their templates with its own), and Jobs
/// on CREATE only (a Job's pod template is immutable).
fn mutation_match_constraints() -> Value {
    json!({
        "resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
             "resources": ["pods", "pods/ephemeralcontainers", "replicationcontrollers"]},
            {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
             "resources": ["deployments", "daemonsets", "statefulsets"]},
            {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
             "resources": ["cronjobs"]},
            {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"],
             "resources": ["jobs"]}
        ]
    })
}

fn named(list: &[(&'static str, String)]) -> Value {
    Value::Array(
        list.iter()
            .map(|(name, expression)| json!({"name": name, "expression": expression}))
            .collect(),
    )
}

/// Which validations go into which policy, with which action, where.
struct Group {
    name: String,
    validations: Vec<Validation>,
    /// What its one validation's message says first (see [`combined`]).
    head: Head,
    /// Validations after the rules' (the removal notices).
    extra: Vec<Value>,
    /// (binding name suffix, actions, namespace label values it matches:
    /// `None` for "no recognised label").
    bindings: Vec<(String, Vec<&'static str>, Option<&'static str>)>,
}

fn actions(mode: Mode) -> Vec<&'static str> {
    match mode {
        Mode::Enforce => vec!["Deny"],
        Mode::Warn => vec!["Warn"],
        Mode::Audit => vec!["Audit"],
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Enforce => "enforce",
        Mode::Warn => "warn",
        Mode::Audit => "audit",
    }
}

/// Exports the policies for `cluster` in `mode` (`None`: the policy's),
/// with the MutatingAdmissionPolicy when `mutating` and the target has it.
///
/// # Errors
/// The target has no `ValidatingAdmissionPolicy` v1 (before 1.30).
pub fn export(
    policy: &Policy,
    cluster: &Cluster,
    mode: Option<Mode>,
    mutating: bool,
) -> Result<Exported, ExportError> {
    let v = cluster.kubernetes_version;
    if v < VAP_SINCE {
        return Err(ExportError::TooOld(v));
    }
    let mode = mode.unwrap_or(policy.mode);
    let (all, mut gaps) = validations(policy, cluster);

    let mut groups = Vec::new();
    let errors: Vec<Validation> = all
        .iter()
        .filter(|x| x.severity == Severity::Error && x.rule_mode.is_none())
        .cloned()
        .collect();
    if !errors.is_empty() {
        let mut bindings = Vec::new();
        for m in [Mode::Enforce, Mode::Warn, Mode::Audit] {
            bindings.push((
                format!("ns-{}", mode_name(m)),
                actions(m),
                Some(mode_name(m)),
            ));
        }
        bindings.push(("default".to_owned(), actions(mode), None));
        groups.push(Group {
            name: "winadmit-errors".into(),
            validations: errors,
            head: Head::Problems,
            extra: Vec::new(),
            bindings,
        });
    }
    for m in [Mode::Enforce, Mode::Warn, Mode::Audit] {
        let own: Vec<Validation> = all
            .iter()
            .filter(|x| x.severity == Severity::Error && x.rule_mode == Some(m))
            .cloned()
            .collect();
        if !own.is_empty() {
            groups.push(Group {
                name: format!("winadmit-errors-always-{}", mode_name(m)),
                validations: own,
                head: Head::Problems,
                extra: Vec::new(),
                bindings: vec![("all".into(), actions(m), None)],
            });
        }
    }
    let warnings: Vec<Validation> = all
        .iter()
        .filter(|x| x.severity == Severity::Warning)
        .cloned()
        .collect();
    let with_mutation = mutating && v >= MAP_SINCE;
    let notices: Vec<Value> = if with_mutation {
        mutated(policy, &all)
            .into_iter()
            .map(|x| removal_notice(x, &x.message))
            .collect()
    } else {
        Vec::new()
    };
    if !warnings.is_empty() || !notices.is_empty() {
        groups.push(Group {
            name: "winadmit-warnings".into(),
            validations: warnings,
            head: Head::Warnings,
            extra: notices,
            bindings: vec![("all".into(), vec!["Warn"], None)],
        });
    }

    let shared = variables(policy);
    let conditions = one_condition(
        "may-target-windows",
        &validation_match_conditions(policy, cluster),
    );
    let label = &policy.namespace_mode_label;
    let exempt_ns = &policy.exemptions.namespaces;
    let namespace_selector = |value: Option<&str>, all_modes: bool| -> Value {
        // As the webhooks: the policy's reach (excluded namespaces and
        // opt-out labels), and its exempt namespaces.
        let mut skipped = policy.reach.excluded_namespaces.clone();
        skipped.extend(
            exempt_ns
                .iter()
                .filter(|n| !skipped.contains(n))
                .cloned()
                .collect::<Vec<_>>(),
        );
        let mut exprs = vec![
            json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": skipped}),
        ];
        for (k, v) in &policy.reach.opt_out_namespace_labels {
            exprs.push(json!({"key": k, "operator": "NotIn", "values": [v]}));
        }
        match value {
            Some(v) => exprs.push(json!({"key": label, "operator": "In", "values": [v]})),
            None if !all_modes => exprs.push(
                json!({"key": label, "operator": "NotIn", "values": ["enforce", "warn", "audit"]}),
            ),
            None => {}
        }
        json!({"matchExpressions": exprs})
    };

    let mut documents = Vec::new();
    for g in &groups {
        let (vars, old) = policy_variables(&shared, &g.validations);
        let mut validations = Vec::new();
        if !g.validations.is_empty() {
            validations.push(combined(&g.validations, &old, g.head));
        }
        validations.extend(g.extra.iter().cloned());
        let vars: Vec<Value> = vars
            .into_iter()
            .map(|(name, expression)| json!({"name": name, "expression": expression}))
            .collect();
        documents.push(json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": g.name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": match_constraints(),
                "matchConditions": conditions,
                "variables": vars,
                "validations": validations,
            }
        }));
        let per_label = g.bindings.len() > 1;
        for (suffix, acts, value) in &g.bindings {
            let name = if g.bindings.len() == 1 {
                g.name.clone()
            } else {
                format!("{}-{suffix}", g.name)
            };
            documents.push(json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {
                    "policyName": g.name,
                    "validationActions": acts,
                    "matchResources": {"namespaceSelector": namespace_selector(*value, !per_label)},
                }
            }));
        }
    }

    if !mutating {
        gaps.push(Gap {
            rule: "mutation",
            reason: "left out (--no-mutating): use the mutating webhook, or generate without --no-mutating on 1.34+".into(),
            partial: false,
        });
    } else if with_mutation {
        let api = if v >= KubeVersion::new(1, 36) {
            "v1"
        } else {
            "v1beta1"
        };
        let mutations: Vec<Value> = mutation_expressions(policy, &mutated(policy, &all))
            .iter()
            .map(|e| json!({"patchType": "JSONPatch", "jsonPatch": {"expression": e}}))
            .collect();
        for (on, what) in [
            (policy.mutation.set_os_name, "mutation.setOsName"),
            (
                policy.mutation.infer_from_images,
                "mutation.inferFromImages",
            ),
            (policy.mutation.isolation.is_some(), "mutation.isolation"),
            (
                !policy.mutation.tolerations.is_empty(),
                "mutation.tolerations",
            ),
            (
                policy.mutation.inject_windows_build,
                "mutation.injectWindowsBuild",
            ),
            (
                policy.mutation.tolerate_windows_taint && policy.params.windows_taint.is_some(),
                "mutation.tolerateWindowsTaint",
            ),
        ] {
            if on {
                gaps.push(Gap {
                    rule: "mutation",
                    reason: format!("{what} is not exported: use the mutating webhook for it"),
                    partial: true,
                });
            }
        }
        if !mutations.is_empty() {
            documents.push(json!({
                "apiVersion": format!("{GROUP}/{api}"),
                "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "winadmit-mutate"},
                "spec": {
                    "failurePolicy": "Fail",
                    // Not invoked again when a later plugin changes the
                    // object: its removal records must describe this
                    // request (a second call finds nothing to remove and
                    // would clear them); what a later webhook adds is
                    // validated, and warned about, as sent.
                    "reinvocationPolicy": "Never",
                    "matchConstraints": mutation_match_constraints(),
                    "matchConditions": one_condition("needs-mutation", &mutation_match_conditions(policy, cluster)),
                    "variables": named(&shared),
                    "mutations": mutations,
                }
            }));
            documents.push(json!({
                "apiVersion": format!("{GROUP}/{api}"),
                "kind": "MutatingAdmissionPolicyBinding",
                "metadata": {"name": "winadmit-mutate"},
                "spec": {
                    "policyName": "winadmit-mutate",
                    "matchResources": {"namespaceSelector": namespace_selector(None, true)},
                }
            }));
        }
    } else {
        gaps.push(Gap {
            rule: "mutation",
            reason: format!(
                "MutatingAdmissionPolicy needs Kubernetes 1.34 (v1beta1) or 1.36 (v1); the target is {v}: use the mutating webhook"
            ),
            partial: false,
        });
    }

    // Labels: the winadmit version and a hash of what was generated.
    let hash = fnv(&serde_json::to_string(&documents).unwrap_or_default());
    for d in &mut documents {
        d["metadata"]["labels"] = json!({
            "app.kubernetes.io/name": "winadmit",
            "app.kubernetes.io/managed-by": "winadmit",
            "app.kubernetes.io/version": env!("CARGO_PKG_VERSION"),
            "winadmit.io/policy-hash": hash,
        });
    }
    Ok(Exported { documents, gaps })
}

/// The comment at the top of the output: the target and every gap.
#[must_use]
pub fn header(cluster: &Cluster, mode: Mode, gaps: &[Gap]) -> String {
    let mut s = format!(
        "# winadmit {} admission policies for Kubernetes {}, {} Windows nodes, stance {}, mode {}.\n",
        env!("CARGO_PKG_VERSION"),
        cluster.kubernetes_version,
        cluster.container_runtime,
        if cluster.is_strict() {
            "strict"
        } else {
            "default"
        },
        mode_name(mode),
    );
    s.push_str("# Generated by `winadmit admission-policy`; do not edit by hand.\n");
    if !gaps.is_empty() {
        s.push_str(
            "# Left out of these policies, in whole or in part (the webhook and `winadmit lint` check them):\n",
        );
        for g in gaps {
            let kind = if g.partial {
                "partly exported"
            } else {
                "not exported"
            };
            let _ = writeln!(s, "#   {} ({kind}): {}", g.rule, g.reason);
        }
    }
    s
}
