//! WIN-HUGEPAGES: huge pages are not supported on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Field, Probe, ProbeScope};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HUGEPAGES",
        title: "huge pages are not supported on Windows",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`hugepages-*` resource requests or limits in any container, and `emptyDir.medium: HugePages*` volumes.",
        why: "Huge pages are not implemented in the Windows container runtime: using them needs a user privilege that cannot be configured at container level.",
        source: "Windows nodes report no hugepages capacity, so the scheduler finds no node: the pod stays Pending. Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility (resource management).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers",
        fix: "Remove the `hugepages-*` resources and HugePages emptyDir volumes.",
        example: "resources:\n  limits:\n    hugepages-2Mi: 100Mi",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for c in cx.containers() {
        let Some(res) = &c.container.resources else {
            continue;
        };
        for (list, map) in [("limits", &res.limits), ("requests", &res.requests)] {
            for (key, _) in map.iter().flat_map(super::super::view::StrMap::iter) {
                if key.starts_with("hugepages-") {
                    out.report(
                        cx.container_field(&c, &["resources", list]).map_key(key),
                        format!("{key} is not supported on Windows nodes (no huge pages)"),
                    );
                }
            }
        }
    }
    for (i, v) in cx.spec.volumes.iter().flatten().enumerate() {
        let medium = v.empty_dir.as_ref().and_then(|e| e.medium.as_deref());
        if medium.is_some_and(|m| m.starts_with("HugePages")) {
            out.report(
                cx.spec_field(&["volumes"])
                    .index(i)
                    .key("emptyDir")
                    .key("medium"),
                "emptyDir on huge pages is not supported on Windows nodes",
            );
        }
    }
}

/// WIN-HUGEPAGES as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    let list = |l: &str| {
        format!(
            "(has(c.resources) && has(c.resources.{l}) ? c.resources.{l}.filter(k, k.startsWith('hugepages-')).map(k, '.resources.{l}[' + k + ']') : [])"
        )
    };
    Export::cel(
        vec![
            Probe {
                scope: ProbeScope::Container,
                container_hit: None,
                hit: "has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, k.startsWith('hugepages-'))) || (has(c.resources.requests) && c.resources.requests.exists(k, k.startsWith('hugepages-'))))".to_owned(),
                field: Field::Suffixes(format!("{} + {}", list("limits"), list("requests"))),
                removable: false,
            },
            Probe::new(
                ProbeScope::Volume,
                "has(v.emptyDir) && has(v.emptyDir.medium) && v.emptyDir.medium.startsWith('HugePages')",
                &["emptyDir", "medium"],
            ),
        ],
        "huge pages are not supported on Windows nodes",
    )
}
