//! What the README states about the binary comes from the binary: the
//! blocks between `<!-- generated: NAME -->` and `<!-- end: NAME -->` are
//! what this test makes from `winadmit` (the rule counts, the default
//! target, the denial of the sample review). A stale block fails the test;
//! `WINADMIT_UPDATE_README=1 cargo test --test readme` rewrites them.

use std::path::Path;
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
        cluster: winadmit::decision::cluster::Cluster::default(),
        namespaces: None,
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

#[test]
fn readme_facts_come_from_the_binary() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let want = replace_block(&text, "target", &target_block());
    let want = replace_block(&want, "sample-denial", &denial_block());
    if std::env::var_os("WINADMIT_UPDATE_README").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    assert!(
        text == want,
        "README.md states facts the binary no longer gives: run `WINADMIT_UPDATE_README=1 cargo test --test readme` and review the diff"
    );
}
