//! winadmit: the admission webhook and policy validator that makes Windows
//! nodes in Kubernetes safe to use.
//!
//! The core (`view`, `workload`, `targeting`, `rules`, `engine`, `patch`,
//! `policy`) is pure: no I/O, no async. The doors (`commands`, `server`,
//! `admission`, `source`, `output`) decode input, call
//! [`engine::evaluate`], and encode output.

pub mod admission;
pub mod admission_policy;
pub mod certs;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod decide;
pub mod engine;
pub mod errors;
pub mod finding;
pub mod fix;
pub mod glob;
pub mod images;
pub mod lint;
pub mod manifests;
pub mod names;
pub mod output;
pub mod patch;
pub mod path;
pub mod policy;
pub mod registry;
pub mod report;
pub mod rules;
pub mod server;
pub mod services;
pub mod source;
pub mod strict;
pub mod targeting;
pub mod tolerations;
pub mod version;
pub mod view;
pub mod windows_builds;
pub mod workload;
pub mod yaml;
