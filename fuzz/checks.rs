//! The checks behind each fuzz target, shared by the libFuzzer binaries in
//! `fuzz/fuzz_targets/` and by `tests/verdicts/fuzz_regressions.rs`, which replays
//! every committed input under `tests/fixtures/fuzz-regressions/<target>/`
//! in a normal `cargo test`. A check panics when an invariant breaks; any
//! input is allowed to be refused with an error.

use base64::Engine as _;
use serde::Deserialize as _;
use serde_json::Value;
use winadmit::decision::engine::{self, Context};
use winadmit::decision::patch::{self, MutationContext};
use winadmit::decision::policy::Policy;
use winadmit::decision::view::ObjectView;
use winadmit::decision::workload::Workload;
use winadmit::entry::admission::{self, Admission, Endpoint};
use winadmit::input::source;

/// A policy that turns every mutation on, so patch generation is exercised
/// beyond the default node selector.
const FULL_MUTATION: &str = "mutation:
  injectNodeSelector: true
  setOsName: true
  removeNoOpFields: true
  emptyDirOffMemory: true
  inferFromImages: true
  isolation: process
  isolationNamespaceLabel: null
  tolerations:
  - {key: os, operator: Equal, value: windows, effect: NoSchedule}
";

pub fn policies() -> Vec<Policy> {
    vec![
        Policy::default_policy(),
        Policy::from_yaml("full.yaml", FULL_MUTATION).expect("the fuzz policy parses"),
    ]
}

/// AdmissionReview decoding and evaluation: any body gets either a refusal
/// (`ReviewError`, HTTP 400) or a JSON AdmissionReview answering the
/// request's uid; a mutating patch applies to the request's object.
pub fn admission_review(data: &[u8]) {
    for policy in policies() {
        let adm = Admission {
            policy,
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: None,
        };
        for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
            let Ok(out) = admission::review(&adm, endpoint, data) else {
                continue;
            };
            let v: Value = serde_json::from_slice(&out.body).expect("the response is JSON");
            let response = &v["response"];
            assert!(response["uid"].is_string(), "no uid in {v}");
            assert!(response["allowed"].is_boolean(), "no verdict in {v}");
            let Some(p) = response["patch"].as_str() else {
                continue;
            };
            assert_eq!(endpoint, Endpoint::Mutate, "a patch from /validate");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(p)
                .expect("the patch is base64");
            let ops: json_patch::Patch =
                serde_json::from_slice(&bytes).expect("the patch is a JSON Patch");
            let request: Value = serde_json::from_slice(data).expect("a patched request is JSON");
            let mut object = request["request"]["object"].clone();
            json_patch::patch(&mut object, &ops)
                .unwrap_or_else(|e| panic!("patch {ops:?} does not apply: {e}"));
        }
    }
}

/// YAML/JSON manifest loading and linting: any bytes are linted or refused
/// with an input error; never a panic, never a hang (the budgets in
/// `yaml::ParseLimits` bound the work).
pub fn manifest_load(data: &[u8]) {
    let Ok(text) = source::decode(data) else {
        return;
    };
    let parsed = source::parse(text);
    for policy in policies() {
        let mut report = winadmit::render::LintReport::default();
        winadmit::entry::lint::lint_text(
            "fuzz.yaml",
            text,
            &policy,
            &Context::default(),
            &mut report,
        );
        if parsed.is_err() {
            assert!(
                !report.input_errors.is_empty(),
                "unparsable text linted clean"
            );
        }
        for f in &report.findings {
            assert!(
                !f.rule.is_empty() && !f.message.is_empty(),
                "empty finding {f:?}"
            );
        }
    }
}

/// Patch generation: for every workload in the input, the patch applies,
/// the patched object re-parses as the same kind of workload, and the
/// patch never touches a non-Windows workload.
pub fn patch_generation(data: &[u8]) {
    let Ok(text) = source::decode(data) else {
        return;
    };
    let Ok(docs) = source::parse(text) else {
        return;
    };
    let cx = Context::default();
    for policy in policies() {
        for doc in &docs {
            let Ok(view) = ObjectView::deserialize(&doc.value) else {
                continue;
            };
            let Some(workload) = Workload::from_view(&view) else {
                continue;
            };
            let eval = engine::evaluate(&policy, &workload, &cx);
            let m = patch::mutation(
                &policy,
                &workload,
                &eval,
                MutationContext {
                    create: true,
                    namespace_isolation: None,
                    psa_restricted_before_1_25: false,
                    images: None,
                    nodes: None,
                },
            );
            if m.is_empty() {
                continue;
            }
            assert!(
                eval.target.is_windows()
                    || policy.mutation.infer_from_images
                    || policy.mutation.pin_windows_images
                    || policy.mutation.pin_linux_images,
                "patched a workload that does not target Windows: {}",
                doc.value
            );
            let mut patched = doc.value.clone();
            patch::apply(&mut patched, &m.ops).unwrap_or_else(|e| {
                panic!("patch {:?} does not apply to {}: {e}", m.ops, doc.value)
            });
            // The result is still an object the same entry point can read.
            let json = serde_json::to_string(&patched).expect("serializes");
            let reparsed = source::parse(&json).expect("the patched object re-parses");
            assert_eq!(reparsed.len(), 1, "{json}");
            let view = ObjectView::deserialize(&reparsed[0].value)
                .unwrap_or_else(|e| panic!("patched object is not a valid object: {e}: {json}"));
            let again = Workload::from_view(&view).expect("still a workload");
            assert_eq!(again.kind, workload.kind);
        }
    }
}
