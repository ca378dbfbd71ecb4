//! The engine's Windows and Linux targeting signals as CEL over a pod
//! spec `s`: what the match conditions and the variables test.

use crate::decision::policy::Policy;
use crate::decision::rules::cel::cel_list;
use crate::decision::targeting::Os;

/// The engine's Linux signals as CEL over the spec `s`.
pub(super) fn linux_signals(policy: &Policy, os_name: bool) -> Vec<String> {
    let mut signals = vec![
        "has(s.nodeSelector) && ((('kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['kubernetes.io/os'] == 'linux') || (('beta.kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['beta.kubernetes.io/os'] == 'linux'))".to_owned(),
    ];
    if os_name {
        signals.push("has(s.os) && has(s.os.name) && s.os.name == 'linux'".to_owned());
    }
    let terms =
        "s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    signals.push(format!(
        "has(s.affinity) && has(s.affinity.nodeAffinity) && has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && has({terms}) && size({terms}) > 0 && {terms}.all(t, has(t.matchExpressions) && t.matchExpressions.exists(r, r.key in ['kubernetes.io/os', 'beta.kubernetes.io/os'] && has(r.values) && size(r.values) > 0 && ((r.operator == 'In' && r.values.all(x, x == 'linux')) || (r.operator == 'NotIn' && r.values.all(x, x == 'windows')))))"
    ));
    let classes = policy.runtime_classes.names_for(Os::Linux);
    if !classes.is_empty() {
        signals.push(format!(
            "has(s.runtimeClassName) && s.runtimeClassName in {}",
            cel_list(&classes)
        ));
    }
    signals
}

/// The engine's Windows signals (`targeting::classify`) as CEL over the spec `s`.
pub(super) fn windows_signals(policy: &Policy, os_name: bool) -> Vec<String> {
    let mut signals = vec![
        "has(s.nodeSelector) && ((('kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['kubernetes.io/os'] == 'windows') || (('beta.kubernetes.io/os' in s.nodeSelector) && s.nodeSelector['beta.kubernetes.io/os'] == 'windows') || ('node.kubernetes.io/windows-build' in s.nodeSelector) || (('kubernetes.azure.com/os-sku' in s.nodeSelector) && s.nodeSelector['kubernetes.azure.com/os-sku'] in ".to_owned()
            + &cel_list(crate::decision::targeting::WINDOWS_OS_SKUS)
            + ") || (('cloud.google.com/gke-os-distribution' in s.nodeSelector) && s.nodeSelector['cloud.google.com/gke-os-distribution'].startsWith('windows')))",
    ];
    if os_name {
        signals.push("has(s.os) && has(s.os.name) && s.os.name == 'windows'".to_owned());
    }
    let terms =
        "s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let has_terms = "has(s.affinity) && has(s.affinity.nodeAffinity) && has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms)";
    signals.push(format!(
        "{has_terms} && size({terms}) > 0 && ({terms}.all(t, has(t.matchExpressions) && t.matchExpressions.exists(r, r.key in ['kubernetes.io/os', 'beta.kubernetes.io/os'] && has(r.values) && size(r.values) > 0 && ((r.operator == 'In' && r.values.all(x, x == 'windows')) || (r.operator == 'NotIn' && r.values.all(x, x == 'linux'))))) || {terms}.all(t, has(t.matchExpressions) && t.matchExpressions.exists(r, r.key == 'node.kubernetes.io/windows-build' && r.operator in ['In', 'Exists'])) || {terms}.all(t, has(t.matchExpressions) && t.matchExpressions.exists(r, r.operator == 'In' && has(r.values) && size(r.values) > 0 && ((r.key == 'kubernetes.azure.com/os-sku' && r.values.all(x, x in {skus})) || (r.key == 'cloud.google.com/gke-os-distribution' && r.values.all(x, x.startsWith('windows')))))))",
        skus = cel_list(crate::decision::targeting::WINDOWS_OS_SKUS)
    ));
    let hp = "(has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.hostProcess) && c.securityContext.windowsOptions.hostProcess == true)";
    signals.push(format!(
        "(has(s.securityContext) && has(s.securityContext.windowsOptions) && has(s.securityContext.windowsOptions.hostProcess) && s.securityContext.windowsOptions.hostProcess == true) || (has(s.initContainers) && s.initContainers.exists(c, {hp})) || (has(s.containers) && s.containers.exists(c, {hp})) || (has(s.ephemeralContainers) && s.ephemeralContainers.exists(c, {hp}))"
    ));
    let classes = policy.runtime_classes.names_for(Os::Windows);
    if !classes.is_empty() {
        signals.push(format!(
            "has(s.runtimeClassName) && s.runtimeClassName in {}",
            cel_list(&classes)
        ));
    }
    signals
}
