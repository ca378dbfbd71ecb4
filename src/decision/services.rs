//! Cross-object checks: Services that route to Windows workloads.
//!
//! A Service is not a workload, and whether it matters to Windows depends on
//! the pods its selector picks. The caller collects the pod labels of every
//! Windows-targeted workload it has seen ([`WindowsPods`]) and then asks
//! [`check_service`] about each Service. Pure, like the engine: the `lint`
//! entry point collects over its whole input (every file on the command line, see
//! `lint::CrossObject`), so a Service and its Deployment may live in
//! different files. Findings use the same [`Finding`] type, rule ids from
//! the catalogue, and the same policy (severity, versions, exemptions,
//! `winadmit.io/skip.<RULE>` annotations on the Service).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::decision::cluster::TargetCluster;
use crate::decision::finding::Finding;
use crate::decision::policy::{Policy, SKIP_ANNOTATION_PREFIX};
use crate::decision::rules;

/// The rule a Service's session-affinity timeout is reported under.
pub const AFFINITY_TIMEOUT: &str = crate::decision::rules::service_affinity::ID;

/// JSON Pointers (from the Service root) of the fields this module may
/// report, so a caller can look their source positions up in advance.
pub const REPORTED_POINTERS: &[&str] = &[rules::service_affinity::POINTER];

/// One Windows workload's pods: where they run and their labels.
#[derive(Debug, Clone)]
struct Pods {
    namespace: Option<String>,
    labels: BTreeMap<String, String>,
    /// `Kind/name`, for messages.
    owner: String,
}

/// The pod labels of the Windows-targeted workloads seen so far.
#[derive(Debug, Clone, Default)]
pub struct WindowsPods {
    pods: Vec<Pods>,
}

impl WindowsPods {
    /// Adds what another part of the input recorded.
    pub fn absorb(&mut self, other: Self) {
        self.pods.extend(other.pods);
    }

    /// Records a Windows workload's pod template labels.
    pub fn add<'l>(
        &mut self,
        namespace: Option<&str>,
        labels: impl IntoIterator<Item = (&'l str, &'l str)>,
        owner: String,
    ) {
        self.pods.push(Pods {
            namespace: namespace.map(str::to_owned),
            labels: labels
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            owner,
        });
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// The first Windows workload whose pods a selector in `namespace` picks.
    /// A namespace left out (as in most chart output) matches any.
    #[must_use]
    pub fn selected_by(
        &self,
        namespace: Option<&str>,
        selector: &BTreeMap<&str, &str>,
    ) -> Option<&str> {
        if selector.is_empty() {
            return None;
        }
        self.pods
            .iter()
            .find(|p| {
                let same_ns = match (namespace, p.namespace.as_deref()) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                };
                same_ns
                    && selector
                        .iter()
                        .all(|(k, v)| p.labels.get(*k).is_some_and(|l| l == v))
            })
            .map(|p| p.owner.as_str())
    }
}

/// Is this document a core/v1 Service?
#[must_use]
pub fn is_service(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some("Service")
        && value.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// Checks one Service against the Windows workloads seen in the same input.
#[must_use]
pub fn check_service(
    policy: &Policy,
    cluster: &TargetCluster,
    service: &Value,
    windows: &WindowsPods,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if !is_service(service) || windows.is_empty() {
        return out;
    }
    let Some(rule) = rules::find(AFFINITY_TIMEOUT) else {
        return out;
    };
    let Some(severity) = policy.level_of(AFFINITY_TIMEOUT, cluster) else {
        return out;
    };
    if !rule.info.applies_to(cluster.kubernetes_version) {
        return out;
    }
    let namespace = service
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    let str_map = |pointer: &str| -> BTreeMap<&str, &str> {
        service
            .pointer(pointer)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
                    .collect()
            })
            .unwrap_or_default()
    };
    let labels = str_map("/metadata/labels");
    let owned = || {
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    if policy.exempt_object(namespace, owned).is_some() {
        return out;
    }
    let skip = format!("{SKIP_ANNOTATION_PREFIX}{AFFINITY_TIMEOUT}");
    if policy.skippable(AFFINITY_TIMEOUT, namespace)
        && str_map("/metadata/annotations")
            .get(skip.as_str())
            .is_some_and(|r| !r.trim().is_empty())
    {
        return out;
    }
    let Some(owner) = windows.selected_by(namespace, &str_map("/spec/selector")) else {
        return out;
    };
    if let Some((field, message)) = rules::service_affinity::check_service(service, owner) {
        out.push(Finding {
            rule: rule.info.id,
            severity,
            field,
            message,
            fix: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn windows() -> WindowsPods {
        let mut w = WindowsPods::default();
        w.add(
            Some("web"),
            [("app", "iis"), ("tier", "front")],
            "Deployment/iis".into(),
        );
        w
    }

    fn service(ns: &str, selector: Value, timeout: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "iis", "namespace": ns},
            "spec": {"selector": selector, "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": timeout}}}})
    }

    fn rules_of(s: &Value, w: &WindowsPods) -> Vec<String> {
        check_service(&Policy::default_policy(), &TargetCluster::default(), s, w)
            .into_iter()
            .map(|f| format!("{} {}", f.rule, f.field))
            .collect()
    }

    #[test]
    fn reports_a_timeout_on_services_selecting_windows_pods() {
        let s = service("web", json!({"app": "iis"}), json!(600));
        assert_eq!(
            rules_of(&s, &windows()),
            ["WIN-SERVICE-AFFINITY-TIMEOUT spec.sessionAffinityConfig.clientIP.timeoutSeconds"]
        );
    }

    #[test]
    fn leaves_other_services_alone() {
        let w = windows();
        // Another namespace, a selector the pods do not satisfy, no selector,
        // the API default, no Windows workloads at all.
        for s in [
            service("other", json!({"app": "iis"}), json!(600)),
            service("web", json!({"app": "iis", "tier": "back"}), json!(600)),
            service("web", json!({}), json!(600)),
            service("web", json!({"app": "iis"}), json!(10800)),
        ] {
            assert!(rules_of(&s, &w).is_empty(), "{s}");
        }
        let s = service("web", json!({"app": "iis"}), json!(600));
        assert!(rules_of(&s, &WindowsPods::default()).is_empty());
    }

    #[test]
    fn follows_policy_and_skip_annotations() {
        let s = service("web", json!({"app": "iis"}), json!(600));
        let off = Policy::from_yaml("p", "rules:\n  WIN-SERVICE-AFFINITY-TIMEOUT: off\n").unwrap();
        assert!(check_service(&off, &TargetCluster::default(), &s, &windows()).is_empty());
        let exempt = Policy::from_yaml("p", "exemptions:\n  namespaces: [web]\n").unwrap();
        assert!(check_service(&exempt, &TargetCluster::default(), &s, &windows()).is_empty());
        let mut skipped = s.clone();
        skipped["metadata"]["annotations"] = json!({"winadmit.io/skip.WIN-SERVICE-AFFINITY-TIMEOUT": "stickiness handled by the app"});
        assert!(rules_of(&skipped, &windows()).is_empty());
    }
}
