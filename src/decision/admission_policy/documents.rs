//! The parts of the policy objects: each policy's one validation over its
//! rules, its variables (one per rule: whether it passes), its
//! match constraints and bindings.

use serde_json::{Value, json};

use super::bind::{old_variables, on_old_object, settle};
use super::conditions::validation_match_conditions;
use super::removals::{mutated, removal_notice};
use super::{GROUP, Validation};
use crate::decision::cluster::TargetCluster;
use crate::decision::finding::Severity;
use crate::decision::policy::{Mode, Policy};
use crate::decision::rules::cel::cel_str;

/// The variables of a validating policy over `group`: the shared ones,
/// `update`, the copies on the old object of those the rules' field paths
/// read (`old_spec`...), and one per rule saying whether it passes (`ok_WIN_HOSTNETWORK`
/// for WIN-HOSTNETWORK), read by the policy's one validation and by its
/// message.
///
/// One variable per rule keeps each expression short: the API server
/// type-checks every expression when the policy is stored and when it is
/// loaded, and the checker's work grows faster than an expression's length
/// (`BenchmarkCompile` in benches/policy-cel measures it: docs/BENCHMARKS.md,
/// "One policy on the API server's own code" and "What was tried and not
/// kept").
/// A variable is evaluated at most once for each list of expressions that
/// reads it (the validations, the messages).
pub(super) fn policy_variables(
    shared: &[(&'static str, String)],
    group: &[Validation],
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = shared
        .iter()
        .map(|(n, e)| ((*n).to_owned(), e.clone()))
        .collect();
    out.push((UPDATE.0.to_owned(), UPDATE.1.to_owned()));
    let found: Vec<String> = group.iter().map(found).collect();
    out.extend(old_variables(&found, shared));
    for (x, found) in group.iter().zip(&found) {
        out.push((passes_name(x.rule), passes(x, found)));
    }
    out
}

/// The name of the variable that says whether `rule` passes.
fn passes_name(rule: &str) -> String {
    format!("ok_{}", rule.replace('-', "_"))
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

/// The rule passes: it finds nothing (its linear test), or, on an UPDATE,
/// nothing the old object did not have (`/validate` counts only the
/// findings an update introduces). Its field paths, quadratic in the number
/// of elements, are worked out only when the linear test fails on an
/// UPDATE, on the old object only then; on `pods/ephemeralcontainers` only
/// the new ephemeral containers' paths count.
fn passes(x: &Validation, found: &str) -> String {
    let old = on_old_object(found);
    format!(
        "({}) || (variables.update && [{found}].map(rs, [{old}].map(old, (variables.ephemeralUpdate ? rs.filter(p, p.startsWith('spec.ephemeralContainers[')) : rs).all(p, p in old))[0])[0])",
        x.expression,
    )
}

/// Messages longer than this (in characters) give way to the list of rule
/// ids: the API server drops a message over 5 KiB for the static one.
const MAX_MESSAGE_CHARS: usize = 4000;

/// What a policy's one validation says before the list of its rules'
/// messages (`l`: the rules that do not pass).
#[derive(Clone, Copy)]
pub(super) enum Head {
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

/// The one validation of a policy: every rule of `group` must pass (its
/// variable, [`policy_variables`]), and the message names each one that
/// does not. The API server reports only
/// the first validation that denies a request, so one validation per rule
/// would name one rule of several; and it evaluates every message, failed
/// or not, so one message costs less than one per rule.
pub(super) fn combined(group: &[Validation], head: Head) -> Value {
    let expression: Vec<String> = group
        .iter()
        .map(|x| format!("variables.{}", passes_name(x.rule)))
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
                "[{}, variables.{} ? '' : ({}).join(', ') + {text}]",
                cel_str(x.rule),
                passes_name(x.rule),
                found(x),
            )
        })
        .collect();
    let says = head.cel();
    // The API server evaluates the message on every request, and uses it
    // only when the validation fails: a request that passes stops at the
    // first test.
    let all_pass = expression.join(" && ");
    let message = format!(
        "{all_pass} ? '' : [[{}].filter(p, p[1] != '')].map(l, [l.map(p, p[1]).join('; ')].map(m, size(m) <= {MAX_MESSAGE_CHARS} ? {says} + m : {says} + l.map(p, p[0]).join(', ') + ' (the fields are too many to list here: winadmit lint or winadmit explain RULE)')[0])[0]",
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
pub(super) fn one_condition(name: &'static str, list: &[(&'static str, String)]) -> Value {
    let all: Vec<String> = list.iter().map(|(_, e)| format!("({e})")).collect();
    json!([{"name": name, "expression": all.join(" && ")}])
}

pub(super) fn match_constraints() -> Value {
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
pub(super) fn mutation_match_constraints() -> Value {
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

pub(super) fn named(list: &[(&'static str, String)]) -> Value {
    Value::Array(
        list.iter()
            .map(|(name, expression)| json!({"name": name, "expression": expression}))
            .collect(),
    )
}

/// Which validations go into which policy, with which action, where.
pub(super) struct Group {
    pub(super) name: String,
    pub(super) validations: Vec<Validation>,
    /// What its one validation's message says first (see [`combined`]).
    pub(super) head: Head,
    /// Validations after the rules' (the removal notices).
    pub(super) extra: Vec<Value>,
    /// (binding name suffix, actions, namespace label values it matches:
    /// `None` for "no recognised label").
    pub(super) bindings: Vec<(String, Vec<&'static str>, Option<&'static str>)>,
}

pub(super) fn actions(mode: Mode) -> Vec<&'static str> {
    match mode {
        Mode::Enforce => vec!["Deny"],
        Mode::Warn => vec!["Warn"],
        Mode::Audit => vec!["Audit"],
    }
}

pub(super) fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Enforce => "enforce",
        Mode::Warn => "warn",
        Mode::Audit => "audit",
    }
}

/// The validating policies: one for the errors (bound once per namespace
/// mode label and once for the rest, in `mode`), one for each own mode
/// rules of the policy set, and one for the warnings and the removal
/// notices (when the mutating policy is exported).
pub(super) fn groups(
    policy: &Policy,
    all: &[Validation],
    mode: Mode,
    with_mutation: bool,
) -> Vec<Group> {
    let mut groups = Vec::new();
    // What the API server refuses itself never reaches a validating policy.
    let validated: Vec<&Validation> = all.iter().filter(|x| !x.refused_by_api_server).collect();
    let errors: Vec<Validation> = validated
        .iter()
        .filter(|x| x.severity == Severity::Error && x.rule_mode.is_none())
        .copied()
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
        let own: Vec<Validation> = validated
            .iter()
            .filter(|x| x.severity == Severity::Error && x.rule_mode == Some(m))
            .copied()
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
    let warnings: Vec<Validation> = validated
        .iter()
        .filter(|x| x.severity == Severity::Warning)
        .copied()
        .cloned()
        .collect();
    let notices: Vec<Value> = if with_mutation {
        mutated(policy, all)
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
    groups
}

/// The namespaces a binding matches: as the webhooks, the policy's reach
/// (excluded namespaces and opt-out labels) and its exempt namespaces;
/// then those whose mode label is `value`, or (`None`, unless `all_modes`)
/// those without a recognised mode label.
pub(super) fn namespace_selector(policy: &Policy, value: Option<&str>, all_modes: bool) -> Value {
    let label = &policy.namespace_mode_label;
    let mut skipped = policy.reach.excluded_namespaces.clone();
    skipped.extend(
        policy
            .exemptions
            .namespaces
            .iter()
            .filter(|n| !skipped.contains(n))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let mut exprs =
        vec![json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": skipped})];
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
}

/// The variables `validations` read, with their constants written in
/// place ([`settle`]).
pub(super) fn settle_validations(
    vars: Vec<(String, String)>,
    validations: &mut [Value],
) -> Vec<(String, String)> {
    let mut texts: Vec<&mut String> = Vec::new();
    for v in validations.iter_mut() {
        if let Value::Object(fields) = v {
            for (key, text) in fields.iter_mut() {
                if let ("expression" | "messageExpression", Value::String(t)) = (key.as_str(), text)
                {
                    texts.push(t);
                }
            }
        }
    }
    settle(vars, &mut texts)
}

/// Each group's ValidatingAdmissionPolicy and its bindings.
pub(super) fn validating_documents(
    policy: &Policy,
    cluster: &TargetCluster,
    groups: &[Group],
    shared: &[(&'static str, String)],
) -> Vec<Value> {
    let conditions = one_condition(
        "may-target-windows",
        &validation_match_conditions(policy, cluster),
    );
    let mut documents = Vec::new();
    for g in groups {
        let vars = policy_variables(shared, &g.validations);
        let mut validations = Vec::new();
        if !g.validations.is_empty() {
            validations.push(combined(&g.validations, g.head));
        }
        validations.extend(g.extra.iter().cloned());
        let vars = settle_validations(vars, &mut validations);
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
                    "matchResources": {"namespaceSelector": namespace_selector(policy, *value, !per_label)},
                }
            }));
        }
    }
    documents
}
