//! Glue from the command line to the core. No policy logic lives here.

use std::process::ExitCode;

use crate::entry::cli::{Cli, Command};

pub mod admission_policy;
pub mod audit;
pub mod certs;
pub mod example;
pub mod exceptions;
pub mod explain;
pub mod images;
pub mod lint;
mod lint_baseline;
pub mod manifests;
pub mod report;
pub mod serve;
pub mod static_dir;

/// Exit codes are a contract: 0 clean, 1 findings, 2 usage or input problem.
pub const EXIT_CLEAN: u8 = 0;
pub const EXIT_FINDINGS: u8 = 1;
pub const EXIT_INPUT: u8 = 2;

/// Loads the policy of `args`, prints its notices on stderr, and resolves
/// the target cluster from the flags and the policy (`learnt` adds what a
/// live cluster's nodes said).
///
/// # Errors
/// A policy file cannot be read or is invalid.
pub fn load_policy(
    args: &crate::entry::cli::PolicyArgs,
) -> Result<
    (
        crate::decision::policy::Policy,
        crate::decision::cluster::TargetCluster,
    ),
    crate::decision::policy::PolicyError,
> {
    let pol = crate::input::policy::load(&args.policy)?;
    for notice in &pol.notices {
        eprintln!("winadmit: {notice}");
    }
    let cluster = crate::decision::cluster::TargetCluster::resolve(
        &args.declared(),
        &pol.declared(),
        &crate::decision::cluster::Observed::default(),
    );
    Ok((pol, cluster))
}

/// Reads `--image-facts FILE`, if given.
///
/// # Errors
/// The file cannot be read or is not an image facts file (the error names
/// the file and the field).
pub fn load_image_facts(
    path: Option<&std::path::Path>,
) -> Result<Option<crate::decision::images::KnownImages>, crate::input::facts::FactsFileError> {
    path.map(crate::input::facts::read).transpose()
}

/// Standard output for reports: when the reader has gone (`winadmit lint
/// ... | head`), the process ends quietly with exit 0, as ripgrep does,
/// instead of reporting an error nobody asked for.
pub(crate) struct Stdout(std::io::Stdout);

impl Stdout {
    pub(crate) fn new() -> Self {
        Self(std::io::stdout())
    }
}

impl std::io::Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        quiet_on_broken_pipe(self.0.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        quiet_on_broken_pipe(self.0.flush())
    }
}

fn quiet_on_broken_pipe<T>(result: std::io::Result<T>) -> std::io::Result<T> {
    if let Err(e) = &result
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(i32::from(EXIT_CLEAN));
    }
    result
}

/// Whether text output gets ANSI colours: `--color always|never`, or on
/// `auto` when it goes to a terminal and `NO_COLOR` is not set. The same
/// rule for `lint` and `report`.
#[must_use]
pub fn use_color(choice: crate::entry::cli::ColorChoice, to_terminal: bool) -> bool {
    match choice {
        crate::entry::cli::ColorChoice::Always => true,
        crate::entry::cli::ColorChoice::Never => false,
        crate::entry::cli::ColorChoice::Auto => {
            to_terminal && std::env::var_os("NO_COLOR").is_none()
        }
    }
}

/// Is this error (or its cause) a write to a closed pipe?
#[must_use]
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Runs a parsed command line.
///
/// # Errors
/// Usage or start-up problems; `main` prints them and exits 2.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Lint(args) => lint::run(args),
        Command::Rules(args) => explain::rules(args),
        Command::Explain(args) => explain::explain(args),
        Command::Serve(args) => serve::run(*args),
        Command::Certs(args) => certs::run(args),
        Command::Manifests(args) => manifests::run(args),
        Command::Report(args) => report::run(args),
        Command::Audit(args) => audit::run(*args),
        Command::Example(args) => example::run(args),
        Command::AdmissionPolicy(args) => admission_policy::run(args),
        Command::Images(args) => images::run(args),
        Command::Exceptions(args) => exceptions::run(args),
    }
}

impl From<crate::entry::cli::ReportFormat> for crate::render::report::format::Format {
    fn from(f: crate::entry::cli::ReportFormat) -> Self {
        use crate::entry::cli::ReportFormat as Cli;
        match f {
            Cli::Text => Self::Text,
            Cli::Json => Self::Json,
            Cli::Policyreport => Self::PolicyReport,
            Cli::Html => Self::Html,
        }
    }
}

/// The exit code of `lint` and `report`: 2 when an input could not be
/// read (or the report is incomplete), else 1 when findings reach
/// `--fail-on`, else 0.
#[must_use]
pub fn exit_code(
    fail_on: crate::entry::cli::FailOn,
    errors: usize,
    warnings: usize,
    input_failed: bool,
) -> ExitCode {
    let failing = match fail_on {
        crate::entry::cli::FailOn::Error => errors > 0,
        crate::entry::cli::FailOn::Warning => errors + warnings > 0,
        crate::entry::cli::FailOn::Never => false,
    };
    ExitCode::from(if input_failed {
        EXIT_INPUT
    } else if failing {
        EXIT_FINDINGS
    } else {
        EXIT_CLEAN
    })
}
