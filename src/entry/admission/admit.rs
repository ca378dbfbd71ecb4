//! `/admit`, the one-call webhook: `/mutate`'s patch, then `/validate`'s
//! verdict on the object with the patch applied.

use super::{
    Admission, Answer, Endpoint, Resolved, ReviewError, ReviewVerdict, answer, invalid, skip,
};

/// `/admit`: `/mutate`'s patch, then `/validate`'s verdict on the object
/// with that patch applied, which is what the two webhooks answer between
/// them when no other mutating webhook runs after winadmit's. A denial
/// carries no patch; an allowed object gets the patch and the warnings of
/// both. An object with nothing to patch is decided once: the first answer
/// is already `/validate`'s, with `/mutate`'s warnings ([`respond`]).
pub(super) fn admit_once(
    adm: &Admission,
    body: &[u8],
    resolved: Resolved<'_>,
) -> Result<Answer, ReviewError> {
    let (mutated, mutated_summary) = answer(adm, Endpoint::Admit, body, resolved)?;
    let Some(patch) = mutated.patch.as_ref().filter(|_| mutated.allowed) else {
        return Ok((mutated, mutated_summary));
    };
    let (patched_body, ops) = match with_patched_object(body, patch) {
        Ok(patched) => patched,
        Err(reason) => {
            let mut summary = mutated_summary;
            let reason = format!("internal error: {reason}");
            skip(&mut summary, ReviewVerdict::Invalid, reason.clone());
            return Ok((invalid(&mutated.types, &summary.uid, &reason), summary));
        }
    };
    let (mut validated, mut summary) = answer(adm, Endpoint::Validate, &patched_body, resolved)?;
    let warnings = joined(mutated.warnings, validated.warnings.take());
    if !validated.allowed {
        validated.warnings = warnings;
        return Ok((validated, summary));
    }
    validated = match validated.with_patch(ops) {
        Ok(r) => r,
        Err(e) => {
            let reason = format!("internal error: cannot serialize the patch: {e}");
            skip(&mut summary, ReviewVerdict::Invalid, reason.clone());
            return Ok((invalid(&mutated.types, &summary.uid, &reason), summary));
        }
    };
    validated.warnings = warnings;
    summary.verdict = ReviewVerdict::Patched;
    summary.patch_ops = mutated_summary.patch_ops;
    summary.patch_rules = mutated_summary.patch_rules;
    Ok((validated, summary))
}

/// The warnings of two answers, the first's first, with no repeats.
pub(super) fn joined(
    first: Option<Vec<String>>,
    second: Option<Vec<String>>,
) -> Option<Vec<String>> {
    let mut all = first.unwrap_or_default();
    for w in second.into_iter().flatten() {
        if !all.contains(&w) {
            all.push(w);
        }
    }
    (!all.is_empty()).then_some(all)
}

/// The review body with the JSON Patch applied to `request.object`, as the
/// API server sends it to the validating webhook after the mutating one,
/// and the patch's operations.
pub(super) fn with_patched_object(
    body: &[u8],
    patch: &[u8],
) -> Result<(Vec<u8>, json_patch::Patch), String> {
    let mut review: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("cannot re-read the review: {e}"))?;
    let ops: json_patch::Patch =
        serde_json::from_slice(patch).map_err(|e| format!("cannot re-read the patch: {e}"))?;
    let object = review
        .pointer_mut("/request/object")
        .ok_or("the review has no request.object")?;
    json_patch::patch(object, &ops).map_err(|e| format!("the patch does not apply: {e}"))?;
    let body =
        serde_json::to_vec(&review).map_err(|e| format!("cannot write the patched review: {e}"))?;
    Ok((body, ops))
}
