//! `lint --fix` on every real manifest of the corpus: the fixed file parses
//! to the object the mutating webhook would produce (its settled patch
//! applied, less the parents the patch empties where Kubernetes reads empty
//! as absent), files without fixes are left byte for byte, and a second
//! `--fix` finds nothing left to fix.
//!
//! Without the corpus the tests are ignored, with the reason (`build.rs`),
//! unless `WINADMIT_REQUIRE_CORPUS=1`, when they run and fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use winadmit::decision::engine::Context;
use winadmit::decision::patch::{self, MutationContext};
use winadmit::decision::policy::Policy;
use winadmit::decision::targeting::RuntimeClasses;
use winadmit::entry::lint::collect_runtime_classes;
use winadmit::input::source;

use crate::corpus_dir as corpus_location;

/// Keys the fix may drop when the patch leaves them empty (Kubernetes
/// reads them empty as absent); `emptyDir` is not one of them.
const MAY_DROP_EMPTIED: &[&str] = &[
    "securityContext",
    "capabilities",
    "seccompProfile",
    "windowsOptions",
    "seLinuxOptions",
    "appArmorProfile",
    "nodeSelector",
    "annotations",
    "labels",
];

/// Is `file` the `patched` object, where an entry the patch emptied may be
/// missing when empty means absent for it?
fn same_object(original: &Value, patched: &Value, file: &Value, at: &str) -> Result<(), String> {
    match (patched, file) {
        (Value::Object(p), Value::Object(f)) => {
            for (k, pv) in p {
                let here = format!("{at}/{k}");
                let ov = original.get(k).unwrap_or(&Value::Null);
                match f.get(k) {
                    Some(fv) => same_object(ov, pv, fv, &here)?,
                    None => {
                        let emptied = match (pv, ov) {
                            (Value::Object(a), Value::Object(b)) => {
                                a.is_empty()
                                    && !b.is_empty()
                                    && MAY_DROP_EMPTIED.contains(&k.as_str())
                            }
                            (Value::Array(a), Value::Array(b)) => a.is_empty() && !b.is_empty(),
                            _ => false,
                        };
                        if !emptied {
                            return Err(format!("{here} is missing from the fixed file"));
                        }
                    }
                }
            }
            if let Some(k) = f.keys().find(|k| !p.contains_key(*k)) {
                return Err(format!(
                    "{at}/{k} is in the fixed file, not in the patched object"
                ));
            }
            Ok(())
        }
        (Value::Array(p), Value::Array(f)) if p.len() == f.len() => {
            for (i, (pv, fv)) in p.iter().zip(f).enumerate() {
                let ov = original.get(i).unwrap_or(&Value::Null);
                same_object(ov, pv, fv, &format!("{at}/{i}"))?;
            }
            Ok(())
        }
        (p, f) if p == f => Ok(()),
        (p, f) => Err(format!("{at}: fixed file has {f}, patched object has {p}")),
    }
}

fn lint_fix(dir: &Path) -> (Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(["lint", "--fix", "--format", "json"])
        .arg(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("lint --fix output is not JSON ({e}); stderr: {stderr}"));
    (report, stderr)
}

#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn fix_applies_every_settled_patch_in_the_corpus() {
    let corpus = corpus_location::corpus_dir("fix_applies_every_settled_patch_in_the_corpus");
    let files = corpus_location::manifests(&corpus);
    assert!(!files.is_empty(), "no manifests in {}", corpus.display());
    let tmp = tempfile::tempdir().unwrap();
    let originals: Vec<(PathBuf, String)> = files
        .iter()
        .map(|f| {
            let copy = tmp.path().join(f.file_name().unwrap());
            std::fs::copy(f, &copy).unwrap();
            // The corpus is read-only, and `--fix` leaves read-only files
            // alone: the copies are the user's working files.
            std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o644))
                .unwrap();
            let bytes = std::fs::read(f).unwrap();
            (copy, String::from_utf8_lossy(&bytes).into_owned())
        })
        .collect();

    let policy = Policy::default_policy();
    let mut runtime_classes = RuntimeClasses::default();
    for (_, text) in &originals {
        collect_runtime_classes(text, &mut runtime_classes);
    }
    let cx = Context {
        runtime_classes: Some(&runtime_classes),
        ..Context::default()
    };
    let mcx = MutationContext {
        create: true,
        namespace_isolation: None,
        psa_restricted_before_1_25: false,
        images: None,
        nodes: None,
    };

    let (report, stderr) = lint_fix(tmp.path());
    // Every fix is written, except in a file the editor cannot read as
    // YAML events (tab indentation, which the API server's YAML reader
    // tolerates in places): those are reported by name, never silently left.
    let mut unreadable = std::collections::BTreeSet::new();
    for line in stderr.lines().filter(|l| l.contains("not fixed")) {
        assert!(
            line.contains("cannot be read for editing"),
            "every fix must be written:\n{stderr}"
        );
        if let Some(file) = originals
            .iter()
            .map(|(copy, _)| copy.file_name().unwrap().to_string_lossy().into_owned())
            .find(|name| line.contains(name.as_str()))
        {
            unreadable.insert(file);
        }
    }
    assert!(unreadable.len() <= 2, "{unreadable:?}");

    let (mut expected_ops, mut fixed_files, mut failures) = (0, 0, Vec::new());
    for (copy, text) in &originals {
        let name = copy.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(docs) = source::parse(text) else {
            continue;
        };
        if unreadable.contains(&name) {
            assert_eq!(&std::fs::read_to_string(copy).unwrap(), text, "{name}");
            continue;
        }
        let after = std::fs::read_to_string(copy).unwrap();
        let mut file_ops = 0;
        let reread = source::parse(&after).expect("a fixed file parses");
        assert_eq!(reread.len(), docs.len(), "{name}: objects lost or added");
        for (doc, fixed) in docs.iter().zip(&reread) {
            let m = patch::settle(&policy, &cx, mcx, &doc.value, None, &|_| true);
            let mut patched = doc.value.clone();
            patch::apply(&mut patched, &m.ops).unwrap();
            file_ops += m.ops.len();
            if let Err(e) = same_object(&doc.value, &patched, &fixed.value, "") {
                failures.push(format!("{name} doc#{}: {e}", doc.index));
            }
            let left = patch::settle(&policy, &cx, mcx, &fixed.value, None, &|_| true);
            if !left.ops.is_empty() {
                failures.push(format!(
                    "{name} doc#{}: still fixable: {:?}",
                    doc.index, left.ops
                ));
            }
        }
        if file_ops == 0 {
            assert_eq!(
                &after, text,
                "{name}: a file without fixes is not rewritten"
            );
        } else {
            fixed_files += 1;
        }
        expected_ops += file_ops;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(report["summary"]["fixed"], expected_ops, "{stderr}");
    assert!(expected_ops > 0, "the corpus has fixable findings");

    // A second run has nothing left to do.
    let (again, stderr) = lint_fix(tmp.path());
    assert_eq!(again["summary"]["fixed"], 0, "{stderr}");
    println!(
        "lint --fix: {expected_ops} operations in {fixed_files} of {} files",
        originals.len()
    );
}

/// Mangled copies of the corpus (cut short, a character dropped, a space,
/// newline or brace inserted) never make `--fix` panic, and whatever it
/// writes parses.
#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn fix_never_panics_on_mangled_manifests() {
    let corpus = corpus_location::corpus_dir("fix_never_panics_on_mangled_manifests");
    let policy = Policy::default_policy();
    let cx = Context::default();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut tried = 0;
    for file in corpus_location::manifests(&corpus) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            continue;
        }
        for _ in 0..12 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let at = usize::try_from(seed >> 33).unwrap() % chars.len();
            let mut t = chars.clone();
            match seed % 5 {
                0 => t.truncate(at),
                1 => {
                    t.remove(at);
                }
                2 => t.insert(at, ' '),
                3 => t.insert(at, '\n'),
                _ => t.insert(at, '{'),
            }
            let mangled: String = t.into_iter().collect();
            if let (Some(fixed), _) = winadmit::entry::fix::fix_text(&mangled, &policy, &cx) {
                assert!(
                    source::parse(&fixed).is_ok(),
                    "{}: a fix of a mangled copy does not parse",
                    file.display()
                );
            }
            tried += 1;
        }
    }
    println!("{tried} mangled manifests");
}
