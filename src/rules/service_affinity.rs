//! WIN-SERVICE-AFFINITY-TIMEOUT: a Service rule, checked across objects by
//! [`crate::services`]; its workload check does nothing.

use super::{Cx, Rule, RuleInfo, Scope, Sink};

/// The rule's id, for the modules that name it.
pub const ID: &str = "WIN-SERVICE-AFFINITY-TIMEOUT";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "Session affinity timeout is not supported for Windows backends",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Any,
        what: "A Service whose selector matches the pod labels of a Windows-targeted workload in the same input (in `lint`, every file given on the command line) and that sets `sessionAffinityConfig.clientIP.timeoutSeconds` to anything but the API default (10800). Checked on Services, not workloads: see `winadmit::services`.",
        why: "kube-proxy on Windows implements ClientIP session affinity without a configurable timeout: the value is ignored, so clients stick to a backend for a different time than the Service says.",
        source: "Layer: kube-proxy on Windows nodes (HNS load balancers), every Kubernetes version: the timeout is not applied; the API server accepts it. Kubernetes Windows docs, 'Session affinity' (Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes'): setting the maximum session sticky time using service.spec.sessionAffinityConfig.clientIP.timeoutSeconds is not supported on Windows; 'Load balancing and Services': ClientIP affinity needs Windows Server build 19551+.",
        doc_url: "https://kubernetes.io/docs/concepts/services-networking/windows-networking/#limitations",
        fix: "Remove `sessionAffinityConfig.clientIP.timeoutSeconds` (keep `sessionAffinity: ClientIP` if stickiness is needed), or accept that Windows backends ignore it.",
        example: "kind: Service\nspec:\n  selector:\n    app: iis\n  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: 600",
        since: None,
        until: None,
    },
    check,
};

fn check(_: &Cx<'_, '_, '_>, _: &mut Sink) {}
