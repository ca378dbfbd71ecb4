//! Folding owned objects into their owners (see the module docs of
//! [`super`]): which kinds own which, and the signature that says whether
//! an owned object would be reported differently from its owner.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use crate::decision::engine::Evaluation;
use crate::decision::finding::Severity;
use crate::decision::workload::{Kind, Workload};

/// Kinds that own other workloads, and so are remembered for folding.
pub(super) fn owner_capable(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Deployment
            | Kind::ReplicaSet
            | Kind::StatefulSet
            | Kind::DaemonSet
            | Kind::Job
            | Kind::CronJob
            | Kind::ReplicationController
            | Kind::Rollout
            | Kind::CloneSet
            | Kind::KruiseStatefulSet
            | Kind::KruiseDaemonSet
            | Kind::BroadcastJob
            | Kind::AdvancedCronJob
            | Kind::ScaledJob
    )
}

pub(super) fn object_key(namespace: Option<&str>, kind: &str, name: &str) -> String {
    format!("{}/{kind}/{name}", namespace.unwrap_or_default())
}

/// The controller owner of an object, when it is a workload kind that
/// creates objects of this kind.
pub(super) fn controller_of(value: &Value, kind: Kind) -> Option<(String, String)> {
    let refs = value.pointer("/metadata/ownerReferences")?.as_array()?;
    let r = refs
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    let owner_kind = r.get("kind")?.as_str()?;
    let owner_name = r.get("name")?.as_str()?;
    let owns = match kind {
        Kind::Pod => matches!(
            owner_kind,
            "ReplicaSet"
                | "Job"
                | "DaemonSet"
                | "StatefulSet"
                | "ReplicationController"
                | "CloneSet"
                | "BroadcastJob"
        ),
        // Argo Rollouts make ReplicaSets; KEDA ScaledJobs and OpenKruise
        // AdvancedCronJobs make Jobs (the latter BroadcastJobs too).
        Kind::ReplicaSet => matches!(owner_kind, "Deployment" | "Rollout"),
        Kind::Job => matches!(owner_kind, "CronJob" | "ScaledJob" | "AdvancedCronJob"),
        Kind::BroadcastJob => owner_kind == "AdvancedCronJob",
        _ => false,
    };
    owns.then(|| (owner_kind.to_owned(), owner_name.to_owned()))
}

/// A Deployment's ReplicaSet scaled to 0
/// ([`crate::decision::workload::replica_set_is_rollout_history`]).
pub(super) fn rollout_history(value: &Value, kind: Kind) -> bool {
    kind == Kind::ReplicaSet
        && crate::decision::workload::replica_set_is_rollout_history(
            value.pointer("/spec/replicas").and_then(Value::as_i64),
            controller_of(value, kind)
                .map(|(owner, _)| owner)
                .as_deref(),
        )
}

/// What the report says about a workload, independent of where its pod spec
/// sits: findings with fields relative to the pod spec (or pod metadata),
/// targeting, exemption and skipped rules.
pub(super) fn signature(workload: &Workload<'_, '_>, eval: &Evaluation) -> u64 {
    let spec = workload.spec_path.to_string();
    let meta = workload.pod_metadata_path().to_string();
    let mut items: Vec<(&str, Severity, String)> = eval
        .findings
        .iter()
        .map(|f| {
            let field = f.field.to_string();
            let rel = field
                .strip_prefix(&spec)
                .map(|r| format!("spec{r}"))
                .or_else(|| field.strip_prefix(&meta).map(|r| format!("metadata{r}")))
                .unwrap_or(field);
            (f.rule, f.severity, rel)
        })
        .collect();
    items.sort();
    let mut h = DefaultHasher::new();
    items.hash(&mut h);
    eval.target.is_windows().hash(&mut h);
    eval.exempt.hash(&mut h);
    for s in &eval.skipped {
        s.rule.hash(&mut h);
        s.reason.hash(&mut h);
    }
    h.finish()
}
