//! `report` as a library function, beside `lint::run`: objects flow from a
//! reader (the files, through the manifest reader `lint` uses, or a door's
//! own listing such as the live cluster's) through the [`ReportBuilder`]
//! into a [`ReportSink`]; the `report` command only decodes its arguments,
//! picks the sink and maps the summary to an exit code.

use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::Value;

use super::format::ReportSink;
use super::stream::StopError;
use super::{Added, Origin, ReportBuilder, ReportOptions, ReportSummary};
use crate::engine::Context;
use crate::policy::Policy;

/// Objects flow from a reader through the builder into the sink.
pub struct Driver<'p> {
    pub builder: ReportBuilder<'p>,
    pub sink: Box<dyn ReportSink>,
    pub progress: Progress,
}

impl Driver<'_> {
    /// One object from any input.
    ///
    /// # Errors
    /// Writing its report failed.
    pub fn add(&mut self, value: &Value, origin: &Origin<'_>) -> Result<(), StopError> {
        self.progress.tick();
        if let Added::Report(r) = self.builder.add(value, origin) {
            self.sink
                .object(&r)
                .map_err(|e| StopError(format!("cannot write the report: {e}")))?;
        }
        Ok(())
    }
}

/// Progress messages on stderr.
pub struct Progress {
    pub quiet: bool,
    pub seen: usize,
    every: usize,
    started: std::time::Instant,
}

impl Progress {
    #[must_use]
    pub fn new(quiet: bool) -> Self {
        Self {
            quiet,
            seen: 0,
            every: 25_000,
            started: std::time::Instant::now(),
        }
    }

    /// One more object read; a message every 25,000.
    pub fn tick(&mut self) {
        self.seen += 1;
        if !self.quiet && self.seen.is_multiple_of(self.every) {
            eprintln!(
                "winadmit: {} objects read ({:.1}s)",
                self.seen,
                self.started.elapsed().as_secs_f64()
            );
        }
    }

    pub fn note(&self, message: &str) {
        if !self.quiet {
            eprintln!("winadmit: {message}");
        }
    }
}

/// Feeds a report's objects to the driver (the live cluster's listing).
pub type ReadObjects<'a> = dyn FnOnce(&mut Driver<'_>) -> anyhow::Result<()> + 'a;

/// What a report reads.
pub enum Input<'a> {
    /// Manifest files and directories (`-` for stdin), read as `lint`
    /// reads them ([`super::files`]).
    Files(&'a [PathBuf]),
    /// Objects a door lists itself.
    Objects(Box<ReadObjects<'a>>),
}

/// Reports every workload of `input` against `policy` (the cluster facts
/// and images of `cx`) into `sink`: the objects as they come, then the
/// summary and the input problems. Returns the summary.
///
/// # Errors
/// The reader failed (a refused list call), or writing the report failed.
pub fn run(
    input: Input<'_>,
    policy: &Policy,
    cx: &Context<'_>,
    options: ReportOptions,
    sink: Box<dyn ReportSink>,
    progress: Progress,
) -> anyhow::Result<ReportSummary> {
    let mut driver = Driver {
        builder: ReportBuilder::new(policy, cx, options),
        sink,
        progress,
    };
    match input {
        Input::Files(paths) => super::files::read(paths, &mut driver),
        Input::Objects(read) => read(&mut driver)?,
    }
    let Driver {
        builder, mut sink, ..
    } = driver;
    let finished = builder.finish();
    for r in &finished.objects {
        sink.object(r).context("cannot write the report")?;
    }
    sink.finish(&finished.summary, &finished.input_errors)
        .context("cannot write the report")?;
    Ok(finished.summary)
}
