//! What an entry point looks up about a workload before it judges it: the
//! images its pod spec names ([`workload_images`], [`spec_images`], for
//! their registry facts) and the image pull Secrets it lists
//! ([`pull_secret_names`], [`spec_pull_secrets`], for the credentials of
//! those lookups). An object is read through the policy's pod templates,
//! so every kind the policy declares counts.

use std::collections::BTreeSet;

use crate::decision::policy::Policy;
use crate::decision::view::{SpecView, containers_of};
use crate::decision::workload::Workload;

/// Adds the images of the workload `value` (its init, app and ephemeral
/// containers) to `into`: what an entry point looks up before judging it. An
/// object that is not a workload, or does not read, adds nothing (the
/// entry point reports it as it would without facts).
pub fn workload_images(policy: &Policy, value: &serde_json::Value, into: &mut BTreeSet<String>) {
    let Ok(view) = policy.pod_templates.read(value) else {
        return;
    };
    if let Some(spec) = Workload::from_view(&view).and_then(|w| w.spec) {
        spec_images(spec, into);
    }
}

/// Adds the images of a pod spec (every container list) to `into`.
pub fn spec_images(spec: &SpecView<'_>, into: &mut BTreeSet<String>) {
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
    Workload::from_view(&view)
        .and_then(|w| w.spec)
        .map(spec_pull_secrets)
        .unwrap_or_default()
}

/// The names a pod spec lists in `imagePullSecrets`, in order.
#[must_use]
pub fn spec_pull_secrets(spec: &SpecView<'_>) -> Vec<String> {
    spec.image_pull_secrets
        .iter()
        .flat_map(|names| &names.0)
        .filter(|n| !n.is_empty())
        .map(ToString::to_string)
        .collect()
}
