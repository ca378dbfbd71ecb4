//! Every file generated from the code, checked in one test: docs/rules.md,
//! the README's generated blocks, the export of the default policy and the
//! admission-policy overlay, the chart's admission policies and its values
//! table, and the manifests `kubectl kustomize` renders.
//!
//! `WINADMIT_REGENERATE=1 cargo test --test install generated::` rewrites
//! every one of them; review the diff, and build again (`winadmit
//! manifests` embeds the renders).

use std::path::{Path, PathBuf};

use crate::{admission_policy, helm, manifests, readme};

const BIN: &str = env!("CARGO_BIN_EXE_winadmit");

fn regenerate() -> bool {
    std::env::var_os("WINADMIT_REGENERATE").is_some_and(|v| v == "1")
}

/// docs/rules.md as `winadmit rules --format markdown` prints it.
fn rules_md() -> (PathBuf, String) {
    let out = std::process::Command::new(BIN)
        .args(["rules", "--format", "markdown"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/rules.md");
    (path, String::from_utf8(out.stdout).unwrap())
}

#[test]
#[cfg_attr(
    no_kubectl,
    ignore = "needs kubectl for the renders: run tests/apiserver/build.sh (it builds kubectl v1.37) or put kubectl on PATH"
)]
fn every_generated_file_is_current() {
    let mut files = vec![rules_md(), readme::readme_with_generated_blocks()];
    files.extend(admission_policy::default_exports());
    files.extend(helm::chart_admission_policies());
    files.push(helm::chart_readme_with_values_table());
    let mut stale = Vec::new();
    for (path, fresh) in files {
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != fresh {
            if regenerate() {
                std::fs::write(&path, fresh).unwrap();
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    for (path, fresh, same) in manifests::renders() {
        if regenerate() {
            std::fs::write(&path, fresh).unwrap();
        } else if !same {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "generated files that the code no longer gives: {stale:#?}\nrun `WINADMIT_REGENERATE=1 cargo test --test install generated::`, review the diff and build again"
    );
}
