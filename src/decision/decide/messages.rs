//! The texts admission returns: each warning written to fit (rule id and
//! field path first), the capped list of warnings, and the denial message.

use std::fmt::Write as _;

use super::{MAX_DENIAL_FINDINGS, MAX_WARNING_CHARS, MAX_WARNINGS};
use crate::decision::engine::Evaluation;
use crate::decision::finding::Finding;
use crate::decision::patch::Fixed;
use crate::decision::rules;
use crate::decision::workload::{Kind, Workload};

/// The most a warning may have: the API server may cut longer ones.
pub const MAX_WARNING_KEPT_CHARS: usize = 256;

/// One warning line, written to fit: `RULE field: reason`. The rule id and
/// the whole field path come first; the reason is the finding's message,
/// else the rule's title, else the message cut at a word. Kubernetes'
/// guidance (120 characters) is met when the path allows, the API
/// server's limit (256) otherwise; a path too long for that is kept whole
/// and the reason dropped. The full text stays in the report and logs.
pub(crate) fn warning(f: &Finding) -> String {
    let head = format!("{} {}", f.rule, f.field);
    let title = rules::find(f.rule).map(|r| r.info.title);
    let clause = first_clause(&f.message);
    fit_warning(&head, &[Some(f.message.as_str()), clause, title])
}

/// The reason's first clause (up to `, `, `; `, ` (` or `: `), when the
/// reason has more.
/// One pass: the first separator that starts at byte 12 or later.
pub(crate) fn first_clause(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    (12..b.len().saturating_sub(1))
        .find(|&i| matches!((b[i], b[i + 1]), (b',' | b';' | b':', b' ') | (b' ', b'(')))
        .map(|i| &s[..i])
}

/// `RULE field: reason` with the first reason that fits (see [`warning`]).
pub(crate) fn fit_warning(head: &str, reasons: &[Option<&str>]) -> String {
    let len = |s: &str| s.chars().count();
    let room = |limit: usize| limit.saturating_sub(len(head) + 2);
    for limit in [MAX_WARNING_CHARS, MAX_WARNING_KEPT_CHARS] {
        for reason in reasons.iter().flatten() {
            if len(reason) <= room(limit) {
                return format!("{head}: {reason}");
            }
        }
    }
    // A shortened reason, when enough of it fits to be worth reading.
    let room = room(MAX_WARNING_KEPT_CHARS);
    match reasons.iter().flatten().next() {
        Some(reason) if room >= 24 => format!("{head}: {}", cut_at_word(reason, room)),
        _ => head.to_owned(),
    }
}

/// A mutation's explanation as a warning that fits: for the fix of a
/// finding, its rule and field first, as for findings. Explanations
/// without a finding (node selection, tolerations) are short already.
pub(crate) fn mutation_warning(why: &str, fixed: Option<&Fixed>) -> String {
    let Some(fixed) = fixed else {
        return truncate(why.to_owned());
    };
    let rule = rules::find(fixed.rule);
    let what = format!("winadmit: {}", fixed.description);
    let title = rule.map(|r| format!("winadmit: fixed {}", r.info.title));
    fit_warning(
        &format!("{} {}", fixed.rule, fixed.field),
        &[
            Some(&what),
            Some(&fixed.description),
            first_clause(&what),
            first_clause(&what).and_then(|c| c.strip_prefix("winadmit: ")),
            title.as_deref(),
        ],
    )
}

/// At most `max` characters of `s`, ending at a word boundary, with `…`.
pub(crate) fn cut_at_word(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let keep: String = s.chars().take(max.saturating_sub(1)).collect();
    let at_word = keep
        .rfind(' ')
        .filter(|i| *i >= keep.len() / 2)
        .map_or(keep.as_str(), |i| &keep[..i]);
    format!("{}…", at_word.trim_end_matches([' ', ',', ';', ':', '(']))
}

/// Other warnings (the mutation's explanations): kept under the API
/// server's limit, cut at a word.
pub(crate) fn truncate(s: String) -> String {
    if s.chars().count() > MAX_WARNING_KEPT_CHARS {
        cut_at_word(&s, MAX_WARNING_KEPT_CHARS)
    } else {
        s
    }
}

/// At most [`MAX_WARNINGS`] lines of at most [`MAX_WARNING_CHARS`]: the
/// first warnings, then one line counting the rest (`more` of them were
/// already left out by the caller).
pub(crate) fn cap_warnings(mut w: Vec<String>, more: usize) -> Vec<String> {
    let total = w.len() + more;
    if total > MAX_WARNINGS {
        w.truncate(MAX_WARNINGS - 1);
        w.shrink_to_fit();
    }
    for s in &mut w {
        *s = truncate(std::mem::take(s));
    }
    if total > MAX_WARNINGS {
        let more = total - (MAX_WARNINGS - 1);
        w.push(format!(
            "winadmit: and {more} more warning(s): run `winadmit report` or `winadmit lint` on the object for all of them"
        ));
    }
    w
}

/// The denial message, as kubectl prints it after
/// `admission webhook "..." denied the request: `.
pub(crate) fn denial(
    workload: &Workload<'_, '_>,
    eval: &Evaluation,
    denied: &[&Finding],
    skippable: &[&'static str],
) -> String {
    let mut m = String::with_capacity(256 + denied.len().min(MAX_DENIAL_FINDINGS) * 160);
    let target = eval
        .target
        .reason()
        .map(|r| format!(" (targets Windows by {r})"))
        .unwrap_or_default();
    let _ = write!(
        m,
        "winadmit: {} {}{target} has {} Windows nodes cannot run:",
        workload.kind_name,
        workload.name,
        super::plural(denied.len(), "problem", "problems")
    );
    let mut rules_seen: Vec<&'static str> = Vec::new();
    for (i, f) in denied.iter().enumerate() {
        if i < MAX_DENIAL_FINDINGS {
            let _ = write!(m, "\n- {}: {} [{}]", f.field, f.message, f.rule);
        }
        if !rules_seen.contains(&f.rule) {
            rules_seen.push(f.rule);
        }
    }
    if denied.len() > MAX_DENIAL_FINDINGS {
        let _ = write!(
            m,
            "\n- and {} more: run `winadmit report` (or `winadmit lint`) on the object for all of them",
            denied.len() - MAX_DENIAL_FINDINGS
        );
    }
    m.push_str("\nHow to fix:");
    for id in &rules_seen {
        if let Some(rule) = rules::find(id) {
            let _ = write!(m, "\n- [{id}] {}", rule.info.fix);
        }
    }
    // The opt-out is offered only for the rules the policy lets an
    // annotation skip here; named when some denied rule is not one of them.
    let holder = if workload.kind == Kind::Pod {
        "pod"
    } else {
        "pod template"
    };
    let prefix = crate::decision::policy::SKIP_ANNOTATION_PREFIX;
    if skippable.is_empty() {
        m.push_str("\n(winadmit explain <RULE> for details)");
    } else if rules_seen.iter().all(|r| skippable.contains(r)) {
        let _ = write!(
            m,
            "\n(winadmit explain <RULE> for details; to opt out of one rule, annotate the {holder} with {prefix}<RULE>: \"<reason>\")"
        );
    } else {
        let _ = write!(
            m,
            "\n(winadmit explain <RULE> for details; to opt out of {}, annotate the {holder} with {prefix}<RULE>: \"<reason>\")",
            skippable.join(" or ")
        );
    }
    m
}

/// One warning per rule an exception covers here: the rule, the exception
/// and its end date, so the client sees what lets the object in and until
/// when; the reason when it fits.
pub(crate) fn exceptions(eval: &Evaluation) -> Vec<String> {
    eval.skipped
        .iter()
        .filter_map(|s| {
            let e = s.exception.as_ref()?;
            let head = format!(
                "{} excepted by {} until {}",
                s.rule,
                e.title(),
                e.expires_at
            );
            Some(fit_warning(&head, &[Some(e.reason.as_str())]))
        })
        .take(MAX_WARNINGS)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn first_clause_is_the_earliest_separator_from_byte_12() {
        // The search it replaced: each separator's first match at 12 or
        // later, the earliest of them.
        fn by_separator(s: &str) -> Option<&str> {
            [", ", "; ", " (", ": "]
                .iter()
                .filter_map(|sep| s.match_indices(sep).map(|(i, _)| i).find(|i| *i >= 12))
                .min()
                .map(|i| &s[..i])
        }
        let cases = [
            "short, text",
            "runAsUser is ignored on Windows (the kubelet refuses it): set runAsUserName",
            "a, b; c: d (e) and then, more; text: here (x)",
            "exactly twelve, then",
            "elevenchars, x",
            "twelve chars: then; more",
            "ünïcödé strings, with; separators: (here)",
            "no separator at all in this message",
            "ends with a separator,",
            "",
        ];
        for c in cases {
            assert_eq!(super::first_clause(c), by_separator(c), "{c:?}");
        }
        assert_eq!(
            super::first_clause("hostNetwork is not supported, remove it"),
            Some("hostNetwork is not supported")
        );
    }
}
