//! The entry points: each decodes its input, calls
//! [`crate::decision::decide::decide`] and encodes the answer. Modules here
//! may import every layer; nothing outside `entry` imports them.
//!
//! - The webhook: [`admission`] (AdmissionReview bytes in and out) and
//!   [`server`] (HTTP, TLS, the watch cache of cluster objects, metrics).
//! - `winadmit lint` and `--fix`: [`lint`] and [`fix`].
//! - `winadmit audit`: [`audit`] (workloads judged as `report` judges them,
//!   into openreports.io or wgpolicyk8s.io reports).
//! - The `PolicyException`s every entry point honours: [`exceptions`].
//! - `winadmit report`: [`report`], with its own formats (text, JSON, HTML,
//!   PolicyReport).
//! - The command line: [`cli`] (the arguments) and [`commands`] (one module
//!   per subcommand).
//! - The install: [`certs`] (serving certificates) and [`manifests`] (the
//!   install YAML), [`static_admission`] (the API server's static
//!   admission configuration); [`errors`] helps every entry point word an error.

pub mod admission;
pub mod audit;
pub mod certs;
pub mod cli;
pub mod commands;
pub mod errors;
pub mod exceptions;
pub mod fix;
pub mod lint;
pub mod manifests;
pub mod report;
pub mod server;
pub mod static_admission;
