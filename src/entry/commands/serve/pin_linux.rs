//! `serve --manage-pin-linux NAME`: winadmit keeps the `pin-linux.winadmit.io`
//! webhook of the MutatingWebhookConfiguration `NAME` as its own
//! configuration renders it, for the Windows nodes the cluster has now:
//! with Windows nodes, the rules it is installed with ([`rules`]), so that
//! every workload that selects no OS reaches winadmit; without, no rules,
//! so that a Linux-only cluster pays nothing for it (the API server calls
//! no webhook for a pod that selects no OS). A pod that names its node in
//! `spec.nodeName` is not this webhook's: the install's `may-target-windows`
//! condition sends it to `mutate.winadmit.io` and `validate.winadmit.io`
//! whatever the nodes, so a pod bound to a node that joins later is judged.
//!
//! What winadmit writes is rendered from its own code, never read back from
//! the cluster: whatever else changes those rules (a GitOps sync, `kubectl
//! edit`) is put back within [`RESYNC`], and a change of the nodes is acted
//! on as the cluster cache publishes it (no poll). Each change is a `PUT`
//! of the configuration read just before (its `resourceVersion` makes a
//! concurrent writer fail the write, retried on the next change or within
//! [`RESYNC`]). winadmit needs `get` and `update` on that one
//! MutatingWebhookConfiguration (the install's ClusterRole names it in
//! `resourceNames`): it can change no other webhook configuration.
//!
//! When it cannot (no permission, the configuration or the webhook gone),
//! `/readyz/pin-linux` answers 503 with the reason and the gauge
//! `winadmit_pin_linux_in_sync` is 0; `/readyz` itself stays as it is, so
//! that this never takes the validating webhook out of service.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::decision::cluster::ClusterLookup as _;
use crate::entry::server::ServerState;
use crate::entry::server::watch_cache::WatchCache;

/// The webhook winadmit keeps.
pub const WEBHOOK: &str = "pin-linux.winadmit.io";

/// An annotation older installs kept the rules in; removed when found
/// (nothing reads it).
const OLD_RULES_ANNOTATION: &str = "winadmit.io/pin-linux-rules";

/// The longest a change made by something else stays in place.
pub const RESYNC: Duration = Duration::from_secs(10);

/// The webhook's rules with Windows nodes in the cluster: those the
/// install renders (the unit test below reads `manifests/rendered/base.yaml`;
/// `tests/install/helm.rs` keeps the chart equal to it).
#[must_use]
pub fn rules() -> Value {
    let rule = |group: &str, operations: &[&str], resources: &[&str]| {
        json!({"apiGroups": [group], "apiVersions": ["v1"], "operations": operations,
               "resources": resources, "scope": "Namespaced"})
    };
    json!([
        rule("", &["CREATE"], &["pods"]),
        rule("", &["CREATE", "UPDATE"], &["replicationcontrollers"]),
        rule(
            "apps",
            &["CREATE", "UPDATE"],
            &["deployments", "statefulsets", "daemonsets"]
        ),
        rule("batch", &["CREATE", "UPDATE"], &["cronjobs"]),
        rule("batch", &["CREATE"], &["jobs"]),
    ])
}

/// Starts the loop on the current runtime; it runs until the runtime stops.
pub fn spawn(client: kube::Client, cache: Arc<WatchCache>, name: String, state: Arc<ServerState>) {
    // Untyped, so that a field this build does not know survives the update.
    let resource = ApiResource::erase::<MutatingWebhookConfiguration>(&());
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut changes = cache.node_changes();
    tokio::spawn(async move {
        let mut logged: Option<String> = None;
        let mut last_on: Option<bool> = None;
        loop {
            if cache.synced().nodes && cache.synced().linux_nodes {
                let on = cache.nodes().is_some_and(|n| !n.is_empty());
                let outcome = keep(&api, &name, on).await;
                report(&state, &name, on, &outcome, &mut logged, &mut last_on);
            }
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep(RESYNC) => {}
            }
        }
    });
}

/// Logs what changed (once per state) and sets the readiness check and
/// the gauge.
fn report(
    state: &ServerState,
    name: &str,
    on: bool,
    outcome: &anyhow::Result<bool>,
    logged: &mut Option<String>,
    last_on: &mut Option<bool>,
) {
    match outcome {
        Ok(changed) => {
            if *changed || *last_on != Some(on) {
                tracing::info!(
                    configuration = %name,
                    changed = %changed,
                    "pin-linux: {WEBHOOK} {}",
                    if on {
                        "on: the cluster has Windows nodes"
                    } else {
                        "off: the cluster has no Windows nodes (no pod is sent to it)"
                    }
                );
            }
            *last_on = Some(on);
            *logged = None;
            state.set_pin_linux_problem(None);
        }
        Err(e) => {
            let why = format!(
                "cannot keep {WEBHOOK} in MutatingWebhookConfiguration {name} (--manage-pin-linux): {e:#}"
            );
            if logged.as_deref() != Some(why.as_str()) {
                tracing::warn!(
                    configuration = %name,
                    "{why}; winadmit needs get and update on it; retrying"
                );
                *logged = Some(why.clone());
            }
            state.set_pin_linux_problem(Some(why));
        }
    }
}

/// Makes the webhook in the configuration `name` what it must be; whether
/// it changed anything.
async fn keep(api: &Api<DynamicObject>, name: &str, on: bool) -> anyhow::Result<bool> {
    let current = api.get(name).await?;
    let mut value = serde_json::to_value(&current)?;
    if !render(&mut value, on)? {
        return Ok(false);
    }
    let updated: DynamicObject = serde_json::from_value(value)?;
    api.replace(name, &PostParams::default(), &updated).await?;
    Ok(true)
}

/// Renders [`WEBHOOK`] in a MutatingWebhookConfiguration for a cluster
/// with (`on`) or without Windows nodes; whether it changed anything. Only
/// its rules are winadmit's: everything else in the configuration is left
/// as installed.
///
/// # Errors
/// The configuration has no such webhook: nothing to keep.
pub fn render(configuration: &mut Value, on: bool) -> anyhow::Result<bool> {
    let before = configuration.clone();
    if let Some(a) = configuration
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(OLD_RULES_ANNOTATION);
    }
    let Some(hook) = configuration["webhooks"]
        .as_array_mut()
        .and_then(|hooks| hooks.iter_mut().find(|h| h["name"] == WEBHOOK))
    else {
        anyhow::bail!("it has no webhook {WEBHOOK}: install the configuration again");
    };
    // The API server leaves an empty list out: no rules is no change.
    if on || hook.get("rules").is_some() {
        hook["rules"] = if on { rules() } else { json!([]) };
    }
    Ok(*configuration != before)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed() -> Value {
        json!({"metadata": {"name": "winadmit"}, "webhooks": [
            {"name": "mutate.winadmit.io", "rules": [{"resources": ["pods"]}]},
            {"name": WEBHOOK, "rules": rules(),
             "matchConditions": [{"name": "selects-no-os", "expression": "true"}]}]})
    }

    #[test]
    fn off_without_windows_nodes_and_back_as_installed() {
        let mut c = installed();
        assert!(!render(&mut c, true).unwrap(), "installed as rendered");
        assert!(render(&mut c, false).unwrap());
        assert_eq!(c["webhooks"][1]["rules"], json!([]));
        assert_eq!(
            c["webhooks"][0],
            installed()["webhooks"][0],
            "the other webhook is left alone"
        );
        assert!(!render(&mut c, false).unwrap(), "twice changes nothing");
        // As the API server stores an empty list: left out.
        c["webhooks"][1].as_object_mut().unwrap().remove("rules");
        assert!(!render(&mut c, false).unwrap());
        assert!(render(&mut c, true).unwrap());
        assert_eq!(c, installed());
    }

    /// Whatever the cluster holds, the rules come from winadmit's own
    /// configuration: emptied rules, an annotation that says `[]`, rules
    /// narrowed by another writer.
    #[test]
    fn the_rules_are_rendered_never_read_back() {
        let mut emptied = installed();
        emptied["webhooks"][1]["rules"] = json!([]);
        emptied["metadata"]["annotations"] = json!({OLD_RULES_ANNOTATION: "[]"});
        assert!(render(&mut emptied, true).unwrap());
        assert_eq!(emptied["webhooks"][1]["rules"], rules());
        assert!(
            emptied["metadata"]["annotations"]
                .get(OLD_RULES_ANNOTATION)
                .is_none()
        );
        let mut narrowed_by_someone = installed();
        narrowed_by_someone["webhooks"][1]["rules"][0]["operations"] = json!(["UPDATE"]);
        assert!(render(&mut narrowed_by_someone, true).unwrap());
        assert_eq!(narrowed_by_someone, installed());
    }

    #[test]
    fn the_rules_are_those_the_install_renders() {
        let docs =
            crate::input::source::parse(include_str!("../../../../manifests/rendered/base.yaml"))
                .unwrap();
        let installed = docs
            .iter()
            .filter(|d| d.value["kind"] == "MutatingWebhookConfiguration")
            .flat_map(|d| d.value["webhooks"].as_array().cloned().unwrap_or_default())
            .find(|h| h["name"] == WEBHOOK)
            .unwrap();
        assert_eq!(installed["rules"], rules());
    }

    #[test]
    fn a_configuration_without_the_webhook_is_an_error() {
        let mut c = json!({"webhooks": [{"name": "mutate.winadmit.io"}]});
        assert!(render(&mut c, true).is_err());
    }
}
