//! What a user reads speaks the language of the Kubernetes documentation
//! and kubectl, not the project's own shorthand: `--help` of every
//! subcommand, `explain` of every rule, `rules` (text and markdown), the
//! README and every file of docs/.

use std::path::{Path, PathBuf};

use clap::CommandFactory as _;

/// Words and phrases only the authors know, with the reason each is out.
const INTERNAL: &[(&str, &str)] = &[
    (
        "door",
        "say \"entry point\", or name /validate, /mutate, lint, report",
    ),
    ("doors", "say \"entry points\", or name them"),
    ("settled patch", "say \"the final JSON Patch\""),
    ("settles its patch", "say \"with a patch\""),
    ("fixpoint", "say \"until it changes nothing more\""),
    ("intent lost", "say \"security settings Windows ignores\""),
    (
        "windows-truth",
        "a file users do not have: cite docs/verdicts.md",
    ),
    ("seed 0", "cite the Kubernetes documentation it comes from"),
    ("seeds", "cite the Kubernetes documentation they come from"),
    ("the corpus", "say \"real-world manifests\""),
    ("real-world corpus", "say \"real-world manifests\""),
    ("build machine", "say what machine: \"a 2-core machine\""),
    ("/work/", "a path on the authors' machine"),
    ("/root/", "a path on the authors' machine"),
    ("error(s)", "write the plural a number needs"),
    ("warning(s)", "write the plural a number needs"),
];

/// What `winadmit args` prints, which must succeed.
fn printed(args: &[&str]) -> String {
    let out = crate::binary::winadmit(args);
    assert!(out.status.success(), "winadmit {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

fn word_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

/// Each internal word in `text`, as a whole word, with its line.
fn internal_words(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        for (word, why) in INTERNAL {
            for (at, _) in lower.match_indices(word) {
                let before = lower[..at].chars().next_back();
                let after = lower[at + word.len()..].chars().next();
                let edge_before = !word.starts_with(|c: char| c.is_alphanumeric());
                let edge_after = !word.ends_with(|c: char| c.is_alphanumeric());
                if (edge_before || !word_char(before)) && (edge_after || !word_char(after)) {
                    found.push(format!("line {}: {word:?} ({why}): {line}", n + 1));
                }
            }
        }
        // `stance` is a policy key: fine as the key, not as a word.
        for (at, _) in lower.match_indices("stance") {
            let before = lower[..at].chars().next_back();
            let after = lower[at + "stance".len()..].chars().next();
            let word = !word_char(before) && !word_char(after);
            let key = before == Some('`') || after == Some(':') || after == Some('`');
            if word && !key {
                found.push(format!(
                    "line {}: \"stance\" (say --strict; `stance` is only the policy key): {line}",
                    n + 1
                ));
            }
        }
    }
    found
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

#[test]
fn user_facing_text_has_no_internal_words() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts: Vec<(String, String)> = Vec::new();

    let mut cli = winadmit::entry::cli::Cli::command();
    texts.push(("winadmit --help".into(), cli.render_long_help().to_string()));
    let names: Vec<String> = cli
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    assert!(names.len() >= 8, "{names:?}");
    for name in names.iter().filter(|n| *n != "help") {
        texts.push((
            format!("winadmit {name} --help"),
            printed(&[name, "--help"]),
        ));
    }
    texts.push(("winadmit rules".into(), printed(&["rules"])));
    for rule in winadmit::decision::rules::ALL {
        let id = rule.info.id;
        texts.push((format!("winadmit explain {id}"), printed(&["explain", id])));
    }
    texts.push((
        "winadmit rules --format markdown".into(),
        printed(&["rules", "--format", "markdown"]),
    ));

    let mut files = vec![root.join("README.md")];
    markdown_files(&root.join("docs"), &mut files);
    assert!(files.len() >= 5, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        texts.push((f.strip_prefix(root).unwrap().display().to_string(), text));
    }

    let mut bad = Vec::new();
    for (what, text) in &texts {
        for hit in internal_words(text) {
            bad.push(format!("{what}: {hit}"));
        }
    }
    assert!(
        bad.is_empty(),
        "internal words in user-facing text:\n{}",
        bad.join("\n")
    );
}

/// The check itself finds what it must and leaves identifiers alone.
#[test]
fn the_word_check_finds_words_not_identifiers() {
    assert_eq!(internal_words("every door calls it").len(), 1);
    assert_eq!(internal_words("the settled patch").len(), 1);
    assert_eq!(internal_words("the strict stance").len(), 1);
    assert_eq!(internal_words("1 error(s)").len(), 1);
    assert!(
        internal_words("`tests/verdicts/doors_agree.rs` and `stance: strict`, an indoor instance")
            .is_empty()
    );
    assert!(internal_words("| `stance` | default |").is_empty());
}
