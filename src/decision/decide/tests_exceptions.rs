//! PolicyExceptions in the decision: which count, what they cover, and
//! what the decision says of a covered finding.

use serde_json::{Value, json};

use crate::decision::decide::{self, Operation, PatchSource, Request, Verdict};
use crate::decision::engine::Context;
use crate::decision::exceptions::{Exception, ExceptionSet, Timestamp};
use crate::decision::gmsa::Facts;
use crate::decision::policy::Policy;

const NOW: &str = "2026-06-01T00:00:00Z";

fn now() -> Timestamp {
    Timestamp::parse(NOW).unwrap()
}

fn exception(namespace: &str, spec: Value) -> Value {
    json!({"apiVersion": "winadmit.io/v1alpha1", "kind": "PolicyException",
        "metadata": {"name": "legacy-web", "namespace": namespace,
            "creationTimestamp": "2026-05-30T00:00:00Z"},
        "spec": spec})
}

fn host_network_spec() -> Value {
    json!({"rules": ["WIN-HOSTNETWORK"], "match": {"namespaces": ["web"], "kinds": ["Pod"], "names": ["web-*"]},
        "reason": "the legacy agent listens on the node", "ticket": "OPS-1", "expiresAt": "2026-07-01T00:00:00Z"})
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "web", "labels": {"app": "web"}},
        "spec": {"serviceAccountName": "app", "hostNetwork": true,
            "nodeSelector": {"kubernetes.io/os": "windows"},
            "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "domain-admin"}},
            "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
                "resources": {"limits": {"memory": "1Gi"}}}]}})
}

fn set(policy: &Policy, objects: &[Value], at: Timestamp) -> ExceptionSet {
    let read = objects
        .iter()
        .map(|o| Exception::from_object(o, None).unwrap());
    ExceptionSet::new(&policy.exceptions, "winadmit", read, at)
}

fn decide_with(
    policy: &Policy,
    exceptions: &ExceptionSet,
    doc: &Value,
    gmsa: Option<&Facts>,
) -> decide::Decision {
    let cx = Context {
        exceptions: Some(exceptions),
        gmsa,
        ..Context::default()
    };
    let view = policy.pod_templates.read(doc).unwrap();
    let w = crate::decision::workload::Workload::from_view(&view).unwrap();
    decide::decide(
        policy,
        &cx,
        &w,
        &Request {
            labels: &|_, _| None,
            mode: None,
            user: None,
            operation: Operation::Create,
            patch: PatchSource::None,
            reach: true,
        },
    )
}

#[test]
fn a_covered_finding_is_kept_marked_and_not_counted() {
    let policy = Policy::default_policy();
    let none = set(&policy, &[], now());
    assert_eq!(
        decide_with(&policy, &none, &pod("web-1"), None).validation,
        Verdict::Deny
    );
    let granted = set(
        &policy,
        &[exception("winadmit", host_network_spec())],
        now(),
    );
    assert!(granted.ignored.is_empty(), "{:?}", granted.ignored);
    let d = decide_with(&policy, &granted, &pod("web-1"), None);
    assert_eq!(d.validation, Verdict::Allow, "{:?}", d.evaluation.findings);
    let e = &d.evaluation.excepted;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].finding.rule, "WIN-HOSTNETWORK");
    assert_eq!(e[0].exception.name, "legacy-web");
    assert_eq!(e[0].exception.ticket.as_deref(), Some("OPS-1"));
    assert_eq!(
        d.evaluation.skipped[0].exception.as_ref(),
        Some(&e[0].exception)
    );
    let warnings = d.warnings();
    assert_eq!(
        warnings,
        [
            "WIN-HOSTNETWORK excepted by PolicyException winadmit/legacy-web until 2026-07-01T00:00:00Z: the legacy agent listens on the node"
        ]
    );
    // Another name, another namespace, another kind: not covered.
    assert_eq!(
        decide_with(&policy, &granted, &pod("api-1"), None).validation,
        Verdict::Deny
    );
    let mut other = pod("web-1");
    other["metadata"]["namespace"] = json!("api");
    assert_eq!(
        decide_with(&policy, &granted, &other, None).validation,
        Verdict::Deny
    );
}

#[test]
fn only_listed_namespaces_and_lifetimes_count() {
    let policy = Policy::default_policy();
    // The workload's own namespace is not listed: ignored, says why.
    let s = set(&policy, &[exception("web", host_network_spec())], now());
    assert!(s.is_empty());
    assert!(
        s.ignored[0].why.contains("exceptions.namespaces: winadmit"),
        "{:?}",
        s.ignored
    );
    assert_eq!(
        decide_with(&policy, &s, &pod("web-1"), None).validation,
        Verdict::Deny
    );
    let listed = Policy::from_yaml("p.yaml", "exceptions: {namespaces: [platform]}\n").unwrap();
    assert!(
        !set(
            &listed,
            &[exception("platform", host_network_spec())],
            now()
        )
        .is_empty()
    );
    assert!(
        set(
            &listed,
            &[exception("winadmit", host_network_spec())],
            now()
        )
        .is_empty()
    );
    // Ended: ignored from its end date on.
    let end = Timestamp::parse("2026-07-01T00:00:00Z").unwrap();
    let ended = set(&policy, &[exception("winadmit", host_network_spec())], end);
    assert!(ended.is_empty());
    assert_eq!(ended.ignored[0].why, "ended at 2026-07-01T00:00:00Z");
    assert_eq!(
        set(
            &policy,
            &[exception("winadmit", host_network_spec())],
            now()
        )
        .next_end,
        Some(end)
    );
    // Beyond creation plus the longest lifetime (90 days by default).
    let mut long = host_network_spec();
    long["expiresAt"] = json!("2026-09-01T00:00:00Z");
    let s = set(&policy, &[exception("winadmit", long.clone())], now());
    assert!(
        s.ignored[0].why.contains("longest lifetime (90 days"),
        "{:?}",
        s.ignored
    );
    let longer = Policy::from_yaml("p.yaml", "exceptions: {maxLifetimeDays: 365}\n").unwrap();
    assert!(!set(&longer, &[exception("winadmit", long)], now()).is_empty());
}

#[test]
fn gmsa_rules_are_excepted_only_when_the_policy_names_them() {
    let facts = super::tests::domain_admin_not_authorized();
    let spec = json!({"rules": ["WIN-GMSA-NOT-AUTHORIZED", "WIN-HOSTNETWORK"], "reason": "migration", "expiresAt": "2026-07-01T00:00:00Z"});
    let policy = Policy::default_policy();
    let s = set(&policy, &[exception("winadmit", spec.clone())], now());
    let d = decide_with(&policy, &s, &pod("web-1"), Some(&facts));
    assert_eq!(d.validation, Verdict::Deny);
    let rules: Vec<_> = d.denied().map(|f| f.rule).collect();
    assert_eq!(rules, ["WIN-GMSA-NOT-AUTHORIZED"]);
    let named = Policy::from_yaml(
        "p.yaml",
        "exceptions: {boundaryRules: [WIN-GMSA-NOT-AUTHORIZED]}\n",
    )
    .unwrap();
    let s = set(&named, &[exception("winadmit", spec)], now());
    assert_eq!(
        decide_with(&named, &s, &pod("web-1"), Some(&facts)).validation,
        Verdict::Allow
    );
    let e = Policy::from_yaml("p.yaml", "exceptions: {boundaryRules: [WIN-HOSTNETWORK]}\n")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("not a rule that guards a security boundary"),
        "{e}"
    );
}

#[test]
fn containers_images_and_selectors_narrow_what_is_covered() {
    let policy = Policy::default_policy();
    let mut doc = pod("web-1");
    doc["spec"]["hostNetwork"] = json!(false);
    doc["spec"]["containers"][0]["resources"] = json!({});
    let with = |m: Value| {
        let spec = json!({"rules": ["WIN-MEMORY-LIMITS"], "match": m, "reason": "sized by the vendor", "expiresAt": "2026-07-01T00:00:00Z"});
        let s = set(&policy, &[exception("winadmit", spec)], now());
        decide_with(&policy, &s, &doc, None)
            .evaluation
            .excepted
            .len()
    };
    assert_eq!(with(json!({})), 1);
    assert_eq!(with(json!({"containers": ["c"]})), 1);
    assert_eq!(with(json!({"containers": ["other"]})), 0);
    assert_eq!(with(json!({"images": ["mcr.microsoft.com/windows/*"]})), 1);
    assert_eq!(with(json!({"images": ["docker.io/*"]})), 0);
    assert_eq!(
        with(json!({"selector": {"matchLabels": {"app": "web"}}})),
        1
    );
    assert_eq!(
        with(json!({"selector": {"matchLabels": {"app": "api"}}})),
        0
    );
}

#[test]
fn bad_exceptions_are_refused_naming_the_field() {
    let read =
        |spec: Value| Exception::from_object(&exception("winadmit", spec), None).unwrap_err();
    let e = read(json!({"rules": ["WIN-HOSTNETWORK"], "expiresAt": "2026-07-01T00:00:00Z"}));
    assert!(e.contains("reason"), "{e}");
    let e = read(
        json!({"rules": ["WIN-HOSTNETWORK"], "reason": " ", "expiresAt": "2026-07-01T00:00:00Z"}),
    );
    assert!(e.starts_with("spec.reason"), "{e}");
    let e = read(json!({"rules": ["WIN-HOSTNETWORK"], "reason": "x"}));
    assert!(e.contains("expiresAt"), "{e}");
    let e = read(json!({"rules": ["WIN-HOSTNETWORK"], "reason": "x", "expiresAt": "soon"}));
    assert!(e.starts_with("spec.expiresAt"), "{e}");
}
