//! `lint` over files and stdin, the orchestration behind the `lint`
//! command: read the inputs, learn the cluster objects they hold (first
//! pass), resolve images, fix files, lint every file on every core (second
//! pass), then check Services against the whole input's Windows workloads.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::rendered::Rendered;
use super::{CrossObject, lint_text_with};
use crate::decision::engine::Context;
use crate::decision::images::KnownImages;
use crate::decision::policy::Policy;
use crate::input::source::{Inputs, Text};
use crate::render::compact::CompactReport;

/// Asks registries about images (the `--registry` lookups).
pub type ResolveImages<'a> = dyn Fn(&BTreeSet<String>) -> anyhow::Result<KnownImages> + 'a;

/// How [`run`] lints.
#[derive(Default)]
pub struct Options<'a> {
    /// Keep each finding's patch (only the JSON output shows them).
    pub patches: bool,
    /// Write the safe fixes into the files first (`--fix`); the report
    /// then shows what is left.
    pub fix: bool,
    /// At most this many threads (1: one pass in order, and no parser
    /// thread either); `None`: one per CPU.
    pub threads: Option<usize>,
    /// Resolves the workloads' images that `cx.images` does not name.
    pub resolve_images: Option<&'a ResolveImages<'a>>,
    /// `PolicyException`s beyond the input's (`--exceptions DIR`), the
    /// instant they are judged at and winadmit's own namespace; `None`:
    /// exceptions are not honoured.
    pub exceptions: Option<Exceptions>,
}

/// What [`Options::exceptions`] holds.
pub struct Exceptions {
    pub objects: Vec<serde_json::Value>,
    pub now: crate::decision::exceptions::Timestamp,
    pub own_namespace: String,
}

/// What [`run`] found.
pub struct Linted {
    pub report: CompactReport,
    /// Files and objects `--fix` could not fix, and why.
    pub not_fixed: Vec<String>,
    /// What `--fix` changed: `file:line: RULE at field`, in file order.
    pub fixed: Vec<String>,
}

/// Lints the manifests `paths` name (files, directories walked for
/// `.yaml`, `.yml` and `.json`, `-` for stdin) against `policy`. `cx` gives
/// the cluster and the known image facts; the RuntimeClasses, Windows
/// Nodes and gMSA credential specs come from the input itself.
///
/// # Errors
/// Resolving images, or writing fixed files, failed.
pub fn run(
    paths: &[PathBuf],
    policy: &Policy,
    cx: &Context<'_>,
    options: &Options<'_>,
) -> anyhow::Result<Linted> {
    run_with(paths, Vec::new(), policy, cx, options)
}

/// [`run`], with texts charts and overlays rendered to
/// ([`super::rendered`]) judged after `paths`, as files are (`--fix`
/// leaves them alone: they are not files).
///
/// # Errors
/// Resolving images, or writing fixed files, failed.
pub fn run_with(
    paths: &[PathBuf],
    rendered: Vec<Rendered>,
    policy: &Policy,
    cx: &Context<'_>,
    options: &Options<'_>,
) -> anyhow::Result<Linted> {
    let mut report = CompactReport::new(options.patches);
    let (mut inputs, problems) = Inputs::open(paths, options.fix, false);
    for r in rendered {
        inputs.add_rendered(r.name, r.note, r.text);
    }
    for problem in problems {
        report.summary.input_errors += 1;
        report.input_errors.push(problem);
    }
    if options.threads == Some(1) {
        crate::input::yaml::allow_second_thread(false);
    }
    // First pass: RuntimeClasses anywhere in the input pin their pods'
    // OS; Node objects tell the cluster's Windows builds and versions;
    // the workloads' images are collected for the registry.
    let mut wanted = BTreeSet::new();
    let known = inputs.learn(|text| {
        if options.resolve_images.is_some() {
            crate::input::source::prescan::images(text, policy, &mut wanted);
        }
    });
    let resolved = match options.resolve_images {
        Some(resolve) => Some(resolve_images(resolve, wanted, cx.images)?),
        None => None,
    };
    let exceptions = options.exceptions.as_ref().map(|e| {
        let mut objects = known.exceptions.clone();
        objects.extend(e.objects.iter().cloned());
        let (set, problems) =
            crate::entry::exceptions::sort(policy, &e.own_namespace, &objects, e.now);
        for p in problems {
            report
                .input_warnings
                .push(crate::render::InputProblem::new(&p.exception, p.message));
        }
        set
    });
    let cx = Context {
        cluster: cx.cluster.clone(),
        runtime_classes: Some(&known.runtime_classes),
        nodes: known.nodes.any_known().then_some(&known.nodes),
        images: resolved.as_ref().or(cx.images),
        gmsa: known.gmsa.as_ref(),
        exceptions: exceptions.as_ref(),
    };
    // Fix first, so the report shows what is left.
    let mut not_fixed = Vec::new();
    let mut fixed = Vec::new();
    if options.fix {
        let (applied, changed, skipped) =
            crate::entry::fix::apply_to_files(&inputs.regular_files(), policy, &cx)?;
        report.summary.fixed = applied;
        not_fixed = skipped;
        fixed = changed;
    }
    lint_all(&inputs, policy, &cx, options.threads, &mut report);
    Ok(Linted {
        report,
        not_fixed,
        fixed,
    })
}

/// The registry is asked for the images the given facts do not name.
fn resolve_images(
    resolve: &ResolveImages<'_>,
    mut wanted: BTreeSet<String>,
    given: Option<&KnownImages>,
) -> anyhow::Result<KnownImages> {
    wanted.retain(|i| given.is_none_or(|g| g.get(i).is_none()));
    let mut found = resolve(&wanted)?;
    if let Some(given) = given {
        found.images.extend(given.images.clone());
    }
    Ok(found)
}

/// Second pass: each input is read once (a held text is taken, not
/// borrowed). Files are checked on every core, in contiguous runs, and the
/// parts joined in input order: the output is the same as one pass in
/// order. Services are checked against the Windows workloads of the whole
/// input, once every file is read.
fn lint_all(
    inputs: &Inputs,
    policy: &Policy,
    cx: &Context<'_>,
    threads: Option<usize>,
    report: &mut CompactReport,
) {
    let report_part = report.part();
    let lint_part = |range: std::ops::Range<usize>| {
        let mut part = report_part.part();
        let mut cross = CrossObject::default();
        for i in range {
            match inputs.take(i) {
                Ok(Text::Whole(text)) => {
                    let name = inputs.input(i).name();
                    let first = part.findings.len();
                    lint_text_with(&name, text.into(), policy, cx, &mut part, &mut cross);
                    if let Some(note) = inputs.input(i).rendered_note() {
                        note_rendered(&mut part, first, note);
                    }
                }
                Ok(Text::Stream(_)) => unreachable!("lint reads no stream"),
                Err(problem) => {
                    part.summary.files += 1;
                    part.summary.input_errors += 1;
                    part.input_errors.push(problem);
                }
            }
        }
        (part, cross)
    };
    let mut cross = CrossObject::default();
    for (part, part_cross) in in_parallel(inputs.len(), threads, &lint_part) {
        report.absorb(part);
        cross.absorb(part_cross);
    }
    cross.finish(policy, cx, report);
}

/// Adds how its text was rendered to each finding of a rendered input
/// (from `first`): the values set it came from, the tool.
fn note_rendered(part: &mut CompactReport, first: usize, note: &str) {
    for i in first..part.findings.len() {
        let message = format!("{} [{note}]", part.findings[i].message);
        part.findings[i].message = part.strings.get(&message);
    }
}

/// Runs `work` over `0..n` split into one contiguous run per core (a run
/// per file at most, at most `cap` threads), returning the parts in order.
fn in_parallel<T: Send>(
    n: usize,
    cap: Option<usize>,
    work: &(dyn Fn(std::ops::Range<usize>) -> T + Sync),
) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(cap.unwrap_or(usize::MAX))
        .min(n.max(1));
    if threads <= 1 {
        return vec![work(0..n)];
    }
    // Several runs per thread even out files of different sizes; each
    // thread takes the next run not yet taken.
    let runs = (threads * 4).min(n);
    let bounds: Vec<std::ops::Range<usize>> = (0..runs)
        .map(|r| (r * n / runs)..((r + 1) * n / runs))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<T>>> =
        (0..runs).map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                // The workers keep every core busy: a worker's file is not
                // also parsed on a thread of its own.
                crate::input::yaml::allow_second_thread(false);
                loop {
                    let r = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(range) = bounds.get(r) else { break };
                    let part = work(range.clone());
                    *results[r]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(part);
                }
            });
        }
    });
    results
        .into_iter()
        .filter_map(|m| {
            m.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
        .collect()
}
