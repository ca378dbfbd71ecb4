//! The rules as `ValidatingAdmissionPolicy` and `MutatingAdmissionPolicy`
//! objects: enforcement by the API server itself, with no webhook to run.
//!
//! Pure: from a policy and a target cluster to JSON objects and the list of
//! what could not be exported (and why). Each rule writes its own export
//! in its file ([`crate::decision::rules::Rule::export`], in the vocabulary of
//! [`cel`]); this module walks [`crate::decision::rules::ALL`] and assembles the
//! exports into policies. `tests/install/admission_policy.rs` evaluates them on the
//! corpus and checks it agrees with [`crate::decision::engine::evaluate`];
//! `tests/e2e/e2e_admission_policy.rs` checks that a real API server enforcing
//! them gives what it gives with the webhook.
//!
//! CEL cost: every validation is a fixed number of `.exists()` over one
//! list (containers, volumes) or two nested ones (container x volumeMounts),
//! each body a constant-size field test, so the cost grows linearly with
//! the number of containers (and mounts). The field paths in the messages
//! find each element's index by its name (`indexOf` on the list of names),
//! which is quadratic in string comparisons; the API server evaluates every
//! `messageExpression` on every request, failed or not, so each message
//! first tests that every rule passes and works paths out only when one
//! does not. See docs/admission-policy.md.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::decision::cluster::TargetCluster;
use crate::decision::finding::Severity;
use crate::decision::policy::{Mode, Policy};
use crate::decision::version::KubeVersion;

mod bind;
mod conditions;
mod documents;
pub mod gmsa;
mod images;
mod mutation;
mod removals;
mod signals;
mod validations;
mod variables;

pub use bind::bind_variables;
pub use conditions::{match_conditions, mutation_match_conditions, validation_match_conditions};
pub use mutation::NODE_SELECTOR;
pub use removals::REMOVED_PREFIX;
pub use validations::validations;
pub use variables::variables;

use documents::{groups, mode_name, validating_documents};
use mutation::{mutating_documents, mutation_gaps};

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
    /// When the mutating policy makes `removals`.
    pub removal: crate::decision::rules::cel::Removal,
    /// Left out of the validating policies: the API server refuses what
    /// the rule finds before they run ([`crate::decision::rules::cel::Export::refused_by_api_server`]).
    pub refused_by_api_server: bool,
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
    /// True when `removed_paths` is not empty, without working the paths
    /// out (one pass over each list, for the mutating policy's match
    /// condition).
    pub removes_something: Option<String>,
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

/// The largest object client-side `kubectl apply` can write: it copies the
/// whole object into its `kubectl.kubernetes.io/last-applied-configuration`
/// annotation, and the API server refuses annotations over 256 KiB in all.
pub const CLIENT_SIDE_APPLY_BYTES: usize = 256 * 1024;

/// The names of the `documents` too large for client-side `kubectl apply`
/// ([`CLIENT_SIDE_APPLY_BYTES`], their JSON without spaces): those need
/// `kubectl apply --server-side`.
#[must_use]
pub fn too_large_for_client_side_apply(documents: &[Value]) -> Vec<String> {
    documents
        .iter()
        .filter(|d| d.to_string().len() > CLIENT_SIDE_APPLY_BYTES)
        .map(|d| d["metadata"]["name"].as_str().unwrap_or("?").to_owned())
        .collect()
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
    cluster: &TargetCluster,
    mode: Option<Mode>,
    mutating: bool,
) -> Result<Exported, ExportError> {
    let v = cluster.kubernetes_version;
    if v < VAP_SINCE {
        return Err(ExportError::TooOld(v));
    }
    let mode = mode.unwrap_or(policy.mode);
    let (all, mut gaps) = validations(policy, cluster);
    let with_mutation = mutating && v >= MAP_SINCE;
    let groups = groups(policy, &all, mode, with_mutation);
    let shared = variables(policy);
    let mut documents = validating_documents(policy, cluster, &groups, &shared);
    // The gMSA boundary: a policy of its own, bound in every mode.
    documents.extend(gmsa::documents(policy, cluster, &shared));
    for rule in gmsa::rules(policy, cluster) {
        if let (Some(g), Some(reason)) = (
            gaps.iter_mut().find(|g| g.rule == rule),
            gmsa::partial_reason(rule),
        ) {
            g.reason = reason.to_owned();
            g.partial = true;
        }
    }
    if !mutating {
        gaps.push(Gap {
            rule: "mutation",
            reason: "left out (--no-mutating): use the mutating webhook, or generate without --no-mutating on 1.34+".into(),
            partial: false,
        });
    } else if with_mutation {
        gaps.extend(mutation_gaps(policy));
        documents.extend(mutating_documents(policy, cluster, &all, &shared));
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
pub fn header(cluster: &TargetCluster, mode: Mode, gaps: &[Gap]) -> String {
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
