//! Reading an image facts file (`--image-facts`; `winadmit images resolve`
//! writes it): the file's text, parsed by
//! [`KnownImages::parse`](crate::decision::images::KnownImages::parse).

use std::path::{Path, PathBuf};

use crate::decision::images::KnownImages;

/// Reads an image facts file.
///
/// # Errors
/// The file cannot be read, is not JSON of the format
/// [`crate::decision::images`] describes, or holds a value out of place;
/// the error names the file and the field.
pub fn read(path: &Path) -> Result<KnownImages, FactsFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| FactsFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    KnownImages::parse(&text).map_err(|message| FactsFileError::Invalid {
        path: path.to_owned(),
        message,
    })
}

/// An image facts file failed to load.
#[derive(Debug, thiserror::Error)]
pub enum FactsFileError {
    #[error("cannot read image facts file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "invalid image facts file {path}: {message} (expected {{\"images\": {{\"<image>\": {{\"digest\": \"sha256:...\", \"platforms\": [{{\"os\": ..., \"architecture\": ...}}]}}}}}}, as `winadmit images resolve` writes)"
    )]
    Invalid { path: PathBuf, message: String },
}
