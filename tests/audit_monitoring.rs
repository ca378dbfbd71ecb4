//! The chart's PrometheusRule and Grafana dashboard for `winadmit audit`:
//! every expression parses as PromQL (promql-parser, the parser of
//! GreptimeDB, which follows Prometheus's grammar), and every metric an
//! expression names is one winadmit exports (the names of the metrics
//! registry the webhook and the audit share).

use std::collections::BTreeSet;
use std::path::Path;

use promql_parser::parser::{self, Expr};

fn chart() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/winadmit")
}

/// The sample names winadmit exports: each family's name, with `_total`
/// for counters and the histogram series.
fn exported() -> BTreeSet<String> {
    let text = winadmit::entry::server::Metrics::new().render();
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
    if !used.iter().any(|n| n.starts_with("winadmit_audit_")) {
        problems.push(format!("{what}: {expr:?} names no winadmit_audit_ metric"));
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
