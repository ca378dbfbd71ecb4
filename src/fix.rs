//! `lint --fix`: write the safe fixes back into manifest files.

use std::path::PathBuf;

use crate::engine::Context;
use crate::output::LintReport;
use crate::policy::Policy;

/// Applies the fixes for `report`'s findings to the files; returns how many
/// fixes were written.
///
/// # Errors
/// A file cannot be written.
pub fn apply_to_files(
    _files: &[PathBuf],
    _policy: &Policy,
    _cx: &Context<'_>,
    _report: &mut LintReport,
) -> anyhow::Result<usize> {
    anyhow::bail!("--fix is not available yet")
}
