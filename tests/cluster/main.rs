//! Where pods land: the scheduling cluster (kube-scheduler, kube-
//! controller-manager and KWOK's simulated nodes on a real kube-apiserver),
//! the corpus scheduled, the audit following node pool changes, and the
//! older API server versions.
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
#[path = "../support/oracle.rs"]
mod oracle;
#[path = "../support/scheduling.rs"]
mod scheduling_kit;
#[path = "../server_support/mod.rs"]
mod server;
#[allow(dead_code)]
#[path = "../support/ways.rs"]
mod ways;

mod audit_scheduling;
mod corpus_scheduling;
mod scheduling;
mod version_matrix;
