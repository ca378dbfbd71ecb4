//! Why a verdict is not what the findings alone say: the exemption, the
//! mode that admits errors, the patch operations that remove findings
//! ([`super::ObjectReport::why`]).

use crate::decision::decide::{self, Verdict};
use crate::decision::finding::{PatchOperation, Severity};

/// Why a decision's verdict is not what its findings alone say (errors
/// deny, warnings warn): see [`ObjectReport::why`].
pub(super) fn verdict_reasons(d: &decide::Decision) -> Vec<String> {
    use decide::{Exemption, Outcome};
    let mut out = Vec::new();
    match &d.exemption {
        Some(Exemption::User(r)) => out.push(format!("allowed: {r}, so nothing is checked")),
        Some(Exemption::Policy(r)) => out.push(format!(
            "allowed: exempt ({r}), so no rule applies to it"
        )),
        Some(Exemption::Reach(r)) => out.push(format!(
            "allowed: {r}, so admission never checks it; the findings are what the webhook would say if it did"
        )),
        None => {}
    }
    // The findings the patch removes: /validate sees the patched object.
    let removed = |f: &crate::decision::finding::Finding| {
        d.after.as_ref().is_some_and(|after| {
            let field = f.field.to_string();
            !after
                .findings
                .iter()
                .any(|a| a.rule == f.rule && a.field.to_string() == field)
        })
    };
    let listed = |outcome: Outcome, severity: Option<Severity>| -> Vec<String> {
        d.counted_findings()
            .filter(|(f, c)| {
                c.outcome == outcome && severity.is_none_or(|s| f.severity == s) && !removed(f)
            })
            .map(|(f, _)| format!("{} at {}", f.rule, f.field))
            .collect()
    };
    let warned = listed(Outcome::Warn, Some(Severity::Error));
    if !warned.is_empty() {
        out.push(format!(
            "mode warn: {} admitted with a warning instead of denied",
            warned.join(", ")
        ));
    }
    let audited = listed(Outcome::Audit, None);
    if !audited.is_empty() {
        out.push(format!(
            "mode audit: {} admitted without a warning, recorded in the audit annotation, logs and metrics",
            audited.join(", ")
        ));
    }
    patched(d, &removed, &mut out);
    let still_warned = d
        .counted_findings()
        .any(|(f, c)| c.outcome == Outcome::Warn && !removed(f));
    if d.verdict == Verdict::Warn && !d.patch.is_empty() && !still_warned {
        out.push(
            "warn: the mutating webhook changes the object and returns one admission warning per change"
                .to_owned(),
        );
    }
    out
}

/// The denials the patch removes, each with the operations that do it.
fn patched(
    d: &decide::Decision,
    removed: &dyn Fn(&crate::decision::finding::Finding) -> bool,
    out: &mut Vec<String>,
) {
    for (f, c) in d.counted_findings() {
        // A warning the patch removes leaves a warning (the patch's own).
        if c.outcome != decide::Outcome::Deny || !removed(f) {
            continue;
        }
        let marker = format!("({}: {})", f.rule, f.field);
        let rule_marker = format!("({}: ", f.rule);
        let by_field: Vec<String> = operations(&d.patch, |why| why.contains(&marker));
        let ops = if by_field.is_empty() {
            operations(&d.patch, |why| why.contains(&rule_marker))
        } else {
            by_field
        };
        out.push(format!(
            "patched: {} removes the {} {} at {}",
            if ops.is_empty() {
                "the patch".to_owned()
            } else {
                ops.join(", ")
            },
            f.severity.as_str(),
            f.rule,
            f.field
        ));
    }
}

/// The operations of `m` whose explanation `wanted` accepts, as
/// `remove /spec/...`.
fn operations(m: &crate::decision::patch::Mutation, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    m.ops
        .iter()
        .zip(&m.explanations)
        .filter(|(_, why)| wanted(why))
        .map(|(op, _)| format!("{} {}", op_name(op), op.path()))
        .collect()
}

/// The RFC 6902 name of an operation.
#[must_use]
pub fn op_name(op: &PatchOperation) -> &'static str {
    match op {
        PatchOperation::Add(_) => "add",
        PatchOperation::Remove(_) => "remove",
        PatchOperation::Replace(_) => "replace",
        PatchOperation::Move(_) => "move",
        PatchOperation::Copy(_) => "copy",
        PatchOperation::Test(_) => "test",
    }
}
