//! winadmit: the admission webhook and policy validator that makes Windows
//! nodes in Kubernetes safe to use.
//!
//! The modules fall in four layers; `tests/layers.rs` checks that each
//! imports only what its layer may.
//!
//! - **The core** is pure: no network, no async, no clock. [`decide::decide`]
//!   is the one decision every entry point calls; it runs [`engine::evaluate`]
//!   (the rules of [`rules`] over a [`workload`] seen through [`view`],
//!   targeted by [`targeting`]) and settles the JSON Patch of [`patch`].
//!   Beside them: the policy model ([`policy`], which also loads policy
//!   files), the facts about the target cluster ([`cluster`], [`version`],
//!   [`windows_builds`], [`tolerations`], and what registries say of
//!   images: [`images`]), findings and field paths
//!   ([`finding`], [`path`]), cross-object checks ([`services`]), the API
//!   server's own format rules ([`names`], [`strict`]), pattern matching
//!   ([`glob`]), the gMSA credential specs a pod names ([`gmsa`]), and the export of the rules as admission policies
//!   ([`admission_policy`]). The core imports only the core and the
//!   readers of input.
//! - **Readers of input**: [`yaml`] (YAML to JSON values with positions),
//!   [`source`] (manifest files and streams) and [`registry`] (image
//!   facts from OCI registries).
//! - **Renderers**: [`output`] (text, JSON, SARIF, JUnit for `lint`).
//! - **Entry points**, which decode input, call the core and encode its
//!   answer:
//!   the webhook ([`admission`] for AdmissionReview bytes, [`server`] for
//!   HTTP, TLS, the cluster watch cache and metrics), `lint` ([`lint`],
//!   [`fix`]), `report` ([`report`], with its own formats), the command
//!   line ([`cli`], [`commands`]), and the install ([`certs`],
//!   [`manifests`]); [`errors`] helps them word errors.

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
pub mod gmsa;
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
