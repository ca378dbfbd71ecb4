//! The rules as `ValidatingAdmissionPolicy` and `MutatingAdmissionPolicy`
//! objects: enforcement by the API server itself, with no webhook to run.
//!
//! Pure: from a policy and a target cluster to JSON objects and the list of
//! what could not be exported (and why). The CEL mirrors the rule files at
//! that target ([`probes`]); `tests/admission_policy.rs` evaluates it on the
//! corpus and checks it agrees with [`crate::engine::evaluate`].
//!
//! CEL cost: every validation is a fixed number of `.exists()` over one
//! list (containers, volumes) or two nested ones (container x volumeMounts),
//! each body a constant-size field test, so the cost grows linearly with
//! the number of containers (and mounts). The field paths in the messages
//! use `indexOf`, which is quadratic, but only in `messageExpression`, which
//! runs when the validation already failed. See docs/admission-policy.md.

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
    ]);
    vars
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
/// ones, and no Linux signal (the engine does not mutate a pod whose
/// targeting contradicts itself: it may land on Linux).
#[must_use]
pub fn mutation_match_conditions(
    policy: &Policy,
    cluster: &Cluster,
) -> Vec<(&'static str, String)> {
    let mut out = match_conditions(policy, cluster);
    let mut signals = vec![
        "has(s.nodeSelector) && ((('kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['kubernetes.io/os'] == 'linux') || (('beta.kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['beta.kubernetes.io/os'] == 'linux'))".to_owned(),
    ];
    if cluster.version_at_least(1, 23) {
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
    let spec = by_kind(
        "object.spec",
        "object.spec.jobTemplate.spec.template.spec",
        "object.spec.template.spec",
    );
    let any: Vec<String> = signals.into_iter().map(|s| format!("({s})")).collect();
    out.push((
        "no-linux-targeting",
        format!("![{spec}].exists(s, {})", any.join(" || ")),
    ));
    out
}

/// The engine's Windows signals (`targeting::classify`) as CEL over the spec `s`.
fn targets_windows(policy: &Policy, cluster: &Cluster) -> String {
    let mut signals = vec![
        "has(s.nodeSelector) && ((('kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['kubernetes.io/os'] == 'windows') || (('beta.kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['beta.kubernetes.io/os'] == 'windows') || ('node.kubernetes.io/windows-build' in s.nodeSelector) || (('kubernetes.azure.com/os-sku' in s.nodeSelector) && s.nodeSelector['kubernetes.azure.com/os-sku'] in ".to_owned()
            + &cel_list(crate::targeting::WINDOWS_OS_SKUS)
            + "))",
    ];
    if cluster.version_at_least(1, 23) {
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
    let spec = by_kind(
        "object.spec",
        "object.spec.jobTemplate.spec.template.spec",
        "object.spec.template.spec",
    );
    let any: Vec<String> = signals.into_iter().map(|s| format!("({s})")).collect();
    format!("[{spec}].exists(s, {})", any.join(" || "))
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
            "{root} + '{sep}volumes{open}' + string(variables.volumes.indexOf(v)) + '{close}'"
        ),
        ProbeScope::Container | ProbeScope::Mount => {
            let c = format!(
                "{root} + '{sep}{list}{open}' + string(variables.{list}.indexOf(c)) + '{close}'"
            );
            if scope == ProbeScope::Mount {
                format!(
                    "{c} + '{sep}volumeMounts{open}' + string(c.volumeMounts.indexOf(m)) + '{close}'"
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
        // HostProcess and a contradiction both carry a Windows signal.
        if rule.info.scope == rules::Scope::Any
            && !matches!(id, "WIN-HOSTPROCESS" | "WIN-OS-CONFLICT")
        {
            gaps.push(Gap {
                rule: id,
                reason: "checked on Windows-targeted pods only (the policies match those); the webhook also checks pods with no OS targeting".into(),
                partial: true,
            });
        }
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
        let expression = format!(
            "variables.exempt || {} || !({})",
            skip(id),
            anys.join(" || ")
        );
        let message_expression = format!(
            "({}).join(', ') + {}",
            lists.join(" + "),
            cel_str(&format!(": {message} ({id}). Fix: {fix}"))
        );
        let removable: Vec<&Probe> = probes
            .iter()
            .filter(|p| p.removable && matches!(p.field, Field::Keys(_)))
            .collect();
        let removals = (!removable.is_empty()).then(|| {
            let lists: Vec<String> = removable
                .iter()
                .flat_map(|p| paths(p, true))
                .map(|l| format!("{l}.map(p, JSONPatch{{op: 'remove', path: p}})"))
                .collect();
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
        });
    }
    (out, gaps)
}

/// The mutation that adds `kubernetes.io/os: windows` to the node selector
/// of a Windows-targeted pod spec without an OS label (a CEL list of `JSONPatch`).
pub const NODE_SELECTOR: &str = "variables.exempt ? [] : (!has(variables.spec.nodeSelector) ? [JSONPatch{op: 'add', path: variables.pointer + '/nodeSelector', value: {'kubernetes.io/os': 'windows'}}] : (('kubernetes.io/os' in variables.spec.nodeSelector) ? [] : [JSONPatch{op: 'add', path: variables.pointer + '/nodeSelector/kubernetes.io~1os', value: 'windows'}]))";

/// A 64-bit FNV-1a hash, hex: stable across builds and platforms.
fn fnv(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
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
                bindings: vec![("all".into(), actions(m), None)],
            });
        }
    }
    let warnings: Vec<Validation> = all
        .iter()
        .filter(|x| x.severity == Severity::Warning)
        .cloned()
        .collect();
    if !warnings.is_empty() {
        groups.push(Group {
            name: "winadmit-warnings".into(),
            validations: warnings,
            bindings: vec![("all".into(), vec!["Warn"], None)],
        });
    }

    let vars = named(&variables(policy));
    let conditions = named(&match_conditions(policy, cluster));
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
        let validations: Vec<Value> = g
            .validations
            .iter()
            .map(|x| {
                json!({
                    "expression": x.expression,
                    "messageExpression": x.message_expression,
                    "message": x.message,
                    "reason": if x.severity == Severity::Error { "Forbidden" } else { "Invalid" },
                })
            })
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
    } else if v >= MAP_SINCE {
        let api = if v >= KubeVersion::new(1, 36) {
            "v1"
        } else {
            "v1beta1"
        };
        let mut mutations = Vec::new();
        if policy.mutation.inject_node_selector {
            mutations.push(
                json!({"patchType": "JSONPatch", "jsonPatch": {"expression": NODE_SELECTOR}}),
            );
        }
        for x in &all {
            if let Some(r) = &x.removals {
                let emptydir = x.rule == "WIN-EMPTYDIR-MEMORY";
                if emptydir || policy.mutation.remove_no_op_fields {
                    mutations
                        .push(json!({"patchType": "JSONPatch", "jsonPatch": {"expression": r}}));
                }
            }
        }
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
                    "reinvocationPolicy": "IfNeeded",
                    "matchConstraints": match_constraints(),
                    "matchConditions": named(&mutation_match_conditions(policy, cluster)),
                    "variables": vars,
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
