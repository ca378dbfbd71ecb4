//! The layers of `src/` (see `src/lib.rs`): one folder per layer. The
//! decision (`src/decision/`) imports only itself and the readers of input;
//! the readers (`src/input/`) import only the decision and each other; the
//! renderers (`src/render/`) never import an entry point; nothing outside
//! `src/entry/` imports it. No module of the decision touches the network,
//! async runtimes or kube's client.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layer folders of `src/`, each with the layers it may import.
const LAYERS: &[(&str, &[&str])] = &[
    ("decision", &["decision", "input"]),
    ("input", &["decision", "input"]),
    ("render", &["decision", "input", "render"]),
    ("entry", &["decision", "input", "render", "entry"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The source files of `src/` by their first folder (`lib.rs` and `main.rs`
/// under their own names).
fn files_by_folder() -> BTreeMap<String, Vec<PathBuf>> {
    let src = src();
    let mut out: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str();
        out.entry(first.to_string_lossy().into_owned())
            .or_default()
            .push(path.to_owned());
    }
    out
}

/// The layers a file names as `crate::<layer>`.
fn imports(text: &str) -> Vec<String> {
    text.match_indices("crate::")
        .map(|(at, m)| {
            text[at + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn every_source_file_is_in_a_layer_folder() {
    let stray: Vec<String> = files_by_folder()
        .into_keys()
        .filter(|f| !matches!(f.as_str(), "lib.rs" | "main.rs"))
        .filter(|f| !LAYERS.iter().any(|(layer, _)| layer == f))
        .collect();
    assert!(
        stray.is_empty(),
        "files or folders of src/ outside the layer folders {:?}: {stray:?}",
        LAYERS.iter().map(|(l, _)| l).collect::<Vec<_>>()
    );
}

#[test]
fn lib_declares_the_layers() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    let mut layers: Vec<&str> = LAYERS.iter().map(|(l, _)| *l).collect();
    layers.sort_unstable();
    assert_eq!(
        declared, layers,
        "src/lib.rs declares the layer folders, nothing else"
    );
}

#[test]
fn layers_import_only_what_they_may() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (layer, may) in LAYERS {
        for file in files_by_folder().remove(*layer).unwrap_or_default() {
            let text = std::fs::read_to_string(&file).unwrap();
            checked += 1;
            for import in imports(&text) {
                if !may.contains(&import.as_str()) {
                    wrong.push(format!(
                        "{} ({layer}) imports crate::{import}",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} files found under the layer folders"
    );
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_decision_does_no_network_or_async_io() {
    let forbidden = [
        "tokio",
        "axum",
        "hyper",
        "kube::Client",
        "kube::api",
        "reqwest",
    ];
    let files = files_by_folder().remove("decision").unwrap_or_default();
    assert!(!files.is_empty(), "no src/decision/");
    let mut wrong = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for word in forbidden {
            if text.contains(&format!("{word}::")) || text.contains(&format!("use {word}")) {
                wrong.push(format!("{} uses {word}", file.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
