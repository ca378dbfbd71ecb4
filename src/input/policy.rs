//! Reading policy files: which files a `--policy` argument names, their
//! text read with the limits manifests have, and each error at the file,
//! line and column it concerns.

use std::path::{Path, PathBuf};

use crate::decision::policy::{Policy, PolicyError};
use crate::input::source;

/// The default policy with these files or directories layered over it, in
/// order (a directory's `.yaml` and `.yml` files in name order).
///
/// # Errors
/// A file cannot be read or is not a valid policy; the error names the
/// file, and the line and column when they are known.
pub fn load(paths: &[PathBuf]) -> Result<Policy, PolicyError> {
    let mut policy = Policy::default_policy();
    for path in paths {
        for file in policy_files(path)? {
            let text = read_policy_file(&file)?;
            policy
                .layer(&file, &text)
                .map_err(|e| with_position(e, &text))?;
        }
    }
    Ok(policy)
}

/// An error at a key, at the line and column of that key in `text` (or of
/// its deepest existing ancestor); other errors as they are.
fn with_position(e: PolicyError, text: &str) -> PolicyError {
    let PolicyError::AtKey {
        path,
        pointer,
        message,
    } = e
    else {
        return e;
    };
    match crate::input::yaml::locate_many(text, &[(0, &pointer)])
        .first()
        .copied()
        .flatten()
    {
        Some(pos) => PolicyError::At {
            path,
            line: pos.line,
            column: pos.column,
            message,
        },
        None => PolicyError::Invalid { path, message },
    }
}

/// A policy file's text, read with the limits manifests have: a regular
/// file (symbolic links followed) of at most [`source::MAX_FILE_BYTES`],
/// UTF-8 without NUL bytes (a byte-order mark is dropped). A FIFO, socket
/// or device is refused before it is opened: opening a FIFO blocks until
/// something writes to it, and a device such as `/dev/zero` never ends.
/// The read stops at the limit even when the file grows meanwhile.
fn read_policy_file(path: &Path) -> Result<String, PolicyError> {
    use std::os::unix::fs::FileTypeExt as _;
    let read = |source| PolicyError::Read {
        path: path.to_owned(),
        source,
    };
    let invalid = |message: String| PolicyError::Invalid {
        path: path.to_owned(),
        message,
    };
    let limit_mib = source::MAX_FILE_BYTES / (1024 * 1024);
    let meta = std::fs::metadata(path).map_err(read)?;
    let t = meta.file_type();
    if !t.is_file() {
        let what = if t.is_fifo() {
            "a FIFO"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else if t.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(invalid(format!(
            "{what}, not a regular file: write the policy to a file and give that to --policy"
        )));
    }
    if meta.len() > source::MAX_FILE_BYTES as u64 {
        return Err(invalid(format!(
            "file is {} MiB, over the {limit_mib} MiB limit for policy files",
            meta.len() / (1024 * 1024)
        )));
    }
    let mut file = std::fs::File::open(path).map_err(read)?;
    let (bytes, over) = source::read_limited(&mut file, meta.len()).map_err(read)?;
    if over {
        return Err(invalid(format!(
            "file is over the {limit_mib} MiB limit for policy files (read stopped there)"
        )));
    }
    match source::decode(&bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(e) => Err(match e.line {
            Some(line) => PolicyError::At {
                path: path.to_owned(),
                line,
                column: e.column.unwrap_or(1),
                message: e.message.replace("not a manifest", "not a policy"),
            },
            None => invalid(e.message.replace("for manifests", "for policy files")),
        }),
    }
}

/// The files a `--policy` argument names: the file itself, or a directory's
/// `.yaml`/`.yml` files in name order.
fn policy_files(path: &Path) -> Result<Vec<PathBuf>, PolicyError> {
    let meta = std::fs::metadata(path).map_err(|source| PolicyError::Read {
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let read = |source| PolicyError::Read {
        path: path.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(read)? {
        let p = entry.map_err(read)?.path();
        if p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            files.push(p);
        }
    }
    if files.is_empty() {
        return Err(PolicyError::EmptyDir {
            path: path.to_owned(),
        });
    }
    files.sort();
    Ok(files)
}
