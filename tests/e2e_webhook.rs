//! The webhooks through a real kube-apiserver v1.37 (`support/controlplane.rs`):
//! `winadmit serve` as a process with its own certificate, registered with
//! the webhook configurations of its rendered install, and kubectl v1.37
//! showing what a user sees. Each claim of the README's webhook sections is
//! a test here.
//!
//! Without Go the tests print `SKIPPED:` and pass, unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` sets it).

#[path = "support/controlplane.rs"]
mod controlplane;
#[path = "support/e2e.rs"]
mod e2e;
#[path = "server_support/mod.rs"]
mod server;

use std::sync::OnceLock;

use serde_json::{Value, json};

use controlplane::ControlPlane;
use e2e::{Webhook, create, pod, stderr};

/// The setup every test here shares: the base install (enforce, failurePolicy
/// Fail), both webhooks, on namespaces labelled `winadmit-e2e: enforce`.
struct Enforce {
    cp: &'static ControlPlane,
    webhook: Webhook,
}

fn enforce(test: &str) -> Option<&'static Enforce> {
    static SETUP: OnceLock<Enforce> = OnceLock::new();
    let cp = controlplane::shared(test)?;
    Some(SETUP.get_or_init(|| {
        let objects = e2e::rendered("base");
        let webhook = Webhook::start(&e2e::overlay_policy(&objects), &["--cluster-cache", "off"]);
        cp.apply(&e2e::to_list(&e2e::registrations(&objects, "enforce", &webhook)));
        cp.namespace("e2e-probe", &[("winadmit-e2e", "enforce")]);
        e2e::wait_registered(cp, &webhook, "e2e-probe", 2);
        Enforce { cp, webhook }
    }))
}

/// A namespace of the enforce setup.
fn ns(setup: &Enforce, name: &str) -> String {
    setup.cp.namespace(name, &[("winadmit-e2e", "enforce")]);
    name.to_owned()
}

/// The README's denial example, word for word, is what kubectl v1.37 prints
/// when it creates the pod through the installed webhooks.
#[test]
fn readme_denial_example_is_what_kubectl_prints() {
    let Some(s) = enforce("readme_denial_example_is_what_kubectl_prints") else {
        return;
    };
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("$ kubectl apply -f pod.yaml\n")
        .expect("the README shows `$ kubectl apply -f pod.yaml`");
    let block = &readme[start..];
    let block = &block[..block.find("```").unwrap()];
    let expected: Vec<&str> = block.lines().skip(1).collect();

    let ns = ns(s, "readme");
    let dir = tempfile::tempdir().unwrap();
    let mut iis = pod(
        &ns,
        "iis",
        json!({
            "nodeSelector": {"kubernetes.io/os": "windows"},
            "hostNetwork": true,
            "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]},
            "containers": [{
                "name": "iis",
                "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
                "securityContext": {"privileged": true}
            }]
        }),
    );
    iis["metadata"].as_object_mut().unwrap().remove("namespace");
    std::fs::write(dir.path().join("pod.yaml"), iis.to_string()).unwrap();
    let out = s
        .cp
        .kubectl_cmd()
        .current_dir(dir.path())
        .args(["apply", "-n", &ns, "-f", "pod.yaml"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "the pod was admitted");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    let printed: Vec<&str> = printed.lines().collect();
    assert_eq!(
        printed, expected,
        "kubectl's output differs from the README's example"
    );
}
