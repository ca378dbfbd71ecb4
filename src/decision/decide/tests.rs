//! The decision over pods that name gMSA credential specs, with the
//! cluster's gMSA facts: the patch that fills in a credential spec's
//! contents, and the rules that no annotation skips and every mode enforces.

use serde_json::{Value, json};

use crate::decision::gmsa::{Authz, CredSpec, Facts};

/// /mutate fills the contents in at every place where only the name is
/// set, with the canonical JSON, and the patched pod yields no patch.
#[test]
fn the_patch_inlines_the_credential_spec_everywhere_and_settles() {
    use crate::decision::decide::{self, PatchSource, Request};
    use crate::decision::policy::Policy;
    let stored = json!({"b": "<x>", "a": 1});
    let mut facts = Facts {
        complete: true,
        ..Facts::default()
    };
    facts
        .specs
        .insert("webapp1".into(), CredSpec::Found(Some(stored.clone())));
    let options = json!({"windowsOptions": {"gmsaCredentialSpecName": "webapp1"}});
    let container = |name: &str| json!({"name": name, "image": "mcr.microsoft.com/windows/servercore:ltsc2022", "securityContext": options});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"securityContext": options, "initContainers": [container("init")],
                 "containers": [container("a"), {"name": "b", "image": "x"}], "ephemeralContainers": [container("d")]}});
    let policy = Policy::default_policy();
    let cx = crate::decision::engine::Context {
        gmsa: Some(&facts),
        ..crate::decision::engine::Context::default()
    };
    let decide_on = |doc: &Value| {
        let view = policy.pod_templates.read(doc).unwrap();
        let w = crate::decision::workload::Workload::from_view(&view).unwrap();
        decide::decide(
            &policy,
            &cx,
            &w,
            &Request::manifest(PatchSource::Preview(doc)),
        )
    };
    let d = decide_on(&pod);
    let paths: Vec<String> = d
        .patch
        .ops
        .iter()
        .filter(|op| op.path().as_str().ends_with("gmsaCredentialSpec"))
        .map(|op| op.path().as_str().to_owned())
        .collect();
    assert_eq!(
        paths,
        [
            "/spec/securityContext/windowsOptions/gmsaCredentialSpec",
            "/spec/initContainers/0/securityContext/windowsOptions/gmsaCredentialSpec",
            "/spec/containers/0/securityContext/windowsOptions/gmsaCredentialSpec",
            "/spec/ephemeralContainers/0/securityContext/windowsOptions/gmsaCredentialSpec",
        ]
    );
    assert!(
        d.patch
            .fixed_rules()
            .contains(&crate::decision::rules::gmsa_inline::ID)
    );
    let patched = d.patched.clone().unwrap();
    assert_eq!(
        patched.pointer("/spec/containers/0/securityContext/windowsOptions/gmsaCredentialSpec"),
        Some(&json!(r#"{"a":1,"b":"\u003cx\u003e"}"#))
    );
    assert_eq!(patched.pointer("/spec/containers/1/securityContext"), None);
    let again = decide_on(&patched);
    assert!(
        again
            .patch
            .ops
            .iter()
            .all(|op| !op.path().as_str().ends_with("gmsaCredentialSpec")),
        "{:?}",
        again.patch.ops
    );
    assert!(
        again
            .evaluation
            .findings
            .iter()
            .all(|f| !f.rule.starts_with("WIN-GMSA"))
    );
    // Unknown facts: nothing to fill in, nothing reported.
    let silent = crate::decision::engine::Context::default();
    let view = policy.pod_templates.read(&pod).unwrap();
    let w = crate::decision::workload::Workload::from_view(&view).unwrap();
    let eval = crate::decision::engine::evaluate(&policy, &w, &silent);
    assert!(
        eval.findings
            .iter()
            .all(|f| !f.rule.starts_with("WIN-GMSA"))
    );
}

/// gMSA facts in which the credential spec `domain-admin` exists and the
/// service account `web/app` may not use it.
pub(super) fn domain_admin_not_authorized() -> Facts {
    let mut facts = Facts {
        complete: true,
        ..Facts::default()
    };
    facts.specs.insert(
        "domain-admin".into(),
        CredSpec::Found(Some(json!({"a": 1}))),
    );
    facts.authz.insert(
        ("web".into(), "app".into(), "domain-admin".into()),
        Authz {
            allowed: false,
            reason: String::new(),
        },
    );
    facts
}

/// The skip model: a gMSA boundary rule is never skipped by an
/// annotation and is enforced in every mode; other rules are skipped
/// as the policy's `skips` block says, and the denial offers the
/// opt-out only for those.
#[test]
fn boundary_rules_are_never_skipped_and_enforced_in_every_mode() {
    use crate::decision::decide::{self, Operation, PatchSource, Request, Verdict};
    use crate::decision::policy::{Mode, Policy};
    let facts = domain_admin_not_authorized();
    let cx = crate::decision::engine::Context {
        gmsa: Some(&facts),
        ..crate::decision::engine::Context::default()
    };
    let pod = |annotations: Value, host_network: bool| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "web", "annotations": annotations},
            "spec": {"serviceAccountName": "app", "hostNetwork": host_network,
                "nodeSelector": {"kubernetes.io/os": "windows"},
                "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "domain-admin"}},
                "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
                    "resources": {"limits": {"memory": "1Gi"}}}]}})
    };
    let decide_with = |policy: &Policy, doc: &Value, mode: Option<Mode>| {
        let view = policy.pod_templates.read(doc).unwrap();
        let w = crate::decision::workload::Workload::from_view(&view).unwrap();
        let d = decide::decide(
            policy,
            &cx,
            &w,
            &Request {
                labels: &|_, _| None,
                mode,
                user: None,
                operation: Operation::Create,
                patch: PatchSource::None,
                reach: true,
            },
        );
        let message = d.denial_message(&w);
        (d, message)
    };
    let skip_all = json!({
        "winadmit.io/skip.WIN-GMSA-NOT-AUTHORIZED": "x",
        "winadmit.io/skip.WIN-GMSA-CONTENTS-MISMATCH": "x",
        "winadmit.io/skip.WIN-HOSTNETWORK": "legacy",
    });
    let policy = Policy::default_policy();
    // The annotation does not skip the boundary rule; in every mode it denies.
    for mode in [None, Some(Mode::Audit), Some(Mode::Warn)] {
        let (d, message) = decide_with(&policy, &pod(skip_all.clone(), false), mode);
        assert_eq!(d.validation, Verdict::Deny, "{mode:?}");
        assert!(
            d.evaluation.skipped.is_empty(),
            "{:?}",
            d.evaluation.skipped
        );
        let message = message.unwrap();
        assert!(message.contains("WIN-GMSA-NOT-AUTHORIZED"), "{message}");
        assert!(!message.contains("to opt out"), "{message}");
    }
    // A rule the policy lets an annotation skip is skipped...
    let (d, _) = decide_with(&policy, &pod(skip_all.clone(), true), None);
    assert!(
        d.evaluation
            .skipped
            .iter()
            .any(|s| s.rule == "WIN-HOSTNETWORK")
    );
    // ... and the denial names it as the one opt-out there is.
    let (_, message) = decide_with(&policy, &pod(json!({}), true), None);
    let message = message.unwrap();
    assert!(
        message.contains("to opt out of WIN-HOSTNETWORK, annotate the pod"),
        "{message}"
    );
    // Off entirely, per rule, per namespace: the annotation counts only
    // where the operator says; the denial then offers nothing.
    for yaml in [
        "skips: {allowed: false}\n",
        "skips: {rules: [WIN-SUBPATH]}\n",
        "skips: {namespaces: [legacy]}\n",
        "skips: {unskippable: [WIN-HOSTNETWORK]}\n",
    ] {
        let p = Policy::from_yaml("p.yaml", yaml).unwrap();
        let (d, message) = decide_with(&p, &pod(skip_all.clone(), true), None);
        assert!(
            d.evaluation
                .findings
                .iter()
                .any(|f| f.rule == "WIN-HOSTNETWORK"),
            "{yaml}"
        );
        assert!(d.evaluation.skipped.is_empty(), "{yaml}");
        assert!(!message.unwrap().contains("to opt out"), "{yaml}");
    }
    let p = Policy::from_yaml("p.yaml", "skips: {namespaces: [web]}\n").unwrap();
    let (d, _) = decide_with(&p, &pod(skip_all, true), None);
    assert!(
        !d.evaluation
            .findings
            .iter()
            .any(|f| f.rule == "WIN-HOSTNETWORK")
    );
    // A policy cannot make a boundary rule skippable, a warning or audited.
    for yaml in [
        "skips: {rules: [WIN-GMSA-NOT-AUTHORIZED]}\n",
        "rules: {WIN-GMSA-NOT-FOUND: warning}\n",
        "rules: {WIN-GMSA-CONTENTS-MISMATCH: {mode: audit}}\n",
        "skips: {rules: [WIN-NOPE]}\n",
        "skips: {namespaces: [Not_A_Namespace]}\n",
    ] {
        let e = Policy::from_yaml("p.yaml", yaml).unwrap_err().to_string();
        assert!(e.contains("p.yaml"), "{yaml}: {e}");
    }
    // Off stays the operator's choice, and audit mode still audits the rest.
    let p = Policy::from_yaml("p.yaml", "rules: {WIN-GMSA-NOT-AUTHORIZED: off}\n").unwrap();
    let (d, _) = decide_with(&p, &pod(json!({}), false), Some(Mode::Audit));
    assert_eq!(d.validation, Verdict::Allow);
    let (d, _) = decide_with(&policy, &pod(json!({}), true), Some(Mode::Audit));
    assert_eq!(d.validation, Verdict::Deny, "the gMSA rule still denies");
    assert!(d.audited.contains(&"WIN-HOSTNETWORK"));
}

/// A namespace label its author sets (`winadmit.io/ignore: "true"`, the
/// default policy's opt-out) takes the namespace out of every rule but the
/// gMSA boundary: a pod there with a boundary finding is denied on that
/// finding alone, in every mode; without one it is exempt, as before. A
/// namespace excluded by name (the operator's `reach.excludedNamespaces`)
/// stays exempt from everything.
#[test]
fn an_opt_out_label_never_covers_the_gmsa_boundary() {
    use crate::decision::decide::{self, Exemption, Operation, PatchSource, Request, Verdict};
    use crate::decision::policy::{Mode, Policy};
    let mut facts = Facts {
        complete: true,
        ..Facts::default()
    };
    facts.specs.insert(
        "domain-admin".into(),
        CredSpec::Found(Some(json!({"a": 1}))),
    );
    for ns in ["web", "kube-system"] {
        facts.authz.insert(
            (ns.into(), "app".into(), "domain-admin".into()),
            Authz {
                allowed: false,
                reason: String::new(),
            },
        );
    }
    let cx = crate::decision::engine::Context {
        gmsa: Some(&facts),
        ..crate::decision::engine::Context::default()
    };
    let pod = |ns: &str, gmsa: bool| {
        let mut spec = json!({"serviceAccountName": "app", "hostNetwork": true,
            "nodeSelector": {"kubernetes.io/os": "windows"},
            "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/servercore:ltsc2022"}]});
        if gmsa {
            spec["securityContext"] =
                json!({"windowsOptions": {"gmsaCredentialSpecName": "domain-admin"}});
        }
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": ns}, "spec": spec})
    };
    let ignored = |_: &str, key: &str| (key == "winadmit.io/ignore").then(|| "true".to_owned());
    let policy = Policy::default_policy();
    let decide_with = |doc: &Value, mode: Option<Mode>| {
        let view = policy.pod_templates.read(doc).unwrap();
        let w = crate::decision::workload::Workload::from_view(&view).unwrap();
        let d = decide::decide(
            &policy,
            &cx,
            &w,
            &Request {
                labels: &ignored,
                mode,
                user: None,
                operation: Operation::Create,
                patch: PatchSource::None,
                reach: true,
            },
        );
        let message = d.denial_message(&w);
        (d, message)
    };
    for mode in [None, Some(Mode::Audit), Some(Mode::Warn)] {
        let (d, message) = decide_with(&pod("web", true), mode);
        assert_eq!(d.validation, Verdict::Deny, "{mode:?}");
        assert_eq!(d.exemption, None);
        let message = message.unwrap();
        assert!(message.contains("WIN-GMSA-NOT-AUTHORIZED"), "{message}");
        // Only the boundary is judged there: hostNetwork is not.
        assert!(!message.contains("WIN-HOSTNETWORK"), "{message}");
        assert!(
            d.evaluation
                .findings
                .iter()
                .all(|f| crate::decision::rules::is_boundary(f.rule)),
            "{:?}",
            d.evaluation.findings
        );
    }
    // No boundary finding: the label exempts the namespace, as it always did.
    let (d, _) = decide_with(&pod("web", false), None);
    assert_eq!(d.validation, Verdict::Allow);
    assert!(
        matches!(d.exemption, Some(Exemption::Reach(_))),
        "{:?}",
        d.exemption
    );
    // Excluded by name: exempt from everything.
    let (d, _) = decide_with(&pod("kube-system", true), None);
    assert_eq!(d.validation, Verdict::Allow);
    assert!(
        matches!(d.exemption, Some(Exemption::Reach(_))),
        "{:?}",
        d.exemption
    );
}
