//! The variables every policy shares: the pod spec and metadata of any
//! workload kind, its container lists, HostProcess, the exemptions, the
//! engine's targeting, and what each image is ([`super::images`]).

use super::signals::{linux_signals, windows_signals};
use crate::decision::policy::Policy;
use crate::decision::rules::cel::{C_HOST_PROCESS, CONTAINER_LISTS, cel_list, cel_str};

/// `(pod kind expr, CronJob expr, other templates expr)` chosen by kind.
pub(super) fn by_kind(pod: &str, cronjob: &str, template: &str) -> String {
    format!(
        "object.kind == 'Pod' ? ({pod}) : (object.kind == 'CronJob' ? ({cronjob}) : ({template}))"
    )
}

/// The policy's variables, in order (later ones use earlier ones).
#[must_use]
pub fn variables(policy: &Policy) -> Vec<(&'static str, String)> {
    let mut vars = object_variables();
    vars.extend(list_variables());
    vars.extend(host_process_variables());
    vars.extend([
        ("exempt", exempt_labels(policy)),
        // On a pod UPDATE the API server takes nothing but ephemeral
        // containers (through pods/ephemeralcontainers): the mutation
        // leaves the rest alone, as /mutate does.
        (
            "podUpdate",
            "object.kind == 'Pod' && has(request.operation) && request.operation == 'UPDATE'"
                .to_owned(),
        ),
        (
            "ephemeralUpdate",
            "variables.podUpdate && has(request.subResource) && request.subResource == 'ephemeralcontainers'"
                .to_owned(),
        ),
        // The engine's targeting (`targeting::classify`) of the pod spec.
        (
            "windows",
            format!(
                "[variables.spec].exists(s, {})",
                any_of(windows_signals(policy, true))
            ),
        ),
        (
            "linux",
            format!(
                "!variables.windows && [variables.spec].exists(s, {})",
                any_of(linux_signals(policy, true))
            ),
        ),
        (
            "hyperv",
            if policy.params.hyperv_runtime_classes.is_empty() {
                "false".to_owned()
            } else {
                format!(
                    "has(variables.spec.runtimeClassName) && variables.spec.runtimeClassName in {}",
                    cel_list(&policy.params.hyperv_runtime_classes)
                )
            },
        ),
    ]);
    vars.extend(super::images::image_variables(policy));
    vars
}

/// The pod spec and metadata of any workload kind, and where they are.
fn object_variables() -> Vec<(&'static str, String)> {
    let meta_map = |field: &str| {
        by_kind(
            &format!("has(object.metadata.{field}) ? object.metadata.{field} : {{}}"),
            &format!(
                "has(object.spec.jobTemplate.spec.template.metadata) && has(object.spec.jobTemplate.spec.template.metadata.{field}) ? object.spec.jobTemplate.spec.template.metadata.{field} : {{}}"
            ),
            &format!(
                "has(object.spec.template.metadata) && has(object.spec.template.metadata.{field}) ? object.spec.template.metadata.{field} : {{}}"
            ),
        )
    };
    vec![
        (
            "spec",
            by_kind(
                "object.spec",
                "object.spec.jobTemplate.spec.template.spec",
                "object.spec.template.spec",
            ),
        ),
        (
            "prefix",
            by_kind(
                "'spec'",
                "'spec.jobTemplate.spec.template.spec'",
                "'spec.template.spec'",
            ),
        ),
        (
            "pointer",
            by_kind(
                "'/spec'",
                "'/spec/jobTemplate/spec/template/spec'",
                "'/spec/template/spec'",
            ),
        ),
        (
            "metaPrefix",
            by_kind(
                "'metadata'",
                "'spec.jobTemplate.spec.template.metadata'",
                "'spec.template.metadata'",
            ),
        ),
        (
            "annotations",
            "has(object.metadata.annotations) ? object.metadata.annotations : {}".to_owned(),
        ),
        ("podAnnotations", meta_map("annotations")),
        (
            "labels",
            "has(object.metadata.labels) ? object.metadata.labels : {}".to_owned(),
        ),
        ("podLabels", meta_map("labels")),
    ]
}

/// The pod spec's container and volume lists, and their names.
fn list_variables() -> Vec<(&'static str, String)> {
    let mut vars = Vec::new();
    for list in CONTAINER_LISTS.into_iter().chain(["volumes"]) {
        vars.push((
            list,
            format!("has(variables.spec.{list}) ? variables.spec.{list} : []"),
        ));
    }
    // The three container lists in one, for the tests that do not name
    // an element's path.
    vars.push((
        "allContainers",
        "variables.initContainers + variables.containers + variables.ephemeralContainers"
            .to_owned(),
    ));
    // Names are unique in each list (the API server validates it): a
    // field path finds its element's index by name, which costs a string
    // comparison per element, where `indexOf` on the element compares
    // whole objects.
    vars.extend([
        (
            "initContainersNames",
            "variables.initContainers.map(x, x.name)".to_owned(),
        ),
        (
            "containersNames",
            "variables.containers.map(x, x.name)".to_owned(),
        ),
        (
            "ephemeralContainersNames",
            "variables.ephemeralContainers.map(x, x.name)".to_owned(),
        ),
        (
            "volumesNames",
            "variables.volumes.map(x, x.name)".to_owned(),
        ),
    ]);
    vars
}

/// Which containers are HostProcess, and whether the pod says
/// `spec.os.name: windows`.
fn host_process_variables() -> [(&'static str, String); 5] {
    let hp = C_HOST_PROCESS;
    [
        (
            "podHostProcessSet",
            "has(variables.spec.securityContext) && has(variables.spec.securityContext.windowsOptions) && has(variables.spec.securityContext.windowsOptions.hostProcess)".to_owned(),
        ),
        (
            "podHostProcess",
            "variables.podHostProcessSet && variables.spec.securityContext.windowsOptions.hostProcess == true".to_owned(),
        ),
        (
            "anyHostProcess",
            format!("variables.allContainers.exists(c, {hp})"),
        ),
        (
            "allHostProcess",
            format!("size(variables.allContainers) > 0 && variables.allContainers.all(c, {hp})"),
        ),
        (
            "osWindows",
            "has(variables.spec.os) && has(variables.spec.os.name) && variables.spec.os.name == 'windows'".to_owned(),
        ),
    ]
}

/// CEL bools `||`-ed, each in parentheses.
pub(super) fn any_of(signals: Vec<String>) -> String {
    let any: Vec<String> = signals.into_iter().map(|s| format!("({s})")).collect();
    any.join(" || ")
}

/// `exemptions.labelSelectors` as CEL over the object's and its pods'
/// labels (the pods' labels win, as in the engine).
fn exempt_labels(policy: &Policy) -> String {
    let label = |k: &str| {
        let k = cel_str(k);
        (
            format!("({k} in variables.podLabels || {k} in variables.labels)"),
            format!(
                "({k} in variables.podLabels ? variables.podLabels[{k}] : variables.labels[{k}])"
            ),
        )
    };
    let mut any = Vec::new();
    for sel in &policy.exemptions.label_selectors {
        let mut all = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            let (has, val) = label(k);
            all.push(format!("({has} && {val} == {})", cel_str(v)));
        }
        for req in sel.match_expressions.iter().flatten() {
            let (has, val) = label(&req.key);
            let values = cel_list(req.values.as_deref().unwrap_or_default());
            all.push(match req.operator.as_str() {
                "In" => format!("({has} && {val} in {values})"),
                "NotIn" => format!("(!{has} || !({val} in {values}))"),
                "Exists" => has,
                "DoesNotExist" => format!("!{has}"),
                // The policy loader rejects other operators.
                _ => "false".to_owned(),
            });
        }
        if all.is_empty() {
            // An empty selector matches everything.
            all.push("true".to_owned());
        }
        any.push(format!("({})", all.join(" && ")));
    }
    if any.is_empty() {
        "false".to_owned()
    } else {
        any.join(" || ")
    }
}
