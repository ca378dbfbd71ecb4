//! Where the real-world corpus lives: `WINADMIT_CORPUS`, else
//! `../shared/corpus` beside the checkout. It is not part of a clone: tests
//! that need it print `SKIPPED` and pass when it is absent, unless
//! `WINADMIT_REQUIRE_CORPUS=1` (set by `.ci/run`), which makes them fail.

#![allow(dead_code)] // each test target uses a part

use std::path::{Path, PathBuf};

/// The corpus directory, or `None` (after printing `SKIPPED: <test>`) when
/// it is absent and not required.
///
/// # Panics
/// The corpus is absent and `WINADMIT_REQUIRE_CORPUS` is set.
pub fn corpus_dir_or_skip(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("WINADMIT_CORPUS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
        PathBuf::from,
    );
    if dir.join("INDEX.tsv").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("WINADMIT_REQUIRE_CORPUS").is_none(),
        "{test}: the corpus is required (WINADMIT_REQUIRE_CORPUS) but {} has no INDEX.tsv; set WINADMIT_CORPUS",
        dir.display()
    );
    eprintln!(
        "SKIPPED: {test}: no corpus at {} (set WINADMIT_CORPUS)",
        dir.display()
    );
    None
}

/// The corpus's manifest files (`.yaml`, `.yml`, `.json`), sorted.
///
/// # Panics
/// The directory cannot be read.
pub fn manifests(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    files.sort();
    files
}
