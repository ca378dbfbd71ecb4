//! `winadmit admission-policy`: the exported CEL agrees with the engine.
//!
//! The CEL is evaluated with the `cel` crate, with the few Kubernetes CEL
//! library functions the export uses implemented here (`indexOf` on lists,
//! `join`, and the string functions `trim`, `lowerAscii`, `replace`,
//! `split`, `lastIndexOf` and `substring`). For every corpus object and a
//! set of generated pods, at the default target and at Kubernetes 1.19 with
//! Docker, the exported validations must deny exactly the fields the engine
//! reports as errors and warn exactly on its warnings, rule by rule, for the
//! exported rules; the rules the command lists as not exported are left out
//! by that same list.
//! The exported mutation, applied in order, must give the engine's settled
//! patch for the same rules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cel::objects::Value as CelValue;
use cel::{Context, Env, Program};
use serde::Deserialize as _;
use serde_json::{Value, json};
use winadmit::decision::admission_policy::{self, Validation};
use winadmit::decision::cluster::{Runtime, Source, TargetCluster};
use winadmit::decision::engine::{self, Context as EngineContext};
use winadmit::decision::finding::Severity;
use winadmit::decision::patch::{self, MutationContext};
use winadmit::decision::policy::{Mode, Policy};
use winadmit::decision::version::KubeVersion;
use winadmit::decision::view::ObjectView;
use winadmit::decision::workload::{Kind, Workload};

use crate::controlplane;
use crate::corpus_dir as corpus_location;

/// The CEL environment: the standard library plus the Kubernetes functions
/// the export uses.
fn env() -> Arc<Env> {
    Arc::new(Env::stdlib())
}

fn context(env: &Arc<Env>) -> Context<'static, 'static> {
    let mut cx = Context::with_env(env.clone());
    cx.add_function(
        "indexOf",
        |cel::extractors::This(list): cel::extractors::This<Arc<Vec<CelValue>>>,
         item: CelValue|
         -> i64 {
            list.iter()
                .position(|x| *x == item)
                .map_or(-1, |i| i64::try_from(i).unwrap())
        },
    )
    .unwrap();
    cx.add_function(
        "join",
        |cel::extractors::This(list): cel::extractors::This<Arc<Vec<CelValue>>>,
         sep: Arc<String>|
         -> String {
            list.iter()
                .map(|v| match v {
                    CelValue::String(s) => s.as_str().to_owned(),
                    other => panic!("join of a non-string {other:?}"),
                })
                .collect::<Vec<_>>()
                .join(&sep)
        },
    )
    .unwrap();
    cx.add_function(
        "trim",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| -> String {
            s.trim().to_owned()
        },
    )
    .unwrap();
    cx.add_function(
        "lowerAscii",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| -> String {
            s.to_ascii_lowercase()
        },
    )
    .unwrap();
    cx.add_function(
        "replace",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>,
         from: Arc<String>,
         to: Arc<String>|
         -> String { s.replace(from.as_str(), &to) },
    )
    .unwrap();
    cx.add_function(
        "split",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>,
         sep: Arc<String>|
         -> CelValue {
            CelValue::List(Arc::new(
                s.split(sep.as_str())
                    .map(|p| CelValue::String(Arc::new(p.to_owned())))
                    .collect(),
            ))
        },
    )
    .unwrap();
    // Code points, as the Kubernetes string library counts.
    cx.add_function(
        "lastIndexOf",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>,
         needle: Arc<String>|
         -> i64 {
            let chars: Vec<char> = s.chars().collect();
            let n: Vec<char> = needle.chars().collect();
            (0..=chars.len().saturating_sub(n.len()))
                .rev()
                .find(|&i| chars.len() >= n.len() && chars[i..i + n.len()] == n[..])
                .map_or(-1, |i| i64::try_from(i).unwrap())
        },
    )
    .unwrap();
    cx.add_function(
        "substring",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>,
         start: i64,
         end: i64|
         -> String {
            let (start, end) = (
                usize::try_from(start).unwrap(),
                usize::try_from(end).unwrap(),
            );
            s.chars().skip(start).take(end - start).collect()
        },
    )
    .unwrap();
    cx
}

fn compile(env: &Env, source: &str) -> Program {
    // `JSONPatch{op: ..., path: ..., value: ...}` as a map, for the test.
    let source = if source.contains("JSONPatch{") {
        source
            .replace("JSONPatch{op: ", "{'op': ")
            .replace(", path: ", ", 'path': ")
            .replace(", value: ", ", 'value': ")
    } else {
        source.to_owned()
    };
    env.compile(&source)
        .unwrap_or_else(|e| panic!("CEL does not compile: {e:?}\n{source}"))
}

/// The exported policy, compiled.
struct Compiled {
    env: Arc<Env>,
    variables: Vec<(&'static str, Program)>,
    conditions: Vec<(&'static str, Program)>,
    mutation_conditions: Vec<(&'static str, Program)>,
    validations: Vec<(Validation, Program, Program)>,
    mutations: Vec<(&'static str, Program)>,
}

fn compiled(policy: &Policy, cluster: &TargetCluster) -> Compiled {
    let env = env();
    let (validations, _gaps) = admission_policy::validations(policy, cluster);
    Compiled {
        variables: admission_policy::variables(policy)
            .into_iter()
            .map(|(n, e)| (n, compile(&env, &e)))
            .collect(),
        conditions: admission_policy::match_conditions(policy, cluster)
            .into_iter()
            .map(|(n, e)| (n, compile(&env, &e)))
            .collect(),
        mutation_conditions: admission_policy::mutation_match_conditions(policy, cluster)
            .into_iter()
            .map(|(n, e)| (n, compile(&env, &e)))
            .collect(),
        mutations: policy
            .mutation
            .inject_node_selector
            .then(|| {
                (
                    "nodeSelector",
                    compile(&env, admission_policy::NODE_SELECTOR),
                )
            })
            .into_iter()
            .chain(
                validations
                    .iter()
                    .filter_map(|v| v.removals.as_ref().map(|r| (v.rule, compile(&env, r)))),
            )
            .collect(),
        validations: validations
            .into_iter()
            .map(|v| {
                let e = compile(&env, &v.expression);
                let m = compile(&env, &v.message_expression);
                (v, e, m)
            })
            .collect(),
        env,
    }
}

/// Field paths by rule.
type Paths = BTreeMap<String, BTreeSet<String>>;

#[derive(Debug, Default, PartialEq)]
struct Outcome {
    matched: bool,
    deny: Paths,
    warn: Paths,
}

fn to_json(v: &CelValue) -> Value {
    v.json().unwrap_or_else(|e| panic!("not JSON: {e:?}"))
}

impl Compiled {
    /// The context with `object`, `request` and the policy's variables.
    fn bind(&self, object: &Value) -> Option<Context<'static, 'static>> {
        self.bind_with(&self.conditions, object)
    }

    fn bind_with(
        &self,
        conditions: &[(&'static str, Program)],
        object: &Value,
    ) -> Option<Context<'static, 'static>> {
        let mut cx = context(&self.env);
        cx.add_variable_from_value("object", cel::to_value(object).unwrap());
        cx.add_variable_from_value(
            "request",
            cel::to_value(json!({"userInfo": {"username": "someone", "groups": []}})).unwrap(),
        );
        for (name, cond) in conditions {
            match cond.execute(&cx) {
                Ok(CelValue::Bool(true)) => {}
                Ok(CelValue::Bool(false)) => return None,
                other => panic!("matchCondition {name}: {other:?} on {object}"),
            }
        }
        let mut vars = serde_json::Map::new();
        for (name, program) in &self.variables {
            let value = program
                .execute(&cx)
                .unwrap_or_else(|e| panic!("variable {name}: {e:?} on {object}"));
            vars.insert((*name).to_owned(), to_json(&value));
            cx.add_variable_from_value(
                "variables",
                cel::to_value(Value::Object(vars.clone())).unwrap(),
            );
        }
        Some(cx)
    }

    fn outcome(&self, object: &Value) -> Outcome {
        let Some(cx) = self.bind(object) else {
            return Outcome::default();
        };
        let mut out = Outcome {
            matched: true,
            ..Outcome::default()
        };
        for (v, expr, msg) in &self.validations {
            match expr.execute(&cx) {
                Ok(CelValue::Bool(true)) => continue,
                Ok(CelValue::Bool(false)) => {}
                other => panic!("{}: {other:?}\n{}\non {object}", v.rule, v.expression),
            }
            let message = match msg.execute(&cx) {
                Ok(CelValue::String(s)) => s.as_str().to_owned(),
                other => panic!("{} message: {other:?}", v.rule),
            };
            assert!(
                !message.contains('\n') && !message.trim().is_empty(),
                "the API server ignores empty or multi-line messages: {message:?}"
            );
            let (paths, _) = message
                .split_once(": ")
                .unwrap_or_else(|| panic!("{message}"));
            let set: BTreeSet<String> = paths.split(", ").map(str::to_owned).collect();
            assert!(
                message.contains(&format!("({})", v.rule)),
                "the message names the rule: {message}"
            );
            let to = if v.severity == Severity::Error {
                &mut out.deny
            } else {
                &mut out.warn
            };
            to.insert(v.rule.to_owned(), set);
        }
        out
    }

    /// The object after the exported mutation (JSON Patch removals).
    /// The mutations apply in order, each to the object the previous one
    /// produced (as the API server applies a MutatingAdmissionPolicy's
    /// mutations), so a removal can see what an earlier one left.
    fn mutate(&self, object: &Value) -> Value {
        let mut doc = object.clone();
        if self.bind_with(&self.mutation_conditions, object).is_none() {
            return doc;
        }
        for (rule, program) in &self.mutations {
            let cx = self.bind_with(&[], &doc).unwrap();
            let ops = to_json(
                &program
                    .execute(&cx)
                    .unwrap_or_else(|e| panic!("{rule} mutation: {e:?}")),
            );
            let patch: json_patch::Patch = serde_json::from_value(ops).unwrap();
            json_patch::patch(&mut doc, &patch).unwrap_or_else(|e| panic!("{rule}: {e}"));
        }
        doc
    }
}

/// What the engine says, restricted to the exported rules.
fn engine_outcome(
    policy: &Policy,
    cluster: &TargetCluster,
    exported: &BTreeSet<&str>,
    doc: &Value,
) -> Option<Outcome> {
    let view = ObjectView::deserialize(doc).ok()?;
    let workload = Workload::from_view(&view)?;
    if workload.kind == Kind::PodTemplate || workload.spec.is_none() {
        return None;
    }
    let cx = EngineContext {
        cluster: cluster.clone(),
        runtime_classes: None,
        nodes: None,
        images: None,
        gmsa: None,
        exceptions: None,
    };
    let eval = engine::evaluate(policy, &workload, &cx);
    let mut out = Outcome {
        matched: eval.target.is_windows(),
        ..Outcome::default()
    };
    for f in &eval.findings {
        if !exported.contains(f.rule) {
            continue;
        }
        // Rules for any pod are exported for Windows-targeted pods only
        // (listed as partly exported by the command).
        let rule = winadmit::decision::rules::find(f.rule).unwrap();
        if rule.info.scope == winadmit::decision::rules::Scope::Any && !out.matched {
            continue;
        }
        let to = match f.severity {
            Severity::Error => &mut out.deny,
            Severity::Warning => &mut out.warn,
            _ => continue,
        };
        to.entry(f.rule.to_owned())
            .or_default()
            .insert(f.field.to_string());
    }
    Some(out)
}

/// The engine's settled patch, restricted to what the export mutates: the
/// node selector and the removals.
fn engine_mutated(policy: &Policy, cluster: &TargetCluster, doc: &Value) -> Value {
    let cx = EngineContext {
        cluster: cluster.clone(),
        runtime_classes: None,
        nodes: None,
        images: None,
        gmsa: None,
        exceptions: None,
    };
    let m = patch::settle(
        policy,
        &cx,
        MutationContext {
            create: true,
            namespace_isolation: None,
            psa_restricted_before_1_25: false,
            images: None,
            nodes: None,
        },
        doc,
        None,
        &|op| {
            matches!(
                op,
                winadmit::decision::finding::PatchOperation::Remove { .. }
            ) || op.path().as_str().ends_with("/nodeSelector")
                || op
                    .path()
                    .as_str()
                    .ends_with("/nodeSelector/kubernetes.io~1os")
        },
    );
    let mut out = doc.clone();
    patch::apply(&mut out, &m.ops).unwrap();
    out
}

fn targets() -> Vec<(&'static str, TargetCluster)> {
    vec![
        ("default", TargetCluster::default()),
        (
            "1.19+docker",
            TargetCluster::at(KubeVersion::new(1, 19)).with_runtime(Runtime::Docker, Source::Flag),
        ),
    ]
}

/// Runs `f` on a thread with a large stack: the `cel` crate's parser and
/// interpreter recurse deeply on the long exported expressions.
fn big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

fn check_docs(label: &'static str, docs: Vec<(String, Value)>) {
    big_stack(move || check_docs_here(label, &docs));
}

fn check_docs_here(label: &str, docs: &[(String, Value)]) {
    let policy = Policy::default_policy();
    // The exported policies leave pinning to Linux by images to the
    // webhook (`winadmit admission-policy` lists mutation.pinLinuxImages as
    // not exported: it needs the cluster's Windows nodes): compare with an
    // engine that does not pin to Linux either. Pinning to Windows is
    // exported and compared.
    let mut unexported_pins = policy.clone();
    unexported_pins.mutation.pin_linux_images = false;
    for (target, cluster) in targets() {
        let c = compiled(&policy, &cluster);
        let exported: BTreeSet<&str> = c.validations.iter().map(|(v, _, _)| v.rule).collect();
        let mut checked = 0;
        let (mut denied, mut warned, mut mutated) = (0, 0, 0);
        for (name, doc) in docs {
            let Some(expected) = engine_outcome(&policy, &cluster, &exported, doc) else {
                continue;
            };
            checked += 1;
            let got = c.outcome(doc);
            denied += usize::from(!got.deny.is_empty());
            warned += usize::from(!got.warn.is_empty());
            assert_eq!(
                got, expected,
                "{label} {target}: {name}: exported CEL (left) vs engine (right)"
            );
            // Mutation: the exported removals give the engine's removals.
            let mut mine = c.mutate(doc);
            let mut theirs = engine_mutated(&unexported_pins, &cluster, doc);
            for d in [&mut mine, &mut theirs] {
                strip_unexported_removals(d);
            }
            mutated += usize::from(&mine != doc);
            assert_eq!(
                mine, theirs,
                "{label} {target}: {name}: exported mutation (left) vs engine (right)"
            );
        }
        eprintln!(
            "{label} {target}: {checked} objects, {denied} denied, {warned} warned, {mutated} mutated"
        );
        assert!(
            denied > 0 && warned > 0 && mutated > 0,
            "{label} {target}: the comparison must cover denials, warnings and mutations"
        );
    }
}

/// Nothing to strip yet: every removal the engine makes by default comes
/// from an exported rule. Kept as the one place to say otherwise.
fn strip_unexported_removals(_doc: &mut Value) {}

#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn corpus_agrees_with_the_engine() {
    let dir = corpus_location::corpus_dir("corpus_agrees_with_the_engine");
    let mut docs = Vec::new();
    let files = corpus_location::manifests(&dir);
    for path in &files {
        docs.extend(load(path));
    }
    assert!(docs.len() > 50, "corpus objects: {}", docs.len());
    check_docs("corpus", docs);
}

fn load(path: &Path) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let Ok(values) = winadmit::input::yaml::load(
        &text,
        winadmit::input::yaml::ParseLimits::for_len(text.len()),
    ) else {
        return Vec::new();
    };
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| (format!("{name}#{}", i + 1), v))
        .collect()
}

/// One setting per entry: (where, JSON to merge there).
fn features() -> Vec<(&'static str, Value)> {
    vec![
        ("pod", json!({"hostNetwork": true})),
        ("pod", json!({"hostPID": true})),
        ("pod", json!({"hostIPC": true})),
        ("pod", json!({"shareProcessNamespace": true})),
        ("pod", json!({"shareProcessNamespace": false})),
        ("pod", json!({"resources": {"limits": {"cpu": "1"}}})),
        ("pod", json!({"hostUsers": false})),
        ("pod", json!({"dnsPolicy": "ClusterFirstWithHostNet"})),
        ("pod", json!({"os": {"name": "windows"}})),
        ("podsc", json!({"runAsUser": 1000, "runAsGroup": 1000})),
        (
            "podsc",
            json!({"fsGroup": 1, "fsGroupChangePolicy": "Always"}),
        ),
        (
            "podsc",
            json!({"supplementalGroups": [1], "supplementalGroupsPolicy": "Merge"}),
        ),
        (
            "podsc",
            json!({"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]}),
        ),
        ("podsc", json!({"seLinuxOptions": {"level": "s0"}})),
        ("podsc", json!({"seccompProfile": {"type": "Unconfined"}})),
        (
            "podsc",
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
        ),
        (
            "podsc",
            json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
        ),
        (
            "podsc",
            json!({"windowsOptions": {"hostProcess": true, "runAsUserName": "NT AUTHORITY\\SYSTEM"}}),
        ),
        ("sc", json!({"privileged": true})),
        ("sc", json!({"privileged": false})),
        ("sc", json!({"runAsUser": 0})),
        ("sc", json!({"capabilities": {"add": ["NET_ADMIN"]}})),
        ("sc", json!({"capabilities": {"drop": ["ALL"]}})),
        ("sc", json!({"allowPrivilegeEscalation": true})),
        ("sc", json!({"allowPrivilegeEscalation": false})),
        ("sc", json!({"procMount": "Unmasked"})),
        ("sc", json!({"procMount": "Default"})),
        ("sc", json!({"readOnlyRootFilesystem": true})),
        ("sc", json!({"readOnlyRootFilesystem": false})),
        (
            "sc",
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}),
        ),
        ("sc", json!({"seLinuxOptions": {"user": "u"}})),
        ("sc", json!({"appArmorProfile": {"type": "Unconfined"}})),
        ("sc", json!({"windowsOptions": {"hostProcess": true}})),
        ("sc", json!({"windowsOptions": {"hostProcess": false}})),
        (
            "container",
            json!({"volumeDevices": [{"name": "b", "devicePath": "/dev/xvda"}]}),
        ),
        (
            "container",
            json!({"resources": {"limits": {"hugepages-2Mi": "1Gi"}, "requests": {"hugepages-1Gi": "1Gi"}}}),
        ),
        (
            "container",
            json!({"volumeMounts": [{"name": "v", "mountPath": "C:\\a", "subPath": "a"}]}),
        ),
        (
            "container",
            json!({"volumeMounts": [{"name": "v", "mountPath": "C:\\a", "subPath": "a"}, {"name": "v", "mountPath": "C:\\b", "subPathExpr": "$(X)"}, {"name": "v", "mountPath": "C:\\c", "subPath": ""}]}),
        ),
        (
            "container",
            json!({"volumeMounts": [{"name": "v", "mountPath": "C:\\a", "mountPropagation": "HostToContainer"}, {"name": "v", "mountPath": "C:\\b", "mountPropagation": "None"}]}),
        ),
        (
            "volumes",
            json!([{"name": "v", "emptyDir": {"medium": "Memory"}}, {"name": "n", "nfs": {"server": "s", "path": "/"}}, {"name": "h", "emptyDir": {"medium": "HugePages-2Mi"}}]),
        ),
        (
            "annotations",
            json!({"container.apparmor.security.beta.kubernetes.io/app": "runtime/default"}),
        ),
        (
            "annotations",
            json!({"experimental.windows.kubernetes.io/isolation-type": "hyperv"}),
        ),
        (
            "pod",
            json!({"dnsConfig": {"searches": ["a.svc", "b.svc"]}}),
        ),
        ("podsc", json!({"runAsNonRoot": true})),
        (
            "pod",
            json!({"nodeSelector": {"kubernetes.io/os": "linux", "beta.kubernetes.io/os": "linux"}}),
        ),
        ("pod", json!({"os": {"name": "linux"}})),
        (
            "pod",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}}),
        ),
        (
            "volumes",
            json!([
                {"name": "a", "hostPath": {"path": "/proc"}},
                {"name": "b", "hostPath": {"path": "/processes"}},
                {"name": "c", "hostPath": {"path": "/var/lib/docker/"}},
                {"name": "d", "hostPath": {"path": "/var/run/docker.sock", "type": "Socket"}},
                {"name": "e", "hostPath": {"path": "\\\\.\\pipe\\containerd", "type": "Socket"}},
                {"name": "f", "hostPath": {"path": "C:\\k", "type": "CharDevice"}},
                {"name": "g", "hostPath": {"path": "/dev/sda", "type": "BlockDevice"}}
            ]),
        ),
        (
            "podsc",
            json!({"runAsNonRoot": true, "windowsOptions": {"runAsUserName": "containeradministrator"}}),
        ),
        (
            "sc",
            json!({"runAsNonRoot": true, "windowsOptions": {"runAsUserName": "ContainerAdministrator"}}),
        ),
        ("sc", json!({"runAsNonRoot": false})),
        (
            "sc",
            json!({"windowsOptions": {"hostProcess": true, "runAsUserName": "NT AUTHORITY\\Local service"}}),
        ),
        (
            "annotations",
            json!({"winadmit.io/skip.WIN-HOSTNETWORK": "the CNI needs it", "winadmit.io/skip.WIN-PRIVILEGED": " "}),
        ),
    ]
}

fn merge(target: &mut Value, add: &Value) {
    if let (Some(t), Some(a)) = (target.as_object_mut(), add.as_object()) {
        for (k, v) in a {
            t.insert(k.clone(), v.clone());
        }
    } else {
        *target = add.clone();
    }
}

/// A Windows pod with an init container and two containers, `which` of
/// them (0..3) carrying the container-level feature.
fn pod(features: &[&(&'static str, Value)], which: usize, selector: bool) -> Value {
    let mut spec = json!({
        "initContainers": [{"name": "init", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022"}],
        "containers": [
            {"name": "a", "image": "mcr.microsoft.com/windows/servercore:ltsc2022"},
            {"name": "b", "image": "mcr.microsoft.com/windows/servercore:ltsc2022"}
        ]
    });
    if selector {
        spec["nodeSelector"] = json!({"kubernetes.io/os": "windows"});
    }
    let mut annotations = json!({});
    for (place, value) in features {
        match *place {
            "pod" => merge(&mut spec, value),
            "podsc" => merge(
                spec.as_object_mut()
                    .unwrap()
                    .entry("securityContext")
                    .or_insert(json!({})),
                value,
            ),
            "volumes" => spec["volumes"] = value.clone(),
            "annotations" => merge(&mut annotations, value),
            "sc" | "container" => {
                let c = if which == 0 {
                    &mut spec["initContainers"][0]
                } else {
                    &mut spec["containers"][which - 1]
                };
                if *place == "sc" {
                    merge(
                        c.as_object_mut()
                            .unwrap()
                            .entry("securityContext")
                            .or_insert(json!({})),
                        value,
                    );
                } else {
                    merge(c, value);
                }
            }
            other => unreachable!("{other}"),
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": annotations}, "spec": spec})
}

#[test]
fn generated_pods_agree_with_the_engine() {
    let all = features();
    let mut docs = Vec::new();
    for (i, f) in all.iter().enumerate() {
        for which in 0..3 {
            docs.push((
                format!("feature {i} in container {which}"),
                pod(&[f], which, true),
            ));
        }
        // With spec.os.name too (the API server's forbidden list).
        let os = ("pod", json!({"os": {"name": "windows"}}));
        docs.push((format!("feature {i} with os"), pod(&[f, &os], 2, false)));
    }
    let every: Vec<&(&str, Value)> = all.iter().collect();
    docs.push(("every feature".into(), pod(&every, 1, true)));
    // As a Deployment and a CronJob: paths under the template.
    let p = pod(&every, 2, true);
    docs.push((
        "deployment".into(),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"template": {"metadata": p["metadata"], "spec": p["spec"]}}}),
    ));
    docs.push((
        "cronjob".into(),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
               "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"metadata": p["metadata"], "spec": p["spec"]}}}}}),
    ));
    // A Linux pod: not matched.
    docs.push((
        "linux".into(),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "l"},
               "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "hostNetwork": true, "containers": [{"name": "a", "image": "nginx"}]}}),
    ));
    check_docs("generated", docs);
}

#[test]
fn strict_stance_denies_intent_lost_fields() {
    big_stack(strict_stance);
}

fn strict_stance() {
    let policy = Policy::default_policy();
    let mut cluster = TargetCluster::default();
    cluster.stance = winadmit::decision::cluster::Stance::Strict;
    let c = compiled(&policy, &cluster);
    let doc = pod(&[&("sc", json!({"privileged": true}))], 1, true);
    let got = c.outcome(&doc);
    assert_eq!(
        got.deny
            .get("WIN-PRIVILEGED")
            .map(|s| s.iter().cloned().collect::<Vec<_>>()),
        Some(vec![
            "spec.containers[0].securityContext.privileged".to_owned()
        ])
    );
    // Strict keeps the field for validation to see.
    assert_eq!(c.mutate(&doc), doc);
}

#[test]
fn export_shape() {
    let policy = Policy::default_policy();
    let e = admission_policy::export(&policy, &TargetCluster::default(), Some(Mode::Warn), true)
        .unwrap();
    let kinds: Vec<(&str, &str)> = e
        .documents
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("ValidatingAdmissionPolicy", "winadmit-errors")),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("ValidatingAdmissionPolicy", "winadmit-warnings")),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("MutatingAdmissionPolicy", "winadmit-mutate")),
        "{kinds:?}"
    );
    for d in &e.documents {
        assert!(
            d["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("winadmit-")
        );
        assert!(d["metadata"]["labels"]["winadmit.io/policy-hash"].is_string());
    }
    // --mode warn: the default binding warns on errors; labelled namespaces keep their mode.
    let default = e
        .documents
        .iter()
        .find(|d| d["metadata"]["name"] == "winadmit-errors-default")
        .unwrap();
    assert_eq!(default["spec"]["validationActions"], json!(["Warn"]));
    let enforce = e
        .documents
        .iter()
        .find(|d| d["metadata"]["name"] == "winadmit-errors-ns-enforce")
        .unwrap();
    assert_eq!(enforce["spec"]["validationActions"], json!(["Deny"]));
    // API versions by target.
    let at = |v: u16| {
        admission_policy::export(
            &policy,
            &TargetCluster::at(KubeVersion::new(1, v)),
            None,
            true,
        )
        .map(|e| {
            e.documents
                .iter()
                .filter(|d| d["kind"] == "MutatingAdmissionPolicy")
                .map(|d| d["apiVersion"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(at(36).unwrap(), ["admissionregistration.k8s.io/v1"]);
    assert_eq!(at(34).unwrap(), ["admissionregistration.k8s.io/v1beta1"]);
    assert!(at(33).unwrap().is_empty());
    assert!(at(29).is_err());
    // Every rule is either exported or listed, never both silently dropped.
    let (validations, _) = admission_policy::validations(&policy, &TargetCluster::default());
    let gmsa = admission_policy::gmsa::rules(&policy, &TargetCluster::default());
    for r in winadmit::decision::rules::ALL {
        let exported = validations.iter().any(|v| v.rule == r.info.id) || gmsa.contains(&r.info.id);
        let listed = e.gaps.iter().any(|g| g.rule == r.info.id && !g.partial);
        assert!(
            exported != listed,
            "{}: exported {exported}, listed {listed}",
            r.info.id
        );
    }
}

/// The export of the default policy for the newest Kubernetes, with the
/// mutating policies (`tests/install/default-export.yaml`), and the
/// admission-policy overlay's file (`--no-mutating`).
pub fn default_exports() -> Vec<(PathBuf, String)> {
    let policy = Policy::default_policy();
    let cluster = TargetCluster::default();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        (root.join("tests/install/default-export.yaml"), true),
        (root.join(OVERLAY).join("admission-policy.yaml"), false),
    ]
    .into_iter()
    .map(|(path, mutating)| {
        let e = admission_policy::export(&policy, &cluster, None, mutating).unwrap();
        let mut out = admission_policy::header(&cluster, Mode::Enforce, &e.gaps);
        out.push_str(&winadmit::entry::manifests::to_yaml(&e.documents).unwrap());
        (path, out)
    })
    .collect()
}

const OVERLAY: &str = "manifests/overlays/admission-policy";

/// `kubectl kustomize` renders the overlay, and `winadmit manifests
/// --overlay admission-policy` gives the same objects: policies and
/// bindings only, no webhook and no Deployment.
#[test]
#[cfg_attr(
    no_kubectl,
    ignore = "needs kubectl: run tests/apiserver/build.sh (it builds kubectl v1.37) or put kubectl on PATH"
)]
fn overlay_renders_with_kustomize() {
    let built = winadmit::entry::manifests::Render::AdmissionPolicy.objects();
    let kinds: BTreeSet<&str> = built.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ])
    );
    let out = std::process::Command::new(controlplane::kubectl_program())
        .arg("kustomize")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(OVERLAY))
        .output()
        .expect("kubectl runs (run tests/apiserver/build.sh, which builds kubectl v1.37, or put kubectl on PATH)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rendered = winadmit::input::yaml::load(
        &text,
        winadmit::input::yaml::ParseLimits::for_len(text.len()),
    )
    .unwrap();
    assert_eq!(
        winadmit::entry::manifests::by_id(&rendered),
        winadmit::entry::manifests::by_id(&built)
    );
}

const EXEMPTING_POLICY: &str = "\
rules:
  WIN-HOSTNETWORK: {mode: audit}
  WIN-NFS: {severity: warning}
exemptions:
  namespaces: [kube-system]
  users: [system:serviceaccount:kube-system:daemon-set-controller]
  groups: [platform-admins]
  labelSelectors:
    - matchLabels: {team: infra}
    - matchExpressions: [{key: tier, operator: In, values: [node]}]
";

/// Policy exemptions and per-rule settings: label selectors in the CEL (and
/// the same verdict as the engine), namespaces in the bindings, users in a
/// match condition, a rule's own mode in its own policy.
#[test]
fn exemptions_and_rule_settings() {
    let policy = Policy::from_yaml("exempting.yaml", EXEMPTING_POLICY).unwrap();
    let cluster = TargetCluster::default();
    let e = admission_policy::export(&policy, &cluster, None, true).unwrap();
    let named = |name: &str| {
        e.documents
            .iter()
            .find(|d| d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let ids: BTreeSet<(&str, &str)> = e
        .documents
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(ids.len(), e.documents.len(), "names are unique per kind");
    // WIN-HOSTNETWORK has its own mode: its own policy, bound with Audit.
    let own = named("winadmit-errors-always-audit");
    assert_eq!(own["spec"]["validations"].as_array().unwrap().len(), 1);
    assert_eq!(
        named("winadmit-errors-always-audit")["kind"],
        "ValidatingAdmissionPolicy"
    );
    let bindings: Vec<&Value> = e
        .documents
        .iter()
        .filter(|d| d["kind"] == "ValidatingAdmissionPolicyBinding")
        .collect();
    for b in &bindings {
        let exprs = b["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
            .as_array()
            .unwrap();
        assert!(
            exprs.contains(&json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]})),
            "{b}"
        );
    }
    let conditions = admission_policy::match_conditions(&policy, &cluster);
    assert!(conditions.iter().any(|(n, e)| *n == "user-not-exempt"
        && e.contains("daemon-set-controller")
        && e.contains("platform-admins")));

    let docs: Vec<(String, Value)> = [
        ("team=infra on the object", json!({"team": "infra"}), json!({})),
        ("tier=node on the pods", json!({}), json!({"tier": "node"})),
        ("tier=web", json!({}), json!({"tier": "web"})),
        ("no labels", json!({}), json!({})),
    ]
    .into_iter()
    .map(|(name, labels, pod_labels)| {
        (
            name.to_owned(),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
                   "metadata": {"name": "d", "labels": labels},
                   "spec": {"template": {"metadata": {"labels": pod_labels},
                            "spec": {"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true,
                                     "volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}],
                                     "containers": [{"name": "a", "image": "x", "securityContext": {"runAsUser": 1}}]}}}}),
        )
    })
    .collect();
    big_stack(move || {
        let c = compiled(&policy, &cluster);
        let exported: BTreeSet<&str> = c.validations.iter().map(|(v, _, _)| v.rule).collect();
        for (name, doc) in &docs {
            let want = engine_outcome(&policy, &cluster, &exported, doc).unwrap();
            assert_eq!(c.outcome(doc), want, "{name}");
            let exempt = name.contains('=') && !name.contains("web");
            assert_eq!(
                want.deny.is_empty() && want.warn.is_empty(),
                exempt,
                "{name}: {want:?}"
            );
            if !exempt {
                assert!(
                    want.warn.contains_key("WIN-NFS"),
                    "{name}: the policy lowers WIN-NFS"
                );
            }
        }
    });
}

/// The command: YAML on stdout with the gaps as a comment, the gaps on
/// stderr, exit 0; a target without ValidatingAdmissionPolicy exits 2 and
/// says what to do.
#[test]
fn command_output_and_exit_codes() {
    let bin = env!("CARGO_BIN_EXE_winadmit");
    let out = std::process::Command::new(bin)
        .args([
            "admission-policy",
            "--mode",
            "warn",
            "--kubernetes-version",
            "1.34",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stdout.starts_with("# winadmit "), "{stdout}");
    assert!(stdout.contains("mode warn"));
    assert!(
        stdout.contains("admissionregistration.k8s.io/v1beta1"),
        "MAP v1beta1 at 1.34"
    );
    let (validations, gaps) = admission_policy::validations(
        &Policy::default_policy(),
        &TargetCluster::at(KubeVersion::new(1, 34)),
    );
    assert!(!validations.is_empty());
    for g in &gaps {
        assert!(
            stderr.contains(&format!("winadmit: {} ", g.rule)),
            "{} not on stderr",
            g.rule
        );
        assert!(
            stdout.contains(&format!("#   {} (", g.rule)),
            "{} not in the header",
            g.rule
        );
    }
    let docs = winadmit::input::yaml::load(
        &stdout,
        winadmit::input::yaml::ParseLimits::for_len(stdout.len()),
    )
    .unwrap();
    assert!(docs.iter().all(|d| {
        d["apiVersion"]
            .as_str()
            .unwrap()
            .starts_with("admissionregistration.k8s.io/")
    }));

    let old = std::process::Command::new(bin)
        .args(["admission-policy", "--kubernetes-version", "1.29"])
        .output()
        .unwrap();
    assert_eq!(old.status.code(), Some(2));
    assert!(old.stdout.is_empty());
    let msg = String::from_utf8(old.stderr).unwrap();
    assert!(
        msg.contains("1.30") && msg.contains("winadmit manifests"),
        "{msg}"
    );
}

/// The default exports fit client-side `kubectl apply` (its
/// last-applied-configuration annotation holds the whole object; the API
/// server refuses one over 256 KiB), at every target they support and in
/// strict mode; a policy whose lists make an object larger says so on
/// stderr and names `kubectl apply --server-side`.
#[test]
fn objects_fit_client_side_apply_or_say_so() {
    let policy = Policy::default_policy();
    let strict = TargetCluster {
        stance: winadmit::decision::cluster::Stance::Strict,
        ..TargetCluster::default()
    };
    let mut clusters = targets();
    clusters.push(("strict", strict));
    clusters.push(("1.34", TargetCluster::at(KubeVersion::new(1, 34))));
    for (label, cluster) in clusters {
        {
            let Ok(e) = admission_policy::export(&policy, &cluster, None, true) else {
                continue;
            };
            for d in &e.documents {
                let len = d.to_string().len();
                assert!(
                    len <= admission_policy::CLIENT_SIDE_APPLY_BYTES,
                    "{label}: {} is {len} bytes",
                    d["metadata"]["name"]
                );
            }
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let images: Vec<String> = (0..4000)
        .map(|i| format!("registry.example.com/team-{i:04}/linux-only-service"))
        .collect();
    let file = dir.path().join("policy.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: winadmit.io/v1alpha1\nkind: Policy\nparams:\n  linuxImages: [{}]\n",
            images.join(", ")
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(["admission-policy", "--policy", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("over 256 KiB") && stderr.contains("kubectl apply --server-side"),
        "{stderr}"
    );
}

/// Every exported object reads as its Kubernetes type and writes back the
/// same: no unknown or misspelt fields, nothing the API would drop.
#[test]
fn exported_objects_are_valid_kubernetes_objects() {
    use k8s_openapi::api::admissionregistration::{v1, v1beta1};
    fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) {
        let typed: T = serde_json::from_value(doc.clone())
            .unwrap_or_else(|e| panic!("{e}: {}", doc["metadata"]["name"]));
        let back = serde_json::to_value(&typed).unwrap();
        assert_eq!(
            &back, doc,
            "{} does not round-trip",
            doc["metadata"]["name"]
        );
    }
    let policy = Policy::from_yaml("exempting.yaml", EXEMPTING_POLICY).unwrap();
    for v in [30, 34, 36, 37] {
        let cluster = TargetCluster::at(KubeVersion::new(1, v));
        let e = admission_policy::export(&policy, &cluster, None, true).unwrap();
        for d in &e.documents {
            match (
                d["apiVersion"].as_str().unwrap(),
                d["kind"].as_str().unwrap(),
            ) {
                ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
                    round_trip::<v1::ValidatingAdmissionPolicy>(d);
                }
                ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
                    round_trip::<v1::ValidatingAdmissionPolicyBinding>(d);
                }
                ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy") => {
                    round_trip::<v1::MutatingAdmissionPolicy>(d);
                }
                ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding") => {
                    round_trip::<v1::MutatingAdmissionPolicyBinding>(d);
                }
                ("admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicy") => {
                    round_trip::<v1beta1::MutatingAdmissionPolicy>(d);
                }
                ("admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicyBinding") => {
                    round_trip::<v1beta1::MutatingAdmissionPolicyBinding>(d);
                }
                other => panic!("unexpected {other:?} at 1.{v}"),
            }
            // The API's limits: 64 match conditions, names of at most 63 characters.
            let spec = &d["spec"];
            assert!(spec["matchConditions"].as_array().map_or(0, Vec::len) <= 64);
            for list in ["matchConditions", "variables"] {
                for item in spec[list].as_array().into_iter().flatten() {
                    assert!(item["name"].as_str().unwrap().len() <= 63);
                }
            }
        }
    }
}

/// With `params.windowsTaint`, WIN-TAINT-TOLERATION is exported and agrees
/// with the engine on tolerations of every shape.
#[test]
fn taint_toleration_with_a_policy_taint() {
    let policy = Policy::from_yaml(
        "taint.yaml",
        "params:\n  windowsTaint: {key: os, value: windows, effect: NoSchedule}\n",
    )
    .unwrap();
    let cluster = TargetCluster::default();
    let tolerations = [
        json!(null),
        json!([]),
        json!([{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}]),
        json!([{"key": "os", "value": "windows"}]),
        json!([{"key": "os", "operator": "Exists"}]),
        json!([{"operator": "Exists"}]),
        json!([{"key": "os", "value": "linux"}]),
        json!([{"key": "os", "operator": "Exists", "effect": "NoExecute"}]),
        json!([{"key": "other", "operator": "Exists"}]),
    ];
    let docs: Vec<(String, Value)> = tolerations
        .iter()
        .map(|t| {
            let mut spec = json!({"nodeSelector": {"kubernetes.io/os": "windows"},
                                  "containers": [{"name": "a", "image": "x"}]});
            if !t.is_null() {
                spec["tolerations"] = t.clone();
            }
            (
                t.to_string(),
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}),
            )
        })
        .collect();
    big_stack(move || {
        let c = compiled(&policy, &cluster);
        let exported: BTreeSet<&str> = c.validations.iter().map(|(v, _, _)| v.rule).collect();
        assert!(exported.contains("WIN-TAINT-TOLERATION"));
        let mut flagged = 0;
        for (name, doc) in &docs {
            let want = engine_outcome(&policy, &cluster, &exported, doc).unwrap();
            flagged += usize::from(want.warn.contains_key("WIN-TAINT-TOLERATION"));
            assert_eq!(c.outcome(doc), want, "{name}");
        }
        assert_eq!(flagged, 5, "untolerated shapes");
    });
}
