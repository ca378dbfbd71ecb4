//! The one-call install (`manifests/overlays/one-call`: no validating
//! registration, the mutating one calling `/admit`) through a real
//! kube-apiserver v1.37: every object gets the answer the two-call base
//! install gives it (admitted or refused, the same message, the same
//! warnings, the same stored object), with one webhook call instead of two.
//!
//! Without the control plane built (`tests/apiserver/build.sh`) the tests
//! are ignored, with that command (`build.rs`), unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` builds it and sets it).

use crate::controlplane;
use crate::e2e;

use serde_json::{Value, json};

use e2e::{Webhook, create, pod, stderr};

/// What kubectl shows of a server-side dry-run create: whether it
/// succeeded, the object returned (without what differs by namespace and
/// request), and its output on stderr with the webhook's name and the
/// namespace taken out.
fn answer(cp: &controlplane::ControlPlane, object: &Value) -> (bool, Value, String) {
    let out = create(cp, object, true);
    let mut returned: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    if let Some(meta) = returned.get_mut("metadata").and_then(Value::as_object_mut) {
        for volatile in ["namespace", "uid", "creationTimestamp", "managedFields"] {
            meta.remove(volatile);
        }
    }
    let ns = object["metadata"]["namespace"].as_str().unwrap();
    let printed = stderr(&out)
        .replace("\"validate.winadmit.io\"", "\"WEBHOOK\"")
        .replace("\"admit.winadmit.io\"", "\"WEBHOOK\"")
        .replace(ns, "NS");
    (out.status.success(), returned, printed)
}

/// Objects the two installs must answer alike: a passing Windows pod, one
/// with fields Windows ignores (the API server refuses it unpatched), one
/// denied, one denied and patchable, a Deployment, a Linux pod.
fn objects(ns: &str) -> Vec<Value> {
    let windows = json!({"kubernetes.io/os": "windows"});
    let ignored = json!({
        "os": {"name": "windows"},
        "containers": [{
            "name": "web",
            "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
            "securityContext": {"privileged": false, "allowPrivilegeEscalation": false}
        }]
    });
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": pod("", "", ignored.clone())["spec"].clone()}
        }
    });
    vec![
        pod(ns, "pass", json!({"nodeSelector": windows})),
        pod(ns, "ignored", ignored),
        pod(
            ns,
            "run-as-user",
            json!({"nodeSelector": windows, "securityContext": {"runAsUser": 1000}}),
        ),
        pod(
            ns,
            "host-network",
            json!({"nodeSelector": windows, "hostNetwork": true}),
        ),
        pod(
            ns,
            "host-network-patchable",
            json!({"nodeSelector": windows, "hostNetwork": true,
                   "securityContext": {"runAsUser": 1000}}),
        ),
        deployment,
        pod(
            ns,
            "linux",
            json!({"nodeSelector": {"kubernetes.io/os": "linux"},
                   "containers": [{"name": "web", "image": "nginx:1.27"}]}),
        ),
    ]
}

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn one_call_answers_as_the_two_call_install_does() {
    let cp = controlplane::shared("one_call_answers_as_the_two_call_install_does");
    let base = e2e::rendered("base");
    let one_call = e2e::rendered("one-call");
    assert!(
        one_call
            .iter()
            .all(|o| e2e::kind(o) != "ValidatingWebhookConfiguration"),
        "the one-call install registers no validating webhook"
    );
    let webhook =
        Webhook::start(&e2e::overlay_policy(&base), &["--cluster-cache", "off"]).adopted_by(cp);
    let mut registrations = e2e::registrations(&base, "two-call", &webhook);
    registrations.extend(e2e::registrations(&one_call, "one-call", &webhook));
    cp.apply(&e2e::to_list(&registrations));
    cp.namespace("two-call", &[("winadmit-e2e", "two-call")]);
    cp.namespace("one-call", &[("winadmit-e2e", "one-call")]);
    e2e::wait_registered(cp, &webhook, "two-call", 2);
    e2e::wait_registered(cp, &webhook, "one-call", 1);

    let mut refused = 0;
    for (two, one) in objects("two-call").iter().zip(objects("one-call")) {
        let name = one["metadata"]["name"].as_str().unwrap();
        let expected = answer(cp, two);
        let got = answer(cp, &one);
        assert_eq!(got, expected, "{name}: one call vs two");
        refused += usize::from(!got.0);
    }
    assert_eq!(refused, 2, "the two hostNetwork pods are refused");

    // One review per object, at `/admit`; none at the other endpoints.
    for name in ["ignored", "host-network"] {
        let review = webhook.wait_review(name, |r| r["namespace"] == "one-call");
        assert_eq!(review["endpoint"], "admit", "{review}");
        let reviews: Vec<Value> = webhook
            .reviews_of(name)
            .into_iter()
            .filter(|r| r["namespace"] == "one-call")
            .collect();
        assert_eq!(reviews.len(), 1, "{name}: {reviews:#?}");
    }
    let linux = webhook.reviews_of("linux");
    assert!(
        linux.is_empty(),
        "a Linux pod reached the webhook: {linux:#?}"
    );
}
