//! `serve --registry` through a real kube-apiserver v1.37
//! (`support/controlplane.rs`), with a real registry on loopback
//! (`support/registry.rs`): what a user sees with kubectl when a Windows
//! pod runs a Linux-only image, when a pod nothing pins to Windows runs a
//! Windows-only image, and when the registry is down.
//!
//! Without Go, or without `docker-registry` and `htpasswd`, the tests are
//! ignored, with the reason (`build.rs`), unless `WINADMIT_REQUIRE_APISERVER`
//! and `WINADMIT_REQUIRE_REGISTRY` are set (`.ci/run` sets them).

#![cfg_attr(any(no_control_plane, no_registry), allow(dead_code, unused_imports))]

#[path = "support/controlplane.rs"]
mod controlplane;
#[path = "support/e2e.rs"]
mod e2e;
#[path = "support/registry.rs"]
mod registry_support;
#[path = "server_support/mod.rs"]
mod server;

use serde_json::{Value, json};

use e2e::{Webhook, create, pod, stderr};
use registry_support::{Registry, push_images};

#[test]
#[cfg_attr(
    any(no_control_plane, no_registry),
    ignore = "needs Go to build kube-apiserver, etcd and kubectl (tests/apiserver/build.sh), and docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils)"
)]
fn kubectl_sees_verdicts_from_the_registry_and_a_failing_registry_never_denies() {
    let cp = controlplane::shared("kubectl_sees_verdicts_from_the_registry");
    let mut registry = Registry::start(false);
    push_images(&registry);
    let host = registry.host.clone();
    // Every pod goes to the webhook (no `may-target-windows` match
    // condition): an untargeted pod's image may be Windows-only by its facts
    // alone, which no CEL expression can see.
    let objects = e2e::rendered("no-match-conditions");
    let webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &[
            "--cluster-cache",
            "off",
            "--registry",
            "--insecure-registry",
            &host,
        ],
    )
    .adopted_by(cp);
    cp.apply(&e2e::to_list(&e2e::registrations(
        &objects, "registry", &webhook,
    )));
    cp.namespace("registry-probe", &[("winadmit-e2e", "registry")]);
    e2e::wait_registered(cp, &webhook, "registry-probe", 2);
    let ns = "registry";
    cp.namespace(ns, &[("winadmit-e2e", "registry")]);
    let containers = |image: &str| json!([{"name": "app", "image": format!("{host}/{image}")}]);

    // A Windows pod whose image has no Windows platform: denied, and the
    // message names the platforms the registry lists.
    let linux = pod(
        ns,
        "linuxonly",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": containers("linuxonly:1")}),
    );
    let out = create(cp, &linux, false);
    assert!(!out.status.success(), "created: {out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("denied the request")
            && err.contains("WIN-LINUX-IMAGE")
            && err.contains("has platforms linux/amd64, linux/arm64/v8: no Windows variant"),
        "{err}"
    );

    // A pod nothing pins to an OS, with a Windows-only image: the mutating
    // webhook adds the Windows node selector, by the facts, and says so.
    let untargeted = pod(
        ns,
        "winonly",
        json!({"containers": containers("winonly:1")}),
    );
    let out = create(cp, &untargeted, false);
    assert!(out.status.success(), "{}", stderr(&out));
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        created["spec"]["nodeSelector"]["kubernetes.io/os"], "windows",
        "{created}"
    );
    assert!(
        stderr(&out).contains("WIN-IMAGE-WINDOWS-ONLY"),
        "{}",
        stderr(&out)
    );

    // The registry is down: the same Linux-only image is no longer known,
    // and the pod is admitted (the image is judged by its name, which says
    // nothing here). The facts of the image above were cached: a new tag.
    registry.stop();
    let down = pod(
        ns,
        "down",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": containers("linuxonly:2")}),
    );
    let out = create(cp, &down, false);
    assert!(
        out.status.success(),
        "a failing registry denied: {}",
        stderr(&out)
    );
    let review = webhook.wait_review("down", |r| r["endpoint"] == "validate");
    assert!(
        review["rules"]
            .as_str()
            .is_some_and(|r| r.contains("WIN-IMAGE-FACTS-UNKNOWN")),
        "{review}"
    );
}
