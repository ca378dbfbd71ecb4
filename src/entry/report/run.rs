//! `report` as a library function, beside `lint::run`: objects flow from a
//! reader (the files, through the manifest reader `lint` uses, or an entry
//! point's own listing such as the live cluster's) through the
//! [`ReportBuilder`] into a [`ReportSink`]; the `report` command only
//! decodes its arguments, picks the sink and maps the summary to an exit
//! code.

use anyhow::Context as _;

use super::driver::{Driver, ImageLookups, Input, Progress};
use crate::decision::engine::Context;
use crate::decision::policy::Policy;
use crate::render::report::format::ReportSink;
use crate::render::report::{ReportBuilder, ReportOptions, ReportSummary};

/// Reports every workload of `input` against `policy` (the cluster facts
/// and images of `cx`; with `images`, `--registry`, the images whose facts
/// `cx` does not give are looked up) into `sink`: the objects as they
/// come, then the summary and the input problems. Returns the summary.
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
    images: Option<ImageLookups>,
) -> anyhow::Result<(ReportSummary, Vec<crate::render::InputProblem>)> {
    let mut driver = Driver {
        builder: ReportBuilder::new(policy, cx, options),
        sink,
        progress,
        images,
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
    Ok((finished.summary, finished.input_errors))
}
