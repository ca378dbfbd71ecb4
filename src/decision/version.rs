//! Kubernetes minor versions, for version-aware rules.

use std::fmt;
use std::str::FromStr;

/// A Kubernetes `major.minor` version. Patch releases never change which
/// Windows rules apply, so they are accepted and ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    pub major: u16,
    pub minor: u16,
}

impl KubeVersion {
    #[must_use]
    pub const fn new(major: u16, minor: u16) -> Self {
        Self { major, minor }
    }

    /// The newest stable release winadmit knows (the one k8s-openapi's
    /// `latest` feature models). `--kubernetes-version` defaults to it.
    pub const LATEST: Self = Self::new(1, 37);
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("invalid Kubernetes version {0:?}: expected MAJOR.MINOR, e.g. 1.30 or v1.30.2")]
pub struct ParseVersionError(String);

impl FromStr for KubeVersion {
    type Err = ParseVersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseVersionError(s.to_owned());
        let t = s.trim().trim_start_matches('v');
        let mut parts = t.split('.');
        let major = parts.next().and_then(|p| p.parse().ok()).ok_or_else(err)?;
        // Managed clusters report minors like "30+" (GKE, EKS).
        let minor = parts
            .next()
            .map(|p| p.trim_end_matches('+'))
            .and_then(|p| p.parse().ok())
            .ok_or_else(err)?;
        if let Some(patch) = parts.next() {
            let numeric: String = patch.chars().take_while(char::is_ascii_digit).collect();
            if numeric.is_empty() {
                return Err(err());
            }
        }
        Ok(Self { major, minor })
    }
}

impl<'de> serde::Deserialize<'de> for KubeVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for KubeVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_spellings() {
        assert_eq!(
            "1.30".parse::<KubeVersion>().unwrap(),
            KubeVersion::new(1, 30)
        );
        assert_eq!(
            "v1.28.4".parse::<KubeVersion>().unwrap(),
            KubeVersion::new(1, 28)
        );
        assert_eq!(
            "1.29+".parse::<KubeVersion>().unwrap(),
            KubeVersion::new(1, 29)
        );
        assert_eq!(
            "v1.31.1-eks-1".parse::<KubeVersion>().unwrap(),
            KubeVersion::new(1, 31)
        );
        assert!("1".parse::<KubeVersion>().is_err());
        assert!("latest".parse::<KubeVersion>().is_err());
        assert!(KubeVersion::new(1, 9) < KubeVersion::new(1, 10));
    }
}
