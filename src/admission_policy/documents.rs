//! The parts of the policy objects: each policy's one validation over its
//! rules, its variables (with the old object's findings on an UPDATE), its
//! match constraints and bindings.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Validation;
use super::bind::on_old_object;
use super::cel::cel_str;
use crate::finding::Severity;
use crate::policy::Mode;

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
pub(super) fn policy_variables(
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

/// The one validation of a policy: every rule of `group` must pass, and
/// the message names each one that does not. The API server reports only
/// the first validation that denies a request, so one validation per rule
/// would name one rule of several; and it evaluates every message, failed
/// or not, so one message costs less than one per rule.
pub(super) fn combined(
    group: &[Validation],
    old: &BTreeMap<&'static str, String>,
    head: Head,
) -> Value {
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
