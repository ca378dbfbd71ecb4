//! WIN-DEFAULT-MODE: volume file modes are ignored on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::Export;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-DEFAULT-MODE",
        title: "volume file modes keep only the read-only bit on Windows",
        level: super::level::info,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`defaultMode` other than the API default (0644, i.e. 420) on secret, configMap, projected and downwardAPI volumes.",
        why: "Windows uses SID-based ACLs, not POSIX permission bits: the default access mode depends on UID/GID and is not supported, so a restrictive mode silently does not restrict.",
        source: "Windows keeps only the read-only bit of a file mode (pkg/volume/util/atomic_writer.go writes with the mode; NTFS has no POSIX bits). Kubernetes documentation 'Windows Storage' and 'Windows containers in Kubernetes' > Compatibility.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#storage",
        fix: "Remove `defaultMode`; restrict access with the Windows user the container runs as.",
        example: "volumes:\n- name: creds\n  secret:\n    secretName: db\n    defaultMode: 0400",
        since: None,
        until: None,
    },
    check,
    export: |_| Export::Gap("left to the webhook in this version"),
};

/// What the API server fills in (0644).
const API_DEFAULT_MODE: i64 = 0o644;

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for (i, v) in cx.spec.volumes.iter().flatten().enumerate() {
        let sources = [
            ("secret", &v.secret),
            ("configMap", &v.config_map),
            ("projected", &v.projected),
            ("downwardAPI", &v.downward_api),
        ];
        for (key, source) in sources {
            let Some(mode) = source.as_ref().and_then(|s| s.default_mode) else {
                continue;
            };
            if mode != API_DEFAULT_MODE {
                out.report(
                    cx.spec_field(&["volumes"]).index(i).key(key).key("defaultMode"),
                    format!("defaultMode {mode:#o} is ignored on Windows nodes (file permissions are ACLs, not mode bits)"),
                );
            }
        }
    }
}
