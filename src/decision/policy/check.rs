//! Checks of policy values after parsing, each error at the key it
//! concerns: namespace names, `reach`, label selectors.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{PolicyError, Reach};

/// Reports a located error for a key after parsing (`/mutation/isolation`, ...).
pub(super) type At<'a> = &'a dyn Fn(&str, String) -> PolicyError;

/// Each item of a list by `problem`; the first error at its index.
pub(super) fn check_each(
    items: &[String],
    name: &str,
    at: At<'_>,
    problem: impl Fn(&str) -> Option<String>,
) -> Result<(), PolicyError> {
    for (i, item) in items.iter().enumerate() {
        if let Some(why) = problem(item) {
            let pointer = format!("/{}/{i}", name.replace('.', "/"));
            return Err(at(&pointer, format!("{name}[{i}]: {why}")));
        }
    }
    Ok(())
}

pub(super) fn namespace_problem(n: &str) -> Option<String> {
    crate::decision::names::dns1123_label(n)
        .map(|why| format!("{n:?} is not a valid namespace name: {why}"))
}

/// `reach`: namespace names, and label keys and values the manifests'
/// `namespaceSelector` holds.
pub(super) fn check_reach(r: &Reach, at: At<'_>) -> Result<(), PolicyError> {
    check_each(
        &r.excluded_namespaces,
        "reach.excludedNamespaces",
        at,
        namespace_problem,
    )?;
    for (k, v) in &r.opt_out_namespace_labels {
        let pointer = format!(
            "/reach/optOutNamespaceLabels/{}",
            crate::decision::path::escape_pointer(k)
        );
        if let Some(why) = crate::decision::names::qualified_name(k) {
            return Err(at(
                &pointer,
                format!("reach.optOutNamespaceLabels: {k:?} is not a valid label key: {why}"),
            ));
        }
        if let Some(why) = crate::decision::names::label_value(v) {
            return Err(at(
                &pointer,
                format!("reach.optOutNamespaceLabels.{k}: {v:?} is not a valid label value: {why}"),
            ));
        }
    }
    Ok(())
}

/// A label selector's keys and values, as the API server validates them.
pub(super) fn check_selector(
    s: &LabelSelector,
    name: &str,
    pointer: &str,
    at: At<'_>,
) -> Result<(), PolicyError> {
    for (k, v) in s.match_labels.iter().flatten() {
        let here = format!(
            "{pointer}/matchLabels/{}",
            crate::decision::path::escape_pointer(k)
        );
        if let Some(why) = crate::decision::names::qualified_name(k) {
            return Err(at(
                &here,
                format!("{name}.matchLabels: {k:?} is not a valid label key: {why}"),
            ));
        }
        if let Some(why) = crate::decision::names::label_value(v) {
            return Err(at(
                &here,
                format!("{name}.matchLabels.{k}: {v:?} is not a valid label value: {why}"),
            ));
        }
    }
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let here = format!("{pointer}/matchExpressions/{i}");
        if let Some(why) = crate::decision::names::qualified_name(&e.key) {
            return Err(at(
                &format!("{here}/key"),
                format!(
                    "{name}.matchExpressions[{i}].key: {:?} is not a valid label key: {why}",
                    e.key
                ),
            ));
        }
        for (j, v) in e.values.iter().flatten().enumerate() {
            if let Some(why) = crate::decision::names::label_value(v) {
                return Err(at(
                    &format!("{here}/values/{j}"),
                    format!(
                        "{name}.matchExpressions[{i}].values[{j}]: {v:?} is not a valid label value: {why}"
                    ),
                ));
            }
        }
    }
    Ok(())
}
