//! The webhook server: routes, TLS and certificates, the JSON Patch, the
//! watch cache, and image facts from a real registry.
//!
//! One test binary; each module is one subject, and the support code
//! they share is declared here once.

#[path = "../support/admission.rs"]
mod admission;
#[path = "../support/binary.rs"]
mod binary;
#[path = "../support/registry.rs"]
mod registry_support;
#[path = "../report_support/mod.rs"]
mod report_support;
#[path = "../server_support/mod.rs"]
mod server_support;

mod certs;
mod cluster_deadlines;
mod image;
mod registry;
mod serve_cluster;
mod serve_registry;
mod server_patch_props;
mod server_router;
mod server_tls;
