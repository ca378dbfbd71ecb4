//! The layers of `src/` (see `src/lib.rs`): the pure core imports only the
//! core and the readers of input; the readers and the renderers never
//! import an entry point (a command or the server); no core module touches
//! the network, async runtimes or kube's client. A module added to `src/` must be put in a layer here.

use std::collections::BTreeMap;
use std::path::Path;

/// Every top-level module of `src/`, by layer.
const CORE: &[&str] = &[
    "admission_policy",
    "cluster",
    "decide",
    "engine",
    "finding",
    "glob",
    "images",
    "gmsa",
    "names",
    "patch",
    "path",
    "policy",
    "rules",
    "services",
    "strict",
    "targeting",
    "tolerations",
    "version",
    "view",
    "windows_builds",
    "workload",
];
const INPUTS: &[&str] = &["registry", "source", "yaml"];
const RENDERERS: &[&str] = &["output"];
const ENTRY_POINTS: &[&str] = &[
    "admission",
    "certs",
    "cli",
    "commands",
    "errors",
    "fix",
    "lint",
    "manifests",
    "report",
    "server",
];

/// What each layer may import from the crate.
fn allowed(layer: &str) -> Vec<&'static str> {
    match layer {
        "core" | "inputs" => [CORE, INPUTS].concat(),
        "renderers" => [CORE, INPUTS, RENDERERS].concat(),
        _ => [CORE, INPUTS, RENDERERS, ENTRY_POINTS].concat(),
    }
}

fn layer_of(module: &str) -> Option<&'static str> {
    [
        ("core", CORE),
        ("inputs", INPUTS),
        ("renderers", RENDERERS),
        ("entry points", ENTRY_POINTS),
    ]
    .into_iter()
    .find(|(_, members)| members.contains(&module))
    .map(|(layer, _)| layer)
}

/// The source files of each top-level module of `src/`.
fn modules() -> BTreeMap<String, Vec<std::path::PathBuf>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_owned();
        if matches!(module.as_str(), "lib" | "main") {
            continue;
        }
        out.entry(module).or_default().push(path.to_owned());
    }
    out
}

/// The top-level modules a file names as `crate::<module>`.
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
fn every_module_has_a_layer() {
    let unplaced: Vec<String> = modules()
        .into_keys()
        .filter(|m| layer_of(m).is_none())
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules in no layer (add them to tests/layers.rs and src/lib.rs): {unplaced:?}"
    );
}

#[test]
fn layers_import_only_what_they_may() {
    let mut wrong = Vec::new();
    for (module, files) in modules() {
        let Some(layer) = layer_of(&module) else {
            continue;
        };
        let may = allowed(layer);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for import in imports(&text) {
                if import != module && !may.contains(&import.as_str()) {
                    wrong.push(format!(
                        "{} ({layer}) imports crate::{import}",
                        file.display()
                    ));
                }
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_core_does_no_network_or_async_io() {
    let forbidden = [
        "tokio",
        "axum",
        "hyper",
        "kube::Client",
        "kube::api",
        "reqwest",
    ];
    let mut wrong = Vec::new();
    for (module, files) in modules() {
        if layer_of(&module) != Some("core") {
            continue;
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for word in forbidden {
                if text.contains(&format!("{word}::")) || text.contains(&format!("use {word}")) {
                    wrong.push(format!("{} uses {word}", file.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
