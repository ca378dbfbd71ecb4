//! Exceptions: `PolicyException` objects (`winadmit.io/v1alpha1`) a
//! platform team grants, each for some rules on some objects, with a
//! reason, an optional ticket and owner, and an end date (`expiresAt`).
//!
//! Which exceptions count is the policy's `exceptions` block: only those
//! in the namespaces it lists (none listed: winadmit's own namespace),
//! only until their end date, only when that end date lies within the
//! policy's longest lifetime of their creation, and never for a rule that
//! guards a security boundary (`rules::BOUNDARY`, the gMSA rules) unless
//! the policy names that rule (the engine says which rules those are: this
//! module imports no rule, so the cluster facts may carry exceptions). The others are [`Ignored`], with the reason.
//!
//! Pure: "now" is an input ([`ExceptionSet::new`]); the engine asks
//! [`ExceptionSet::covering`] for each finding, and a covered finding is
//! kept, marked with the exception that covers it
//! ([`crate::decision::engine::Excepted`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decision::glob::glob_match;
use crate::decision::path::FieldPath;
use crate::decision::view::containers_of;
use crate::decision::workload::Workload;

mod time;
pub use time::{DAY, Timestamp};

/// The exception objects' API group.
pub const GROUP: &str = "winadmit.io";
/// The exception objects' `apiVersion`.
pub const API_VERSION: &str = "winadmit.io/v1alpha1";
/// The exception objects' `kind`.
pub const KIND: &str = "PolicyException";
/// The longest lifetime of an exception by default, in days.
pub const DEFAULT_MAX_LIFETIME_DAYS: u32 = 90;

/// The policy's `exceptions` block.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExceptionSettings {
    /// The namespaces whose exceptions count; empty: winadmit's own.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// The longest an exception may last, counted from its creation.
    #[serde(default = "default_lifetime")]
    pub max_lifetime_days: u32,
    /// Security-boundary rules (gMSA) an exception may cover, by name.
    #[serde(default)]
    pub boundary_rules: Vec<String>,
}

fn default_lifetime() -> u32 {
    DEFAULT_MAX_LIFETIME_DAYS
}

impl Default for ExceptionSettings {
    fn default() -> Self {
        Self {
            namespaces: Vec::new(),
            max_lifetime_days: DEFAULT_MAX_LIFETIME_DAYS,
            boundary_rules: Vec::new(),
        }
    }
}

impl ExceptionSettings {
    /// Do exceptions in `namespace` count (`own`: winadmit's namespace)?
    #[must_use]
    pub fn trusts(&self, namespace: &str, own: &str) -> bool {
        if self.namespaces.is_empty() {
            namespace == own
        } else {
            self.namespaces.iter().any(|n| n == namespace)
        }
    }

    /// The namespaces whose exceptions count, as a list to show.
    #[must_use]
    pub fn trusted(&self, own: &str) -> Vec<String> {
        if self.namespaces.is_empty() {
            vec![own.to_owned()]
        } else {
            self.namespaces.clone()
        }
    }

    /// May an exception cover rule `id` (`boundary`: it guards a security
    /// boundary)?
    #[must_use]
    pub fn may_cover(&self, id: &str, boundary: bool) -> bool {
        !boundary || self.boundary_rules.iter().any(|r| r == id)
    }
}

/// Which objects an exception covers; every list given must match, an
/// empty one matches anything.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// `kind`s, as written (`Deployment`, `Pod`).
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Names, with `*` wildcards.
    #[serde(default)]
    pub names: Vec<String>,
    /// Labels of the object or its pod template.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// Container names, with `*` wildcards: only findings in those containers.
    #[serde(default)]
    pub containers: Vec<String>,
    /// Images, with `*` wildcards: only findings in containers running them.
    #[serde(default)]
    pub images: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    rules: Vec<String>,
    #[serde(default, rename = "match")]
    matches: Match,
    reason: String,
    #[serde(default)]
    ticket: Option<String>,
    #[serde(default)]
    owner: Option<String>,
    expires_at: String,
}

/// What a decision says of the exception that covers a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExceptionRef {
    pub namespace: String,
    pub name: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The end date, RFC 3339.
    pub expires_at: String,
}

impl ExceptionRef {
    /// `PolicyException ns/name`.
    #[must_use]
    pub fn title(&self) -> String {
        format!("{KIND} {}/{}", self.namespace, self.name)
    }
}

/// One exception object, read.
#[derive(Debug, Clone)]
pub struct Exception {
    pub reference: ExceptionRef,
    pub rules: Vec<String>,
    pub matches: Match,
    selector: Option<Selector>,
    pub created: Option<Timestamp>,
    pub expires_at: Timestamp,
}

/// Is this object a `PolicyException` of ours?
#[must_use]
pub fn is_exception(api_version: &str, kind: &str) -> bool {
    kind == KIND && api_version.split('/').next() == Some(GROUP)
}

impl Exception {
    /// Reads an exception object (`namespace` is the one it is read in
    /// when the object names none).
    ///
    /// # Errors
    /// A missing or invalid field, named by its path.
    pub fn from_object(object: &Value, namespace: Option<&str>) -> Result<Self, String> {
        let meta = &object["metadata"];
        let name = meta["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .ok_or("metadata.name: required")?;
        let namespace = meta["namespace"]
            .as_str()
            .or(namespace)
            .ok_or("metadata.namespace: required (an exception counts only in the namespaces the policy lists)")?;
        let created = match meta["creationTimestamp"].as_str() {
            Some(t) => {
                Some(Timestamp::parse(t).map_err(|e| format!("metadata.creationTimestamp: {e}"))?)
            }
            None => None,
        };
        let spec: Spec = serde_path_to_error::deserialize(&object["spec"])
            .map_err(|e| format!("spec.{}: {}", e.path(), e.inner()))?;
        if spec.reason.trim().is_empty() {
            return Err("spec.reason: required: say why the rules do not apply".into());
        }
        if spec.rules.is_empty() {
            return Err("spec.rules: name at least one rule".into());
        }
        let expires_at =
            Timestamp::parse(&spec.expires_at).map_err(|e| format!("spec.expiresAt: {e}"))?;
        let selector = match &spec.matches.selector {
            Some(s) => Some(
                Selector::try_from(s.clone()).map_err(|e| format!("spec.match.selector: {e}"))?,
            ),
            None => None,
        };
        Ok(Self {
            reference: ExceptionRef {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                reason: spec.reason,
                ticket: spec.ticket.filter(|t| !t.is_empty()),
                owner: spec.owner.filter(|o| !o.is_empty()),
                expires_at: expires_at.to_string(),
            },
            rules: spec.rules,
            matches: spec.matches,
            selector,
            created,
            expires_at,
        })
    }

    /// Does this exception cover a finding of `rule` at `field` of `w`?
    fn covers(&self, w: &Workload<'_, '_>, rule: &str, field: &FieldPath) -> bool {
        let m = &self.matches;
        let any = |list: &[String], value: &str| {
            list.is_empty() || list.iter().any(|p| glob_match(p, value))
        };
        if !self.rules.iter().any(|r| r == rule)
            || !any(&m.kinds, w.kind_name)
            || !any(&m.names, w.name)
            || !(m.namespaces.is_empty()
                || w.namespace
                    .is_some_and(|ns| m.namespaces.iter().any(|n| n == ns)))
        {
            return false;
        }
        if let Some(selector) = &self.selector {
            let labels: BTreeMap<String, String> = w
                .labels
                .into_iter()
                .chain(w.pod_labels())
                .flat_map(crate::decision::view::StrMap::iter)
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            if !selector.matches(&labels) {
                return false;
            }
        }
        if m.containers.is_empty() && m.images.is_empty() {
            return true;
        }
        container_at(w, field).is_some_and(|(name, image)| {
            any(&m.containers, name)
                && (m.images.is_empty() || image.is_some_and(|i| any(&m.images, i)))
        })
    }
}

/// The container (name and image) a field of `w` lies in, if any.
fn container_at<'v>(w: &Workload<'v, '_>, field: &FieldPath) -> Option<(&'v str, Option<&'v str>)> {
    let spec = w.spec?;
    containers_of(spec).into_iter().find_map(|c| {
        let prefix = w.spec_path.key(c.list.key()).index(c.index);
        field
            .starts_with(&prefix)
            .then(|| (c.name(), c.container.image.as_ref().map(|i| i.0.as_ref())))
    })
}

/// An exception that does not count, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ignored {
    pub namespace: String,
    pub name: String,
    pub why: String,
}

/// The exceptions in force at one instant, and those that are not.
#[derive(Debug, Clone, Default)]
pub struct ExceptionSet {
    in_force: Vec<Exception>,
    /// Exceptions that do not count (namespace not listed, ended, too
    /// long), with the reason.
    pub ignored: Vec<Ignored>,
    /// The earliest end date among those in force: when the set must be
    /// made again.
    pub next_end: Option<Timestamp>,
}

impl ExceptionSet {
    /// The exceptions of `objects` that count at `now` under `settings`
    /// (`own`: winadmit's own namespace). An exception without a creation
    /// time (a file) is measured from `now`, as the API server would
    /// create it.
    #[must_use]
    pub fn new(
        settings: &ExceptionSettings,
        own: &str,
        objects: impl IntoIterator<Item = Exception>,
        now: Timestamp,
    ) -> Self {
        let mut set = Self::default();
        for e in objects {
            let r = &e.reference;
            let longest = e
                .created
                .unwrap_or(now)
                .plus_days(settings.max_lifetime_days);
            let why = if !settings.trusts(&r.namespace, own) {
                Some(format!(
                    "namespace {} is not one whose exceptions count (the policy's exceptions.namespaces: {})",
                    r.namespace,
                    settings.trusted(own).join(", ")
                ))
            } else if e.expires_at <= now {
                Some(format!("ended at {}", r.expires_at))
            } else if e.expires_at > longest {
                Some(format!(
                    "expiresAt {} lies beyond its creation plus the policy's longest lifetime ({} days: {longest})",
                    r.expires_at, settings.max_lifetime_days
                ))
            } else {
                None
            };
            match why {
                Some(why) => set.ignored.push(Ignored {
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                    why,
                }),
                None => {
                    set.next_end = Some(set.next_end.map_or(e.expires_at, |n| n.min(e.expires_at)));
                    set.in_force.push(e);
                }
            }
        }
        set
    }

    /// The exceptions in force.
    #[must_use]
    pub fn in_force(&self) -> &[Exception] {
        &self.in_force
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.in_force.is_empty()
    }

    /// What tells one set from another: each exception in force, its end
    /// date, rules and reason (a change to any of them changes verdicts).
    #[must_use]
    pub fn fingerprint(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .in_force
            .iter()
            .map(|e| format!("{:?} {:?} {:?}", e.reference, e.rules, e.matches))
            .collect();
        f.sort();
        f
    }

    /// The exception that covers a finding of `rule` at `field` of `w`, if
    /// one does and the policy lets an exception cover the rule
    /// (`boundary`: the rule guards a security boundary).
    #[must_use]
    pub fn covering(
        &self,
        settings: &ExceptionSettings,
        w: &Workload<'_, '_>,
        (rule, boundary): (&str, bool),
        field: &FieldPath,
    ) -> Option<&ExceptionRef> {
        if !settings.may_cover(rule, boundary) {
            return None;
        }
        self.in_force
            .iter()
            .find(|e| e.covers(w, rule, field))
            .map(|e| &e.reference)
    }
}
