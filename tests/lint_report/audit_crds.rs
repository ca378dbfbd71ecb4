//! The report CRDs in the chart (charts/winadmit/files/crds/) are the ones
//! their projects publish: tests/report_crds/fetch.sh downloads
//! github.com/openreports/reports-api v0.2.1 and github.com/kyverno/kyverno
//! v1.19.1 through the Go module proxy (`go mod download`) into a scratch
//! folder, and every file must be byte for byte the chart's copy. Each
//! serves the group, version and kind `winadmit audit` writes.
//!
//! Without Go the test is ignored, with the reason (`build.rs`), unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` sets it).

use std::path::Path;
use std::process::Command;

const CRDS: [(&str, &str, &str, &str); 4] = [
    (
        "openreports.io_reports.yaml",
        "openreports.io",
        "v1alpha1",
        "Report",
    ),
    (
        "openreports.io_clusterreports.yaml",
        "openreports.io",
        "v1alpha1",
        "ClusterReport",
    ),
    (
        "wgpolicyk8s.io_policyreports.yaml",
        "wgpolicyk8s.io",
        "v1alpha2",
        "PolicyReport",
    ),
    (
        "wgpolicyk8s.io_clusterpolicyreports.yaml",
        "wgpolicyk8s.io",
        "v1alpha2",
        "ClusterPolicyReport",
    ),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_chart_crds_serve_what_the_audit_writes() {
    for (file, group, version, kind) in CRDS {
        let text =
            std::fs::read_to_string(root().join("charts/winadmit/files/crds").join(file)).unwrap();
        let crd: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(crd["spec"]["group"], group, "{file}");
        assert_eq!(crd["spec"]["names"]["kind"], kind, "{file}");
        let served = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == version && v["served"] == true);
        assert!(served, "{file}: {version} not served");
    }
}

#[test]
#[cfg_attr(
    no_crd_modules,
    ignore = "needs Go to download the CRDs' modules (tests/report_crds/fetch.sh); Go's module cache keeps them"
)]
fn the_chart_crds_are_their_projects_own() {
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(root().join("tests/report_crds/fetch.sh"))
        .arg(scratch.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tests/report_crds/fetch.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (file, ..) in CRDS {
        let fetched = std::fs::read(scratch.path().join(file)).unwrap();
        let chart = std::fs::read(root().join("charts/winadmit/files/crds").join(file)).unwrap();
        assert!(
            fetched == chart,
            "charts/winadmit/files/crds/{file} differs from its project's: run tests/report_crds/fetch.sh"
        );
    }
}
