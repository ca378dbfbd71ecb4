//! `--format json`: the lint contract.

use std::io::{self, Write};

use serde::ser::SerializeSeq as _;
use serde::{Serialize, Serializer};

use super::{InputProblem, LintSummary, Report};

/// Writes the report in the shape [`LintReport`](super::LintReport) serializes to, finding
/// by finding, from either form of the report.
///
/// # Errors
/// Writing to `out` failed.
pub fn write(report: &impl Report, out: &mut dyn Write) -> io::Result<()> {
    let doc = Document {
        findings: Findings(report),
        excepted: Excepted(report),
        input_errors: report.input_errors(),
        notes: report.notes(),
        input_warnings: report.input_warnings(),
        summary: report.summary(),
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// [`LintReport`](super::LintReport)'s serialized fields, in its order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase", bound(serialize = "R: Report"))]
struct Document<'r, R: Report> {
    findings: Findings<'r, R>,
    /// The findings a `PolicyException` covers, each with it.
    #[serde(skip_serializing_if = "Excepted::is_empty")]
    excepted: Excepted<'r, R>,
    input_errors: &'r [InputProblem],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    notes: &'r [InputProblem],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    input_warnings: &'r [InputProblem],
    summary: &'r LintSummary,
}

struct Findings<'r, R>(&'r R);

impl<R: Report> Serialize for Findings<'_, R> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.finding_count()))?;
        for f in self.0.findings() {
            seq.serialize_element(&f)?;
        }
        seq.end()
    }
}

struct Excepted<'r, R>(&'r R);

impl<R: Report> Excepted<'_, R> {
    fn is_empty(&self) -> bool {
        self.0.excepted_count() == 0
    }
}

impl<R: Report> Serialize for Excepted<'_, R> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct One<'a> {
            #[serde(flatten)]
            finding: super::FindingRef<'a>,
            exception: &'a crate::decision::exceptions::ExceptionRef,
        }
        let mut seq = s.serialize_seq(Some(self.0.excepted_count()))?;
        for (finding, exception) in self.0.excepted_findings() {
            seq.serialize_element(&One { finding, exception })?;
        }
        seq.end()
    }
}
