//! `serve --registry` through a real kube-apiserver v1.37
//! (`support/controlplane.rs`), with a real registry on loopback
//! (`support/registry.rs`): what a user sees with kubectl when a Windows
//! pod runs a Linux-only image, when a pod nothing pins to Windows runs a
//! Windows-only image, and when the registry is down.
//!
//! Without the control plane built (`tests/apiserver/build.sh`), or without
//! `docker-registry` and `htpasswd`, the tests are ignored, naming what is
//! missing (`build.rs`), unless `WINADMIT_REQUIRE_APISERVER` and
//! `WINADMIT_REQUIRE_REGISTRY` are set (`.ci/run` sets them).

#![cfg_attr(any(no_control_plane, no_registry), allow(dead_code, unused_imports))]

use crate::controlplane;
use crate::e2e;
use crate::registry_support;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::binary;
use e2e::{Webhook, create, pod, stderr};
use registry_support::{Registry, push_images};

#[test]
#[cfg_attr(
    all(no_control_plane, no_registry),
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh; needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils)"
)]
#[cfg_attr(
    all(no_control_plane, not(no_registry)),
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
#[cfg_attr(
    all(not(no_control_plane), no_registry),
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils)"
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

/// (kind/name, rule, message) of every finding of a JSON report.
fn report_findings(out: &std::process::Output) -> Vec<(String, String, String)> {
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(out)));
    let mut list = Vec::new();
    for o in v["objects"].as_array().unwrap() {
        for f in o["findings"].as_array().unwrap() {
            list.push((
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["name"].as_str().unwrap()
                ),
                f["rule"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            ));
        }
    }
    list.sort();
    list
}

fn finding<'a>(list: &'a [(String, String, String)], object: &str, rule: &str) -> Option<&'a str> {
    list.iter()
        .find(|f| f.0 == object && f.1 == rule)
        .map(|f| f.2.as_str())
}

/// The live `winadmit report --registry` against a real API server: the
/// images of the workloads it lists are looked up, page by page, before
/// they are judged, as `lint --registry` looks them up; a facts file from
/// `images resolve` gives the same report; a registry that is down leaves
/// the facts unknown and never fails the report.
#[test]
#[cfg_attr(
    all(no_control_plane, no_registry),
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh; needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils)"
)]
#[cfg_attr(
    all(no_control_plane, not(no_registry)),
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
#[cfg_attr(
    all(not(no_control_plane), no_registry),
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils)"
)]
fn live_report_looks_up_the_images_it_lists() {
    let cp = controlplane::shared("live_report_looks_up_the_images_it_lists");
    let mut registry = Registry::start(false);
    let digests = push_images(&registry);
    let host = registry.host.clone();
    // No webhook is registered for this namespace: the objects are stored
    // as written, and only the report judges them.
    let ns = "registry-report";
    cp.namespace(ns, &[("winadmit-e2e", "registry-report")]);
    let containers = |image: &str| json!([{"name": "app", "image": format!("{host}/{image}")}]);
    let windows = json!({"kubernetes.io/os": "windows"});
    let template = |spec: Value| json!({"metadata": {"labels": {"app": "x"}}, "spec": spec});
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "linuxonly", "namespace": ns},
         "spec": {"selector": {"matchLabels": {"app": "x"}},
                  "template": template(json!({"nodeSelector": windows, "containers": containers("linuxonly:1")}))}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": "missing", "namespace": ns},
         "spec": {"selector": {"matchLabels": {"app": "x"}},
                  "template": template(json!({"nodeSelector": windows, "containers": containers("missing:1")}))}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "winonly", "namespace": ns},
         "spec": {"containers": containers("winonly:1")}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "multi", "namespace": ns},
         "spec": {"nodeSelector": windows, "containers": containers("multi:1")}}
    ]});
    cp.apply(&objects.to_string());
    let kubeconfig = cp.kubeconfig.to_str().unwrap();
    let report = |extra: &[&str]| {
        let mut args = vec![
            "report",
            "--kubeconfig",
            kubeconfig,
            "-n",
            ns,
            "--format",
            "json",
            "--page-size",
            "1",
        ];
        args.extend_from_slice(extra);
        binary::winadmit(&args)
    };

    let out = report(&["--registry", "--insecure-registry", &host]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "errors exit 1: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("in their registries"),
        "the lookups are said on stderr: {}",
        stderr(&out)
    );
    let live = report_findings(&out);
    let linux = finding(&live, "Deployment/linuxonly", "WIN-LINUX-IMAGE")
        .unwrap_or_else(|| panic!("{live:?}"));
    assert!(
        linux.contains(&format!("{host}/linuxonly:1 (sha256:"))
            && linux.contains("has platforms linux/amd64, linux/arm64/v8: no Windows variant"),
        "{linux}"
    );
    assert!(
        finding(&live, "Pod/winonly", "WIN-IMAGE-WINDOWS-ONLY").is_some(),
        "{live:?}"
    );
    let unknown = finding(&live, "DaemonSet/missing", "WIN-IMAGE-FACTS-UNKNOWN")
        .unwrap_or_else(|| panic!("{live:?}"));
    assert!(unknown.contains("404"), "{unknown}");
    assert!(
        !live
            .iter()
            .any(|f| f.0 == "Pod/multi"
                && (f.1 == "WIN-LINUX-IMAGE" || f.1.starts_with("WIN-IMAGE"))),
        "{live:?}"
    );

    // Without --registry the images are judged by their names, which say
    // nothing here.
    let names = report_findings(&report(&[]));
    assert!(
        !names.iter().any(|f| f.1 == "WIN-LINUX-IMAGE"
            || f.1 == "WIN-IMAGE-WINDOWS-ONLY"
            || f.1 == "WIN-IMAGE-FACTS-UNKNOWN"),
        "{names:?}"
    );

    // The facts file `images resolve` writes gives the same report.
    let facts = registry.path("facts.json");
    let mut args = vec![
        "images".to_owned(),
        "resolve".to_owned(),
        "--insecure-registry".to_owned(),
        host.clone(),
        "-o".to_owned(),
        facts.clone(),
        format!("{host}/missing:1"),
    ];
    args.extend(digests.keys().cloned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = binary::winadmit(&refs);
    assert_eq!(
        out.status.code(),
        Some(1),
        "one image is missing: {}",
        stderr(&out)
    );
    assert_eq!(report_findings(&report(&["--image-facts", &facts])), live);

    // The registry is down: every image's facts are unknown, the images
    // are judged by their names, and the report does not fail (exit 0:
    // no error is left).
    registry.stop();
    let out = report(&["--registry", "--insecure-registry", &host]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let down = report_findings(&out);
    for object in [
        "Deployment/linuxonly",
        "DaemonSet/missing",
        "Pod/winonly",
        "Pod/multi",
    ] {
        assert!(
            finding(&down, object, "WIN-IMAGE-FACTS-UNKNOWN").is_some(),
            "{object}: {down:?}"
        );
    }
    assert!(
        !down
            .iter()
            .any(|f| f.1 == "WIN-LINUX-IMAGE" || f.1 == "WIN-IMAGE-WINDOWS-ONLY"),
        "{down:?}"
    );
}

/// A `kubernetes.io/dockerconfigjson` Secret for `registry`'s user.
fn pull_secret(ns: &str, name: &str, registry: &Registry) -> Value {
    let config = std::fs::read(registry.path("config.json")).unwrap();
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config)}
    })
}

/// `serve --registry --registry-pull-secrets` and the live `report
/// --registry-pull-secrets` behind a real API server, with a registry that
/// needs credentials (TLS, basic auth) that only the pods' Secrets hold: a
/// pod naming the Secret gets the verdict of the image's facts; a pod in
/// another namespace without it gets no facts (401), although the first
/// pod's lookup is cached; the same credentials in a Secret of that other
/// namespace give the facts again.
#[test]
#[cfg_attr(
    all(no_control_plane, no_registry),
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh; needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils)"
)]
#[cfg_attr(
    all(no_control_plane, not(no_registry)),
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
#[cfg_attr(
    all(not(no_control_plane), no_registry),
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils)"
)]
fn pods_own_pull_secrets_give_facts_only_to_pods_that_hold_them() {
    let cp = controlplane::shared("pods_own_pull_secrets");
    let registry = Registry::start(true);
    push_images(&registry);
    let host = registry.host.clone();
    let objects = e2e::rendered("no-match-conditions");
    let kubeconfig = cp.kubeconfig.to_str().unwrap();
    let ca = registry.path("ca.pem");
    let webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &[
            "--cluster-cache",
            "off",
            "--kubeconfig",
            kubeconfig,
            "--registry",
            "--registry-pull-secrets",
            "--registry-ca",
            &ca,
        ],
    )
    .adopted_by(cp);
    cp.apply(&e2e::to_list(&e2e::registrations(
        &objects,
        "pullsecrets",
        &webhook,
    )));
    cp.namespace("pullsecrets-probe", &[("winadmit-e2e", "pullsecrets")]);
    e2e::wait_registered(cp, &webhook, "pullsecrets-probe", 2);
    let (with, without) = ("pullsecrets-a", "pullsecrets-b");
    for ns in [with, without] {
        cp.namespace(ns, &[("winadmit-e2e", "pullsecrets")]);
    }
    cp.apply(&pull_secret(with, "regcred", &registry).to_string());
    let windows_pod = |ns: &str, name: &str, secret: Option<&str>| {
        let mut spec = json!({
            "nodeSelector": {"kubernetes.io/os": "windows"},
            "containers": [{"name": "app", "image": format!("{host}/linuxonly:1")}]
        });
        if let Some(s) = secret {
            spec["imagePullSecrets"] = json!([{"name": s}]);
        }
        pod(ns, name, spec)
    };

    // With the namespace's Secret: the facts, and the denial they give.
    let out = create(cp, &windows_pod(with, "private", Some("regcred")), false);
    assert!(!out.status.success(), "created: {out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("WIN-LINUX-IMAGE")
            && err.contains("has platforms linux/amd64, linux/arm64/v8"),
        "{err}"
    );

    // Another namespace, no Secret: the cached facts are not its to see;
    // the registry says 401 and the pod is admitted, its facts unknown.
    let out = create(cp, &windows_pod(without, "nosecret", None), false);
    assert!(out.status.success(), "{}", stderr(&out));
    let review = webhook.wait_review("nosecret", |r| r["endpoint"] == "validate");
    assert!(
        review["rules"]
            .as_str()
            .is_some_and(|r| r.contains("WIN-IMAGE-FACTS-UNKNOWN")),
        "{review}"
    );
    // Naming a Secret that does not exist changes nothing.
    let out = create(cp, &windows_pod(without, "missing", Some("regcred")), false);
    assert!(out.status.success(), "{}", stderr(&out));

    // The same credentials in that namespace's own Secret: the facts again.
    cp.apply(&pull_secret(without, "mine", &registry).to_string());
    let out = create(cp, &windows_pod(without, "own", Some("mine")), false);
    assert!(!out.status.success(), "created: {out:?}");
    assert!(stderr(&out).contains("WIN-LINUX-IMAGE"), "{}", stderr(&out));

    // The live report reads the same Secrets: the Deployment naming one
    // gets the facts, without --registry-pull-secrets it gets a 401.
    let ns = "pullsecrets-report";
    cp.namespace(ns, &[("winadmit-e2e", "pullsecrets-report")]);
    cp.apply(&pull_secret(ns, "regcred", &registry).to_string());
    cp.apply(
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "private", "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "x"}},
                                  "spec": {"nodeSelector": {"kubernetes.io/os": "windows"},
                                           "imagePullSecrets": [{"name": "regcred"}],
                                           "containers": [{"name": "app", "image": format!("{host}/linuxonly:1")}]}}}})
        .to_string(),
    );
    let report = |extra: &[&str]| {
        let mut args = vec![
            "report",
            "--kubeconfig",
            kubeconfig,
            "-n",
            ns,
            "--format",
            "json",
            "--registry",
            "--registry-ca",
            &ca,
        ];
        args.extend_from_slice(extra);
        binary::winadmit(&args)
    };
    let out = report(&["--registry-pull-secrets"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let found = report_findings(&out);
    assert!(
        finding(&found, "Deployment/private", "WIN-LINUX-IMAGE").is_some(),
        "{found:?}"
    );
    let out = report(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let unknown = report_findings(&out);
    let why = finding(&unknown, "Deployment/private", "WIN-IMAGE-FACTS-UNKNOWN")
        .unwrap_or_else(|| panic!("{unknown:?}"));
    assert!(why.contains("401"), "{why}");
}
