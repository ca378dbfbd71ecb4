//! WIN-TERMINATION-MESSAGE-PATH: custom terminationMessagePath is not honoured on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::finding::Severity;
use crate::decision::rules::cel::Export;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-TERMINATION-MESSAGE-PATH",
        title: "custom terminationMessagePath is not honoured on Docker Windows nodes",
        level: |c| c.is_docker().then_some(Severity::Warning),
        intent_lost: false,
        scope: Scope::Windows,
        what: "`terminationMessagePath` other than the default `/dev/termination-log`.",
        why: "Windows cannot map a single file into a container, so the termination message file does not work as on Linux. The API server fills in the default path on every container, so the default is never reported.",
        source: "Docker-era Windows nodes could not map single files, so a custom terminationMessagePath was not honoured (Kubernetes 1.5-1.19 Windows documentation, 'Storage'); containerd maps single files. Kubernetes documentation 'Windows Storage'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers",
        fix: "Remove `terminationMessagePath`, or set `terminationMessagePolicy: FallbackToLogsOnError` so the message comes from the log.",
        example: "containers:\n- name: app\n  terminationMessagePath: C:\\logs\\termination.log",
        since: None,
        until: None,
    },
    check,
    export: |_| Export::Gap("left to the webhook in this version"),
};

/// What the API server fills in.
const DEFAULT_PATH: &str = "/dev/termination-log";

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for c in cx.containers() {
        let Some(path) = c.container.termination_message_path.as_deref() else {
            continue;
        };
        if path != DEFAULT_PATH {
            out.report(
                cx.container_field(&c, &["terminationMessagePath"]),
                format!("terminationMessagePath {path:?} is ignored on Windows nodes (single-file mapping is not supported)"),
            );
        }
    }
}
