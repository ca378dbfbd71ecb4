//! `winadmit audit`, the pure part: a namespace's workloads judged with the
//! report's builder (the same [`crate::decision::decide::decide`] as the
//! webhook, owned objects folded into their controllers as `report` folds
//! them), and the results turned into the report objects the audit writes:
//! `openreports.io/v1alpha1` Reports or `wgpolicyk8s.io/v1alpha2`
//! PolicyReports. No client, no clock: the I/O is in
//! [`crate::entry::commands::audit`].
//!
//! # What a report holds, and how big it gets
//!
//! Only what is wrong: a result per error and warning finding (per info
//! finding too with `--audit-info`), each with the rule, the field path,
//! the message, the fix and the documentation link. Clean workloads are
//! counted in `summary.pass` of the namespace's first report, not listed.
//!
//! A namespace's results are split over several reports (`winadmit-<ns>`,
//! `winadmit-<ns>-2`, ...), each at most [`MAX_RESULTS`] results and
//! [`MAX_REPORT_BYTES`] of JSON, so no report nears the API server's limit
//! on one object (etcd's default request limit is 1.5 MiB): a namespace of
//! 10,000 workloads with three findings each is about 30 reports, every
//! result kept (capping would hide findings, which operators of the peers'
//! audits ask not to: "more than the first 20 violations"). `results` is
//! an atomic list in both CRDs, so server-side apply keeps one
//! managed-fields entry per report whatever its size.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};

use serde_json::{Value, json};

use crate::decision::engine::Context;
use crate::decision::finding::Severity;
use crate::decision::policy::Policy;
use crate::entry::server::audit_metrics::{EXCEPTED, FindingCounts};
use crate::render::report::format::policyreport::results_of;
use crate::render::report::{
    Added, NamespaceLookup, ObjectReport, Origin, ReportBuilder, ReportOptions,
};

/// Results per report before the next report of the namespace starts.
pub const MAX_RESULTS: usize = 1000;
/// JSON bytes of results per report before the next one starts.
pub const MAX_REPORT_BYTES: usize = 512 * 1024;
/// The label on every report the audit writes.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "winadmit");
/// The annotation holding a hash of the report's content: a report is
/// written only when it changes, also across leaders.
pub const HASH_ANNOTATION: &str = "winadmit.io/content-hash";
/// The annotation naming the replica that wrote a report (its name in the
/// audit's Lease). The ValidatingAdmissionPolicy installed with the audit
/// refuses a write by the audit's service account whose writer is not the
/// Lease's holder.
pub const WRITER_ANNOTATION: &str = "winadmit.io/writer";
/// The name of the cluster-wide summary report.
pub const CLUSTER_REPORT: &str = "winadmit-cluster";

/// Which report API the audit writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportApi {
    /// `openreports.io/v1alpha1` Report and ClusterReport.
    OpenReports,
    /// `wgpolicyk8s.io/v1alpha2` PolicyReport and ClusterPolicyReport.
    PolicyReport,
}

impl ReportApi {
    #[must_use]
    pub fn group(self) -> &'static str {
        match self {
            Self::OpenReports => "openreports.io",
            Self::PolicyReport => "wgpolicyk8s.io",
        }
    }

    #[must_use]
    pub fn version(self) -> &'static str {
        match self {
            Self::OpenReports => "v1alpha1",
            Self::PolicyReport => "v1alpha2",
        }
    }

    /// The kind of a namespace's report, or the cluster's.
    #[must_use]
    pub fn kind(self, namespaced: bool) -> &'static str {
        match (self, namespaced) {
            (Self::OpenReports, true) => "Report",
            (Self::OpenReports, false) => "ClusterReport",
            (Self::PolicyReport, true) => "PolicyReport",
            (Self::PolicyReport, false) => "ClusterPolicyReport",
        }
    }

    #[must_use]
    pub fn plural(self, namespaced: bool) -> &'static str {
        match (self, namespaced) {
            (Self::OpenReports, true) => "reports",
            (Self::OpenReports, false) => "clusterreports",
            (Self::PolicyReport, true) => "policyreports",
            (Self::PolicyReport, false) => "clusterpolicyreports",
        }
    }
}

/// What the audit writes.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub api: ReportApi,
    /// Info findings too (advice), not only errors and warnings.
    pub info: bool,
}

/// Judges one namespace's workloads, owners before what they own, with
/// the report's builder: the object reports `report` would print.
pub fn judge<'v>(
    policy: &Policy,
    cx: &Context<'_>,
    lookup: Option<NamespaceLookup>,
    objects: impl IntoIterator<Item = &'v Value>,
) -> Vec<ObjectReport> {
    let options = ReportOptions {
        fold: true,
        namespace_lookup: lookup,
        ..ReportOptions::default()
    };
    let mut builder = ReportBuilder::new(policy, cx, options);
    let mut out = Vec::new();
    for (document, value) in objects.into_iter().enumerate() {
        let origin = Origin {
            file: "<cluster>",
            document,
        };
        if let Added::Report(r) = builder.add(value, &origin) {
            out.push(*r);
        }
    }
    out.extend(builder.finish().objects);
    out
}

/// What the audit keeps of a judged namespace: its results (only what is
/// wrong), the count of clean workloads and the findings by rule and level.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Judged {
    pub results: Vec<Value>,
    /// Reported workloads without a result.
    pub clean: u64,
    /// Findings by (rule, level), as in `results`: `error`, `warning`,
    /// `info`, or [`EXCEPTED`] for a `skip` result (a PolicyException
    /// covers the finding).
    pub counts: BTreeMap<(String, &'static str), u64>,
    /// A reported workload targets Windows (node facts can change it).
    pub windows: bool,
}

/// The results of `reports` the audit writes.
#[must_use]
pub fn results(reports: &[ObjectReport], options: Options) -> Judged {
    let mut judged = Judged::default();
    for r in reports {
        judged.windows |= r.targets_windows;
        let mut any = false;
        if r.exempt.is_none() {
            // `results_of` gives one result per finding first, in order.
            for (f, mut res) in r.findings.iter().zip(results_of(r)) {
                let keep = match f.severity {
                    Severity::Error | Severity::Warning => true,
                    Severity::Info => options.info,
                };
                if !keep {
                    continue;
                }
                any = true;
                res.properties.insert("fix".into(), f.fix.into());
                let level = level(f.severity);
                *judged.counts.entry((f.rule.to_owned(), level)).or_default() += 1;
                judged.results.push(result_json(&res));
            }
            // What a PolicyException covers: `skip`, with the exception's
            // name, reason, ticket, owner and end date.
            for res in results_of(r)
                .into_iter()
                .skip(r.findings.len())
                .filter(|res| res.properties.contains_key("exception"))
            {
                *judged
                    .counts
                    .entry((res.rule.clone(), EXCEPTED))
                    .or_default() += 1;
                judged.results.push(result_json(&res));
            }
        }
        if !any {
            judged.clean += 1;
        }
    }
    judged
}

/// `error`, `warning` or `info`: the `level` label of the metrics.
#[must_use]
pub fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// One result as JSON: the same shape in both APIs (`resources` names
/// the workload in openreports.io v1alpha1 as in wgpolicyk8s.io).
fn result_json(res: &crate::render::report::format::policyreport::ReportResult) -> Value {
    serde_json::to_value(res).unwrap_or(Value::Null)
}

/// The findings of every namespace, as the metrics count them.
#[must_use]
pub fn finding_counts<'a>(
    judged: impl IntoIterator<Item = (&'a str, &'a Judged)>,
) -> FindingCounts {
    let mut out = FindingCounts::new();
    for (ns, j) in judged {
        for ((rule, level), n) in &j.counts {
            *out.entry((ns.to_owned(), rule.clone(), level)).or_default() += n;
        }
    }
    out
}

/// The reports of namespace `ns`: its results split in reports of at most
/// [`MAX_RESULTS`] results and [`MAX_REPORT_BYTES`], each carrying the
/// hash of its content in [`HASH_ANNOTATION`]. One report (with the clean
/// count) even when nothing is wrong.
#[must_use]
pub fn namespace_reports(ns: &str, judged: &Judged, api: ReportApi) -> Vec<Value> {
    let mut chunks: Vec<Vec<&Value>> = vec![Vec::new()];
    let mut bytes = 0usize;
    for r in &judged.results {
        let size = serde_json::to_string(r).map_or(0, |s| s.len());
        let current = chunks.last().map_or(0, Vec::len);
        if current > 0 && (current >= MAX_RESULTS || bytes + size > MAX_REPORT_BYTES) {
            chunks.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        if let Some(c) = chunks.last_mut() {
            c.push(r);
        }
    }
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, results)| {
            let name = report_name(ns, i + 1);
            let pass = if i == 0 { judged.clean } else { 0 };
            report(api, Some(ns), &name, pass, &results)
        })
        .collect()
}

/// `winadmit-<ns>`, then `winadmit-<ns>-2`, ...
#[must_use]
pub fn report_name(ns: &str, n: usize) -> String {
    if n <= 1 {
        format!("winadmit-{ns}")
    } else {
        format!("winadmit-{ns}-{n}")
    }
}

/// The cluster-wide report: no results (workloads are namespaced), the
/// summary of every namespace's.
#[must_use]
pub fn cluster_report<'a>(api: ReportApi, judged: impl IntoIterator<Item = &'a Judged>) -> Value {
    cluster_report_of(api, judged.into_iter().map(Tally::of))
}

/// What a namespace adds to the cluster report's summary: its clean
/// workloads and its results by `result`. The audit keeps this, not the
/// results, once a namespace's reports are built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub clean: u64,
    pub fail: u64,
    pub warn: u64,
    pub error: u64,
    pub skip: u64,
}

impl Tally {
    /// The tally of a judged namespace.
    #[must_use]
    pub fn of(judged: &Judged) -> Self {
        let mut t = Self {
            clean: judged.clean,
            ..Self::default()
        };
        for r in &judged.results {
            match r.get("result").and_then(Value::as_str) {
                Some("fail") => t.fail += 1,
                Some("warn") => t.warn += 1,
                Some("error") => t.error += 1,
                Some("skip") => t.skip += 1,
                // Info results: `pass`, which the cluster report leaves
                // to the clean workloads.
                _ => {}
            }
        }
        t
    }
}

/// The cluster-wide report from the namespaces' tallies: the same report
/// as [`cluster_report`] of the namespaces they were taken from.
#[must_use]
pub fn cluster_report_of(api: ReportApi, tallies: impl IntoIterator<Item = Tally>) -> Value {
    let mut sum = Tally::default();
    for t in tallies {
        sum.clean += t.clean;
        sum.fail += t.fail;
        sum.warn += t.warn;
        sum.error += t.error;
        sum.skip += t.skip;
    }
    let mut v = report(api, None, CLUSTER_REPORT, 0, &[]);
    v["summary"] = json!({"pass": sum.clean, "fail": sum.fail, "warn": sum.warn,
        "error": sum.error, "skip": sum.skip});
    set_hash(&mut v);
    v
}

fn count_into(summary: &mut Value, results: &[&Value]) {
    for r in results {
        let key = match r.get("result").and_then(Value::as_str) {
            Some("fail") => "fail",
            Some("warn") => "warn",
            Some("error") => "error",
            Some("skip") => "skip",
            _ => "pass",
        };
        summary[key] = (summary[key].as_u64().unwrap_or(0) + 1).into();
    }
}

fn report(api: ReportApi, ns: Option<&str>, name: &str, pass: u64, results: &[&Value]) -> Value {
    let mut summary = json!({"pass": pass, "fail": 0, "warn": 0, "error": 0, "skip": 0});
    count_into(&mut summary, results);
    // Info results are `pass` results: counted above, on top of `pass`.
    let mut labels = serde_json::Map::new();
    labels.insert(MANAGED_BY.0.to_owned(), MANAGED_BY.1.into());
    let mut metadata = json!({"name": name, "labels": labels});
    if let Some(ns) = ns {
        metadata["namespace"] = ns.into();
    }
    let mut v = json!({
        "apiVersion": format!("{}/{}", api.group(), api.version()),
        "kind": api.kind(ns.is_some()),
        "metadata": metadata,
        "summary": summary,
        "results": results,
    });
    if api == ReportApi::OpenReports {
        v["source"] = crate::render::report::format::policyreport::SOURCE.into();
    }
    set_hash(&mut v);
    v
}

/// Sets [`HASH_ANNOTATION`] to a hash of the report without it.
fn set_hash(v: &mut Value) {
    if let Some(a) = v
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(HASH_ANNOTATION);
    }
    let mut h = DefaultHasher::new();
    serde_json::to_string(v).unwrap_or_default().hash(&mut h);
    let hash = format!("{:016x}", h.finish());
    let mut annotations = serde_json::Map::new();
    annotations.insert(HASH_ANNOTATION.to_owned(), hash.into());
    v["metadata"]["annotations"] = Value::Object(annotations);
}

/// The content hash a report carries.
#[must_use]
pub fn hash_of(v: &Value) -> Option<&str> {
    v.pointer("/metadata/annotations")?
        .get(HASH_ANNOTATION)?
        .as_str()
}

/// A hash of what a report says: its summary, results, source and the
/// audit's label, keys in order and null fields left out, so a report as
/// the API server returns it hashes as it was written. Unlike
/// [`HASH_ANNOTATION`], which anyone editing the report can keep, this is
/// computed from the content itself.
#[must_use]
pub fn content_hash(report: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    for key in ["summary", "results", "source"] {
        key.hash(&mut h);
        canonical(report.get(key).unwrap_or(&Value::Null), &mut h);
    }
    canonical(
        report
            .pointer("/metadata/labels")
            .and_then(|l| l.get(MANAGED_BY.0))
            .unwrap_or(&Value::Null),
        &mut h,
    );
    h.finish()
}

fn canonical(v: &Value, h: &mut DefaultHasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(a) => {
            (4u8, a.len()).hash(h);
            for x in a {
                canonical(x, h);
            }
        }
        Value::Object(m) => {
            5u8.hash(h);
            let mut keys: Vec<&String> = m
                .iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, _)| k)
                .collect();
            keys.sort();
            keys.len().hash(h);
            for k in keys {
                k.hash(h);
                canonical(&m[k], h);
            }
        }
    }
}

#[cfg(test)]
mod tests;
