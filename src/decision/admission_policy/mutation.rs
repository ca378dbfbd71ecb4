//! The MutatingAdmissionPolicy's parts: the node selector it adds, the
//! fields it removes, and the annotations that record the removals (which
//! the validating policy `winadmit-warnings` turns into warnings).

use serde_json::{Value, json};

use super::conditions::mutation_match_conditions;
use super::documents::{mutation_match_constraints, named, namespace_selector, one_condition};
use super::removals::{REMOVED_PREFIX, mutated};
use super::{GROUP, Gap, Validation};
use crate::decision::cluster::TargetCluster;
use crate::decision::policy::Policy;
use crate::decision::rules::cel::{Removal, cel_str};

/// The mutation that adds `kubernetes.io/os: windows` to the node selector
/// of a Windows-targeted pod spec without an OS label (a CEL list of
/// `JSONPatch`; nothing on a pod UPDATE, where the spec is immutable).
pub const NODE_SELECTOR: &str = "variables.exempt || variables.podUpdate ? [] : (!has(variables.spec.nodeSelector) ? [JSONPatch{op: 'add', path: variables.pointer + '/nodeSelector', value: {'kubernetes.io/os': 'windows'}}] : (('kubernetes.io/os' in variables.spec.nodeSelector) ? [] : [JSONPatch{op: 'add', path: variables.pointer + '/nodeSelector/kubernetes.io~1os', value: 'windows'}]))";

/// The JSON Patch expressions of the mutating policy, as few as the
/// removals allow: the API server encodes and decodes the whole object
/// for every mutation, even one that patches nothing, so each costs about
/// as much as a webhook call (docs/BENCHMARKS.md, "What was tried and not
/// kept").
///
/// The first mutation adds the node selector, records every rule's
/// removals and makes them, all computed on the object as sent: these
/// rules remove distinct fields, so their operations apply in one list.
/// A rule whose removals are [`Removal::AfterOthers`] (WIN-OS-FIELDS:
/// what the API server refuses in a Windows pod, fields the other rules
/// remove too) has its record and removals in a second mutation, computed
/// on the object the first one left.
pub(super) fn mutation_expressions(policy: &Policy, mutated: &[&Validation]) -> Vec<String> {
    let (last, first): (Vec<&Validation>, Vec<&Validation>) = mutated
        .iter()
        .partition(|x| x.removal == Removal::AfterOthers);
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

/// What the mutating policy leaves to the webhook.
pub(super) fn mutation_gaps(policy: &Policy) -> Vec<Gap> {
    [
        (policy.mutation.set_os_name, "mutation.setOsName"),
        (
            policy.mutation.infer_from_images,
            "mutation.inferFromImages",
        ),
        // Pinning to Windows by the images' names is exported (the
        // variable pinnableByImages); to Linux it needs the cluster's
        // Windows nodes, which a policy does not see.
        (policy.mutation.pin_linux_images, "mutation.pinLinuxImages"),
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
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, what)| Gap {
        rule: "mutation",
        reason: format!("{what} is not exported: use the mutating webhook for it"),
        partial: true,
    })
    .collect()
}

/// The MutatingAdmissionPolicy and its binding, when it has something to
/// do (v1beta1 before Kubernetes 1.36).
pub(super) fn mutating_documents(
    policy: &Policy,
    cluster: &TargetCluster,
    all: &[Validation],
    shared: &[(&'static str, String)],
) -> Vec<Value> {
    let api = if cluster.version_at_least(1, 36) {
        "v1"
    } else {
        "v1beta1"
    };
    let mutations: Vec<Value> = mutation_expressions(policy, &mutated(policy, all))
        .iter()
        .map(|e| json!({"patchType": "JSONPatch", "jsonPatch": {"expression": e}}))
        .collect();
    if mutations.is_empty() {
        return Vec::new();
    }
    vec![
        json!({
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
                "variables": named(shared),
                "mutations": mutations,
            }
        }),
        json!({
            "apiVersion": format!("{GROUP}/{api}"),
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": "winadmit-mutate"},
            "spec": {
                "policyName": "winadmit-mutate",
                "matchResources": {"namespaceSelector": namespace_selector(policy, None, true)},
            }
        }),
    ]
}
