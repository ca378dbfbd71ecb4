//! The chart's PrometheusRule and Grafana dashboard for `winadmit audit`:
//! every expression parses as PromQL (promql-parser, the parser of
//! GreptimeDB, which follows Prometheus's grammar), and every metric an
//! expression names is one winadmit exports (the names of the metrics
//! registry the webhook and the audit share). With helm (built from Go
//! modules, `tests/helm/`), the chart rendered with the audit on: the
//! PrometheusRule's expressions as rendered, the dashboard ConfigMap, the
//! CRDs of the chosen report API and the audit's RBAC. With promtool too
//! (`tests/promtool/`), every alert of the rendered PrometheusRule
//! evaluated by `promtool test rules` on series of its condition: it fires
//! with its labels and annotations, and stays quiet on series beside it.

use crate::helm_support as helm;

use std::collections::BTreeSet;
use std::path::Path;

use promql_parser::parser::{self, Expr};

fn chart() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/winadmit")
}

/// The sample names winadmit exports: each family's name, with `_total`
/// for counters and the histogram series.
fn exported() -> BTreeSet<String> {
    // A family is rendered once it has a sample: give the audit's some.
    let metrics = winadmit::entry::server::Metrics::new();
    let audit = metrics.audit();
    let mut counts = winadmit::entry::server::audit_metrics::FindingCounts::new();
    counts.insert(("ns".into(), "WIN-PRIVILEGED".into(), "error"), 1);
    audit.set_findings(&counts);
    audit.write("applied");
    let text = metrics.render();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').unwrap();
        match kind {
            "counter" => {
                out.insert(format!("{name}_total"));
            }
            "histogram" => {
                for s in ["_bucket", "_sum", "_count"] {
                    out.insert(format!("{name}{s}"));
                }
            }
            _ => {
                out.insert(name.to_owned());
            }
        }
    }
    out
}

/// The metric names an expression selects.
fn names(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Aggregate(a) => {
            names(&a.expr, out);
            if let Some(p) = &a.param {
                names(p, out);
            }
        }
        Expr::Unary(u) => names(&u.expr, out),
        Expr::Binary(b) => {
            names(&b.lhs, out);
            names(&b.rhs, out);
        }
        Expr::Paren(p) => names(&p.expr, out),
        Expr::Subquery(s) => names(&s.expr, out),
        Expr::VectorSelector(v) => out.extend(v.name.clone()),
        Expr::MatrixSelector(m) => out.extend(m.vs.name.clone()),
        Expr::Call(c) => c.args.args.iter().for_each(|a| names(a, out)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// Parses `expr` and checks the metrics it names; the problems found.
fn check(what: &str, expr: &str, exported: &BTreeSet<String>) -> Vec<String> {
    let parsed = match parser::parse(expr) {
        Ok(e) => e,
        Err(e) => return vec![format!("{what}: {expr:?} does not parse: {e}")],
    };
    let mut used = Vec::new();
    names(&parsed, &mut used);
    let mut problems: Vec<String> = used
        .iter()
        .filter(|n| !exported.contains(*n))
        .map(|n| format!("{what}: {expr:?} names {n}, which winadmit does not export"))
        .collect();
    // The audit's own metrics, or the PolicyException gauges the audit
    // keeps too (docs/exceptions.md).
    if !used
        .iter()
        .any(|n| n.starts_with("winadmit_audit_") || n.starts_with("winadmit_exceptions_"))
    {
        problems.push(format!(
            "{what}: {expr:?} names no winadmit_audit_ or winadmit_exceptions_ metric"
        ));
    }
    problems
}

#[test]
fn prometheus_rule_expressions_parse_and_name_exported_metrics() {
    let exported = exported();
    assert!(exported.contains("winadmit_audit_findings"), "{exported:?}");
    let text = std::fs::read_to_string(chart().join("templates/audit-monitoring.yaml")).unwrap();
    // The expressions are literal YAML scalars in the template.
    let exprs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr: "))
        .collect();
    assert!(exprs.len() >= 4, "{exprs:?}");
    let problems: Vec<String> = exprs
        .iter()
        .flat_map(|e| check("PrometheusRule", e, &exported))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn dashboard_queries_parse_and_name_exported_metrics() {
    let exported = exported();
    let text =
        std::fs::read_to_string(chart().join("files/dashboards/winadmit-audit.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut problems = Vec::new();
    let mut n = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            n += 1;
            let title = panel["title"].as_str().unwrap_or("?");
            problems.extend(check(
                &format!("panel {title:?}"),
                target["expr"].as_str().unwrap(),
                &exported,
            ));
        }
    }
    assert!(n >= 5, "{n} queries");
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_misspelt_metric_is_caught() {
    let exported = exported();
    assert!(!check("t", "sum(winadmit_audit_finding)", &exported).is_empty());
    assert!(!check("t", "sum(winadmit_audit_findings", &exported).is_empty());
    assert!(check("t", "sum by (rule) (winadmit_audit_findings)", &exported).is_empty());
}

/// `helm template` of the chart with the audit and its extras on.
fn rendered(extra: &[&str]) -> Vec<serde_json::Value> {
    let helm = helm::helm("audit_monitoring");
    let chart = helm::chart();
    let mut args = vec![
        "template",
        "winadmit",
        chart.to_str().unwrap(),
        "--namespace",
        "winadmit",
        "-f",
    ];
    let values = chart.join("ci/everything-values.yaml");
    args.push(values.to_str().unwrap());
    args.extend(extra);
    serde_saphyr::from_multiple::<serde_json::Value>(&helm.ok(&args))
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn named<'a>(objects: &'a [serde_json::Value], kind: &str, name: &str) -> &'a serde_json::Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the render"))
}

#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn the_chart_renders_the_audit_its_alerts_dashboard_and_crds() {
    let exported = exported();
    let objects = rendered(&[]);
    let rule = named(&objects, "PrometheusRule", "winadmit-audit");
    let mut problems = Vec::new();
    let mut n = 0;
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for r in group["rules"].as_array().unwrap() {
            n += 1;
            let alert = r["alert"].as_str().unwrap();
            problems.extend(check(alert, r["expr"].as_str().unwrap(), &exported));
            // Alert templates survive helm's own templating.
            let summary = r["annotations"]["summary"].as_str().unwrap();
            assert!(!summary.contains("{{`"), "{alert}: {summary}");
        }
    }
    assert!(n >= 4 && problems.is_empty(), "{n} rules: {problems:#?}");
    let dashboard = named(&objects, "ConfigMap", "winadmit-audit-dashboard");
    let json = dashboard["data"]["winadmit-audit.json"].as_str().unwrap();
    let file =
        std::fs::read_to_string(chart().join("files/dashboards/winadmit-audit.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(json).unwrap(),
        serde_json::from_str::<serde_json::Value>(&file).unwrap()
    );
    let args =
        named(&objects, "Deployment", "winadmit-audit")["spec"]["template"]["spec"]["containers"]
            [0]["args"]
            .clone();
    assert_eq!(args[0], "audit", "{args}");
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--report-api=openreports"),
        "{args}"
    );
    // PolicyExceptions count in the release namespace, and the audit may
    // read them.
    let env = &named(&objects, "Deployment", "winadmit-audit")["spec"]["template"]["spec"]["containers"]
        [0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "WINADMIT_NAMESPACE"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"),
        "{env}"
    );
    let reads_exceptions = named(&objects, "ClusterRole", "winadmit-audit")["rules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| {
            r["apiGroups"][0] == "winadmit.io"
                && r["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == "policyexceptions")
                && ["list", "watch"]
                    .iter()
                    .all(|v| r["verbs"].as_array().unwrap().iter().any(|x| x == v))
        });
    assert!(
        reads_exceptions,
        "the audit lists and watches PolicyExceptions"
    );
    let crds: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        crds,
        ["reports.openreports.io", "clusterreports.openreports.io"]
    );

    let objects = rendered(&["--set", "audit.reportApi=policyreport"]);
    let crds: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        crds,
        [
            "policyreports.wgpolicyk8s.io",
            "clusterpolicyreports.wgpolicyk8s.io"
        ]
    );
    let role = named(&objects, "ClusterRole", "winadmit-audit");
    let writes = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["apiGroups"][0] == "wgpolicyk8s.io")
        .expect("the audit may write PolicyReports");
    assert!(
        writes["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "patch"),
        "{writes}"
    );
}

#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn the_chart_admits_report_writes_only_from_the_lease_holder() {
    for api in ["openreports", "policyreport"] {
        let objects = rendered(&["--set", &format!("audit.reportApi={api}")]);
        let policy = named(
            &objects,
            "ValidatingAdmissionPolicy",
            "winadmit-audit-writer",
        );
        let spec = &policy["spec"];
        assert_eq!(spec["failurePolicy"], "Fail");
        assert_eq!(spec["paramKind"]["kind"], "Lease");
        assert_eq!(spec["paramKind"]["apiVersion"], "coordination.k8s.io/v1");
        // Every version of both report APIs: no other version is a way around.
        assert_eq!(spec["matchConstraints"]["matchPolicy"], "Equivalent");
        let rule = &spec["matchConstraints"]["resourceRules"][0];
        assert_eq!(rule["apiVersions"], serde_json::json!(["*"]));
        assert_eq!(
            rule["operations"],
            serde_json::json!(["CREATE", "UPDATE", "DELETE"])
        );
        let role = named(&objects, "ClusterRole", "winadmit-audit");
        for r in role["rules"].as_array().unwrap() {
            if r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v == "create" || v == "patch" || v == "delete")
                && r["apiGroups"][0] != "authorization.k8s.io"
            {
                // Every resource the audit may write is matched.
                for res in r["resources"].as_array().unwrap() {
                    assert!(
                        rule["resources"].as_array().unwrap().contains(res),
                        "{res} is written by the audit and not matched"
                    );
                }
            }
        }
        // The release's audit service account, and its Lease.
        assert_eq!(
            spec["matchConditions"][0]["expression"],
            "request.userInfo.username == 'system:serviceaccount:winadmit:winadmit-audit'"
        );
        let binding = named(
            &objects,
            "ValidatingAdmissionPolicyBinding",
            "winadmit-audit-writer",
        );
        assert_eq!(
            binding["spec"]["paramRef"],
            serde_json::json!({"name": "winadmit-audit", "namespace": "winadmit",
                "parameterNotFoundAction": "Allow"})
        );
        assert_eq!(
            binding["spec"]["validationActions"],
            serde_json::json!(["Deny"])
        );
    }
}

/// promtool, built by `tests/promtool/build.sh` into `target/promtool/bin`
/// (or `$CARGO_TARGET_DIR/promtool/bin`).
fn promtool() -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |t| root.join(t));
    let bin = target.join("promtool/bin/promtool");
    assert!(
        bin.is_file(),
        "promtool is not built in {}: run tests/promtool/build.sh (Go 1.26)",
        bin.display()
    );
    bin
}

/// One group of `promtool test rules`: series scraped once a minute, and
/// whether `alert` fires once they have held longer than its `for`.
struct AlertCase {
    alert: &'static str,
    /// What the series show, as the group's name in promtool's output.
    name: &'static str,
    /// Series and their values in promtool's notation: `2x40` is 2 for 41
    /// samples, `0+1x40` counts up from 0.
    series: &'static [(&'static str, &'static str)],
    /// `None`: no alert.
    fires: Option<Fires>,
}

/// An alert firing: the labels its expression keeps (the rule's own labels
/// are added from the chart), and the text promtool renders for each
/// template of the rule's annotations.
struct Fires {
    labels: &'static [(&'static str, &'static str)],
    templates: &'static [(&'static str, &'static str)],
}

/// A condition for each alert of the chart's PrometheusRule, and the
/// series on either side of it.
const ALERT_CASES: &[AlertCase] = &[
    AlertCase {
        alert: "WinadmitExceptionsEndingSoon",
        name: "two PolicyExceptions end within 7 days",
        series: &[
            (
                r#"winadmit_exceptions_ending_soon{pod="winadmit-0"}"#,
                "2x40",
            ),
            (
                r#"winadmit_exceptions_ending_soon{pod="winadmit-audit-0"}"#,
                "2x40",
            ),
        ],
        fires: Some(Fires {
            labels: &[],
            templates: &[("{{ $value }}", "2")],
        }),
    },
    AlertCase {
        alert: "WinadmitExceptionsEndingSoon",
        name: "no PolicyException ends within 7 days",
        series: &[(
            r#"winadmit_exceptions_ending_soon{pod="winadmit-0"}"#,
            "0x40",
        )],
        fires: None,
    },
    AlertCase {
        alert: "WinadmitExceptionsEndingSoon",
        name: "the exception gauges are not scraped",
        series: &[(r#"winadmit_audit_leader{pod="winadmit-audit-0"}"#, "1x40")],
        fires: None,
    },
    AlertCase {
        alert: "WinadmitAuditErrorFindings",
        name: "error findings in a namespace",
        series: &[(
            r#"winadmit_audit_findings{namespace="shop",rule="WIN-PRIVILEGED",level="error"}"#,
            "3x40",
        )],
        fires: Some(Fires {
            labels: &[("namespace", "shop"), ("rule", "WIN-PRIVILEGED")],
            templates: &[
                ("{{ $value }}", "3"),
                ("{{ $labels.namespace }}", "shop"),
                ("{{ $labels.rule }}", "WIN-PRIVILEGED"),
            ],
        }),
    },
    AlertCase {
        alert: "WinadmitAuditErrorFindings",
        name: "warning findings only, and an error count back at 0",
        series: &[
            (
                r#"winadmit_audit_findings{namespace="shop",rule="WIN-HOSTNETWORK",level="warning"}"#,
                "3x40",
            ),
            (
                r#"winadmit_audit_findings{namespace="shop",rule="WIN-PRIVILEGED",level="error"}"#,
                "0x40",
            ),
        ],
        fires: None,
    },
    AlertCase {
        alert: "WinadmitAuditBehind",
        name: "the oldest change not judged is 10 minutes old",
        series: &[(
            r#"winadmit_audit_lag_seconds{pod="winadmit-audit-0"}"#,
            "600x40",
        )],
        fires: Some(Fires {
            labels: &[],
            templates: &[("{{ $value | humanizeDuration }}", "10m 0s")],
        }),
    },
    AlertCase {
        alert: "WinadmitAuditBehind",
        name: "the oldest change not judged is 5 minutes old",
        series: &[(
            r#"winadmit_audit_lag_seconds{pod="winadmit-audit-0"}"#,
            "300x40",
        )],
        fires: None,
    },
    AlertCase {
        alert: "WinadmitAuditNoLeader",
        name: "no replica holds the Lease",
        series: &[
            (r#"winadmit_audit_leader{pod="winadmit-audit-0"}"#, "0x40"),
            (r#"winadmit_audit_leader{pod="winadmit-audit-1"}"#, "0x40"),
        ],
        fires: Some(Fires {
            labels: &[],
            templates: &[],
        }),
    },
    AlertCase {
        alert: "WinadmitAuditNoLeader",
        name: "no audit replica is scraped",
        series: &[(
            r#"winadmit_exceptions_ending_soon{pod="winadmit-0"}"#,
            "0x40",
        )],
        fires: Some(Fires {
            labels: &[],
            templates: &[],
        }),
    },
    AlertCase {
        alert: "WinadmitAuditNoLeader",
        name: "one replica of two holds the Lease",
        series: &[
            (r#"winadmit_audit_leader{pod="winadmit-audit-0"}"#, "1x40"),
            (r#"winadmit_audit_leader{pod="winadmit-audit-1"}"#, "0x40"),
        ],
        fires: None,
    },
    AlertCase {
        alert: "WinadmitAuditWritesFailing",
        name: "a report write fails every minute",
        series: &[(
            r#"winadmit_audit_report_writes_total{result="failed"}"#,
            "0+1x40",
        )],
        fires: Some(Fires {
            labels: &[],
            templates: &[],
        }),
    },
    AlertCase {
        alert: "WinadmitAuditWritesFailing",
        name: "writes succeed; the failures counted before do not grow",
        series: &[
            (
                r#"winadmit_audit_report_writes_total{result="failed"}"#,
                "4x40",
            ),
            (
                r#"winadmit_audit_report_writes_total{result="applied"}"#,
                "0+5x40",
            ),
        ],
        fires: None,
    },
    AlertCase {
        alert: "WinadmitAuditReportsEdited",
        name: "one report written back after an edit",
        series: &[(
            r#"winadmit_audit_report_writes_total{result="repaired"}"#,
            "0 0 1x40",
        )],
        // The counter starts at 0, so the hour's increase is not
        // extrapolated: exactly 1.
        fires: Some(Fires {
            labels: &[],
            templates: &[("{{ $value }}", "1")],
        }),
    },
    AlertCase {
        alert: "WinadmitAuditReportsEdited",
        name: "reports written, none repaired",
        series: &[
            (
                r#"winadmit_audit_report_writes_total{result="repaired"}"#,
                "2x40",
            ),
            (
                r#"winadmit_audit_report_writes_total{result="applied"}"#,
                "0+5x40",
            ),
        ],
        fires: None,
    },
];

/// Minutes in a rule's `for` (`15m`, `1h`); 0 without one.
fn for_minutes(rule: &serde_json::Value) -> u64 {
    let Some(d) = rule["for"].as_str() else {
        return 0;
    };
    let (n, unit) = d.split_at(d.len() - 1);
    let n: u64 = n
        .parse()
        .unwrap_or_else(|_| panic!("for: {d}: expected minutes or hours"));
    match unit {
        "m" => n,
        "h" => n * 60,
        _ => panic!("for: {d}: expected minutes (m) or hours (h)"),
    }
}

/// promtool's group for `case` of `rule`: evaluated 5 minutes after the
/// rule's `for` has passed, and, for an alert that fires after a `for`, a
/// minute before it has (still pending: no alert).
fn promtool_group(case: &AlertCase, rule: &serde_json::Value) -> serde_json::Value {
    let wait = for_minutes(rule);
    let expected: Vec<serde_json::Value> = case
        .fires
        .iter()
        .map(|fires| {
            let mut labels = rule["labels"].clone();
            for (k, v) in fires.labels {
                labels[*k] = (*v).into();
            }
            let mut annotations = rule["annotations"].clone();
            for (key, text) in annotations.as_object_mut().unwrap() {
                let mut s = text.as_str().unwrap().to_owned();
                for (template, value) in fires.templates {
                    s = s.replace(template, value);
                }
                assert!(
                    !s.contains("{{"),
                    "{}: annotation {key} has a template the case {:?} gives no text for: {s}",
                    case.alert,
                    case.name
                );
                *text = s.into();
            }
            serde_json::json!({"exp_labels": labels, "exp_annotations": annotations})
        })
        .collect();
    let mut tests = vec![serde_json::json!({
        "eval_time": format!("{}m", wait + 5),
        "alertname": case.alert,
        "exp_alerts": expected,
    })];
    if case.fires.is_some() && wait > 0 {
        tests.push(serde_json::json!({
            "eval_time": format!("{}m", wait - 1),
            "alertname": case.alert,
            "exp_alerts": [],
        }));
    }
    let series: Vec<serde_json::Value> = case
        .series
        .iter()
        .map(|(s, v)| serde_json::json!({"series": s, "values": v}))
        .collect();
    serde_json::json!({
        "name": format!("{}: {}", case.alert, case.name),
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": tests,
    })
}

#[test]
#[cfg_attr(
    any(no_helm, no_promtool),
    ignore = "needs helm and promtool, which are not both built: run tests/helm/build.sh and tests/promtool/build.sh"
)]
fn every_alert_fires_on_its_condition_and_stays_quiet_otherwise() {
    let objects = rendered(&[]);
    let rule = named(&objects, "PrometheusRule", "winadmit-audit");
    let groups = &rule["spec"]["groups"];
    let rules: Vec<&serde_json::Value> = groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    let by_name = |alert: &str| {
        rules
            .iter()
            .find(|r| r["alert"] == alert)
            .unwrap_or_else(|| panic!("no alert {alert} in the chart's PrometheusRule"))
    };
    // promtool passes a test of an alert no rule defines when it expects
    // none; every alert of the chart is tested both ways.
    for r in &rules {
        let alert = r["alert"].as_str().unwrap();
        let cases = ALERT_CASES.iter().filter(|c| c.alert == alert);
        let (firing, quiet): (Vec<_>, Vec<_>) = cases.partition(|c| c.fires.is_some());
        assert!(
            !firing.is_empty() && !quiet.is_empty(),
            "{alert}: give ALERT_CASES a case where it fires and one where it does not"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let rules_file = serde_json::json!({ "groups": groups });
    std::fs::write(dir.path().join("rules.json"), rules_file.to_string()).unwrap();
    let tests: Vec<serde_json::Value> = ALERT_CASES
        .iter()
        .map(|c| promtool_group(c, by_name(c.alert)))
        .collect();
    let unit_tests = serde_json::json!({
        "rule_files": ["rules.json"],
        "evaluation_interval": "1m",
        "tests": tests,
    });
    let tests_file = dir.path().join("tests.json");
    std::fs::write(&tests_file, unit_tests.to_string()).unwrap();

    let out = std::process::Command::new(promtool())
        .args(["test", "rules"])
        .arg(&tests_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool test rules on the chart's alerts failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
