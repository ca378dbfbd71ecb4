//! Checks across objects, and across files: Services against the Windows
//! workloads they select.

use std::sync::Arc;

use super::PositionsToFind;
use crate::decision::engine::Context;
use crate::decision::policy::Policy;
use crate::decision::services::{self, WindowsPods};
use crate::input::source::Document;
use crate::render::ObjectId;
use crate::render::compact::{CompactReport, Record, Shared};

/// Checks that need more than one object: Services against the Windows
/// workloads they select ([`services`]).
///
/// Design: a Service and its Deployment often live in different files, so
/// the `lint` command keeps one `CrossObject` for its whole input. While
/// files are linted it records the pod labels of Windows workloads and the
/// Services that carry a reportable field, with that field's source
/// position (looked up while the file's text is at hand, in the same pass
/// as the workload findings); [`CrossObject::finish`] then checks the
/// Services once everything is read. [`lint_text`] uses a fresh one per
/// call, so on its own it checks Services against the same text.
#[derive(Debug, Default)]
pub struct CrossObject {
    pub(super) windows: WindowsPods,
    pub(super) services: Vec<PendingService>,
}

#[derive(Debug)]
pub(super) struct PendingService {
    pub(super) file: Shared,
    pub(super) document: usize,
    pub(super) value: serde_json::Value,
    /// Source positions of [`services::REPORTED_POINTERS`], in order.
    pub(super) positions: Vec<Option<(u64, u64)>>,
}

impl CrossObject {
    /// Records a workload that runs on Windows nodes, for the Services
    /// that select it.
    pub(super) fn add_windows_workload(
        &mut self,
        workload: &crate::decision::workload::Workload<'_, '_>,
    ) {
        self.windows.add(
            workload.namespace,
            workload
                .pod_labels()
                .into_iter()
                .flat_map(crate::decision::view::StrMap::iter),
            format!("{}/{}", workload.kind_name, workload.name),
        );
    }

    /// Adds what the lint of a later part of the input recorded (files are
    /// checked in parallel, each part with its own `CrossObject`).
    pub fn absorb(&mut self, other: Self) {
        self.windows.absorb(other.windows);
        self.services.extend(other.services);
    }

    /// Checks the Services seen against the Windows workloads seen and adds
    /// the findings to `report`, each after the findings of its own file
    /// that come before it.
    pub fn finish(self, policy: &Policy, cx: &Context<'_>, report: &mut CompactReport) {
        for s in self.services {
            for f in services::check_service(policy, &cx.cluster, &s.value, &self.windows) {
                let pointer = f.field.pointer();
                let at = services::REPORTED_POINTERS
                    .iter()
                    .position(|p| *p == pointer)
                    .and_then(|i| s.positions.get(i).copied().flatten())
                    .unwrap_or((0, 0));
                report.summary.count(f.severity);
                let meta = |k: &str| {
                    s.value
                        .pointer(&format!("/metadata/{k}"))
                        .and_then(serde_json::Value::as_str)
                };
                let id = ObjectId {
                    api_version: "v1",
                    kind: "Service",
                    namespace: meta("namespace"),
                    name: meta("name").unwrap_or_default(),
                };
                let object = report.object(&s.file, s.document, id);
                let mut finding = report.record(&object, f);
                finding.place(at.0, at.1);
                let at = finding.at();
                // Keep each file's findings together and in source order.
                let same_file = |x: &Record| *x.object.file == *finding.object.file;
                let index = report
                    .findings
                    .iter()
                    .position(|x| same_file(x) && x.at() > at)
                    .or_else(|| report.findings.iter().rposition(same_file).map(|i| i + 1))
                    .unwrap_or(report.findings.len());
                report.findings.insert(index, finding);
            }
        }
    }
}

/// A Service is kept for the check across files (its workloads may be in
/// another file) when it has a field that may be reported.
pub(super) fn keep_service(
    file: &Shared,
    doc: &Document,
    to_find: &mut PositionsToFind,
    cross: &mut CrossObject,
) {
    if !services::REPORTED_POINTERS
        .iter()
        .any(|p| doc.value.pointer(p).is_some())
    {
        return;
    }
    for p in services::REPORTED_POINTERS {
        to_find
            .services
            .push((doc.yaml_doc, format!("{}{p}", doc.pointer)));
    }
    cross.services.push(PendingService {
        file: Arc::clone(file),
        document: doc.index,
        value: doc.value.clone(),
        positions: Vec::new(),
    });
}
