//! Hardening: hostile clients, limits on every input, a hostile registry
//! and API server, deadlines, and the soak (`-- --ignored soak`).
//!
//! One test binary; each module is one subject, and the support code
//! they share is declared here once.

#[path = "../support/admission.rs"]
mod admission;
#[path = "../support/hostile_registry.rs"]
mod hostile_registry;
#[path = "../report_support/mod.rs"]
mod report_support;
#[path = "../server_support/mod.rs"]
mod server_support;

mod api_limits;
mod registry_limits;
mod server_abuse;
mod server_hardening;
mod server_limits;
