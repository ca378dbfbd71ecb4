//! The webhooks through a real kube-apiserver v1.37
//! (`support/controlplane.rs`): `winadmit serve` registered as the install
//! registers it, kubectl showing what a user sees, gMSA, failure policies,
//! the registry, the exported admission policies, and `winadmit audit`.
//!
//! One test binary; each module is one subject, with a control plane of
//! its own (`controlplane::shared` is per test file), and the support code
//! they share is declared here once.

#[path = "../support/audit.rs"]
mod audit;
#[path = "../support/binary.rs"]
mod binary;
#[path = "../support/controlplane.rs"]
mod controlplane;
#[path = "../support/corpus_dir.rs"]
mod corpus_dir;
#[path = "../support/e2e.rs"]
mod e2e;
#[path = "../support/helm.rs"]
mod helm_support;
#[path = "../support/oracle.rs"]
mod oracle;
#[path = "../support/registry.rs"]
mod registry_support;
#[path = "../server_support/mod.rs"]
mod server;

mod e2e_admission_policy;
mod e2e_audit;
mod e2e_cluster;
mod e2e_exceptions;
mod e2e_failure;
mod e2e_gmsa;
mod e2e_gmsa_installs;
mod e2e_one_call;
mod e2e_oracle;
mod e2e_registry;
mod e2e_static;
mod e2e_webhook;
