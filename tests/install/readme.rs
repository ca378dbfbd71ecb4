//! What the README states about the binary comes from the binary: the
//! blocks between `<!-- generated: NAME -->` and `<!-- end: NAME -->` are
//! what this test makes from `winadmit` (the rule counts, the default
//! target, the denial of the sample review), checked with the other
//! generated files (`generated.rs`).
//!
//! The documents a user follows (README.md, docs/, the chart, the
//! manifests) also name one home and no placeholder for it, pin no release
//! tag that does not exist, and link only to files and headings that exist.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use winadmit::entry::admission::{self, Admission, Endpoint};

fn winadmit(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(args)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// The rule counts and the default target, from `winadmit rules` and
/// `winadmit lint --help`.
fn target_block() -> String {
    let rules: Vec<Value> =
        serde_json::from_str(&winadmit(&["rules", "--format", "json"])).unwrap();
    let off = winadmit::decision::rules::OFF_BY_DEFAULT;
    let on: Vec<&Value> = rules
        .iter()
        .filter(|r| !off.contains(&r["id"].as_str().unwrap()))
        .collect();
    let level = |l: &str| on.iter().filter(|r| r["severity"] == l).count();
    let silent = on.len() - level("error") - level("warning") - level("info");
    let latest = winadmit::decision::version::KubeVersion::LATEST.to_string();
    let help = winadmit(&["lint", "--help"]);
    assert!(
        help.contains(&latest),
        "`winadmit lint --help` does not name the default version {latest}:\n{help}"
    );
    let gives =
        |n: usize, what: &str| format!("{n} {} {what}", if n == 1 { "gives" } else { "give" });
    let is = |n: usize| format!("{n} {}", if n == 1 { "is" } else { "are" });
    format!(
        "`winadmit rules` lists {} rules. At the default target {}, {}, {} \
         and {} silent (they apply to other versions or runtimes); {} off in the \
         default policy. The default target is Kubernetes {latest}, the newest \
         version winadmit knows (`winadmit lint --help` names it), with \
         containerd; at 1.23 and older the runtime defaults to docker.\n",
        rules.len(),
        gives(level("error"), "errors"),
        gives(level("warning"), "warnings"),
        gives(level("info"), "info"),
        is(silent),
        is(off.len()),
    )
}

/// What `/validate` answers for `winadmit example review`: the message
/// after `denied the request: `.
fn denial_block() -> String {
    let review = winadmit(&["example", "review"]);
    let adm = Admission {
        policy: winadmit::decision::policy::Policy::default_policy(),
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: None,
    };
    let out = admission::review(&adm, Endpoint::Validate, review.as_bytes()).unwrap();
    let answer: Value = serde_json::from_slice(&out.body).unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    format!("```\n{message}\n```\n")
}

fn replace_block(text: &str, name: &str, body: &str) -> String {
    let begin = format!("<!-- generated: {name} -->\n");
    let end = format!("<!-- end: {name} -->");
    let a = text
        .find(&begin)
        .unwrap_or_else(|| panic!("README has no {begin:?}"))
        + begin.len();
    let b = a + text[a..]
        .find(&end)
        .unwrap_or_else(|| panic!("README has no {end:?}"));
    format!("{}{body}{}", &text[..a], &text[b..])
}

/// README.md with its generated blocks as the binary gives them today.
pub fn readme_with_generated_blocks() -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let want = replace_block(&text, "target", &target_block());
    let want = replace_block(&want, "sample-denial", &denial_block());
    (path, want)
}

/// The project's one home: its repository and its image.
const HOME_OWNER: &str = "winadmit";

/// Text that stands for a name nobody filled in.
const PLACEHOLDERS: &[&str] = &[
    "OWNER/",
    "YOUR_ORG",
    "YOUR-ORG",
    "your-org/",
    "your_org/",
    "<owner>",
    "<org>",
    "<your-org>",
    "github.com/USER/",
    "github.com/ORG/",
    "example.com/winadmit",
    "example.org/winadmit",
    "TODO",
    "FIXME",
    "TBD",
];

/// Where a placeholder, a home other than the project's, or a pin to a
/// release tag that `tags` does not hold occurs in `text`, by line.
fn placeholder_problems(text: &str, tags: &BTreeSet<String>) -> Vec<String> {
    let home =
        regex::Regex::new(r"(github\.com|ghcr\.io)/([A-Za-z0-9_.${}<>-]+)/winadmit\b").unwrap();
    // A concrete version where a release tag is pinned: pre-commit's `rev:`,
    // `cargo install --tag`, and a chart pulled from its OCI home.
    let pin = regex::Regex::new(
        r"(?:\brev:\s*|--tag[ =])(v[0-9][0-9A-Za-z.+-]*)|charts/winadmit\s+--version[ =]([0-9][0-9A-Za-z.+-]*)",
    )
    .unwrap();
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let at = n + 1;
        for p in PLACEHOLDERS {
            if line.contains(p) {
                found.push(format!("line {at}: placeholder {p:?}: {line}"));
            }
        }
        for c in home.captures_iter(line) {
            if &c[2] != HOME_OWNER {
                found.push(format!(
                    "line {at}: {}/{}/winadmit is not the project's home ({}/{HOME_OWNER}/winadmit): {line}",
                    &c[1], &c[2], &c[1]
                ));
            }
        }
        for c in pin.captures_iter(line) {
            let tag = match (c.get(1), c.get(2)) {
                (Some(t), _) => t.as_str().to_owned(),
                (None, Some(v)) => format!("v{}", v.as_str()),
                _ => continue,
            };
            if !tags.contains(&tag) {
                found.push(format!(
                    "line {at}: pins the release tag {tag}, which does not exist (write vX.Y.Z and say how to list the tags): {line}"
                ));
            }
        }
    }
    found
}

/// The version in Cargo.toml, which image/build.sh tags the image with.
fn winadmit_version() -> String {
    let toml = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    toml.lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("Cargo.toml has a version")
        .to_owned()
}

/// The image tag a build-and-install snippet writes (`TAG=...`, kustomize's
/// `newTag:`) where it is not the version `image/build.sh` builds, by line.
fn stale_versions(text: &str, version: &str) -> Vec<String> {
    let tag = regex::Regex::new(r#"(?:^TAG=|newTag:\s*"?)([0-9][0-9A-Za-z.+-]*)"#).unwrap();
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for c in tag.captures_iter(line.trim_start()) {
            if &c[1] != version {
                found.push(format!(
                    "line {}: the image tag {} is not the version in Cargo.toml ({version}): {line}",
                    n + 1,
                    &c[1]
                ));
            }
        }
    }
    found
}

fn files_under(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, keep, out);
        } else if keep(&path) {
            out.push(path);
        }
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn has_ext(path: &Path, exts: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| exts.contains(&e))
}

/// Every Markdown file a user reads: the README, docs/ and the chart's.
fn markdown_docs() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    files_under(&root().join("docs"), &|p| has_ext(p, &["md"]), &mut files);
    files_under(&root().join("charts"), &|p| has_ext(p, &["md"]), &mut files);
    files_under(
        &root().join("manifests"),
        &|p| has_ext(p, &["md"]),
        &mut files,
    );
    files
}

/// The release tags of this checkout (`git tag`); none outside a clone.
fn release_tags() -> BTreeSet<String> {
    std::process::Command::new("git")
        .args(["tag", "--list"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn docs_name_one_home_and_no_placeholder() {
    let mut files = markdown_docs();
    let text_files = |p: &Path| has_ext(p, &["md", "yaml", "yml", "json", "tpl", "txt"]);
    files_under(&root().join("charts"), &text_files, &mut files);
    files_under(&root().join("manifests"), &text_files, &mut files);
    files_under(&root().join(".github"), &text_files, &mut files);
    files_under(&root().join("docs/ci"), &text_files, &mut files);
    files_under(&root().join("image"), &|_| true, &mut files);
    files.push(root().join(".pre-commit-hooks.yaml"));
    files.push(root().join("Cargo.toml"));
    files.sort();
    files.dedup();
    assert!(files.len() > 40, "{files:?}");
    let tags = release_tags();
    let version = winadmit_version();
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for problem in stale_versions(&text, &version) {
            bad.push(format!(
                "{}: {problem}",
                f.strip_prefix(root()).unwrap().display()
            ));
        }
        for problem in placeholder_problems(&text, &tags) {
            bad.push(format!(
                "{}: {problem}",
                f.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "placeholders in the docs:\n{}",
        bad.join("\n")
    );
}

/// The anchor GitHub gives a heading: lower case, punctuation dropped,
/// spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match fence {
            Some(f) if t.starts_with(f) => fence = None,
            Some(_) => {}
            None if t.starts_with("```") => fence = Some("```"),
            None if t.starts_with("~~~") => fence = Some("~~~"),
            None => out.push((n + 1, line)),
        }
    }
    out
}

/// The anchors of a Markdown text's headings (a repeated heading gets
/// `-1`, `-2`, ... as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        let heading = rest.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut i = 0;
        while seen.contains(&anchor) {
            i += 1;
            anchor = format!("{base}-{i}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The links of the Markdown file `file` (text `text`) to a file that does
/// not exist or a heading its target does not have, by line.
fn broken_links(file: &Path, text: &str) -> Vec<String> {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut found = Vec::new();
    for (at, line) in prose_lines(text) {
        // Code spans are not links.
        let line: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        for c in link.captures_iter(&line) {
            let target = &c[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target, None),
            };
            let dest = if path.is_empty() {
                file.to_path_buf()
            } else {
                file.parent().unwrap().join(path)
            };
            if !dest.exists() {
                found.push(format!("line {at}: {target}: no such file"));
                continue;
            }
            if let Some(anchor) = anchor
                && has_ext(&dest, &["md"])
            {
                let dest_text = std::fs::read_to_string(&dest).unwrap();
                if !anchors(&dest_text).contains(anchor) {
                    found.push(format!("line {at}: {target}: no such heading"));
                }
            }
        }
    }
    found
}

#[test]
fn docs_link_to_files_and_headings_that_exist() {
    let files = markdown_docs();
    assert!(files.len() >= 10, "{files:?}");
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for problem in broken_links(f, &text) {
            bad.push(format!(
                "{}: {problem}",
                f.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "broken links in the docs:\n{}",
        bad.join("\n")
    );
}

/// The checks find what they must and leave the rest alone.
#[test]
fn the_doc_checks_find_placeholders_and_broken_links() {
    let none = BTreeSet::new();
    let tagged: BTreeSet<String> = ["v1.2.3".to_owned()].into();
    let problems = |t: &str, tags: &BTreeSet<String>| placeholder_problems(t, tags).len();
    assert_eq!(
        problems(
            "cargo install --git https://github.com/OWNER/winadmit",
            &none
        ),
        2
    );
    assert_eq!(
        problems("- repo: https://github.com/contoso/winadmit", &none),
        1
    );
    assert_eq!(problems("image: ghcr.io/someone/winadmit:1.0", &none), 1);
    assert_eq!(problems("  rev: v0.1.0", &none), 1);
    assert_eq!(problems("  rev: v1.2.3", &tagged), 0);
    assert_eq!(
        problems("cargo install --git X --tag v0.1.0 winadmit", &none),
        1
    );
    assert_eq!(
        problems(
            "helm install w oci://ghcr.io/winadmit/charts/winadmit --version 0.1.0",
            &none
        ),
        1
    );
    assert_eq!(problems("# TODO: say where", &none), 1);
    assert_eq!(
        problems(
            "rev: vX.Y.Z  # a release tag: git ls-remote --tags https://github.com/winadmit/winadmit",
            &none
        ),
        0
    );
    assert_eq!(
        problems(
            "image: ghcr.io/winadmit/winadmit:0.1.0, REGISTRY: ghcr.io/${{ github.repository_owner }}",
            &none
        ),
        0
    );

    assert_eq!(
        slug("Path A: with cert-manager (recommended)"),
        "path-a-with-cert-manager-recommended"
    );
    assert_eq!(slug("report --from-file"), "report---from-file");
    assert_eq!(
        slug("`winadmit lint` and `winadmit report`"),
        "winadmit-lint-and-winadmit-report"
    );
    assert_eq!(
        stale_versions("TAG=0.1.0   # the version", "0.2.0").len(),
        1
    );
    assert_eq!(stale_versions("    newTag: \"0.1.0\"", "0.2.0").len(), 1);
    assert!(stale_versions("TAG=0.2.0\n    newTag: \"0.2.0\"", "0.2.0").is_empty());

    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("a.md");
    let text = "# A\n## Two words\n## Two words\n```\n# not a heading\n[x](missing.md)\n```\n[ok](#two-words-1) [ok](a.md#a) [bad](#not-a-heading) [bad](missing.md) [web](https://example.com/x) `[code](x.md)`\n";
    std::fs::write(&doc, text).unwrap();
    let broken = broken_links(&doc, text);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(
        broken[0].contains("#not-a-heading") && broken[1].contains("missing.md"),
        "{broken:?}"
    );
}

/// The README's opening and `lint` agree on a Windows IIS Deployment that
/// nothing pins to Windows nodes: the default install pins it, `lint`
/// warns and exits 0 (only error findings fail CI by default), and
/// `--fail-on warning` fails it. The README says each of these.
#[test]
fn readme_says_what_fails_ci_for_an_unpinned_windows_pod() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("iis.yaml");
    std::fs::write(
        &file,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: iis\nspec:\n  selector:\n    matchLabels: {app: iis}\n  template:\n    metadata:\n      labels: {app: iis}\n    spec:\n      containers:\n      - name: iis\n        image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022\n",
    )
    .unwrap();
    let lint = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_winadmit"))
            .arg("lint")
            .args(extra)
            .arg(&file)
            .output()
            .unwrap()
    };
    let out = lint(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("warning[WIN-UNPINNED-IMAGE]"), "{text}");
    assert!(!text.contains("error["), "{text}");
    assert_eq!(lint(&["--fail-on", "warning"]).status.code(), Some(1));

    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let opening = &readme[..readme.find("\n## ").unwrap()];
    let opening = opening.split_whitespace().collect::<Vec<_>>().join(" ");
    for claim in [
        "A Windows pod without an OS node selector can be placed on a Linux node, where its image cannot be pulled.",
        "Such a pod is patched, not refused, and `lint` reports it as a warning (exit 0)",
        "by default only **error** findings, what the webhook would deny, fail CI (`lint` exits 1)",
        "`lint --fail-on warning` also fails on warnings, such as a Windows image that nothing pins to Windows nodes",
    ] {
        assert!(
            opening.contains(claim),
            "the README's opening no longer says: {claim}"
        );
    }
    assert!(
        !opening.contains("lands on a Linux node and fails"),
        "the README's opening says such a pod fails"
    );
}

/// What the quick start writes into the checkout is ignored by git.
#[test]
fn quick_start_files_are_ignored_by_git() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains("cargo run --release -- example review > review.json"));
    assert!(readme.contains("--self-signed-dir target/self-signed"));
    for written in ["review.json", "target/self-signed/ca.pem"] {
        let out = Command::new("git")
            .args(["check-ignore", "-q", written])
            .current_dir(root())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{written} is not ignored by git"
        );
    }
}

/// The examples the README links are what it says they are: `lint` of the
/// README's pod gives the denial's findings (exit 1), and the example
/// policy loads and makes an unpinned Windows image an error.
#[test]
fn examples_are_the_readmes_pod_and_a_working_policy() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    for link in ["(examples/pod.yaml)", "(examples/policy.yaml)"] {
        assert!(readme.contains(link), "the README does not link {link}");
    }
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_winadmit"))
            .args(args)
            .current_dir(root())
            .output()
            .unwrap()
    };
    let out = run(&["lint", "examples/pod.yaml"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for rule in [
        "error[WIN-HOSTNETWORK]",
        "error[WIN-SYSCTLS]",
        "warning[WIN-PRIVILEGED]",
    ] {
        assert!(text.contains(rule), "examples/pod.yaml: no {rule}:\n{text}");
    }

    let dir = tempfile::tempdir().unwrap();
    let iis = dir.path().join("iis.yaml");
    std::fs::write(
        &iis,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: iis\nspec:\n  containers:\n  - name: iis\n    image: contoso/servercore-iis:1.0\n",
    )
    .unwrap();
    let iis = iis.to_str().unwrap();
    let plain = run(&["lint", iis]);
    assert_eq!(plain.status.code(), Some(0), "{plain:?}");
    let strict = run(&["lint", "--policy", "examples/policy.yaml", iis]);
    let text = String::from_utf8_lossy(&strict.stdout);
    assert_eq!(strict.status.code(), Some(1), "{text}{strict:?}");
    assert!(text.contains("error[WIN-UNPINNED-IMAGE]"), "{text}");
}
