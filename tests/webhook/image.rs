//! The winadmit image, built without a Docker engine (`image/build.sh`:
//! the `dist` binary, the libraries it links and Debian's CA certificates
//! in one layer on an empty base, assembled and pushed with crane from
//! `tests/image/`), pushed to Debian's `docker-registry` and checked there:
//!
//! - its config: user 65532, the entrypoint, the OCI labels, no shell;
//! - its size;
//! - its own root filesystem, exported from the registry by crane and
//!   unpacked with nothing from the host, runs `winadmit serve` (in a user
//!   namespace with that folder as `/`) and answers an AdmissionReview.
//!
//! The release workflow (`.github/workflows/release.yml`) cannot run here;
//! actionlint checks it.
//!
//! The image test builds the `dist` profile (about 10 minutes on 2 cores),
//! so it is ignored by `cargo test` and by `.ci/run`; run it with
//! `cargo test --test webhook -- --ignored image::`. crane and actionlint
//! are built from Go modules by `tests/image/build.sh`, never by the tests:
//! without them the actionlint test is ignored with that command
//! (build.rs's `no_image_tools`), and runs and fails instead when
//! `WINADMIT_REQUIRE_IMAGE_TOOLS` is set.

use crate::registry_support as registry;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// crane and actionlint, built by tests/image/build.sh into target/image/bin
/// (or `$CARGO_TARGET_DIR/image/bin`).
fn tools() -> PathBuf {
    let out = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root().join("target"), PathBuf::from)
        .join("image/bin");
    for tool in ["crane", "actionlint"] {
        assert!(
            out.join(tool).is_file(),
            "{tool} is not built in {}: run tests/image/build.sh",
            out.display()
        );
    }
    out
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[cfg_attr(
    no_image_tools,
    ignore = "needs actionlint, which is not built: run tests/image/build.sh"
)]
fn release_workflow_passes_actionlint() {
    let bin = tools();
    let out = Command::new(bin.join("actionlint"))
        .args(["-no-color", ".github/workflows/release.yml"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "actionlint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The image the chart and manifests name by default is the one
/// image/build.sh names by default.
#[test]
fn chart_and_manifests_name_the_built_image() {
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let version = cargo
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap();
    let script = std::fs::read_to_string(root().join("image/build.sh")).unwrap();
    assert!(script.contains("\nofficial=ghcr.io/winadmit/winadmit\n"));
    let values = std::fs::read_to_string(root().join("charts/winadmit/values.yaml")).unwrap();
    assert!(
        values.contains("repository: ghcr.io/winadmit/winadmit"),
        "values.yaml"
    );
    let chart = std::fs::read_to_string(root().join("charts/winadmit/Chart.yaml")).unwrap();
    assert!(
        chart.contains(&format!("appVersion: \"{version}\"")),
        "Chart.yaml"
    );
    let deployment =
        std::fs::read_to_string(root().join("manifests/base/deployment.yaml")).unwrap();
    assert!(
        deployment.contains(&format!("image: ghcr.io/winadmit/winadmit:{version}")),
        "manifests/base/deployment.yaml"
    );
}

/// image/build.sh run with `args` and a work folder of its own, which it
/// must not create when it refuses: (exit code, stderr, whether it started).
fn build_script(args: &[&str]) -> (Option<i32>, String, bool) {
    let scratch = tempfile::tempdir().unwrap();
    let out_dir = scratch.path().join("image");
    let out = Command::new(root().join("image/build.sh"))
        .args(args)
        .env("WINADMIT_IMAGE_OUT", &out_dir)
        // A crane that fails: nothing can be pushed even if the guard fails.
        .env("CRANE", "/bin/false")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.stdout.is_empty(), "{args:?}: stdout {:?}", out.stdout);
    (
        out.status.code(),
        String::from_utf8(out.stderr).unwrap(),
        out_dir.exists(),
    )
}

/// With no argument, image/build.sh prints its usage and exits 2 before
/// building or pushing anything.
#[test]
fn image_build_without_a_reference_prints_usage() {
    for args in [&[][..], &[""][..], &["--release"][..], &["a", "b"][..]] {
        let (code, stderr, started) = build_script(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("usage: image/build.sh REF\n"),
            "{args:?}: {stderr}"
        );
        assert!(!started, "{args:?}: it created its work folder");
    }
}

/// The official repository is refused without `--release`, whatever the
/// tag, digest or case, before anything is built; `--release` is passed by
/// the release workflow and by nothing else in the repository.
#[test]
fn image_build_refuses_the_official_image_without_release() {
    for reference in [
        "ghcr.io/winadmit/winadmit",
        "ghcr.io/winadmit/winadmit:0.1.0",
        "GHCR.io/WinAdmit/winadmit:latest",
        "ghcr.io/winadmit/winadmit@sha256:0000000000000000000000000000000000000000000000000000000000000000",
    ] {
        let (code, stderr, started) = build_script(&[reference]);
        assert_eq!(code, Some(2), "{reference}: {stderr}");
        assert!(
            stderr.contains(&format!("refusing to write {reference}"))
                && stderr.contains(".github/workflows/release.yml"),
            "{reference}: {stderr}"
        );
        assert!(!started, "{reference}: it created its work folder");
    }
    let workflow = std::fs::read_to_string(root().join(".github/workflows/release.yml")).unwrap();
    assert!(
        workflow.contains(r#"image/build.sh --release "$REGISTRY/winadmit:$VERSION""#),
        "the release workflow does not pass --release"
    );
    let files = Command::new("git")
        .args([
            "grep",
            "-l",
            "-F",
            "build.sh --release",
            "--",
            ".",
            ":!tests/webhook/image.rs",
            ":!image/build.sh",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&files.stdout),
        ".github/workflows/release.yml\n",
        "only the release workflow passes --release"
    );
}

/// A reference elsewhere passes the guard: the script goes on to its
/// work folder (here a file, so that it stops there, before any build).
#[test]
fn image_build_accepts_another_registry() {
    let scratch = tempfile::tempdir().unwrap();
    let blocker = scratch.path().join("image");
    std::fs::write(&blocker, "not a folder").unwrap();
    let out = Command::new(root().join("image/build.sh"))
        .arg("registry.example.com/platform/winadmit:0.1.0")
        .env("WINADMIT_IMAGE_OUT", &blocker)
        .env("CRANE", "/bin/false")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("mkdir") && !stderr.contains("usage:") && !stderr.contains("refusing"),
        "{stderr}"
    );
}

#[test]
#[ignore = "builds the dist binary (about 10 minutes on 2 cores): `cargo test --test webhook -- --ignored image::`"]
fn image_builds_pushes_and_its_rootfs_serves_a_review() {
    let bin = tools();
    let crane = bin.join("crane");
    let registry = registry::Registry::start(false);
    let reference = format!("{}/winadmit:test", registry.host);
    let work = tempfile::tempdir().unwrap();
    let built = run(Command::new(root().join("image/build.sh"))
        .arg(&reference)
        .env("CRANE", &crane)
        .stderr(Stdio::inherit()));
    assert!(
        built.trim().starts_with(&format!("{reference}@sha256:")),
        "{built}"
    );

    // The config, from the registry.
    let config: Value =
        serde_json::from_str(&run(Command::new(&crane).args(["config", &reference]))).unwrap();
    let c = &config["config"];
    assert_eq!(c["User"], "65532:65532", "{config}");
    assert_eq!(
        c["Entrypoint"],
        serde_json::json!(["/usr/local/bin/winadmit"])
    );
    assert_eq!(c["Cmd"], serde_json::json!(["serve"]));
    assert_eq!(c["Labels"]["org.opencontainers.image.title"], "winadmit");
    assert_eq!(
        c["Labels"]["org.opencontainers.image.source"],
        "https://github.com/winadmit/winadmit"
    );
    assert!(
        c["Labels"]["io.winadmit.debian-packages"]
            .as_str()
            .is_some_and(|p| p.contains("libc6=") && p.contains("ca-certificates=")),
        "{config}"
    );
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");

    // Its size: one layer, the binary most of it.
    let manifest: Value =
        serde_json::from_str(&run(Command::new(&crane).args(["manifest", &reference]))).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    let size = layers[0]["size"].as_u64().unwrap();
    eprintln!("image layer: {size} bytes compressed");
    assert!(
        (1_000_000..40_000_000).contains(&size),
        "layer of {size} bytes"
    );

    // Its root filesystem, from the registry, unpacked with nothing else.
    let rootfs = work.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    let tar = work.path().join("fs.tar");
    run(Command::new(&crane).args(["export", &reference]).arg(&tar));
    run(Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .arg("-xf")
        .arg(&tar));
    for shell in ["bin/sh", "bin/bash", "usr/bin/sh", "bin/busybox"] {
        assert!(!rootfs.join(shell).exists(), "the image has {shell}");
    }
    assert!(rootfs.join("usr/local/bin/winadmit").is_file());
    serves_a_review(&rootfs);
}

/// `winadmit serve --self-signed` with `rootfs` as `/` in a user namespace
/// (uid 0 there is this user), answering /validate.
fn serves_a_review(rootfs: &Path) {
    let port = registry::free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new("unshare")
        .arg("-r")
        .arg(format!("--root={}", rootfs.display()))
        .args([
            "/usr/local/bin/winadmit",
            "serve",
            "--self-signed",
            "--self-signed-dir",
            "/tmp/ca",
            "--listen",
            &listen,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("runs unshare (util-linux)");
    let ca = rootfs.join("tmp/ca/ca.pem");
    let give_up = Instant::now() + Duration::from_secs(60);
    while !(ca.is_file() && std::net::TcpStream::connect(&listen).is_ok()) {
        assert!(child.try_wait().unwrap().is_none(), "serve exited");
        assert!(Instant::now() < give_up, "serve did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    let review = root().join("tests/fixtures/admission/pod-windows-create.json");
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--cacert"])
        .arg(&ca)
        .args(["-H", "Content-Type: application/json", "--data-binary"])
        .arg(format!("@{}", review.display()))
        .arg(format!("https://localhost:{port}/validate"))
        .output()
        .expect("runs curl");
    child.kill().ok();
    child.wait().ok();
    assert!(out.status.success(), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["kind"], "AdmissionReview", "{answer}");
    assert!(answer["response"]["allowed"].is_boolean(), "{answer}");
    assert!(answer["response"]["uid"].is_string(), "{answer}");
}
