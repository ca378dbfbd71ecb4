//! Speed and memory of `winadmit report --from-file` on 100,000 generated
//! objects (a `kubectl get -A -o json` style List). Ignored by default: run
//! with `cargo test --release --test lint_report -- --ignored --nocapture report_speed::`
//! (numbers are recorded in docs/BENCHMARKS.md, "report --from-file").

use crate::report_support;

use std::process::Command;
use std::time::Instant;

use report_support::write_cluster_list;

#[test]
#[ignore = "benchmark: run in release with --ignored"]
fn hundred_thousand_objects_under_ten_seconds() {
    let dir = tempfile::tempdir().unwrap();
    // WINADMIT_BENCH_FILE keeps the generated file for other measurements.
    let path = std::env::var_os("WINADMIT_BENCH_FILE")
        .map_or_else(|| dir.path().join("cluster.json"), std::path::PathBuf::from);
    let n = std::env::var("WINADMIT_BENCH_OBJECTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let counts = write_cluster_list(&path, n);
    let size = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "generated {n} objects ({counts}), {:.1} MiB",
        size as f64 / 1048576.0
    );
    for format in ["json", "text", "policyreport", "html"] {
        let time_v = std::path::Path::new("/usr/bin/time").exists();
        let mut cmd = if time_v {
            let mut c = Command::new("/usr/bin/time");
            c.arg("-v").arg(env!("CARGO_BIN_EXE_winadmit"));
            c
        } else {
            Command::new(env!("CARGO_BIN_EXE_winadmit"))
        };
        let out_file = dir.path().join(format!("report.{format}"));
        cmd.args(["report", "--quiet", "--format", format, "--from-file"])
            .arg(&path)
            .arg("--output")
            .arg(&out_file);
        let start = Instant::now();
        let out = cmd.output().unwrap();
        let secs = start.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let rss = stderr
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Maximum resident set size (kbytes): ")
            })
            .map_or("n/a".to_owned(), |k| {
                format!("{} MiB", k.trim().parse::<u64>().unwrap_or(0) / 1024)
            });
        let out_size = std::fs::metadata(&out_file).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "format {format}: {secs:.2} s, max RSS {rss}, output {:.1} MiB, exit {:?}",
            out_size as f64 / 1048576.0,
            out.status.code()
        );
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        if n >= 100_000 && !cfg!(debug_assertions) {
            assert!(secs < 10.0, "{format}: {secs:.2} s");
        }
    }
}
