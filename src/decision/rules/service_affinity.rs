//! WIN-SERVICE-AFFINITY-TIMEOUT: a rule on Services. Whether a Service
//! matters depends on the workloads it selects, so [`crate::decision::services`]
//! pairs Services with the Windows workloads of the same input and calls
//! [`check_service`] here; the per-workload check does nothing.

use serde_json::Value;

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::path::FieldPath;
use crate::decision::rules::cel::Export;

/// The rule's id, for the modules that name it.
pub const ID: &str = "WIN-SERVICE-AFFINITY-TIMEOUT";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "Session affinity timeout is not supported for Windows backends",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Any,
        what: "A Service whose selector matches the pod labels of a Windows-targeted workload in the same input (in `lint`, every file given on the command line) and that sets `sessionAffinityConfig.clientIP.timeoutSeconds` to anything but the API default (10800). Reported on the Service, not on the workloads it selects.",
        why: "kube-proxy on Windows implements ClientIP session affinity without a configurable timeout: the value is ignored, so clients stick to a backend for a different time than the Service says.",
        source: "Layer: kube-proxy on Windows nodes (HNS load balancers), every Kubernetes version: the timeout is not applied; the API server accepts it. Kubernetes Windows docs, 'Session affinity' (Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes'): setting the maximum session sticky time using service.spec.sessionAffinityConfig.clientIP.timeoutSeconds is not supported on Windows; 'Load balancing and Services': ClientIP affinity needs Windows Server build 19551+.",
        doc_url: "https://kubernetes.io/docs/concepts/services-networking/windows-networking/#limitations",
        fix: "Remove `sessionAffinityConfig.clientIP.timeoutSeconds` (keep `sessionAffinity: ClientIP` if stickiness is needed), or accept that Windows backends ignore it.",
        example: "kind: Service\nspec:\n  selector:\n    app: iis\n  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: 600",
        since: None,
        until: None,
    },
    check,
    export: |_| Export::Gap("judges Services by the pods behind them: needs live facts"),
};

fn check(_: &RuleContext<'_, '_, '_>, _: &mut RuleFindings) {}

/// The API server's default `sessionAffinityConfig.clientIP.timeoutSeconds`
/// (3 hours): present on every defaulted ClientIP Service, so not reported.
pub const DEFAULT_TIMEOUT: i64 = 10_800;

/// JSON Pointer (from the Service root) of the field this rule reports.
pub const POINTER: &str = "/spec/sessionAffinityConfig/clientIP/timeoutSeconds";

/// The finding on a Service that selects the Windows pods of `owner`
/// (`Kind/name`): its field and message, if it sets a timeout.
#[must_use]
pub fn check_service(service: &Value, owner: &str) -> Option<(FieldPath, String)> {
    let timeout = service
        .pointer(POINTER)
        .filter(|t| !t.is_null() && t.as_i64() != Some(DEFAULT_TIMEOUT))?;
    Some((
        FieldPath::keys(&[
            "spec",
            "sessionAffinityConfig",
            "clientIP",
            "timeoutSeconds",
        ]),
        format!(
            "timeoutSeconds {timeout} is not supported on Windows, and the Service selects the Windows pods of {owner}: Windows kube-proxy ignores the session affinity timeout"
        ),
    ))
}
