use super::files::{Replaced, read_regular, replace};
use super::*;

/// The window between reading a file and renaming its fixed text over
/// it, made deterministic: the file changes after it was read.
#[test]
fn a_file_changed_after_it_was_read_keeps_its_new_text() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.yaml");
    std::fs::write(&file, "kind: Pod\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let original = read_regular(&file).unwrap().unwrap();
    std::fs::write(&file, "kind: Pod # edited meanwhile\n").unwrap();
    let Replaced::No(why) = replace(&file, &original, b"", "kind: Fixed\n").unwrap() else {
        panic!("replaced a file that changed meanwhile");
    };
    assert!(why.contains("changed while it was being fixed"), "{why}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "kind: Pod # edited meanwhile\n"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "the temporary file is removed");

    // Unchanged: replaced, with its mode.
    let original = read_regular(&file).unwrap().unwrap();
    assert!(matches!(
        replace(&file, &original, b"\xEF\xBB\xBF", "kind: Fixed\n").unwrap(),
        Replaced::Yes
    ));
    assert_eq!(std::fs::read(&file).unwrap(), b"\xEF\xBB\xBFkind: Fixed\n");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
}

fn fix(text: &str) -> (Option<String>, FixOutcome) {
    fix_text(text, &Policy::default_policy(), &Context::default())
}

#[test]
fn removes_no_op_fields_keeping_comments_and_injects_the_selector() {
    let text = "\
# web tier
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      os:
        name: windows  # required for the API server's checks
      containers:
      - name: iis   # the site
        image: mcr.microsoft.com/windows/servercore/iis
        securityContext:
          privileged: false
          capabilities:
            drop:
            - ALL
          runAsNonRoot: true
";
    let (fixed, outcome) = fix(text);
    let fixed = fixed.expect("a fix");
    assert_eq!(outcome.applied, 3, "{outcome:?}");
    assert_eq!(
        fixed,
        "\
# web tier
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      nodeSelector:
        kubernetes.io/os: windows
      os:
        name: windows  # required for the API server's checks
      containers:
      - name: iis   # the site
        image: mcr.microsoft.com/windows/servercore/iis
        securityContext:
          runAsNonRoot: true
"
    );
    assert_eq!(fix(&fixed).0, None, "fixing twice changes nothing");
}

#[test]
fn crlf_is_kept_and_flow_style_is_fixed_in_place() {
    let text = "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\nspec:\r\n  nodeSelector: {kubernetes.io/os: windows}\r\n  containers:\r\n  - name: c\r\n    image: x\r\n    securityContext: {runAsUser: 1000, runAsNonRoot: true}\r\n";
    let (fixed, outcome) = fix(text);
    assert!(outcome.skipped.is_empty(), "{outcome:?}");
    assert_eq!(
        fixed.unwrap(),
        text.replace(
            "{runAsUser: 1000, runAsNonRoot: true}",
            "{runAsNonRoot: true}"
        )
    );
}

#[test]
fn a_removal_that_empties_its_parent_removes_the_parent() {
    let text = "\
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  nodeSelector:
    kubernetes.io/os: windows
  securityContext:
    # ignored on Windows
    runAsUser: 1000
  containers:
  - securityContext:
      seLinuxOptions:
        level: s0
    name: c   # keep me
    image: x
  volumes:
  - name: scratch
    emptyDir:
      medium: Memory
";
    let mut policy = Policy::default_policy();
    policy.mutation.empty_dir_off_memory = true;
    let (fixed, outcome) = fix_text(text, &policy, &Context::default());
    assert!(outcome.skipped.is_empty(), "{outcome:?}");
    assert_eq!(
        fixed.unwrap(),
        "\
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  nodeSelector:
    kubernetes.io/os: windows
  containers:
  - name: c   # keep me
    image: x
  volumes:
  - name: scratch
    emptyDir: {}
",
        "emptyDir: {{}} stays (it chooses the volume type)"
    );
}

#[test]
fn yaml_flow_maps_get_yaml_flow_entries() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {os: {name: windows}, containers: [{name: c, image: x, securityContext: {capabilities: {drop: [ALL]}, runAsNonRoot: true}}]}\n";
    let (fixed, outcome) = fix(text);
    assert!(outcome.skipped.is_empty(), "{outcome:?}");
    assert_eq!(
        fixed.unwrap(),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeSelector: {kubernetes.io/os: windows}, os: {name: windows}, containers: [{name: c, image: x, securityContext: {runAsNonRoot: true}}]}\n"
    );
}

#[test]
fn an_alias_whose_value_changes_is_written_out_and_the_anchor_stays() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nx-sc: &sc\n  runAsUser: 1000\n  runAsNonRoot: true\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: x\n    securityContext: *sc\n";
    let (fixed, outcome) = fix(text);
    assert!(outcome.skipped.is_empty(), "{outcome:?}");
    assert_eq!(
        fixed.unwrap(),
        text.replace(
            "    securityContext: *sc\n",
            "    securityContext:\n      runAsNonRoot: true\n"
        )
    );
}

const JSON_POD: &str = r#"{
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {
        "os": {"name": "windows"},
        "containers": [
            {
                "name": "c",
                "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022",
                "securityContext": {
                    "runAsNonRoot": true,
                    "capabilities": {"drop": ["ALL"]}
                }
            }
        ]
    }
}
"#;

#[test]
fn json_files_are_fixed_keeping_their_indentation() {
    let (fixed, outcome) = fix(JSON_POD);
    assert!(outcome.skipped.is_empty(), "{outcome:?}");
    let fixed = fixed.expect("a fix");
    assert!(outcome.applied >= 2, "{outcome:?}");
    assert!(
            fixed.contains(
                "    \"spec\": {\n        \"nodeSelector\": {\n            \"kubernetes.io/os\": \"windows\"\n        },\n        \"os\""
            ),
            "{fixed}"
        );
    assert!(
        fixed.contains(
            "\"securityContext\": {\n                    \"runAsNonRoot\": true\n                }"
        ),
        "{fixed}"
    );
    serde_json::from_str::<Value>(&fixed).expect("still JSON");
    assert_eq!(fix(&fixed).0, None, "fixing twice changes nothing");
    // One line, two spaces: the same.
    let compact = serde_json::to_string(&serde_json::from_str::<Value>(JSON_POD).unwrap()).unwrap();
    let fixed = fix(&compact).0.expect("a fix");
    serde_json::from_str::<Value>(&fixed).expect("still JSON");
    assert_eq!(fix(&fixed).0, None);
}
