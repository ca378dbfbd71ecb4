//! The oracle of generated Windows pods (`tests/e2e/e2e_oracle.rs`, and each
//! API server of `tests/cluster/version_matrix.rs`): pods with each setting winadmit
//! has a rule for, alone and in pairs, under `spec.os.name: windows` and
//! under the Windows node selector, sent to a real API server without a
//! webhook and through winadmit's webhooks, and compared with what
//! `winadmit report` says of them at the same Kubernetes version.

#![allow(dead_code)] // each test target uses a part

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::controlplane::ControlPlane;
use super::e2e::{self, Webhook, stderr};
use crate::binary;

const IMAGE: &str = "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022";

/// A setting on a pod: a name and where it goes (`pod` merges into the
/// pod spec, `container` into the first container).
pub struct Setting {
    pub name: &'static str,
    pub pod: Value,
    pub container: Value,
}

pub fn settings() -> Vec<Setting> {
    let p = |name, pod: Value| Setting {
        name,
        pod,
        container: json!({}),
    };
    let c = |name, container: Value| Setting {
        name,
        pod: json!({}),
        container,
    };
    let sc = |name, v: Value| Setting {
        name,
        pod: json!({}),
        container: json!({"securityContext": v}),
    };
    let psc = |name, v: Value| Setting {
        name,
        pod: json!({"securityContext": v}),
        container: json!({}),
    };
    let mount = |name, m: Value| Setting {
        name,
        pod: json!({"volumes": [{"name": "data", "emptyDir": {}}]}),
        container: json!({"volumeMounts": [m]}),
    };
    vec![
        p("hostNetwork", json!({"hostNetwork": true})),
        p("hostPID", json!({"hostPID": true})),
        p("hostIPC", json!({"hostIPC": true})),
        p(
            "shareProcessNamespace",
            json!({"shareProcessNamespace": true}),
        ),
        p("hostUsers", json!({"hostUsers": false})),
        psc("pod runAsUser", json!({"runAsUser": 1000})),
        psc("pod runAsGroup", json!({"runAsGroup": 1000})),
        psc("pod runAsNonRoot", json!({"runAsNonRoot": true})),
        psc("pod fsGroup", json!({"fsGroup": 2000})),
        psc(
            "pod fsGroupChangePolicy",
            json!({"fsGroupChangePolicy": "OnRootMismatch"}),
        ),
        psc(
            "pod supplementalGroups",
            json!({"supplementalGroups": [3000]}),
        ),
        psc(
            "pod supplementalGroupsPolicy",
            json!({"supplementalGroupsPolicy": "Strict"}),
        ),
        psc(
            "pod seLinuxOptions",
            json!({"seLinuxOptions": {"level": "s0:c1,c2"}}),
        ),
        psc(
            "pod seLinuxChangePolicy",
            json!({"seLinuxChangePolicy": "MountOption"}),
        ),
        // Before 1.37 (SELinuxMount off by default) the API server accepts
        // only this value on a new pod.
        psc(
            "pod seLinuxChangePolicy Recursive",
            json!({"seLinuxChangePolicy": "Recursive"}),
        ),
        psc(
            "pod seccomp RuntimeDefault",
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
        ),
        psc(
            "pod appArmor",
            json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
        ),
        psc(
            "pod sysctls",
            json!({"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}),
        ),
        psc(
            "pod net sysctl",
            json!({"sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}]}),
        ),
        psc(
            "pod runAsUserName",
            json!({"windowsOptions": {"runAsUserName": "ContainerUser"}}),
        ),
        sc("privileged true", json!({"privileged": true})),
        sc("privileged false", json!({"privileged": false})),
        sc(
            "allowPrivilegeEscalation true",
            json!({"allowPrivilegeEscalation": true}),
        ),
        sc(
            "allowPrivilegeEscalation false",
            json!({"allowPrivilegeEscalation": false}),
        ),
        sc(
            "capabilities add",
            json!({"capabilities": {"add": ["NET_ADMIN"]}}),
        ),
        sc(
            "capabilities drop",
            json!({"capabilities": {"drop": ["ALL"]}}),
        ),
        sc(
            "readOnlyRootFilesystem",
            json!({"readOnlyRootFilesystem": true}),
        ),
        sc("procMount", json!({"procMount": "Unmasked"})),
        sc("runAsUser", json!({"runAsUser": 1000})),
        sc("runAsGroup", json!({"runAsGroup": 1000})),
        sc("runAsNonRoot", json!({"runAsNonRoot": true})),
        sc(
            "seLinuxOptions",
            json!({"seLinuxOptions": {"type": "spc_t"}}),
        ),
        sc(
            "seccomp Unconfined",
            json!({"seccompProfile": {"type": "Unconfined"}}),
        ),
        sc(
            "appArmor",
            json!({"appArmorProfile": {"type": "Unconfined"}}),
        ),
        sc(
            "hostProcess",
            json!({"windowsOptions": {"hostProcess": true, "runAsUserName": "NT AUTHORITY\\SYSTEM"}}),
        ),
        mount(
            "subPath",
            json!({"name": "data", "mountPath": "C:\\data", "subPath": "x"}),
        ),
        mount(
            "mountPropagation HostToContainer",
            json!({"name": "data", "mountPath": "C:\\data", "mountPropagation": "HostToContainer"}),
        ),
        mount(
            "mountPropagation Bidirectional",
            json!({"name": "data", "mountPath": "C:\\data", "mountPropagation": "Bidirectional"}),
        ),
        Setting {
            name: "emptyDir Memory",
            pod: json!({"volumes": [{"name": "mem", "emptyDir": {"medium": "Memory"}}]}),
            container: json!({"volumeMounts": [{"name": "mem", "mountPath": "C:\\mem"}]}),
        },
        Setting {
            name: "volumeDevices",
            pod: json!({"volumes": [{"name": "raw", "persistentVolumeClaim": {"claimName": "raw"}}]}),
            container: json!({"volumeDevices": [{"name": "raw", "devicePath": "/dev/xvda"}]}),
        },
        c(
            "hugepages",
            json!({"resources": {"limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}}}),
        ),
        c(
            "terminationMessagePath",
            json!({"terminationMessagePath": "/dev/termination-log"}),
        ),
        // Dropped by the API server while the ContainerStopSignals gate is
        // off (alpha, off by default from 1.33 to 1.37); with it on, a
        // Windows pod may use only SIGTERM or SIGKILL.
        c(
            "stopSignal",
            json!({"lifecycle": {"stopSignal": "SIGUSR1"}}),
        ),
        // Kept at creation; a Windows pod is refused only when resized
        // (pods/resize: "windows pods cannot be resized").
        c(
            "resizePolicy",
            json!({"resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]}),
        ),
        p(
            "pod resources",
            json!({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}),
        ),
        p(
            "dnsPolicy ClusterFirstWithHostNet",
            json!({"dnsPolicy": "ClusterFirstWithHostNet"}),
        ),
    ]
}

/// JSON merge of `b` into `a` (objects merge, arrays concatenate).
pub fn merge(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (Value::Array(a), Value::Array(b)) => a.extend(b.iter().cloned()),
        (a, b) => *a = b.clone(),
    }
}

/// Keeps the first of the list's items with the same `name` (volumes) or
/// `mountPath` (mounts), so two settings can share a volume.
fn dedupe(list: &mut Value) {
    if let Some(items) = list.as_array_mut() {
        let mut seen = BTreeSet::new();
        items.retain(|i| seen.insert(i.get("mountPath").unwrap_or(&i["name"]).to_string()));
    }
}

/// The two ways a pod targets Windows, and the name prefix that records it.
pub fn targets() -> [(&'static str, Value); 2] {
    [
        ("os", json!({"os": {"name": "windows"}})),
        (
            "selector",
            json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
        ),
    ]
}

pub fn make_pod(ns: &str, name: &str, target: &Value, picked: &[&Setting]) -> Value {
    let mut spec = target.clone();
    let mut container = json!({"name": "web", "image": IMAGE});
    for s in picked {
        merge(&mut spec, &s.pod);
        merge(&mut container, &s.container);
    }
    dedupe(&mut spec["volumes"]);
    dedupe(&mut container["volumeMounts"]);
    spec["containers"] = json!([container]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

/// Every setting alone, and every pair among the settings (deterministic),
/// under both targetings: (pod, description).
pub fn generated(ns: &str) -> Vec<(Value, String)> {
    let all = settings();
    let mut combos: Vec<Vec<&Setting>> = all.iter().map(|s| vec![s]).collect();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            combos.push(vec![a, b]);
        }
    }
    let mut out = Vec::new();
    for (t, target) in targets() {
        for (i, picked) in combos.iter().enumerate() {
            let name = format!("{t}-{i}");
            let what = picked
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(" + ");
            out.push((
                make_pod(ns, &name, &target, picked),
                format!("{name} ({t}: {what})"),
            ));
        }
    }
    out
}

/// What winadmit says of one object (`winadmit report --format json`):
/// the verdict `/validate` gives after `/mutate`'s patch, and the findings
/// (rule, severity, field) of the object as written.
pub struct Said {
    pub verdict: String,
    pub findings: Vec<(String, String, String)>,
}

/// At `version` (`--kubernetes-version`), or winadmit's newest when `None`.
pub fn report(pods: &[(Value, String)], version: Option<&str>) -> BTreeMap<String, Said> {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<&Value> = pods.iter().map(|(p, _)| p).collect();
    let file = e2e::write(
        dir.path(),
        "pods.json",
        &json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string(),
    );
    let mut args = vec![
        "report",
        "--mode",
        "enforce",
        "--format",
        "json",
        "--from-file",
        file.to_str().unwrap(),
    ];
    if let Some(v) = version {
        args.extend(["--kubernetes-version", v]);
    }
    let out = binary::winadmit(&args);
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "winadmit report: {}",
        stderr(&out)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let findings = o["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    let s = |k: &str| f[k].as_str().unwrap().to_owned();
                    (s("rule"), s("severity"), s("field"))
                })
                .collect();
            (
                o["name"].as_str().unwrap().to_owned(),
                Said {
                    verdict: o["verdict"].as_str().unwrap().to_owned(),
                    findings,
                },
            )
        })
        .collect()
}

/// "cannot be set for a windows pod", "may not be set for a windows pod".
pub const REFUSED_FOR_WINDOWS: &str = "set for a windows pod";

/// The generated pods on which `cp` and winadmit (at `version`, or its
/// newest when `None`) disagree, each with what differed, and how many pods
/// were sent:
///
/// - a pod the API server refuses by itself (no webhook) never gets only
///   warnings from winadmit: `lint` reports an error for it;
/// - WIN-OS-FIELDS names exactly the fields the API server's Windows
///   validation refuses (`cannot be set for a windows pod`);
/// - every pod winadmit admits, as written or patched by `/mutate`, is
///   accepted by the API server through the installed webhooks (setup
///   `oracle`, namespaces `oracle-raw` and `oracle-hooked`).
pub fn disagreements(cp: &ControlPlane, version: Option<&str>) -> (Vec<String>, usize) {
    // No webhook here: what the API server does by itself.
    let raw_ns = "oracle-raw";
    cp.namespace(raw_ns, &[]);
    // Through the base install's webhooks (enforce).
    let objects = e2e::rendered("base");
    let mut flags = vec!["--cluster-cache", "off"];
    if let Some(v) = version {
        flags.extend(["--kubernetes-version", v]);
    }
    let webhook = Webhook::start(&e2e::overlay_policy(&objects), &flags);
    cp.apply(&e2e::to_list(&e2e::registrations(
        &objects, "oracle", &webhook,
    )));
    let hooked_ns = "oracle-hooked";
    cp.namespace(hooked_ns, &[("winadmit-e2e", "oracle")]);
    e2e::wait_registered(cp, &webhook, hooked_ns, 2);

    let pods = generated(raw_ns);
    let said = report(&pods, version);
    let raw = cp.dry_run_create_all(&pods.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
    let hooked: Vec<Value> = pods
        .iter()
        .map(|(p, _)| {
            let mut p = p.clone();
            p["metadata"]["namespace"] = json!(hooked_ns);
            p
        })
        .collect();
    let through = cp.dry_run_create_all(&hooked);
    let mut failures = Vec::new();
    for (((pod, what), raw), through) in pods.iter().zip(&raw).zip(&through) {
        let name = pod["metadata"]["name"].as_str().unwrap();
        let Said {
            verdict,
            findings: found,
        } = &said[name];
        let errors: Vec<&(String, String, String)> =
            found.iter().filter(|(_, sev, _)| sev == "error").collect();
        if !raw.ok() && errors.is_empty() {
            failures.push(format!(
                "{what}: the API server refuses it, winadmit reports no error ({found:?}): {}",
                raw.message()
            ));
        }
        let os_fields: BTreeSet<String> = found
            .iter()
            .filter(|(rule, _, _)| rule == "WIN-OS-FIELDS")
            .map(|(_, _, field)| field.clone())
            .collect();
        let refused = raw.cause_fields(REFUSED_FOR_WINDOWS);
        if os_fields != refused {
            failures.push(format!(
                "{what}: WIN-OS-FIELDS names {os_fields:?}, the API server refuses {refused:?}"
            ));
        }
        let denied_by_winadmit = through
            .message()
            .contains(r#"admission webhook "validate.winadmit.io" denied the request"#);
        if verdict != "deny" && !through.ok() {
            failures.push(format!(
                "{what}: winadmit admits it (verdict {verdict}), the API server refuses it through the webhooks: {}",
                through.message()
            ));
        } else if verdict == "deny" && through.ok() {
            failures.push(format!(
                "{what}: winadmit's verdict is deny ({errors:?}), yet the pod was admitted through the webhooks"
            ));
        } else if !through.ok() && !denied_by_winadmit && raw.ok() {
            failures.push(format!(
                "{what}: accepted as written, refused by the API server after winadmit's patch: {}",
                through.message()
            ));
        }
    }
    (failures, pods.len())
}
