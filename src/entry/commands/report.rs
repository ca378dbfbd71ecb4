//! `winadmit report`: a dry run over a live cluster or files. Glue only:
//! decode the arguments, connect to the cluster (live) or name the files,
//! pick the format, call [`crate::entry::report::run`] (the same engine and
//! policy as `lint` and the webhook) and map its summary to an exit code.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::decision::engine::Context;
use crate::decision::policy::Mode;
use crate::entry::cli::{ModeChoice, ReportArgs, ReportFormat};
use crate::render::report::ReportOptions;
use crate::render::report::format::html::HtmlSink;
use crate::render::report::format::json::JsonSink;
use crate::render::report::format::policyreport::PolicyReportSink;
use crate::render::report::format::text::TextSink;
use crate::render::report::format::{ReportSink, wants_patched_objects};
use anyhow::Context as _;

pub(crate) mod live;

/// The driver of a report and its progress messages, for the live reader.
pub(crate) use crate::entry::report::{Driver, Progress};

/// # Errors
/// Usage and input problems, an unreachable cluster or a refused list
/// call (exit 2).
pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    check_flags(&args)?;
    let ReportArgs {
        from_file,
        kubeconfig,
        context,
        namespaces,
        allow_empty,
        policy,
        image_facts,
        registry,
        registry_args,
        exceptions,
        registry_pull_secrets,
        format,
        output,
        fail_on,
        mode,
        page_size,
        deadlines,
        limits,
        no_fold,
        quiet,
        color,
        windows_build,
    } = args;
    let (pol, cluster) = super::load_policy(&policy)?;
    let images = super::load_image_facts(image_facts.as_deref())?;
    let lookups = if registry {
        Some(crate::entry::report::ImageLookups::new(
            crate::input::registry::Resolver::new(&registry_args.options()?)?,
        )?)
    } else {
        None
    };
    let mut options = options(mode, format, no_fold, &namespaces);
    let progress = Progress::new(quiet);
    // Live mode checks access before any output is written.
    let live = if from_file.is_empty() {
        let connect = (kubeconfig.as_deref(), context.as_deref(), page_size);
        Some(
            connect_live(connect, &namespaces, &pol, (deadlines, limits), &progress)?
                .with_pull_secrets(registry_pull_secrets)
                .with_windows_build(windows_build),
        )
    } else {
        None
    };
    // The live report asks who may use the credential specs pods name.
    if let Some(lookup) = live.as_ref().and_then(|l| l.gmsa_lookup(quiet)) {
        options.namespace_lookup = Some(lookup);
    }
    // Directories are walked as `lint` walks them (the files, for the title).
    let (files, _) = crate::input::source::manifest_paths(&from_file);
    let exceptions = report_exceptions(&pol, &exceptions, live.as_ref(), &files)?;
    let cx = Context {
        cluster,
        images: images.as_ref(),
        exceptions: Some(&exceptions),
        ..Context::default()
    };
    let title = title(&files, live.as_ref());
    let facts = facts(&files, live.as_ref(), &policy, &cx.cluster, mode);
    let sink = sink(
        format,
        output.as_deref(),
        color,
        &cx.cluster,
        &title,
        &facts,
    )?;
    let (input, partial) = input(live, &from_file);
    let (summary, problems) =
        crate::entry::report::run(input, &pol, &cx, options, sink, progress, lookups)?;
    warn_input_errors(&summary, &problems, output.as_deref());
    let partial = warn_partial(&partial, limits.allow_partial);
    let empty = warn_empty(&summary, &namespaces, allow_empty);
    let incomplete = summary.input_errors > 0 || partial || empty;
    Ok(super::exit_code(
        fail_on,
        summary.errors,
        summary.warnings,
        incomplete,
    ))
}

/// The PolicyExceptions in force at `--now`: those in the files (or the
/// live cluster's) and `--exceptions DIR`'s; the others are named on
/// stderr as ignored.
fn report_exceptions(
    policy: &crate::decision::policy::Policy,
    args: &crate::entry::cli::ExceptionArgs,
    live: Option<&live::Live>,
    files: &[PathBuf],
) -> anyhow::Result<crate::decision::exceptions::ExceptionSet> {
    let mut objects = match live {
        Some(l) => l.exception_objects()?,
        None => crate::entry::exceptions::read_files(files),
    };
    if let Some(dir) = &args.dir {
        objects.extend(crate::entry::exceptions::read_dir(dir)?);
    }
    let now = crate::entry::exceptions::now(args.now.as_deref())?;
    let (set, problems) =
        crate::entry::exceptions::sort(policy, &args.own_namespace, &objects, now);
    for p in problems {
        eprintln!("winadmit: {}: {}", p.exception, p.message);
    }
    Ok(set)
}

/// Flags that do not go together, and a `--namespace` that names the
/// install namespace by mistake.
fn check_flags(args: &ReportArgs) -> anyhow::Result<()> {
    if !args.from_file.is_empty() && args.registry_pull_secrets {
        anyhow::bail!(
            "--registry-pull-secrets reads the Secrets a workload names from the cluster: it is for a live report, not --from-file (give the credentials with --registry-config)"
        );
    }
    if !args.from_file.is_empty() && args.windows_build.is_some() {
        anyhow::bail!(
            "--windows-build replaces the build of a live cluster's Windows nodes; with --from-file, give Node objects with the label node.kubernetes.io/windows-build instead"
        );
    }
    if !args.from_file.is_empty() && (args.kubeconfig.is_some() || args.context.is_some()) {
        anyhow::bail!(
            "--from-file reads files; --kubeconfig and --context are for live clusters: use one or the other"
        );
    }
    refuse_install_namespace(&args.namespaces, std::env::var_os("WINADMIT_NAMESPACE"))
}

/// What changes what the report says: `--mode`, `--no-fold`,
/// `--namespace`, and whether the format shows patched objects.
fn options(
    mode: Option<ModeChoice>,
    format: ReportFormat,
    no_fold: bool,
    namespaces: &[String],
) -> ReportOptions {
    ReportOptions {
        mode: mode.map(|m| match m {
            ModeChoice::Enforce => Mode::Enforce,
            ModeChoice::Warn => Mode::Warn,
            ModeChoice::Audit => Mode::Audit,
        }),
        patched_objects: wants_patched_objects(format.into()),
        fold: !no_fold,
        namespaces: namespaces.to_vec(),
        // Namespace objects are listed (live) or read from the files; the
        // live report adds its lookup.
        namespace_lookup: None,
    }
}

/// What the report reads: the live cluster's objects, or the files; and
/// the custom resource groups that could not be discovered (the report is
/// then partial, which fails the run unless --allow-partial).
fn input(
    live: Option<live::Live>,
    files: &[PathBuf],
) -> (crate::entry::report::Input<'_>, Vec<String>) {
    match live {
        Some(live) => {
            let partial = live.undiscovered().to_vec();
            let read = move |driver: &mut Driver<'_>| live.run(driver);
            (
                crate::entry::report::Input::Objects(Box::new(read)),
                partial,
            )
        }
        None => (crate::entry::report::Input::Files(files), Vec::new()),
    }
}

/// Connects to the cluster and checks access (`report` without
/// `--from-file`): the kubeconfig, its context and the page size.
fn connect_live(
    (kubeconfig, context, page_size): (Option<&std::path::Path>, Option<&str>, u32),
    namespaces: &[String],
    policy: &crate::decision::policy::Policy,
    limits: (
        crate::entry::cli::ApiDeadlines,
        crate::entry::cli::ApiLimits,
    ),
    progress: &Progress,
) -> anyhow::Result<live::Live> {
    let custom: Vec<(String, String)> = crate::decision::workload::CUSTOM_RESOURCES
        .iter()
        .map(|r| (r.group.to_owned(), r.name.to_owned()))
        .chain(
            policy
                .pod_templates
                .iter()
                .map(|d| (d.group.clone(), d.kind.clone())),
        )
        .collect();
    live::Live::connect(
        kubeconfig, context, namespaces, page_size, &custom, limits, progress,
    )
}

/// Where and how the report is written: `--format`, `--output` (stdout
/// when none), `--color`.
fn sink(
    format: ReportFormat,
    output: Option<&std::path::Path>,
    color: crate::entry::cli::ColorChoice,
    cluster: &crate::decision::cluster::TargetCluster,
    title: &str,
    facts: &[(&'static str, String)],
) -> anyhow::Result<Box<dyn ReportSink>> {
    let out: Box<dyn Write> = match output {
        Some(path) => Box::new(BufWriter::with_capacity(
            256 * 1024,
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(BufWriter::with_capacity(256 * 1024, super::Stdout::new())),
    };
    Ok(match format {
        ReportFormat::Json => Box::new(JsonSink::new(out)?),
        ReportFormat::Text => Box::new(TextSink::new(
            out,
            tempfile::tempfile().context("cannot create a scratch file for the text report")?,
            super::use_color(
                color,
                output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout()),
            ),
        )),
        ReportFormat::Policyreport => {
            // The facts behind the verdicts, at the top (a YAML comment:
            // the PolicyReport schema has no place for them).
            let mut out = out;
            writeln!(out, "# winadmit target: {}", cluster.summary())
                .context("writing the report")?;
            Box::new(PolicyReportSink::new(out))
        }
        ReportFormat::Html => Box::new(HtmlSink::new(out, title, facts)?),
    })
}

/// Says which custom resources a live report left out; whether that
/// makes the run incomplete (unless `--allow-partial`).
fn warn_partial(partial: &[String], allow_partial: bool) -> bool {
    if partial.is_empty() {
        return false;
    }
    eprintln!(
        "winadmit: the report leaves out the custom resources of {} (they could not be discovered; see above){}",
        partial.join(", "),
        if allow_partial {
            ""
        } else {
            "; exit 2 (--allow-partial accepts a partial report)"
        }
    );
    !allow_partial
}

/// Says on stderr, whatever the format and `-o`, which inputs could not be
/// read: they make the run exit 2.
fn warn_input_errors(
    summary: &crate::render::report::ReportSummary,
    problems: &[crate::render::InputProblem],
    output: Option<&std::path::Path>,
) {
    if summary.input_errors == 0 {
        return;
    }
    for p in problems.iter().take(10) {
        let at = match (p.line, p.column) {
            (Some(l), Some(c)) => format!(":{l}:{c}"),
            (Some(l), None) => format!(":{l}"),
            _ => String::new(),
        };
        eprintln!("winadmit: {}{at}: input error: {}", p.file, p.message);
    }
    eprintln!(
        "winadmit: {} input error{} ({}); exit 2",
        summary.input_errors,
        if summary.input_errors == 1 { "" } else { "s" },
        match output {
            Some(file) => format!("also listed in {}", file.display()),
            None => "also listed in the report".to_owned(),
        }
    );
}

/// Says that no workload matched; whether that makes the run incomplete
/// (unless `--allow-empty`).
fn warn_empty(
    summary: &crate::render::report::ReportSummary,
    namespaces: &[String],
    allow_empty: bool,
) -> bool {
    if summary.objects != 0 {
        return false;
    }
    eprintln!(
        "winadmit: no workload matched{}{}{}",
        if namespaces.is_empty() {
            String::new()
        } else {
            format!(
                " in {} {}",
                if namespaces.len() == 1 {
                    "namespace"
                } else {
                    "namespaces"
                },
                namespaces.join(", ")
            )
        },
        if summary.other_objects > 0 {
            format!(
                " ({} read, none of them a workload)",
                crate::render::report::plural(
                    summary.other_objects,
                    "other object",
                    "other objects"
                )
            )
        } else {
            String::new()
        },
        if allow_empty {
            ""
        } else {
            "; exit 2 (--allow-empty accepts an empty report)"
        }
    );
    !allow_empty
}

/// `WINADMIT_NAMESPACE` names the install namespace (`certs`, `manifests`).
/// It once also filtered `report`; rather than report one namespace or all
/// of them depending on which meaning a user had in mind, `report` refuses
/// to run with it set unless the namespaces to report are given.
fn refuse_install_namespace(
    namespaces: &[String],
    install: Option<std::ffi::OsString>,
) -> anyhow::Result<()> {
    match install {
        Some(ns) if namespaces.is_empty() => anyhow::bail!(
            "WINADMIT_NAMESPACE={} is set: it is the install namespace of `winadmit certs` and `winadmit manifests`, not a filter for `report`. To report only that namespace, set WINADMIT_REPORT_NAMESPACE (or pass --namespace); to report every namespace, unset WINADMIT_NAMESPACE for this command",
            ns.to_string_lossy()
        ),
        _ => Ok(()),
    }
}

/// What the report judged and against what, for the HTML summary.
fn facts(
    files: &[PathBuf],
    live: Option<&live::Live>,
    policy: &crate::entry::cli::PolicyArgs,
    cluster: &crate::decision::cluster::TargetCluster,
    mode: Option<ModeChoice>,
) -> Vec<(&'static str, String)> {
    let input = match (live, files) {
        (Some(l), _) => format!("cluster {}", l.server()),
        (None, [one]) => one.display().to_string(),
        (None, many) => {
            let dirs: Vec<String> = many
                .iter()
                .filter_map(|f| f.parent())
                // `a.yaml` is in the current folder: its parent is "".
                .map(|d| {
                    if d.as_os_str().is_empty() {
                        ".".to_owned()
                    } else {
                        d.display().to_string()
                    }
                })
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            match dirs.as_slice() {
                [one] => format!("{} files in {one}", many.len()),
                [] => "no file".to_owned(),
                _ => format!("{} files in {} folders", many.len(), dirs.len()),
            }
        }
    };
    let policies = if policy.policy.is_empty() {
        "built-in default".to_owned()
    } else {
        policy
            .policy
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        ("Input", input),
        (
            "Target",
            format!(
                "{} (change with --kubernetes-version, --container-runtime, --strict)",
                cluster.summary()
            ),
        ),
        ("Policy", policies),
        (
            "Mode",
            mode.map_or("the policy's (or each namespace's label)".to_owned(), |m| {
                format!("{m:?} (--mode preview)").to_lowercase()
            }),
        ),
        ("winadmit", env!("CARGO_PKG_VERSION").to_owned()),
    ]
}

/// The report's title: the cluster, or the input file when there is one,
/// else how many (not every name: the heading must fit).
fn title(files: &[PathBuf], live: Option<&live::Live>) -> String {
    match (live, files) {
        (Some(l), _) => format!("winadmit dry-run report: cluster {}", l.server()),
        (None, [one]) if one.as_os_str() == "-" => "winadmit dry-run report: <stdin>".into(),
        (None, [one]) => format!("winadmit dry-run report: {}", one.display()),
        (None, many) => format!("winadmit dry-run report: {} files", many.len()),
    }
}
