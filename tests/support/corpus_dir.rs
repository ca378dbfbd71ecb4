//! Where the real-world corpus lives: `WINADMIT_CORPUS`, else
//! `../shared/corpus` beside the checkout, else `/work/shared/corpus` (the
//! workplace's shared folder, for checkouts made elsewhere).

use std::path::PathBuf;

pub fn corpus_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WINADMIT_CORPUS") {
        return PathBuf::from(dir);
    }
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    if beside.is_dir() {
        beside
    } else {
        PathBuf::from("/work/shared/corpus")
    }
}
