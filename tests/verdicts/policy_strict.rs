//! Policy values are checked at load: taints and tolerations
//! with the enums Kubernetes accepts, every error at `file:line:col`, and
//! messages in winadmit's words rather than the YAML library's.

use std::path::PathBuf;

use winadmit::decision::policy::Policy;

fn load(text: &str) -> Result<Policy, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, text).unwrap();
    winadmit::input::policy::load(std::slice::from_ref(&path)).map_err(|e| {
        let message = e.to_string();
        message.replace(&path.display().to_string(), "policy.yaml")
    })
}

#[test]
fn invalid_values_are_refused_at_their_line_and_column() {
    let cases: &[(&str, &str)] = &[
        (
            "params:\n  windowsTaint:\n    key: os\n    value: windows\n    effect: Sometimes\n",
            "invalid policy policy.yaml:5:13: unknown taint effect `Sometimes`: expected NoSchedule, PreferNoSchedule or NoExecute",
        ),
        (
            "mutation:\n  tolerations:\n  - key: os\n    operator: Frob\n    effect: Whenever\n",
            "invalid policy policy.yaml:4:5: mutation.tolerations[0].operator: unknown operator `Frob`: expected Exists or Equal",
        ),
        (
            "mutation:\n  tolerations:\n  - key: os\n    operator: Equal\n    value: windows\n    effect: Whenever\n",
            "invalid policy policy.yaml:6:5: mutation.tolerations[0].effect: unknown effect `Whenever`",
        ),
        (
            "mutation:\n  tolerations:\n  - key: os\n    operator: Exists\n    value: windows\n",
            "invalid policy policy.yaml:5:5: mutation.tolerations[0].value: must be empty with operator Exists",
        ),
        (
            "mutation:\n  tolerations:\n  - key: os\n    tolerate: always\n",
            "invalid policy policy.yaml:4:5: mutation.tolerations[0]: unknown field `tolerate`",
        ),
        (
            "rules:\n  WIN-PRIVILEGED: error\n  WIN-NOPE: warning\n",
            "invalid policy policy.yaml:3:3: unknown rule id `WIN-NOPE`",
        ),
        (
            "mutation:\n  injectNodeSelector: true\n  injectEverything: true\n",
            "invalid policy policy.yaml:3:3: unknown key `mutation.injectEverything`",
        ),
        (
            "mutation:\n  isolation: sometimes\n",
            "invalid policy policy.yaml:2:3: mutation.isolation must be process or hyperv",
        ),
        (
            "mode: warn\n---\nmode: audit\n",
            "invalid policy policy.yaml:3:1: a policy file holds one YAML document",
        ),
        (
            "mode: warn\nmode: audit\n",
            "invalid policy policy.yaml:2:1: duplicate key `mode`: each key may appear once",
        ),
        (
            "mode: sometimes\n",
            "invalid policy policy.yaml:1:7: unknown variant `sometimes`",
        ),
        (
            "kind: Polic\n",
            "invalid policy policy.yaml:1:1: kind must be Policy, not Polic",
        ),
    ];
    for (text, want) in cases {
        let Err(err) = load(text) else {
            panic!("accepted:\n{text}")
        };
        assert!(err.starts_with(want), "{text}\n got: {err}\nwant: {want}");
        for library_words in ["from_str_multiple", "DuplicateKeyPolicy", "Options"] {
            assert!(!err.contains(library_words), "{err}");
        }
    }
}

#[test]
fn valid_taints_and_tolerations_load() {
    let p = load(
        "params:\n  windowsTaint: {key: os, value: windows, effect: NoSchedule}\nmutation:\n  tolerations:\n  - {key: os, operator: Equal, value: windows, effect: NoSchedule}\n  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 30}\n  - {operator: Exists}\n",
    )
    .unwrap();
    assert_eq!(p.mutation.tolerations.len(), 3);
    assert_eq!(p.params.windows_taint.unwrap().effect, "NoSchedule");
    // The shipped default policy still loads as a file.
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies/default.yaml");
    winadmit::input::policy::load(&[default]).unwrap();
}

/// Every value `/mutate` writes from the policy (tolerations, the
/// toleration for the Windows taint) and every name it reads objects by
/// (RuntimeClass names, label keys and values, namespaces) is refused at
/// load when the API server would refuse it: a policy cannot make the
/// webhook produce objects the API server rejects.
#[test]
fn values_the_api_server_would_refuse_are_refused_at_their_line_and_column() {
    let cases: &[(&str, &str)] = &[
        (
            "params:\n  windowsTaint:\n    key: \"bad key!!/x/y\"\n    value: windows\n    effect: NoSchedule\n",
            "invalid policy policy.yaml:3:5: params.windowsTaint.key: \"bad key!!/x/y\" is not a valid label key",
        ),
        (
            "params:\n  windowsTaint: {key: os, value: \"v v\", effect: NoSchedule}\n",
            "invalid policy policy.yaml:2:27: params.windowsTaint.value: \"v v\" is not a valid label value",
        ),
        (
            "mutation:\n  tolerations:\n  - key: \"os/x~y\"\n    operator: Exists\n",
            "invalid policy policy.yaml:3:5: mutation.tolerations[0].key: \"os/x~y\" is not a valid label key: name part must consist of alphanumeric characters",
        ),
        (
            "mutation:\n  tolerations:\n  - {key: os, operator: Exists}\n  - key: no spaces allowed here\n    operator: Exists\n",
            "invalid policy policy.yaml:4:5: mutation.tolerations[1].key: \"no spaces allowed here\" is not a valid label key",
        ),
        (
            "mutation:\n  tolerations:\n  - key: os\n    operator: Exists\n    effect: NoSchedule\n    tolerationSeconds: 60\n",
            "invalid policy policy.yaml:6:5: mutation.tolerations[0].tolerationSeconds: only allowed with effect NoExecute",
        ),
        (
            "mutation:\n  tolerations:\n  - {key: os, operator: Exists, tolerationSeconds: 60}\n",
            "invalid policy policy.yaml:3:33: mutation.tolerations[0].tolerationSeconds: only allowed with effect NoExecute (the API server refuses it with no effect)",
        ),
        (
            "mutation:\n  tolerations:\n  - {key: os, operator: Equal, value: \"win dows\"}\n",
            "invalid policy policy.yaml:3:32: mutation.tolerations[0].value: \"win dows\" is not a valid label value",
        ),
        (
            "mutation:\n  tolerations:\n  - {key: os, value: \"-x\"}\n",
            "invalid policy policy.yaml:3:15: mutation.tolerations[0].value: \"-x\" is not a valid label value",
        ),
        (
            "windowsRuntimeClasses: [windows-2022, \"Windows\\r\"]\n",
            "invalid policy policy.yaml:1:39: windowsRuntimeClasses[1]: \"Windows\\r\" is not a valid RuntimeClass name",
        ),
        (
            "params:\n  hypervRuntimeClasses: [\"hyper v\"]\n",
            "invalid policy policy.yaml:2:26: params.hypervRuntimeClasses[0]: \"hyper v\" is not a valid RuntimeClass name",
        ),
        (
            "namespaceModeLabel: \"winadmit.io/mode\\r\"\n",
            "invalid policy policy.yaml:1:1: namespaceModeLabel: \"winadmit.io/mode\\r\" is not a valid label key",
        ),
        (
            "mutation:\n  isolationNamespaceLabel: \"a/b/c\"\n",
            "invalid policy policy.yaml:2:3: mutation.isolationNamespaceLabel: \"a/b/c\" is not a valid label key",
        ),
        (
            "exemptions:\n  namespaces: [ok, \"Not_A_Namespace\"]\n",
            "invalid policy policy.yaml:2:20: exemptions.namespaces[1]: \"Not_A_Namespace\" is not a valid namespace name",
        ),
        (
            "reach:\n  excludedNamespaces: [\"kube-system\\r\"]\n",
            "invalid policy policy.yaml:2:24: reach.excludedNamespaces[0]: \"kube-system\\r\" is not a valid namespace name",
        ),
        (
            "reach:\n  optOutNamespaceLabels: {\"winadmit.io/ignore\": \"yes please\"}\n",
            "invalid policy policy.yaml:2:27: reach.optOutNamespaceLabels.winadmit.io/ignore: \"yes please\" is not a valid label value",
        ),
        (
            "exemptions:\n  labelSelectors:\n  - matchLabels: {\"bad key\": x}\n",
            "invalid policy policy.yaml:3:19: exemptions.labelSelectors[0].matchLabels: \"bad key\" is not a valid label key",
        ),
        (
            "exemptions:\n  labelSelectors:\n  - matchExpressions:\n    - {key: team, operator: In, values: [\"a b\"]}\n",
            "invalid policy policy.yaml:4:42: exemptions.labelSelectors[0].matchExpressions[0].values[0]: \"a b\" is not a valid label value",
        ),
    ];
    let mut wrong = Vec::new();
    for (text, want) in cases {
        match load(text) {
            Ok(_) => wrong.push(format!("accepted:\n{text}")),
            Err(err) if !err.starts_with(want) => {
                wrong.push(format!("{text}\n got: {err}\nwant: {want}"));
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

fn winadmit(args: &[&str]) -> std::process::Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > std::time::Duration::from_secs(20) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "winadmit {args:?} still running after 20 s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_binary_refuses_each_invalid_value_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lint/clean.yaml");
    for (text, want) in [
        (
            "params:\n  windowsTaint: {key: \"bad key!!/x/y\", value: \"v v\", effect: NoSchedule}\n",
            ":2:18: params.windowsTaint.key: \"bad key!!/x/y\" is not a valid label key",
        ),
        (
            "mutation:\n  tolerations: [{key: \"os/x~y\", operator: Exists}]\n",
            ":2:18: mutation.tolerations[0].key: \"os/x~y\" is not a valid label key",
        ),
        (
            "mutation:\n  tolerations: [{key: os, operator: Exists, effect: NoSchedule, tolerationSeconds: 60}]\n",
            ":2:65: mutation.tolerations[0].tolerationSeconds: only allowed with effect NoExecute",
        ),
    ] {
        let policy = dir.path().join("p.yaml");
        std::fs::write(&policy, text).unwrap();
        let out = winadmit(&[
            "lint",
            "--policy",
            policy.to_str().unwrap(),
            manifest.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}\n{stderr}");
        assert!(
            stderr.contains(want),
            "{text}\n got: {stderr}\nwant: {want}"
        );
    }
}

/// Policy files are read with the limits manifests have: a device is not
/// read forever, a FIFO does not block the start, a large file is refused
/// before it is read.
#[test]
fn devices_fifos_and_large_files_are_refused_as_policies_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lint/clean.yaml");
    let big = dir.path().join("big.yaml");
    let file = std::fs::File::create(&big).unwrap();
    // Sparse: the size check must not need to read it.
    file.set_len(64 * 1024 * 1024).unwrap();
    let fifo = dir.path().join("fifo.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    assert!(made, "mkfifo is needed for this test");
    for (policy, want) in [
        (
            "/dev/zero",
            "invalid policy /dev/zero: a device, not a regular file",
        ),
        (
            fifo.to_str().unwrap(),
            "fifo.yaml: a FIFO, not a regular file: write the policy to a file",
        ),
        (
            big.to_str().unwrap(),
            "big.yaml: file is 64 MiB, over the 32 MiB limit for policy files",
        ),
    ] {
        let start = std::time::Instant::now();
        let out = winadmit(&["lint", "--policy", policy, manifest.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{policy}: {stderr}");
        assert!(
            stderr.contains(want),
            "{policy}\n got: {stderr}\nwant: {want}"
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "{policy}: {:?}",
            start.elapsed()
        );
    }
    let nul = dir.path().join("nul.yaml");
    std::fs::write(&nul, b"mode: warn\n\0\n").unwrap();
    let out = winadmit(&[
        "lint",
        "--policy",
        nul.to_str().unwrap(),
        manifest.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("nul.yaml:2:1: binary file (contains NUL bytes), not a policy"),
        "{stderr}"
    );
}
