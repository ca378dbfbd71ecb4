//! The pure decision: what winadmit concludes about a workload, and
//! everything that conclusion reads. No network, no async runtime, no
//! clock: the same inputs give the same verdict in the webhook, `lint` and
//! `report`. Modules here import only other modules of `decision`, and
//! no two of them import each other in a circle (`tests/verdicts/layers.rs`).
//!
//! [`decide::decide`] is the one decision: it runs [`engine::evaluate`]
//! (the rules of [`rules`] over a [`workload`] seen through [`view`],
//! targeted by [`targeting`]) and settles the JSON Patch of [`patch`].
//! Beside them: the policy model ([`policy`]; `input::policy` reads policy
//! files); the facts about the target cluster ([`cluster`], [`version`],
//! [`windows_builds`], [`tolerations`]) and about images ([`images`]) and
//! gMSA credential specs ([`gmsa`]); the exceptions a platform team grants
//! ([`exceptions`]); findings and field paths ([`finding`],
//! [`path`]); what an entry point looks up before it judges a workload
//! ([`lookups`]); checks across objects ([`services`]); the API server's own
//! format rules ([`names`], [`strict`]); pattern matching ([`glob`]); and
//! the export of the rules as admission policies ([`admission_policy`]).

pub mod admission_policy;
pub mod cluster;
pub mod decide;
pub mod engine;
pub mod exceptions;
pub mod finding;
pub mod glob;
pub mod gmsa;
pub mod images;
pub mod lookups;
pub mod names;
pub mod patch;
pub mod path;
pub mod policy;
pub mod rules;
pub mod services;
pub mod strict;
pub mod targeting;
pub mod tolerations;
pub mod version;
pub mod view;
pub mod windows_builds;
pub mod workload;
