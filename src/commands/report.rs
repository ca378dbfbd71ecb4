//! `winadmit report`: a dry run over a live cluster or files. Glue only:
//! read objects, hand them to [`crate::report::ReportBuilder`] (the same
//! engine and policy as `lint` and the webhook), write the chosen format.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::Value;

use crate::cli::{ModeChoice, ReportArgs, ReportFormat};
use crate::engine::Context;
use crate::policy::Mode;
use crate::report::format::html::HtmlSink;
use crate::report::format::json::JsonSink;
use crate::report::format::policyreport::PolicyReportSink;
use crate::report::format::text::TextSink;
use crate::report::format::{ReportSink, wants_patched_objects};
use crate::report::stream::StopError;
use crate::report::{Added, Origin, ReportBuilder, ReportOptions};

mod file;
mod live;

/// Objects flow from a reader through the builder into the sink.
pub(crate) struct Driver<'p> {
    pub builder: ReportBuilder<'p>,
    pub sink: Box<dyn ReportSink>,
    pub progress: Progress,
}

impl Driver<'_> {
    /// One object from any input.
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
pub(crate) struct Progress {
    pub quiet: bool,
    pub seen: usize,
    every: usize,
    started: std::time::Instant,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        Self {
            quiet,
            seen: 0,
            every: 25_000,
            started: std::time::Instant::now(),
        }
    }

    fn tick(&mut self) {
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

/// # Errors
/// Usage and input problems, an unreachable cluster or a refused list
/// call (exit 2).
pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let ReportArgs {
        from_file,
        kubeconfig,
        context,
        namespaces,
        allow_empty,
        policy,
        image_facts,
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
    } = args;
    if !from_file.is_empty() && (kubeconfig.is_some() || context.is_some()) {
        anyhow::bail!(
            "--from-file reads files; --kubeconfig and --context are for live clusters: use one or the other"
        );
    }
    refuse_install_namespace(&namespaces, std::env::var_os("WINADMIT_NAMESPACE"))?;
    let (pol, cluster) = super::load_policy(&policy)?;
    let images = super::load_image_facts(image_facts.as_deref())?;
    let mut options = ReportOptions {
        mode: mode.map(|m| match m {
            ModeChoice::Enforce => Mode::Enforce,
            ModeChoice::Warn => Mode::Warn,
            ModeChoice::Audit => Mode::Audit,
        }),
        patched_objects: wants_patched_objects(format.into()),
        fold: !no_fold,
        namespaces: namespaces.clone(),
        // Namespace objects are listed (live) or read from the files.
        namespace_lookup: None,
    };
    let cx = Context {
        cluster,
        runtime_classes: None,
        nodes: None,
        images: images.as_ref(),
        gmsa: None,
    };
    let progress = Progress::new(quiet);

    // Live mode checks access before any output is written.
    let live = if from_file.is_empty() {
        let custom: Vec<(String, String)> = crate::workload::CUSTOM_RESOURCES
            .iter()
            .map(|r| (r.group.to_owned(), r.name.to_owned()))
            .chain(
                pol.pod_templates
                    .iter()
                    .map(|d| (d.group.clone(), d.kind.clone())),
            )
            .collect();
        Some(live::Live::connect(
            kubeconfig.as_deref(),
            context.as_deref(),
            &namespaces,
            page_size,
            &custom,
            (deadlines, limits),
            &progress,
        )?)
    } else {
        None
    };
    // The live report asks who may use the credential specs pods name.
    if let Some(lookup) = live.as_ref().and_then(|l| l.gmsa_lookup(quiet)) {
        options.namespace_lookup = Some(lookup);
    }

    let out: Box<dyn Write> = match &output {
        Some(path) => Box::new(BufWriter::with_capacity(
            256 * 1024,
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(BufWriter::with_capacity(256 * 1024, super::Stdout::new())),
    };
    // Directories are walked as `lint` walks them (the files, for the title).
    let (files, _) = crate::source::manifest_paths(&from_file);
    let title = title(&files, live.as_ref());
    let facts = facts(&files, live.as_ref(), &policy, &cx.cluster, mode);
    let sink: Box<dyn ReportSink> = match format {
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
            writeln!(out, "# winadmit target: {}", cx.cluster.summary())
                .context("writing the report")?;
            Box::new(PolicyReportSink::new(out))
        }
        ReportFormat::Html => Box::new(HtmlSink::new(out, &title, &facts)?),
    };
    let mut driver = Driver {
        builder: ReportBuilder::new(&pol, &cx, options),
        sink,
        progress,
    };
    // Custom resource groups that could not be discovered: the report is
    // partial, which fails the run unless --allow-partial.
    let mut partial = Vec::new();
    match live {
        Some(live) => {
            partial = live.undiscovered().to_vec();
            live.run(&mut driver)?;
        }
        None => file::run(&from_file, &mut driver),
    }
    let Driver {
        builder, mut sink, ..
    } = driver;
    let finished = builder.finish();
    for r in &finished.objects {
        sink.object(r).context("cannot write the report")?;
    }
    let summary = finished.summary;
    sink.finish(&summary, &finished.input_errors)
        .context("cannot write the report")?;

    if !partial.is_empty() {
        eprintln!(
            "winadmit: the report leaves out the custom resources of {} (they could not be discovered; see above){}",
            partial.join(", "),
            if limits.allow_partial {
                ""
            } else {
                "; exit 2 (--allow-partial accepts a partial report)"
            }
        );
    }
    let empty = summary.objects == 0;
    if empty {
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
                    crate::report::plural(summary.other_objects, "other object", "other objects")
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
    }
    let incomplete = summary.input_errors > 0
        || (!partial.is_empty() && !limits.allow_partial)
        || (empty && !allow_empty);
    Ok(super::exit_code(
        fail_on,
        summary.errors,
        summary.warnings,
        incomplete,
    ))
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
    policy: &crate::cli::PolicyArgs,
    cluster: &crate::cluster::Cluster,
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
