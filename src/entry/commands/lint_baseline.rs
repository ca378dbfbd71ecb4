//! `lint --write-baseline` and `lint --baseline`: the baseline file read
//! before linting (a bad file stops the run before any work), written or
//! compared after.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::entry::cli::BaselineArgs;
use crate::render::baseline::{Baseline, State};
use crate::render::compact::CompactReport;

/// What to do with the baseline.
pub enum Plan {
    None,
    Write(PathBuf),
    Compare(PathBuf, Baseline),
}

/// Reads `--baseline`'s file, or notes where `--write-baseline` writes.
///
/// # Errors
/// The baseline cannot be read or is not a baseline (naming the file and
/// the key).
pub fn load(args: BaselineArgs) -> anyhow::Result<Plan> {
    let BaselineArgs {
        write_baseline,
        baseline,
    } = args;
    if let Some(file) = write_baseline {
        return Ok(Plan::Write(file));
    }
    let Some(file) = baseline else {
        return Ok(Plan::None);
    };
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "--baseline {}: cannot read the baseline (write one with --write-baseline)",
            file.display()
        )
    })?;
    let b = Baseline::parse(&text).map_err(|e| {
        anyhow::anyhow!(
            "--baseline {}: not a winadmit baseline: {e}",
            file.display()
        )
    })?;
    Ok(Plan::Compare(file, b))
}

/// What the baseline did to the report.
#[derive(Default)]
pub struct Applied {
    /// Each finding's state, for SARIF's `baselineState` (the report then
    /// keeps every finding).
    pub states: Option<Vec<State>>,
    /// Exit 0 whatever the findings (the baseline was written).
    pub written: bool,
}

/// Writes the baseline, or compares the report with it: with `keep_all`
/// (SARIF) every finding stays, with its state; otherwise only new
/// findings stay in the report. The entries gone are listed on stderr.
///
/// # Errors
/// The baseline cannot be written.
pub fn apply(plan: Plan, report: &mut CompactReport, keep_all: bool) -> anyhow::Result<Applied> {
    match plan {
        Plan::None => Ok(Applied::default()),
        Plan::Write(file) => {
            let b = Baseline::of(&*report);
            std::fs::write(&file, b.to_text())
                .with_context(|| format!("--write-baseline {}: cannot write", file.display()))?;
            eprintln!(
                "winadmit: wrote {} finding(s) to the baseline {}: `winadmit lint --baseline {}` fails only on findings it does not record",
                b.findings.len(),
                file.display(),
                file.display()
            );
            Ok(Applied {
                states: None,
                written: true,
            })
        }
        Plan::Compare(file, b) => {
            let compared = b.compare(&*report);
            let known = compared
                .states
                .iter()
                .filter(|s| **s == State::Unchanged)
                .count();
            eprintln!(
                "winadmit: baseline {}: {known} finding(s) recorded there{}",
                file.display(),
                if keep_all {
                    " (marked unchanged)"
                } else {
                    " (not shown)"
                }
            );
            if !compared.gone.is_empty() {
                eprintln!(
                    "winadmit: baseline {}: {} entr{} gone (fixed: remove them, or write the baseline again with --write-baseline):",
                    file.display(),
                    compared.gone.len(),
                    if compared.gone.len() == 1 {
                        "y is"
                    } else {
                        "ies are"
                    }
                );
                for e in &compared.gone {
                    eprintln!("  - {e}");
                }
            }
            if keep_all {
                return Ok(Applied {
                    states: Some(compared.states),
                    written: false,
                });
            }
            keep_new(report, &compared.states);
            Ok(Applied::default())
        }
    }
}

/// Keeps only the new findings, and counts them again.
fn keep_new(report: &mut CompactReport, states: &[State]) {
    let mut i = 0;
    report.findings.retain(|_| {
        let keep = states.get(i) == Some(&State::New);
        i += 1;
        keep
    });
    let summary = &mut report.summary;
    summary.errors = 0;
    summary.warnings = 0;
    summary.infos = 0;
    for r in &report.findings {
        report.summary.count(r.severity);
    }
}
