//! `winadmit manifests --static` and `winadmit admission-policy --static`
//! as a user runs them: what they write into the directory, what a rerun
//! changes, and what they refuse (exit 2, the reason, nothing written).
//! kube-apiserver loading the files: `tests/e2e/e2e_static.rs`.

use crate::binary;

use std::path::Path;

use serde_json::Value;

const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";

fn run(args: &[&str]) -> (i32, String) {
    let out = binary::winadmit(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(dir).unwrap().display().to_string())
        .collect();
    out.sort();
    out
}

fn plugins(dir: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dir.join("admission-configuration.yaml")).unwrap();
    let config: Value = serde_saphyr::from_str(&text).unwrap();
    config["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["configuration"]["staticManifestsDir"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

/// Both commands into one directory: a directory per plugin, one
/// AdmissionConfiguration naming the four; a rerun rewrites nothing that
/// did not change and removes what the command no longer generates.
#[test]
fn both_commands_fill_one_directory_and_a_rerun_replaces_their_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("static");
    let ca = tmp.path().join("ca.crt");
    std::fs::write(&ca, CA).unwrap();
    let d = dir.to_str().unwrap();
    let webhooks = [
        "manifests",
        "--static",
        d,
        "--webhook-url",
        "https://10.96.0.50",
        "--ca-bundle",
        ca.to_str().unwrap(),
        "--static-host-dir",
        "/etc/kubernetes/winadmit",
    ];
    let (code, err) = run(&webhooks);
    assert_eq!(code, 0, "{err}");
    let policies = [
        "admission-policy",
        "--static",
        d,
        "--static-host-dir",
        "/etc/kubernetes/winadmit",
    ];
    let (code, err) = run(&policies);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        files(&dir),
        [
            "admission-configuration.yaml",
            "mutating-policies/winadmit-mutate.static.k8s.io.yaml",
            "mutating-webhooks/winadmit.static.k8s.io.yaml",
            "validating-policies/winadmit-errors.static.k8s.io.yaml",
            "validating-policies/winadmit-gmsa.static.k8s.io.yaml",
            "validating-policies/winadmit-warnings.static.k8s.io.yaml",
            "validating-webhooks/winadmit.static.k8s.io.yaml",
        ]
    );
    let host = |p: &str| format!("/etc/kubernetes/winadmit/{p}");
    assert_eq!(
        plugins(&dir),
        [
            ("MutatingAdmissionWebhook".into(), host("mutating-webhooks")),
            (
                "ValidatingAdmissionWebhook".into(),
                host("validating-webhooks")
            ),
            ("MutatingAdmissionPolicy".into(), host("mutating-policies")),
            (
                "ValidatingAdmissionPolicy".into(),
                host("validating-policies")
            ),
        ]
    );

    // A rerun leaves unchanged files alone (the API server sees no change).
    let errors = dir.join("validating-policies/winadmit-errors.static.k8s.io.yaml");
    let before = std::fs::metadata(&errors).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(run(&policies).0, 0);
    assert_eq!(
        std::fs::metadata(&errors).unwrap().modified().unwrap(),
        before
    );

    // Regenerated without the mutating policy, with a file of its own it
    // no longer makes and a file of someone else's in its directories.
    std::fs::write(dir.join("validating-policies/old.static.k8s.io.yaml"), "x").unwrap();
    std::fs::write(dir.join("validating-policies/notes.txt"), "kept").unwrap();
    let mut no_mutating = policies.to_vec();
    no_mutating.push("--no-mutating");
    let (code, err) = run(&no_mutating);
    assert_eq!(code, 0, "{err}");
    let after = files(&dir);
    assert!(
        !after.iter().any(|f| f.starts_with("mutating-policies/")),
        "{after:?}"
    );
    assert!(!after.iter().any(|f| f.contains("old.static")), "{after:?}");
    assert!(after.iter().any(|f| f.ends_with("notes.txt")), "{after:?}");
    assert!(!after.iter().any(|f| f.contains(".tmp")), "{after:?}");
    assert_eq!(
        plugins(&dir)
            .iter()
            .map(|(p, _)| p.as_str())
            .collect::<Vec<_>>(),
        [
            "MutatingAdmissionWebhook",
            "ValidatingAdmissionWebhook",
            "ValidatingAdmissionPolicy"
        ]
    );
}

/// Every overlay with webhooks gives its registrations in the static form,
/// whatever way the overlay gets its own caBundle; the self-signed one
/// takes the CA of `--certs` when no `--ca-bundle` is given.
#[test]
fn every_overlay_with_webhooks_writes_its_static_registrations() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = tmp.path().join("ca.crt");
    std::fs::write(&ca, CA).unwrap();
    let certs = tmp.path().join("certs");
    let (code, err) = run(&["certs", "--out", certs.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for overlay in [
        "base",
        "cert-manager",
        "self-signed",
        "audit",
        "no-match-conditions",
        "custom-resources",
        "gmsa",
        "one-call",
    ] {
        let dir = tmp.path().join(overlay);
        let d = dir.to_str().unwrap();
        let mut args = vec![
            "manifests",
            "--overlay",
            overlay,
            "--static",
            d,
            "--webhook-url",
            "https://10.0.0.5",
        ];
        if overlay == "self-signed" {
            args.extend(["--certs", certs.to_str().unwrap()]);
        } else {
            args.extend(["--ca-bundle", ca.to_str().unwrap()]);
        }
        let (code, err) = run(&args);
        assert_eq!(code, 0, "{overlay}: {err}");
        let written = files(&dir);
        assert!(
            written
                .iter()
                .any(|f| f.ends_with("webhooks/winadmit.static.k8s.io.yaml")),
            "{overlay}: {written:?}"
        );
    }
    // The admission-policy overlay has no webhook: nothing to write.
    let dir = tmp.path().join("admission-policy");
    let (code, err) = run(&[
        "manifests",
        "--overlay",
        "admission-policy",
        "--static",
        dir.to_str().unwrap(),
        "--webhook-url",
        "https://10.0.0.5",
        "--ca-bundle",
        ca.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nothing to write (no webhook configuration"),
        "{err}"
    );
    assert!(!dir.exists());
}

/// What kube-apiserver would not load, or could not call, is refused
/// before anything is written.
#[test]
fn refusals_exit_2_with_the_reason_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("static");
    let d = dir.to_str().unwrap();
    let ca = tmp.path().join("ca.crt");
    std::fs::write(&ca, CA).unwrap();
    let not_ca = tmp.path().join("not-ca.crt");
    std::fs::write(&not_ca, "hello").unwrap();
    let c = ca.to_str().unwrap();
    for (args, reason) in [
        (
            vec!["manifests", "--static", d, "--ca-bundle", c],
            "--static needs --webhook-url",
        ),
        (
            vec![
                "manifests",
                "--static",
                d,
                "--webhook-url",
                "https://10.0.0.1",
            ],
            "--static needs --webhook-url (where kube-apiserver calls winadmit) and --ca-bundle",
        ),
        (
            vec![
                "manifests",
                "--static",
                d,
                "--webhook-url",
                "http://10.0.0.1",
                "--ca-bundle",
                c,
            ],
            "the scheme must be https",
        ),
        (
            vec![
                "manifests",
                "--static",
                d,
                "--webhook-url",
                "https://10.0.0.1",
                "--ca-bundle",
                not_ca.to_str().unwrap(),
            ],
            "--ca-bundle: no PEM certificate",
        ),
        (
            vec![
                "manifests",
                "--static",
                d,
                "--webhook-url",
                "https://10.0.0.1",
                "--ca-bundle",
                c,
                "--exempt-namespace",
                "Calico_System",
            ],
            "--exempt-namespace \"Calico_System\": not a namespace name",
        ),
        (
            vec![
                "admission-policy",
                "--static",
                d,
                "--static-host-dir",
                "etc/winadmit",
            ],
            "kube-apiserver needs an absolute path",
        ),
    ] {
        let (code, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(reason), "{args:?}: {err}");
        assert!(!dir.exists(), "{args:?} wrote {:?}", files(&dir));
    }
    // --webhook-url without --static is a usage error.
    let (code, err) = run(&["manifests", "--webhook-url", "https://10.0.0.1"]);
    assert_eq!(code, 2, "{err}");
}
