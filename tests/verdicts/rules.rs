//! What a rule does across targets, policies, inputs and cluster facts,
//! beyond one case: verdicts by version and runtime, strict stance, skip
//! annotations, registry and node facts, every workload kind. Each rule's
//! own bad and good cases are folders under `tests/fixtures/rules/`, run by
//! `tests/rule_fixtures.rs`. Pods are Windows-targeted by `nodeSelector
//! kubernetes.io/os: windows` unless a test says otherwise.

use serde::Deserialize;
use winadmit::decision::cluster::TargetCluster;
use winadmit::decision::engine::{Context, evaluate};
use winadmit::decision::finding::Severity;
use winadmit::decision::policy::Policy;
use winadmit::decision::version::KubeVersion;
use winadmit::decision::view::ObjectView;
use winadmit::decision::workload::Workload;

/// A Windows pod with `spec` lines appended (indented two spaces under spec).
fn windows_pod(spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ns\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n{}\n",
        indent(spec)
    )
}

/// A valid HostProcess pod (pod-level HostProcess and user), with `extra`
/// spec lines first.
fn host_process_pod(extra: &str) -> String {
    windows_pod(&format!(
        "{extra}hostNetwork: true\nsecurityContext:\n  windowsOptions:\n    hostProcess: true\n    runAsUserName: NT AUTHORITY\\SYSTEM\ncontainers:\n- name: agent\n  image: mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:v1.0.0"
    ))
}

fn pod(spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n{}\n",
        indent(spec)
    )
}

/// A pod pinned to Linux nodes with `spec` lines appended.
fn linux_pod(spec: &str) -> String {
    pod(&format!("nodeSelector:\n  kubernetes.io/os: linux\n{spec}"))
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Fields flagged by `rule` when evaluating `yaml`.
fn flagged_with(policy: &Policy, version: KubeVersion, yaml: &str, rule: &str) -> Vec<String> {
    let cx = Context {
        cluster: winadmit::decision::cluster::TargetCluster::at(version),
        ..Context::default()
    };
    flagged_under(policy, &cx, yaml, rule)
}

/// Fields flagged by `rule` when evaluating `yaml` with `policy` in `cx`.
fn flagged_under(policy: &Policy, cx: &Context<'_>, yaml: &str, rule: &str) -> Vec<String> {
    let docs = winadmit::input::source::parse(yaml).unwrap();
    let view = ObjectView::deserialize(&docs[0].value).unwrap();
    let workload = Workload::from_view(&view).unwrap();
    evaluate(policy, &workload, cx)
        .findings
        .into_iter()
        .filter(|f| f.rule == rule)
        .map(|f| f.field.to_string())
        .collect()
}

fn flagged(yaml: &str, rule: &str) -> Vec<String> {
    flagged_with(&Policy::default_policy(), KubeVersion::LATEST, yaml, rule)
}

const C: &str = "containers:\n- name: app\n  image: mcr.microsoft.com/windows/servercore:ltsc2022";

#[test]
fn api_server_field_list_grows_by_version() {
    let yaml = pod(&format!(
        "os:\n  name: windows\nsecurityContext:\n  appArmorProfile:\n    type: RuntimeDefault\n  supplementalGroupsPolicy: Merge\n  seLinuxChangePolicy: Recursive\n{C}"
    ));
    let at = |minor| {
        flagged_with(
            &Policy::default_policy(),
            KubeVersion::new(1, minor),
            &yaml,
            "WIN-OS-FIELDS",
        )
    };
    // Every field the API server forbids at that version is an error of
    // this rule, whatever other rule also reports it.
    assert_eq!(
        at(31),
        [
            "spec.securityContext.appArmorProfile",
            "spec.securityContext.supplementalGroupsPolicy"
        ]
    );
    assert_eq!(
        at(32),
        [
            "spec.securityContext.appArmorProfile",
            "spec.securityContext.supplementalGroupsPolicy",
            "spec.securityContext.seLinuxChangePolicy"
        ]
    );
    // appArmorProfile also has its own rule.
    let apparmor = flagged_with(
        &Policy::default_policy(),
        KubeVersion::new(1, 32),
        &yaml,
        "WIN-APPARMOR",
    );
    assert_eq!(apparmor, ["spec.securityContext.appArmorProfile"]);
}

#[test]
fn hyperv_annotation_allows_one_container() {
    let two = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: iis\nspec:\n  template:\n    metadata:\n      annotations:\n        experimental.windows.kubernetes.io/isolation-type: hyperv\n    spec:\n      nodeSelector:\n        kubernetes.io/os: windows\n      containers:\n      - name: a\n        image: x\n      - name: b\n        image: y\n";
    // Docker before 1.21, where the annotation works: a second container
    // breaks the pod.
    let docker = |yaml: &str| {
        flagged_with(
            &Policy::default_policy(),
            KubeVersion::new(1, 19),
            yaml,
            "WIN-HYPERV",
        )
    };
    assert_eq!(
        docker(two),
        ["spec.template.metadata.annotations[experimental.windows.kubernetes.io/isolation-type]"]
    );
    let one = two.replace("      - name: b\n        image: y\n", "");
    assert!(docker(&one).is_empty());
    // Where the annotation is ignored, the pod runs (process-isolated):
    // no error here, WIN-HYPERV-ANNOTATION warns instead.
    assert!(flagged(two, "WIN-HYPERV").is_empty());
    assert!(!flagged(two, "WIN-HYPERV-ANNOTATION").is_empty());
}

/// A pod with `spec.os.name: linux` and pod-level windowsOptions.
const LINUX_OS_WINDOWS_OPTIONS: &str = "os:\n  name: linux\nsecurityContext:\n  windowsOptions:\n    runAsUserName: ContainerUser\ncontainers:\n- name: a\n  image: nginx";

/// Severity of `rule`'s findings on `yaml` at `cluster` (strict or not).
fn severities_at(cluster: &TargetCluster, yaml: &str, rule: &str) -> Vec<Severity> {
    let docs = winadmit::input::source::parse(yaml).unwrap();
    let view = ObjectView::deserialize(&docs[0].value).unwrap();
    let cx = Context {
        cluster: cluster.clone(),
        runtime_classes: None,
        nodes: None,
        images: None,
        gmsa: None,
        exceptions: None,
    };
    evaluate(
        &Policy::default_policy(),
        &Workload::from_view(&view).unwrap(),
        &cx,
    )
    .findings
    .into_iter()
    .filter(|f| f.rule == rule)
    .map(|f| f.severity)
    .collect()
}

/// One row per (rule, case): the verdict at 1.19 + docker, 1.26 +
/// containerd 1.6, the default target and the default target under the
/// strict stance (docs/verdicts.md, "Pods without `spec.os`"). `None` is no finding.
#[test]
fn verdicts_by_target_follow_the_reference() {
    use Severity::{Error as E, Info as I, Warning as W};
    let docker = TargetCluster::at(KubeVersion::new(1, 19));
    let mut c126 = TargetCluster::at(KubeVersion::new(1, 26));
    c126.containerd_version = Some(KubeVersion::new(1, 6));
    let latest = TargetCluster::default();
    let strict = TargetCluster {
        stance: winadmit::decision::cluster::Stance::Strict,
        ..TargetCluster::default()
    };
    let one_subpath = windows_pod(&format!(
        "{C}\n  volumeMounts:\n  - name: v\n    mountPath: C:\\cfg\n    subPath: a"
    ));
    let two_subpaths = windows_pod(&format!(
        "{C}\n  volumeMounts:\n  - name: v\n    mountPath: C:\\a\n    subPath: a\n  - name: v\n    mountPath: C:\\b\n    subPath: b"
    ));
    let sc = |body: &str| windows_pod(&format!("{C}\n  securityContext:\n    {body}"));
    let psc = |body: &str| windows_pod(&format!("securityContext:\n  {body}\n{C}"));
    let rows: Vec<(&str, String, [Option<Severity>; 4])> = vec![
        ("WIN-SUBPATH", one_subpath, [Some(E), None, None, None]),
        (
            "WIN-LINUX-IMAGE",
            windows_pod("containers:\n- name: web\n  image: nginx:1.27"),
            [Some(E), Some(E), Some(E), Some(E)],
        ),
        (
            "WIN-LINUX-IMAGE-TAG",
            windows_pod("containers:\n- name: app\n  image: python:3.12-alpine"),
            [Some(W), Some(W), Some(W), Some(W)],
        ),
        (
            "WIN-SUBPATH",
            two_subpaths,
            [Some(E), Some(W), Some(W), Some(W)],
        ),
        (
            "WIN-EMPTYDIR-MEMORY",
            windows_pod(&format!(
                "{C}\nvolumes:\n- name: v\n  emptyDir:\n    medium: Memory"
            )),
            [Some(E), Some(W), Some(W), Some(W)],
        ),
        (
            "WIN-APPARMOR",
            sc("appArmorProfile:\n      type: RuntimeDefault"),
            [Some(E), Some(W), Some(W), Some(W)],
        ),
        (
            "WIN-SYSCTLS",
            psc("sysctls:\n  - name: net.core.somaxconn\n    value: \"1024\""),
            [Some(W), Some(W), Some(E), Some(E)],
        ),
        (
            "WIN-PRIVILEGED",
            sc("privileged: true"),
            [Some(W), Some(W), Some(W), Some(E)],
        ),
        (
            "WIN-RUNASUSER",
            sc("runAsUser: 1000"),
            [Some(W), Some(W), Some(W), Some(W)],
        ),
        (
            "WIN-READONLY-ROOTFS",
            sc("readOnlyRootFilesystem: true"),
            [Some(W), Some(W), Some(W), Some(E)],
        ),
        (
            "WIN-CAPABILITIES",
            sc("capabilities:\n      add: [NET_ADMIN]"),
            [Some(W), Some(W), Some(W), Some(E)],
        ),
        (
            "WIN-CAPABILITIES",
            sc("capabilities:\n      drop: [ALL]"),
            [None, None, None, None],
        ),
        (
            "WIN-SECCOMP",
            sc("seccompProfile:\n      type: RuntimeDefault"),
            [None, None, None, None],
        ),
        (
            "WIN-TERMINATION-MESSAGE-PATH",
            windows_pod(&format!("{C}\n  terminationMessagePath: C:\\\\t.log")),
            [Some(W), None, None, None],
        ),
        (
            "WIN-HOSTNETWORK",
            windows_pod(&format!("hostNetwork: true\n{C}")),
            [Some(E), Some(E), Some(E), Some(E)],
        ),
        (
            "WIN-HOSTPID",
            windows_pod(&format!("hostPID: true\n{C}")),
            [Some(W), Some(W), Some(W), Some(E)],
        ),
        (
            "WIN-HOSTPROCESS",
            host_process_pod(""),
            [Some(E), None, None, None],
        ),
        (
            "WIN-HOSTPROCESS-REDUNDANT",
            host_process_pod("hostPID: true\n"),
            [Some(I), Some(I), Some(I), Some(I)],
        ),
        (
            "WIN-MEMORY-LIMITS",
            windows_pod(C),
            [Some(I), Some(I), Some(I), Some(I)],
        ),
        (
            "WIN-POD-RESOURCES",
            windows_pod(&format!("resources:\n  limits:\n    memory: 1Gi\n{C}")),
            [None, None, Some(E), Some(E)],
        ),
        // Refused with spec.os.name: linux, which exists from 1.23 (the API
        // server drops it before, and nothing else pins the pod to Linux).
        (
            "WIN-WINDOWSOPTIONS-LINUX",
            pod(LINUX_OS_WINDOWS_OPTIONS),
            [None, Some(E), Some(E), Some(E)],
        ),
        (
            "WIN-WINDOWSOPTIONS-LINUX-IGNORED",
            pod(LINUX_OS_WINDOWS_OPTIONS),
            [None, None, None, None],
        ),
        (
            "WIN-WINDOWSOPTIONS-LINUX-IGNORED",
            linux_pod(
                "securityContext:\n  windowsOptions:\n    runAsUserName: ContainerUser\ncontainers:\n- name: a\n  image: nginx",
            ),
            [Some(W), Some(W), Some(W), Some(W)],
        ),
    ];
    let targets = [&docker, &c126, &latest, &strict];
    let mut failures = Vec::new();
    for (rule, yaml, want) in &rows {
        for (cluster, want) in targets.iter().zip(want) {
            let got = severities_at(cluster, yaml, rule);
            let got = got.iter().copied().max();
            if got != *want {
                failures.push(format!(
                    "{rule} at {}: expected {want:?}, got {got:?}\n{yaml}",
                    cluster.summary()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
}

#[test]
fn the_retired_containerd_profile_changes_no_verdict() {
    let yaml = windows_pod(&format!("{C}\n  terminationMessagePath: C:\\\\t.log"));
    let policy = Policy::from_yaml("containerd.yaml", "profile: containerd\n").unwrap();
    assert_eq!(policy.notices.len(), 1);
    let docs = winadmit::input::source::parse(&yaml).unwrap();
    let view = ObjectView::deserialize(&docs[0].value).unwrap();
    let w = Workload::from_view(&view).unwrap();
    let with = evaluate(&policy, &w, &Context::default());
    let without = evaluate(&Policy::default_policy(), &w, &Context::default());
    assert_eq!(with.findings, without.findings);
}

#[test]
fn skip_annotation_needs_a_reason() {
    let with = |reason: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    winadmit.io/skip.WIN-HOSTPID: \"{reason}\"\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  hostPID: true\n  {}\n",
            C.replace('\n', "\n  ")
        )
    };
    assert!(
        flagged(
            &with("HostProcess agent sees host processes anyway"),
            "WIN-HOSTPID"
        )
        .is_empty()
    );
    assert_eq!(flagged(&with(""), "WIN-HOSTPID"), ["spec.hostPID"]);
}

#[test]
fn every_workload_kind_reports_from_its_own_root() {
    let template = "      nodeSelector:\n        kubernetes.io/os: windows\n      hostPID: true\n      containers:\n      - name: a\n        image: x\n";
    let kinds = [
        (
            "apps/v1",
            "Deployment",
            "spec:\n  template:\n    spec:\n",
            "spec.template.spec.hostPID",
        ),
        (
            "extensions/v1beta1",
            "DaemonSet",
            "spec:\n  template:\n    spec:\n",
            "spec.template.spec.hostPID",
        ),
        (
            "apps/v1",
            "StatefulSet",
            "spec:\n  template:\n    spec:\n",
            "spec.template.spec.hostPID",
        ),
        (
            "apps/v1beta2",
            "ReplicaSet",
            "spec:\n  template:\n    spec:\n",
            "spec.template.spec.hostPID",
        ),
        (
            "v1",
            "ReplicationController",
            "spec:\n  template:\n    spec:\n",
            "spec.template.spec.hostPID",
        ),
        (
            "batch/v1",
            "Job",
            "spec:\n  template:\n    spec:\n",
            "spec.template.spec.hostPID",
        ),
        (
            "v1",
            "PodTemplate",
            "template:\n  spec:\n",
            "template.spec.hostPID",
        ),
    ];
    for (api, kind, head, want) in kinds {
        let body = if kind == "PodTemplate" {
            template.replace("      ", "    ")
        } else {
            template.to_owned()
        };
        let yaml = format!("apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: w\n{head}{body}");
        assert_eq!(flagged(&yaml, "WIN-HOSTPID"), [want], "{kind}");
    }
    let cron = format!(
        "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: c\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n{}",
        template.replace("      ", "          ")
    );
    assert_eq!(
        flagged(&cron, "WIN-HOSTPID"),
        ["spec.jobTemplate.spec.template.spec.hostPID"]
    );
}

/// A policy with the Windows taint declared.
fn tainted() -> Policy {
    Policy::from_yaml(
        "taint.yaml",
        "params:\n  windowsTaint: {key: os, value: windows, effect: NoSchedule}\n",
    )
    .unwrap()
}

#[test]
fn windows_taint_needs_a_toleration_on_windows_pods() {
    let p = tainted();
    let at = |yaml: &str| flagged_with(&p, KubeVersion::LATEST, yaml, "WIN-TAINT-TOLERATION");
    assert_eq!(at(&windows_pod(C)), ["spec.tolerations"]);
    let tolerates = |t: &str| windows_pod(&format!("tolerations:\n{t}\n{C}"));
    assert!(
        at(&tolerates(
            "- key: os\n  operator: Equal\n  value: windows\n  effect: NoSchedule"
        ))
        .is_empty()
    );
    assert!(at(&tolerates("- key: os\n  operator: Exists")).is_empty());
    assert!(at(&tolerates("- operator: Exists")).is_empty());
    assert_eq!(
        at(&tolerates(
            "- key: os\n  operator: Equal\n  value: linux\n  effect: NoSchedule"
        )),
        ["spec.tolerations"]
    );
    // No taint in the policy: silent.
    assert!(flagged(&windows_pod(C), "WIN-TAINT-TOLERATION").is_empty());
}

#[test]
fn non_windows_workloads_tolerating_the_windows_taint() {
    let p = tainted();
    let at =
        |yaml: &str| flagged_with(&p, KubeVersion::LATEST, yaml, "WIN-LINUX-TOLERATES-WINDOWS");
    let nginx = "containers:\n- name: web\n  image: nginx:1.27";
    let by_key =
        "tolerations:\n- key: os\n  operator: Equal\n  value: windows\n  effect: NoSchedule";
    let wildcard = "tolerations:\n- operator: Exists";
    let linux = "nodeSelector:\n  kubernetes.io/os: linux";
    assert_eq!(
        at(&pod(&format!("{by_key}\n{nginx}"))),
        ["spec.tolerations[0]"]
    );
    assert_eq!(
        at(&pod(&format!("{linux}\n{by_key}\n{nginx}"))),
        ["spec.tolerations[0]"]
    );
    assert_eq!(
        at(&pod(&format!("{wildcard}\n{nginx}"))),
        ["spec.tolerations[0]"]
    );
    // A Linux-pinned DaemonSet that tolerates everything cannot land on Windows.
    assert!(at(&pod(&format!("{linux}\n{wildcard}\n{nginx}"))).is_empty());
    assert!(at(&windows_pod(&format!("{by_key}\n{C}"))).is_empty());
    assert!(
        flagged(
            &pod(&format!("{by_key}\n{nginx}")),
            "WIN-LINUX-TOLERATES-WINDOWS"
        )
        .is_empty()
    );
}

#[test]
fn secret_volumes_are_advice_off_by_default() {
    let yaml = windows_pod(&format!(
        "{C}\nvolumes:\n- name: tls\n  secret:\n    secretName: web-tls\n- name: cfg\n  configMap:\n    name: cfg"
    ));
    assert!(flagged(&yaml, "WIN-SECRET-VOLUME").is_empty());
    let on = Policy::from_yaml("on.yaml", "rules:\n  WIN-SECRET-VOLUME: warning\n").unwrap();
    assert_eq!(
        flagged_with(&on, KubeVersion::LATEST, &yaml, "WIN-SECRET-VOLUME"),
        ["spec.volumes[0].secret"]
    );
}

#[test]
fn hyperv_annotation_warning_is_version_aware() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    experimental.windows.kubernetes.io/isolation-type: hyperv\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: a\n    image: mcr.microsoft.com/windows/servercore:ltsc2019\n";
    let at = |minor| {
        flagged_with(
            &Policy::default_policy(),
            KubeVersion::new(1, minor),
            yaml,
            "WIN-HYPERV-ANNOTATION",
        )
    };
    assert!(at(20).is_empty(), "the feature gate still existed in 1.20");
    assert_eq!(at(21).len(), 1);
}

/// Lints a multi-document text with its own RuntimeClasses, like `lint`.
fn lint_rules(policy: &Policy, yaml: &str) -> Vec<(String, String, Severity)> {
    let mut rc = winadmit::decision::targeting::RuntimeClasses::default();
    winadmit::entry::lint::collect_runtime_classes(yaml, &mut rc);
    let cx = Context {
        cluster: winadmit::decision::cluster::TargetCluster::default(),
        runtime_classes: Some(&rc),
        nodes: None,
        images: None,
        gmsa: None,
        exceptions: None,
    };
    let mut report = winadmit::render::LintReport::default();
    winadmit::entry::lint::lint_text("t.yaml", yaml, policy, &cx, &mut report);
    report
        .findings
        .into_iter()
        .map(|f| (f.rule.to_owned(), f.field, f.severity))
        .collect()
}

#[test]
fn hyperv_runtime_class_relaxes_the_node_build() {
    // An ltsc2019 image on a Windows Server 2025 node: outside the stable
    // container ABI's window (10.0.20348 to 10.0.26100), so process
    // isolation cannot start it; Hyper-V isolation can.
    let c2019 = "containers:\n- name: app\n  image: mcr.microsoft.com/windows/servercore:ltsc2019";
    let hv_pod = windows_pod(&format!(
        "  node.kubernetes.io/windows-build: '10.0.26100'\nruntimeClassName: hyperv-2019\n{c2019}"
    ));
    let rule = "WIN-BUILD-NODE-MISMATCH";
    // The RuntimeClass object in the input names a Hyper-V handler.
    let class = "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: hyperv-2019\nhandler: runhcs-wcow-hypervisor\n---\n";
    let found = lint_rules(&Policy::default_policy(), &format!("{class}{hv_pod}"));
    assert!(!found.iter().any(|(r, ..)| r == rule), "{found:?}");
    // Without it, the mismatch is an error...
    let found = lint_rules(&Policy::default_policy(), &hv_pod);
    assert!(
        found
            .iter()
            .any(|(r, _, s)| r == rule && *s == Severity::Error),
        "{found:?}"
    );
    // ...unless the policy names the class as Hyper-V.
    let p = Policy::from_yaml("p", "params:\n  hypervRuntimeClasses: [hyperv-2019]\n").unwrap();
    assert!(flagged_with(&p, KubeVersion::LATEST, &hv_pod, rule).is_empty());
    // A process-isolated RuntimeClass that selects a build is checked like a nodeSelector.
    let process = "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: win-2019\nhandler: runhcs-wcow-process\nscheduling:\n  nodeSelector:\n    kubernetes.io/os: windows\n    node.kubernetes.io/windows-build: '10.0.17763'\n---\n";
    let uses = pod(&format!("runtimeClassName: win-2019\n{C}"));
    let found = lint_rules(&Policy::default_policy(), &format!("{process}{uses}"));
    assert!(
        found
            .iter()
            .any(|(r, f, _)| r == rule && f == "spec.containers[0].image"),
        "{found:?}"
    );
}

#[test]
fn services_selecting_windows_workloads_in_the_same_input() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: iis\nspec:\n  selector:\n    matchLabels: {app: iis}\n  template:\n    metadata:\n      labels: {app: iis}\n    spec:\n      nodeSelector:\n        kubernetes.io/os: windows\n      containers:\n      - name: iis\n        image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022\n        resources:\n          limits: {memory: 1Gi}\n";
    let service = |selector: &str| {
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: iis\nspec:\n  selector: {{app: {selector}}}\n  sessionAffinity: ClientIP\n  sessionAffinityConfig:\n    clientIP:\n      timeoutSeconds: 600\n"
        )
    };
    let found = lint_rules(
        &Policy::default_policy(),
        &format!("{deployment}{}", service("iis")),
    );
    assert_eq!(
        found,
        [(
            "WIN-SERVICE-AFFINITY-TIMEOUT".to_owned(),
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds".to_owned(),
            Severity::Warning
        )]
    );
    let found = lint_rules(
        &Policy::default_policy(),
        &format!("{deployment}{}", service("other")),
    );
    assert!(found.is_empty(), "{found:?}");
}

/// Windows nodes as the cluster cache or a live report learns them.
fn nodes(list: &[(&str, &str, &str, &str)]) -> winadmit::decision::cluster::WindowsNodes {
    winadmit::decision::cluster::WindowsNodes {
        nodes: list
            .iter()
            .map(|(name, build, kubelet, runtime)| {
                winadmit::decision::cluster::WindowsNode::from_object(&serde_json::json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {
                        "kubernetes.io/os": "windows",
                        "node.kubernetes.io/windows-build": build, "pool": name}},
                    "status": {"nodeInfo": {"kubeletVersion": kubelet, "containerRuntimeVersion": runtime}}
                }))
                .unwrap()
            })
            .collect(),
..Default::default()
    }
}

fn findings_on(
    nodes: &winadmit::decision::cluster::WindowsNodes,
    yaml: &str,
) -> Vec<(String, String, Severity)> {
    let docs = winadmit::input::source::parse(yaml).unwrap();
    let view = ObjectView::deserialize(&docs[0].value).unwrap();
    let cx = Context {
        nodes: Some(nodes),
        images: None,
        ..Context::default()
    };
    evaluate(
        &Policy::default_policy(),
        &Workload::from_view(&view).unwrap(),
        &cx,
    )
    .findings
    .into_iter()
    .map(|f| (f.rule.to_owned(), f.message, f.severity))
    .collect()
}

#[test]
fn facts_learnt_from_the_nodes_decide_version_dependent_verdicts() {
    let subpath = |selector: &str| {
        windows_pod(&format!(
            "  pool: {selector}\n{C}\n  volumeMounts:\n  - name: v\n    mountPath: C:\\cfg\n    subPath: a"
        ))
    };
    let pools = nodes(&[
        ("docker-pool", "10.0.20348", "v1.23.4", "docker://20.10.9"),
        (
            "containerd-pool",
            "10.0.20348",
            "v1.30.2",
            "containerd://1.7.22",
        ),
    ]);
    let on_docker = findings_on(&pools, &subpath("docker-pool"));
    let sub: Vec<_> = on_docker.iter().filter(|f| f.0 == "WIN-SUBPATH").collect();
    assert_eq!(sub.len(), 1, "{on_docker:?}");
    assert_eq!(sub[0].2, Severity::Error);
    assert!(
        sub[0].1.contains("Windows node docker-pool"),
        "the finding names the node the fact came from: {}",
        sub[0].1
    );
    let on_containerd = findings_on(&pools, &subpath("containerd-pool"));
    assert!(
        !on_containerd.iter().any(|f| f.0 == "WIN-SUBPATH"),
        "{on_containerd:?}"
    );
}

#[test]
fn an_image_build_no_node_has_is_an_error() {
    let ltsc2022_only = nodes(&[("win-1", "10.0.20348", "v1.31.0", "containerd://1.7.22")]);
    let ltsc2019 = windows_pod(
        "containers:\n- name: app\n  image: mcr.microsoft.com/windows/servercore:ltsc2019",
    );
    let f = findings_on(&ltsc2022_only, &ltsc2019);
    let no_node: Vec<_> = f.iter().filter(|f| f.0 == "WIN-BUILD-NO-NODE").collect();
    assert_eq!(no_node.len(), 1, "{f:?}");
    assert_eq!(no_node[0].2, Severity::Error);
    assert!(
        no_node[0].1.contains("10.0.20348 (node win-1)"),
        "{}",
        no_node[0].1
    );
    // A build some node has is fine; so is any build without node facts.
    assert!(
        !findings_on(&ltsc2022_only, &windows_pod(C))
            .iter()
            .any(|f| f.0 == "WIN-BUILD-NO-NODE")
    );
    assert!(flagged(&ltsc2019, "WIN-BUILD-NO-NODE").is_empty());
    // A windows-build selector no node carries.
    let selects = windows_pod(&format!(
        "  node.kubernetes.io/windows-build: '10.0.26100'\n{C}"
    ));
    let f = findings_on(&ltsc2022_only, &selects);
    assert!(
        f.iter()
            .any(|f| f.0 == "WIN-BUILD-NO-NODE" && f.1.contains("stays Pending")),
        "{f:?}"
    );
}

/// Every fact of a RuntimeClass comes from one lookup, in one order: the
/// cluster's object (which the RuntimeClass admission controller merges
/// into the pod's node selector) first, the policy's declarations for what
/// it does not say.
#[test]
fn runtime_class_facts_come_from_the_cluster_object_first() {
    let uses = pod(
        "runtimeClassName: shared\ncontainers:\n- name: c\n  image: app:1\n  securityContext:\n    privileged: true\n",
    );
    let policy = Policy::from_yaml("p", "windowsRuntimeClasses: [shared]\n").unwrap();
    // Known only to the policy: the pod targets Windows.
    let found = lint_rules(&policy, &uses);
    assert!(
        found.iter().any(|(r, ..)| r == "WIN-PRIVILEGED"),
        "{found:?}"
    );
    // The cluster's object pins Linux: the pod lands there, whatever the
    // policy says.
    let linux = "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: shared\nhandler: runc\nscheduling:\n  nodeSelector:\n    kubernetes.io/os: linux\n---\n";
    let found = lint_rules(&policy, &format!("{linux}{uses}"));
    assert!(found.is_empty(), "{found:?}");
    // An object that pins no OS leaves the policy's declaration standing.
    let silent = "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: shared\nhandler: runc\n---\n";
    let found = lint_rules(&policy, &format!("{silent}{uses}"));
    assert!(
        found.iter().any(|(r, ..)| r == "WIN-PRIVILEGED"),
        "{found:?}"
    );
}

/// WIN-API-REFUSED's hostUsers and procMount checks apply from 1.33, when
/// the API server keeps both fields by default; the others at every
/// version.
#[test]
fn api_refused_follows_the_release_that_keeps_user_namespace_fields() {
    let spec = "hostPID: true\nshareProcessNamespace: true\nhostUsers: false\ncontainers:\n- name: app\n  image: mcr.microsoft.com/windows/servercore:ltsc2022\n  securityContext:\n    procMount: Unmasked";
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n{}\n",
        spec.lines()
            .map(|l| format!("  {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let at = |minor| {
        let mut got = flagged_with(
            &Policy::default_policy(),
            KubeVersion::new(1, minor),
            &pod,
            "WIN-API-REFUSED",
        );
        got.sort();
        got
    };
    assert_eq!(at(32), ["spec.shareProcessNamespace"]);
    assert_eq!(at(33), ["spec.hostPID", "spec.shareProcessNamespace"]);
    let pod_without_host_users = pod.replace("  hostUsers: false\n", "");
    let unmasked = |minor| {
        flagged_with(
            &Policy::default_policy(),
            KubeVersion::new(1, minor),
            &pod_without_host_users,
            "WIN-API-REFUSED",
        )
    };
    assert!(!unmasked(32).iter().any(|f| f.ends_with("procMount")));
    assert!(unmasked(33).iter().any(|f| f.ends_with("procMount")));
}

/// What a registry says of the images the facts tests use.
fn registry() -> winadmit::decision::images::KnownImages {
    let digest = |c: char| format!("sha256:{}", c.to_string().repeat(64));
    let platforms = |list: &[(&str, &str, Option<&str>)]| {
        list.iter()
            .map(|(os, arch, version)| winadmit::decision::images::Platform {
                os: (*os).into(),
                architecture: (*arch).into(),
                variant: None,
                os_version: version.map(Into::into),
                os_features: Vec::new(),
            })
            .collect()
    };
    let mut known = winadmit::decision::images::KnownImages::default();
    let mut add = |image: &str, d: char, list: &[(&str, &str, Option<&str>)]| {
        known.insert(
            image,
            winadmit::decision::images::Lookup::Known(winadmit::decision::images::ImageFacts {
                digest: Some(digest(d)),
                platforms: platforms(list),
            }),
        );
    };
    add(
        "nginx:1.27",
        '4',
        &[("linux", "amd64", None), ("linux", "arm64", None)],
    );
    // Listed as Linux by name, but the registry says it has a Windows build.
    add(
        "busybox:1.36",
        'b',
        &[
            ("linux", "amd64", None),
            ("windows", "amd64", Some("10.0.20348.2527")),
        ],
    );
    add("python:3.12-alpine", 'a', &[("linux", "amd64", None)]);
    add(
        "contoso/app:1.0-bookworm",
        'c',
        &[
            ("linux", "amd64", None),
            ("windows", "amd64", Some("10.0.20348.1")),
        ],
    );
    add(
        "contoso/payments:4.2",
        'e',
        &[("windows", "amd64", Some("10.0.20348.2527"))],
    );
    add(
        "contoso/both:1",
        'f',
        &[
            ("windows", "amd64", Some("10.0.17763.5830")),
            ("windows", "amd64", Some("10.0.20348.2527")),
            ("linux", "amd64", None),
        ],
    );
    add(
        "contoso/edge:1",
        'd',
        &[("windows", "arm64", Some("10.0.26100.1742"))],
    );
    add(
        "contoso/legacy:1",
        '1',
        &[("windows", "amd64", Some("10.0.17763.5830"))],
    );
    known.insert(
        "registry.example/down:1",
        winadmit::decision::images::Lookup::Unknown("registry.example: connection refused".into()),
    );
    known
}

/// (rule, field, message, severity) of every finding on `yaml` with the
/// registry's facts and, when given, the cluster's Windows nodes.
fn with_facts(
    yaml: &str,
    nodes: Option<&winadmit::decision::cluster::WindowsNodes>,
) -> Vec<(String, String, String, Severity)> {
    let docs = winadmit::input::source::parse(yaml).unwrap();
    let view = ObjectView::deserialize(&docs[0].value).unwrap();
    let known = registry();
    let cx = Context {
        nodes,
        images: Some(&known),
        ..Context::default()
    };
    evaluate(
        &Policy::default_policy(),
        &Workload::from_view(&view).unwrap(),
        &cx,
    )
    .findings
    .into_iter()
    .map(|f| {
        (
            f.rule.to_owned(),
            f.field.to_string(),
            f.message,
            f.severity,
        )
    })
    .collect()
}

fn rules_of(f: &[(String, String, String, Severity)], rule: &str) -> Vec<String> {
    f.iter()
        .filter(|f| f.0 == rule)
        .map(|f| f.1.clone())
        .collect()
}

#[test]
fn registry_facts_win_over_names() {
    let containers = |images: &[&str]| {
        let mut s = "containers:".to_owned();
        for (i, image) in images.iter().enumerate() {
            s.push_str(&format!("\n- name: c{i}\n  image: {image}"));
        }
        s
    };
    // No Windows platform: an error that names the facts.
    let f = with_facts(&windows_pod(&containers(&["nginx:1.27"])), None);
    let linux: Vec<_> = f.iter().filter(|f| f.0 == "WIN-LINUX-IMAGE").collect();
    assert_eq!(linux.len(), 1, "{f:?}");
    assert_eq!(linux[0].3, Severity::Error);
    assert_eq!(
        linux[0].2,
        format!(
            "image nginx:1.27 (sha256:{}...) has platforms linux/amd64, linux/arm64: no Windows variant to pull on the Windows nodes the pod targets",
            "4".repeat(12)
        )
    );
    // Listed by name but Windows by the registry: nothing. A tag word with
    // facts is decided by them: an error without a Windows platform, nothing
    // with one.
    let f = with_facts(
        &windows_pod(&containers(&[
            "busybox:1.36",
            "python:3.12-alpine",
            "contoso/app:1.0-bookworm",
        ])),
        None,
    );
    assert_eq!(
        rules_of(&f, "WIN-LINUX-IMAGE"),
        ["spec.containers[1].image"],
        "{f:?}"
    );
    assert!(rules_of(&f, "WIN-LINUX-IMAGE-TAG").is_empty(), "{f:?}");
    // HostProcess pods too.
    let hp = windows_pod(
        "hostNetwork: true\nsecurityContext:\n  windowsOptions:\n    hostProcess: true\n    runAsUserName: NT AUTHORITY\\SYSTEM\ncontainers:\n- name: web\n  image: nginx:1.27",
    );
    assert_eq!(
        rules_of(&with_facts(&hp, None), "WIN-LINUX-IMAGE"),
        ["spec.containers[0].image"]
    );
}

#[test]
fn windows_only_images_need_windows_nodes() {
    let untargeted = pod("containers:\n- name: api\n  image: contoso/payments:4.2");
    let f = with_facts(&untargeted, None);
    let only: Vec<_> = f
        .iter()
        .filter(|f| f.0 == "WIN-IMAGE-WINDOWS-ONLY")
        .collect();
    assert_eq!(only.len(), 1, "{f:?}");
    assert_eq!(only[0].3, Severity::Error);
    assert!(
        only[0]
            .2
            .contains("has platforms windows/amd64 10.0.20348.2527: only Windows"),
        "{}",
        only[0].2
    );
    // Without facts the same image is not judged by this rule.
    assert!(flagged(&untargeted, "WIN-IMAGE-WINDOWS-ONLY").is_empty());
    let linux =
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeSelector:\n    kubernetes.io/os: linux\n  containers:\n  - name: api\n    image: contoso/payments:4.2".to_owned();
    assert_eq!(
        rules_of(&with_facts(&linux, None), "WIN-IMAGE-WINDOWS-ONLY"),
        ["spec.containers[0].image"]
    );
    // Pinned to Windows, or multi-OS: nothing.
    for yaml in [
        windows_pod("containers:\n- name: api\n  image: contoso/payments:4.2"),
        pod("containers:\n- name: api\n  image: contoso/both:1"),
    ] {
        assert!(
            rules_of(&with_facts(&yaml, None), "WIN-IMAGE-WINDOWS-ONLY").is_empty(),
            "{yaml}"
        );
    }
    // Mixed OS from facts: a Windows-only image beside a Linux-only one.
    let mixed = pod(
        "containers:\n- name: api\n  image: contoso/payments:4.2\n- name: web\n  image: nginx:1.27",
    );
    assert_eq!(
        rules_of(&with_facts(&mixed, None), "WIN-MIXED-OS"),
        ["spec.containers[1].image"]
    );
}

#[test]
fn windows_builds_from_facts() {
    let selects = |build: &str, images: &str| {
        windows_pod(&format!(
            "  node.kubernetes.io/windows-build: '{build}'\n{images}"
        ))
    };
    let both = "containers:\n- name: a\n  image: contoso/both:1";
    // An index with 10.0.17763 and 10.0.20348 matches either selector.
    for build in ["10.0.17763", "10.0.20348"] {
        assert!(
            rules_of(
                &with_facts(&selects(build, both), None),
                "WIN-BUILD-NODE-MISMATCH"
            )
            .is_empty()
        );
    }
    // ...and a Windows Server 2025 selector: its 10.0.20348 entry runs
    // there (the stable container ABI).
    assert!(
        rules_of(
            &with_facts(&selects("10.0.26100", both), None),
            "WIN-BUILD-NODE-MISMATCH"
        )
        .is_empty()
    );
    // An index with 10.0.17763 only does not.
    let legacy = "containers:\n- name: a\n  image: contoso/legacy:1";
    let f = with_facts(&selects("10.0.26100", legacy), None);
    let mismatch: Vec<_> = f
        .iter()
        .filter(|f| f.0 == "WIN-BUILD-NODE-MISMATCH")
        .collect();
    assert_eq!(mismatch.len(), 1, "{f:?}");
    assert!(
        mismatch[0]
            .2
            .contains("has Windows platforms for 10.0.17763 (ltsc2019) only"),
        "{}",
        mismatch[0].2
    );
    // Hyper-V isolation runs older builds: no error.
    let hyperv = selects(
        "10.0.20348",
        "runtimeClassName: hyperv\ncontainers:\n- name: a\n  image: contoso/legacy:1",
    );
    let docs = winadmit::input::source::parse(&hyperv).unwrap();
    let view = ObjectView::deserialize(&docs[0].value).unwrap();
    let known = registry();
    let mut policy = Policy::default_policy();
    policy.params.hyperv_runtime_classes = vec!["hyperv".into()];
    let cx = Context {
        images: Some(&known),
        ..Context::default()
    };
    let eval = evaluate(&policy, &Workload::from_view(&view).unwrap(), &cx);
    assert!(
        !eval
            .findings
            .iter()
            .any(|f| f.rule == "WIN-BUILD-NODE-MISMATCH"),
        "{:?}",
        eval.findings
    );
    assert_eq!(
        rules_of(
            &with_facts(
                &selects(
                    "10.0.20348",
                    "containers:\n- name: a\n  image: contoso/legacy:1"
                ),
                None
            ),
            "WIN-BUILD-NODE-MISMATCH"
        ),
        ["spec.containers[0].image"]
    );
    // Images of one pod must share a build: by facts and names together.
    let shared = windows_pod(
        "containers:\n- name: a\n  image: contoso/both:1\n- name: b\n  image: mcr.microsoft.com/windows/nanoserver:ltsc2022",
    );
    assert!(rules_of(&with_facts(&shared, None), "WIN-BUILD-MIXED").is_empty());
    let apart = windows_pod(
        "containers:\n- name: a\n  image: contoso/legacy:1\n- name: b\n  image: contoso/payments:4.2",
    );
    assert_eq!(
        rules_of(&with_facts(&apart, None), "WIN-BUILD-MIXED"),
        ["spec.containers[1].image"]
    );
    // The cluster's nodes: no node has any of the image's builds.
    let ltsc2022 = nodes(&[("win-1", "10.0.20348", "v1.31.0", "containerd://1.7.22")]);
    let legacy = windows_pod("containers:\n- name: a\n  image: contoso/legacy:1");
    assert_eq!(
        rules_of(&with_facts(&legacy, Some(&ltsc2022)), "WIN-BUILD-NO-NODE"),
        ["spec.containers[0].image"]
    );
    assert!(
        rules_of(
            &with_facts(&windows_pod(both), Some(&ltsc2022)),
            "WIN-BUILD-NO-NODE"
        )
        .is_empty()
    );
}

#[test]
fn an_unknown_fact_is_said_and_falls_back_to_the_name() {
    let yaml = windows_pod(
        "containers:\n- name: a\n  image: registry.example/down:1\n- name: web\n  image: nginx:1.26",
    );
    let f = with_facts(&yaml, None);
    let unknown: Vec<_> = f
        .iter()
        .filter(|f| f.0 == "WIN-IMAGE-FACTS-UNKNOWN")
        .collect();
    assert_eq!(unknown.len(), 1, "{f:?}");
    assert_eq!(unknown[0].3, Severity::Info);
    assert!(
        unknown[0].2.contains("connection refused"),
        "{}",
        unknown[0].2
    );
    // nginx:1.26 has no facts: its name decides, as before.
    assert_eq!(
        rules_of(&f, "WIN-LINUX-IMAGE"),
        ["spec.containers[1].image"]
    );
}

/// The mutation pins a pod whose images have only Windows platforms (by
/// their registry's facts) to Windows nodes, whatever `inferFromImages`
/// says, and its reason names the facts; after the patch nothing is denied.
#[test]
fn the_patch_pins_windows_only_images_by_their_facts() {
    use winadmit::decision::decide::{PatchSource, Request, Verdict, decide};
    let yaml = pod("containers:\n- name: api\n  image: contoso/payments:4.2");
    let docs = winadmit::input::source::parse(&yaml).unwrap();
    let value = docs[0].value.clone();
    let view = ObjectView::deserialize(&value).unwrap();
    let workload = Workload::from_view(&view).unwrap();
    let known = registry();
    let policy = Policy::default_policy();
    assert!(!policy.mutation.infer_from_images);
    let cx = Context {
        images: Some(&known),
        ..Context::default()
    };
    let decision = decide(
        &policy,
        &cx,
        &workload,
        &Request::manifest(PatchSource::Preview(&value)),
    );
    assert_eq!(decision.validation, Verdict::Deny);
    let paths: Vec<String> = decision
        .patch
        .ops
        .iter()
        .map(|op| op.path().as_str().to_owned())
        .collect();
    assert_eq!(paths, ["/spec/nodeSelector"], "{:?}", decision.patch);
    assert!(
        decision.patch.explanations[0].contains(
            "image contoso/payments:4.2 (sha256:eeeeeeeeeeee...) has platforms windows/amd64 10.0.20348.2527: only Windows"
        ),
        "{:?}",
        decision.patch.explanations
    );
    assert_eq!(
        decision.verdict,
        Verdict::Warn,
        "the patched pod is allowed"
    );
    // Without facts the name decides: no pin (inferFromImages is off).
    let plain = decide(
        &policy,
        &Context::default(),
        &workload,
        &Request::manifest(PatchSource::Preview(&value)),
    );
    assert!(plain.patch.is_empty(), "{:?}", plain.patch);
}

/// The patch of `pod_yaml` under `policy` (YAML layered over the default)
/// with the cluster's Windows nodes `nodes` (Node objects) when given: the
/// paths and values it adds, and the rules found.
fn pinned(policy: &str, pod_yaml: &str, nodes: Option<&str>) -> (Vec<String>, Vec<String>) {
    use winadmit::decision::decide::{PatchSource, Request, decide};
    let docs = winadmit::input::source::parse(pod_yaml).unwrap();
    let value = docs[0].value.clone();
    let view = ObjectView::deserialize(&value).unwrap();
    let workload = Workload::from_view(&view).unwrap();
    let policy = Policy::from_yaml("p.yaml", policy).unwrap();
    let mut known = winadmit::decision::cluster::ClusterObjects::default();
    for node in nodes
        .map(|n| winadmit::input::source::parse(n).unwrap())
        .unwrap_or_default()
    {
        known.learn(&node.value);
    }
    let cx = Context {
        nodes: (!known.nodes.is_empty()).then_some(&known.nodes),
        ..Context::default()
    };
    let decision = decide(
        &policy,
        &cx,
        &workload,
        &Request::manifest(PatchSource::Preview(&value)),
    );
    let ops = decision
        .patch
        .ops
        .iter()
        .map(|op| serde_json::to_value(op).unwrap())
        .map(|op| format!("{} {}", op["path"].as_str().unwrap(), op["value"]))
        .collect();
    let rules = decision
        .evaluation
        .findings
        .iter()
        .map(|f| f.rule.to_owned())
        .collect();
    (ops, rules)
}

const WIN22_NODE: &str = "apiVersion: v1\nkind: Node\nmetadata:\n  name: win22-1\n  labels: {kubernetes.io/os: windows}\n";

/// By default a pod that selects no OS is pinned to the only OS its images
/// can run on: Windows for a name that can only be Windows, Linux for
/// images without a Windows variant once the cluster has Windows nodes. A
/// name that only looks Windows is a warning; the policy can make both
/// sides warn only.
#[test]
fn certain_images_pin_their_os_by_default() {
    let iis = pod(
        "containers:\n- name: iis\n  image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
    );
    let (ops, rules) = pinned("", &iis, None);
    assert_eq!(
        ops,
        [r#"/spec/nodeSelector {"kubernetes.io/os":"windows"}"#],
        "{rules:?}"
    );
    let tagged = pod("containers:\n- name: py\n  image: python:3.12-windowsservercore-ltsc2022");
    assert_eq!(pinned("", &tagged, None).0.len(), 1);
    // Only looks Windows: the warning, no selector.
    let looks = pod("containers:\n- name: t\n  image: contoso/servercore-tools:1.0");
    let (ops, rules) = pinned("", &looks, None);
    assert!(ops.is_empty(), "{ops:?}");
    assert!(
        rules.contains(&"WIN-UNPINNED-IMAGE".to_owned()),
        "{rules:?}"
    );
    // A certain image beside one without a Windows variant: not pinned.
    let mixed = pod(
        "containers:\n- name: iis\n  image: mcr.microsoft.com/windows/servercore/iis\n- name: web\n  image: nginx:1.27",
    );
    assert!(pinned("", &mixed, None).0.is_empty());
    // Warn only.
    let (ops, rules) = pinned("mutation: {pinWindowsImages: false}\n", &iis, None);
    assert!(ops.is_empty(), "{ops:?}");
    assert!(rules.contains(&"WIN-UNPINNED-IMAGE".to_owned()));

    // The Linux side needs Windows nodes.
    let nginx =
        pod("tolerations:\n- operator: Exists\ncontainers:\n- name: web\n  image: nginx:1.27");
    let (ops, rules) = pinned("", &nginx, None);
    assert!(ops.is_empty() && rules.is_empty(), "{ops:?} {rules:?}");
    let (ops, rules) = pinned("", &nginx, Some(WIN22_NODE));
    assert_eq!(ops, [r#"/spec/nodeSelector {"kubernetes.io/os":"linux"}"#]);
    assert_eq!(rules, ["WIN-LINUX-UNPINNED"]);
    let (ops, rules) = pinned(
        "mutation: {pinLinuxImages: false}\n",
        &nginx,
        Some(WIN22_NODE),
    );
    assert!(ops.is_empty());
    assert_eq!(rules, ["WIN-LINUX-UNPINNED"]);
    // Not only Linux images (python publishes Windows variants), or pinned
    // already: nothing.
    let python =
        pod("containers:\n- name: web\n  image: nginx:1.27\n- name: app\n  image: python:3.12");
    assert_eq!(pinned("", &python, Some(WIN22_NODE)), (vec![], vec![]));
    let pinned_linux = linux_pod("containers:\n- name: web\n  image: nginx:1.27");
    assert!(pinned("", &pinned_linux, Some(WIN22_NODE)).0.is_empty());
}

/// The warnings `/mutate` returns for each OS pin keep the OS: the pin's
/// text is cut to its first clause when the whole is too long for a
/// warning, and that clause ends after the label's value
/// (`kubernetes.io/os=windows`), never at the `: ` of a `key: value`.
#[test]
fn pin_warnings_name_the_os() {
    use winadmit::decision::decide::{PatchSource, Request, decide};
    let warnings = |yaml: &str, cx: &Context<'_>| {
        let docs = winadmit::input::source::parse(yaml).unwrap();
        let value = docs[0].value.clone();
        let view = ObjectView::deserialize(&value).unwrap();
        let workload = Workload::from_view(&view).unwrap();
        decide(
            &Policy::default_policy(),
            cx,
            &workload,
            &Request::manifest(PatchSource::Preview(&value)),
        )
        .patch_warnings()
    };
    let deployment = |image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: iis\nspec:\n  selector: {{matchLabels: {{app: iis}}}}\n  template:\n    metadata: {{labels: {{app: iis}}}}\n    spec:\n      tolerations:\n      - operator: Exists\n      containers:\n      - name: iis\n        image: {image}\n"
        )
    };
    let known = registry();
    let mut nodes = winadmit::decision::cluster::ClusterObjects::default();
    nodes.learn(&winadmit::input::source::parse(WIN22_NODE).unwrap()[0].value);
    let by_facts = Context {
        images: Some(&known),
        ..Context::default()
    };
    let with_windows_nodes = Context {
        nodes: Some(&nodes.nodes),
        ..Context::default()
    };
    let cases = [
        (
            "a name that can only be Windows",
            deployment("mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"),
            &Context::default(),
            "WIN-UNPINNED-IMAGE",
            "kubernetes.io/os=windows",
        ),
        (
            "registry facts: only Windows",
            deployment("contoso/payments:4.2"),
            &by_facts,
            "WIN-IMAGE-WINDOWS-ONLY",
            "kubernetes.io/os=windows",
        ),
        (
            "Linux-only images, Windows nodes in the cluster",
            deployment("docker.io/fluent/fluent-bit:3.2.10-debug"),
            &with_windows_nodes,
            "WIN-LINUX-UNPINNED",
            "kubernetes.io/os=linux",
        ),
    ];
    for (case, yaml, cx, rule, selector) in cases {
        let w = warnings(&yaml, cx);
        let pin: Vec<&String> = w.iter().filter(|w| w.starts_with(rule)).collect();
        assert_eq!(pin.len(), 1, "{case}: {w:#?}");
        assert!(
            pin[0].contains(&format!("add nodeSelector {selector}")),
            "{case}: the warning lost the OS: {:?}",
            pin[0]
        );
        for line in &w {
            assert!(!line.ends_with("kubernetes.io/os"), "{case}: {line:?}");
        }
    }
}
