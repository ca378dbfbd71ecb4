//! Which Windows build an image needs, from its name and tag.
//!
//! With process isolation a Windows container's base-image build must fit
//! the node's (`node.kubernetes.io/windows-build`, e.g. `10.0.17763`):
//! [`runs_on`] says when. The table of releases and the names image tags use for them is data:
//! `policies/windows-builds.yaml`, embedded and parsed strictly. The lookup
//! ([`image_build`]) is pure and allocation-light; it runs once per
//! container of a Windows pod.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use serde::Deserialize;

/// The embedded table.
pub const BUILDS_TABLE: &str = include_str!("../../policies/windows-builds.yaml");

/// The node label that carries a Windows node's build (`10.0.17763`).
pub const WINDOWS_BUILD_LABEL: &str = "node.kubernetes.io/windows-build";

/// A Windows build, `MAJOR.MINOR.BUILD` as in the node label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Build {
    pub major: u16,
    pub minor: u16,
    pub build: u32,
}

impl Build {
    #[must_use]
    pub const fn new(major: u16, minor: u16, build: u32) -> Self {
        Self {
            major,
            minor,
            build,
        }
    }
}

impl fmt::Display for Build {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.build)
    }
}

/// Not a `MAJOR.MINOR.BUILD[.REVISION]` version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Windows build {0:?}: expected MAJOR.MINOR.BUILD, e.g. 10.0.17763")]
pub struct ParseBuildError(String);

impl FromStr for Build {
    type Err = ParseBuildError;

    /// Reads `10.0.17763`, and `10.0.17763.5830` (the revision is ignored:
    /// the node label and compatibility are per build).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseBuildError(s.to_owned());
        let mut parts = s.split('.');
        let mut next = || {
            parts
                .next()
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        };
        let major = next().and_then(|p| p.parse().ok()).ok_or_else(err)?;
        let minor = next().and_then(|p| p.parse().ok()).ok_or_else(err)?;
        let build = next().and_then(|p| p.parse().ok()).ok_or_else(err)?;
        match parts.next() {
            None => {}
            Some(rev) if !rev.is_empty() && rev.bytes().all(|b| b.is_ascii_digit()) => {}
            Some(_) => return Err(err()),
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(Self::new(major, minor, build))
    }
}

impl<'de> Deserialize<'de> for Build {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One Windows release: its build and the names tags use for it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Release {
    pub build: Build,
    /// Lowercase tag words: `ltsc2019`, `1809`, `20h2`.
    pub names: Vec<String>,
    /// A long-term servicing release of the stable container ABI
    /// (Windows Server 2022 and later): the oldest image build the hosts
    /// after it run.
    #[serde(default, rename = "stableAbi")]
    pub stable_abi: bool,
}

/// The release table and where release names are trusted.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildTable {
    pub releases: Vec<Release>,
    /// Repositories whose tags name a release anywhere (`*` wildcards).
    pub repositories: Vec<String>,
    /// Tag words after which a release name counts in any image.
    pub markers: Vec<String>,
}

/// The embedded table, parsed once.
///
/// # Panics
/// Never in a released binary: a unit test parses the embedded file.
pub static EMBEDDED: LazyLock<BuildTable> = LazyLock::new(|| {
    BuildTable::parse(BUILDS_TABLE).expect("policies/windows-builds.yaml is valid")
});

/// The Windows build an image needs, by the embedded table; `None` when the
/// name and tag do not say (`:latest`, no tag, not a Windows image).
#[must_use]
pub fn image_build(image: &str) -> Option<Build> {
    EMBEDDED.image_build(image)
}

/// Can a host of build `host` run a process-isolated container of an image
/// built for `image`, by the embedded table? See [`BuildTable::runs_on`].
#[must_use]
pub fn runs_on(host: Build, image: Build) -> bool {
    EMBEDDED.runs_on(host, image)
}

/// The first build of the stable container ABI (Windows Server 2022).
pub const STABLE_ABI_FROM: Build = Build::new(10, 0, 20348);

/// The release name for a build (`ltsc2019` for 10.0.17763), for messages.
#[must_use]
pub fn release_name(build: Build) -> Option<&'static str> {
    EMBEDDED.release_name(build)
}

impl BuildTable {
    /// Parses a table strictly.
    ///
    /// # Errors
    /// Invalid YAML, an unknown key, or a malformed build.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut t: Self = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        for r in &mut t.releases {
            for n in &mut r.names {
                *n = n.to_ascii_lowercase();
            }
        }
        for m in &mut t.markers {
            *m = m.to_ascii_lowercase();
        }
        Ok(t)
    }

    /// Can a host of build `host` run a process-isolated container of an
    /// image built for `image`? Below Windows Server 2022 (10.0.20348) only
    /// the same build; from it on, any build from the newest stable-ABI LTSC
    /// release older than the host (10.0.20348 when there is none) up to the
    /// host's own: a Windows Server 2025 host (10.0.26100) runs 10.0.20348
    /// to 10.0.26100, a Windows Server 2022 host only 10.0.20348.
    ///
    /// This is containerd's platform matcher, which picks the image's
    /// Windows manifest on pull: `checkWindowsHostAndContainerCompat` in
    /// github.com/containerd/platforms v1.0.0-rc.2 (containerd 2.2), the same
    /// result for these builds as v0.2.1 (containerd 1.7.19 and later 1.7)
    /// and v1.0.0-rc.0/rc.1 (containerd 2.0 and 2.1), and hcsshim's
    /// `osversion.CheckHostAndContainerCompat` (hcsshim v0.11 to v0.14,
    /// containerd 1.7.6 to 1.7.18); Microsoft, "Windows container version
    /// compatibility".
    #[must_use]
    pub fn runs_on(&self, host: Build, image: Build) -> bool {
        if host.major != image.major || host.minor != image.minor {
            return false;
        }
        if host < STABLE_ABI_FROM {
            return host == image;
        }
        let oldest = self
            .releases
            .iter()
            .filter(|r| r.stable_abi && r.build < host)
            .map(|r| r.build)
            .max()
            .unwrap_or(STABLE_ABI_FROM);
        oldest <= image && image <= host
    }

    #[must_use]
    pub fn release_name(&self, build: Build) -> Option<&str> {
        self.releases
            .iter()
            .find(|r| r.build == build)
            .and_then(|r| r.names.first())
            .map(String::as_str)
    }

    fn by_name(&self, word: &str) -> Option<Build> {
        self.releases
            .iter()
            .find(|r| r.names.iter().any(|n| n.eq_ignore_ascii_case(word)))
            .map(|r| r.build)
    }

    /// The build an image needs, or `None` when its name and tag do not say.
    /// Allocation-free unless the tag has a plain-number release name or a
    /// `10.x` version (then the repository is matched, lowercased).
    #[must_use]
    pub fn image_build(&self, image: &str) -> Option<Build> {
        let (repository, tag) = split_image(image);
        let tag = tag?;
        let mut known: Option<bool> = None;
        let mut is_known = || {
            *known.get_or_insert_with(|| {
                let repository = repository.to_ascii_lowercase();
                self.repositories
                    .iter()
                    .any(|p| crate::decision::glob::glob_match(p, &repository))
            })
        };
        let mut after_marker = false;
        for word in tag.split(['-', '_']) {
            let numeric = word.bytes().all(|c| c.is_ascii_digit());
            if let Some(b) = self.by_name(word)
                && (!numeric || after_marker || is_known())
            {
                return Some(b);
            }
            if word.starts_with("10.")
                && let Ok(b) = word.parse::<Build>()
                && (after_marker || is_known())
            {
                return Some(b);
            }
            after_marker = self.markers.iter().any(|m| m.eq_ignore_ascii_case(word));
        }
        None
    }
}

/// Splits `registry/repo:tag@digest` into the repository (without the
/// Docker Hub prefixes `docker.io/` and `library/`) and the tag, if any.
#[must_use]
pub fn split_image(image: &str) -> (&str, Option<&str>) {
    let image = image.trim();
    let image = image.split_once('@').map_or(image, |(name, _)| name);
    let (repository, tag) = match image.rfind(':') {
        Some(i) if !image[i..].contains('/') => (&image[..i], Some(&image[i + 1..])),
        _ => (image, None),
    };
    let repository = repository
        .strip_prefix("docker.io/")
        .or_else(|| repository.strip_prefix("index.docker.io/"))
        .unwrap_or(repository);
    let repository = repository.strip_prefix("library/").unwrap_or(repository);
    (repository, tag.filter(|t| !t.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Option<Build> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn embedded_table_parses_and_is_consistent() {
        let t = BuildTable::parse(BUILDS_TABLE).unwrap();
        assert!(t.releases.len() >= 10);
        let mut names = std::collections::HashSet::new();
        for r in &t.releases {
            assert!(!r.names.is_empty(), "{} has no names", r.build);
            for n in &r.names {
                assert!(names.insert(n.clone()), "{n} names two releases");
            }
        }
    }

    #[test]
    fn the_table_is_parsed_strictly() {
        let e = BuildTable::parse("releases: []\nrepositories: []\nmarkers: []\nextra: 1\n")
            .unwrap_err();
        assert!(e.contains("extra"), "{e}");
        let e = BuildTable::parse(
            "releases: [{build: ltsc2019, names: [x]}]\nrepositories: []\nmarkers: []\n",
        )
        .unwrap_err();
        assert!(e.contains("ltsc2019"), "{e}");
    }

    #[test]
    fn base_images_by_release_name() {
        let cases = [
            (
                "mcr.microsoft.com/windows/servercore:ltsc2019",
                "10.0.17763",
            ),
            ("mcr.microsoft.com/windows/servercore:1809", "10.0.17763"),
            (
                "mcr.microsoft.com/windows/servercore:ltsc2022",
                "10.0.20348",
            ),
            (
                "mcr.microsoft.com/windows/servercore:ltsc2025",
                "10.0.26100",
            ),
            ("mcr.microsoft.com/windows/nanoserver:1809", "10.0.17763"),
            (
                "mcr.microsoft.com/windows/nanoserver:ltsc2022",
                "10.0.20348",
            ),
            ("mcr.microsoft.com/windows/server:ltsc2022", "10.0.20348"),
            ("mcr.microsoft.com/windows:1903", "10.0.18362"),
            ("mcr.microsoft.com/windows:1909", "10.0.18363"),
            ("mcr.microsoft.com/windows/servercore:2004", "10.0.19041"),
            ("mcr.microsoft.com/windows/servercore:20H2", "10.0.19042"),
            ("mcr.microsoft.com/windows/nanoserver:1709", "10.0.16299"),
            ("mcr.microsoft.com/windows/servercore:1803", "10.0.17134"),
            (
                "mcr.microsoft.com/windows/servercore:ltsc2016",
                "10.0.14393",
            ),
            (
                "MCR.Microsoft.com/Windows/ServerCore:LTSC2019",
                "10.0.17763",
            ),
        ];
        for (image, want) in cases {
            assert_eq!(image_build(image), b(want), "{image}");
        }
    }

    #[test]
    fn full_version_tags_and_suffixes() {
        let cases = [
            (
                "mcr.microsoft.com/windows/servercore:10.0.17763.5830",
                "10.0.17763",
            ),
            (
                "mcr.microsoft.com/windows/nanoserver:10.0.20348.2527",
                "10.0.20348",
            ),
            (
                "mcr.microsoft.com/windows/servercore:10.0.26100.1742-amd64",
                "10.0.26100",
            ),
            (
                "mcr.microsoft.com/windows/servercore:ltsc2019-amd64",
                "10.0.17763",
            ),
            (
                "mcr.microsoft.com/windows/servercore:1809-KB5034127",
                "10.0.17763",
            ),
            // A build not (yet) in the table is still read from the version.
            (
                "mcr.microsoft.com/windows/servercore:10.0.25398.830",
                "10.0.25398",
            ),
            (
                "mcr.microsoft.com/windows/servercore:ltsc2022@sha256:0123abcd",
                "10.0.20348",
            ),
        ];
        for (image, want) in cases {
            assert_eq!(image_build(image), b(want), "{image}");
        }
    }

    #[test]
    fn derived_images() {
        let cases = [
            (
                "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2019",
                "10.0.17763",
            ),
            (
                "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
                "10.0.20348",
            ),
            (
                "mcr.microsoft.com/dotnet/framework/aspnet:4.8-windowsservercore-ltsc2022",
                "10.0.20348",
            ),
            (
                "mcr.microsoft.com/dotnet/framework/runtime:4.8.1-windowsservercore-ltsc2025",
                "10.0.26100",
            ),
            (
                "mcr.microsoft.com/dotnet/framework/sdk:4.8-20240109-windowsservercore-ltsc2019",
                "10.0.17763",
            ),
            (
                "mcr.microsoft.com/dotnet/framework/samples:aspnetapp-windowsservercore-ltsc2019",
                "10.0.17763",
            ),
            (
                "mcr.microsoft.com/dotnet/aspnet:8.0-nanoserver-1809",
                "10.0.17763",
            ),
            (
                "mcr.microsoft.com/dotnet/runtime:8.0-nanoserver-ltsc2022",
                "10.0.20348",
            ),
            (
                "mcr.microsoft.com/powershell:lts-nanoserver-1809",
                "10.0.17763",
            ),
            (
                "mcr.microsoft.com/powershell:lts-nanoserver-ltsc2022",
                "10.0.20348",
            ),
            ("microsoft/iis:windowsservercore-1709", "10.0.16299"),
            ("microsoft/windowsservercore:1709", "10.0.16299"),
            ("docker.io/microsoft/nanoserver:1803", "10.0.17134"),
            (
                "mcr.microsoft.com/oss/kubernetes/pause:3.9-windows-ltsc2022-amd64",
                "10.0.20348",
            ),
            (
                "mcr.microsoft.com/oss/kubernetes-csi/livenessprobe:v2.0.1-alpha.1-windows-1809-amd64",
                "10.0.17763",
            ),
            (
                "joymon/config-map-file-mounting:lts-7.2-nanoserver-1809",
                "10.0.17763",
            ),
            ("example.com/team/app:v3-ltsc2022", "10.0.20348"),
            (
                "example.com/team/app:1.2-windowsservercore-20H2",
                "10.0.19042",
            ),
        ];
        for (image, want) in cases {
            assert_eq!(image_build(image), b(want), "{image}");
        }
    }

    #[test]
    fn unknown_builds_stay_unknown() {
        for image in [
            "mcr.microsoft.com/windows/servercore",
            "mcr.microsoft.com/windows/servercore:latest",
            "mcr.microsoft.com/windows/servercore/iis",
            "mcr.microsoft.com/dotnet/framework/samples:aspnetapp",
            "sigwindowstools/flannel:v0.13.0-nanoserver",
            "calico/windows:v3.25.2",
            // Plain numbers are ordinary versions outside the known repositories.
            "example.com/app:1809",
            "example.com/app:2004-03",
            "example.com/app:10.0.17763",
            "postgres:10.0.1",
            "nginx:1.27",
            "registry.k8s.io/pause:3.9",
            "mcr.microsoft.com/powershell:lts-debian-12",
            "",
            ":",
        ] {
            assert_eq!(image_build(image), None, "{image}");
        }
    }

    #[test]
    fn hosts_run_images_of_their_stable_abi_range() {
        let b = |s: &str| s.parse::<Build>().unwrap();
        let cases = [
            // host, image, runs
            ("10.0.17763", "10.0.17763", true),
            ("10.0.17763", "10.0.14393", false),
            ("10.0.17763", "10.0.20348", false),
            ("10.0.19042", "10.0.17763", false),
            ("10.0.20348", "10.0.20348", true),
            ("10.0.20348", "10.0.17763", false),
            ("10.0.20348", "10.0.26100", false),
            ("10.0.25398", "10.0.20348", true),
            ("10.0.26100", "10.0.20348", true),
            ("10.0.26100", "10.0.25398", true),
            ("10.0.26100", "10.0.26100", true),
            ("10.0.26100", "10.0.17763", false),
            ("10.0.26100", "10.0.26200", false),
            // After Windows Server 2025 the oldest image is ltsc2025.
            ("10.0.26300", "10.0.26100", true),
            ("10.0.26300", "10.0.20348", false),
            ("6.3.26100", "10.0.26100", false),
        ];
        for (host, image, want) in cases {
            assert_eq!(runs_on(b(host), b(image)), want, "{image} on {host}");
        }
    }

    #[test]
    fn release_names_for_messages() {
        assert_eq!(release_name(Build::new(10, 0, 17763)), Some("ltsc2019"));
        assert_eq!(release_name(Build::new(10, 0, 20348)), Some("ltsc2022"));
        assert_eq!(release_name(Build::new(10, 0, 19042)), Some("20h2"));
        assert_eq!(release_name(Build::new(10, 0, 1)), None);
    }

    #[test]
    fn build_values_parse_like_the_node_label() {
        assert_eq!("10.0.17763".parse(), Ok(Build::new(10, 0, 17763)));
        assert_eq!("10.0.17763.5830".parse(), Ok(Build::new(10, 0, 17763)));
        for bad in [
            "",
            "10.0",
            "10.0.x",
            "ltsc2019",
            "10.0.17763.1.2",
            "10..17763",
        ] {
            assert!(bad.parse::<Build>().is_err(), "{bad}");
        }
    }

    #[test]
    fn splits_image_references() {
        assert_eq!(split_image("nginx"), ("nginx", None));
        assert_eq!(
            split_image("docker.io/library/nginx:1.27"),
            ("nginx", Some("1.27"))
        );
        assert_eq!(
            split_image("localhost:5000/app@sha256:ab"),
            ("localhost:5000/app", None)
        );
        assert_eq!(
            split_image("localhost:5000/app:v1"),
            ("localhost:5000/app", Some("v1"))
        );
    }
}
