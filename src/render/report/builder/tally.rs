//! Counting each object report into the report's summary: the totals,
//! the verdicts, per namespace and per rule.

use super::ReportBuilder;
use crate::decision::finding::Severity;
use crate::render::report::{NamespaceSummary, ObjectReport, RuleSummary, Verdict};

impl ReportBuilder<'_> {
    pub(super) fn namespace_entry(&mut self, namespace: Option<&str>) -> &mut NamespaceSummary {
        let key = namespace.map(str::to_owned);
        self.namespaces
            .entry(key.clone())
            .or_insert_with(|| NamespaceSummary {
                namespace: key,
                ..NamespaceSummary::default()
            })
    }

    pub(super) fn count(&mut self, r: &ObjectReport) {
        let s = &mut self.summary;
        s.reported += 1;
        let errors = r.errors();
        let infos = r
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Info)
            .count();
        let warnings = r.findings.len() - errors - infos;
        s.errors += errors;
        s.warnings += warnings;
        s.infos += infos;
        if r.targets_windows {
            s.windows_workloads += 1;
        }
        match r.verdict {
            Verdict::Deny => s.verdicts.deny += 1,
            Verdict::Warn => s.verdicts.warn += 1,
            Verdict::Allow => s.verdicts.allow += 1,
        }
        let ns = self.namespace_entry(r.namespace.as_deref());
        ns.objects += 1;
        ns.errors += errors;
        ns.warnings += warnings;
        if r.targets_windows {
            ns.windows_workloads += 1;
        }
        match r.verdict {
            Verdict::Deny => ns.deny += 1,
            Verdict::Warn => ns.warn += 1,
            Verdict::Allow => ns.allow += 1,
        }
        let mut seen: Vec<&'static str> = Vec::new();
        for f in &r.findings {
            let entry = self.rules.entry(f.rule).or_insert_with(|| RuleSummary {
                rule: f.rule.to_owned(),
                title: f.title.to_owned(),
                severity: f.severity,
                findings: 0,
                objects: 0,
            });
            entry.findings += 1;
            // A rule's severity is one per policy; keep the strongest seen.
            entry.severity = entry.severity.max(f.severity);
            if !seen.contains(&f.rule) {
                seen.push(f.rule);
                entry.objects += 1;
            }
        }
    }
}
