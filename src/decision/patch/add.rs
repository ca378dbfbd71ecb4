//! What the mutating webhook adds to a Windows pod on its own, beside the
//! findings' fixes: the OS and `windows-build` node selectors, `spec.os`,
//! the Windows node tolerations and the isolation annotation.

use serde_json::{Value, json};

use super::{Fixed, Mutation};
use crate::decision::finding::Finding;
use crate::decision::targeting::{OS_LABEL, add_node_selector};
use crate::decision::view::SpecView;
use crate::decision::workload::Workload;

/// Adds `node.kubernetes.io/windows-build` when exactly one node build can
/// run every image whose build is known, the pod does not select a build
/// yet, and it is not a HostProcess pod (HostProcess containers need no
/// matching build). An image's builds are the registry's facts where known
/// (its Windows platforms' `os.version`: an index with 10.0.17763 and
/// 10.0.20348 runs on either), else the build its tag names.
///
/// Which node builds run an image follows the stable container ABI
/// (`windows_builds::runs_on`): from 10.0.20348 on a node runs the previous
/// LTSC's builds up to its own, so a 10.0.20348 image runs on 10.0.20348,
/// 10.0.25398 and 10.0.26100 nodes. With the cluster's Windows nodes known
/// the candidates are their builds, and the pod is pinned when exactly one
/// of them runs every image. Without them the pod is pinned only to a build
/// older than 10.0.20348 (which runs on its own build alone): pinning a
/// 10.0.20348 image to 10.0.20348 would keep it off Windows Server 2025
/// nodes that run it. When several node builds qualify nothing is pinned:
/// the nodes that cannot run the images are then what WIN-BUILD-NO-NODE and
/// WIN-BUILD-NODE-MISMATCH judge, and a nodeSelector cannot name a set.
pub(super) fn add_windows_build(
    m: &mut Mutation,
    workload: &Workload<'_, '_>,
    spec: &SpecView<'_>,
    images: Option<&crate::decision::images::KnownImages>,
    nodes: Option<&crate::decision::cluster::WindowsNodes>,
) {
    use crate::decision::windows_builds::{
        Build, STABLE_ABI_FROM, WINDOWS_BUILD_LABEL, image_build, runs_on,
    };
    if spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(WINDOWS_BUILD_LABEL))
        .is_some()
        || crate::decision::engine::host_process(spec).all
    {
        return;
    }
    let mut all: Vec<Vec<Build>> = Vec::new();
    let mut by_facts = false;
    for image in [
        &spec.init_containers,
        &spec.containers,
        &spec.ephemeral_containers,
    ]
    .into_iter()
    .flatten()
    .flatten()
    .filter_map(|c| c.image.as_deref())
    {
        let builds = match images.and_then(|k| k.facts(image)) {
            Some(facts) => {
                by_facts = true;
                facts.windows_builds()
            }
            None => image_build(image).into_iter().collect(),
        };
        if !builds.is_empty() {
            all.push(builds);
        }
    }
    if all.is_empty() {
        return;
    }
    let node_builds: Vec<Build> = nodes
        .map(|n| n.builds().keys().filter_map(|b| b.parse().ok()).collect())
        .unwrap_or_default();
    let (candidates, from_nodes) = if node_builds.is_empty() {
        let mut c: Vec<Build> = all.iter().flatten().copied().collect();
        c.sort_unstable();
        c.dedup();
        (c, false)
    } else {
        (node_builds, true)
    };
    let hosts: Vec<Build> = candidates
        .into_iter()
        .filter(|h| {
            all.iter()
                .all(|builds| builds.iter().any(|b| runs_on(*h, *b)))
        })
        .collect();
    let [build] = hosts.as_slice() else {
        return;
    };
    if !from_nodes && *build >= STABLE_ABI_FROM {
        return;
    }
    let build = *build;
    let source = match (by_facts, from_nodes) {
        (true, true) => {
            "the one Windows build of the cluster's nodes that runs the images, by the registry's facts"
        }
        (false, true) => "the one Windows build of the cluster's nodes that runs the images",
        (true, false) => "the images' Windows build, by the registry's facts",
        (false, false) => "the images' Windows build",
    };
    let selector = workload.spec_path.key("nodeSelector");
    let selector_pointer = selector.pointer();
    let created = m.ops.iter().any(|o| o.path().as_str() == selector_pointer);
    let op = if spec.node_selector.is_some() || created {
        crate::decision::finding::add_op(
            selector.map_key(WINDOWS_BUILD_LABEL),
            json!(build.to_string()),
        )
    } else {
        crate::decision::finding::add_op(
            &selector,
            json!({ WINDOWS_BUILD_LABEL: build.to_string() }),
        )
    };
    m.push(
        op,
        format!("winadmit added nodeSelector {WINDOWS_BUILD_LABEL}={build} ({source})"),
        None,
    );
}

pub(super) fn add_tolerations(
    m: &mut Mutation,
    workload: &Workload<'_, '_>,
    spec: &SpecView<'_>,
    wanted: &[Value],
) {
    let existing = spec.tolerations.as_deref().unwrap_or_default();
    let mut missing: Vec<&Value> = wanted
        .iter()
        .filter(|t| {
            !existing.iter().any(|e| {
                let same =
                    |field: &str, have: Option<&str>| t.get(field).and_then(Value::as_str) == have;
                same("key", e.key.as_deref())
                    && same("value", e.value.as_deref())
                    && same("effect", e.effect.as_deref())
            })
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    let path = workload.spec_path.key("tolerations");
    if spec.tolerations.is_none() {
        let all: Vec<Value> = missing.drain(..).cloned().collect();
        m.push(
            crate::decision::finding::add_op(&path, Value::Array(all)),
            "winadmit added the Windows node tolerations",
            None,
        );
        return;
    }
    for (n, t) in missing.into_iter().enumerate() {
        let op = crate::decision::finding::append_op(&path, t.clone());
        // "/-" paths repeat; keep them distinct for de-duplication.
        if m.ops.iter().all(|o| o != &op) {
            m.ops.push(op);
            m.explanations.push(format!(
                "winadmit added a Windows node toleration ({})",
                n + 1
            ));
            m.fixes.push(None);
        }
    }
}

pub(super) fn add_isolation(m: &mut Mutation, workload: &Workload<'_, '_>, isolation: &str) {
    let key = crate::decision::targeting::ISOLATION_ANNOTATION;
    if workload
        .pod_annotations()
        .and_then(|a| a.get(key))
        .is_some()
    {
        return;
    }
    let meta = workload.pod_metadata_path();
    let why = format!("winadmit set {key}={isolation}");
    let op = match (workload.pod_meta, workload.pod_annotations()) {
        (_, Some(_)) => {
            crate::decision::finding::add_op(meta.key("annotations").map_key(key), json!(isolation))
        }
        (Some(_), None) => {
            crate::decision::finding::add_op(meta.key("annotations"), json!({ key: isolation }))
        }
        (None, None) => {
            crate::decision::finding::add_op(&meta, json!({"annotations": { key: isolation }}))
        }
    };
    m.push(op, why, None);
}

/// `nodeSelector: {kubernetes.io/os: windows}` when the pod has no OS
/// selector; tied to the finding behind it when the registry's facts
/// pinned the pod to Windows (`by_facts`).
pub(super) fn add_os_selector(
    m: &mut Mutation,
    workload: &Workload<'_, '_>,
    spec: &SpecView<'_>,
    by_facts: Option<&Finding>,
) {
    let has_os_label = spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(OS_LABEL))
        .is_some();
    if has_os_label {
        return;
    }
    let (why, fixed) = match by_facts {
        Some(f) => {
            let description = f.fix.as_ref().map_or("", |fix| fix.description.as_str());
            (
                format!("winadmit: {description} ({}: {})", f.rule, f.field),
                Some(Fixed {
                    rule: f.rule,
                    field: f.field.to_string(),
                    description: description.to_owned(),
                }),
            )
        }
        None => (
            "winadmit added nodeSelector kubernetes.io/os=windows".to_owned(),
            None,
        ),
    };
    m.push(add_node_selector(&workload.spec_path, spec), why, fixed);
}

/// `spec.os.name: windows`, unless Pod Security `restricted` before v1.25
/// would then refuse the pod: a note says so instead.
pub(super) fn set_os_name(
    m: &mut Mutation,
    workload: &Workload<'_, '_>,
    psa_restricted_before_1_25: bool,
) {
    if psa_restricted_before_1_25 {
        m.notes.push(
            "winadmit left spec.os unset: Pod Security restricted before v1.25 here would refuse the pod".to_owned(),
        );
    } else {
        m.push(
            crate::decision::finding::add_op(
                workload.spec_path.key("os"),
                json!({"name": "windows"}),
            ),
            "winadmit set spec.os.name=windows",
            None,
        );
    }
}
