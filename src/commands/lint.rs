//! `winadmit lint`: files and directories in, verdicts out, exit code for CI.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

use super::{EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT};
use crate::cli::{ColorChoice, FailOn, LintArgs, LintFormat};
use crate::engine::Context;
use crate::finding::Severity;
use crate::lint::{CrossObject, collect_runtime_classes, lint_text_with};
use crate::output::{InputProblem, LintReport, junit, sarif, text};
use crate::policy::Policy;
use crate::source;
use crate::targeting::RuntimeClasses;

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
        color,
    } = args;
    let pol = Policy::load(&policy.policy)?;
    let mut report = LintReport::default();
    let inputs = expand(&paths, &mut report);

    if inputs.iter().any(|i| matches!(i, Input::Stdin)) && std::io::stdin().is_terminal() {
        anyhow::bail!(
            "no input: give manifest files or directories, or pipe manifests into `winadmit lint -`"
        );
    }
    // Stdin, FIFOs (`lint <(helm template .)`) and devices can be read
    // once: keep their text for both passes. Regular files are read twice
    // rather than all held in memory.
    let once: Vec<Option<Result<String, InputProblem>>> = inputs
        .iter()
        .map(|input| match input {
            Input::Stdin => Some(read_stdin()),
            Input::File(p) if !is_regular_file(p) => Some(read_file(p)),
            Input::File(_) => None,
        })
        .collect();
    let read = |i: usize| -> Result<String, InputProblem> {
        match (&once[i], &inputs[i]) {
            (Some(text), _) => text.clone(),
            (None, Input::File(p)) => read_file(p),
            (None, Input::Stdin) => unreachable!("stdin is read once"),
        }
    };

    // First pass: RuntimeClasses anywhere in the input pin their pods' OS.
    let mut runtime_classes = RuntimeClasses::default();
    for i in 0..inputs.len() {
        if let Ok(text) = read(i) {
            collect_runtime_classes(&text, &mut runtime_classes);
        }
    }
    let cx = Context {
        version: policy.kubernetes_version,
        runtime_classes: Some(&runtime_classes),
    };
    // Fix first, so the report shows what is left.
    if fix {
        let (applied, skipped) = crate::fix::apply_to_files(&inputs_as_paths(&inputs), &pol, &cx)?;
        report.summary.fixed = applied;
        for s in skipped {
            eprintln!("winadmit: not fixed automatically: {s}");
        }
    }
    // Services are checked against the Windows workloads of the whole
    // input, once every file is read.
    let mut cross = CrossObject::default();
    for (i, input) in inputs.iter().enumerate() {
        match read(i) {
            Ok(text) => lint_text_with(&input.name(), &text, &pol, &cx, &mut report, &mut cross),
            Err(problem) => {
                report.summary.files += 1;
                report.summary.input_errors += 1;
                report.input_errors.push(problem);
            }
        }
    }
    cross.finish(&pol, &cx, &mut report);

    let use_color = match color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    };
    // Written as it is rendered: no second copy of a large report.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written = match format {
        LintFormat::Text => out.write_all(text::render(&report, use_color).as_bytes()),
        LintFormat::Json => serde_json::to_writer_pretty(&mut out, &report)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n")),
        LintFormat::Sarif => {
            sarif::write(&report, &sarif::current_dir(), &mut out).map_err(std::io::Error::from)
        }
        LintFormat::Junit => junit::write(&report, &mut out),
    };
    written.context("writing the report to stdout")?;
    out.flush().ok();

    let failing = report.findings.iter().any(|f| match fail_on {
        FailOn::Error => f.severity == Severity::Error,
        FailOn::Warning => true,
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
fn expand(paths: &[PathBuf], report: &mut LintReport) -> Vec<Input> {
    let mut inputs = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            inputs.push(Input::Stdin);
            continue;
        }
        if !path.is_dir() {
            inputs.push(Input::File(path.clone()));
            continue;
        }
        let walker = walkdir::WalkDir::new(path)
            .follow_links(true)
            .sort_by_file_name();
        for entry in walker {
            match entry {
                Ok(e) if e.file_type().is_file() && is_manifest(e.path()) => {
                    inputs.push(Input::File(e.into_path()));
                }
                Ok(_) => {}
                Err(err) => {
                    let file = err.path().unwrap_or(path).display().to_string();
                    let message = if err.loop_ancestor().is_some() {
                        "symbolic link loop, not followed".to_owned()
                    } else {
                        format!("cannot read directory entry: {err}")
                    };
                    report.summary.input_errors += 1;
                    report.input_errors.push(InputProblem {
                        file,
                        line: None,
                        column: None,
                        message,
                    });
                }
            }
        }
    }
    inputs
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
    let mut bytes = Vec::new();
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| problem(format!("cannot read: {e}")))?;
    if bytes.len() as u64 >= limit {
        return Err(problem(format!(
            "file is over the {} MiB limit for manifests (read stopped there)",
            source::MAX_FILE_BYTES / (1024 * 1024)
        )));
    }
    decode(path.display().to_string(), &bytes)
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
    decode("<stdin>".into(), &bytes)
}

fn decode(file: String, bytes: &[u8]) -> Result<String, InputProblem> {
    source::decode(bytes)
        .map(str::to_owned)
        .map_err(|e| InputProblem {
            file,
            line: e.line,
            column: e.column,
            message: e.message,
        })
}
