//! Rules and verdicts: each rule, the decision and its targeting, the
//! policy file, the CEL literals, the corpus's labels, the entry points
//! agreeing on every verdict, and the layers of `src/`.
//!
//! One test binary; each module is one subject, and the support code
//! they share is declared here once.

#[path = "../support/admission.rs"]
mod admission;
#[path = "../support/binary.rs"]
mod binary;
#[path = "../support/corpus_dir.rs"]
mod corpus_dir;
#[allow(dead_code)]
#[path = "../report_support/fake_api.rs"]
mod fake_api;
#[allow(dead_code)]
#[path = "../../fuzz/checks.rs"]
mod fuzz_checks;
#[allow(dead_code)]
#[path = "../support/ways.rs"]
mod ways;

mod cel_literals;
mod corpus;
mod custom_resources;
mod decide;
mod entry_points_agree;
mod exceptions_agree;
mod fuzz_regressions;
mod knowledge;
mod layers;
mod mutate_api_valid;
mod one_reader;
mod placement;
mod policy_strict;
mod review_shapes;
mod rules;
mod settle_on_view;
mod user_words;
