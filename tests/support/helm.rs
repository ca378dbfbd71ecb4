//! helm v3.22 for the chart tests (`tests/install/helm.rs`), built from the Go
//! module in `tests/helm/` into `target/helm/bin` (`tests/helm/build.sh`;
//! stamped, so it rebuilds only when the module or the script change).
//!
//! `cargo test` does not build it: without it in `target/helm/bin` the chart
//! tests are ignored, with the command that builds it (`build.rs` sets
//! `cfg(no_helm)` and each test carries `#[cfg_attr(no_helm, ignore =
//! "...")]`). With `WINADMIT_REQUIRE_HELM` set (`.ci/run` builds helm and
//! sets it), they run, and a missing helm fails them.

#![allow(dead_code)] // each test target uses a part

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn module() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/helm")
}

/// `target/helm/bin`, next to cargo's own output and the control plane's.
fn bin_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    target.join("helm/bin")
}

/// helm, built by `tests/helm/build.sh`.
///
/// # Panics
/// It is not built (the tests that get here were built with it in place,
/// or require helm).
pub fn helm(test: &str) -> Helm {
    let bin = bin_dir().join("helm");
    assert!(
        bin.is_file(),
        "{test}: helm is not built in {}: run tests/helm/build.sh (Go 1.26; about 6 minutes cold)",
        bin_dir().display()
    );
    Helm::new(&bin)
}

/// The chart in this repository.
pub fn chart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/winadmit")
}

/// helm with its own cache, configuration and data directories (nothing
/// read from or written to the user's), and optionally a kubeconfig.
pub struct Helm {
    pub bin: PathBuf,
    home: tempfile::TempDir,
    kubeconfig: Option<PathBuf>,
}

impl Helm {
    fn new(bin: &Path) -> Self {
        Self {
            bin: bin.to_path_buf(),
            home: tempfile::tempdir().unwrap(),
            kubeconfig: None,
        }
    }

    /// The same helm, talking to the cluster of `kubeconfig`.
    #[must_use]
    pub fn with_kubeconfig(mut self, kubeconfig: &Path) -> Self {
        self.kubeconfig = Some(kubeconfig.to_path_buf());
        self
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        let home = self.home.path();
        c.env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env_remove("HELM_NAMESPACE")
            .env_remove("HELM_KUBECONTEXT")
            .stdin(Stdio::null());
        match &self.kubeconfig {
            Some(k) => c.env("KUBECONFIG", k),
            None => c.env("KUBECONFIG", home.join("no-cluster")),
        };
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// helm that must succeed; its stdout.
    ///
    /// # Panics
    /// helm fails: the message has its stderr.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "helm {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}
