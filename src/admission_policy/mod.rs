//! The rules as `ValidatingAdmissionPolicy` and `MutatingAdmissionPolicy`
//! objects: enforcement by the API server itself, with no webhook to run.
//!
//! Pure: from a policy and a target cluster to JSON objects and the list of
//! what could not be exported (and why). Each rule writes its own export
//! in its file ([`crate::rules::Rule::export`], in the vocabulary of
//! [`cel`]); this module walks [`crate::rules::ALL`] and assembles the
//! exports into policies. `tests/admission_policy.rs` evaluates them on the
//! corpus and checks it agrees with [`crate::engine::evaluate`];
//! `tests/e2e_admission_policy.rs` checks that a real API server enforcing
//! them gives what it gives with the webhook.
//!
//! CEL cost: every validation is a fixed number of `.exists()` over one
//! list (containers, volumes) or two nested ones (container x volumeMounts),
//! each body a constant-size field test, so the cost grows linearly with
//! the number of containers (and mounts). The field paths in the messages
//! find each element's index by its name (`indexOf` on the list of names),
//! which is quadratic in string comparisons; the API server evaluates every
//! `messageExpression` on every request, failed or not, so that cost counts
//! always. See docs/admission-policy.md.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::finding::Severity;
use crate::policy::{Mode, Policy};
use crate::version::KubeVersion;

mod bind;
pub mod cel;
mod conditions;
mod documents;
mod images;
mod mutation;
mod validations;
mod variables;

pub use bind::{bind_variables, on_old_object};
pub use cel::{cel_list, cel_str};
pub use conditions::{match_conditions, mutation_match_conditions, validation_match_conditions};
pub use mutation::{NODE_SELECTOR, REMOVED_PREFIX};
pub use validations::validations;
pub use variables::variables;

use documents::{
    Group, Head, actions, combined, match_constraints, mode_name, mutation_match_constraints,
    named, one_condition, policy_variables,
};
use mutation::{mutated, mutation_expressions, removal_notice};

/// The API group of the admission policies.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// `ValidatingAdmissionPolicy` is GA (v1) from this version.
pub const VAP_SINCE: KubeVersion = KubeVersion::new(1, 30);
/// `MutatingAdmissionPolicy` v1beta1 from this version (v1 from 1.36).
pub const MAP_SINCE: KubeVersion = KubeVersion::new(1, 34);

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The target is older than ValidatingAdmissionPolicy v1.
    #[error(
        "ValidatingAdmissionPolicy is GA (admissionregistration.k8s.io/v1) from Kubernetes 1.30; the target is {0}: pass --kubernetes-version 1.30 or later, or use the webhook (`winadmit manifests`), which works on every version"
    )]
    TooOld(KubeVersion),
}

/// One exported rule, as CEL.
#[derive(Debug, Clone)]
pub struct Validation {
    pub rule: &'static str,
    pub severity: Severity,
    /// The rule's own mode (`rules: {ID: {mode: ...}}`), if the policy gives one.
    pub rule_mode: Option<Mode>,
    /// True when the object passes.
    pub expression: String,
    /// The message: the field paths, the rule's message, its id and fix.
    pub message_expression: String,
    /// The static message, for when the expression cannot be evaluated.
    pub message: String,
    /// JSON Patch removals (a CEL list of `JSONPatch`), if the rule's
    /// findings are removable.
    pub removals: Option<String>,
    /// The field paths `removals` removes (a CEL list of strings), for the
    /// removal record.
    pub removed_paths: Option<String>,
    /// True when the rule does not apply to the object (scope, exemption,
    /// skip annotation).
    pub unless: String,
    /// The offending field paths (a CEL list of strings): not empty exactly
    /// when the rule's probes find something.
    pub paths: String,
    /// What follows the paths in the message (`: message (ID). Fix: ...`).
    pub text: String,
}

/// A rule that is not exported, or not completely, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    pub rule: &'static str,
    pub reason: String,
    /// `true`: the rule is exported but without this part.
    pub partial: bool,
}

/// What `winadmit admission-policy` prints.
#[derive(Debug, Clone)]
pub struct Exported {
    pub documents: Vec<Value>,
    pub gaps: Vec<Gap>,
}

/// A 64-bit FNV-1a hash, hex: stable across builds and platforms.
fn fnv(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Exports the policies for `cluster` in `mode` (`None`: the policy's),
/// with the MutatingAdmissionPolicy when `mutating` and the target has it.
///
/// # Errors
/// The target has no `ValidatingAdmissionPolicy` v1 (before 1.30).
pub fn export(
    policy: &Policy,
    cluster: &Cluster,
    mode: Option<Mode>,
    mutating: bool,
) -> Result<Exported, ExportError> {
    let v = cluster.kubernetes_version;
    if v < VAP_SINCE {
        return Err(ExportError::TooOld(v));
    }
    let mode = mode.unwrap_or(policy.mode);
    let (all, mut gaps) = validations(policy, cluster);

    let mut groups = Vec::new();
    let errors: Vec<Validation> = all
        .iter()
        .filter(|x| x.severity == Severity::Error && x.rule_mode.is_none())
        .cloned()
        .collect();
    if !errors.is_empty() {
        let mut bindings = Vec::new();
        for m in [Mode::Enforce, Mode::Warn, Mode::Audit] {
            bindings.push((
                format!("ns-{}", mode_name(m)),
                actions(m),
                Some(mode_name(m)),
            ));
        }
        bindings.push(("default".to_owned(), actions(mode), None));
        groups.push(Group {
            name: "winadmit-errors".into(),
            validations: errors,
            head: Head::Problems,
            extra: Vec::new(),
            bindings,
        });
    }
    for m in [Mode::Enforce, Mode::Warn, Mode::Audit] {
        let own: Vec<Validation> = all
            .iter()
            .filter(|x| x.severity == Severity::Error && x.rule_mode == Some(m))
            .cloned()
            .collect();
        if !own.is_empty() {
            groups.push(Group {
                name: format!("winadmit-errors-always-{}", mode_name(m)),
                validations: own,
                head: Head::Problems,
                extra: Vec::new(),
                bindings: vec![("all".into(), actions(m), None)],
            });
        }
    }
    let warnings: Vec<Validation> = all
        .iter()
        .filter(|x| x.severity == Severity::Warning)
        .cloned()
        .collect();
    let with_mutation = mutating && v >= MAP_SINCE;
    let notices: Vec<Value> = if with_mutation {
        mutated(policy, &all)
            .into_iter()
            .map(|x| removal_notice(x, &x.message))
            .collect()
    } else {
        Vec::new()
    };
    if !warnings.is_empty() || !notices.is_empty() {
        groups.push(Group {
            name: "winadmit-warnings".into(),
            validations: warnings,
            head: Head::Warnings,
            extra: notices,
            bindings: vec![("all".into(), vec!["Warn"], None)],
        });
    }

    let shared = variables(policy);
    let conditions = one_condition(
        "may-target-windows",
        &validation_match_conditions(policy, cluster),
    );
    let label = &policy.namespace_mode_label;
    let exempt_ns = &policy.exemptions.namespaces;
    let namespace_selector = |value: Option<&str>, all_modes: bool| -> Value {
        // As the webhooks: the policy's reach (excluded namespaces and
        // opt-out labels), and its exempt namespaces.
        let mut skipped = policy.reach.excluded_namespaces.clone();
        skipped.extend(
            exempt_ns
                .iter()
                .filter(|n| !skipped.contains(n))
                .cloned()
                .collect::<Vec<_>>(),
        );
        let mut exprs = vec![
            json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": skipped}),
        ];
        for (k, v) in &policy.reach.opt_out_namespace_labels {
            exprs.push(json!({"key": k, "operator": "NotIn", "values": [v]}));
        }
        match value {
            Some(v) => exprs.push(json!({"key": label, "operator": "In", "values": [v]})),
            None if !all_modes => exprs.push(
                json!({"key": label, "operator": "NotIn", "values": ["enforce", "warn", "audit"]}),
            ),
            None => {}
        }
        json!({"matchExpressions": exprs})
    };

    let mut documents = Vec::new();
    for g in &groups {
        let (vars, old) = policy_variables(&shared, &g.validations);
        let mut validations = Vec::new();
        if !g.validations.is_empty() {
            validations.push(combined(&g.validations, &old, g.head));
        }
        validations.extend(g.extra.iter().cloned());
        let vars: Vec<Value> = vars
            .into_iter()
            .map(|(name, expression)| json!({"name": name, "expression": expression}))
            .collect();
        documents.push(json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": g.name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": match_constraints(),
                "matchConditions": conditions,
                "variables": vars,
                "validations": validations,
            }
        }));
        let per_label = g.bindings.len() > 1;
        for (suffix, acts, value) in &g.bindings {
            let name = if g.bindings.len() == 1 {
                g.name.clone()
            } else {
                format!("{}-{suffix}", g.name)
            };
            documents.push(json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {
                    "policyName": g.name,
                    "validationActions": acts,
                    "matchResources": {"namespaceSelector": namespace_selector(*value, !per_label)},
                }
            }));
        }
    }

    if !mutating {
        gaps.push(Gap {
            rule: "mutation",
            reason: "left out (--no-mutating): use the mutating webhook, or generate without --no-mutating on 1.34+".into(),
            partial: false,
        });
    } else if with_mutation {
        let api = if v >= KubeVersion::new(1, 36) {
            "v1"
        } else {
            "v1beta1"
        };
        let mutations: Vec<Value> = mutation_expressions(policy, &mutated(policy, &all))
            .iter()
            .map(|e| json!({"patchType": "JSONPatch", "jsonPatch": {"expression": e}}))
            .collect();
        for (on, what) in [
            (policy.mutation.set_os_name, "mutation.setOsName"),
            (
                policy.mutation.infer_from_images,
                "mutation.inferFromImages",
            ),
            (policy.mutation.isolation.is_some(), "mutation.isolation"),
            (
                !policy.mutation.tolerations.is_empty(),
                "mutation.tolerations",
            ),
            (
                policy.mutation.inject_windows_build,
                "mutation.injectWindowsBuild",
            ),
            (
                policy.mutation.tolerate_windows_taint && policy.params.windows_taint.is_some(),
                "mutation.tolerateWindowsTaint",
            ),
        ] {
            if on {
                gaps.push(Gap {
                    rule: "mutation",
                    reason: format!("{what} is not exported: use the mutating webhook for it"),
                    partial: true,
                });
            }
        }
        if !mutations.is_empty() {
            documents.push(json!({
                "apiVersion": format!("{GROUP}/{api}"),
                "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "winadmit-mutate"},
                "spec": {
                    "failurePolicy": "Fail",
                    // Not invoked again when a later plugin changes the
                    // object: its removal records must describe this
                    // request (a second call finds nothing to remove and
                    // would clear them); what a later webhook adds is
                    // validated, and warned about, as sent.
                    "reinvocationPolicy": "Never",
                    "matchConstraints": mutation_match_constraints(),
                    "matchConditions": one_condition("needs-mutation", &mutation_match_conditions(policy, cluster)),
                    "variables": named(&shared),
                    "mutations": mutations,
                }
            }));
            documents.push(json!({
                "apiVersion": format!("{GROUP}/{api}"),
                "kind": "MutatingAdmissionPolicyBinding",
                "metadata": {"name": "winadmit-mutate"},
                "spec": {
                    "policyName": "winadmit-mutate",
                    "matchResources": {"namespaceSelector": namespace_selector(None, true)},
                }
            }));
        }
    } else {
        gaps.push(Gap {
            rule: "mutation",
            reason: format!(
                "MutatingAdmissionPolicy needs Kubernetes 1.34 (v1beta1) or 1.36 (v1); the target is {v}: use the mutating webhook"
            ),
            partial: false,
        });
    }

    // Labels: the winadmit version and a hash of what was generated.
    let hash = fnv(&serde_json::to_string(&documents).unwrap_or_default());
    for d in &mut documents {
        d["metadata"]["labels"] = json!({
            "app.kubernetes.io/name": "winadmit",
            "app.kubernetes.io/managed-by": "winadmit",
            "app.kubernetes.io/version": env!("CARGO_PKG_VERSION"),
            "winadmit.io/policy-hash": hash,
        });
    }
    Ok(Exported { documents, gaps })
}

/// The comment at the top of the output: the target and every gap.
#[must_use]
pub fn header(cluster: &Cluster, mode: Mode, gaps: &[Gap]) -> String {
    let mut s = format!(
        "# winadmit {} admission policies for Kubernetes {}, {} Windows nodes, stance {}, mode {}.\n",
        env!("CARGO_PKG_VERSION"),
        cluster.kubernetes_version,
        cluster.container_runtime,
        if cluster.is_strict() {
            "strict"
        } else {
            "default"
        },
        mode_name(mode),
    );
    s.push_str("# Generated by `winadmit admission-policy`; do not edit by hand.\n");
    if !gaps.is_empty() {
        s.push_str(
            "# Left out of these policies, in whole or in part (the webhook and `winadmit lint` check them):\n",
        );
        for g in gaps {
            let kind = if g.partial {
                "partly exported"
            } else {
                "not exported"
            };
            let _ = writeln!(s, "#   {} ({kind}): {}", g.rule, g.reason);
        }
    }
    s
}
