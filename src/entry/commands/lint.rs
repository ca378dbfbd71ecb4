//! `winadmit lint`: files and directories in, verdicts out, exit code for CI.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context as _;

use crate::decision::engine::Context;
use crate::decision::finding::Severity;
use crate::decision::images::KnownImages;
use crate::entry::cli::{FailOn, LintArgs, LintFormat};
use crate::entry::lint;
use crate::render::baseline::State;
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
        render,
        baseline,
    } = args;
    let (pol, cluster) = super::load_policy(&policy)?;
    let baseline = super::lint_baseline::load(baseline)?;
    let (paths, rendered) = render_inputs(paths, &render, &cluster)?;
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
        mut report,
        not_fixed,
        fixed: changed,
    } = lint::run_with(&paths, rendered, &pol, &cx, &options)?;
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

    let applied = super::lint_baseline::apply(baseline, &mut report, format == LintFormat::Sarif)?;
    let use_color = super::use_color(color, std::io::stdout().is_terminal());
    // Written as it is rendered: no second copy of a large report. A closed
    // pipe ends the process quietly (super::Stdout).
    let mut out = std::io::BufWriter::new(super::Stdout::new());
    let written = match format {
        LintFormat::Text => text::write(&report, use_color, &mut out),
        LintFormat::Json => json::write(&report, &mut out),
        LintFormat::Sarif => sarif::write_compared(
            &report,
            &sarif::current_dir(),
            applied.states.as_deref(),
            &mut out,
        )
        .map_err(std::io::Error::from),
        LintFormat::Junit => junit::write(&report, &mut out),
    };
    written.context("writing the report to stdout")?;
    out.flush().ok();

    // Against a baseline, only new findings fail (SARIF keeps the others,
    // marked unchanged); a baseline just written fails on none.
    let new = |i: usize| {
        applied
            .states
            .as_ref()
            .is_none_or(|s| s.get(i) == Some(&State::New))
    };
    let count = |s: Severity| {
        (report.findings.iter().enumerate())
            .filter(|(i, f)| f.severity == s && new(*i))
            .count()
    };
    Ok(super::exit_code(
        if applied.written {
            FailOn::Never
        } else {
            fail_on
        },
        count(Severity::Error),
        count(Severity::Warning),
        !report.input_errors.is_empty(),
    ))
}

/// The charts and overlays among `paths` rendered (each command shown on
/// stderr), and the paths left to read as files. `--helm-chart` alone
/// reads no stdin.
fn render_inputs(
    mut paths: Vec<std::path::PathBuf>,
    render: &crate::entry::cli::RenderArgs,
    cluster: &crate::decision::cluster::TargetCluster,
) -> anyhow::Result<(Vec<std::path::PathBuf>, Vec<lint::rendered::Rendered>)> {
    if !render.helm_chart.is_empty() && paths.len() == 1 && paths[0].as_os_str() == "-" {
        paths.clear();
    }
    let crate::entry::cli::RenderArgs {
        helm_chart,
        release_name,
        namespace,
        values,
        set,
        values_set,
        api_versions,
    } = render;
    let options = lint::rendered::RenderOptions {
        helm_charts: helm_chart.clone(),
        release_name: release_name.clone(),
        namespace: namespace.clone(),
        values: values.clone(),
        set: set.clone(),
        values_sets: values_set.clone(),
        api_versions: api_versions.clone(),
    };
    let sources = lint::rendered::prepare(&paths, &options, cluster.kubernetes_version)?;
    for c in &sources.commands {
        eprintln!("winadmit: rendered with: {c}");
    }
    Ok((sources.plain, sources.rendered))
}

/// `WINADMIT_LINT_THREADS`: the most threads lint uses (1: one pass in
/// order, and no parser thread either).
fn thread_cap() -> Option<usize> {
    std::env::var("WINADMIT_LINT_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|t| *t > 0)
}
