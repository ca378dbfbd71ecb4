//! `winadmit lint`, `rules` and `explain` as a user runs them: the real
//! binary, real files, exit code + stdout + stderr snapshotted together.

use crate::binary::{winadmit, with_stdin};
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Exit code, stdout and stderr in one snapshot.
fn transcript(out: &Output) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const BAD: &str = "tests/fixtures/lint/windows-bad.yaml";
const CLEAN: &str = "tests/fixtures/lint/clean.yaml";

#[test]
fn text_output_for_a_bad_manifest() {
    insta::assert_snapshot!(transcript(&winadmit(&["lint", BAD])));
}

#[test]
fn json_output_is_the_contract() {
    let out = winadmit(&["lint", "--format", "json", BAD, "tests/fixtures/lint/dir"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for f in v["findings"].as_array().unwrap() {
        for key in [
            "file",
            "line",
            "column",
            "kind",
            "namespace",
            "name",
            "rule",
            "severity",
            "field",
            "message",
        ] {
            assert!(f.get(key).is_some(), "finding lacks {key}: {f}");
        }
        assert!(matches!(
            f["severity"].as_str(),
            Some("error" | "warning" | "info")
        ));
    }
    assert!(v["summary"]["errors"].as_u64().unwrap() > 0);
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));
}

#[test]
fn sarif_output() {
    let out = winadmit(&["lint", "--format", "sarif", BAD]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let rules = v["runs"][0]["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), winadmit::decision::rules::ALL.len());
    for r in v["runs"][0]["results"].as_array().unwrap() {
        let i = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[i]["id"], r["ruleId"]);
        // Relative to the working directory, which %SRCROOT% names.
        let artifact = &r["locations"][0]["physicalLocation"]["artifactLocation"];
        assert_eq!(artifact["uriBaseId"], "%SRCROOT%");
    }
    let mut v = v;
    let root = &mut v["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"];
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(
        root.as_str().unwrap().trim_end_matches('/'),
        format!("file://{}", cwd.display()),
    );
    // The working directory differs from machine to machine.
    *root = "file:///SRCROOT/".into();
    // The driver lists every rule of the catalogue, in its order (checked
    // here); the snapshot keeps the rules the results name, so adding a rule
    // does not change it, and each result's ruleIndex points into that list.
    let ids: Vec<&str> = winadmit::decision::rules::ALL
        .iter()
        .map(|r| r.info.id)
        .collect();
    let driver = &mut v["runs"][0]["tool"]["driver"]["rules"];
    let listed: Vec<&str> = driver
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ids);
    let named: std::collections::BTreeSet<String> = v["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ruleId"].as_str().unwrap().to_owned())
        .collect();
    let driver = &mut v["runs"][0]["tool"]["driver"]["rules"];
    let kept: Vec<serde_json::Value> = driver
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| named.contains(r["id"].as_str().unwrap()))
        .cloned()
        .collect();
    let index: Vec<String> = kept
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    *driver = serde_json::Value::Array(kept);
    for r in v["runs"][0]["results"].as_array_mut().unwrap() {
        let id = r["ruleId"].as_str().unwrap();
        r["ruleIndex"] = index.iter().position(|i| i == id).unwrap().into();
    }
    insta::assert_snapshot!(serde_json::to_string_pretty(&v).unwrap() + "\n");
}

#[test]
fn junit_output() {
    insta::assert_snapshot!(transcript(&winadmit(&[
        "lint", "--format", "junit", BAD, CLEAN
    ])));
}

#[test]
fn exit_codes() {
    assert_eq!(winadmit(&["lint", CLEAN]).status.code(), Some(0));
    assert_eq!(winadmit(&["lint", BAD]).status.code(), Some(1));
    let warn = "tests/fixtures/lint/warnings-only.yaml";
    assert_eq!(winadmit(&["lint", warn]).status.code(), Some(0));
    assert_eq!(
        winadmit(&["lint", "--fail-on", "warning", warn])
            .status
            .code(),
        Some(1)
    );
}

/// `--fail-on never` (for `report ... | kubectl apply -f -` under
/// `set -o pipefail`) exits 0 on error findings, which are still all
/// written; an input problem is still exit 2, for `lint` and `report`.
#[test]
fn fail_on_never_still_lists_errors_and_exits_2_on_bad_input() {
    for command in [&["lint"][..], &["report", "--from-file"][..]] {
        let run = |extra: &[&str], file: &str| {
            let mut args = command.to_vec();
            args.push(file);
            args.extend_from_slice(extra);
            winadmit(&args)
        };
        let failing = run(&["--format", "json"], BAD);
        assert_eq!(failing.status.code(), Some(1), "{command:?}");
        let never = run(&["--format", "json", "--fail-on", "never"], BAD);
        assert_eq!(
            never.status.code(),
            Some(0),
            "{command:?}: {}",
            transcript(&never)
        );
        assert_eq!(
            never.stdout, failing.stdout,
            "{command:?}: --fail-on never changed the output"
        );
        let broken = run(&["--fail-on", "never"], "tests/fixtures/lint/broken.yaml");
        assert_eq!(
            broken.status.code(),
            Some(2),
            "{command:?}: {}",
            transcript(&broken)
        );
    }
    let piped = winadmit(&[
        "report",
        "--from-file",
        BAD,
        "--format",
        "policyreport",
        "--fail-on",
        "never",
    ]);
    assert_eq!(piped.status.code(), Some(0), "{}", transcript(&piped));
    assert!(String::from_utf8_lossy(&piped.stdout).contains("kind: PolicyReport"));
}

#[test]
fn bad_input_is_exit_2_and_the_rest_is_still_linted() {
    let out = winadmit(&[
        "lint",
        "tests/fixtures/lint/broken.yaml",
        BAD,
        "tests/fixtures/lint/missing.yaml",
    ]);
    insta::assert_snapshot!(transcript(&out));
}

#[test]
fn directories_are_walked_for_manifests_only() {
    let out = winadmit(&["lint", "tests/fixtures/lint/dir"]);
    insta::assert_snapshot!(transcript(&out));
}

/// A directory with no manifest in it (empty, or only other files) is a
/// wrong path, not a clean run: exit 2 naming it, before anything is
/// linted, also when another path given is right.
#[test]
fn a_directory_without_manifests_is_exit_2_naming_it() {
    let empty = tempfile::tempdir().unwrap();
    let no_yaml = tempfile::tempdir().unwrap();
    std::fs::write(no_yaml.path().join("README.md"), "# deploy\n").unwrap();
    std::fs::create_dir(no_yaml.path().join("charts")).unwrap();
    std::fs::write(no_yaml.path().join("charts/values.txt"), "a: b\n").unwrap();
    for dir in [empty.path(), no_yaml.path()] {
        let dir = dir.to_str().unwrap();
        for args in [
            vec!["lint", dir],
            vec!["lint", "tests/fixtures/lint/dir", dir],
        ] {
            let out = winadmit(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", transcript(&out));
            assert!(out.stdout.is_empty(), "{args:?}: {}", transcript(&out));
            assert_eq!(
                String::from_utf8_lossy(&out.stderr),
                format!(
                    "winadmit: {dir}: no .yaml, .yml or .json file in this directory or below it: give the directory or files that hold the manifests\n"
                ),
                "{args:?}"
            );
        }
    }
    // One manifest deep below is enough.
    std::fs::create_dir_all(no_yaml.path().join("charts/a/b")).unwrap();
    std::fs::copy(CLEAN, no_yaml.path().join("charts/a/b/pod.yml")).unwrap();
    let out = winadmit(&["lint", no_yaml.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
}

#[test]
fn stdin_helm_style_input() {
    let helm = "---\n# Source: chart/templates/pod.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  hostNetwork: true\n  containers:\n  - name: c\n    image: x\n";
    let out = with_stdin(&["lint", "-"], helm);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("<stdin>:10:3: error[WIN-HOSTNETWORK] spec.hostNetwork:"),
        "{text}"
    );
}

#[test]
fn broken_policy_is_exit_2_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "rules:\n  WIN-SUBPATH: warning\nexemptionz: {}\n").unwrap();
    let out = winadmit(&["lint", "--policy", policy.to_str().unwrap(), CLEAN]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("policy.yaml") && err.contains("exemptionz"),
        "{err}"
    );
    std::fs::write(&policy, "rules:\n  WIN-SUBPAHT: warning\n").unwrap();
    let err = String::from_utf8_lossy(
        &winadmit(&["lint", "--policy", policy.to_str().unwrap(), CLEAN]).stderr,
    )
    .into_owned();
    assert!(err.contains("WIN-SUBPAHT"), "{err}");
}

#[test]
fn policy_relaxes_and_versions_select() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.yaml");
    std::fs::write(
        &policy,
        "rules:\n  WIN-HOSTNETWORK: warning\n  WIN-PRIVILEGED: off\n  WIN-CAPABILITIES: off\n",
    )
    .unwrap();
    let out = winadmit(&["lint", "--policy", policy.to_str().unwrap(), BAD]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        winadmit(&["lint", "--kubernetes-version", "1.x", BAD])
            .status
            .code()
            == Some(2)
    );
    // Versions outside what winadmit knows are refused with the range.
    let out = winadmit(&["lint", "--kubernetes-version", "2.0", BAD]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1.14 to 1.37"), "{err}");
}

#[test]
fn the_target_cluster_decides_version_dependent_verdicts() {
    // One subPath: an error on Docker (1.19), nothing with containerd.
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: mcr.microsoft.com/windows/nanoserver:ltsc2022\n    resources:\n      limits:\n        memory: 1Gi\n    volumeMounts:\n    - name: v\n      mountPath: C:\\\\cfg\\\\a.json\n      subPath: a.json\n  volumes:\n  - name: v\n    configMap:\n      name: cfg\n";
    let at = |args: &[&str]| {
        let mut all = vec!["lint"];
        all.extend_from_slice(args);
        all.push("-");
        with_stdin(&all, pod)
    };
    assert_eq!(at(&[]).status.code(), Some(0));
    let docker = at(&["--kubernetes-version", "1.19"]);
    assert_eq!(docker.status.code(), Some(1));
    let text = String::from_utf8_lossy(&docker.stdout);
    assert!(
        text.contains("error[WIN-SUBPATH]") && text.contains("container runtime docker"),
        "the finding names the fact: {text}"
    );
    // cri-dockerd users say docker at any version.
    let cri = at(&["--container-runtime", "docker"]);
    assert_eq!(cri.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&cri.stdout).contains("a command-line flag"));
    // The policy's cluster block says the same; a flag wins over it.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.yaml");
    std::fs::write(&policy, "cluster:\n  containerRuntime: docker\n").unwrap();
    let p = policy.to_str().unwrap();
    assert_eq!(at(&["--policy", p]).status.code(), Some(1));
    assert_eq!(
        at(&["--policy", p, "--container-runtime", "containerd"])
            .status
            .code(),
        Some(0)
    );
    // The retired profile key still loads, with a notice on stderr.
    std::fs::write(&policy, "profile: containerd\n").unwrap();
    let out = at(&["--policy", p]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`profile` is retired"));
}

#[test]
fn strict_raises_intent_lost_warnings() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: mcr.microsoft.com/windows/nanoserver:ltsc2022\n    securityContext:\n      readOnlyRootFilesystem: true\n    resources:\n      limits:\n        memory: 1Gi\n";
    assert_eq!(with_stdin(&["lint", "-"], pod).status.code(), Some(0));
    let strict = with_stdin(&["lint", "--strict", "-"], pod);
    assert_eq!(strict.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&strict.stdout).contains("error[WIN-READONLY-ROOTFS]"));
}

#[test]
fn symlink_loops_and_binary_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
    std::fs::write(dir.path().join("bin.yaml"), b"\x00\x01\x02").unwrap();
    std::fs::write(dir.path().join("bad-utf8.yaml"), b"a: \xff\n").unwrap();
    let out = winadmit(&["lint", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("symbolic link loop"), "{text}");
    assert!(text.contains("binary file"), "{text}");
    assert!(text.contains("invalid UTF-8"), "{text}");
}

#[test]
fn hostile_yaml_terminates_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let file = dir.path().join("bomb.yaml");
    std::fs::write(&file, bomb).unwrap();
    let deep = dir.path().join("deep.yaml");
    std::fs::write(
        &deep,
        format!("a: {}1{}\n", "[".repeat(100_000), "]".repeat(100_000)),
    )
    .unwrap();
    let huge = dir.path().join("huge.yaml");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(40 * 1024 * 1024).unwrap();
    let out = winadmit(&[
        "lint",
        file.to_str().unwrap(),
        deep.to_str().unwrap(),
        huge.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches(": input error: ").count(), 3, "{text}");
    assert!(text.contains("safety budget"), "{text}");
    assert!(text.contains("limit for manifests"), "{text}");
}

/// Runs `winadmit args` and fails the test if it takes longer than `limit`.
fn winadmit_within(args: &[&str], limit: std::time::Duration) -> Output {
    let start = std::time::Instant::now();
    let out = winadmit(args);
    assert!(
        start.elapsed() < limit,
        "winadmit {args:?} took {:?}",
        start.elapsed()
    );
    out
}

#[test]
fn hundred_megabyte_files_devices_and_fifos_are_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    // 100 MB of real YAML-looking text, not a sparse file: the size check
    // must not need to read it.
    let big = dir.path().join("big.yaml");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        let line = format!("# {}\n", "x".repeat(1021));
        for _ in 0..100 * 1024 {
            f.write_all(line.as_bytes()).unwrap();
        }
    }
    let out = winadmit_within(
        &["lint", big.to_str().unwrap(), "/dev/zero"],
        std::time::Duration::from_secs(20),
    );
    std::fs::remove_file(&big).unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("big.yaml: input error: file is 100 MiB, over the 32 MiB limit"),
        "{text}"
    );
    // A device reports length 0 and never ends: the read is bounded.
    assert!(
        text.contains("/dev/zero: input error: file is over the 32 MiB limit"),
        "{text}"
    );

    // A FIFO (`lint <(helm template .)`) is read like a file.
    let fifo = dir.path().join("fifo.yaml");
    let ok = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                std::fs::write(fifo, std::fs::read(CLEAN_PATH).unwrap()).unwrap();
            })
        };
        let out = winadmit_within(
            &["lint", fifo.to_str().unwrap()],
            std::time::Duration::from_secs(20),
        );
        writer.join().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    }
}

const CLEAN_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/lint/clean.yaml"
);

#[test]
fn hundred_megabytes_on_stdin_is_refused_quickly() {
    let start = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(["lint", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'a'; 1024 * 1024];
        for _ in 0..100 {
            // The reader stops at the limit and exits: a broken pipe is expected.
            if stdin.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("<stdin>: input error:") && text.contains("limit for manifests"),
        "{text}"
    );
}

#[test]
fn unreadable_and_missing_files_are_clear_errors() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let locked = dir.path().join("locked.yaml");
    std::fs::copy(CLEAN_PATH, &locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let dangling = dir.path().join("dangling.yaml");
    std::os::unix::fs::symlink(dir.path().join("nowhere.yaml"), &dangling).unwrap();
    // Root (CAP_DAC_OVERRIDE, as in many CI containers) reads mode-000
    // files anyway; then the honest expectation is that it is linted.
    let privileged = std::fs::read(&locked).is_ok();
    let out = winadmit_within(
        &["lint", locked.to_str().unwrap(), dangling.to_str().unwrap()],
        std::time::Duration::from_secs(20),
    );
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("dangling.yaml: input error: cannot read: No such file or directory"),
        "{text}"
    );
    if privileged {
        eprintln!(
            "running with CAP_DAC_OVERRIDE (root): mode 000 does not stop reads; checking it is linted"
        );
        assert!(!text.contains("locked.yaml: input error"), "{text}");
    } else {
        assert!(
            text.contains("locked.yaml: input error: cannot read: Permission denied"),
            "{text}"
        );
    }
}

#[test]
fn rules_and_explain() {
    let out = winadmit(&["rules"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), winadmit::decision::rules::ALL.len());
    let json: serde_json::Value =
        serde_json::from_slice(&winadmit(&["rules", "--format", "json"]).stdout).unwrap();
    assert_eq!(
        json.as_array().unwrap().len(),
        winadmit::decision::rules::ALL.len()
    );
    insta::assert_snapshot!(transcript(&winadmit(&["explain", "win-subpath"])));
    let unknown = winadmit(&["explain", "WIN-NOPE"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("winadmit rules"));
}

/// `rules` keeps its columns aligned for the longest id and calls a rule
/// that reports nothing at the default target "silent", as the README does.
#[test]
fn rules_columns_align_and_say_silent() {
    let text = String::from_utf8(winadmit(&["rules"]).stdout).unwrap();
    let starts: std::collections::BTreeSet<usize> = text
        .lines()
        .map(|l| l.find(' ').unwrap() + l[l.find(' ').unwrap()..].find(|c| c != ' ').unwrap())
        .collect();
    assert_eq!(starts.len(), 1, "{text}");
    assert!(text.lines().any(|l| l.contains(" silent ")), "{text}");
    assert!(!text.lines().any(|l| l.contains(" none ")), "{text}");
}

/// An unknown id close to one or more rule ids names them.
#[test]
fn explain_suggests_close_rule_ids() {
    for (asked, suggested) in [
        ("HOSTNETWORK", "WIN-HOSTNETWORK"),
        ("win-privileged-", "WIN-PRIVILEGED"),
        ("WIN-PRIVILEGD", "WIN-PRIVILEGED"),
    ] {
        let out = winadmit(&["explain", asked]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("did you mean {suggested}")),
            "{asked}: {err}"
        );
    }
    let err = String::from_utf8_lossy(&winadmit(&["explain", "ZZZZZZZZZZ"]).stderr).into_owned();
    assert!(!err.contains("did you mean"), "{err}");
}

/// `report -o FILE` that exits 2 for an input error says why on stderr.
#[test]
fn report_to_a_file_says_why_it_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m");
    std::fs::create_dir(&m).unwrap();
    std::fs::write(
        m.join("bad.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x\nspec: {}\n",
    )
    .unwrap();
    let html = dir.path().join("report.html");
    for format in ["html", "json", "text"] {
        let out = winadmit(&[
            "report",
            "--from-file",
            m.to_str().unwrap(),
            "--format",
            format,
            "-o",
            html.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{format}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("bad.yaml:") && err.contains("invalid YAML"),
            "{format}: {err}"
        );
        assert!(err.contains("1 input error"), "{format}: {err}");
    }
}

/// `lint --fix` names each change (file:line: RULE at field), and says so
/// when nothing could be fixed.
#[test]
fn lint_fix_lists_its_changes() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  os: {name: windows}\n  nodeSelector: {kubernetes.io/os: windows}\n  containers:\n  - name: c\n    image: mcr.microsoft.com/windows/nanoserver:ltsc2022\n    securityContext:\n      privileged: true\n      runAsUser: 1000\n",
    )
    .unwrap();
    let p = pod.to_str().unwrap();
    let err = String::from_utf8(winadmit(&["lint", "--fix", p]).stderr).unwrap();
    assert!(
        err.contains(&format!(
            "fixed {p}:11: WIN-PRIVILEGED at spec.containers[0].securityContext.privileged"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "fixed {p}:12: WIN-RUNASUSER at spec.containers[0].securityContext.runAsUser"
        )),
        "{err}"
    );
    let again = String::from_utf8(winadmit(&["lint", "--fix", p]).stderr).unwrap();
    assert!(again.contains("--fix changed nothing"), "{again}");
}

#[test]
fn fix_writes_safe_fixes_and_reports_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.yaml");
    std::fs::copy(BAD, &file).unwrap();
    let out = winadmit(&["lint", "--fix", file.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "hostNetwork: true cannot be fixed automatically"
    );
    let fixed = std::fs::read_to_string(&file).unwrap();
    assert!(
        !fixed.contains("NET_ADMIN") && !fixed.contains("privileged"),
        "{fixed}"
    );
    assert!(
        fixed.contains("drop: [ALL]"),
        "the drop list Pod Security Admission requires stays: {fixed}"
    );
    assert!(
        fixed.contains("# A Windows web app with Linux habits."),
        "comments survive"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 fixes written") && !text.contains("WIN-CAPABILITIES"),
        "{text}"
    );
    let again = winadmit(&["lint", "--fix", file.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        fixed,
        "a second --fix changes nothing"
    );
    let again = String::from_utf8_lossy(&again.stdout);
    assert!(!again.contains("fixes written") && !again.contains("fix written"));
}

#[test]
fn node_objects_in_the_input_are_the_cluster_facts() {
    let nodes = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: akswin000000\n    labels:\n      kubernetes.io/os: windows\n      node.kubernetes.io/windows-build: 10.0.20348\n  status:\n    nodeInfo:\n      kubeletVersion: v1.23.8\n      containerRuntimeVersion: docker://20.10.9\n";
    let pod = "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: mcr.microsoft.com/windows/servercore:ltsc2019\n    resources:\n      limits:\n        memory: 1Gi\n    volumeMounts:\n    - name: v\n      mountPath: C:\\\\cfg\\\\a.json\n      subPath: a.json\n  volumes:\n  - name: v\n    configMap:\n      name: cfg\n";
    let out = with_stdin(&["lint", "-"], format!("{nodes}{pod}"));
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("error[WIN-SUBPATH]") && text.contains("Windows node akswin000000"),
        "{text}"
    );
    assert!(text.contains("error[WIN-BUILD-NO-NODE]"), "{text}");
}

/// `winadmit ... | head`: the reader closes the pipe before winadmit
/// writes; winadmit exits quietly (no message, exit 0), as ripgrep does.
#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    let manifest = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/lint/windows-bad.yaml"
    ))
    .unwrap();
    for args in [
        &["lint", "-"][..],
        &["lint", "--format", "json", "-"][..],
        &["report", "--from-file", "-", "-q"][..],
        &["report", "--from-file", "-", "-q", "--format", "html"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_winadmit"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("WINADMIT_POLICY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the reading end first; winadmit writes only once stdin ends.
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(manifest.as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// `winadmit example review` prints an AdmissionReview the webhook
/// answers: denied by /validate, patched by /mutate. The README's quick
/// start sends it with curl.
#[test]
fn example_review_is_a_review_the_webhook_denies_and_patches() {
    use winadmit::entry::admission::{Admission, Endpoint, review};
    let out = winadmit(&["example", "review"]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let adm = Admission {
        policy: winadmit::decision::policy::Policy::default_policy(),
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: None,
    };
    let answer = |endpoint| {
        let o = review(&adm, endpoint, &out.stdout).expect("a valid AdmissionReview");
        serde_json::from_slice::<serde_json::Value>(&o.body).unwrap()
    };
    let validated = answer(Endpoint::Validate);
    assert_eq!(validated["response"]["allowed"], false, "{validated}");
    assert_eq!(validated["response"]["status"]["code"], 403);
    let mutated = answer(Endpoint::Mutate);
    assert_eq!(mutated["response"]["patchType"], "JSONPatch", "{mutated}");

    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let quick = &readme[readme.find("## Quick start").unwrap()..];
    let quick = &quick[..quick[3..].find("\n## ").unwrap()];
    assert!(quick.contains("example review > review.json"), "{quick}");
    assert!(
        quick.contains("--data-binary @review.json https://localhost:8443/validate"),
        "{quick}"
    );
}

/// Files are linted on every core; the output is byte for byte the output
/// of one pass in input order, in every format.
#[test]
fn parallel_lint_output_is_identical_to_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let bad = std::fs::read_to_string(BAD).unwrap();
    let service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  selector: {app: web}\n  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: 60\n";
    for i in 0..40 {
        let text = match i % 4 {
            0 => bad.clone(),
            1 => service.to_owned(),
            2 => "apiVersion: v1\nkind: Pod\nmetadata: {name: broken\n".to_owned(),
            _ => bad.replace("name: web", &format!("name: web-{i}")),
        };
        std::fs::write(dir.path().join(format!("m{i:02}.yaml")), text).unwrap();
    }
    let run = |threads: &str, format: &str| {
        Command::new(env!("CARGO_BIN_EXE_winadmit"))
            .args(["lint", "--format", format, dir.path().to_str().unwrap()])
            .env("WINADMIT_LINT_THREADS", threads)
            .env_remove("WINADMIT_POLICY")
            .output()
            .unwrap()
    };
    for format in ["text", "json", "sarif", "junit"] {
        let one = run("1", format);
        let many = run("8", format);
        assert_eq!(
            one.status.code(),
            Some(2),
            "{format}: broken files are input errors"
        );
        assert_eq!(one.status.code(), many.status.code(), "{format}");
        assert!(one.stdout.len() > 1000, "{format}");
        assert!(
            one.stdout == many.stdout,
            "{format}: parallel output differs from one pass"
        );
    }
}

/// A file named several times (directly, or through its directory) is
/// read once: JUnit grouped each copy's test case with every copy's
/// findings, so ten copies of a file gave a hundred times its report.
#[test]
fn a_file_named_twice_is_read_once() {
    let once = winadmit(&["lint", "--format", "junit", BAD]);
    let many = winadmit(&[
        "lint",
        "--format",
        "junit",
        BAD,
        BAD,
        "./tests/fixtures/lint/windows-bad.yaml",
        BAD,
    ]);
    assert_eq!(many.status.code(), once.status.code());
    assert_eq!(
        String::from_utf8_lossy(&many.stdout),
        String::from_utf8_lossy(&once.stdout)
    );
    let dir_and_file = winadmit(&["lint", "tests/fixtures/lint/dir", "tests/fixtures/lint/dir"]);
    let dir = winadmit(&["lint", "tests/fixtures/lint/dir"]);
    assert_eq!(dir_and_file.stdout, dir.stdout);
}

/// `lint --help` and `report --help` say what each exit code means.
#[test]
fn help_lists_the_exit_codes() {
    for command in ["lint", "report"] {
        let out = winadmit(&[command, "--help"]);
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains("Exit codes")
                && help.contains("0 no error finding")
                && help.contains("1 error findings")
                && help.contains("2 a usage or input problem"),
            "{command} --help:\n{help}"
        );
    }
}

/// `lint --image-facts` and `report --from-file --image-facts` read the
/// same file and agree; `lint --fix` adds the Windows selector the facts
/// call for; a bad file is exit 2 naming the file and the field.
#[test]
fn image_facts_file_decides_what_images_run_on() {
    const PODS: &str = "tests/fixtures/images/pods.yaml";
    const FACTS: &str = "tests/fixtures/images/facts.json";
    let findings = |v: &serde_json::Value, list: &str| -> Vec<(String, String, String)> {
        let mut out: Vec<_> = v[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["rule"].as_str().unwrap().to_owned(),
                    f["field"].as_str().unwrap().to_owned(),
                    f["message"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        out.sort();
        out
    };
    let lint = winadmit(&["lint", "--format", "json", "--image-facts", FACTS, PODS]);
    assert_eq!(lint.status.code(), Some(1), "{}", transcript(&lint));
    let lint: serde_json::Value = serde_json::from_slice(&lint.stdout).unwrap();
    let from_lint = findings(&lint, "findings");
    let rules: Vec<&str> = from_lint.iter().map(|f| f.0.as_str()).collect();
    for rule in [
        "WIN-LINUX-IMAGE",
        "WIN-IMAGE-WINDOWS-ONLY",
        "WIN-BUILD-NODE-MISMATCH",
        "WIN-IMAGE-FACTS-UNKNOWN",
    ] {
        assert!(rules.contains(&rule), "{rule} missing: {from_lint:?}");
    }
    assert!(
        from_lint.iter().any(|f| f.2
            == "image nginx:1.27 (sha256:4f2c1b0e5d6a...) has platforms linux/amd64, linux/arm64/v8: no Windows variant to pull on the Windows nodes the pod targets"),
        "{from_lint:?}"
    );

    let report = winadmit(&[
        "report",
        "--from-file",
        PODS,
        "--image-facts",
        FACTS,
        "--format",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let mut from_report: Vec<(String, String, String)> = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| findings(o, "findings"))
        .collect();
    from_report.sort();
    assert_eq!(from_lint, from_report);

    // Without the file the names decide: nginx is still an error.
    let names = winadmit(&["lint", "--format", "json", PODS]);
    let names: serde_json::Value = serde_json::from_slice(&names.stdout).unwrap();
    let names = findings(&names, "findings");
    assert!(
        names
            .iter()
            .any(|f| f.0 == "WIN-LINUX-IMAGE" && f.2.contains("params.linuxImages"))
    );
    assert!(!names.iter().any(|f| f.0 == "WIN-IMAGE-WINDOWS-ONLY"));

    // --fix pins the Windows-only image's pod to Windows nodes.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("pods.yaml");
    std::fs::copy(PODS, &copy).unwrap();
    let copy = copy.to_str().unwrap();
    winadmit(&["lint", "--fix", "--image-facts", FACTS, copy]);
    let fixed = std::fs::read_to_string(copy).unwrap();
    let again = winadmit(&["lint", "--format", "json", "--image-facts", FACTS, copy]);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert!(
        !findings(&again, "findings")
            .iter()
            .any(|f| f.0 == "WIN-IMAGE-WINDOWS-ONLY"),
        "{fixed}"
    );

    // A bad file: exit 2, naming the file and the field.
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"images": {"nginx:1.27": {"platforms": [{"os": "linux"}]}}}"#,
    )
    .unwrap();
    let out = winadmit(&["lint", "--image-facts", bad.to_str().unwrap(), PODS]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json") && err.contains("platforms[0]: missing field `architecture`"),
        "{err}"
    );
    let out = winadmit(&[
        "lint",
        "--image-facts",
        "tests/fixtures/images/none.json",
        PODS,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("none.json"));
}
