//! `serve --manage-pin-linux NAME`: the `pin-linux.winadmit.io` webhook of
//! the MutatingWebhookConfiguration `NAME` matches nothing while the
//! cluster has no Windows nodes, so that a Linux-only cluster pays nothing
//! for it (the API server calls no webhook for a pod that selects no OS),
//! and is back as installed once a Windows node joins.
//!
//! Off: its `rules` are emptied (a webhook with no rules matches no
//! request), the rules kept in the annotation [`RULES_ANNOTATION`] of the
//! configuration. On: they are put back from it. Each change is a `PUT` of
//! the configuration read just before (its `resourceVersion` makes a
//! concurrent writer, another replica or `kubectl apply`, fail the write,
//! retried at the next check). winadmit needs `get` and `update` on that one
//! MutatingWebhookConfiguration (the install's ClusterRole names it in
//! `resourceNames`): it can change no other webhook configuration.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::Value;

use crate::decision::cluster::ClusterLookup as _;
use crate::entry::server::watch_cache::WatchCache;

/// The webhook winadmit turns off and on.
pub const WEBHOOK: &str = "pin-linux.winadmit.io";

/// Where its rules are kept while it is off.
pub const RULES_ANNOTATION: &str = "winadmit.io/pin-linux-rules";

/// How often the Windows nodes are looked at.
const EVERY: Duration = Duration::from_secs(2);

/// Starts the loop on the current runtime; it runs until the runtime stops.
pub fn spawn(client: kube::Client, cache: Arc<WatchCache>, name: String) {
    // Untyped, so that a field this build does not know survives the update.
    let resource = ApiResource::erase::<MutatingWebhookConfiguration>(&());
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    tokio::spawn(async move {
        let mut done: Option<bool> = None;
        let mut failing: Option<String> = None;
        loop {
            tokio::time::sleep(EVERY).await;
            if !cache.synced().nodes {
                continue;
            }
            let on = cache.nodes().is_some_and(|n| !n.is_empty());
            if done == Some(on) {
                continue;
            }
            match switch(&api, &name, on).await {
                Ok(changed) => {
                    if changed {
                        tracing::info!(
                            configuration = %name,
                            "pin-linux: {WEBHOOK} {}",
                            if on {
                                "on: the cluster has Windows nodes"
                            } else {
                                "off: the cluster has no Windows nodes (no pod is sent to it)"
                            }
                        );
                    }
                    done = Some(on);
                    failing = None;
                }
                Err(e) => {
                    let why = format!("{e:#}");
                    if failing.as_deref() != Some(why.as_str()) {
                        tracing::warn!(
                            configuration = %name,
                            error = %why,
                            "pin-linux: cannot update MutatingWebhookConfiguration {name} (--manage-pin-linux; winadmit needs get and update on it); retrying"
                        );
                        failing = Some(why);
                    }
                }
            }
        }
    });
}

/// Turns the webhook on or off in the configuration `name`; whether the
/// configuration changed.
async fn switch(api: &Api<DynamicObject>, name: &str, on: bool) -> anyhow::Result<bool> {
    let current = api.get(name).await?;
    let mut value = serde_json::to_value(&current)?;
    if !set(&mut value, on)? {
        return Ok(false);
    }
    let updated: DynamicObject = serde_json::from_value(value)?;
    api.replace(name, &PostParams::default(), &updated).await?;
    Ok(true)
}

/// Turns [`WEBHOOK`] on or off in a MutatingWebhookConfiguration; whether
/// it changed anything.
///
/// A configuration without it (an install without the registration) is
/// left as it is.
///
/// # Errors
/// The webhook is off with no rules kept.
pub fn set(configuration: &mut Value, on: bool) -> anyhow::Result<bool> {
    let kept = configuration
        .pointer(&format!(
            "/metadata/annotations/{}",
            RULES_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .map(ToOwned::to_owned);
    let Some(hook) = configuration["webhooks"]
        .as_array_mut()
        .and_then(|hooks| hooks.iter_mut().find(|h| h["name"] == WEBHOOK))
    else {
        return Ok(false);
    };
    let rules = hook["rules"].as_array().cloned().unwrap_or_default();
    match (on, rules.is_empty(), kept) {
        // Off: keep the rules, then empty them.
        (false, false, _) => {
            hook["rules"] = Value::Array(Vec::new());
            let annotations = &mut configuration["metadata"]["annotations"];
            if !annotations.is_object() {
                *annotations = Value::Object(serde_json::Map::new());
            }
            annotations[RULES_ANNOTATION] = Value::String(Value::Array(rules).to_string());
            Ok(true)
        }
        // On: the kept rules back.
        (true, true, Some(kept)) => {
            hook["rules"] = serde_json::from_str(&kept)
                .map_err(|e| anyhow::anyhow!("annotation {RULES_ANNOTATION}: {e}"))?;
            if let Some(a) = configuration["metadata"]["annotations"].as_object_mut() {
                a.remove(RULES_ANNOTATION);
            }
            Ok(true)
        }
        (true, true, None) => Err(anyhow::anyhow!(
            "{WEBHOOK} has no rules and annotation {RULES_ANNOTATION} keeps none: reinstall the configuration"
        )),
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_keeps_the_rules_and_on_puts_them_back() {
        let rules = serde_json::json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]);
        let installed = serde_json::json!({"metadata": {"name": "winadmit"}, "webhooks": [
            {"name": "mutate.winadmit.io", "rules": rules.clone()},
            {"name": WEBHOOK, "rules": rules.clone()}]});
        let mut c = installed.clone();
        assert!(set(&mut c, false).unwrap());
        assert_eq!(c["webhooks"][1]["rules"], serde_json::json!([]));
        assert_eq!(
            c["webhooks"][0]["rules"], rules,
            "the other webhook is left alone"
        );
        assert!(!set(&mut c, false).unwrap(), "off twice changes nothing");
        assert!(set(&mut c, true).unwrap());
        assert_eq!(c["webhooks"][1]["rules"], rules);
        assert!(c["metadata"]["annotations"].get(RULES_ANNOTATION).is_none());
        assert!(!set(&mut c, true).unwrap());
        let mut emptied = installed;
        emptied["webhooks"][1]["rules"] = serde_json::json!([]);
        assert!(set(&mut emptied, true).is_err());
        assert!(!set(&mut serde_json::json!({"webhooks": []}), false).unwrap());
    }
}
