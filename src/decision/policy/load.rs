//! Errors of a policy file in the project's words: at the line and column
//! the YAML parser reports, or at the key (a JSON Pointer) a check after
//! parsing concerns; and the checks of `mutation.tolerations`.

use std::path::Path;

use super::PolicyError;
use crate::decision::tolerations::{TAINT_EFFECTS, TOLERATION_OPERATORS};

/// A YAML error in the project's words, at its line and column: one
/// document per policy file, each key once. `None`: no position known.
pub(super) fn parse_error(path: &Path, e: &serde_saphyr::Error) -> Option<PolicyError> {
    use serde_saphyr::Error as E;
    let loc = e.location()?;
    let message = match e.without_snippet() {
        E::MultipleDocuments { .. } => "a policy file holds one YAML document, and another starts here: split it into two files (--policy takes a directory) or remove the `---`".to_owned(),
        E::DuplicateMappingKey { key, .. } => match key {
            Some(k) => format!("duplicate key `{k}`: each key may appear once in a map; keep one"),
            None => "duplicate key: each key may appear once in a map; keep one".to_owned(),
        },
        other => {
            // The parser's text without its own position prefix.
            let text = other.to_string();
            let first = text.lines().next().unwrap_or_default();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            let message = match first.split_once(": ") {
                Some((pos, rest)) if pos.starts_with("line ") => rest,
                _ => first,
            };
            // The position is already in front.
            match message.rsplit_once(" at line ") {
                Some((m, _)) => m.to_owned(),
                None => message.to_owned(),
            }
        }
    };
    Some(PolicyError::At {
        path: path.to_owned(),
        line: loc.line(),
        column: loc.column(),
        message,
    })
}

/// An error at the key a JSON Pointer names in the policy text: the reader
/// of policy files (`crate::input::policy`) finds its line and column.
pub(super) fn located(path: &Path, pointer: &str, message: String) -> PolicyError {
    PolicyError::AtKey {
        path: path.to_owned(),
        pointer: pointer.to_owned(),
        message,
    }
}

/// `mutation.tolerations`: each a Kubernetes `Toleration` the API server
/// accepts (`ValidateTolerations` in `pkg/apis/core/validation`): a key
/// that is a qualified name, operator `Exists` or `Equal`, effect
/// `NoSchedule`, `PreferNoSchedule`, `NoExecute` or empty for all;
/// `Exists` with no value, `Equal` with a label value; no key only with
/// `Exists`; `tolerationSeconds` only with `NoExecute`. The error: a pointer below the list,
/// and the message.
pub(super) fn check_tolerations(value: &serde_json::Value) -> Result<(), (String, String)> {
    let Some(items) = value.as_array() else {
        return Err((
            String::new(),
            "mutation.tolerations must be a list of tolerations".to_owned(),
        ));
    };
    for (i, item) in items.iter().enumerate() {
        check_toleration(i, item)?;
    }
    Ok(())
}

/// One toleration, at index `i` of `mutation.tolerations`.
fn check_toleration(i: usize, item: &serde_json::Value) -> Result<(), (String, String)> {
    use k8s_openapi::api::core::v1::Toleration;
    let here = |field: &str| {
        if field.is_empty() {
            format!("/{i}")
        } else {
            format!("/{i}/{field}")
        }
    };
    let name = format!("mutation.tolerations[{i}]");
    let t: Toleration = serde_json::from_value(item.clone())
        .map_err(|e| (here(""), format!("{name}: not a toleration: {e}")))?;
    if let Some(fields) = item.as_object() {
        let allowed = ["key", "operator", "value", "effect", "tolerationSeconds"];
        if let Some(k) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err((
                here(k),
                format!(
                    "{name}: unknown field `{k}`: expected key, operator, value, effect or tolerationSeconds"
                ),
            ));
        }
    }
    let operator = t.operator.as_deref().unwrap_or("Equal");
    if !TOLERATION_OPERATORS.contains(&operator) {
        return Err((
            here("operator"),
            format!("{name}.operator: unknown operator `{operator}`: expected Exists or Equal"),
        ));
    }
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty())
        && !TAINT_EFFECTS.contains(&effect)
    {
        return Err((
            here("effect"),
            format!(
                "{name}.effect: unknown effect `{effect}`: expected NoSchedule, PreferNoSchedule or NoExecute (or leave it out for all)"
            ),
        ));
    }
    let key = t.key.as_deref().unwrap_or_default();
    if !key.is_empty()
        && let Some(why) = crate::decision::names::qualified_name(key)
    {
        return Err((
            here("key"),
            format!("{name}.key: {key:?} is not a valid label key: {why}"),
        ));
    }
    check_toleration_values(&t, operator, &here, &name)
}

/// A toleration's `tolerationSeconds` and `value`, by its effect and
/// operator; a toleration without a key must use `Exists`.
fn check_toleration_values(
    t: &k8s_openapi::api::core::v1::Toleration,
    operator: &str,
    here: &dyn Fn(&str) -> String,
    name: &str,
) -> Result<(), (String, String)> {
    if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
        return Err((
            here("tolerationSeconds"),
            format!(
                "{name}.tolerationSeconds: only allowed with effect NoExecute (the API server refuses it with {}): set effect: NoExecute or remove tolerationSeconds",
                t.effect
                    .as_deref()
                    .filter(|e| !e.is_empty())
                    .map_or_else(|| "no effect".to_owned(), |e| format!("effect {e}"))
            ),
        ));
    }
    if operator == "Equal"
        && let Some(value) = t.value.as_deref()
        && let Some(why) = crate::decision::names::label_value(value)
    {
        return Err((
            here("value"),
            format!("{name}.value: {value:?} is not a valid label value: {why}"),
        ));
    }
    if operator == "Exists" && t.value.as_deref().is_some_and(|v| !v.is_empty()) {
        return Err((
            here("value"),
            format!("{name}.value: must be empty with operator Exists"),
        ));
    }
    if t.key.as_deref().unwrap_or_default().is_empty() && operator != "Exists" {
        return Err((
            here("operator"),
            format!("{name}: a toleration without a key must use operator Exists"),
        ));
    }
    Ok(())
}
