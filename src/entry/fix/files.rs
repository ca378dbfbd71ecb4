//! Writing fixed texts back to their files, as a careful editor saves.

use std::path::Path;

use super::fix_text;
use crate::decision::engine::Context;
use crate::decision::policy::Policy;
use crate::input::source;

/// Fixes files in place; returns the number of operations applied, what
/// each changed (`file:line: RULE at field`) and,
/// for each file or object not fixed, why.
///
/// Each file is edited the way a careful editor saves: a symbolic link is
/// followed and its target rewritten (the link stays); the new text goes to
/// a temporary file created exclusively (`O_EXCL`, a random name) in the
/// target's directory, given the original's mode, owner and group, synced,
/// and renamed over the target only if the target still holds the text the
/// fix was computed from. A byte-order mark and the line endings are kept.
/// A file that is read-only, has other hard links, cannot be given back to
/// its owner, or changed meanwhile is left alone, and said so.
///
/// # Errors
/// A temporary file cannot be created, written or renamed.
pub fn apply_to_files(
    files: &[std::path::PathBuf],
    policy: &Policy,
    cx: &Context<'_>,
) -> anyhow::Result<(usize, Vec<String>, Vec<String>)> {
    let mut applied = 0;
    let mut changed = Vec::new();
    let mut skipped = Vec::new();
    for file in files {
        let Ok(target) = std::fs::canonicalize(file) else {
            continue;
        };
        let Ok(Some(original)) = read_regular(&target) else {
            continue;
        };
        let Ok(text) = source::decode(&original.bytes) else {
            continue;
        };
        let (fixed, outcome) = fix_text(text, policy, cx);
        let not_fixed = |why: String| format!("{}: {why}", file.display());
        if let Some(fixed) = fixed {
            let bom = &original.bytes[..original.bytes.len() - text.len()];
            match replace(&target, &original, bom, &fixed)? {
                Replaced::Yes => {
                    applied += outcome.applied;
                    changed.extend(
                        outcome
                            .changes
                            .iter()
                            .map(|(line, what)| format!("{}:{line}: {what}", file.display())),
                    );
                }
                Replaced::No(why) => {
                    skipped.push(not_fixed(why));
                    continue;
                }
            }
        }
        skipped.extend(outcome.skipped.into_iter().map(not_fixed));
    }
    Ok((applied, changed, skipped))
}

/// A regular file's bytes and what identifies it.
pub(super) struct Original {
    bytes: Vec<u8>,
    meta: std::fs::Metadata,
}

/// The file's bytes (at most [`source::MAX_FILE_BYTES`]), or `None` when it
/// is not a regular file or is over the limit.
pub(super) fn read_regular(path: &Path) -> std::io::Result<Option<Original>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() > source::MAX_FILE_BYTES as u64 {
        return Ok(None);
    }
    let limit = source::MAX_FILE_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    if bytes.len() as u64 >= limit {
        return Ok(None);
    }
    Ok(Some(Original { bytes, meta }))
}

pub(super) enum Replaced {
    Yes,
    /// Left alone, and why.
    No(String),
}

/// Replaces `target` (no symbolic link) with `bom` + `text`, keeping its
/// mode, owner and group, if it still holds `original`.
pub(super) fn replace(
    target: &Path,
    original: &Original,
    bom: &[u8],
    text: &str,
) -> anyhow::Result<Replaced> {
    use std::io::Write as _;
    use std::os::unix::fs::MetadataExt as _;

    use anyhow::Context as _;
    let meta = &original.meta;
    if meta.nlink() > 1 {
        return Ok(Replaced::No(format!(
            "has {} hard links, which a new file would split apart; not fixed: fix it by hand",
            meta.nlink()
        )));
    }
    // Writable, as an editor asks before saving: renaming over a file
    // would bypass its mode. A mode with no write bit is read-only by
    // intent, also for root, whom the access check lets through.
    if meta.mode() & 0o222 == 0 {
        return Ok(Replaced::No(format!(
            "is read-only (mode {:o}); not fixed: make it writable to fix it",
            meta.mode() & 0o7777
        )));
    }
    if let Err(e) = std::fs::OpenOptions::new().write(true).open(target) {
        return Ok(Replaced::No(format!(
            "cannot be written ({e}); not fixed: make it writable to fix it"
        )));
    }
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    // Created with O_EXCL and a random name, mode 0600 until it is complete.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".winadmit-fix")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    let tmp_name = tmp.path().display().to_string();
    if let Err(e) = std::os::unix::fs::fchown(tmp.as_file(), Some(meta.uid()), Some(meta.gid())) {
        return Ok(Replaced::No(format!(
            "its owner and group ({}:{}) cannot be kept ({e}); not fixed: run lint --fix as its owner",
            meta.uid(),
            meta.gid()
        )));
    }
    tmp.as_file()
        .set_permissions(meta.permissions())
        .with_context(|| format!("setting the mode of {tmp_name}"))?;
    tmp.write_all(bom)
        .and_then(|()| tmp.write_all(text.as_bytes()))
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {tmp_name}"))?;
    // The fix was computed from `original`: a file changed since (an editor
    // saving, a formatter, a checkout) keeps its new text.
    let unchanged = std::fs::symlink_metadata(target)
        .is_ok_and(|now| now.is_file() && now.dev() == meta.dev() && now.ino() == meta.ino())
        && read_regular(target)
            .ok()
            .flatten()
            .is_some_and(|now| now.bytes == original.bytes);
    if !unchanged {
        return Ok(Replaced::No(
            "changed while it was being fixed; left as it is now: run lint --fix again".to_owned(),
        ));
    }
    tmp.persist(target)
        .map_err(|e| e.error)
        .with_context(|| format!("replacing {}", target.display()))?;
    Ok(Replaced::Yes)
}
