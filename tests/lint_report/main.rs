//! `winadmit lint`, `--fix` and `report`: the command line, the output
//! formats, files and streams, and the live report against a fake API.
//!
//! One test binary; each module is one subject, and the support code
//! they share is declared here once.

#[path = "../support/binary.rs"]
mod binary;
#[path = "../support/corpus_dir.rs"]
mod corpus_dir;
#[path = "../report_support/mod.rs"]
mod report_support;

mod audit_crds;
mod audit_mode;
mod charts;
mod ci_templates;
mod cli;
mod exceptions;
mod fix_corpus;
mod fix_files;
mod gmsa_cli;
mod lint_recovery;
mod output_scaling;
mod report_deadlines;
mod report_file;
mod report_formats;
mod report_live;
mod report_speed;
