//! One policy file as written: the keys it may hold (unknown keys are
//! errors), how a rule's setting reads (`error`, `off`, `{severity, mode}`),
//! the `params` it layers, and the header (`apiVersion`, `kind`) it must
//! carry when it gives one.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::check::{At, check_each};
use super::load::parse_error;
use super::{
    ClusterBlock, Exemptions, Level, Mode, POLICY_API_VERSION, PolicyError, Reach, RuleParams,
    RuleSetting, Skips, Taint,
};
use crate::decision::cluster::Stance;

/// The retired `profile` key: read only to say what to write instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Profile {
    Default,
    Containerd,
}

impl<'de> Deserialize<'de> for RuleSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, MapAccess, Visitor, value::MapAccessDeserializer};

        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Detail {
            severity: Option<Level>,
            mode: Option<Mode>,
        }
        struct V;
        const EXPECTED: &str = "error, warning, info, off, or a map with `severity` and/or `mode`";
        impl<'de> Visitor<'de> for V {
            type Value = RuleSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<RuleSetting, E> {
                let level = match v {
                    "error" => Level::Error,
                    "warning" => Level::Warning,
                    "info" => Level::Info,
                    "off" => Level::Off,
                    other => {
                        return Err(E::custom(format!(
                            "unknown severity {other:?}: expected {EXPECTED}"
                        )));
                    }
                };
                Ok(RuleSetting {
                    level: Some(level),
                    mode: None,
                })
            }
            // YAML 1.1 readers turn a bare `off` into `false`.
            fn visit_bool<E: Error>(self, v: bool) -> Result<RuleSetting, E> {
                if v {
                    Err(E::custom(format!(
                        "`true` is not a severity: expected {EXPECTED}"
                    )))
                } else {
                    Ok(RuleSetting {
                        level: Some(Level::Off),
                        mode: None,
                    })
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RuleSetting, A::Error> {
                let d = Detail::deserialize(MapAccessDeserializer::new(map))?;
                Ok(RuleSetting {
                    level: d.severity,
                    mode: d.mode,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// `params` as written in one policy file: each key replaces the value
/// layered so far, keys left out keep it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ParamsFile {
    windows_images: Option<Vec<String>>,
    certain_windows_images: Option<Vec<String>>,
    linux_images: Option<Vec<String>>,
    linux_tag_words: Option<Vec<String>>,
    /// `null` clears a taint set by an earlier layer.
    #[serde(default, deserialize_with = "explicit_null")]
    windows_taint: Option<Option<Taint>>,
    hyperv_runtime_handlers: Option<Vec<String>>,
    hyperv_runtime_classes: Option<Vec<String>>,
    linux_host_paths: Option<Vec<String>>,
}

/// Tells a key written as `null` (`Some(None)`) from a key left out (`None`).
pub(super) fn explicit_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<Taint>>, D::Error> {
    Option::<Taint>::deserialize(d).map(Some)
}

impl ParamsFile {
    /// Values the API server would refuse in what `/mutate` writes from
    /// them: the taint's key and value, the RuntimeClass names.
    pub(super) fn check(&self, at: At<'_>) -> Result<(), PolicyError> {
        if let Some(Some(taint)) = &self.windows_taint
            && let Some((field, why)) = taint.problem()
        {
            return Err(at(
                &format!("/params/windowsTaint/{field}"),
                format!("params.windowsTaint.{field}: {why}"),
            ));
        }
        if let Some(names) = &self.hyperv_runtime_classes {
            check_each(names, "params.hypervRuntimeClasses", at, |n| {
                crate::decision::names::dns1123_subdomain(n)
                    .map(|why| format!("{n:?} is not a valid RuntimeClass name: {why}"))
            })?;
        }
        Ok(())
    }

    pub(super) fn apply(self, to: &mut RuleParams) {
        let Self {
            windows_images,
            certain_windows_images,
            linux_images,
            linux_tag_words,
            windows_taint,
            hyperv_runtime_handlers,
            hyperv_runtime_classes,
            linux_host_paths,
        } = self;
        let lower = |v: Vec<String>| v.into_iter().map(|s| s.to_ascii_lowercase()).collect();
        // What was worked out under the old parameters no longer holds.
        to.image_facts = crate::decision::rules::ImageFactsCache::default();
        if let Some(v) = windows_images {
            to.windows_images = v;
        }
        if let Some(v) = certain_windows_images {
            to.certain_windows_images = lower(v);
        }
        if let Some(v) = linux_images {
            to.linux_images = lower(v);
        }
        if let Some(v) = linux_tag_words {
            to.linux_tag_words = lower(v);
        }
        if let Some(v) = windows_taint {
            to.windows_taint = v;
        }
        if let Some(v) = hyperv_runtime_handlers {
            to.hyperv_runtime_handlers = v;
        }
        if let Some(v) = hyperv_runtime_classes {
            to.hyperv_runtime_classes = v;
        }
        if let Some(v) = linux_host_paths {
            to.linux_host_paths = v;
        }
    }
}

/// One policy file as written: every key optional, unknown keys rejected.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PolicyFile {
    #[serde(rename = "apiVersion")]
    pub(super) api_version: Option<String>,
    pub(super) kind: Option<String>,
    /// Retired: accepted with a notice saying what to write instead.
    pub(super) profile: Option<Profile>,
    pub(super) stance: Option<Stance>,
    pub(super) cluster: Option<ClusterBlock>,
    pub(super) mode: Option<Mode>,
    pub(super) namespace_mode_label: Option<String>,
    pub(super) windows_runtime_classes: Option<Vec<String>>,
    pub(super) rules: Option<BTreeMap<String, RuleSetting>>,
    pub(super) exemptions: Option<Exemptions>,
    pub(super) reach: Option<Reach>,
    pub(super) skips: Option<Skips>,
    pub(super) exceptions: Option<crate::decision::exceptions::ExceptionSettings>,
    pub(super) params: Option<ParamsFile>,
    /// Read as a map and layered key by key over the current settings.
    pub(super) mutation: Option<serde_json::Map<String, serde_json::Value>>,
    /// Custom resources with a pod template, beyond the built-in ones.
    pub(super) pod_templates: Option<Vec<crate::decision::workload::DeclaredKind>>,
}

/// One policy file's text, parsed strictly; blank text is an empty file.
pub(super) fn parse_file(path: &Path, text: &str) -> Result<PolicyFile, PolicyError> {
    if text.trim().is_empty() {
        return Ok(PolicyFile::default());
    }
    serde_saphyr::from_str(text).map_err(|e| {
        parse_error(path, &e).unwrap_or_else(|| PolicyError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })
    })
}

/// `apiVersion` and `kind`, when a file gives them, must be ours.
pub(super) fn check_header(
    api_version: Option<&str>,
    kind: Option<&str>,
    at: At<'_>,
) -> Result<(), PolicyError> {
    if let Some(v) = api_version
        && v != POLICY_API_VERSION
    {
        return Err(at(
            "/apiVersion",
            format!("apiVersion must be {POLICY_API_VERSION}, not {v}"),
        ));
    }
    if let Some(k) = kind
        && k != "Policy"
    {
        return Err(at("/kind", format!("kind must be Policy, not {k}")));
    }
    Ok(())
}

/// What to write instead of the retired `profile` key.
pub(super) fn retired_profile_notice(path: &Path, profile: Profile) -> String {
    let instead = match profile {
        Profile::Containerd => {
            "`cluster: {containerRuntime: containerd}` (the default from Kubernetes 1.24)"
        }
        Profile::Default => {
            "nothing: the target cluster decides (`cluster: {kubernetesVersion: ..., containerRuntime: ...}`)"
        }
    };
    format!(
        "{}: `profile` is retired and ignored: verdicts follow the target cluster; write {instead} instead",
        path.display()
    )
}
