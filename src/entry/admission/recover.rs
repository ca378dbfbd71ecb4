//! A review body the one-pass decode refused: what can be recovered of its
//! envelope to answer `invalid` to its uid, or why it is a 400.

use super::envelope::{RawReviewIn, ReviewIn, envelope_header, text};
use super::{Admission, Answer, ReviewError, ReviewSummary, ReviewVerdict, allow, invalid};
use crate::decision::decide::messages::truncate;
use crate::decision::policy::Mode;

/// The one-pass decode failed: if the envelope itself is sound and has a
/// uid, answer `invalid` to that uid; otherwise it is a 400.
pub(super) fn recover(
    adm: &Admission,
    body: &[u8],
    err: &serde_json::Error,
) -> Result<Answer, ReviewError> {
    let raw: RawReviewIn<'_> =
        serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    let req = raw.request.as_ref();
    let (types, uid) = envelope_header(
        raw.api_version.as_ref(),
        raw.kind.as_ref(),
        req.is_some(),
        req.and_then(|r| r.uid.as_ref()),
    )?;
    let (what, reason) = failure(body, req.and_then(|r| r.object).is_some(), err);
    // For logs: serde's message can quote values from the object.
    let note = format!(
        "{what} cannot be read ({:?} error at line {}, column {})",
        err.classify(),
        err.line(),
        err.column()
    );
    let namespace = text(req.and_then(|r| r.namespace.as_ref()));
    let mut summary = ReviewSummary {
        uid: uid.to_owned(),
        kind: String::new(),
        namespace: namespace.to_owned(),
        name: String::new(),
        operation: String::new(),
        dry_run: false,
        verdict: ReviewVerdict::Invalid,
        findings: Vec::new(),
        note: Some(note),
        patch_ops: 0,
        patch_rules: Vec::new(),
    };
    // Audit and warn never deny: an object that cannot be read is allowed,
    // and the audit log (or the warning) says why.
    let policy = &adm.policy;
    let ns_mode = adm
        .lookup
        .as_ref()
        .filter(|_| !namespace.is_empty())
        .and_then(|n| {
            crate::decision::decide::namespace_mode(policy, |key| n.label(namespace, key))
        });
    let mode = ns_mode.unwrap_or(policy.mode);
    if mode != Mode::Enforce {
        let mut r = allow(&types, uid);
        r.audit_annotations.insert(
            "winadmit.io/unreadable".to_owned(),
            format!(
                "{what} could not be read; allowed in {} mode",
                format!("{mode:?}").to_lowercase()
            ),
        );
        if mode == Mode::Warn {
            r.warnings = Some(vec![truncate(format!("winadmit: {reason}"))]);
        }
        summary.verdict = if mode == Mode::Warn {
            ReviewVerdict::Warned
        } else {
            ReviewVerdict::Audited
        };
        return Ok((r, summary));
    }
    Ok((invalid(&types, uid, &reason), summary))
}

/// Where the decode failed, by field path (`request.dryRun` is not the
/// object), and the reason to answer with.
fn failure(body: &[u8], has_object: bool, err: &serde_json::Error) -> (String, String) {
    let located = std::str::from_utf8(body)
        .ok()
        .and_then(crate::decision::strict::located::<ReviewIn<'_>>);
    let what = match located.as_ref().map(|(path, _)| path.as_str()) {
        Some(path) if path.starts_with("request.object") => "request.object".to_owned(),
        Some(path) if path.starts_with("request.oldObject") => "request.oldObject".to_owned(),
        Some(path) if path.starts_with("request.") => path.to_owned(),
        _ if has_object => "request.object".to_owned(),
        _ => "request".to_owned(),
    };
    let reason = match &located {
        Some((path, e))
            if path.starts_with("request.object.") || path.starts_with("request.oldObject.") =>
        {
            format!("{what} cannot be read: {path}: {e}")
        }
        _ => format!("{what} cannot be read: {err}"),
    };
    (what, reason)
}
