//! Each rule's export ([`crate::decision::rules::Rule::export`]) as a validation:
//! its test, the field paths of its findings, its message and, where the
//! mutation removes the fields, its JSON Patch removals.

use super::{Gap, Validation};
use crate::decision::cluster::TargetCluster;
use crate::decision::finding::Severity;
use crate::decision::policy::{Mode, Policy, SKIP_ANNOTATION_PREFIX};
use crate::decision::rules;
use crate::decision::rules::cel::{
    CONTAINER_LISTS, Export, ExportContext, Field, Probe, ProbeScope, Removal, cel_str,
};

/// The CEL expression naming an element's path, e.g. `spec.containers[2]`.
fn element(scope: ProbeScope, list: &str, pointer: bool) -> String {
    let (root, sep, open, close) = if pointer {
        ("variables.pointer", "/", "/", "")
    } else {
        ("variables.prefix", ".", "[", "]")
    };
    match scope {
        ProbeScope::Pod => root.to_owned(),
        ProbeScope::Volume => format!(
            "{root} + '{sep}volumes{open}' + string(variables.volumesNames.indexOf(v.name)) + '{close}'"
        ),
        ProbeScope::Container | ProbeScope::Mount => {
            let c = format!(
                "{root} + '{sep}{list}{open}' + string(variables.{list}Names.indexOf(c.name)) + '{close}'"
            );
            if scope == ProbeScope::Mount {
                format!(
                    "{c} + '{sep}volumeMounts{open}' + string(c.volumeMounts.map(x, x.mountPath).indexOf(m.mountPath)) + '{close}'"
                )
            } else {
                c
            }
        }
    }
}

fn keys_suffix(keys: &[&str], sep: char) -> String {
    keys.iter().fold(String::new(), |mut s, k| {
        s.push(sep);
        s.push_str(k);
        s
    })
}

/// The probe's field paths (or JSON pointers) as a CEL list of strings.
fn paths(p: &Probe, pointer: bool) -> Vec<String> {
    let one = |scope: ProbeScope, list: &str| -> String {
        let elem = element(scope, list, pointer);
        match &p.field {
            Field::Keys(keys) => {
                let suffix = keys_suffix(keys, if pointer { '/' } else { '.' });
                if suffix.is_empty() {
                    elem
                } else {
                    format!("{elem} + {}", cel_str(&suffix))
                }
            }
            Field::Suffixes(list) => format!("({list}).map(x, {elem} + x).join(', ')"),
            Field::Absolute(list) => format!("({list}).join(', ')"),
        }
    };
    let hit = &p.hit;
    match p.scope {
        ProbeScope::Pod => {
            let e = one(ProbeScope::Pod, "");
            vec![format!("({hit} ? [{e}] : [])")]
        }
        ProbeScope::Volume => vec![format!(
            "variables.volumes.filter(v, {hit}).map(v, {})",
            one(ProbeScope::Volume, "")
        )],
        ProbeScope::Container => CONTAINER_LISTS
            .iter()
            .map(|l| {
                format!(
                    "variables.{l}.filter(c, {hit}).map(c, {})",
                    one(ProbeScope::Container, l)
                )
            })
            .collect(),
        ProbeScope::Mount => CONTAINER_LISTS
            .iter()
            .map(|l| {
                format!(
                    "variables.{l}.filter(c, {}).map(c, c.volumeMounts.filter(m, {hit}).map(m, {}).join(', '))",
                    mount_container(p),
                    one(ProbeScope::Mount, l)
                )
            })
            .collect(),
    }
}

fn mount_container(p: &Probe) -> String {
    let hit = &p.hit;
    let base = format!("has(c.volumeMounts) && c.volumeMounts.exists(m, {hit})");
    match &p.container_hit {
        Some(ch) => format!("({ch}) && {base}"),
        None => base,
    }
}

/// Some probe finds something: CEL bools to `||`. The probes of one scope
/// share one comprehension per list, so a rule costs at most one pass over
/// each container list and one over the volumes, whatever its probe count.
fn any(probes: &[Probe]) -> Vec<String> {
    let of = |scope: ProbeScope| -> Vec<String> {
        probes
            .iter()
            .filter(|p| p.scope == scope)
            .map(|p| match scope {
                ProbeScope::Mount => format!("({})", mount_container(p)),
                _ => format!("({})", p.hit),
            })
            .collect()
    };
    let mut out = Vec::new();
    let pod = of(ProbeScope::Pod);
    if !pod.is_empty() {
        out.push(pod.join(" || "));
    }
    let volume = of(ProbeScope::Volume);
    if !volume.is_empty() {
        out.push(format!(
            "variables.volumes.exists(v, {})",
            volume.join(" || ")
        ));
    }
    let mut container = of(ProbeScope::Container);
    container.extend(of(ProbeScope::Mount));
    if !container.is_empty() {
        // One pass over the three lists joined: a comprehension costs the
        // API server's CEL more to set up than a container costs to test.
        let body = container.join(" || ");
        out.push(format!("variables.allContainers.exists(c, {body})"));
    }
    out
}

/// The rule was skipped by annotation with a reason: the pod template's
/// annotation first, the object's otherwise (as the engine reads it), in a
/// namespace where the policy lets an annotation skip it. `None` where no
/// annotation skips the rule (`skips`; a rule that guards a security
/// boundary).
fn skip(policy: &Policy, rule: &str) -> Option<String> {
    if !policy.skippable_rule(rule) {
        return None;
    }
    let k = cel_str(&format!("{SKIP_ANNOTATION_PREFIX}{rule}"));
    let annotated = format!(
        "({k} in variables.podAnnotations ? variables.podAnnotations[{k}].trim() != '' : ({k} in variables.annotations && variables.annotations[{k}].trim() != ''))"
    );
    if policy.skips.namespaces.is_empty() {
        return Some(annotated);
    }
    let names: Vec<String> = policy.skips.namespaces.iter().map(|n| cel_str(n)).collect();
    Some(format!(
        "(request.namespace in [{}] && {annotated})",
        names.join(", ")
    ))
}

/// `variables.exempt`, or the rule skipped by annotation where allowed.
pub(super) fn exempt_or_skipped(policy: &Policy, rule: &str) -> String {
    match skip(policy, rule) {
        Some(s) => format!("variables.exempt || {s}"),
        None => "variables.exempt".to_owned(),
    }
}

/// The effective own mode of a rule, if the policy sets one.
fn rule_mode(policy: &Policy, id: &str) -> Option<Mode> {
    let own = policy.mode_for(id, Some(Mode::Warn)) != Mode::Warn
        || policy.mode_for(id, Some(Mode::Audit)) != Mode::Audit;
    own.then(|| policy.mode_for(id, None))
}

/// Every rule as a validation, or a gap. Works at any target (the command
/// refuses targets without ValidatingAdmissionPolicy; tests use older ones).
#[must_use]
pub fn validations(policy: &Policy, cluster: &TargetCluster) -> (Vec<Validation>, Vec<Gap>) {
    let mut out = Vec::new();
    let mut gaps = Vec::new();
    let cx = ExportContext {
        cluster,
        params: &policy.params,
        runtime_classes: &policy.runtime_classes,
        empty_dir_off_memory: policy.mutation.empty_dir_off_memory,
    };
    for (i, rule) in rules::ALL.iter().enumerate() {
        let id = rule.info.id;
        let gap = |reason: &str, partial: bool| Gap {
            rule: id,
            reason: reason.into(),
            partial,
        };
        let Some(severity) = policy.level(i, cluster) else {
            gaps.push(gap(
                "off for this policy and target: nothing to enforce",
                false,
            ));
            continue;
        };
        if severity == Severity::Info {
            gaps.push(gap(
                "info (advice): never an admission action; see `winadmit lint`",
                false,
            ));
            continue;
        }
        match (rule.export)(&cx) {
            Export::Gap(reason) => gaps.push(gap(reason, false)),
            Export::Cel {
                probes,
                message,
                partial,
                windows_signal,
                removal,
                refused_by_api_server,
            } => {
                if let Some(reason) = partial {
                    gaps.push(gap(reason, true));
                }
                // The engine's scope: the policies match every pod that may
                // run on Windows (`may-target-windows`).
                let guard = match rule.info.scope {
                    _ if windows_signal => "!variables.windows || ",
                    rules::Scope::Windows => "!variables.windows || ",
                    rules::Scope::Linux => "!variables.linux || ",
                    rules::Scope::Any => "",
                };
                let mut x = validation(policy, rule, &probes, message, guard);
                x.severity = severity;
                x.rule_mode = rule_mode(policy, id);
                x.removal = removal;
                x.refused_by_api_server = refused_by_api_server;
                out.push(x);
            }
        }
    }
    (out, gaps)
}

/// `rule` exported as `probes` with `message`, checked unless `guard`
/// (severity and mode to be set).
fn validation(
    policy: &Policy,
    rule: &rules::Rule,
    probes: &[Probe],
    message: &str,
    guard: &str,
) -> Validation {
    let id = rule.info.id;
    let anys = any(probes);
    let lists: Vec<String> = probes.iter().flat_map(|p| paths(p, false)).collect();
    // One line: the API server ignores a message with line breaks.
    let fix = rule
        .info
        .fix
        .replace('`', "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let unless = format!("{guard}{}", exempt_or_skipped(policy, id));
    // The probes first: a workload without the fields passes at the first
    // test, before the scope and the skip annotations are read (CEL's `||`
    // gives the same result in either order, errors included).
    let expression = format!("!({}) || {unless}", anys.join(" || "));
    let text = cel_str(&format!(": {message} ({id}). Fix: {fix}"));
    let message_expression = format!("({}).join(', ') + {text}", lists.join(" + "));
    let removable: Vec<&Probe> = probes
        .iter()
        .filter(|p| p.removable && matches!(p.field, Field::Keys(_)))
        .collect();
    let removals = (!removable.is_empty()).then(|| {
        let lists: Vec<String> = removable
            .iter()
            .flat_map(|p| gated(p, true))
            .map(|l| format!("{l}.map(p, JSONPatch{{op: 'remove', path: p}})"))
            .collect();
        format!(
            "{} ? [] : {}",
            exempt_or_skipped(policy, id),
            lists.join(" + ")
        )
    });
    let removed_paths = (!removable.is_empty()).then(|| {
        let lists: Vec<String> = removable.iter().flat_map(|p| gated(p, false)).collect();
        format!(
            "{} ? [] : {}",
            exempt_or_skipped(policy, id),
            lists.join(" + ")
        )
    });
    let removes_something = (!removable.is_empty()).then(|| {
        let tests: Vec<String> = removable.iter().flat_map(|p| gated_test(p)).collect();
        format!(
            "!({}) && ({})",
            exempt_or_skipped(policy, id),
            tests.join(" || ")
        )
    });
    Validation {
        rule: id,
        severity: Severity::Error,
        rule_mode: None,
        removal: Removal::NoOpFields,
        refused_by_api_server: false,
        expression,
        message_expression,
        message: format!("{id}: {message}"),
        removals,
        removed_paths,
        removes_something,
        unless,
        paths: lists.join(" + "),
        text,
    }
}

/// The gate of [`gated`] for the list `list` of a probe of `scope`: true
/// when the mutation may not remove the probe's fields there.
fn gate(scope: ProbeScope, list: &str) -> &'static str {
    if matches!(scope, ProbeScope::Container | ProbeScope::Mount) && list == "ephemeralContainers" {
        "variables.podUpdate && !variables.ephemeralUpdate"
    } else {
        "variables.podUpdate"
    }
}

/// The probe finds something the mutation may remove ([`gated`] is not
/// empty): CEL bools to `||`, one pass over each list.
fn gated_test(p: &Probe) -> Vec<String> {
    let hit = &p.hit;
    match p.scope {
        ProbeScope::Pod => vec![format!("(!variables.podUpdate && ({hit}))")],
        ProbeScope::Volume => vec![format!(
            "(!variables.podUpdate && variables.volumes.exists(v, {hit}))"
        )],
        ProbeScope::Container | ProbeScope::Mount => CONTAINER_LISTS
            .iter()
            .map(|l| {
                let test = if p.scope == ProbeScope::Mount {
                    mount_container(p)
                } else {
                    hit.clone()
                };
                format!(
                    "(!({}) && variables.{l}.exists(c, {test}))",
                    gate(p.scope, l)
                )
            })
            .collect(),
    }
}

/// The probe's field paths (or JSON pointers) that a mutation may remove:
/// on a pod UPDATE only ephemeral containers (pods/ephemeralcontainers).
fn gated(p: &Probe, pointer: bool) -> Vec<String> {
    paths(p, pointer)
        .into_iter()
        .enumerate()
        .map(|(i, l)| format!("({} ? [] : {l})", gate(p.scope, CONTAINER_LISTS[i])))
        .collect()
}
