//! What an entry point looks up about a workload before it judges it: the
//! images its pod template names ([`workload_images`], for their registry
//! facts) and the image pull Secrets it lists ([`pull_secret_names`], for
//! the credentials of those lookups). Both read the object through the
//! policy's pod templates, so every kind the policy declares counts.

use std::collections::BTreeSet;

use crate::decision::policy::Policy;
use crate::decision::view::containers_of;
use crate::decision::workload::Workload;

/// Adds the images of the workload `value` (its init, app and ephemeral
/// containers) to `into`: what an entry point looks up before judging it. An
/// object that is not a workload, or does not read, adds nothing (the
/// entry point reports it as it would without facts).
pub fn workload_images(policy: &Policy, value: &serde_json::Value, into: &mut BTreeSet<String>) {
    let Ok(view) = policy.pod_templates.read(value) else {
        return;
    };
    let Some(spec) = Workload::from_view(&view).and_then(|w| w.spec) else {
        return;
    };
    for c in containers_of(spec) {
        if let Some(image) = c.container.image.as_deref()
            && !image.trim().is_empty()
            && !into.contains(image)
        {
            into.insert(image.to_owned());
        }
    }
}

/// The names of the Secrets the workload `value`'s pod template lists in
/// `imagePullSecrets`, in order (none for an object that is not a
/// workload).
#[must_use]
pub fn pull_secret_names(policy: &Policy, value: &serde_json::Value) -> Vec<String> {
    let Ok(view) = policy.pod_templates.read(value) else {
        return Vec::new();
    };
    let Some(workload) = Workload::from_view(&view) else {
        return Vec::new();
    };
    value
        .pointer(&workload.spec_path.pointer())
        .and_then(|spec| spec.get("imagePullSecrets"))
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("name").and_then(serde_json::Value::as_str))
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect()
}
