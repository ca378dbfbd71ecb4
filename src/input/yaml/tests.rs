use super::*;
use serde_json::json;
use std::fmt::Write as _;

fn one(text: &str) -> Value {
    load(text, ParseLimits::for_len(text.len()))
        .unwrap()
        .remove(0)
}

#[test]
fn resolves_scalars_like_kubectl() {
    let v = one(
        "a: 0644\nb: 10\nc: -3\nd: 1.5\ne: yes\nf: \"yes\"\ng: ~\nh: 0x1F\ni: 1_000\nj: 08\nk: .inf\nl: on\nm: 12:30\nn: 1e3\n9000: svc\n",
    );
    assert_eq!(
        v,
        json!({"a": 420, "b": 10, "c": -3, "d": 1.5, "e": true, "f": "yes", "g": null, "h": 31,
                   "i": 1000, "j": 8, "k": ".inf", "l": true, "m": "12:30", "n": 1000.0, "9000": "svc"})
    );
}

#[test]
fn anchors_merges_and_duplicates() {
    let v = one("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\nlist: [*b]\ndup: 1\ndup: 2\n");
    assert_eq!(v["use"], json!({"x": 1, "y": 3}));
    assert_eq!(v["list"][0]["x"], 1);
    assert_eq!(v["dup"], 2);
}

/// Everything [`load_each_on`] hands over and returns, to compare the
/// one- and two-thread runs.
fn record(text: &str, limits: ParseLimits, threads: Threads) -> String {
    let mut out = String::new();
    let r = load_each_on(text, limits, threads, |doc, value, at| {
        let _ = writeln!(out, "{doc} {value} {at:?}");
    });
    let _ = write!(out, "{r:?}");
    out
}

#[test]
fn the_parser_on_a_second_thread_changes_nothing() {
    // Many batches of events: anchors, merges, duplicate keys, lists,
    // block and quoted scalars, empty documents.
    let doc = |i: usize| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  labels: &l {{app: a{i}}}\nspec:\n  nodeSelector:\n    <<: *l\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: \"mcr.microsoft.com/windows/nanoserver:ltsc2022\"\n    command: [cmd, /c, 'echo hi']\n    args:\n    - |\n      line one\n      line two\n  dup: 1\n  dup: 2\n---\n---\n"
        )
    };
    let text: String = (0..3000).map(doc).collect();
    let limits = ParseLimits::for_len(text.len());
    let one = record(&text, limits, Threads::One);
    assert!(
        one.contains("Ok([DuplicateKey { document: 0,")
            && one.contains("DuplicateKey { document: 5998,"),
        "{}",
        &one[one.len() - 200..]
    );
    assert_eq!(record(&text, limits, Threads::Two), one);

    // The parser's error, after many documents.
    let broken = format!("{text}a: [1, 2\n");
    let one = record(&broken, limits, Threads::One);
    assert!(one.contains("Err(YamlError"), "{}", &one[one.len() - 200..]);
    assert_eq!(record(&broken, limits, Threads::Two), one);

    // The builder's error (the node budget), mid-stream: the parser's
    // thread stops too.
    let small = ParseLimits {
        max_nodes: 20_000,
        max_depth: 128,
    };
    let one = record(&text, small, Threads::One);
    assert!(one.contains("safety budget"), "{}", &one[one.len() - 200..]);
    assert_eq!(record(&text, small, Threads::Two), one);
}

#[test]
fn documents_and_limits() {
    let docs = load("a: 1\n---\n---\nb: 2\n", ParseLimits::for_len(0)).unwrap();
    assert_eq!(docs, vec![json!({"a": 1}), Value::Null, json!({"b": 2})]);
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    assert!(
        load(&deep, ParseLimits::for_len(deep.len()))
            .unwrap_err()
            .message
            .contains("nesting")
    );
    let e = load("a: [1, 2\n", ParseLimits::for_len(9)).unwrap_err();
    assert!(e.line >= 1 && !e.message.is_empty(), "{e:?}");
}

/// An unclosed flow collection followed by more lines is reported at its
/// bracket, which is where the fix goes, not at the line the parser
/// stopped on; other errors keep the parser's position.
#[test]
fn unclosed_flow_collections_point_at_their_bracket() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: x\nspec:\n  containers: []\n";
    let e = load(text, ParseLimits::for_len(text.len())).unwrap_err();
    assert_eq!((e.line, e.column), (3, 11), "{e:?}");
    assert!(e.message.contains("'{' here is not closed"), "{e:?}");
    assert!(e.message.contains("before line 4"), "{e:?}");
    let text = "a:\n  b: [1, 2\n  c: 3\n";
    let e = load(text, ParseLimits::for_len(text.len())).unwrap_err();
    assert_eq!(e.line, 2, "{e:?}");
    let text = "a: b: c\n";
    let e = load(text, ParseLimits::for_len(text.len())).unwrap_err();
    assert!(!e.message.contains("not closed"), "{e:?}");
}

/// Positions recorded while building values agree with a separate pass
/// over the events ([`locate_many`]), for every pointer of every node
/// and for missing ones, through anchors, merges, duplicates, escaped
/// keys, flow collections, Lists and several documents.
#[test]
fn positions_from_the_first_parse_match_locate_many() {
    let text = "\
a: 1
b: &base
  c:
  - x
  - y: 2
    \"k/e~y\": [1, {z: 3}]
use:
  <<: *base
  c: []
dup: 1
dup: {d: 2}
list: [*base, 5]
s: &s sk
*s : aliased-key
after: 1
---
---
kind: List
items:
- metadata: {name: a}
  spec:
    containers:
    - name: c
";
    let wants_per_doc: Vec<(usize, Vec<&str>)> = vec![
        (
            0,
            vec![
                "",
                "/a",
                "/b",
                "/b/c",
                "/b/c/0",
                "/b/c/1/y",
                "/b/c/1/k~1e~0y/1/z",
                "/b/c/1/k~1e~0y/1/missing/deeper",
                "/use/<<",
                "/use/c",
                "/use/c/0",
                "/dup",
                "/dup/d",
                "/list/0",
                "/list/0/c",
                "/list/1",
                "/s",
                "/sk",
                "/after",
                "/nothing",
            ],
        ),
        (1, vec!["", "/x"]),
        (
            2,
            vec![
                "/items/0",
                "/items/0/spec/containers/0/name",
                "/items/0/spec/hostNetwork",
                "/items/1",
            ],
        ),
    ];
    let flat: Vec<(usize, &str)> = wants_per_doc
        .iter()
        .flat_map(|(d, ws)| ws.iter().map(move |w| (*d, *w)))
        .collect();
    let expected = locate_many(text, &flat);
    let mut got = Vec::new();
    let mut docs = 0;
    load_each(text, ParseLimits::for_len(text.len()), |doc, _, at| {
        docs += 1;
        let wants = &wants_per_doc.iter().find(|(d, _)| *d == doc).unwrap().1;
        got.extend(at.locate(wants));
        // The indexed lookup (many wants) agrees with the linear one.
        let many: Vec<&str> = wants.iter().copied().cycle().take(5000).collect();
        let indexed = at.locate(&many);
        assert_eq!(&indexed[..wants.len()], &at.locate(wants)[..]);
    })
    .unwrap();
    assert_eq!(docs, 3);
    assert_eq!(got, expected);
    assert_eq!(
        got[5].map(|p| (p.line, p.column, p.exact)),
        Some((5, 5, true))
    );
    assert!(!got[7].unwrap().exact, "a missing field is its ancestor's");
}

#[test]
fn locates_keys_items_and_missing_fields() {
    let text = "a: 1\nb:\n  c:\n  - x\n  - y: 2\n---\nz: 1\n";
    let got: Vec<_> = locate_many(
        text,
        &[
            (0, "/b/c/1/y"),
            (0, "/b/missing"),
            (0, "/b/c/0"),
            (1, "/z"),
            (1, ""),
        ],
    )
    .into_iter()
    .map(|p| p.map(|p| (p.line, p.column, p.exact)))
    .collect();
    assert_eq!(
        got,
        vec![
            Some((5, 5, true)),
            Some((2, 1, false)),
            Some((4, 5, true)),
            Some((7, 1, true)),
            Some((7, 1, true))
        ]
    );
}
