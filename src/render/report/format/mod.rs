//! Report renderers. Each takes objects one at a time ([`ReportSink::object`])
//! and the summary at the end, writing as it goes where the format allows:
//! JSON and HTML stream; PolicyReports are flushed per namespace in chunks;
//! text spills objects to a scratch file so the summary can come first.

use std::io;

use super::{ObjectReport, ReportSummary};
use crate::render::InputProblem;

pub mod html;
pub mod json;
pub mod policyreport;
pub mod text;

/// A report being written.
pub trait ReportSink {
    /// One reported object.
    ///
    /// # Errors
    /// Writing fails.
    fn object(&mut self, report: &ObjectReport) -> io::Result<()>;

    /// The end: summary and input problems.
    ///
    /// # Errors
    /// Writing fails.
    fn finish(
        self: Box<Self>,
        summary: &ReportSummary,
        input_errors: &[InputProblem],
    ) -> io::Result<()>;
}

/// A report format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Per-namespace summary, top rules, then each object.
    Text,
    /// The `POST /report` shape.
    Json,
    /// wgpolicyk8s.io/v1alpha2 PolicyReports.
    PolicyReport,
    /// One self-contained HTML page.
    Html,
}

/// Does a report need `patchedObject`s? Only JSON shows them.
#[must_use]
pub fn wants_patched_objects(format: Format) -> bool {
    format == Format::Json
}
