//! `report`'s input and its run: files through the manifest reader `lint`
//! uses ([`run`], `files`), a live cluster's objects as the live report
//! lists them ([`driver`]), and a `POST /report` body ([`body`]). What a
//! report says, its builder and its formats are the pure part, in
//! [`crate::render::report`].

pub mod body;
pub mod driver;
mod files;
pub mod run;

pub use driver::{Driver, ImageLookups, Input, Progress};
pub use run::run;

#[cfg(test)]
mod tests;
