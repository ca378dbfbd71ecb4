//! Installing winadmit: the manifests and their kustomize overlays, the
//! Helm chart against a real kube-apiserver, the exported admission
//! policies, the chart's alerts and dashboard, the documents a user
//! follows, and every file generated from the code.
//!
//! One test binary; each module is one subject, and the support code
//! they share is declared here once. The chart's tests share one control
//! plane, the only one this binary starts.

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
#[path = "../server_support/mod.rs"]
mod server;

mod admission_policy;
mod audit_monitoring;
mod exceptions;
mod generated;
mod helm;
mod manifests;
mod readme;
mod static_config;
mod test_tools;
mod threat_model;
