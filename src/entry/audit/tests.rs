use serde_json::json;

use super::*;
use crate::decision::cluster::TargetCluster;

fn deployment(ns: &str, name: &str, privileged: bool) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"nodeSelector": {"kubernetes.io/os": "windows"},
                "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
                    "securityContext": {"privileged": privileged}}]}}}
    })
}

fn judged(objects: &[Value], info: bool) -> Judged {
    let policy = Policy::default_policy();
    let cx = Context {
        cluster: TargetCluster::default(),
        runtime_classes: None,
        nodes: None,
        images: None,
        gmsa: None,
        exceptions: None,
    };
    let reports = judge(&policy, &cx, None, objects);
    results(
        &reports,
        Options {
            api: ReportApi::OpenReports,
            info,
        },
    )
}

#[test]
fn results_name_rule_field_message_and_fix_and_only_what_is_wrong() {
    let j = judged(
        &[
            deployment("web", "bad", true),
            deployment("web", "good", false),
        ],
        false,
    );
    assert!(!j.results.is_empty());
    for r in &j.results {
        let result = r["result"].as_str().unwrap();
        assert!(result == "fail" || result == "warn", "{r}");
        assert!(r["rule"].as_str().unwrap().starts_with("WIN-"), "{r}");
        assert!(
            r["properties"]["field"]
                .as_str()
                .unwrap()
                .starts_with("spec.template.spec."),
            "{r}"
        );
        assert!(!r["properties"]["fix"].as_str().unwrap().is_empty(), "{r}");
        assert!(!r["message"].as_str().unwrap().is_empty(), "{r}");
        assert_eq!(r["resources"][0]["name"], "bad", "{r}");
    }
    assert!(j.clean >= 1);
    let total: u64 = j.counts.values().sum();
    assert_eq!(total as usize, j.results.len());
}

#[test]
fn a_large_namespace_is_split_under_the_size_limit_and_nothing_is_lost() {
    let objects: Vec<Value> = (0..3000)
        .map(|i| deployment("big", &format!("w{i:05}"), true))
        .collect();
    let j = judged(&objects, false);
    let reports = namespace_reports("big", &j, ReportApi::OpenReports);
    assert!(reports.len() > 1, "{}", reports.len());
    let mut seen = 0;
    for (i, r) in reports.iter().enumerate() {
        let bytes = serde_json::to_vec(r).unwrap().len();
        assert!(bytes < 1024 * 1024, "report {i}: {bytes} bytes");
        assert_eq!(r["metadata"]["name"], report_name("big", i + 1));
        let n = r["results"].as_array().unwrap().len();
        assert!(n <= MAX_RESULTS);
        assert_eq!(
            r["summary"]["fail"].as_u64().unwrap() + r["summary"]["warn"].as_u64().unwrap(),
            n as u64
        );
        seen += n;
    }
    assert_eq!(seen, j.results.len());
}

#[test]
fn the_hash_changes_only_with_the_content() {
    let a = namespace_reports(
        "web",
        &judged(&[deployment("web", "bad", true)], false),
        ReportApi::OpenReports,
    );
    let b = namespace_reports(
        "web",
        &judged(&[deployment("web", "bad", true)], false),
        ReportApi::OpenReports,
    );
    let c = namespace_reports(
        "web",
        &judged(&[deployment("web", "bad", false)], false),
        ReportApi::OpenReports,
    );
    assert_eq!(hash_of(&a[0]), hash_of(&b[0]));
    assert_ne!(hash_of(&a[0]), hash_of(&c[0]));
}

#[test]
fn both_apis_name_the_workload_in_resources() {
    let j = judged(&[deployment("web", "bad", true)], false);
    let mut j2 = j.clone();
    j2.results.clear();
    let policy_j = {
        let policy = Policy::default_policy();
        let cx = Context {
            cluster: TargetCluster::default(),
            runtime_classes: None,
            nodes: None,
            images: None,
            gmsa: None,
            exceptions: None,
        };
        let reports = judge(&policy, &cx, None, [&deployment("web", "bad", true)]);
        results(
            &reports,
            Options {
                api: ReportApi::PolicyReport,
                info: false,
            },
        )
    };
    let r = &namespace_reports("web", &policy_j, ReportApi::PolicyReport)[0];
    assert_eq!(r["apiVersion"], "wgpolicyk8s.io/v1alpha2");
    assert_eq!(r["kind"], "PolicyReport");
    assert!(r["results"][0]["resources"].is_array());
    let o = &namespace_reports("web", &j, ReportApi::OpenReports)[0];
    assert_eq!(o["apiVersion"], "openreports.io/v1alpha1");
    assert!(o["results"][0]["resources"].is_array());
    let cluster = cluster_report(ReportApi::OpenReports, [&j, &j2]);
    assert_eq!(cluster["kind"], "ClusterReport");
    assert_eq!(
        cluster["summary"]["fail"].as_u64().unwrap() + cluster["summary"]["warn"].as_u64().unwrap(),
        j.results.len() as u64
    );
}

#[test]
fn the_content_hash_sees_a_tampered_report_whatever_its_annotation_says() {
    let j = judged(&[deployment("web", "bad", true)], false);
    let report = namespace_reports("web", &j, ReportApi::OpenReports).remove(0);
    let hash = content_hash(&report);
    // As the API server returns it: keys in another order, more metadata,
    // a null field dropped.
    let mut served: Value = serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
    served["metadata"]["resourceVersion"] = "7".into();
    served["metadata"]["annotations"][WRITER_ANNOTATION] = "replica-a".into();
    let results = served["results"].as_array_mut().unwrap();
    results[0]["unset"] = Value::Null;
    let reordered: serde_json::Map<String, Value> = served
        .as_object()
        .unwrap()
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(content_hash(&Value::Object(reordered)), hash);
    // Emptied, the content-hash annotation kept.
    let mut tampered = report.clone();
    tampered["results"] = json!([]);
    tampered["summary"]["pass"] = 999.into();
    assert_eq!(hash_of(&tampered), hash_of(&report));
    assert_ne!(content_hash(&tampered), hash);
    let mut relabelled = report.clone();
    relabelled["metadata"]["labels"][MANAGED_BY.0] = "someone".into();
    assert_ne!(content_hash(&relabelled), hash);
}

#[test]
fn a_covered_finding_is_a_skip_result_counted_as_excepted_not_as_a_finding() {
    use crate::decision::exceptions::{DAY, Timestamp};
    let policy = Policy::default_policy();
    let now = Timestamp(1_800_000_000);
    let exception = json!({"apiVersion": "winadmit.io/v1alpha1", "kind": "PolicyException",
        "metadata": {"name": "legacy", "namespace": "winadmit",
            "creationTimestamp": Timestamp(now.0 - DAY).to_string()},
        "spec": {"rules": ["WIN-PRIVILEGED"], "match": {"names": ["bad"]},
            "reason": "the legacy agent", "expiresAt": Timestamp(now.0 + DAY).to_string()}});
    let (set, _) = crate::entry::exceptions::sort(&policy, "winadmit", &[exception], now);
    let cx = Context {
        exceptions: Some(&set),
        ..Context::default()
    };
    let objects = [
        deployment("web", "bad", true),
        deployment("web", "also-bad", true),
    ];
    let reports = judge(&policy, &cx, None, &objects);
    let j = results(
        &reports,
        Options {
            api: ReportApi::OpenReports,
            info: false,
        },
    );
    let of = |result: &str| {
        j.results
            .iter()
            .filter(|r| r["result"] == result && r["rule"] == "WIN-PRIVILEGED")
            .map(|r| r["resources"][0]["name"].as_str().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(of("skip"), ["bad"]);
    // Windows ignores `privileged` (a warning at the default target).
    assert_eq!(of("warn"), ["also-bad"], "{:#?}", j.results);
    let rule = |level| j.counts[&("WIN-PRIVILEGED".to_owned(), level)];
    assert_eq!((rule("warning"), rule(EXCEPTED)), (1, 1));

    // The metrics: the covered finding in `audit_findings_excepted` only.
    let mut registry = prometheus_client::registry::Registry::with_prefix("winadmit");
    let metrics = crate::entry::server::audit_metrics::AuditMetrics::register(&mut registry);
    metrics.set_findings(&finding_counts([("web", &j)]));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let sample = |name: &str| {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains("WIN-PRIVILEGED"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        sample("winadmit_audit_findings_excepted"),
        [r#"winadmit_audit_findings_excepted{namespace="web",rule="WIN-PRIVILEGED"} 1"#],
        "{text}"
    );
    assert_eq!(
        sample("winadmit_audit_findings"),
        [r#"winadmit_audit_findings{namespace="web",rule="WIN-PRIVILEGED",level="warning"} 1"#],
        "{text}"
    );
}

#[test]
fn the_cluster_report_sums_the_namespaces_tallies_info_results_left_out_of_pass() {
    let a = judged(
        &[
            deployment("web", "bad", true),
            deployment("web", "good", false),
        ],
        true,
    );
    let b = judged(&[deployment("api", "bad", true)], false);
    let count = |result: &str| {
        [&a, &b]
            .iter()
            .flat_map(|j| j.results.iter())
            .filter(|r| r["result"] == result)
            .count() as u64
    };
    assert!(
        count("pass") > 0,
        "info results are pass results: {:#?}",
        a.results
    );
    let cluster = cluster_report(ReportApi::OpenReports, [&a, &b]);
    assert_eq!(
        cluster["summary"],
        json!({"pass": a.clean + b.clean, "fail": count("fail"), "warn": count("warn"),
            "error": count("error"), "skip": count("skip")})
    );
    assert_eq!(
        cluster,
        cluster_report_of(ReportApi::OpenReports, [Tally::of(&a), Tally::of(&b)]),
        "the same report, hash included"
    );
}
