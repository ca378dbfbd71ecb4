//! The `admission-policy` export writes policy strings (RuntimeClass
//! names, namespaces, label keys, user and group names) into CEL as string
//! literals. Every string, control characters included, must parse with a
//! CEL parser (the `cel` crate's) and evaluate back to itself: CEL's
//! grammar refuses a raw carriage return or newline inside quotes.

use std::sync::Arc;

use cel::objects::Value as CelValue;
use cel::{Context, Env};
use winadmit::decision::rules::cel::{cel_list, cel_str};

fn evaluates_to_itself(s: &str) -> Result<(), String> {
    let env = Arc::new(Env::stdlib());
    let literal = cel_str(s);
    let program = env
        .compile(&literal)
        .map_err(|e| format!("{s:?} -> {literal} does not parse: {e:?}"))?;
    let cx = Context::with_env(env);
    match program.execute(&cx) {
        Ok(CelValue::String(back)) if back.as_str() == s => Ok(()),
        other => Err(format!("{s:?} -> {literal} evaluates to {other:?}")),
    }
}

#[test]
fn every_control_character_is_escaped() {
    let mut wrong = Vec::new();
    let controls = (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32);
    for c in controls {
        for s in [
            c.to_string(),
            format!("windows-{c}2022"),
            format!("team{c}"),
        ] {
            if let Err(e) = evaluates_to_itself(&s) {
                wrong.push(e);
            }
        }
    }
    for s in [
        "plain",
        "it's",
        "back\\slash",
        "\"double\"",
        "crlf\r\n",
        "é ünïcödé ✓",
        "\u{2028}\u{2029}",
        "",
    ] {
        if let Err(e) = evaluates_to_itself(s) {
            wrong.push(e);
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for c in (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32) {
        assert!(!cel_str(&c.to_string()).contains(c), "{c:?} written raw");
    }
}

#[test]
fn lists_of_literals_parse() {
    let env = Env::stdlib();
    let list = cel_list(&["kube-system", "a\rb", "c'd"]);
    let program = env.compile(&format!("{list}.size() == 3")).unwrap();
    let cx = Context::with_env(Arc::new(env));
    assert_eq!(program.execute(&cx).unwrap(), CelValue::Bool(true));
}
