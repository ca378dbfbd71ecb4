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
//! `cargo test --test webhook -- --ignored image::`. Without Go (crane and actionlint are built from Go modules)
//! both are compiled as ignored (build.rs's `no_image_tools`), and run and
//! fail instead when `WINADMIT_REQUIRE_IMAGE_TOOLS` is set.

use crate::registry_support as registry;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// crane and actionlint, built once into target/image/bin.
fn tools() -> PathBuf {
    let out = root().join("target/image/bin");
    let status = Command::new(root().join("tests/image/build.sh"))
        .arg(&out)
        .status()
        .expect("runs tests/image/build.sh");
    assert!(status.success(), "tests/image/build.sh failed: {status}");
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
    ignore = "needs Go to build actionlint (tests/image/build.sh)"
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
    assert!(script.contains("ghcr.io/winadmit/winadmit:$version"));
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
