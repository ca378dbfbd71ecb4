//! `winadmit report --from-file` with real `kubectl get -o json|yaml`
//! output, exit codes, mode preview, and the JSON shape shared with `/report`.

use std::process::{Command, Output};

use crate::binary::{winadmit, with_stdin};
use serde_json::Value;
use winadmit::decision::engine::Context;
use winadmit::decision::policy::Policy;
use winadmit::entry::report::body::report_body;
use winadmit::render::report::ReportOptions;

const KUBECTL_JSON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/report/kubectl-get-all.json"
);
const KUBECTL_YAML: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/report/kubectl-get-all.yaml"
);

fn json_report(args: &[&str], stdin: Option<&[u8]>) -> (Value, Output) {
    let out = with_stdin(args, stdin.unwrap_or_default());
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (v, out)
}

/// Objects without where they came from (file, line, document differ by input).
fn located_out(report: &Value) -> Value {
    let mut objects = report["objects"].as_array().unwrap().clone();
    for o in &mut objects {
        for f in o["findings"].as_array_mut().unwrap() {
            let f = f.as_object_mut().unwrap();
            for k in ["file", "line", "column", "document"] {
                f.remove(k);
            }
        }
        // YAML findings are sorted by position, streamed JSON ones come in
        // rule order: compare them as sets.
        o["findings"]
            .as_array_mut()
            .unwrap()
            .sort_by_key(|f| format!("{}/{}", f["rule"], f["field"]));
    }
    objects.sort_by_key(|o| format!("{}/{}/{}", o["kind"], o["namespace"], o["name"]));
    Value::Array(objects)
}

#[test]
fn kubectl_json_and_yaml_give_the_same_report() {
    let (json, out) = json_report(
        &["report", "--from-file", KUBECTL_JSON, "--format", "json"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let (yaml, _) = json_report(
        &["report", "--from-file", KUBECTL_YAML, "--format", "json"],
        None,
    );
    assert_eq!(located_out(&json), located_out(&yaml));
    assert_eq!(json["summary"], yaml["summary"]);
    // Both have positions (lint's locator), and each points at the key of
    // the finding's field in its file.
    assert_positions_point_at_fields(&json, KUBECTL_JSON);
    assert_positions_point_at_fields(&yaml, KUBECTL_YAML);
    // Same from stdin.
    let bytes = std::fs::read(KUBECTL_JSON).unwrap();
    let (stdin, _) = json_report(
        &["report", "--from-file", "-", "--format", "json"],
        Some(&bytes),
    );
    assert_eq!(stdin["summary"]["objects"], json["summary"]["objects"]);
    assert_positions_point_at_fields(&stdin, KUBECTL_JSON);
}

/// Every finding's `line:column` in `file` is where the last key of its
/// field path is written (`"hostNetwork"` in JSON, `hostNetwork:` in YAML).
fn assert_positions_point_at_fields(report: &Value, file: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut checked = 0;
    for o in report["objects"].as_array().unwrap() {
        for f in o["findings"].as_array().unwrap() {
            let field = f["field"].as_str().unwrap();
            let (line, column) = (f["line"].as_u64().unwrap(), f["column"].as_u64().unwrap());
            assert!(line > 0 && column > 0, "no position for {field}: {f}");
            // `a.b[0].c` -> `c`; `requests[memory]` -> `memory`.
            let last = field.rsplit('.').next().unwrap();
            let key = match last.split_once('[') {
                Some((_, inner)) if !inner.starts_with(|c: char| c.is_ascii_digit()) => {
                    inner.trim_end_matches(']')
                }
                Some((name, _)) => name,
                None => last,
            };
            let at = &lines[line as usize - 1][column as usize - 1..];
            assert!(
                at.trim_start_matches('"').starts_with(key),
                "{file}:{line}:{column} is `{at}`, not the key of {field}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked} findings checked");
}

#[test]
fn the_json_format_is_the_report_endpoint_shape() {
    let (cli, _) = json_report(
        &["report", "--from-file", KUBECTL_JSON, "--format", "json"],
        None,
    );
    let body = std::fs::read(KUBECTL_JSON).unwrap();
    let policy = Policy::default_policy();
    let options = ReportOptions {
        patched_objects: true,
        fold: true,
        ..ReportOptions::default()
    };
    let api = report_body(
        &policy,
        &Context::default(),
        &options,
        "application/json",
        &body,
    )
    .unwrap();
    let api = serde_json::to_value(&api).unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&cli), keys(&api));
    assert_eq!(located_out(&cli), located_out(&api));
    assert_eq!(cli["summary"], api["summary"]);
    // Each object: identity, targeting, verdict, lint-shaped findings, patch.
    let o = &api["objects"][0];
    for k in [
        "kind",
        "namespace",
        "name",
        "targetsWindows",
        "targetReason",
        "verdict",
        "findings",
        "patch",
    ] {
        assert!(o.get(k).is_some(), "{k} missing from {o}");
    }
}

#[test]
fn mode_preview_changes_verdicts_not_findings() {
    let verdicts = |mode: &str| {
        let (r, out) = json_report(
            &[
                "report",
                "--from-file",
                KUBECTL_JSON,
                "--format",
                "json",
                "--mode",
                mode,
            ],
            None,
        );
        (
            r["summary"]["verdicts"].clone(),
            r["summary"]["errors"].clone(),
            out.status.code(),
        )
    };
    let (enforce, e1, c1) = verdicts("enforce");
    let (warn, e2, _) = verdicts("warn");
    let (audit, e3, c3) = verdicts("audit");
    // win-probe's hostNetwork is the one error; iis and its pod only warn
    // (privileged and runAsUser are ignored on Windows), and so does the
    // CronJob /mutate gives a node selector: the verdict is the one after
    // the settled patch, whose changes /mutate explains in warnings. Advice
    // (info) such as WIN-MEMORY-LIMITS never changes a verdict; the audit
    // mode silences validation, not the mutation's warnings.
    assert_eq!(
        enforce,
        serde_json::json!({"deny": 1, "warn": 3, "allow": 2})
    );
    assert_eq!(warn, serde_json::json!({"deny": 0, "warn": 4, "allow": 2}));
    assert_eq!(audit, serde_json::json!({"deny": 0, "warn": 3, "allow": 3}));
    assert_eq!((e1.clone(), e2), (e1.clone(), e3));
    // --fail-on follows severities, as in lint, whatever the mode.
    assert_eq!((c1, c3), (Some(1), Some(1)));
}

#[test]
fn exit_codes_follow_lint() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.yaml");
    std::fs::write(&clean, "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: n}\nspec:\n  nodeSelector: {kubernetes.io/os: linux}\n  containers: [{name: c, image: nginx}]\n").unwrap();
    let out = winadmit(&["report", "--from-file", clean.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let warning = dir.path().join("warning.yaml");
    std::fs::write(&warning, "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: n}\nspec:\n  containers: [{name: c, image: mcr.microsoft.com/windows/nanoserver:ltsc2022}]\n").unwrap();
    let out = winadmit(&["report", "--from-file", warning.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let out = winadmit(&[
        "report",
        "--from-file",
        warning.to_str().unwrap(),
        "--fail-on",
        "warning",
    ]);
    assert_eq!(out.status.code(), Some(1));

    let broken = dir.path().join("broken.json");
    std::fs::write(
        &broken,
        "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n  {\"kind\": \"Pod\",}\n]}",
    )
    .unwrap();
    let out = winadmit(&["report", "--from-file", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("{}:2:", broken.display())) && stdout.contains("invalid JSON"),
        "{stdout}"
    );

    let out = winadmit(&["report", "--from-file", "/nonexistent.json"]);
    assert_eq!(out.status.code(), Some(2));
    let out = winadmit(&["report", "--from-file", "x.json", "--kubeconfig", "k"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("use one or the other"));
}

/// `WINADMIT_NAMESPACE` is the install namespace (`certs`, `manifests`);
/// `report`'s filter is `WINADMIT_REPORT_NAMESPACE`. A report that matches
/// nothing exits 2 unless `--allow-empty`.
#[test]
fn one_meaning_per_namespace_variable_and_an_empty_report_is_not_green() {
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_winadmit"));
        cmd.args(args)
            .env_remove("WINADMIT_NAMESPACE")
            .env_remove("WINADMIT_REPORT_NAMESPACE")
            .env_remove("WINADMIT_ALLOW_EMPTY");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let args = ["report", "--from-file", KUBECTL_JSON, "--format", "json"];
    let all = run(&args, &[]);
    assert_eq!(all.status.code(), Some(1));
    let all: Value = serde_json::from_slice(&all.stdout).unwrap();

    // The install namespace's variable is refused, naming the one to use.
    let out = run(&args, &[("WINADMIT_NAMESPACE", "winadmit")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("WINADMIT_NAMESPACE=winadmit")
            && stderr.contains("WINADMIT_REPORT_NAMESPACE"),
        "{stderr}"
    );
    // ... unless the namespaces to report are given: then it changes nothing.
    let out = run(
        &[&args[..], &["--namespace", "ops"]].concat(),
        &[("WINADMIT_NAMESPACE", "winadmit")],
    );
    let flag: Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = run(&args, &[("WINADMIT_REPORT_NAMESPACE", "ops")]);
    let var: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(flag["objects"], var["objects"]);
    let reported = var["summary"]["reported"].as_u64().unwrap();
    assert!(
        reported > 0 && reported < all["summary"]["reported"].as_u64().unwrap(),
        "{var}"
    );
    assert!(
        var["objects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["namespace"] == "ops")
    );

    // Nothing matched: said on stderr, exit 2; --allow-empty accepts it.
    let out = run(&args, &[("WINADMIT_REPORT_NAMESPACE", "no-such-namespace")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no workload matched in namespace no-such-namespace")
            && stderr.contains("--allow-empty"),
        "{stderr}"
    );
    let out = run(
        &[&args[..], &["--allow-empty"]].concat(),
        &[("WINADMIT_REPORT_NAMESPACE", "no-such-namespace")],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no workload matched"));
}

#[test]
fn text_report_leads_with_the_summary() {
    let out = winadmit(&["report", "--from-file", KUBECTL_JSON]);
    let text = String::from_utf8(out.stdout).unwrap();
    let ns = text.find("Namespaces:").unwrap();
    let rules = text.find("Top rules:").unwrap();
    let objects = text.find("Objects:").unwrap();
    assert!(ns < rules && rules < objects, "{text}");
    assert!(
        text.contains("14 workloads: 6 reported, 8 folded into their owners; 5 target Windows"),
        "{text}"
    );
    assert!(text.contains("DENY  Pod ops/win-probe"), "{text}");
    assert!(
        text.contains("owned by ReplicaSet/iis-7b9f6c5d8, reported apart"),
        "{text}"
    );
}

#[test]
fn from_file_takes_directories_and_several_paths_as_lint_does() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lint/dir");
    let bad = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/lint/windows-bad.yaml"
    );
    // A directory, read recursively, like `lint DIR`.
    let (from_dir, out) = json_report(
        &["report", "--from-file", dir, "--format", "json", "-q"],
        None,
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = |r: &Value| {
        let mut n: Vec<String> = r["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| format!("{}/{}", o["kind"], o["name"]))
            .collect();
        n.sort();
        n
    };
    let lint = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(["lint", "--format", "json", dir])
        .output()
        .unwrap();
    let lint: Value = serde_json::from_slice(&lint.stdout).unwrap();
    assert_eq!(
        from_dir["summary"]["objects"], lint["summary"]["objects"],
        "report reads the same objects as lint: {from_dir}"
    );
    assert!(!names(&from_dir).is_empty());
    // Several paths after one flag, and the flag repeated: the same.
    let (several, _) = json_report(
        &["report", "--from-file", dir, bad, "--format", "json", "-q"],
        None,
    );
    let (repeated, _) = json_report(
        &[
            "report",
            "--from-file",
            dir,
            "--from-file",
            bad,
            "--format",
            "json",
            "-q",
        ],
        None,
    );
    assert_eq!(names(&several), names(&repeated));
    assert!(names(&several).len() > names(&from_dir).len());
}

#[test]
fn text_report_colour_follows_lints_rules() {
    let run = |extra: &[&str], no_color: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_winadmit"));
        c.args(["report", "--from-file", KUBECTL_YAML, "-q"])
            .args(extra);
        if no_color {
            c.env("NO_COLOR", "1");
        } else {
            c.env_remove("NO_COLOR");
        }
        String::from_utf8(c.output().unwrap().stdout).unwrap()
    };
    let always = run(&["--color", "always"], false);
    assert!(always.contains("\x1b[1;31mDENY \x1b[0m"), "{always}");
    assert!(always.contains("\x1b[1;31merror["), "{always}");
    // `always` wins over NO_COLOR, as for lint.
    assert!(run(&["--color", "always"], true).contains("\x1b["));
    for plain in [
        run(&["--color", "never"], false),
        run(&[], false), // auto, not a terminal
        run(&["--color", "auto"], true),
    ] {
        assert!(!plain.contains('\x1b'), "{plain}");
        assert!(plain.contains("DENY "));
    }
    // The colour is only paint: the text is the same.
    let strip = always
        .replace("\x1b[1;31m", "")
        .replace("\x1b[1;33m", "")
        .replace("\x1b[1;36m", "")
        .replace("\x1b[32m", "")
        .replace("\x1b[0m", "");
    assert_eq!(strip, run(&["--color", "never"], false));
}
