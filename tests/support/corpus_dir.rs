//! Where the real-world corpus lives: `WINADMIT_CORPUS`, else
//! `../shared/corpus` beside the checkout. It is not part of a clone:
//! `build.rs` sets `cfg(no_corpus)` when it is absent, and the tests that
//! need it carry `#[cfg_attr(no_corpus, ignore = "...")]`, so the test
//! runner shows them as ignored. With `WINADMIT_REQUIRE_CORPUS=1` (set by
//! `.ci/run`) they always run, and fail without it.

#![allow(dead_code)] // each test target uses a part

use std::path::{Path, PathBuf};

/// The corpus directory.
///
/// # Panics
/// The corpus is absent: the test was built when it was there (or required
/// it), so running without it is a failure, not a pass.
pub fn corpus_dir(test: &str) -> PathBuf {
    let dir = std::env::var_os("WINADMIT_CORPUS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
        PathBuf::from,
    );
    assert!(
        dir.join("INDEX.tsv").is_file(),
        "{test}: needs the corpus, but {} has no INDEX.tsv; set WINADMIT_CORPUS (the test is ignored when the corpus is absent at build time)",
        dir.display()
    );
    dir
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
