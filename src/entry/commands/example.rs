//! `winadmit example review`: a ready AdmissionReview to send to a running
//! webhook (`curl ... --data-binary @review.json .../validate`), so the
//! quick start works without a cluster.

use std::io::Write as _;
use std::process::ExitCode;

use serde_json::{Value, json};

use super::EXIT_CLEAN;
use crate::entry::cli::{ExampleArgs, ExampleKind};

/// # Errors
/// Writing to stdout fails.
pub fn run(args: ExampleArgs) -> anyhow::Result<ExitCode> {
    let ExampleArgs { what } = args;
    let text = match what {
        ExampleKind::Review => serde_json::to_string_pretty(&review())? + "\n",
    };
    super::Stdout::new().write_all(text.as_bytes())?;
    Ok(ExitCode::from(EXIT_CLEAN))
}

/// An `admission.k8s.io/v1` AdmissionReview of a CREATE of a Windows pod
/// (IIS) with a setting Windows nodes cannot run as written (`hostNetwork`
/// without HostProcess) and two they ignore, which the mutating webhook
/// removes (`privileged`, `runAsUser`).
#[must_use]
pub fn review() -> Value {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "iis", "namespace": "default", "labels": {"app": "iis"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/os": "windows"},
            "hostNetwork": true,
            "containers": [{
                "name": "iis",
                "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
                "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": "1", "memory": "800Mi"}},
                "securityContext": {
                    "privileged": true,
                    "runAsUser": 1000
                }
            }]
        }
    });
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3b1f6c2e-8d4a-4e5b-9c7d-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "iis",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}
