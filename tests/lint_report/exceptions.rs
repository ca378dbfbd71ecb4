//! `PolicyException`s in `lint` and `report --from-file`: a covered finding
//! is shown as skipped in every format and counts for nothing; one in a
//! namespace the policy does not list, or ended, changes nothing and is
//! named as ignored.

use crate::binary::winadmit;

const POD: &str = "tests/fixtures/exceptions/pod.yaml";
const GRANTED: &str = "tests/fixtures/exceptions/granted";
const UNLISTED: &str = "tests/fixtures/exceptions/unlisted";
const NOW: &str = "2026-06-15T00:00:00Z";

fn lint(format: &str, dir: &str, now: &str) -> (Option<i32>, String, String) {
    let out = winadmit(&[
        "lint",
        "--format",
        format,
        "--exceptions",
        dir,
        "--now",
        now,
        POD,
    ]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_granted_exception_lets_lint_pass_and_every_format_says_so() {
    let bare = winadmit(&["lint", POD]);
    assert_eq!(bare.status.code(), Some(1), "{bare:?}");
    let (code, text, _) = lint("text", GRANTED, NOW);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("skipped[WIN-HOSTNETWORK] spec.hostNetwork: excepted by PolicyException winadmit/legacy-web until 2026-07-01T00:00:00Z: the legacy agent listens on the node"),
        "{text}"
    );
    let (_, json, _) = lint("json", GRANTED, NOW);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["summary"]["errors"], 0, "{json}");
    let e = &v["excepted"][0];
    assert_eq!(e["rule"], "WIN-HOSTNETWORK", "{json}");
    assert_eq!(e["exception"]["name"], "legacy-web");
    assert_eq!(e["exception"]["ticket"], "OPS-1");
    assert_eq!(e["line"], 7, "placed at its field: {json}");
    let (_, sarif, _) = lint("sarif", GRANTED, NOW);
    let v: serde_json::Value = serde_json::from_str(&sarif).unwrap();
    let results = v["runs"][0]["results"].as_array().unwrap();
    let suppressed: Vec<_> = results
        .iter()
        .filter(|r| r.get("suppressions").is_some())
        .collect();
    assert_eq!(suppressed.len(), 1, "{sarif}");
    let s = &suppressed[0]["suppressions"][0];
    assert_eq!(s["kind"], "external");
    assert_eq!(s["justification"], "the legacy agent listens on the node");
    assert_eq!(s["properties"]["expiresAt"], "2026-07-01T00:00:00Z");
    let (_, junit, _) = lint("junit", GRANTED, NOW);
    assert!(junit.contains("skipped=\"1\""), "{junit}");
    assert!(
        junit.contains("<skipped message=\"excepted by PolicyException winadmit/legacy-web until 2026-07-01T00:00:00Z: the legacy agent listens on the node (ticket OPS-1)\"/>"),
        "{junit}"
    );
}

#[test]
fn an_exception_in_an_unlisted_namespace_or_ended_changes_nothing() {
    let (code, text, _) = lint("text", UNLISTED, NOW);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("error[WIN-HOSTNETWORK]"), "{text}");
    assert!(
        text.contains("PolicyException web/legacy-web: input warning: ignored: namespace web is not one whose exceptions count"),
        "{text}"
    );
    let (code, text, _) = lint("text", GRANTED, "2026-07-01T00:00:00Z");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("ignored: ended at 2026-07-01T00:00:00Z"),
        "{text}"
    );
    // The policy lists `web`: the same object counts there.
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "exceptions: {namespaces: [web]}\n").unwrap();
    let out = winadmit(&[
        "lint",
        "--policy",
        policy.to_str().unwrap(),
        "--exceptions",
        UNLISTED,
        "--now",
        NOW,
        POD,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn exceptions_in_the_input_count_as_in_a_directory() {
    let out = winadmit(&[
        "lint",
        "--now",
        NOW,
        POD,
        "tests/fixtures/exceptions/granted/exception.yaml",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = winadmit(&["lint", "--now", "yesterday", POD]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--now: \"yesterday\" is not an RFC 3339 date-time")
    );
}

#[test]
fn report_from_files_lists_the_exception_as_skip() {
    let out = winadmit(&[
        "report",
        "--from-file",
        POD,
        "--exceptions",
        GRANTED,
        "--now",
        NOW,
        "--format",
        "policyreport",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("result: skip"), "{text}");
    assert!(text.contains("exception: winadmit/legacy-web"), "{text}");
    assert!(text.contains("ticket: OPS-1"), "{text}");
    assert!(
        text.contains("expiresAt: \"2026-07-01T00:00:00Z\"")
            || text.contains("expiresAt: 2026-07-01T00:00:00Z")
            || text.contains("expiresAt: '2026-07-01T00:00:00Z'"),
        "{text}"
    );
    let bare = winadmit(&["report", "--from-file", POD, "--format", "json"]);
    assert_eq!(bare.status.code(), Some(1), "{bare:?}");
}

/// The migration on the corpus: each workload's error and warning
/// findings (but the gMSA rules', which no annotation skips) become `winadmit.io/skip.<RULE>`
/// annotations, `winadmit exceptions from-annotations` turns them into
/// PolicyExceptions, and with annotations off (`skips.allowed: false`)
/// `lint` accepts those exceptions: each annotated finding is excepted,
/// none left as an error.
#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn the_corpus_skip_annotations_become_exceptions_lint_accepts() {
    use winadmit::decision::decide::{self, PatchSource, Request};
    use winadmit::decision::engine::Context;
    use winadmit::decision::policy::Policy;
    use winadmit::decision::workload::Workload;
    let corpus =
        crate::corpus_dir::corpus_dir("the_corpus_skip_annotations_become_exceptions_lint_accepts");
    let policy = Policy::default_policy();
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let mut annotated = 0;
    for (i, file) in crate::corpus_dir::manifests(&corpus).iter().enumerate() {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let Ok(docs) = winadmit::input::source::parse(&text) else {
            continue;
        };
        for (j, doc) in docs.into_iter().enumerate() {
            let mut value = doc.value;
            let rules: Vec<&'static str> = {
                let Ok(view) = policy.pod_templates.read(&value) else {
                    continue;
                };
                let Some(w) = Workload::from_view(&view) else {
                    continue;
                };
                let d = decide::decide(
                    &policy,
                    &Context::default(),
                    &w,
                    &Request::manifest(PatchSource::None),
                );
                let mut rules: Vec<&'static str> = d
                    .evaluation
                    .findings
                    .iter()
                    .filter(|f| f.severity >= winadmit::decision::finding::Severity::Warning)
                    .map(|f| f.rule)
                    .filter(|r| !winadmit::decision::rules::is_boundary(r))
                    .collect();
                rules.sort_unstable();
                rules.dedup();
                rules
            };
            if rules.is_empty() || !value["metadata"].is_object() {
                continue;
            }
            for rule in &rules {
                value["metadata"]["annotations"][format!("winadmit.io/skip.{rule}")] =
                    serde_json::json!(format!("corpus: {rule} is known"));
                annotated += 1;
            }
            std::fs::write(manifests.join(format!("{i}-{j}.json")), value.to_string()).unwrap();
        }
    }
    assert!(annotated > 10, "only {annotated} annotations made");
    let expires = winadmit::decision::exceptions::Timestamp(
        winadmit::entry::exceptions::clock().0 + 30 * winadmit::decision::exceptions::DAY,
    )
    .to_string();
    let out = winadmit(&[
        "exceptions",
        "from-annotations",
        manifests.to_str().unwrap(),
        "--expires",
        &expires,
        "--owner",
        "team-windows",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let exceptions = dir.path().join("exceptions");
    std::fs::create_dir(&exceptions).unwrap();
    std::fs::write(exceptions.join("all.yaml"), &out.stdout).unwrap();
    let policy_file = dir.path().join("policy.yaml");
    std::fs::write(&policy_file, "skips: {allowed: false}\n").unwrap();
    let lint = |with_exceptions: bool| {
        let mut args = vec![
            "lint".to_owned(),
            "--format".into(),
            "json".into(),
            "--fail-on".into(),
            "never".into(),
            "--policy".into(),
            policy_file.display().to_string(),
            manifests.display().to_string(),
        ];
        if with_exceptions {
            args.extend(["--exceptions".into(), exceptions.display().to_string()]);
        }
        let out = winadmit(&args);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (v, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (without, _) = lint(false);
    let errors_without = without["summary"]["errors"].as_u64().unwrap()
        + without["summary"]["warnings"].as_u64().unwrap();
    assert!(
        errors_without > 0,
        "the annotations are off: the findings stand"
    );
    let (with, stderr) = lint(true);
    assert!(
        !stderr.contains("ignored") && !stderr.contains("not read"),
        "every exception made is accepted: {stderr}"
    );
    let left: Vec<&serde_json::Value> = with["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "info")
        .collect();
    assert!(left.is_empty(), "findings left: {left:#?}");
    let excepted = with["excepted"].as_array().map_or(0, Vec::len);
    assert!(
        excepted as u64 >= errors_without,
        "{excepted} excepted of {errors_without}"
    );
}
