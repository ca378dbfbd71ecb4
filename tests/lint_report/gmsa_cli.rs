//! `lint` and `report --from-file` with GMSACredentialSpec objects in the
//! input: they are the cluster's credential specs, so a pod naming one that
//! is not there is reported; without them the gMSA rules are silent, and
//! authorization is never known offline.

use crate::binary::winadmit;
use std::process::Output;

const CLUSTER: &str = "tests/fixtures/gmsa/cluster.yaml";
const PODS: &str = "tests/fixtures/gmsa/pods.yaml";

/// (rule, field) of every gMSA finding of `lint --format json`.
fn gmsa_findings(out: &Output) -> Vec<(String, String)> {
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let mut found = Vec::new();
    let mut walk = vec![&json];
    while let Some(v) = walk.pop() {
        match v {
            serde_json::Value::Object(m) => {
                if let (Some(rule), Some(field)) = (
                    m.get("rule").and_then(|r| r.as_str()),
                    m.get("field").and_then(|f| f.as_str()),
                ) && rule.starts_with("WIN-GMSA")
                {
                    found.push((rule.to_owned(), field.to_owned()));
                }
                walk.extend(m.values());
            }
            serde_json::Value::Array(a) => walk.extend(a),
            _ => {}
        }
    }
    found.sort();
    found
}

#[test]
fn lint_reads_the_credential_specs_in_its_input() {
    let out = winadmit(&["lint", "--format", "json", CLUSTER, PODS]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let field =
        |place: &str, key: &str| format!("spec.{place}securityContext.windowsOptions.{key}");
    assert_eq!(
        gmsa_findings(&out),
        vec![
            (
                "WIN-GMSA-INLINE".to_owned(),
                field("", "gmsaCredentialSpec")
            ),
            (
                "WIN-GMSA-NO-CREDSPEC".to_owned(),
                field("containers[0].", "gmsaCredentialSpecName")
            ),
            (
                "WIN-GMSA-NOT-FOUND".to_owned(),
                field("initContainers[0].", "gmsaCredentialSpecName")
            ),
        ]
    );
    let text = winadmit(&["lint", CLUSTER, PODS]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("GMSACredentialSpec \"webapp2\" does not exist"),
        "{stdout}"
    );
}

#[test]
fn without_credential_specs_in_the_input_the_gmsa_rules_are_silent() {
    let out = winadmit(&["lint", "--format", "json", PODS]);
    assert_eq!(gmsa_findings(&out), vec![], "{out:?}");
}

#[test]
fn report_from_file_reads_them_too() {
    let out = winadmit(&[
        "report",
        "--from-file",
        CLUSTER,
        "--from-file",
        PODS,
        "-q",
        "--format",
        "json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("WIN-GMSA-NOT-FOUND"), "{out:?}");
    assert!(stdout.contains("WIN-GMSA-NO-CREDSPEC"), "{out:?}");
    assert!(!stdout.contains("WIN-GMSA-NOT-AUTHORIZED"), "{out:?}");
}

#[test]
fn lint_fix_fills_in_the_contents_as_the_upstream_webhook_writes_them() {
    let dir = std::env::temp_dir().join(format!("winadmit-gmsa-fix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pod = dir.join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  os:\n    name: windows\n  securityContext:\n    windowsOptions:\n      gmsaCredentialSpecName: webapp1\n  containers:\n  - name: app\n    image: mcr.microsoft.com/windows/servercore:ltsc2022\n",
    )
    .unwrap();
    let out = winadmit(&["lint", "--fix", CLUSTER, pod.to_str().unwrap()]);
    let fixed = std::fs::read_to_string(&pod).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let docs = winadmit::input::source::parse(&fixed).unwrap();
    assert_eq!(
        docs[0]
            .value
            .pointer("/spec/securityContext/windowsOptions/gmsaCredentialSpec")
            .and_then(|v| v.as_str()),
        Some(
            r#"{"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp1","Scope":"EXAMPLE"},{"Name":"webapp1","Scope":"example.org"}]},"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"DnsName":"example.org","DnsTreeName":"example.org","Guid":"00000000-0000-0000-0000-000000000001","MachineAccountName":"webapp1","NetBiosName":"EXAMPLE","Sid":"S-1-5-21-1-2-3"}}"#
        ),
        "{out:?}\n{fixed}"
    );
}
