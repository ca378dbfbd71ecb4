//! winadmit: the admission webhook and policy validator that makes Windows
//! nodes in Kubernetes safe to use.
//!
//! The source tree has one folder per layer; `tests/verdicts/layers.rs` checks that
//! each imports only what its layer may:
//!
//! - [`decision`]: the pure decision. [`decision::decide::decide`] is the
//!   one decision every entry point calls: the rules over a workload, the
//!   verdict and the JSON Patch. No files, no network, no processes, no
//!   async, no clock: it receives values, and imports only itself.
//! - [`input`]: readers of input: YAML with positions, manifest files and
//!   streams, policy files, image facts files and OCI registries. They import only
//!   [`decision`] and each other.
//! - [`render`]: `lint`'s output formats (text, JSON, SARIF, JUnit) and
//!   the escaping and colouring they share. They import [`decision`],
//!   [`input`] and each other.
//! - [`entry`]: the entry points, which decode input, call the decision and
//!   encode its answer: the webhook (AdmissionReview, HTTP, TLS, the watch
//!   cache, metrics), `lint` and `--fix`, `report` with its own formats, the
//!   command line and the install manifests. They may import every layer.

pub mod decision;
pub mod entry;
pub mod input;
pub mod render;
