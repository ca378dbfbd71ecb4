//! `--format text`: per-namespace summary, top rules, then each object with
//! something to say. Objects are spilled to a scratch file as they come, so
//! the summary can lead without holding every object in memory.

use std::fmt::Write as _;
use std::io::{self, Read, Seek, SeekFrom, Write};

use super::ReportSink;
use crate::render::InputProblem;
use crate::render::ansi::{Tone, paint};
use crate::render::report::{ObjectReport, ReportSummary, Verdict, plural};
use crate::render::text::Location;

/// How many rules the "top rules" table shows.
pub const TOP_RULES: usize = 10;

/// Writes a text report to `out`, spilling objects to `spill` until the end.
pub struct TextSink<W: Write, S: Read + Write + Seek> {
    out: W,
    spill: io::BufWriter<S>,
    listed: usize,
    quiet: usize,
    color: bool,
}

impl<W: Write, S: Read + Write + Seek> TextSink<W, S> {
    /// `color` adds ANSI colours, as `lint` does (decided by `--color`
    /// and `NO_COLOR` in the command).
    pub fn new(out: W, spill: S, color: bool) -> Self {
        Self {
            out,
            spill: io::BufWriter::new(spill),
            listed: 0,
            quiet: 0,
            color,
        }
    }
}

/// The lines for one object.
#[must_use]
pub fn object_text(r: &ObjectReport, color: bool) -> String {
    let mut s = String::new();
    let verdict = match r.verdict {
        Verdict::Deny => paint(color, Tone::Error, "DENY "),
        Verdict::Warn => paint(color, Tone::Warning, "WARN "),
        Verdict::Allow => paint(color, Tone::Allowed, "ALLOW"),
    };
    let target = match (&r.target_reason, r.targets_windows) {
        (Some(reason), true) => format!("Windows ({reason})"),
        (Some(reason), false) => format!("not Windows ({reason})"),
        (None, _) => "no OS pinned".to_owned(),
    };
    let _ = writeln!(s, "{verdict} {}  [{target}]", r.display_name());
    if let Some(owner) = &r.owner {
        let _ = writeln!(
            s,
            "      owned by {owner}, reported apart: its findings differ from the owner's"
        );
    }
    // `why` names the exemption with its consequence.
    if let Some(reason) = r.exempt.as_ref().filter(|_| r.why.is_empty()) {
        let _ = writeln!(s, "      exempt: {reason}");
    }
    for sk in &r.skipped {
        if let Some(e) = &sk.exception {
            let _ = writeln!(
                s,
                "      skipped {}: excepted by {} until {}: {}",
                sk.rule,
                e.title(),
                e.expires_at,
                sk.reason
            );
            continue;
        }
        let _ = writeln!(s, "      skipped {}: {}", sk.rule, sk.reason);
    }
    for why in &r.why {
        let _ = writeln!(s, "      why: {why}");
    }
    for f in &r.findings {
        let level = paint(
            color,
            Tone::of(f.severity),
            &format!("{}[{}]", f.severity.as_str(), f.rule),
        );
        let at = if f.line > 0 {
            format!(" ({}:{}:{})", f.file, f.line, f.column)
        } else {
            String::new()
        };
        let _ = writeln!(s, "      {level} {}: {}{at}", f.field, f.message);
    }
    for (op, why) in r.patch.iter().zip(&r.patch_reasons) {
        let why = why.strip_prefix("winadmit: ").unwrap_or(why);
        let _ = writeln!(
            s,
            "      patch: {} {}: {why}",
            crate::render::report::op_name(op),
            op.path()
        );
    }
    s
}

fn worth_listing(r: &ObjectReport) -> bool {
    !r.findings.is_empty()
        || !r.patch.is_empty()
        || r.verdict != Verdict::Allow
        || r.owner.is_some()
        || !r.skipped.is_empty()
}

impl<W: Write, S: Read + Write + Seek> ReportSink for TextSink<W, S> {
    fn object(&mut self, r: &ObjectReport) -> io::Result<()> {
        if worth_listing(r) {
            self.listed += 1;
            self.spill.write_all(object_text(r, self.color).as_bytes())
        } else {
            self.quiet += 1;
            Ok(())
        }
    }

    fn finish(
        self: Box<Self>,
        summary: &ReportSummary,
        input_errors: &[InputProblem],
    ) -> io::Result<()> {
        let Self {
            mut out,
            spill,
            listed,
            quiet,
            color: _,
        } = *self;
        out.write_all(summary_text(summary).as_bytes())?;
        if listed > 0 {
            writeln!(out, "\nObjects:")?;
            let mut spill = spill.into_inner().map_err(io::IntoInnerError::into_error)?;
            spill.seek(SeekFrom::Start(0))?;
            io::copy(&mut spill, &mut out)?;
        }
        if quiet > 0 {
            writeln!(
                out,
                "\n{} allowed without findings or changes {} not listed.",
                plural(quiet, "object", "objects"),
                if quiet == 1 { "is" } else { "are" }
            )?;
        }
        if !input_errors.is_empty() {
            writeln!(out, "\nInput errors:")?;
            for p in input_errors {
                writeln!(out, "  {}: {}", Location(p), p.message)?;
            }
            if summary.input_errors > input_errors.len() {
                writeln!(
                    out,
                    "  ... and {} more",
                    summary.input_errors - input_errors.len()
                )?;
            }
        }
        out.flush()
    }
}

/// The summary block: totals, namespaces, top rules.
#[must_use]
pub fn summary_text(s: &ReportSummary) -> String {
    let mut out = String::new();
    let mode = s
        .mode
        .map(|m| format!(" (previewing mode {})", mode_name(m)))
        .unwrap_or_default();
    let _ = writeln!(out, "winadmit dry-run report{mode}");
    let _ = writeln!(out, "target: {}", s.target.summary());
    let _ = writeln!(
        out,
        "{}: {} reported, {} folded into their owners; {} Windows",
        plural(s.objects, "workload", "workloads"),
        s.reported,
        s.folded,
        plural(s.windows_workloads, "targets", "target")
    );
    let _ = writeln!(
        out,
        "admission would: deny {}, warn {}, allow {}; {}, {}, {}; {}",
        s.verdicts.deny,
        s.verdicts.warn,
        s.verdicts.allow,
        plural(s.errors, "error", "errors"),
        plural(s.warnings, "warning", "warnings"),
        plural(s.infos, "info finding", "info findings"),
        plural(s.input_errors, "input error", "input errors"),
    );
    if s.errors > 0 && s.verdicts.deny == 0 {
        let _ = writeln!(
            out,
            "no object would be denied (a verdict is after the mutating webhook's patch, in the mode); the exit code, as lint's, follows the errors in the objects as written"
        );
    }
    if !s.namespaces.is_empty() {
        let _ = writeln!(out, "\nNamespaces:");
        let mut rows = vec![[
            "NAMESPACE".to_owned(),
            "OBJECTS".into(),
            "WINDOWS".into(),
            "FOLDED".into(),
            "DENY".into(),
            "WARN".into(),
            "ALLOW".into(),
            "ERRORS".into(),
            "WARNINGS".into(),
        ]];
        for n in &s.namespaces {
            rows.push([
                n.namespace.clone().unwrap_or_else(|| "(none)".into()),
                n.objects.to_string(),
                n.windows_workloads.to_string(),
                n.folded.to_string(),
                n.deny.to_string(),
                n.warn.to_string(),
                n.allow.to_string(),
                n.errors.to_string(),
                n.warnings.to_string(),
            ]);
        }
        table(&mut out, &rows);
    }
    top_rules(&mut out, s);
    out
}

/// The "Top rules" table: the rules with most findings.
fn top_rules(out: &mut String, s: &ReportSummary) {
    if !s.rules.is_empty() {
        let _ = writeln!(out, "\nTop rules:");
        let mut rows = vec![[
            "RULE".to_owned(),
            "SEVERITY".into(),
            "FINDINGS".into(),
            "OBJECTS".into(),
            "TITLE".into(),
        ]];
        for r in s.rules.iter().take(TOP_RULES) {
            rows.push([
                r.rule.clone(),
                r.severity.as_str().into(),
                r.findings.to_string(),
                r.objects.to_string(),
                r.title.clone(),
            ]);
        }
        table(out, &rows);
        if s.rules.len() > TOP_RULES {
            let _ = writeln!(
                out,
                "  ... and {} more",
                plural(s.rules.len() - TOP_RULES, "rule", "rules")
            );
        }
    }
}

fn mode_name(m: crate::decision::policy::Mode) -> &'static str {
    match m {
        crate::decision::policy::Mode::Enforce => "enforce",
        crate::decision::policy::Mode::Warn => "warn",
        crate::decision::policy::Mode::Audit => "audit",
    }
}

fn table<const N: usize>(out: &mut String, rows: &[[String; N]]) {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::from(" ");
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == N {
                let _ = write!(line, " {cell}");
            } else {
                let _ = write!(line, " {cell:<w$}");
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}
