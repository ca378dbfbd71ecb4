//! Hardening: hostile clients, limits on every input, a hostile registry and API server, deadlines, and the soak (`-- --ignored soak`).
//!
//! One test binary; each module is one subject, and the support code
//! they share is declared here once.

#[allow(dead_code, unused_imports)]
#[path = "../support/admission.rs"]
mod admission;
#[allow(dead_code, unused_imports)]
#[path = "../support/hostile_registry.rs"]
mod hostile_registry;
#[allow(dead_code, unused_imports)]
#[path = "../report_support/mod.rs"]
mod report_support;
#[allow(dead_code, unused_imports)]
#[path = "../server_support/mod.rs"]
mod server_support;

mod api_limits;
mod registry_limits;
mod server_abuse;
mod server_hardening;
mod server_limits;
