//! `--format policyreport`: wgpolicyk8s.io/v1alpha2 `PolicyReport`s, one per
//! namespace, and a `ClusterPolicyReport` for objects without a namespace,
//! as multi-document YAML that `kubectl apply -f` accepts and
//! policy-reporter reads.
//!
//! Results: an error finding is `fail` (severity `high`), a warning finding
//! `warn` (`medium`), an object without findings one `pass` (`all-rules`
//! for a Windows workload; `targeting`, naming the rules that check every
//! workload, for one that does not target Windows: Windows rules do not
//! apply to it, so it is no result of theirs), an exempt
//! object and each rule skipped by annotation `skip`. To keep memory
//! bounded and each report under the API server's object size limit, a
//! namespace's results are written in reports of at most
//! [`RESULTS_PER_REPORT`] results (`winadmit-<ns>`, `winadmit-<ns>-2`, ...).

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::ReportSink;
use crate::decision::finding::Severity;
use crate::render::InputProblem;
use crate::render::report::{ObjectReport, ReportSummary};

pub const API_VERSION: &str = "wgpolicyk8s.io/v1alpha2";
/// `source` and `policy` of every result.
pub const SOURCE: &str = "winadmit";
pub const CATEGORY: &str = "Windows compatibility";
/// Results per report before another report is started.
pub const RESULTS_PER_REPORT: usize = 1000;
/// Results held across all namespaces before the largest is flushed.
pub const MAX_BUFFERED: usize = 20_000;

/// A PolicyReport or ClusterPolicyReport (the schema's shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyReport {
    pub api_version: String,
    pub kind: String,
    pub metadata: ReportMeta,
    pub summary: ResultCounts,
    pub results: Vec<ReportResult>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportMeta {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub labels: BTreeMap<String, String>,
}

/// Counts of results by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultCounts {
    pub pass: u64,
    pub fail: u64,
    pub warn: u64,
    pub error: u64,
    pub skip: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultKind {
    Pass,
    Fail,
    Warn,
    Error,
    Skip,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultSeverity {
    Critical,
    High,
    Medium,
    Low,
    Info,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReportResult {
    pub source: String,
    pub policy: String,
    pub rule: String,
    pub category: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<ResultSeverity>,
    pub result: ResultKind,
    pub scored: bool,
    pub message: String,
    pub resources: Vec<ResourceRef>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
}

/// The checked object (a core/v1 ObjectReference's fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The results for one object.
#[must_use]
pub fn results_of(r: &ObjectReport) -> Vec<ReportResult> {
    let mut out = Vec::new();
    if let Some(reason) = &r.exempt {
        out.push(one_result(
            r,
            "exemption",
            ResultKind::Skip,
            None,
            format!("exempt: {reason}"),
        ));
        return out;
    }
    for f in &r.findings {
        let (result, severity) = match f.severity {
            Severity::Error => (ResultKind::Fail, ResultSeverity::High),
            Severity::Warning => (ResultKind::Warn, ResultSeverity::Medium),
            // Advice: nothing is wrong.
            Severity::Info => (ResultKind::Pass, ResultSeverity::Info),
        };
        let mut res = one_result(
            r,
            f.rule,
            result,
            Some(severity),
            format!("{}: {}", f.field, f.message),
        );
        res.properties.insert("field".into(), f.field.clone());
        res.properties.insert("title".into(), f.title.into());
        res.properties.insert("docUrl".into(), f.doc_url.into());
        out.push(res);
    }
    for s in &r.skipped {
        let Some(e) = &s.exception else {
            out.push(one_result(
                r,
                &s.rule,
                ResultKind::Skip,
                None,
                format!("skipped by annotation: {}", s.reason),
            ));
            continue;
        };
        out.push(exception_result(r, &s.rule, e));
    }
    if r.findings.is_empty() {
        if r.targets_windows {
            out.push(one_result(
                r,
                "all-rules",
                ResultKind::Pass,
                None,
                "no Windows compatibility findings".into(),
            ));
        } else {
            // Windows rules do not apply to a workload that does not target
            // Windows: it passed only the rules that check every workload.
            let ids = applicable_to_any_workload().join(",");
            let mut res = one_result(
                r,
                "targeting",
                ResultKind::Pass,
                None,
                "does not target Windows; no findings from the rules that check every workload"
                    .into(),
            );
            res.properties.insert("rules".into(), ids);
            out.push(res);
        }
    }
    out
}

/// The `skip` result of a rule a PolicyException covers, with the
/// exception's name, reason, end date, ticket and owner.
fn exception_result(
    r: &ObjectReport,
    rule: &str,
    e: &crate::decision::exceptions::ExceptionRef,
) -> ReportResult {
    let mut res = one_result(
        r,
        rule,
        ResultKind::Skip,
        None,
        format!(
            "excepted by {} until {}: {}",
            e.title(),
            e.expires_at,
            e.reason
        ),
    );
    let p = &mut res.properties;
    p.insert("exception".into(), format!("{}/{}", e.namespace, e.name));
    p.insert("reason".into(), e.reason.clone());
    p.insert("expiresAt".into(), e.expires_at.clone());
    if let Some(t) = &e.ticket {
        p.insert("ticket".into(), t.clone());
    }
    if let Some(o) = &e.owner {
        p.insert("owner".into(), o.clone());
    }
    res
}

/// One result about `r`, with the properties every result carries (the
/// verdict and whether and why the object targets Windows).
fn one_result(
    r: &ObjectReport,
    rule: &str,
    result: ResultKind,
    severity: Option<ResultSeverity>,
    message: String,
) -> ReportResult {
    let resource = ResourceRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
        namespace: r.namespace.clone(),
    };
    let mut properties = BTreeMap::new();
    properties.insert("verdict".to_owned(), r.verdict.as_str().to_owned());
    properties.insert("targetsWindows".to_owned(), r.targets_windows.to_string());
    if let Some(reason) = &r.target_reason {
        properties.insert("targetReason".to_owned(), reason.clone());
    }
    ReportResult {
        source: SOURCE.into(),
        policy: SOURCE.into(),
        rule: rule.to_owned(),
        category: CATEGORY.into(),
        severity,
        result,
        scored: true,
        message,
        resources: vec![resource],
        properties,
    }
}

/// The rules that check workloads whatever OS they target.
fn applicable_to_any_workload() -> Vec<&'static str> {
    crate::decision::rules::ALL
        .iter()
        .filter(|r| r.info.scope != crate::decision::rules::Scope::Windows)
        .map(|r| r.info.id)
        .collect()
}

#[derive(Default)]
struct Pending {
    results: Vec<ReportResult>,
    /// Reports already written for this namespace.
    written: usize,
}

/// Writes PolicyReports to `out` as results come in.
pub struct PolicyReportSink<W: Write> {
    out: W,
    by_namespace: HashMap<Option<String>, Pending>,
    buffered: usize,
}

impl<W: Write> PolicyReportSink<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            by_namespace: HashMap::new(),
            buffered: 0,
        }
    }

    fn flush_namespace(&mut self, namespace: &Option<String>) -> io::Result<()> {
        let Some(p) = self.by_namespace.get_mut(namespace) else {
            return Ok(());
        };
        if p.results.is_empty() && p.written > 0 {
            return Ok(());
        }
        let results = std::mem::take(&mut p.results);
        p.written += 1;
        let n = p.written;
        self.buffered -= results.len();
        let report = build(namespace.as_deref(), n, results);
        write_doc(&mut self.out, &report)
    }
}

/// Builds report number `n` (from 1) of a namespace (`None`: the cluster report).
#[must_use]
pub fn build(namespace: Option<&str>, n: usize, results: Vec<ReportResult>) -> PolicyReport {
    let mut summary = ResultCounts::default();
    for r in &results {
        match r.result {
            ResultKind::Pass => summary.pass += 1,
            ResultKind::Fail => summary.fail += 1,
            ResultKind::Warn => summary.warn += 1,
            ResultKind::Error => summary.error += 1,
            ResultKind::Skip => summary.skip += 1,
        }
    }
    let base = match namespace {
        Some(ns) => format!("winadmit-{ns}"),
        None => "winadmit-cluster".to_owned(),
    };
    let name = if n <= 1 { base } else { format!("{base}-{n}") };
    let mut labels = BTreeMap::new();
    labels.insert("app.kubernetes.io/managed-by".to_owned(), SOURCE.to_owned());
    PolicyReport {
        api_version: API_VERSION.into(),
        kind: if namespace.is_some() {
            "PolicyReport".into()
        } else {
            "ClusterPolicyReport".into()
        },
        metadata: ReportMeta {
            name,
            namespace: namespace.map(str::to_owned),
            labels,
        },
        summary,
        results,
    }
}

fn write_doc<W: Write>(out: &mut W, report: &PolicyReport) -> io::Result<()> {
    let yaml = serde_saphyr::to_string(report).map_err(io::Error::other)?;
    out.write_all(b"---\n")?;
    out.write_all(yaml.as_bytes())?;
    if !yaml.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    Ok(())
}

impl<W: Write> ReportSink for PolicyReportSink<W> {
    fn object(&mut self, r: &ObjectReport) -> io::Result<()> {
        let results = results_of(r);
        self.buffered += results.len();
        let key = r.namespace.clone();
        let pending = self.by_namespace.entry(key.clone()).or_default();
        pending.results.extend(results);
        if pending.results.len() >= RESULTS_PER_REPORT {
            self.flush_namespace(&key)?;
        }
        if self.buffered > MAX_BUFFERED {
            let largest = self
                .by_namespace
                .iter()
                .max_by_key(|(_, p)| p.results.len())
                .map(|(k, _)| k.clone());
            if let Some(k) = largest {
                self.flush_namespace(&k)?;
            }
        }
        Ok(())
    }

    fn finish(
        mut self: Box<Self>,
        _summary: &ReportSummary,
        input_errors: &[InputProblem],
    ) -> io::Result<()> {
        let mut keys: Vec<Option<String>> = self
            .by_namespace
            .iter()
            .filter(|(_, p)| !p.results.is_empty() || p.written == 0)
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        for k in keys {
            self.flush_namespace(&k)?;
        }
        for p in input_errors {
            writeln!(
                self.out,
                "# input error: {}: {}",
                p.file,
                p.message.replace('\n', " ")
            )?;
        }
        self.out.flush()
    }
}
