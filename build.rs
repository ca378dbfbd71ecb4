//! Tells the tests which external inputs they can use, so that a test
//! without its input is compiled as *ignored*, with the reason and the
//! command that provides it, and never shows as passed.
//!
//! The Go-built tools are never built by `cargo test`: a test that needs
//! one runs when it is already built under `target/` (or
//! `$CARGO_TARGET_DIR`), and is otherwise ignored with the command that
//! builds it (`.ci/run` builds them all first):
//!
//! - `no_control_plane`: kube-apiserver, etcd, kubectl, kube-scheduler and
//!   kube-controller-manager v1.37 are not in `target/controlplane/bin`
//!   (`tests/apiserver/build.sh`), for the end-to-end tests (`tests/e2e/`,
//!   `tests/cluster/`);
//! - `no_kwok`: KWOK is not in `target/controlplane/kwok`
//!   (`tests/kwok/build.sh`), for the scheduling tests;
//! - `no_apiserver_1_34`, `no_apiserver_1_35`, `no_apiserver_1_36`: the
//!   older kube-apiserver of the version matrix is not in
//!   `target/controlplane/v1.NN/bin` (`tests/apiserver/v1.NN/build.sh`);
//! - `no_helm`: helm is not in `target/helm/bin` (`tests/helm/build.sh`),
//!   for the chart tests;
//! - `no_image_tools`: crane and actionlint are not in `target/image/bin`
//!   (`tests/image/build.sh`);
//! - `no_promtool`: promtool is not in `target/promtool/bin`
//!   (`tests/promtool/build.sh`), for the chart's alerting rules evaluated
//!   by `promtool test rules`;
//! - `no_kubectl`: kubectl v1.37 is not built and no `kubectl` is on
//!   `PATH`, for the kustomize tests;
//! - `no_crd_modules`: Go is missing, so `tests/report_crds/fetch.sh`
//!   cannot download the report CRDs' modules;
//! - `no_chart_modules`: Go is missing, so `tests/charts/fetch.sh` cannot
//!   download the modules of the real charts and overlays lint is tested on;
//!
//! pre-commit, installed from PyPI rather than built:
//!
//! - `no_precommit`: pre-commit is not in `target/precommit/venv/bin`
//!   (`tests/precommit/install.sh`), for the test that runs the hook of
//!   `.pre-commit-hooks.yaml` with `pre-commit try-repo`;
//!
//! and the inputs found on the machine:
//!
//! - `no_corpus`: the real-world manifests beside the checkout
//!   (`../shared/corpus`, or `WINADMIT_CORPUS`) are absent;
//! - `no_chromium`: no headless Chromium on `PATH` for the HTML report test;
//! - `no_registry`: Debian's `docker-registry` (the CNCF distribution
//!   registry) or `htpasswd` is not on `PATH`, for the registry tests
//!   (`tests/webhook/registry.rs`).
//!
//! Each is checked when the tests are built, and again when a tool's
//! folder changes (building a tool builds the tests that need it again).
//! Setting the matching `WINADMIT_REQUIRE_*` variable (as `.ci/run` does)
//! turns the check off: the tests then always run, and fail when their
//! input is missing. Changing `PATH`, `CARGO_TARGET_DIR`,
//! `WINADMIT_CORPUS` or a `WINADMIT_REQUIRE_*` variable checks again.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_DIR");

    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| manifest.join("target"), |t| manifest.join(t));
    let controlplane = target.join("controlplane/bin");
    let control_plane = built(
        &controlplane,
        &[
            "kube-apiserver",
            "etcd",
            "kubectl",
            "kube-scheduler",
            "kube-controller-manager",
        ],
    );
    flag(
        "no_control_plane",
        "WINADMIT_REQUIRE_APISERVER",
        !control_plane,
    );
    flag(
        "no_kwok",
        "WINADMIT_REQUIRE_APISERVER",
        !built(&target.join("controlplane/kwok"), &["kwok", "stages.yaml"]),
    );
    for minor in [34, 35, 36] {
        flag(
            &format!("no_apiserver_1_{minor}"),
            "WINADMIT_REQUIRE_APISERVER",
            !built(
                &target.join(format!("controlplane/v1.{minor}/bin")),
                &["kube-apiserver"],
            ),
        );
    }
    flag(
        "no_helm",
        "WINADMIT_REQUIRE_HELM",
        !built(&target.join("helm/bin"), &["helm"]),
    );
    flag(
        "no_precommit",
        "WINADMIT_REQUIRE_PRECOMMIT",
        !built(&target.join("precommit/venv/bin"), &["pre-commit"]),
    );
    flag(
        "no_image_tools",
        "WINADMIT_REQUIRE_IMAGE_TOOLS",
        !built(&target.join("image/bin"), &["crane", "actionlint"]),
    );
    flag(
        "no_promtool",
        "WINADMIT_REQUIRE_PROMTOOL",
        !built(&target.join("promtool/bin"), &["promtool"]),
    );
    flag(
        "no_kubectl",
        "WINADMIT_REQUIRE_KUBECTL",
        !controlplane.join("kubectl").is_file() && !on_path(&["kubectl"]),
    );
    let go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    flag("no_crd_modules", "WINADMIT_REQUIRE_APISERVER", !go);
    flag("no_chart_modules", "WINADMIT_REQUIRE_HELM", !go);

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

/// Whether every one of `files` is in `dir`. `dir` is created when
/// missing (the tools' build scripts create it too) so that cargo can
/// watch it: a tool built later into it runs this script again.
fn built(dir: &Path, files: &[&str]) -> bool {
    // A folder that cannot be created is reported by the tool's build
    // script; this one only says the tool is not there.
    let _ = std::fs::create_dir_all(dir);
    println!("cargo::rerun-if-changed={}", dir.display());
    files.iter().all(|f| dir.join(f).is_file())
}

/// Whether one of `programs` is an executable file on `PATH`.
fn on_path(programs: &[&str]) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| programs.iter().any(|p| dir.join(p).is_file()))
}
