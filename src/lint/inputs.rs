//! What `lint` reads: the files a list of paths names, and stdin.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::output::InputProblem;
use crate::output::compact::CompactReport;
use crate::source;

/// An input to read: a file, or stdin.
pub(super) enum Input {
    File(PathBuf),
    Stdin,
}

impl Input {
    pub(super) fn name(&self) -> String {
        match self {
            Self::File(p) => p.display().to_string(),
            Self::Stdin => "<stdin>".into(),
        }
    }
}

pub(super) fn inputs_as_paths(inputs: &[Input]) -> Vec<PathBuf> {
    inputs
        .iter()
        .filter_map(|i| match i {
            // Only regular files can be rewritten in place.
            Input::File(p) if is_regular_file(p) => Some(p.clone()),
            Input::File(_) | Input::Stdin => None,
        })
        .collect()
}

pub(super) fn is_regular_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

/// Expands directories (recursively, `.yaml`/`.yml`/`.json`, symlink loops
/// reported, not followed forever) into files, in a stable order; `-` is
/// stdin.
pub(super) fn expand(paths: &[PathBuf], report: &mut CompactReport) -> Vec<Input> {
    let (files, problems) = manifest_paths(paths);
    for problem in problems {
        report.summary.input_errors += 1;
        report.input_errors.push(problem);
    }
    files
        .into_iter()
        .map(|p| {
            if p.as_os_str() == "-" {
                Input::Stdin
            } else {
                Input::File(p)
            }
        })
        .collect()
}

/// The files to read for these paths: files and `-` as given, directories
/// walked recursively for `.yaml`, `.yml` and `.json` files in a stable
/// order (symbolic link loops reported, not followed). Shared by `lint`
/// and `report --from-file`.
pub fn manifest_paths(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<InputProblem>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    // A file named twice (`lint a.yaml a.yaml`, or a directory and a file
    // in it) is read once, under the first name it was given: its findings
    // would otherwise be reported, and `--fix`ed, twice.
    let mut seen = std::collections::HashSet::new();
    let mut files_push = |files: &mut Vec<PathBuf>, p: PathBuf| {
        let key = if p.as_os_str() == "-" {
            p.clone()
        } else {
            std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone())
        };
        if seen.insert(key) {
            files.push(p);
        }
    };
    for path in paths {
        if path.as_os_str() == "-" || !path.is_dir() {
            files_push(&mut files, path.clone());
            continue;
        }
        let walker = walkdir::WalkDir::new(path)
            .follow_links(true)
            .sort_by_file_name();
        for entry in walker {
            match entry {
                Ok(e) if e.file_type().is_file() && is_manifest(e.path()) => {
                    files_push(&mut files, e.into_path());
                }
                Ok(_) => {}
                Err(err) => {
                    let file = err.path().unwrap_or(path).display().to_string();
                    let message = if err.loop_ancestor().is_some() {
                        "symbolic link loop, not followed".to_owned()
                    } else {
                        format!("cannot read directory entry: {err}")
                    };
                    problems.push(InputProblem {
                        file,
                        line: None,
                        column: None,
                        message,
                    });
                }
            }
        }
    }
    (files, problems)
}

fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

pub(super) fn read_file(path: &Path) -> Result<String, InputProblem> {
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
    // Room for the whole file at once: growing by doubling would hold up
    // to twice a large file while it is read.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len().min(limit)).unwrap_or(0) + 1);
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| problem(format!("cannot read: {e}")))?;
    if bytes.len() as u64 >= limit {
        return Err(problem(format!(
            "file is over the {} MiB limit for manifests (read stopped there)",
            source::MAX_FILE_BYTES / (1024 * 1024)
        )));
    }
    decode(path.display().to_string(), bytes)
}

pub(super) fn read_stdin() -> Result<String, InputProblem> {
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
    decode("<stdin>".into(), bytes)
}

/// The text of `bytes`, checked by [`source::decode`], without a copy (a
/// large file is not held twice).
fn decode(file: String, mut bytes: Vec<u8>) -> Result<String, InputProblem> {
    let bom = match source::decode(&bytes) {
        Ok(text) => bytes.len() - text.len(),
        Err(e) => {
            return Err(InputProblem {
                file,
                line: e.line,
                column: e.column,
                message: e.message,
            });
        }
    };
    bytes.drain(..bom);
    Ok(String::from_utf8(bytes).expect("source::decode checked the encoding"))
}
