//! The lint writers scale linearly: rendering twice the findings
//! allocates about twice as often, and SARIF, written as it is serialized,
//! needs no more extra memory for a large report than for a small one (it
//! used to build the whole log as a JSON tree, then a string: GBs for
//! 100,000 documents). Measured with dhat's heap statistics, not clocks.

use std::io;

use winadmit::decision::finding::Severity;
use winadmit::render::{Checked, LintFinding, LintReport, junit, sarif};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// A report of `docs` workloads, each in its own document with an error
/// and a warning, built without spare capacity.
fn report(docs: usize) -> LintReport {
    let mut findings = Vec::with_capacity(docs * 2);
    let mut checked = Vec::with_capacity(docs);
    for d in 0..docs {
        let file = format!("/nowhere/manifests/part-{}.yaml", d % 7);
        for (rule, severity) in [
            ("WIN-PRIVILEGED", Severity::Error),
            ("WIN-MEMORY-LIMITS", Severity::Warning),
        ] {
            findings.push(LintFinding {
                file: file.clone(),
                line: 10 + d as u64,
                column: 7,
                document: d,
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("shop".into()),
                name: format!("web-{d}"),
                rule,
                severity,
                field: "spec.template.spec.containers[0].securityContext.privileged".into(),
                message: "privileged containers are not supported on Windows".into(),
                title: "privileged",
                doc_url: "https://kubernetes.io/docs/concepts/windows/intro/",
                fix: "Remove `privileged`.",
                patch: None,
            });
        }
        checked.push(Checked {
            file,
            document: d,
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: format!("web-{d}"),
        });
    }
    LintReport {
        findings,
        checked,
        ..LintReport::default()
    }
}

/// Allocations made and the peak heap above `base` while `f` runs.
fn measure(f: impl FnOnce()) -> (u64, usize) {
    let before = dhat::HeapStats::get();
    f();
    let after = dhat::HeapStats::get();
    (
        after.total_blocks - before.total_blocks,
        after.max_bytes.saturating_sub(before.curr_bytes),
    )
}

#[test]
fn junit_and_sarif_writers_scale_linearly() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let root = std::path::Path::new("/nowhere");
    let small = report(4_000);
    let large = report(8_000);

    // The small report first: the peak can only grow afterwards, so the
    // large report's extra memory is visible only if it needs more.
    let (sarif_small_blocks, sarif_small_peak) =
        measure(|| sarif::write(&small, root, &mut io::sink()).unwrap());
    let (sarif_large_blocks, sarif_large_peak) =
        measure(|| sarif::write(&large, root, &mut io::sink()).unwrap());
    let (junit_small_blocks, _) = measure(|| junit::write(&small, &mut io::sink()).unwrap());
    let (junit_large_blocks, _) = measure(|| junit::write(&large, &mut io::sink()).unwrap());

    for (what, small, large) in [
        ("sarif", sarif_small_blocks, sarif_large_blocks),
        ("junit", junit_small_blocks, junit_large_blocks),
    ] {
        assert!(
            large <= small * 2 + small / 10 + 1_000,
            "{what}: {small} allocations for 4,000 documents, {large} for 8,000: more than linear"
        );
    }
    // Twice the findings, not (about) twice the memory: bounded.
    assert!(
        sarif_large_peak <= sarif_small_peak + sarif_small_peak / 4 + 256 * 1024,
        "sarif peak grew with the report: {sarif_small_peak} bytes for 4,000 documents, \
         {sarif_large_peak} for 8,000"
    );
}
