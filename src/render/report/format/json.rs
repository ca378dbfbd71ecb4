//! `--format json`: the `/report` shape, streamed. One object per line
//! inside `objects`, then `inputErrors` and `summary`.

use std::io::{self, Write};

use super::ReportSink;
use crate::render::InputProblem;
use crate::render::report::{ObjectReport, REPORT_API_VERSION, REPORT_KIND, ReportSummary};

/// Streams a JSON report to `out`.
pub struct JsonSink<W: Write> {
    out: W,
    first: bool,
    truncated: Option<serde_json::Value>,
}

impl<W: Write> JsonSink<W> {
    /// Writes the opening of the document.
    ///
    /// # Errors
    /// Writing fails.
    pub fn new(mut out: W) -> io::Result<Self> {
        write!(
            out,
            "{{\"apiVersion\":\"{REPORT_API_VERSION}\",\"kind\":\"{REPORT_KIND}\",\"objects\":["
        )?;
        Ok(Self {
            out,
            first: true,
            truncated: None,
        })
    }

    /// One reported object, already serialized (by `serde_json`).
    ///
    /// # Errors
    /// Writing fails.
    pub fn object_json(&mut self, json: &[u8]) -> io::Result<()> {
        self.out
            .write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        self.out.write_all(json)
    }

    /// Objects were left out: `note` is written as `truncated`, after
    /// `objects`.
    pub fn truncated(&mut self, note: serde_json::Value) {
        self.truncated = Some(note);
    }
}

impl<W: Write> ReportSink for JsonSink<W> {
    fn object(&mut self, report: &ObjectReport) -> io::Result<()> {
        self.out
            .write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        serde_json::to_writer(&mut self.out, report).map_err(io::Error::other)
    }

    fn finish(
        mut self: Box<Self>,
        summary: &ReportSummary,
        input_errors: &[InputProblem],
    ) -> io::Result<()> {
        self.out.write_all(b"\n],")?;
        if let Some(note) = &self.truncated {
            self.out.write_all(b"\"truncated\":")?;
            serde_json::to_writer(&mut self.out, note).map_err(io::Error::other)?;
            self.out.write_all(b",\n")?;
        }
        self.out.write_all(b"\"inputErrors\":")?;
        serde_json::to_writer(&mut self.out, input_errors).map_err(io::Error::other)?;
        self.out.write_all(b",\n\"summary\":")?;
        serde_json::to_writer_pretty(&mut self.out, summary).map_err(io::Error::other)?;
        self.out.write_all(b"}\n")?;
        self.out.flush()
    }
}
