//! `winadmit lint`: files and directories in, verdicts out, exit code for CI.

use std::borrow::Cow;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Mutex, PoisonError};

use anyhow::Context as _;

use super::{EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT};
use crate::cli::{FailOn, LintArgs, LintFormat};
use crate::cluster::KnownCluster;
use crate::engine::Context;
use crate::finding::Severity;
use crate::lint::{CrossObject, collect_cluster_objects, lint_text_with};
use crate::output::compact::CompactReport;
use crate::output::{InputProblem, json, junit, sarif, text};
use crate::source;

/// An input to read: a file, or stdin.
enum Input {
    File(PathBuf),
    Stdin,
}

impl Input {
    fn name(&self) -> String {
        match self {
            Self::File(p) => p.display().to_string(),
            Self::Stdin => "<stdin>".into(),
        }
    }
}

/// # Errors
/// The policy cannot be loaded (exit 2, naming the file and key).
pub fn run(args: LintArgs) -> anyhow::Result<ExitCode> {
    let LintArgs {
        paths,
        policy,
        format,
        fail_on,
        fix,
        image_facts,
        registry,
        registry_args,
        color,
    } = args;
    let (pol, cluster) = super::load_policy(&policy)?;
    let mut images = super::load_image_facts(image_facts.as_deref())?;
    let resolver = if registry {
        Some(crate::registry::Resolver::new(&registry_args.options()?)?)
    } else {
        None
    };
    // The workloads' images, for the registry.
    let mut wanted = std::collections::BTreeSet::new();
    // Findings are held compactly until the whole input is read; only the
    // JSON output shows their patches.
    let mut report = CompactReport::new(matches!(format, LintFormat::Json));
    let inputs = expand(&paths, &mut report);

    if inputs.iter().any(|i| matches!(i, Input::Stdin)) && std::io::stdin().is_terminal() {
        anyhow::bail!(
            "no input: give manifest files or directories, or pipe manifests into `winadmit lint -`"
        );
    }
    let cap = thread_cap();
    if cap == Some(1) {
        crate::yaml::allow_second_thread(false);
    }
    // Stdin, FIFOs (`lint <(helm template .)`) and devices can be read
    // once: keep their text for both passes. So is a single file (unless
    // `--fix` rewrites it between the passes): reading it twice would hold
    // two copies while the allocator returns the first. Other regular
    // files are read twice rather than all held in memory.
    let single = inputs.len() == 1 && !fix;
    let mut once: Vec<Option<Result<String, InputProblem>>> = inputs
        .iter()
        .map(|input| match input {
            Input::Stdin => Some(read_stdin()),
            Input::File(p) if single || !is_regular_file(p) => Some(read_file(p)),
            Input::File(_) => None,
        })
        .collect();

    // First pass: RuntimeClasses anywhere in the input pin their pods' OS.
    // Node objects in the input tell the cluster's Windows builds and versions.
    // A text held for both passes is handed over owned, so a tab retry
    // changes it in place (and the second pass needs none), not a copy.
    let mut known = KnownCluster::default();
    for (held, input) in once.iter_mut().zip(&inputs) {
        match (held, input) {
            (Some(Ok(text)), _) => {
                let mut owned = Cow::Owned(std::mem::take(text));
                collect_cluster_objects(&mut owned, &mut known);
                if resolver.is_some() {
                    crate::lint::collect_images(&mut owned, &pol, &mut wanted);
                }
                *text = owned.into_owned();
            }
            (Some(Err(_)), _) => {}
            (None, Input::File(p)) => {
                if let Ok(text) = read_file(p) {
                    let mut owned = Cow::Owned(text);
                    collect_cluster_objects(&mut owned, &mut known);
                    if resolver.is_some() {
                        crate::lint::collect_images(&mut owned, &pol, &mut wanted);
                    }
                }
            }
            (None, Input::Stdin) => unreachable!("stdin is read once"),
        }
    }
    // Second pass: each input is read once, and a held text is taken, not
    // borrowed, for the same reason.
    let once: Vec<Mutex<_>> = once.into_iter().map(Mutex::new).collect();
    let read = |i: usize| -> Result<String, InputProblem> {
        let held = once[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match (held, &inputs[i]) {
            (Some(text), _) => text,
            (None, Input::File(p)) => read_file(p),
            (None, Input::Stdin) => unreachable!("stdin is read once"),
        }
    };
    // The registry is asked for the images the facts file does not name.
    if let Some(resolver) = &resolver {
        let given = images.take().unwrap_or_default();
        wanted.retain(|i| given.get(i).is_none());
        let mut found = super::images::block_on(resolver.resolve_all(&wanted))?;
        found.images.extend(given.images);
        images = Some(found);
    }
    let cx = Context {
        cluster,
        runtime_classes: Some(&known.runtime_classes),
        nodes: (!known.nodes.is_empty()).then_some(&known.nodes),
        images: images.as_ref(),
        gmsa: known.gmsa.as_ref(),
    };
    // Fix first, so the report shows what is left.
    if fix {
        let (applied, skipped) = crate::fix::apply_to_files(&inputs_as_paths(&inputs), &pol, &cx)?;
        report.summary.fixed = applied;
        for s in skipped {
            eprintln!("winadmit: not fixed automatically: {s}");
        }
    }
    // Files are checked on every core, in contiguous runs, and the parts
    // joined in input order: the output is the same as one pass in order.
    // Services are checked against the Windows workloads of the whole
    // input, once every file is read.
    let report_part = report.part();
    let lint_part = |range: std::ops::Range<usize>| {
        let mut part = report_part.part();
        let mut cross = CrossObject::default();
        for i in range {
            match read(i) {
                Ok(text) => {
                    lint_text_with(
                        &inputs[i].name(),
                        text.into(),
                        &pol,
                        &cx,
                        &mut part,
                        &mut cross,
                    );
                }
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
    for (part, part_cross) in in_parallel(inputs.len(), cap, &lint_part) {
        report.absorb(part);
        cross.absorb(part_cross);
    }
    cross.finish(&pol, &cx, &mut report);

    let use_color = super::use_color(color, std::io::stdout().is_terminal());
    // Written as it is rendered: no second copy of a large report. A closed
    // pipe ends the process quietly (super::Stdout).
    let mut out = std::io::BufWriter::new(super::Stdout::new());
    let written = match format {
        LintFormat::Text => text::write(&report, use_color, &mut out),
        LintFormat::Json => json::write(&report, &mut out),
        LintFormat::Sarif => {
            sarif::write(&report, &sarif::current_dir(), &mut out).map_err(std::io::Error::from)
        }
        LintFormat::Junit => junit::write(&report, &mut out),
    };
    written.context("writing the report to stdout")?;
    out.flush().ok();

    let failing = report.findings.iter().any(|f| match fail_on {
        FailOn::Error => f.severity == Severity::Error,
        FailOn::Warning => f.severity >= Severity::Warning,
    });
    let code = if !report.input_errors.is_empty() {
        EXIT_INPUT
    } else if failing {
        EXIT_FINDINGS
    } else {
        EXIT_CLEAN
    };
    Ok(ExitCode::from(code))
}

fn inputs_as_paths(inputs: &[Input]) -> Vec<PathBuf> {
    inputs
        .iter()
        .filter_map(|i| match i {
            // Only regular files can be rewritten in place.
            Input::File(p) if is_regular_file(p) => Some(p.clone()),
            Input::File(_) | Input::Stdin => None,
        })
        .collect()
}

fn is_regular_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

/// Expands directories (recursively, `.yaml`/`.yml`/`.json`, symlink loops
/// reported, not followed forever) into files, in a stable order.
fn expand(paths: &[PathBuf], report: &mut CompactReport) -> Vec<Input> {
    let (files, problems) = manifest_paths(paths);
    for problem in problems {
        report.summary.input_errors += 1;
        report.input_errors.push(problem);
    }
    files
        .into_iter()
        .map(|p| {
            if p.as_os_str() == "-" {
                Input::Stdin
            } else {
                Input::File(p)
            }
        })
        .collect()
}

/// The files to read for these paths: files and `-` as given, directories
/// walked recursively for `.yaml`, `.yml` and `.json` files in a stable
/// order (symbolic link loops reported, not followed). Shared by `lint`
/// and `report --from-file`.
pub(crate) fn manifest_paths(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<InputProblem>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    // A file named twice (`lint a.yaml a.yaml`, or a directory and a file
    // in it) is read once, under the first name it was given: its findings
    // would otherwise be reported, and `--fix`ed, twice.
    let mut seen = std::collections::HashSet::new();
    let mut files_push = |files: &mut Vec<PathBuf>, p: PathBuf| {
        let key = if p.as_os_str() == "-" {
            p.clone()
        } else {
            std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone())
        };
        if seen.insert(key) {
            files.push(p);
        }
    };
    for path in paths {
        if path.as_os_str() == "-" || !path.is_dir() {
            files_push(&mut files, path.clone());
            continue;
        }
        let walker = walkdir::WalkDir::new(path)
            .follow_links(true)
            .sort_by_file_name();
        for entry in walker {
            match entry {
                Ok(e) if e.file_type().is_file() && is_manifest(e.path()) => {
                    files_push(&mut files, e.into_path());
                }
                Ok(_) => {}
                Err(err) => {
                    let file = err.path().unwrap_or(path).display().to_string();
                    let message = if err.loop_ancestor().is_some() {
                        "symbolic link loop, not followed".to_owned()
                    } else {
                        format!("cannot read directory entry: {err}")
                    };
                    problems.push(InputProblem {
                        file,
                        line: None,
                        column: None,
                        message,
                    });
                }
            }
        }
    }
    (files, problems)
}

fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn read_file(path: &Path) -> Result<String, InputProblem> {
    let problem = |message: String| InputProblem {
        file: path.display().to_string(),
        line: None,
        column: None,
        message,
    };
    let over = |len: u64| {
        problem(format!(
            "file is {} MiB, over the {} MiB limit for manifests",
            len / (1024 * 1024),
            source::MAX_FILE_BYTES / (1024 * 1024)
        ))
    };
    let file = std::fs::File::open(path).map_err(|e| problem(format!("cannot read: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| problem(format!("cannot read: {e}")))?;
    if meta.len() > source::MAX_FILE_BYTES as u64 {
        return Err(over(meta.len()));
    }
    // Bounded even when the length lies: a file growing underneath, a FIFO
    // (`lint <(helm template .)`), or a device such as /dev/zero.
    let limit = source::MAX_FILE_BYTES as u64 + 1;
    // Room for the whole file at once: growing by doubling would hold up
    // to twice a large file while it is read.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len().min(limit)).unwrap_or(0) + 1);
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| problem(format!("cannot read: {e}")))?;
    if bytes.len() as u64 >= limit {
        return Err(problem(format!(
            "file is over the {} MiB limit for manifests (read stopped there)",
            source::MAX_FILE_BYTES / (1024 * 1024)
        )));
    }
    decode(path.display().to_string(), bytes)
}

fn read_stdin() -> Result<String, InputProblem> {
    let mut bytes = Vec::new();
    let limit = source::MAX_FILE_BYTES as u64 + 1;
    std::io::stdin()
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| InputProblem {
            file: "<stdin>".into(),
            line: None,
            column: None,
            message: format!("cannot read: {e}"),
        })?;
    decode("<stdin>".into(), bytes)
}

/// The text of `bytes`, checked by [`source::decode`], without a copy (a
/// large file is not held twice).
fn decode(file: String, mut bytes: Vec<u8>) -> Result<String, InputProblem> {
    let bom = match source::decode(&bytes) {
        Ok(text) => bytes.len() - text.len(),
        Err(e) => {
            return Err(InputProblem {
                file,
                line: e.line,
                column: e.column,
                message: e.message,
            });
        }
    };
    bytes.drain(..bom);
    Ok(String::from_utf8(bytes).expect("source::decode checked the encoding"))
}

/// `WINADMIT_LINT_THREADS`: the most threads lint uses (1: one pass in
/// order, and no parser thread either).
fn thread_cap() -> Option<usize> {
    std::env::var("WINADMIT_LINT_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|t| *t > 0)
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
                crate::yaml::allow_second_thread(false);
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
