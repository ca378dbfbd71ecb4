//! `winadmit admission-policy`: the rules as ValidatingAdmissionPolicy and
//! MutatingAdmissionPolicy objects on stdout; what is not exported on stderr
//! and as a comment at the top of the output; with `--static DIR`, the
//! policies as the API server's static admission configuration.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;

use super::{EXIT_CLEAN, EXIT_INPUT, static_dir};
use crate::decision::admission_policy;
use crate::decision::policy::Mode;
use crate::entry::cli::{AdmissionPolicyArgs, ModeChoice};
use crate::entry::static_admission;

/// # Errors
/// An unreadable policy or a write error; a target older than 1.30 exits 2
/// with an explanation.
pub fn run(args: AdmissionPolicyArgs) -> anyhow::Result<ExitCode> {
    let AdmissionPolicyArgs {
        policy,
        mode,
        no_mutating,
        static_dir,
        static_host_dir,
        exempt_namespace,
    } = args;
    let (pol, cluster) = super::load_policy(&policy)?;
    let mode = mode.map(|m| match m {
        ModeChoice::Enforce => Mode::Enforce,
        ModeChoice::Warn => Mode::Warn,
        ModeChoice::Audit => Mode::Audit,
    });
    let exported = match admission_policy::export(&pol, &cluster, mode, !no_mutating) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("winadmit: {e}");
            return Ok(ExitCode::from(EXIT_INPUT));
        }
    };
    let mode = mode.unwrap_or(pol.mode);
    for g in &exported.gaps {
        let kind = if g.partial {
            "partly exported"
        } else {
            "not exported"
        };
        eprintln!("winadmit: {} {kind}: {}", g.rule, g.reason);
    }
    if let Some(dir) = static_dir {
        let files = static_admission::policy_files(&exported.documents, &exempt_namespace)?;
        let config = static_dir::write(
            &dir,
            static_host_dir.as_deref(),
            &[
                static_admission::Plugin::MutatingPolicy,
                static_admission::Plugin::ValidatingPolicy,
            ],
            &files,
        )?;
        static_dir::report(&config, &files);
        return Ok(ExitCode::from(EXIT_CLEAN));
    }
    let large = admission_policy::too_large_for_client_side_apply(&exported.documents);
    if !large.is_empty() {
        eprintln!(
            "winadmit: {} over 256 KiB, more than client-side `kubectl apply` can store in its last-applied-configuration annotation: apply with `kubectl apply --server-side --force-conflicts -f -`",
            large.join(", ")
        );
    }
    let mut out = admission_policy::header(&cluster, mode, &exported.gaps);
    out.push_str(
        &crate::entry::manifests::to_yaml(&exported.documents)
            .context("serializing the admission policies")?,
    );
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .context("writing the admission policies to stdout")?;
    Ok(ExitCode::from(EXIT_CLEAN))
}
