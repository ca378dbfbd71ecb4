//! `winadmit rules` and `winadmit explain RULE`: the catalogue, from the rules' own docs.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde_json::json;

use super::EXIT_CLEAN;
use crate::decision::cluster::{Stance, TargetCluster};
use crate::decision::finding::Severity;
use crate::decision::rules::{self, RuleInfo, Scope};
use crate::decision::version::KubeVersion;
use crate::entry::cli::{ExplainArgs, RulesArgs, RulesFormat};

/// # Errors
/// Writing to stdout fails.
pub fn rules(args: RulesArgs) -> anyhow::Result<ExitCode> {
    let out = match args.format {
        RulesFormat::Text => {
            let mut s = String::new();
            let width = rules::ALL
                .iter()
                .map(|r| r.info.id.len())
                .max()
                .unwrap_or(0);
            for r in rules::ALL {
                let _ = writeln!(
                    s,
                    "{:<width$} {:<8} {}",
                    r.info.id,
                    default_severity(&r.info, &TargetCluster::default()),
                    r.info.title
                );
            }
            s
        }
        RulesFormat::Json => {
            let list: Vec<_> = rules::ALL.iter().map(|r| rule_json(&r.info)).collect();
            serde_json::to_string_pretty(&list)? + "\n"
        }
        RulesFormat::Markdown => markdown(),
    };
    std::io::Write::write_all(&mut super::Stdout::new(), out.as_bytes())?;
    Ok(ExitCode::from(EXIT_CLEAN))
}

/// # Errors
/// The rule id is unknown (exit 2, with the list command to run).
pub fn explain(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let id = args.rule.to_ascii_uppercase();
    let Some(rule) = rules::find(&id) else {
        let near = suggestions(&id);
        anyhow::bail!(
            "unknown rule {:?}{}; run `winadmit rules` for the list",
            args.rule,
            if near.is_empty() {
                String::new()
            } else {
                format!("; did you mean {}?", near.join(", "))
            }
        );
    };
    std::io::Write::write_all(
        &mut super::Stdout::new(),
        explain_text(&rule.info).as_bytes(),
    )?;
    Ok(ExitCode::from(EXIT_CLEAN))
}

fn scope(s: Scope) -> &'static str {
    match s {
        Scope::Windows => "Windows-targeted workloads",
        Scope::Linux => "Linux-targeted workloads",
        Scope::Any => "all workloads",
    }
}

fn versions(i: &RuleInfo) -> String {
    match (i.since, i.until) {
        (None, None) => "all".into(),
        (Some(s), None) => format!("{s} and later"),
        (None, Some(u)) => format!("before {u}"),
        (Some(s), Some(u)) => format!("{s} up to (not including) {u}"),
    }
}

fn rule_json(i: &RuleInfo) -> serde_json::Value {
    let verdicts: serde_json::Map<String, serde_json::Value> = reference_targets()
        .iter()
        .map(|(name, c)| ((*name).to_owned(), json!(level_name(i, c))))
        .collect();
    json!({
        "id": i.id, "title": i.title, "severity": level_name(i, &TargetCluster::default()),
        "verdicts": verdicts, "intentLost": i.intent_lost, "appliesTo": scope(i.scope),
        "what": i.what, "why": i.why, "source": i.source, "docUrl": i.doc_url,
        "fix": i.fix, "example": i.example,
        "since": i.since, "until": i.until,
    })
}

/// The targets every rule's doc gives its verdict at: the Docker era of
/// the original Windows documentation, an early containerd cluster, the
/// default target, and the default target with `--strict`.
fn reference_targets() -> [(&'static str, TargetCluster); 4] {
    let strict = TargetCluster {
        stance: Stance::Strict,
        ..TargetCluster::default()
    };
    [
        ("1.19 + docker", TargetCluster::at(KubeVersion::new(1, 19))),
        (
            "1.26 + containerd",
            TargetCluster::at(KubeVersion::new(1, 26)),
        ),
        ("default", TargetCluster::default()),
        ("strict", strict),
    ]
}

/// The rule ids close to an unknown `id` (upper case): those containing it
/// or contained in it, without the `WIN-` prefix and dashes, else those a
/// few edits away; at most five.
fn suggestions(id: &str) -> Vec<&'static str> {
    let bare = |s: &str| s.trim_start_matches("WIN-").replace(['-', '_'], "");
    let wanted = bare(id);
    if wanted.is_empty() {
        return Vec::new();
    }
    let ids = || rules::ALL.iter().map(|r| r.info.id);
    let mut near: Vec<&'static str> = ids()
        .filter(|r| {
            let b = bare(r);
            b.contains(&wanted) || (b.len() >= 4 && wanted.contains(&b))
        })
        .collect();
    if near.is_empty() {
        let mut scored: Vec<(usize, &'static str)> = ids()
            .map(|r| (edits(&bare(r), &wanted), r))
            .filter(|(d, _)| *d <= 2 + wanted.len() / 5)
            .collect();
        scored.sort();
        near = scored.into_iter().map(|(_, r)| r).collect();
    }
    near.truncate(5);
    near
}

/// Levenshtein distance between two ASCII strings.
fn edits(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// A rule's level on `c`; "silent" where it reports nothing there.
fn level_name(i: &RuleInfo, c: &TargetCluster) -> &'static str {
    i.default_level(c).map_or("silent", Severity::as_str)
}

/// The severity in the default policy on `cluster`: rules it turns off say so.
fn default_severity(i: &RuleInfo, cluster: &TargetCluster) -> String {
    if rules::OFF_BY_DEFAULT.contains(&i.id) {
        format!("off ({} when enabled)", level_name(i, cluster))
    } else {
        level_name(i, cluster).to_owned()
    }
}

/// "1.19 + docker: error; 1.26 + containerd: warning; ...".
fn verdict_line(i: &RuleInfo) -> String {
    reference_targets()
        .iter()
        .map(|(name, c)| format!("{name}: {}", default_severity(i, c)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The text `winadmit explain` prints.
#[must_use]
pub fn explain_text(i: &RuleInfo) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}: {}\n", i.id, i.title);
    let _ = writeln!(
        s,
        "Severity:   {} (default target: Kubernetes {} with containerd)",
        default_severity(i, &TargetCluster::default()),
        KubeVersion::LATEST
    );
    let _ = writeln!(s, "By target:  {}", verdict_line(i));
    if i.intent_lost {
        let _ = writeln!(
            s,
            "            with --strict: an error (Windows ignores a security setting the workload asks for)"
        );
    }
    let _ = writeln!(s, "Applies to: {}", scope(i.scope));
    let _ = writeln!(s, "Kubernetes: {}\n", versions(i));
    let _ = writeln!(s, "What it checks\n  {}\n", i.what);
    let _ = writeln!(s, "Why it breaks on Windows\n  {}\n", i.why);
    let _ = writeln!(s, "Example\n{}\n", indent(i.example, "  "));
    let _ = writeln!(s, "Fix\n  {}\n", i.fix);
    let _ = writeln!(s, "Source\n  {}\n  {}", i.source, i.doc_url);
    s
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `docs/rules.md`, generated from the catalogue (a test keeps the file in sync).
#[must_use]
pub fn markdown() -> String {
    let mut s = String::from(
        "# winadmit rules\n\n<!-- Generated by `winadmit rules --format markdown`; do not edit by hand. -->\n\n",
    );
    s.push_str(
        "The verdict columns give each rule's level, before any policy setting, at four targets: \
         Kubernetes 1.19 with Docker (the era of the original Kubernetes Windows documentation), \
         1.26 with containerd, the default target (the newest Kubernetes with containerd), and the \
         default target with `--strict` (see [verdicts.md](verdicts.md) for what each level means). A rule may report only some fields at a target \
         (its text says which).\n\n",
    );
    s.push_str(
        "| id | 1.19 + docker | 1.26 + containerd | default | strict | applies to | title |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rules::ALL {
        let i = &r.info;
        let cells: Vec<String> = reference_targets()
            .iter()
            .map(|(_, c)| default_severity(i, c))
            .collect();
        let _ = writeln!(
            s,
            "| [{}](#{}) | {} | {} | {} |",
            i.id,
            i.id.to_ascii_lowercase(),
            cells.join(" | "),
            scope(i.scope),
            i.title
        );
    }
    for r in rules::ALL {
        let i = &r.info;
        let _ = writeln!(s, "\n## {}\n\n**{}**\n", i.id, i.title);
        let _ = writeln!(s, "- Verdict by target: {}", verdict_line(i));
        if i.intent_lost {
            let _ = writeln!(
                s,
                "- With `--strict` (policy `stance: strict`): an error, since Windows ignores a security setting the workload asks for"
            );
        }
        let _ = writeln!(s, "- Applies to: {}", scope(i.scope));
        let _ = writeln!(s, "- Kubernetes versions: {}\n", versions(i));
        let _ = writeln!(s, "**What it checks.** {}\n", i.what);
        let _ = writeln!(s, "**Why it breaks on Windows.** {}\n", i.why);
        let _ = writeln!(s, "**Example.**\n\n```yaml\n{}\n```\n", i.example);
        let _ = writeln!(s, "**Fix.** {}\n", i.fix);
        let _ = writeln!(s, "**Source.** {} <{}>", i.source, i.doc_url);
    }
    s
}
