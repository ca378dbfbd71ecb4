//! Replays the fuzz targets' checks (`fuzz/checks.rs`) in a normal
//! `cargo test`: every input a fuzzer ever crashed on (committed under
//! `tests/fixtures/fuzz-regressions/<target>/`), the fixtures the fuzzers
//! start from, and a bounded number of random mutations of those fixtures
//! (truncations, byte flips, splices), so CI exercises the same invariants
//! on stable Rust without libFuzzer. `fuzz/run.sh` runs the real fuzzers.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use crate::fuzz_checks as checks;

type Check = fn(&[u8]);

const TARGETS: &[(&str, Check, &[&str])] = &[
    (
        "admission_review",
        checks::admission_review,
        &["tests/fixtures/admission"],
    ),
    (
        "manifest_load",
        checks::manifest_load,
        &["tests/fixtures/lint", "tests/fixtures/report"],
    ),
    (
        "patch_generation",
        checks::patch_generation,
        &["tests/fixtures/lint", "tests/fixtures/report"],
    ),
];

/// The files under `dir` (a README aside), sorted.
///
/// # Panics
/// `dir` is missing: a moved folder must fail the tests, not empty them.
fn files(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    assert!(dir.is_dir(), "{} is missing", dir.display());
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(&dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(walkdir::DirEntry::into_path)
        .filter(|p| p.file_name().is_some_and(|n| n != "README.md"))
        .collect();
    out.sort();
    out
}

fn replay(check: Check, path: &Path) {
    let data = std::fs::read(path).unwrap();
    if std::panic::catch_unwind(|| check(&data)).is_err() {
        panic!("{} fails its fuzz check", path.display());
    }
}

#[test]
fn committed_fuzz_crashes_stay_fixed() {
    let mut replayed = 0;
    for (target, check, _) in TARGETS {
        let dir = format!("tests/fixtures/fuzz-regressions/{target}");
        // A target without a crash yet has no folder; one with a folder
        // must keep its inputs.
        if !Path::new(env!("CARGO_MANIFEST_DIR")).join(&dir).is_dir() {
            continue;
        }
        for path in files(&dir) {
            replay(*check, &path);
            replayed += 1;
        }
    }
    assert!(
        replayed > 0,
        "no committed crash input under tests/fixtures/fuzz-regressions/"
    );
}

#[test]
fn seed_fixtures_pass_every_check() {
    for (target, check, seeds) in TARGETS {
        for dir in *seeds {
            let files = files(dir);
            assert!(!files.is_empty(), "{target}: no seed files in {dir}");
            for path in files {
                replay(*check, &path);
            }
        }
    }
}

/// A fixture, changed the way a fuzzer would.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, Vec<u8>),
    Duplicate(prop::sample::Index, prop::sample::Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let tokens = prop::sample::select(vec![
        &b"{"[..],
        b"}",
        b"[",
        b"\"",
        b"\n- ",
        b": ",
        b"&a ",
        b"*a",
        b"!!binary ",
        b"---\n",
        b"null",
        b"\\u0000",
        b"~1",
        b"/",
        b"\t",
        b"\xff",
    ]);
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<prop::sample::Index>(), tokens).prop_map(|(i, t)| Mutation::Insert(i, t.to_vec())),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(a, b)| Mutation::Duplicate(a, b)),
    ]
}

fn mutate(mut data: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    for m in ms {
        if data.is_empty() {
            break;
        }
        match m {
            Mutation::Truncate(i) => data.truncate(i.index(data.len())),
            Mutation::Flip(i, b) => {
                let at = i.index(data.len());
                data[at] = *b;
            }
            Mutation::Insert(i, t) => {
                let at = i.index(data.len());
                data.splice(at..at, t.iter().copied());
            }
            Mutation::Duplicate(a, b) => {
                let (a, b) = (a.index(data.len()), b.index(data.len()));
                let (lo, hi) = (a.min(b), a.max(b).min(a.min(b) + 4096));
                let chunk = data[lo..hi].to_vec();
                data.splice(hi..hi, chunk);
            }
        }
    }
    data
}

proptest! {
    // Bounded so `cargo test` stays quick; `fuzz/run.sh` is the long run.
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn mutated_fixtures_pass_every_check(
        target in 0..TARGETS.len(),
        seed in any::<prop::sample::Index>(),
        ms in prop::collection::vec(mutation(), 1..6),
    ) {
        let (_, check, seeds) = TARGETS[target];
        let all: Vec<PathBuf> = seeds.iter().flat_map(|d| files(d)).collect();
        let path = &all[seed.index(all.len())];
        let data = mutate(std::fs::read(path).unwrap(), &ms);
        check(&data);
    }
}
