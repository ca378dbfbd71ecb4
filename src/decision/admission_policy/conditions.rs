//! The match conditions: which objects the policies look at (a pod spec,
//! a user not exempt, a pod that targets or may target Windows).

use super::bind::bind_variables;
use super::images::build_regexes;
use super::removals::needs_mutation;
use super::signals::{linux_signals, windows_signals};
use super::variables::{any_of, by_kind, variables};
use crate::decision::cluster::TargetCluster;
use crate::decision::policy::Policy;
use crate::decision::rules::cel::{WINDOWS_PATH, cel_list, cel_str, globs_regex};

/// The match conditions: a pod spec is there, the user is not exempt, and
/// the pod targets Windows.
#[must_use]
pub fn match_conditions(policy: &Policy, cluster: &TargetCluster) -> Vec<(&'static str, String)> {
    let mut out = vec![(
        "has-pod-spec",
        format!(
            "has(object.spec) && ({})",
            by_kind(
                "true",
                "has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) && has(object.spec.jobTemplate.spec.template.spec)",
                "has(object.spec.template) && has(object.spec.template.spec)",
            )
        ),
    )];
    let ex = &policy.exemptions;
    if !ex.users.is_empty() || !ex.groups.is_empty() {
        out.push((
            "user-not-exempt",
            format!(
                "!(request.userInfo.username in {}) && !(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {}))",
                cel_list(&ex.users),
                cel_list(&ex.groups)
            ),
        ));
    }
    out.push(("targets-windows", targets_windows(policy, cluster)));
    out
}

/// The match conditions of the mutating policy: those of the validating
/// ones for Windows-targeted pods, no Linux signal (the engine does not
/// mutate a pod whose targeting contradicts itself: it may land on
/// Linux), and something to change (`needs-mutation`): an object the
/// mutation would leave as it is is not matched at all, so the API server
/// stores it exactly as sent (a matched object is decoded again after the
/// mutation, which, for one, no longer gives a Job without labels its
/// template's generated labels).
#[must_use]
pub fn mutation_match_conditions(
    policy: &Policy,
    cluster: &TargetCluster,
) -> Vec<(&'static str, String)> {
    let mut out = match_conditions(policy, cluster);
    // A pod that selects no OS whose images can only be Windows is pinned
    // to Windows (mutation.pinWindowsImages), then mutated as a Windows pod;
    // one with a Linux signal is left out by no-linux-targeting below.
    if super::images::pins_by_images(policy) {
        let pinned = bind_variables("variables.pinnableByImages", &variables(policy));
        for (name, expr) in &mut out {
            if *name == "targets-windows" {
                *expr = format!("({expr}) || ({pinned})");
            }
        }
    }
    let spec = by_kind(
        "object.spec",
        "object.spec.jobTemplate.spec.template.spec",
        "object.spec.template.spec",
    );
    out.push((
        "no-linux-targeting",
        format!(
            "![{spec}].exists(s, {})",
            any_of(linux_signals(policy, cluster.version_at_least(1, 23)))
        ),
    ));
    out.push(("needs-mutation", needs_mutation(policy, cluster)));
    out
}

/// The pod spec is Windows-targeted (a match condition: no variables).
fn targets_windows(policy: &Policy, cluster: &TargetCluster) -> String {
    let spec = by_kind(
        "object.spec",
        "object.spec.jobTemplate.spec.template.spec",
        "object.spec.template.spec",
    );
    format!(
        "[{spec}].exists(s, {})",
        any_of(windows_signals(policy, cluster.version_at_least(1, 23)))
    )
}

/// The match conditions of the validating policies: a pod spec is there,
/// the user is not exempt, and the pod may run on Windows or names
/// something only Windows has (`may-target-windows`, the webhooks'
/// matchCondition of the same name, with the policy's image patterns): a
/// Windows signal, the Hyper-V isolation annotation, `windowsOptions`, a
/// Windows hostPath, or an image that is Windows by `params.windowsImages`
/// or names a Windows build. The rules for Windows-targeted pods then
/// check `variables.windows`, those for Linux-targeted pods
/// `variables.linux`, as the engine scopes them.
#[must_use]
pub fn validation_match_conditions(
    policy: &Policy,
    cluster: &TargetCluster,
) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = match_conditions(policy, cluster)
        .into_iter()
        .filter(|(name, _)| *name != "targets-windows")
        .collect();
    let pod = by_kind(
        "object",
        "object.spec.jobTemplate.spec.template",
        "object.spec.template",
    );
    let (_, _, word, _) = build_regexes();
    let mut image = format!("c.image.matches({})", cel_str(&format!("(?i){word}")));
    if let Some(re) = globs_regex(&policy.params.windows_images) {
        image = format!("c.image.lowerAscii().matches({}) || {image}", cel_str(&re));
    }
    let windows_path = cel_str(WINDOWS_PATH);
    let mut signals = windows_signals(policy, cluster.version_at_least(1, 23));
    signals.extend([
        format!(
            "has(p.metadata) && has(p.metadata.annotations) && {} in p.metadata.annotations",
            cel_str(crate::decision::rules::hyperv::ISOLATION_ANNOTATION)
        ),
        "(has(s.securityContext) && has(s.securityContext.windowsOptions)) || [has(s.initContainers) ? s.initContainers : [], has(s.containers) ? s.containers : [], has(s.ephemeralContainers) ? s.ephemeralContainers : []].exists(l, l.exists(c, has(c.securityContext) && has(c.securityContext.windowsOptions)))".to_owned(),
        format!(
            "has(s.volumes) && s.volumes.exists(v, has(v.hostPath) && has(v.hostPath.path) && v.hostPath.path.matches({windows_path}))"
        ),
        format!(
            "[has(s.initContainers) ? s.initContainers : [], has(s.containers) ? s.containers : [], has(s.ephemeralContainers) ? s.ephemeralContainers : []].exists(l, l.exists(c, has(c.image) && ({image})))"
        ),
    ]);
    out.push((
        "may-target-windows",
        format!("[{pod}].exists(p, [p.spec].exists(s, {}))", any_of(signals)),
    ));
    out
}
