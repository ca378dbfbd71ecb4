//! `winadmit lint`: files and directories in, verdicts out, exit code for CI.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context as _;

use crate::decision::engine::Context;
use crate::decision::finding::Severity;
use crate::decision::images::KnownImages;
use crate::entry::cli::{LintArgs, LintFormat};
use crate::entry::lint;
use crate::render::{json, junit, sarif, text};

/// # Errors
/// The policy cannot be loaded (exit 2, naming the file and key), or a
/// directory given holds no manifest file (exit 2, naming it).
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
        exceptions,
        color,
    } = args;
    let (pol, cluster) = super::load_policy(&policy)?;
    let images = super::load_image_facts(image_facts.as_deref())?;
    let resolver = if registry {
        Some(crate::input::registry::Resolver::new(
            &registry_args.options()?,
        )?)
    } else {
        None
    };
    if paths.iter().any(|p| p.as_os_str() == "-") && std::io::stdin().is_terminal() {
        anyhow::bail!(
            "no input: give manifest files or directories, or pipe manifests into `winadmit lint -`"
        );
    }
    // A directory with nothing to lint is a wrong path (a CI typo), not a
    // clean result.
    if let Some(dir) = paths
        .iter()
        .find(|p| p.is_dir() && !crate::input::source::dir_has_manifest(p))
    {
        anyhow::bail!(
            "{}: no .yaml, .yml or .json file in this directory or below it: give the directory or files that hold the manifests",
            dir.display()
        );
    }
    let resolve = |wanted: &BTreeSet<String>| match &resolver {
        Some(resolver) => super::images::block_on(resolver.resolve_all(wanted)),
        None => Ok(KnownImages::default()),
    };
    let cx = Context {
        cluster,
        images: images.as_ref(),
        ..Context::default()
    };
    let options = lint::Options {
        // Findings are held compactly until the whole input is read; only
        // the JSON output shows their patches.
        patches: matches!(format, LintFormat::Json),
        fix,
        threads: thread_cap(),
        resolve_images: resolver
            .is_some()
            .then_some(&resolve as &lint::ResolveImages<'_>),
        exceptions: Some(lint::Exceptions {
            objects: match &exceptions.dir {
                Some(dir) => crate::entry::exceptions::read_dir(dir)?,
                None => Vec::new(),
            },
            now: crate::entry::exceptions::now(exceptions.now.as_deref())?,
            own_namespace: exceptions.own_namespace,
        }),
    };
    let lint::Linted {
        report,
        not_fixed,
        fixed: changed,
    } = lint::run(&paths, &pol, &cx, &options)?;
    for c in &changed {
        eprintln!("winadmit: fixed {c}");
    }
    for s in &not_fixed {
        eprintln!("winadmit: not fixed automatically: {s}");
    }
    if fix && changed.is_empty() && not_fixed.is_empty() {
        eprintln!(
            "winadmit: --fix changed nothing: no finding in these files has an automatic fix (the findings below are fixed by hand)"
        );
    }

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

    let count = |s: Severity| report.findings.iter().filter(|f| f.severity == s).count();
    Ok(super::exit_code(
        fail_on,
        count(Severity::Error),
        count(Severity::Warning),
        !report.input_errors.is_empty(),
    ))
}

/// `WINADMIT_LINT_THREADS`: the most threads lint uses (1: one pass in
/// order, and no parser thread either).
fn thread_cap() -> Option<usize> {
    std::env::var("WINADMIT_LINT_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|t| *t > 0)
}
