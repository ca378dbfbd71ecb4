//! The manifest reader of `lint` and `report --from-file`: the files a list
//! of paths names (directories walked), read within the size limit, held
//! when they can be read only once (stdin, FIFOs) or are the only input,
//! and a first pass that learns the cluster objects of the whole input
//! ([`super::prescan`]) before any object is judged. Both commands read
//! their input through [`Inputs`], so both learn the same cluster objects
//! from the same files.

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::decision::cluster::ClusterObjects;

/// A file or document that could not be read.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InputProblem {
    pub file: String,
    pub line: Option<u64>,
    pub column: Option<u64>,
    pub message: String,
}

impl InputProblem {
    /// A problem with a whole input, without a position.
    #[must_use]
    pub fn new(file: &str, message: String) -> Self {
        Self {
            file: file.to_owned(),
            line: None,
            column: None,
            message,
        }
    }
}

/// An input to read: a file, or stdin.
pub enum Input {
    File(PathBuf),
    Stdin,
    /// A text a tool rendered (a chart's template, an overlay's resource
    /// file), held in memory: `name` is the file it came from, `note` how
    /// it was rendered.
    Rendered {
        name: String,
        note: String,
    },
}

impl Input {
    /// The name shown for the input: the path as given, or `<stdin>`.
    #[must_use]
    pub fn name(&self) -> String {
        match self {
            Self::File(p) => p.display().to_string(),
            Self::Stdin => "<stdin>".into(),
            Self::Rendered { name, .. } => name.clone(),
        }
    }

    /// How a rendered input was rendered (for its findings' messages).
    #[must_use]
    pub fn rendered_note(&self) -> Option<&str> {
        match self {
            Self::Rendered { note, .. } => Some(note),
            Self::File(_) | Self::Stdin => None,
        }
    }
}

/// The text of an input.
pub enum Text {
    /// Read whole (at most [`super::MAX_FILE_BYTES`]), checked by
    /// [`super::decode`], a byte-order mark removed.
    Whole(String),
    /// A JSON text over the size limit, to be read as a stream item by
    /// item ([`super::json`]), when the reader was asked to allow it
    /// ([`Inputs::stream_large_json`]). Not checked: the JSON reader says
    /// where it is broken.
    Stream(Box<dyn BufRead + Send>),
}

/// A text read once and kept for both passes, or `None` to read it again.
type Held = Option<Result<Text, InputProblem>>;

/// The inputs of one run (see the module docs). Texts are taken with
/// [`Inputs::take`], from any thread, in any order, each once.
pub struct Inputs {
    inputs: Vec<Input>,
    held: Vec<Mutex<Held>>,
    large_json: bool,
    /// Which inputs the first pass read (the others, streamed from stdin,
    /// are learnt from in order as they are read).
    learnt: Vec<bool>,
}

impl Inputs {
    /// The inputs `paths` name (files and directories walked for `.yaml`,
    /// `.yml` and `.json`, `-` for stdin), and the directory entries that
    /// could not be read. Stdin, FIFOs (`lint <(helm template .)`) and
    /// devices can be read once: their text is kept for both passes. So is
    /// a single file (unless `rewritten`: `lint --fix` rewrites it between
    /// the passes): reading it twice would hold two copies while the
    /// allocator returns the first. Other regular files are read twice
    /// rather than all held in memory.
    #[must_use]
    pub fn open(paths: &[PathBuf], rewritten: bool, large_json: bool) -> (Self, Vec<InputProblem>) {
        let (files, problems) = manifest_paths(paths);
        let inputs: Vec<Input> = files
            .into_iter()
            .map(|p| {
                if p.as_os_str() == "-" {
                    Input::Stdin
                } else {
                    Input::File(p)
                }
            })
            .collect();
        let single = inputs.len() == 1 && !rewritten;
        let held = inputs
            .iter()
            .map(|input| {
                Mutex::new(match input {
                    Input::Stdin => Some(read_stdin(large_json)),
                    Input::File(p) if single || !is_regular_file(p) => {
                        Some(read_file(p, large_json))
                    }
                    Input::File(_) | Input::Rendered { .. } => None,
                })
            })
            .collect();
        let learnt = vec![false; inputs.len()];
        let inputs = Self {
            inputs,
            held,
            large_json,
            learnt,
        };
        (inputs, problems)
    }

    /// Adds a rendered text, held for both passes (never rewritten by
    /// `--fix`).
    pub fn add_rendered(&mut self, name: String, note: String, text: String) {
        self.inputs.push(Input::Rendered { name, note });
        self.held.push(Mutex::new(Some(Ok(Text::Whole(text)))));
        self.learnt.push(false);
    }

    /// Whether a JSON text over the size limit is read as a stream
    /// (`report`) instead of refused (`lint`).
    #[must_use]
    pub fn stream_large_json(&self) -> bool {
        self.large_json
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    #[must_use]
    pub fn input(&self, i: usize) -> &Input {
        &self.inputs[i]
    }

    /// The regular files among the inputs (those `--fix` may rewrite).
    #[must_use]
    pub fn regular_files(&self) -> Vec<PathBuf> {
        self.inputs
            .iter()
            .filter_map(|i| match i {
                Input::File(p) if is_regular_file(p) => Some(p.clone()),
                Input::File(_) | Input::Stdin | Input::Rendered { .. } => None,
            })
            .collect()
    }

    /// Whether the first pass read input `i` (a JSON stream from stdin
    /// cannot be read twice).
    #[must_use]
    pub fn learnt_from(&self, i: usize) -> bool {
        self.learnt[i]
    }

    /// First pass: the cluster objects of the whole input
    /// ([`super::prescan`]: Namespaces, RuntimeClasses, Windows Nodes,
    /// GMSACredentialSpecs, wherever they are), for every object of it;
    /// `each_text` sees every text read whole too (`lint` collects the
    /// workloads' images there). A text held for both passes is handed
    /// over owned, so a tab retry changes it in place (and the second pass
    /// needs none), not a copy.
    pub fn learn(&mut self, mut each_text: impl FnMut(&mut Cow<'_, str>)) -> ClusterObjects {
        let mut known = ClusterObjects::default();
        for i in 0..self.inputs.len() {
            let held = self.held[i]
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner);
            self.learnt[i] = match (held, &self.inputs[i]) {
                (Some(Ok(Text::Whole(text))), _) => {
                    let mut owned = Cow::Owned(std::mem::take(text));
                    super::prescan::cluster_objects(&mut owned, &mut known);
                    each_text(&mut owned);
                    *text = owned.into_owned();
                    true
                }
                // A regular file streamed is read again for its cluster
                // objects.
                (Some(Ok(Text::Stream(_))), Input::File(p)) if is_regular_file(p) => {
                    super::prescan::cluster_objects_in_large_json(p, &mut known);
                    true
                }
                // Stdin and FIFOs cannot be read twice: their objects are
                // learnt from in order (put `ns,runtimeclass` first in
                // `kubectl get`).
                (Some(Ok(Text::Stream(_))), _) => false,
                (Some(Err(_)), _) => true,
                (None, Input::File(p)) => {
                    match read_file(p, self.large_json) {
                        Ok(Text::Whole(text)) => {
                            let mut owned = Cow::Owned(text);
                            super::prescan::cluster_objects(&mut owned, &mut known);
                            each_text(&mut owned);
                        }
                        Ok(Text::Stream(_)) => {
                            super::prescan::cluster_objects_in_large_json(p, &mut known);
                        }
                        // Reported when the second pass reads it.
                        Err(_) => {}
                    }
                    true
                }
                (None, Input::Stdin | Input::Rendered { .. }) => {
                    unreachable!("stdin and rendered texts are read once")
                }
            };
        }
        known
    }

    /// The text of input `i` for the second pass: the one held (taken, not
    /// borrowed), or read again.
    ///
    /// # Errors
    /// The input cannot be read, is over the size limit, or is not text.
    pub fn take(&self, i: usize) -> Result<Text, InputProblem> {
        let taken = self.held[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match (taken, &self.inputs[i]) {
            (Some(text), _) => text,
            (None, Input::File(p)) => read_file(p, self.large_json),
            (None, Input::Stdin | Input::Rendered { .. }) => {
                unreachable!("stdin and rendered texts are read once")
            }
        }
    }
}

pub(crate) fn is_regular_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

/// The files to read for these paths: files and `-` as given, directories
/// walked recursively for `.yaml`, `.yml` and `.json` files in a stable
/// order (symbolic link loops reported, not followed).
#[must_use]
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
                    problems.push(InputProblem::new(&file, message));
                }
            }
        }
    }
    (files, problems)
}

/// Whether the walk of directory `dir` ([`manifest_paths`]) finds a
/// manifest file at all; it stops at the first. An unreadable entry counts
/// as one: [`manifest_paths`] reports it.
#[must_use]
pub fn dir_has_manifest(dir: &Path) -> bool {
    walkdir::WalkDir::new(dir)
        .follow_links(true)
        .into_iter()
        .any(|e| e.map_or(true, |e| e.file_type().is_file() && is_manifest(e.path())))
}

fn is_manifest(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// Is this input JSON (rather than YAML)? Looks at the first non-blank byte.
#[must_use]
pub fn looks_like_json(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    matches!(
        bytes.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    )
}

fn read_file(path: &Path, large_json: bool) -> Result<Text, InputProblem> {
    let name = path.display().to_string();
    let problem = |message: String| InputProblem::new(&name, message);
    let file = std::fs::File::open(path).map_err(|e| problem(format!("cannot read: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| problem(format!("cannot read: {e}")))?;
    if meta.len() > super::MAX_FILE_BYTES as u64 {
        let mut reader = BufReader::with_capacity(JSON_READ_BUFFER, file);
        if large_json && reader.fill_buf().is_ok_and(looks_like_json) {
            return Ok(Text::Stream(Box::new(reader)));
        }
        return Err(problem(format!(
            "file is {} MiB, over the {} MiB limit for manifests",
            meta.len() / (1024 * 1024),
            super::MAX_FILE_BYTES / (1024 * 1024)
        )));
    }
    // Bounded even when the length lies (`lint <(helm template .)`).
    let mut file = file;
    let (bytes, over) = super::read_limited(&mut file, meta.len())
        .map_err(|e| problem(format!("cannot read: {e}")))?;
    if over {
        if large_json && looks_like_json(&bytes) {
            return Ok(stream_on(bytes, file));
        }
        return Err(problem(format!(
            "file is over the {} MiB limit for manifests (read stopped there)",
            super::MAX_FILE_BYTES / (1024 * 1024)
        )));
    }
    decode(name, bytes).map(Text::Whole)
}

fn read_stdin(large_json: bool) -> Result<Text, InputProblem> {
    let mut stdin = std::io::stdin();
    let (bytes, over) = super::read_limited(&mut stdin, 0)
        .map_err(|e| InputProblem::new("<stdin>", format!("cannot read: {e}")))?;
    if over && large_json && looks_like_json(&bytes) {
        return Ok(stream_on(bytes, stdin));
    }
    decode("<stdin>".into(), bytes).map(Text::Whole)
}

/// The read buffer of a JSON stream.
const JSON_READ_BUFFER: usize = 256 * 1024;

/// A JSON text over the limit: what was read, then the rest.
fn stream_on(head: Vec<u8>, rest: impl Read + Send + 'static) -> Text {
    Text::Stream(Box::new(BufReader::with_capacity(
        JSON_READ_BUFFER,
        std::io::Cursor::new(head).chain(rest),
    )))
}

/// The text of `bytes`, checked by [`super::decode`], without a copy (a
/// large file is not held twice).
fn decode(file: String, mut bytes: Vec<u8>) -> Result<String, InputProblem> {
    let bom = match super::decode(&bytes) {
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
