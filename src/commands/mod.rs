//! Glue from the command line to the core. No policy logic lives here.

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub mod admission_policy;
pub mod certs;
pub mod explain;
pub mod lint;
pub mod manifests;
pub mod report;
pub mod serve;

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
    args: &crate::cli::PolicyArgs,
) -> Result<(crate::policy::Policy, crate::cluster::Cluster), crate::policy::PolicyError> {
    let pol = crate::policy::Policy::load(&args.policy)?;
    for notice in &pol.notices {
        eprintln!("winadmit: {notice}");
    }
    let cluster = crate::cluster::Cluster::resolve(
        &args.stated(),
        &pol.stated(),
        &crate::cluster::Learnt::default(),
    );
    Ok((pol, cluster))
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
        Command::AdmissionPolicy(args) => admission_policy::run(args),
    }
}
