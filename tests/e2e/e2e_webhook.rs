//! The webhooks through a real kube-apiserver v1.37 (`support/controlplane.rs`):
//! `winadmit serve` as a process with its own certificate, registered with
//! the webhook configurations of its rendered install, and kubectl v1.37
//! showing what a user sees. Each claim of the README's webhook sections is
//! a test here.
//!
//! Without the control plane built (`tests/apiserver/build.sh`) the tests
//! are ignored, with that command (`build.rs`), unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` builds it and sets it).

use crate::controlplane;
use crate::e2e;

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

fn enforce(test: &str) -> &'static Enforce {
    static SETUP: OnceLock<Enforce> = OnceLock::new();
    let cp = controlplane::shared(test);
    SETUP.get_or_init(|| {
        let objects = e2e::rendered("base");
        let webhook = Webhook::start(&e2e::overlay_policy(&objects), &["--cluster-cache", "off"])
            .adopted_by(cp);
        cp.apply(&e2e::to_list(&e2e::registrations(
            &objects, "enforce", &webhook,
        )));
        cp.namespace("e2e-probe", &[("winadmit-e2e", "enforce")]);
        e2e::wait_registered(cp, &webhook, "e2e-probe", 2);
        Enforce { cp, webhook }
    })
}

/// A namespace of the enforce setup.
fn ns(setup: &Enforce, name: &str) -> String {
    setup.cp.namespace(name, &[("winadmit-e2e", "enforce")]);
    name.to_owned()
}

/// The README's denial example, word for word, is what kubectl v1.37 prints
/// when it creates the README's pod (`examples/pod.yaml`) through the
/// installed webhooks.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn readme_denial_example_is_what_kubectl_prints() {
    let s = enforce("readme_denial_example_is_what_kubectl_prints");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("$ kubectl apply -f examples/pod.yaml\n")
        .expect("the README shows `$ kubectl apply -f examples/pod.yaml`");
    let block = &readme[start..];
    let block = &block[..block.find("```").unwrap()];
    let expected: Vec<&str> = block.lines().skip(1).collect();

    // The README's pod, from the checkout, as a user applies it.
    let ns = ns(s, "readme");
    let out =
        s.cp.kubectl_cmd()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["apply", "-n", &ns, "-f", "examples/pod.yaml"])
            .output()
            .unwrap();
    assert!(!out.status.success(), "the pod was admitted");
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    let printed: Vec<&str> = printed.lines().collect();
    assert_eq!(
        printed, expected,
        "kubectl's output differs from the README's example"
    );
}

/// An IIS Deployment that selects no OS, applied with kubectl: the mutating
/// webhook pins it to Windows nodes, and the warning kubectl prints keeps
/// the OS it adds (`kubernetes.io/os=windows`), cut to fit as it is.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn kubectl_shows_the_os_of_the_pin_warning() {
    let s = enforce("kubectl_shows_the_os_of_the_pin_warning");
    let ns = ns(s, "pin-warning");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("iis.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: iis\nspec:\n  selector:\n    matchLabels: {app: iis}\n  template:\n    metadata:\n      labels: {app: iis}\n    spec:\n      containers:\n      - name: iis\n        image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022\n",
    )
    .unwrap();
    let out =
        s.cp.kubectl_cmd()
            .current_dir(dir.path())
            .args(["apply", "-n", &ns, "-f", "iis.yaml"])
            .output()
            .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("Warning: ")).collect();
    assert!(
        warnings.contains(
            &"Warning: WIN-UNPINNED-IMAGE spec.template.spec.containers[0].image: winadmit: add nodeSelector kubernetes.io/os=windows"
        ),
        "kubectl printed: {warnings:#?}"
    );
    let stored = s.cp.get("deployment", &ns, "iis");
    assert_eq!(
        stored["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/os"],
        "windows"
    );
}

/// A Windows pod spec (`spec.os.name: windows`, so the API server's own
/// Windows validation runs) with fields Windows ignores, which the mutating
/// webhook removes: the API server would refuse it as written.
fn ignored_fields_spec() -> Value {
    json!({
        "os": {"name": "windows"},
        "containers": [{
            "name": "web",
            "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
            "securityContext": {"privileged": false, "allowPrivilegeEscalation": false}
        }]
    })
}

/// A container without a security context, or with an empty one (what
/// /mutate leaves when it removes every field of it).
fn no_security_context(container: &Value) -> bool {
    container
        .get("securityContext")
        .is_none_or(|c| c.as_object().is_some_and(serde_json::Map::is_empty))
}

fn template(spec: &Value) -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": spec})
}

/// The workload kinds the webhooks are registered for, each with `spec`
/// as its pod (template) spec.
fn workloads(ns: &str, spec: &Value) -> Vec<(&'static str, Value)> {
    let spec = &pod("", "", spec.clone())["spec"];
    let meta = |name: &str| json!({"name": name, "namespace": ns});
    let sel = json!({"matchLabels": {"app": "web"}});
    let mut job_spec = spec.clone();
    job_spec["restartPolicy"] = json!("Never");
    vec![
        (
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta("pod"), "spec": spec}),
        ),
        (
            "deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("deploy"),
            "spec": {"selector": sel, "template": template(spec)}}),
        ),
        (
            "statefulsets",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("sts"),
            "spec": {"selector": sel, "serviceName": "web", "template": template(spec)}}),
        ),
        (
            "daemonsets",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta("ds"),
            "spec": {"selector": sel, "template": template(spec)}}),
        ),
        (
            "replicationcontrollers",
            json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": meta("rc"),
            "spec": {"selector": {"app": "web"}, "template": template(spec)}}),
        ),
        (
            "jobs",
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("job"),
            "spec": {"template": template(&job_spec)}}),
        ),
        (
            "cronjobs",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("cron"),
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template(&job_spec)}}}}),
        ),
    ]
}

/// The pod spec inside a stored workload.
fn pod_spec_of(obj: &Value) -> &Value {
    match obj["kind"].as_str().unwrap() {
        "Pod" => &obj["spec"],
        "CronJob" => &obj["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &obj["spec"]["template"]["spec"],
    }
}

/// For every workload kind, a Windows pod (template) the API server would
/// refuse as written is patched by /mutate, then accepted by the API
/// server's own Windows validation and stored with the node selector
/// added and the ignored fields gone.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn patches_are_applied_and_stored_for_every_workload_kind() {
    let s = enforce("patches_are_applied_and_stored_for_every_workload_kind");
    let ns = ns(s, "patches");
    for (resource, obj) in workloads(&ns, &ignored_fields_spec()) {
        let out = create(s.cp, &obj, false);
        assert!(out.status.success(), "{resource}: {}", stderr(&out));
        let name = obj["metadata"]["name"].as_str().unwrap();
        let stored = s.cp.get(resource, &ns, name);
        let spec = pod_spec_of(&stored);
        assert_eq!(
            spec["nodeSelector"],
            json!({"kubernetes.io/os": "windows"}),
            "{resource}: node selector not added: {spec:#}"
        );
        assert!(
            no_security_context(&spec["containers"][0]),
            "{resource}: the ignored fields are still there: {spec:#}"
        );
        // The API server refuses the object without the patch.
        let mut bypass = obj.clone();
        bypass["metadata"]["namespace"] = json!("e2e-unwatched");
        s.cp.namespace("e2e-unwatched", &[]);
        let out = create(s.cp, &bypass, true);
        assert!(
            stderr(&out).contains("cannot be set for a windows pod"),
            "{resource}: the API server accepted the unpatched object: {}",
            stderr(&out)
        );
    }
}

/// A server-side dry run goes through both webhooks (the webhooks declare
/// `sideEffects: None`) and stores nothing.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn server_side_dry_run_stores_nothing() {
    let s = enforce("server_side_dry_run_stores_nothing");
    let ns = ns(s, "dry-run");
    let obj = pod(&ns, "dry", ignored_fields_spec());
    let out = create(s.cp, &obj, true);
    assert!(out.status.success(), "{}", stderr(&out));
    let returned: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        returned["spec"]["nodeSelector"],
        json!({"kubernetes.io/os": "windows"}),
        "the dry run shows the patched object"
    );
    for endpoint in ["mutate", "validate"] {
        s.webhook
            .wait_review("dry", |r| r["endpoint"] == endpoint && r["dry_run"] == true);
    }
    let get = s.cp.kubectl(&["get", "pod", "-n", &ns, "dry"]);
    assert!(!get.status.success(), "the dry run stored the pod");
    assert!(stderr(&get).contains("NotFound"), "{}", stderr(&get));
}

/// A Linux pod never reaches the webhooks (matchConditions), a Windows pod
/// in an excluded namespace or one labelled `winadmit.io/ignore=true` is
/// admitted unchecked, and kube-system is never sent.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn exclusions_keep_objects_away_from_the_webhooks() {
    let s = enforce("exclusions_keep_objects_away_from_the_webhooks");
    let denied = json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true});
    let watched = ns(s, "excl-watched");

    let ignored = "excl-ignored";
    s.cp.namespace(
        ignored,
        &[("winadmit-e2e", "enforce"), ("winadmit.io/ignore", "true")],
    );
    // kube-system and winadmit's own namespace, carrying the setup's label.
    for system in ["kube-system", "winadmit", ignored] {
        if system != ignored {
            s.cp.namespace(system, &[("winadmit-e2e", "enforce")]);
        }
        let name = format!("hostnet-{system}");
        let out = create(s.cp, &pod(system, &name, denied.clone()), true);
        assert!(out.status.success(), "{system}: {}", stderr(&out));
    }

    let linux = pod(
        &watched,
        "linux",
        json!({"nodeSelector": {"kubernetes.io/os": "linux"}, "hostNetwork": true,
               "containers": [{"name": "app", "image": "nginx:1.27", "securityContext": {"privileged": true}}]}),
    );
    let out = create(s.cp, &linux, true);
    assert!(out.status.success(), "{}", stderr(&out));
    // Control, last: the same pod is denied in a watched namespace. Log
    // lines come in order, so once its line is there, a call for one of
    // the objects above would be there too.
    let out = create(s.cp, &pod(&watched, "hostnet", denied), true);
    assert!(stderr(&out).contains("WIN-HOSTNETWORK"), "{}", stderr(&out));
    s.webhook
        .wait_review("hostnet", |r| r["endpoint"] == "validate");
    for name in [
        "linux",
        "hostnet-kube-system",
        "hostnet-winadmit",
        "hostnet-excl-ignored",
    ] {
        assert!(
            s.webhook.reviews_of(name).is_empty(),
            "{name} was sent to the webhook"
        );
    }
}

/// On UPDATE only what the update introduces counts: an object admitted
/// before winadmit saw it stays labelable, and an update that adds a
/// problem is denied.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn updates_count_only_what_they_introduce() {
    let s = enforce("updates_count_only_what_they_introduce");
    let ns = "update";
    // Admitted while the namespace opts out.
    s.cp.namespace(
        ns,
        &[("winadmit-e2e", "enforce"), ("winadmit.io/ignore", "true")],
    );
    let spec = json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true});
    let (_, deploy) = workloads(ns, &spec).swap_remove(1);
    let out = create(s.cp, &deploy, false);
    assert!(out.status.success(), "{}", stderr(&out));
    s.cp.namespace(ns, &[("winadmit-e2e", "enforce")]);
    s.cp.kubectl_ok(&["label", "namespace", ns, "winadmit.io/ignore-"]);

    let out =
        s.cp.kubectl(&["label", "deployment", "-n", ns, "deploy", "team=web"]);
    assert!(
        out.status.success(),
        "a label change was refused for a problem the update did not introduce: {}",
        stderr(&out)
    );
    s.webhook.wait_review("deploy", |r| {
        r["operation"] == "UPDATE" && r["endpoint"] == "validate"
    });

    let out = s.cp.kubectl(&[
        "patch",
        "deployment",
        "-n",
        ns,
        "deploy",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/template/spec/securityContext","value":{"sysctls":[{"name":"kernel.shm_rmid_forced","value":"1"}]}}]"#,
    ]);
    assert!(
        !out.status.success(),
        "the update adding sysctls was admitted"
    );
    assert!(stderr(&out).contains("WIN-SYSCTLS"), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("WIN-HOSTNETWORK"),
        "the denial counts a problem the update did not introduce: {}",
        stderr(&out)
    );
}

/// An ephemeral container added to a running Windows pod (the
/// `pods/ephemeralcontainers` subresource, as `kubectl debug` does) is
/// judged and patched on its own.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn ephemeral_containers_are_judged_and_patched() {
    let s = enforce("ephemeral_containers_are_judged_and_patched");
    let ns = ns(s, "ephemeral");
    let target = pod(&ns, "target", json!({"os": {"name": "windows"}}));
    let out = create(s.cp, &target, false);
    assert!(out.status.success(), "{}", stderr(&out));

    let mut stored = s.cp.get("pods", &ns, "target");
    let image = "mcr.microsoft.com/windows/nanoserver:ltsc2022";
    stored["spec"]["ephemeralContainers"] = json!([{
        "name": "debugger", "image": image,
        "securityContext": {"privileged": false}
    }]);
    let path = format!("/api/v1/namespaces/{ns}/pods/target/ephemeralcontainers");
    let out =
        s.cp.kubectl_stdin(&["replace", "--raw", &path, "-f", "-"], &stored.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    let after = s.cp.get("pods", &ns, "target");
    let debugger = &after["spec"]["ephemeralContainers"][0];
    assert_eq!(debugger["name"], "debugger", "{after:#}");
    assert!(
        no_security_context(debugger),
        "privileged: false was not removed from the ephemeral container: {debugger:#}"
    );

    // A problem in the ephemeral container is denied.
    let mut stored = after;
    stored["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({
            "name": "mounts", "image": image,
            "volumeDevices": [{"name": "raw", "devicePath": "/dev/xvda"}]
        }));
    let out =
        s.cp.kubectl_stdin(&["replace", "--raw", &path, "-f", "-"], &stored.to_string());
    assert!(
        !out.status.success(),
        "the ephemeral container was admitted"
    );
    s.webhook.wait_review("target", |r| {
        r["operation"] == "UPDATE" && r["endpoint"] == "validate"
    });
}

/// The API server compiles webhook matchConditions when the configuration
/// is applied: a broken expression is refused then, not at the first pod.
/// The rendered configurations themselves were applied by the setup.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_match_condition_that_does_not_compile_is_refused() {
    let s = enforce("a_match_condition_that_does_not_compile_is_refused");
    let objects = e2e::rendered("base");
    let mut regs = e2e::registrations(&objects, "broken", &s.webhook);
    for r in &mut regs {
        r["webhooks"][0]["matchConditions"][0]["expression"] =
            json!("object.spec.nodeSelector.exists(k, k == )");
    }
    let out =
        s.cp.kubectl_stdin(&["apply", "-f", "-"], &e2e::to_list(&regs));
    assert!(
        !out.status.success(),
        "a broken matchCondition was accepted"
    );
    assert!(
        stderr(&out).contains("matchConditions[0].expression"),
        "{}",
        stderr(&out)
    );
}

/// `reinvocationPolicy: IfNeeded`: when a mutation that runs after winadmit
/// (here a MutatingAdmissionPolicy, reinvoked itself after winadmit's
/// patch) puts back a field the API server refuses on a Windows pod,
/// winadmit runs again and removes it, and the pod is accepted.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn winadmit_is_reinvoked_after_a_later_mutation() {
    let s = enforce("winadmit_is_reinvoked_after_a_later_mutation");
    let ns = "reinvoke";
    s.cp.namespace(
        ns,
        &[("winadmit-e2e", "enforce"), ("e2e-adds-privileged", "true")],
    );
    s.cp.apply(
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
             "metadata": {"name": "e2e-adds-privileged-false"},
             "spec": {
                "failurePolicy": "Fail",
                "reinvocationPolicy": "IfNeeded",
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["pods"]}]},
                "matchConditions": [{"name": "not-yet", "expression":
                    "!has(object.spec.containers[0].securityContext) || !has(object.spec.containers[0].securityContext.privileged)"}],
                "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'add', path: '/spec/containers/0/securityContext', value: {'privileged': false}}]"}}]
             }},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
             "metadata": {"name": "e2e-adds-privileged-false"},
             "spec": {"policyName": "e2e-adds-privileged-false",
                      "matchResources": {"namespaceSelector": {"matchLabels": {"e2e-adds-privileged": "true"}}}}}
        ]})
        .to_string(),
    );
    let obj = pod(ns, "reinvoked", json!({"os": {"name": "windows"}}));
    // Policies take effect after a moment, like webhook registrations.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = create(s.cp, &obj, true);
        assert!(out.status.success(), "{}", stderr(&out));
        let stored: Value = serde_json::from_slice(&out.stdout).unwrap();
        let calls = s
            .webhook
            .reviews_of("reinvoked")
            .iter()
            .filter(|r| r["endpoint"] == "mutate")
            .count();
        if calls >= 2 {
            assert!(
                no_security_context(&stored["spec"]["containers"][0]),
                "the field the policy put back after winadmit is stored: {stored:#}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "winadmit was never reinvoked: {:?}",
            s.webhook.reviews_of("reinvoked")
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// A custom resource with a pod template (Argo Rollouts' `Rollout`, its
/// CRD installed by the test) through the custom-resources overlay's
/// webhooks: patched at its template and denied for what Windows cannot run.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn custom_resources_with_a_pod_template_are_patched_and_denied() {
    let s = enforce("custom_resources_with_a_pod_template_are_patched_and_denied");
    s.cp.apply(
        &json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "rollouts.argoproj.io"},
            "spec": {
                "group": "argoproj.io", "scope": "Namespaced",
                "names": {"plural": "rollouts", "singular": "rollout", "kind": "Rollout", "listKind": "RolloutList"},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        })
        .to_string(),
    );
    s.cp.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/rollouts.argoproj.io",
        "--timeout=30s",
    ]);
    let objects = e2e::rendered("custom-resources");
    s.cp.apply(&e2e::to_list(&e2e::registrations(
        &objects, "cr", &s.webhook,
    )));
    let ns = "custom-resources";
    s.cp.namespace(ns, &[("winadmit-e2e", "cr")]);
    e2e::wait_registered(s.cp, &s.webhook, ns, 2);

    let rollout = |name: &str, spec: Value| {
        json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
               "metadata": {"name": name, "namespace": ns},
               "spec": {"selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}}, "spec": pod("", "", spec)["spec"]}}})
    };
    let out = create(s.cp, &rollout("patched", ignored_fields_spec()), false);
    assert!(out.status.success(), "{}", stderr(&out));
    let stored = s.cp.get("rollouts.argoproj.io", ns, "patched");
    let spec = &stored["spec"]["template"]["spec"];
    assert_eq!(
        spec["nodeSelector"],
        json!({"kubernetes.io/os": "windows"}),
        "{stored:#}"
    );
    assert!(no_security_context(&spec["containers"][0]), "{stored:#}");

    let out = create(
        s.cp,
        &rollout(
            "denied",
            json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true}),
        ),
        true,
    );
    assert!(!out.status.success(), "the Rollout was admitted");
    let err = stderr(&out);
    assert!(
        err.contains("validate.winadmit.io")
            && err.contains("spec.template.spec.hostNetwork")
            && err.contains("WIN-HOSTNETWORK"),
        "{err}"
    );
}

/// One workload opts out of one rule with the annotation
/// `winadmit.io/skip.<RULE>` carrying a reason: that rule no longer denies
/// it, the others still do.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_skip_annotation_opts_one_workload_out_of_one_rule() {
    let s = enforce("a_skip_annotation_opts_one_workload_out_of_one_rule");
    let ns = ns(s, "skip");
    let spec = json!({"nodeSelector": {"kubernetes.io/os": "windows"},
        "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}});
    let mut skipped = pod(&ns, "skipped", spec.clone());
    skipped["metadata"]["annotations"] =
        json!({"winadmit.io/skip.WIN-SYSCTLS": "the sysctl is set by the node image"});
    let out = create(s.cp, &skipped, true);
    assert!(out.status.success(), "{}", stderr(&out));

    let mut both = skipped.clone();
    both["metadata"]["name"] = json!("skipped-one-of-two");
    both["spec"]["hostNetwork"] = json!(true);
    let out = create(s.cp, &both, true);
    let err = stderr(&out);
    assert!(
        !out.status.success() && err.contains("WIN-HOSTNETWORK") && !err.contains("[WIN-SYSCTLS]"),
        "{err}"
    );

    let out = create(s.cp, &pod(&ns, "not-skipped", spec), true);
    assert!(stderr(&out).contains("WIN-SYSCTLS"), "{}", stderr(&out));
}
