//! Tells the tests which external inputs they can use, so that a test
//! without its input is compiled as *ignored*, with the reason, and never
//! shows as passed:
//!
//! - `no_control_plane`: Go is missing, so the end-to-end tests
//!   (`tests/e2e/`, `tests/cluster/`) cannot build kube-apiserver, etcd and kubectl
//!   (`tests/apiserver/build.sh`);
//! - `no_helm`: Go is missing, so the chart tests (`tests/install/helm.rs`) cannot
//!   build helm (`tests/helm/build.sh`);
//! - `no_kubectl`: neither Go (to build kubectl v1.37) nor a `kubectl` on
//!   `PATH`, for the kustomize tests;
//! - `no_corpus`: the real-world manifests beside the checkout
//!   (`../shared/corpus`, or `WINADMIT_CORPUS`) are absent;
//! - `no_chromium`: no headless Chromium on `PATH` for the HTML report test;
//! - `no_registry`: Debian's `docker-registry` (the CNCF distribution
//!   registry) or `htpasswd` is not on `PATH`, for the registry tests
//!   (`tests/webhook/registry.rs`);
//! - `no_image_tools`: Go is missing, so `tests/webhook/image.rs` cannot build crane
//!   and actionlint (`tests/image/build.sh`).
//!
//! Each is checked when the tests are built. Setting the matching
//! `WINADMIT_REQUIRE_*` variable (as `.ci/run` does) turns the check off:
//! the tests then always run, and fail when their input is missing.
//! Changing `PATH`, `WINADMIT_CORPUS` or a `WINADMIT_REQUIRE_*` variable
//! checks again.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=PATH");

    let go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    flag("no_control_plane", "WINADMIT_REQUIRE_APISERVER", !go);
    flag("no_helm", "WINADMIT_REQUIRE_HELM", !go);
    flag("no_image_tools", "WINADMIT_REQUIRE_IMAGE_TOOLS", !go);
    flag(
        "no_kubectl",
        "WINADMIT_REQUIRE_KUBECTL",
        !go && !on_path(&["kubectl"]),
    );
    flag(
        "no_chromium",
        "WINADMIT_REQUIRE_CHROMIUM",
        !on_path(&["chromium", "chromium-browser", "google-chrome"]),
    );
    flag(
        "no_registry",
        "WINADMIT_REQUIRE_REGISTRY",
        !(on_path(&["docker-registry"]) && on_path(&["htpasswd"])),
    );

    println!("cargo::rerun-if-env-changed=WINADMIT_CORPUS");
    let corpus = std::env::var_os("WINADMIT_CORPUS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"),
        PathBuf::from,
    );
    let index = corpus.join("INDEX.tsv");
    if index.is_file() {
        // Removing the corpus later builds the tests again (and they are
        // then ignored); adding it needs `WINADMIT_CORPUS` or a rebuild.
        println!("cargo::rerun-if-changed={}", index.display());
    }
    flag("no_corpus", "WINADMIT_REQUIRE_CORPUS", !index.is_file());
}

/// Declares `cfg(name)` and sets it when `absent`, unless `require` is set.
fn flag(name: &str, require: &str, absent: bool) {
    println!("cargo::rustc-check-cfg=cfg({name})");
    println!("cargo::rerun-if-env-changed={require}");
    if absent && std::env::var_os(require).is_none() {
        println!("cargo::rustc-cfg={name}");
    }
}

/// Whether one of `programs` is an executable file on `PATH`.
fn on_path(programs: &[&str]) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| programs.iter().any(|p| dir.join(p).is_file()))
}
