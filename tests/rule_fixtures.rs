//! Every rule's cases, from its folder `tests/fixtures/rules/<RULE-ID>/`
//! (the layout is in that folder's README.md): each `bad*.yaml` must give
//! at least one finding of the folder's rule, and its findings of that rule
//! (level, field path, message) must equal its snapshot `bad*.snap`; each
//! `good*.yaml`, a near miss, must give none. One trial per case, so
//! `cargo test --test rule_fixtures -- --list` shows every rule's cases;
//! `INSTA_UPDATE=always cargo test --test rule_fixtures` rewrites the
//! snapshots after a deliberate change.
//!
//! A case goes through `lint`'s own function over a text
//! ([`winadmit::entry::lint::lint_text`], which calls the one decision
//! `decide::decide` for every object and pairs Services with the Windows
//! workloads they select), with the context of its `<case>.context.yaml`;
//! an UPDATE case goes straight through `decide::decide`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use serde::Deserialize;
use winadmit::decision::cluster::{KnownNode, TargetCluster, WindowsNodes};
use winadmit::decision::engine::Context;
use winadmit::decision::finding::Severity;
use winadmit::decision::policy::Policy;
use winadmit::decision::version::KubeVersion;
use winadmit::decision::view::ObjectView;
use winadmit::decision::workload::Workload;

fn main() -> std::process::ExitCode {
    let args = Arguments::from_args();
    let mut trials = vec![
        Trial::test(
            "every_rule_has_a_bad_and_a_good_case",
            every_rule_has_a_bad_and_a_good_case,
        ),
        Trial::test(
            "every_folder_names_a_rule_and_holds_only_cases",
            every_folder_names_a_rule_and_holds_only_cases,
        ),
    ];
    match cases() {
        Ok(cases) => {
            for case in cases {
                let name = format!("{}/{}", case.rule, case.name);
                trials.push(Trial::test(name, move || run(&case)));
            }
        }
        Err(e) => trials.push(Trial::test("read_the_fixture_folders", move || {
            Err(e.into())
        })),
    }
    libtest_mimic::run(&args, trials).exit_code()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rules")
}

/// One case: `tests/fixtures/rules/<rule>/<name>.yaml`.
struct Case {
    rule: String,
    name: String,
    dir: PathBuf,
    /// `bad*`: must give the rule; `good*`: must not.
    bad: bool,
}

impl Case {
    fn manifest(&self) -> PathBuf {
        self.dir.join(format!("{}.yaml", self.name))
    }
    fn context(&self) -> PathBuf {
        self.dir.join(format!("{}.context.yaml", self.name))
    }
}

/// What a file in a rule's folder is.
enum File {
    /// A case's manifest: its name, and whether it is bad.
    Case(String, bool),
    /// `<case>.context.yaml`.
    Context(String),
    /// `<case>.snap`.
    Snapshot(String),
}

fn classify(file: &str) -> Option<File> {
    let case = |stem: &str| {
        let bad = stem == "bad" || stem.starts_with("bad-");
        let good = stem == "good" || stem.starts_with("good-");
        (bad || good).then(|| stem.to_owned()).map(|s| (s, bad))
    };
    if let Some(stem) = file.strip_suffix(".context.yaml") {
        return case(stem).map(|(s, _)| File::Context(s));
    }
    if let Some(stem) = file.strip_suffix(".snap") {
        return case(stem).map(|(s, _)| File::Snapshot(s));
    }
    let stem = file.strip_suffix(".yaml")?;
    case(stem).map(|(s, bad)| File::Case(s, bad))
}

/// The rule folders: folder name and the file names in it, sorted.
fn folders() -> Result<BTreeMap<String, Vec<String>>, String> {
    let root = root();
    let read =
        |dir: &Path| std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", shown(dir)));
    let mut out = BTreeMap::new();
    for entry in read(&root)? {
        let entry = entry.map_err(|e| format!("{}: {e}", shown(&root)))?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        for f in read(&path)? {
            let f = f.map_err(|e| format!("{}: {e}", shown(&path)))?;
            files.push(f.file_name().to_string_lossy().into_owned());
        }
        files.sort();
        out.insert(entry.file_name().to_string_lossy().into_owned(), files);
    }
    Ok(out)
}

fn cases() -> Result<Vec<Case>, String> {
    let mut cases = Vec::new();
    for (rule, files) in folders()? {
        for file in files {
            if let Some(File::Case(name, bad)) = classify(&file) {
                cases.push(Case {
                    dir: root().join(&rule),
                    rule: rule.clone(),
                    name,
                    bad,
                });
            }
        }
    }
    Ok(cases)
}

fn every_rule_has_a_bad_and_a_good_case() -> Result<(), Failed> {
    let cases = cases()?;
    let with = |bad: bool| -> BTreeSet<&str> {
        cases
            .iter()
            .filter(|c| c.bad == bad)
            .map(|c| c.rule.as_str())
            .collect()
    };
    let (bad, good) = (with(true), with(false));
    let missing: Vec<String> = winadmit::decision::rules::ALL
        .iter()
        .map(|r| r.info.id)
        .filter_map(|id| match (bad.contains(id), good.contains(id)) {
            (true, true) => None,
            (false, true) => Some(format!("{id}: no bad case (tests/fixtures/rules/{id}/bad.yaml)")),
            (true, false) => Some(format!("{id}: no good case (tests/fixtures/rules/{id}/good.yaml)")),
            (false, false) => Some(format!("{id}: no case (no folder tests/fixtures/rules/{id}/ with a bad.yaml and a good.yaml)")),
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("\n").into())
    }
}

fn every_folder_names_a_rule_and_holds_only_cases() -> Result<(), Failed> {
    let known: BTreeSet<&str> = winadmit::decision::rules::ALL
        .iter()
        .map(|r| r.info.id)
        .collect();
    let mut problems = Vec::new();
    for (folder, files) in folders()? {
        if !known.contains(folder.as_str()) {
            problems.push(format!(
                "tests/fixtures/rules/{folder}/: no rule has this id (`winadmit rules` lists them)"
            ));
        }
        let mut names = BTreeSet::new();
        let mut bad = BTreeSet::new();
        for file in &files {
            match classify(file) {
                Some(File::Case(name, is_bad)) => {
                    if is_bad {
                        bad.insert(name.clone());
                    }
                    names.insert(name);
                }
                Some(File::Context(_) | File::Snapshot(_)) => {}
                None if file.ends_with(".snap.new") || file.ends_with(".pending-snap") => {
                    problems.push(format!(
                        "tests/fixtures/rules/{folder}/{file}: a changed snapshot waiting for review: accept it (INSTA_UPDATE=always cargo test --test rule_fixtures, or cargo insta review) or delete it"
                    ));
                }
                None => problems.push(format!(
                    "tests/fixtures/rules/{folder}/{file}: not a case (bad*.yaml, good*.yaml), its context (<case>.context.yaml) or its snapshot (<case>.snap)"
                )),
            }
        }
        for file in &files {
            match classify(file) {
                Some(File::Context(name)) if !names.contains(&name) => problems.push(format!(
                    "tests/fixtures/rules/{folder}/{file}: the context of no case ({name}.yaml is missing)"
                )),
                Some(File::Snapshot(name)) if !bad.contains(&name) => problems.push(format!(
                    "tests/fixtures/rules/{folder}/{file}: the snapshot of no bad case ({name}.yaml is missing or good)"
                )),
                _ => {}
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// What a case states beside its manifest (`<case>.context.yaml`); every
/// key is optional. See tests/fixtures/rules/README.md.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CaseContext {
    /// The target Kubernetes version, `1.19` (the default: the newest
    /// winadmit knows; docker before 1.24), as `--kubernetes-version`.
    kubernetes_version: Option<String>,
    /// A policy layered over the default one, as `--policy` reads it.
    policy: Option<String>,
    /// What registries say of the images, in the `--image-facts` format.
    image_facts: Option<serde_json::Value>,
    /// The cluster's Windows Node objects.
    nodes: Option<Vec<serde_json::Value>>,
    /// The cluster's gMSA credential specs and authorization answers.
    gmsa: Option<GmsaContext>,
    /// The case is an UPDATE from this object.
    update_of: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GmsaContext {
    /// Every GMSACredentialSpec of the cluster: name and its `credspec`
    /// (JSON text), or null for one without.
    credential_specs: BTreeMap<String, Option<String>>,
    /// (service account, credential spec) pairs the authorizer refuses in
    /// the pod's namespace; every other pair is allowed.
    #[serde(default)]
    refused: Vec<(String, String)>,
    /// Pairs whose authorization could not be asked (a report without the
    /// right to create SubjectAccessReviews).
    #[serde(default)]
    unasked: Vec<(String, String)>,
}

/// `path` from the package root, as the failure messages name it.
fn shown(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", shown(path)))
}

fn case_context(case: &Case) -> Result<CaseContext, String> {
    let path = case.context();
    if !path.exists() {
        return Ok(CaseContext::default());
    }
    serde_saphyr::from_str(&read(&path)?).map_err(|e| format!("{}: {e}", shown(&path)))
}

/// The one workload of a text's first document.
fn workload_value(text: &str, at: &Path) -> Result<serde_json::Value, String> {
    let docs = winadmit::input::source::parse(text).map_err(|e| {
        let (line, column) = (e.line.unwrap_or(0), e.column.unwrap_or(0));
        format!("{}:{line}:{column}: invalid YAML: {}", shown(at), e.message)
    })?;
    docs.into_iter()
        .next()
        .map(|d| d.value)
        .ok_or_else(|| format!("{}: no object", shown(at)))
}

fn gmsa_facts(
    g: &GmsaContext,
    pod: &serde_json::Value,
    at: &Path,
) -> Result<winadmit::decision::gmsa::Facts, String> {
    let mut facts = winadmit::decision::gmsa::Facts {
        complete: true,
        ..Default::default()
    };
    for (name, json) in &g.credential_specs {
        let contents = json
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| format!("{}: gmsa.credentialSpecs.{name}: {e}", shown(at)))?;
        facts.specs.insert(
            name.clone(),
            winadmit::decision::gmsa::CredSpec::Found(contents),
        );
    }
    let view = ObjectView::deserialize(pod).map_err(|e| format!("{}: {e}", shown(at)))?;
    let w = Workload::from_view(&view).ok_or_else(|| format!("{}: not a workload", shown(at)))?;
    let spec = w
        .spec
        .ok_or_else(|| format!("{}: no pod spec", shown(at)))?;
    let account = winadmit::decision::gmsa::service_account(spec);
    let namespace = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for name in winadmit::decision::gmsa::names(spec) {
        let key = (namespace.clone(), account.to_owned(), name.to_owned());
        let pair = (account.to_owned(), name.to_owned());
        if g.unasked.contains(&pair) {
            facts.unasked.insert(
                key,
                "the report's identity may not create subjectaccessreviews.authorization.k8s.io"
                    .to_owned(),
            );
            continue;
        }
        let allowed = !g.refused.contains(&pair);
        let reason = if allowed {
            ""
        } else {
            "no RBAC policy matched"
        };
        facts.authz.insert(
            key,
            winadmit::decision::gmsa::Authz {
                allowed,
                reason: reason.to_owned(),
            },
        );
    }
    Ok(facts)
}

/// One finding as the snapshot shows it.
struct Seen {
    object: String,
    rule: String,
    level: Severity,
    field: String,
    message: String,
}

/// Every finding the case gives.
fn findings(case: &Case) -> Result<Vec<Seen>, String> {
    let path = case.manifest();
    let text = read(&path)?;
    let ctx = case_context(case)?;
    let at = case.context();
    let policy = match &ctx.policy {
        Some(p) => Policy::from_yaml(&shown(&at), p).map_err(|e| e.to_string())?,
        None => Policy::default_policy(),
    };
    let cluster = match &ctx.kubernetes_version {
        Some(v) => TargetCluster::at(
            v.parse::<KubeVersion>()
                .map_err(|e| format!("{}: kubernetesVersion: {e}", shown(&at)))?,
        ),
        None => TargetCluster::default(),
    };
    let images = match &ctx.image_facts {
        Some(v) => Some(
            winadmit::decision::images::KnownImages::parse(&v.to_string())
                .map_err(|e| format!("{}: imageFacts: {e}", shown(&at)))?,
        ),
        None => None,
    };
    let nodes = match &ctx.nodes {
        Some(list) => {
            // The context's nodes are the cluster's: all of them.
            let mut nodes = WindowsNodes {
                linux_known: true,
                ..Default::default()
            };
            for (i, n) in list.iter().enumerate() {
                nodes.push(
                    KnownNode::from_object(n)
                        .ok_or_else(|| format!("{}: nodes[{i}] is not a Node", shown(&at)))?,
                );
            }
            Some(nodes)
        }
        None => None,
    };
    let pod = workload_value(&text, &path)?;
    let gmsa = match &ctx.gmsa {
        Some(g) => Some(gmsa_facts(g, &pod, &at)?),
        None => None,
    };
    let mut runtime_classes = winadmit::decision::targeting::RuntimeClasses::default();
    winadmit::entry::lint::collect_runtime_classes(&text, &mut runtime_classes);
    let cx = Context {
        cluster,
        runtime_classes: Some(&runtime_classes),
        nodes: nodes.as_ref(),
        images: images.as_ref(),
        gmsa: gmsa.as_ref(),
        exceptions: None,
    };
    if let Some(old) = &ctx.update_of {
        return updated(&policy, &cx, &pod, &workload_value(old, &at)?, &path);
    }
    let mut report = winadmit::render::LintReport::default();
    let file = shown(&path);
    winadmit::entry::lint::lint_text(&file, &text, &policy, &cx, &mut report);
    if let Some(e) = report.input_errors.first() {
        return Err(format!("{}:{:?}: {}", e.file, e.line, e.message));
    }
    Ok(report
        .findings
        .into_iter()
        .map(|f| Seen {
            object: format!("{}/{}", f.kind, f.name),
            rule: f.rule.to_owned(),
            level: f.severity,
            field: f.field,
            message: f.message,
        })
        .collect())
}

/// The findings an UPDATE from `old` to `new` counts.
fn updated(
    policy: &Policy,
    cx: &Context<'_>,
    new: &serde_json::Value,
    old: &serde_json::Value,
    at: &Path,
) -> Result<Vec<Seen>, String> {
    let view = |v| ObjectView::deserialize(v).map_err(|e| format!("{}: {e}", shown(at)));
    let (new_view, old_view) = (view(new)?, view(old)?);
    let workload =
        |v| Workload::from_view(v).ok_or_else(|| format!("{}: not a workload", shown(at)));
    let (w, o) = (workload(&new_view)?, workload(&old_view)?);
    let request = winadmit::decision::decide::Request {
        operation: winadmit::decision::decide::Operation::Update {
            old: Some(&o),
            ephemeral: false,
        },
        ..winadmit::decision::decide::Request::manifest(
            winadmit::decision::decide::PatchSource::None,
        )
    };
    let d = winadmit::decision::decide::decide(policy, cx, &w, &request);
    let object = format!(
        "{}/{}",
        new["kind"].as_str().unwrap_or_default(),
        new["metadata"]["name"].as_str().unwrap_or_default()
    );
    Ok(d.counted_findings()
        .map(|(f, _)| Seen {
            object: object.clone(),
            rule: f.rule.to_owned(),
            level: f.severity,
            field: f.field.to_string(),
            message: f.message.clone(),
        })
        .collect())
}

/// The case's findings of its rule, as its snapshot holds them.
fn render(seen: &[Seen]) -> String {
    let mut out = String::new();
    for f in seen {
        let _ = write!(
            out,
            "- object: {}\n  rule: {}\n  level: {}\n  field: {}\n  message: {}\n",
            f.object,
            f.rule,
            f.level.as_str(),
            f.field,
            f.message
        );
    }
    out
}

fn run(case: &Case) -> Result<(), Failed> {
    let all = findings(case)?;
    let mine: Vec<Seen> = all.into_iter().filter(|f| f.rule == case.rule).collect();
    if !case.bad {
        // A near miss: the rule must stay silent.
        return if mine.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{}: a good case, but {} reports:\n{}",
                shown(&case.manifest()),
                case.rule,
                render(&mine)
            )
            .into())
        };
    }
    if mine.is_empty() {
        return Err(format!(
            "{}: a bad case, but {} reports nothing",
            shown(&case.manifest()),
            case.rule
        )
        .into());
    }
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(&case.dir);
    settings.set_prepend_module_to_snapshot(false);
    settings.set_input_file(case.manifest());
    settings.set_omit_expression(true);
    settings.bind(|| insta::assert_snapshot!(case.name.as_str(), render(&mine)));
    Ok(())
}
