//! The project itself: the layers of `src/`, file and function sizes, and the README's generated blocks.
//!
//! One test binary; each module is one subject, and the support code
//! they share is declared here once.

mod layers;
mod readme;
