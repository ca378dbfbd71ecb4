//! The fields the mutating policy removes: which validations' removals it
//! makes, the match condition that says a pod needs it, and the warning a
//! removal record becomes (`winadmit-warnings`).

use serde_json::{Value, json};

use super::Validation;
use super::bind::bind_variables;
use super::validations::validations;
use super::variables::{any_of, variables};
use crate::decision::cluster::TargetCluster;
use crate::decision::policy::Policy;
use crate::decision::rules::cel::{Removal, cel_str};

/// The annotation prefix of the removal records: the mutating policy
/// records the fields it removed for rule `R` in `winadmit.io/removed.R`,
/// and the validating policy `winadmit-warnings` turns each record into a
/// warning (a mutation cannot return warnings).
pub const REMOVED_PREFIX: &str = "winadmit.io/removed.";

/// The validations whose removals the mutating policy makes.
pub(super) fn mutated<'a>(policy: &Policy, all: &'a [Validation]) -> Vec<&'a Validation> {
    all.iter()
        .filter(|x| {
            x.removals.is_some()
                && (x.removal == Removal::OwnSwitch || policy.mutation.remove_no_op_fields)
        })
        .collect()
}

/// The `needs-mutation` match condition: the node selector to add, a field
/// to remove, or a removal record to clear.
pub(super) fn needs_mutation(policy: &Policy, cluster: &TargetCluster) -> String {
    let (all, _) = validations(policy, cluster);
    let mut any = Vec::new();
    if policy.mutation.inject_node_selector {
        any.push("!variables.exempt && !variables.podUpdate && (!has(variables.spec.nodeSelector) || !('kubernetes.io/os' in variables.spec.nodeSelector))".to_owned());
    }
    for x in mutated(policy, &all) {
        if let Some(test) = &x.removes_something {
            any.push(test.clone());
        }
    }
    any.push(format!(
        "!variables.podUpdate && has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.startsWith({}))",
        cel_str(REMOVED_PREFIX)
    ));
    bind_variables(&any_of(any), &variables(policy))
}

/// The warning for a removal record of `x` (`winadmit-warnings`).
pub(super) fn removal_notice(x: &Validation, message: &str) -> Value {
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
