//! What a registry says of an image: its digest and the platforms it
//! publishes (`os`, `architecture`, `variant`, `os.version`,
//! `os.features`), from its image index or its single manifest's config.
//!
//! The facts are resolved before the decision (by the registry resolver,
//! or read from an image facts file with `--image-facts` by
//! `crate::input::facts`) and passed in
//! through [`crate::decision::engine::Context::images`], like the cluster's nodes:
//! the decision itself stays pure. An image without facts is judged by its
//! name, as before; an image whose lookup failed is judged by its name too,
//! and a finding says the fact is unknown and why.
//!
//! The file format (`winadmit images resolve` writes it):
//!
//! ```json
//! {"images": {
//!   "nginx:1.27": {"digest": "sha256:4f2c...", "platforms": [
//!     {"os": "linux", "architecture": "amd64"},
//!     {"os": "linux", "architecture": "arm64", "variant": "v8"}]},
//!   "contoso/payments:4.2": {"digest": "sha256:...", "platforms": [
//!     {"os": "windows", "architecture": "amd64", "os.version": "10.0.20348.2527"}]},
//!   "registry.example/down:1": {"unknown": "registry.example: connection refused"}
//! }}
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::decision::windows_builds::Build;

/// One platform an image publishes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// `windows`, `linux`, ...
    pub os: String,
    /// `amd64`, `arm64`, ...
    pub architecture: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The Windows build for Windows images: `10.0.20348.2527`.
    #[serde(
        rename = "os.version",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub os_version: Option<String>,
    #[serde(rename = "os.features", default, skip_serializing_if = "Vec::is_empty")]
    pub os_features: Vec<String>,
}

impl Platform {
    #[must_use]
    pub fn is_windows(&self) -> bool {
        self.os.eq_ignore_ascii_case("windows")
    }

    /// The Windows build of `os.version` (`10.0.20348.2527` is
    /// 10.0.20348), for a Windows platform that says one.
    #[must_use]
    pub fn windows_build(&self) -> Option<Build> {
        if !self.is_windows() {
            return None;
        }
        self.os_version.as_deref()?.parse().ok()
    }
}

impl std::fmt::Display for Platform {
    /// `linux/arm64/v8`, `windows/amd64 10.0.20348.2527`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        if let Some(v) = &self.os_version {
            write!(f, " {v}")?;
        }
        Ok(())
    }
}

/// What the registry says of one image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageFacts {
    /// The digest the reference resolved to (`sha256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Every platform the image publishes (one for a single manifest).
    pub platforms: Vec<Platform>,
}

impl ImageFacts {
    /// Some platform is Windows: a Windows node can pull it.
    #[must_use]
    pub fn has_windows(&self) -> bool {
        self.platforms.iter().any(Platform::is_windows)
    }

    /// Some platform is not Windows: a Linux node can pull it.
    #[must_use]
    pub fn has_non_windows(&self) -> bool {
        self.platforms.iter().any(|p| !p.is_windows())
    }

    /// Only Windows platforms.
    #[must_use]
    pub fn windows_only(&self) -> bool {
        !self.platforms.is_empty() && !self.has_non_windows()
    }

    /// No Windows platform.
    #[must_use]
    pub fn no_windows(&self) -> bool {
        !self.platforms.is_empty() && !self.has_windows()
    }

    /// The Windows builds of its Windows platforms, sorted, once each.
    #[must_use]
    pub fn windows_builds(&self) -> Vec<Build> {
        let mut builds: Vec<Build> = self
            .platforms
            .iter()
            .filter_map(Platform::windows_build)
            .collect();
        builds.sort_unstable();
        builds.dedup();
        builds
    }

    /// `nginx:1.27 (sha256:4f2c1b0e5d6a...)`: the image and a short digest.
    #[must_use]
    pub fn name(&self, image: &str) -> String {
        match &self.digest {
            Some(_) if image.contains('@') => image.to_owned(),
            Some(d) => {
                let short: String = d.chars().take("sha256:".len() + 12).collect();
                if short.len() < d.len() {
                    format!("{image} ({short}...)")
                } else {
                    format!("{image} ({d})")
                }
            }
            None => image.to_owned(),
        }
    }

    /// `linux/amd64, linux/arm64/v8`.
    #[must_use]
    pub fn platform_list(&self) -> String {
        let mut out = String::new();
        for (i, p) in self.platforms.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{p}");
        }
        out
    }
}

/// The result of looking an image up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Known(ImageFacts),
    /// The lookup failed (registry down, 401, 404, deadline, malformed
    /// manifest): the rules fall back to the image's name.
    Unknown(String),
}

/// The facts known of the images an entry point is about to judge, keyed by the
/// reference as written in the pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownImages {
    pub images: BTreeMap<String, Lookup>,
}

impl KnownImages {
    #[must_use]
    pub fn get(&self, image: &str) -> Option<&Lookup> {
        self.images.get(image)
    }

    /// The facts of `image`, when its lookup succeeded.
    #[must_use]
    pub fn facts(&self, image: &str) -> Option<&ImageFacts> {
        match self.images.get(image)? {
            Lookup::Known(f) => Some(f),
            Lookup::Unknown(_) => None,
        }
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
    }

    pub fn insert(&mut self, image: impl Into<String>, lookup: Lookup) {
        self.images.insert(image.into(), lookup);
    }

    /// Parses the text of an image facts file.
    ///
    /// # Errors
    /// What is wrong, naming the field (`images["nginx:1.27"].platforms[0]`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let file: FactsFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path.is_empty() || path == "." {
                inner.to_string()
            } else {
                format!("{path}: {inner}")
            }
        })?;
        let mut known = Self::default();
        for (image, entry) in file.images {
            let lookup = Self::lookup_of(&image, entry)?;
            known.images.insert(image, lookup);
        }
        Ok(known)
    }

    /// One entry of an image facts file: a failed lookup with its reason,
    /// or the digest and platforms, checked.
    fn lookup_of(image: &str, entry: Entry) -> Result<Lookup, String> {
        let at = |field: &str| format!("images[{image:?}]{field}");
        let lookup = match entry {
            Entry {
                unknown: Some(why),
                digest: None,
                platforms: None,
            } => Lookup::Unknown(why),
            Entry {
                unknown: Some(_), ..
            } => {
                return Err(format!(
                    "{}: `unknown` (a failed lookup) cannot stand beside `digest` or `platforms`",
                    at("")
                ));
            }
            Entry {
                platforms: None, ..
            } => {
                return Err(format!(
                    "{}: missing `platforms` (or `unknown` for a failed lookup)",
                    at("")
                ));
            }
            Entry {
                digest,
                platforms: Some(platforms),
                ..
            } => {
                if platforms.is_empty() {
                    return Err(format!(
                        "{}: empty: an image publishes at least one platform",
                        at(".platforms")
                    ));
                }
                if let Some(d) = &digest
                    && !is_digest(d)
                {
                    return Err(format!(
                        "{}: {d:?} is not a digest (`sha256:` and 64 hex digits)",
                        at(".digest")
                    ));
                }
                for (i, p) in platforms.iter().enumerate() {
                    for (key, value) in [("os", &p.os), ("architecture", &p.architecture)] {
                        if value.trim().is_empty() {
                            return Err(format!(
                                "{}: empty",
                                at(&format!(".platforms[{i}].{key}"))
                            ));
                        }
                    }
                    if p.is_windows()
                        && let Some(v) = &p.os_version
                        && v.parse::<Build>().is_err()
                    {
                        return Err(format!(
                            "{}: {v:?} is not a Windows build (`10.0.20348` or `10.0.20348.2527`)",
                            at(&format!(".platforms[{i}][\"os.version\"]"))
                        ));
                    }
                }
                Lookup::Known(ImageFacts { digest, platforms })
            }
        };
        Ok(lookup)
    }

    /// The file's text: what [`KnownImages::parse`] reads back.
    #[must_use]
    pub fn to_json(&self) -> String {
        let images: BTreeMap<&str, Entry> = self
            .images
            .iter()
            .map(|(image, lookup)| {
                let entry = match lookup {
                    Lookup::Known(f) => Entry {
                        digest: f.digest.clone(),
                        platforms: Some(f.platforms.clone()),
                        unknown: None,
                    },
                    Lookup::Unknown(why) => Entry {
                        digest: None,
                        platforms: None,
                        unknown: Some(why.clone()),
                    },
                };
                (image.as_str(), entry)
            })
            .collect();
        let mut out = serde_json::to_string_pretty(&serde_json::json!({ "images": images }))
            .unwrap_or_default();
        out.push('\n');
        out
    }
}

/// `sha256:` and 64 lowercase hex digits (or another algorithm and hex).
#[must_use]
pub fn is_digest(d: &str) -> bool {
    d.split_once(':').is_some_and(|(alg, hex)| {
        !alg.is_empty()
            && alg
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+._-".contains(&b))
            && hex.len() >= 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            && (alg != "sha256" || hex.len() == 64)
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FactsFile {
    images: BTreeMap<String, Entry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    platforms: Option<Vec<Platform>>,
    /// Why the lookup failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unknown: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:4f2c1b0e5d6a7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708";

    #[test]
    fn reads_what_it_writes_and_describes_facts() {
        let text = format!(
            r#"{{"images": {{
              "nginx:1.27": {{"digest": "{D}", "platforms": [
                 {{"os": "linux", "architecture": "amd64"}},
                 {{"os": "linux", "architecture": "arm64", "variant": "v8"}}]}},
              "contoso/app:1": {{"platforms": [
                 {{"os": "windows", "architecture": "amd64", "os.version": "10.0.20348.2527", "os.features": ["win32k"]}},
                 {{"os": "windows", "architecture": "amd64", "os.version": "10.0.17763.5830"}}]}},
              "down:1": {{"unknown": "connection refused"}}
            }}}}"#
        );
        let known = KnownImages::parse(&text).unwrap();
        let nginx = known.facts("nginx:1.27").unwrap();
        assert!(nginx.no_windows() && !nginx.windows_only());
        assert_eq!(
            nginx.name("nginx:1.27"),
            "nginx:1.27 (sha256:4f2c1b0e5d6a...)"
        );
        assert_eq!(nginx.platform_list(), "linux/amd64, linux/arm64/v8");
        let app = known.facts("contoso/app:1").unwrap();
        assert!(app.windows_only());
        assert_eq!(
            app.windows_builds(),
            vec![Build::new(10, 0, 17763), Build::new(10, 0, 20348)]
        );
        assert_eq!(
            known.get("down:1"),
            Some(&Lookup::Unknown("connection refused".into()))
        );
        assert_eq!(KnownImages::parse(&known.to_json()).unwrap(), known);
    }

    #[test]
    fn bad_files_name_the_field() {
        let cases = [
            (
                r#"{"images": {"a": {"platforms": [{"os": "linux"}]}}}"#,
                "images.a.platforms[0]",
            ),
            (
                r#"{"images": {"a": {"platforms": []}}}"#,
                r#"images["a"].platforms: empty"#,
            ),
            (
                r#"{"images": {"a": {"digest": "sha256:xyz", "platforms": [{"os": "linux", "architecture": "amd64"}]}}}"#,
                r#"images["a"].digest"#,
            ),
            (
                r#"{"images": {"a": {"platforms": [{"os": "windows", "architecture": "amd64", "os.version": "ltsc"}]}}}"#,
                "os.version",
            ),
            (r#"{"images": {"a": {}}}"#, "missing `platforms`"),
            (
                r#"{"images": {"a": {"unknown": "x", "digest": "sha256:00"}}}"#,
                "cannot stand beside",
            ),
            (
                r#"{"images": {"a": {"platforms": [{"os": "linux", "architecture": "amd64", "arch": "x"}]}}}"#,
                "unknown field `arch`",
            ),
            (r#"{"image": {}}"#, "unknown field `image`"),
            ("[", "EOF"),
        ];
        for (text, want) in cases {
            let err = KnownImages::parse(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
