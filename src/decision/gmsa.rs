//! Group Managed Service Accounts (gMSA): the facts the gMSA rules judge a
//! pod against, and the pure helpers they share.
//!
//! A Windows pod names a `GMSACredentialSpec` (`windows.k8s.io/v1`,
//! cluster-scoped) in `windowsOptions.gmsaCredentialSpecName`; the kubelet
//! reads only `windowsOptions.gmsaCredentialSpec`, the credential spec's
//! JSON, which admission fills in from the named object. Whether the
//! object exists, what it holds and whether the pod's service account may
//! `use` it are facts about the cluster: the entry points resolve them before the
//! decision (the webhook from its watch cache and LocalSubjectAccessReviews,
//! `lint` and `report` from the GMSACredentialSpec objects of their input)
//! and pass them in [`Facts`], as they pass the cluster's nodes. With no
//! facts (the entry point does not know the resource) every gMSA rule is silent.
//!
//! Pure: no I/O, no clock.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde_json::Value;

use crate::decision::view::{ContainerList, SpecView, WindowsOptionsView, containers_of};

/// The API group of `GMSACredentialSpec`.
pub const GROUP: &str = "windows.k8s.io";
/// The version the webhook reads (v1alpha1 is served too, deprecated).
pub const VERSION: &str = "v1";
/// The resource (plural).
pub const RESOURCE: &str = "gmsacredentialspecs";
/// The kind.
pub const KIND: &str = "GMSACredentialSpec";
/// The verb a service account needs on the credential spec it names.
pub const VERB: &str = "use";
/// The key of the credential spec's contents in the object.
pub const CONTENTS_KEY: &str = "credspec";

/// The question the webhook and the report ask the API server (in a
/// LocalSubjectAccessReview or a SubjectAccessReview): may the service
/// account `account` of `namespace` use the credential spec `name`? The
/// user and groups are those the API server gives a service account's
/// token.
#[must_use]
pub fn use_review(
    namespace: &str,
    account: &str,
    name: &str,
) -> k8s_openapi::api::authorization::v1::SubjectAccessReviewSpec {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReviewSpec};
    SubjectAccessReviewSpec {
        user: Some(format!("system:serviceaccount:{namespace}:{account}")),
        groups: Some(vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
        ]),
        resource_attributes: Some(ResourceAttributes {
            namespace: Some(namespace.to_owned()),
            verb: Some(VERB.to_owned()),
            group: Some(GROUP.to_owned()),
            version: Some(VERSION.to_owned()),
            resource: Some(RESOURCE.to_owned()),
            name: Some(name.to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// What is known of one `GMSACredentialSpec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredSpec {
    /// The object exists; its `credspec` contents, `None` when it has none
    /// (the key is absent, `null` or `""`).
    Found(Option<Value>),
    /// The object does not exist.
    Missing,
    /// The lookup failed (the API server's error, or its deadline). Only
    /// contents set in the pod are refused then, as they cannot be
    /// checked (WIN-GMSA-CONTENTS-MISMATCH); nothing else is assumed.
    Unavailable(String),
}

impl CredSpec {
    /// Reads a `GMSACredentialSpec` object (`windows.k8s.io/v1` or
    /// `v1alpha1`): its name and what it holds. `None` for other objects.
    #[must_use]
    pub fn from_object(value: &Value) -> Option<(String, Self)> {
        let api_version = value.get("apiVersion")?.as_str()?;
        let (group, _) = api_version.split_once('/')?;
        if group != GROUP || value.get("kind")?.as_str()? != KIND {
            return None;
        }
        let name = value.pointer("/metadata/name")?.as_str()?.to_owned();
        let contents = value
            .get(CONTENTS_KEY)
            .filter(|c| !c.is_null() && c.as_str() != Some(""))
            .cloned();
        Some((name, Self::Found(contents)))
    }
}

/// Whether a service account may `use` a credential spec, as the API
/// server's authorizer answered a (Local)SubjectAccessReview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authz {
    /// `status.allowed && !status.denied`.
    pub allowed: bool,
    /// `status.reason` (or `status.evaluationError`), possibly empty.
    pub reason: String,
}

/// Who asks to use which credential spec: (namespace, service account,
/// credential spec name).
pub type AuthzKey = (String, String, String);

/// The gMSA settings of one place of the pod, owned (the pod before an
/// UPDATE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Previous {
    pub place: Place,
    pub name: Option<String>,
    pub contents: Option<String>,
}

/// Where `windowsOptions` sit: the pod, or a container by list and name
/// (an UPDATE matches containers by name, as the upstream webhook does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Pod,
    Container(ContainerList, String),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pod => f.write_str("the pod"),
            Self::Container(list, name) => {
                let kind = match list {
                    ContainerList::Containers => "container",
                    ContainerList::InitContainers => "init container",
                    ContainerList::EphemeralContainers => "ephemeral container",
                };
                write!(f, "{kind} {name:?}")
            }
        }
    }
}

/// What an entry point knows of the cluster's gMSA credential specs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// Credential specs by name, as far as they were looked up.
    pub specs: BTreeMap<String, CredSpec>,
    /// `specs` holds every credential spec of the cluster: a name not in it
    /// does not exist (a watch cache, `lint`'s input). Otherwise a name not
    /// in it is unknown.
    pub complete: bool,
    /// Authorization answers, as far as they were asked.
    pub authz: BTreeMap<AuthzKey, Authz>,
    /// Authorizations an entry point wanted but could not ask (its identity may
    /// not create SubjectAccessReviews, or the call failed), with why: the
    /// answer is unknown, which is not a refusal (the live `report`).
    pub unasked: BTreeMap<AuthzKey, String>,
    /// The pod before an UPDATE (set by the decision, from the request).
    pub previous: Option<Vec<Previous>>,
}

impl Facts {
    /// What is known of credential spec `name` (`None`: unknown).
    #[must_use]
    pub fn spec(&self, name: &str) -> Option<&CredSpec> {
        const MISSING: &CredSpec = &CredSpec::Missing;
        match self.specs.get(name) {
            Some(s) => Some(s),
            None if self.complete => Some(MISSING),
            None => None,
        }
    }

    /// Whether `service_account` in `namespace` may use `name`, if asked.
    #[must_use]
    pub fn authz(&self, namespace: &str, service_account: &str, name: &str) -> Option<&Authz> {
        self.authz.get(&(
            namespace.to_owned(),
            service_account.to_owned(),
            name.to_owned(),
        ))
    }

    /// Why the authorization of `service_account` in `namespace` to use
    /// `name` could not be asked, if it was wanted and not answered.
    #[must_use]
    pub fn unasked(&self, namespace: &str, service_account: &str, name: &str) -> Option<&str> {
        self.unasked
            .get(&(
                namespace.to_owned(),
                service_account.to_owned(),
                name.to_owned(),
            ))
            .map(String::as_str)
    }

    /// Takes in what an entry point looked up for one workload: its credential
    /// specs and authorization answers win over what was known.
    pub fn absorb(&mut self, looked: Self) {
        self.specs.extend(looked.specs);
        self.authz.extend(looked.authz);
        self.unasked.extend(looked.unasked);
        self.complete |= looked.complete;
    }

    /// Learns a `GMSACredentialSpec` object; returns whether it was one.
    pub fn learn(&mut self, value: &Value) -> bool {
        match CredSpec::from_object(value) {
            Some((name, spec)) => {
                self.specs.insert(name, spec);
                true
            }
            None => false,
        }
    }
}

/// The service account the pod runs as: `spec.serviceAccountName`, else
/// the deprecated `spec.serviceAccount`, else `default` (what the API
/// server's ServiceAccount admission sets).
#[must_use]
pub fn service_account<'v>(spec: &'v SpecView<'_>) -> &'v str {
    spec.service_account_name
        .as_deref()
        .or(spec.service_account.as_deref())
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
}

/// The gMSA settings of every place of a pod spec, owned.
#[must_use]
pub fn previous(spec: &SpecView<'_>) -> Vec<Previous> {
    let own = |place, o: &WindowsOptionsView<'_>| Previous {
        place,
        name: o.gmsa_credential_spec_name.as_deref().map(str::to_owned),
        contents: o.gmsa_credential_spec.as_deref().map(str::to_owned),
    };
    let mut out = Vec::new();
    if let Some(o) = spec
        .security_context
        .as_ref()
        .and_then(|p| p.windows_options.as_ref())
    {
        out.push(own(Place::Pod, o));
    }
    for c in containers_of(spec) {
        if let Some(o) = c
            .security_context()
            .and_then(|s| s.windows_options.as_ref())
        {
            out.push(own(Place::Container(c.list, c.name().to_owned()), o));
        }
    }
    out
}

/// The credential spec names a pod spec uses, each once: what an entry point
/// looks up before the decision.
#[must_use]
pub fn names<'v>(spec: &'v SpecView<'_>) -> BTreeSet<&'v str> {
    let pod = spec
        .security_context
        .as_ref()
        .and_then(|p| p.windows_options.as_ref());
    pod.into_iter()
        .chain(
            containers_of(spec)
                .into_iter()
                .filter_map(|c| c.security_context()?.windows_options.as_ref()),
        )
        .filter_map(|o| o.gmsa_credential_spec_name.as_deref())
        .collect()
}

/// The credential spec's contents as the upstream webhook writes them into
/// the pod: Go's `json.Marshal` of the stored map. Compact, object keys
/// sorted, and HTML-safe (`<`, `>`, `&` as `\u003c`, `\u003e`, `\u0026`;
/// U+2028 and U+2029 escaped too).
#[must_use]
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
    }
}

/// A JSON string as Go's `encoding/json` writes it (HTML escaping on).
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Why the pod's contents do not match the stored ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// Both are JSON objects, with different contents.
    Different,
    /// The pod's contents are not a JSON object (the parser's message).
    PodNotAnObject(String),
    /// The stored contents are not a JSON object.
    StoredNotAnObject,
}

/// Compares a pod's `gmsaCredentialSpec` with the stored contents as the
/// upstream webhook does: byte-equal to the canonical JSON, or both JSON
/// objects that are deeply equal (key order and whitespace do not matter,
/// `1` equals `1.0`, a duplicate key keeps its last value).
///
/// # Errors
/// The [`Mismatch`], when they differ.
pub fn compare(pod: &str, stored: &Value) -> Result<(), Mismatch> {
    if pod == canonical_json(stored) {
        return Ok(());
    }
    let parsed: Value = match serde_json::from_str::<Value>(pod) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return Err(Mismatch::PodNotAnObject("not a JSON object".to_owned())),
        Err(e) => return Err(Mismatch::PodNotAnObject(e.to_string())),
    };
    if !stored.is_object() {
        return Err(Mismatch::StoredNotAnObject);
    }
    if deep_equal(&parsed, stored) {
        Ok(())
    } else {
        Err(Mismatch::Different)
    }
}

/// JSON equality with numbers compared as Go's float64.
fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| deep_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| deep_equal(v, w)))
        }
        _ => a == b,
    }
}

/// The RBAC a user grants so that `service_account` in `namespace` may use
/// credential spec `name`, in one sentence.
#[must_use]
pub fn grant_hint(namespace: &str, service_account: &str, name: &str) -> String {
    format!(
        "grant it with a ClusterRole allowing verb `use` on `gmsacredentialspecs` in API group \
         `windows.k8s.io` (resourceNames: [{name}]) and a RoleBinding in namespace {namespace} \
         to ServiceAccount {service_account}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_is_go_json_marshal() {
        let v = json!({"b": [1, "x<y>&z"], "a": {"d": true, "c": null}, "e": "line\nnext\u{1}\u{2028}"});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":null,"d":true},"b":[1,"x\u003cy\u003e\u0026z"],"e":"line\nnext\u0001\u2028"}"#
        );
        // The upstream integration test's HostAccountConfig plugin input.
        let v = json!({"PluginInput": "contoso.com:gmsaccg:<password>"});
        assert_eq!(
            canonical_json(&v),
            r#"{"PluginInput":"contoso.com:gmsaccg:\u003cpassword\u003e"}"#
        );
    }

    #[test]
    fn contents_compare_as_the_upstream_does() {
        let stored = json!({"We don't need no": ["education"], "All in all": {"just": "a brick"}});
        let canonical = canonical_json(&stored);
        assert_eq!(compare(&canonical, &stored), Ok(()));
        // Key order and whitespace do not matter; numbers compare as floats.
        assert_eq!(
            compare(
                r#"{ "All in all": {"just":"a brick"}, "We don't need no": [ "education" ] }"#,
                &stored
            ),
            Ok(())
        );
        assert_eq!(compare(r#"{"n": 1.0}"#, &json!({"n": 1})), Ok(()));
        // A duplicate key keeps its last value.
        assert_eq!(compare(r#"{"n": 2, "n": 1}"#, &json!({"n": 1})), Ok(()));
        assert_eq!(
            compare(
                r#"{"We don't need no": ["thought control"], "All in all": {"just": "a brick"}}"#,
                &stored
            ),
            Err(Mismatch::Different)
        );
        assert!(matches!(
            compare("i ain't no JSON object", &stored),
            Err(Mismatch::PodNotAnObject(_))
        ));
        assert!(matches!(
            compare("[]", &stored),
            Err(Mismatch::PodNotAnObject(_))
        ));
        assert!(matches!(
            compare("", &stored),
            Err(Mismatch::PodNotAnObject(_))
        ));
        // Key case matters.
        assert_eq!(
            compare(r#"{"N": 1}"#, &json!({"n": 1})),
            Err(Mismatch::Different)
        );
    }

    #[test]
    fn credential_spec_objects_are_read_in_both_versions() {
        for version in ["v1", "v1alpha1"] {
            let o = json!({"apiVersion": format!("windows.k8s.io/{version}"), "kind": "GMSACredentialSpec",
                "metadata": {"name": "webapp1"}, "credspec": {"CmsPlugins": ["ActiveDirectory"]}});
            let (name, spec) = CredSpec::from_object(&o).unwrap();
            assert_eq!(name, "webapp1");
            assert_eq!(
                spec,
                CredSpec::Found(Some(json!({"CmsPlugins": ["ActiveDirectory"]})))
            );
        }
        let none = json!({"apiVersion": "windows.k8s.io/v1", "kind": "GMSACredentialSpec", "metadata": {"name": "x"}});
        assert_eq!(
            CredSpec::from_object(&none).unwrap().1,
            CredSpec::Found(None)
        );
        let empty = json!({"apiVersion": "windows.k8s.io/v1", "kind": "GMSACredentialSpec", "metadata": {"name": "x"}, "credspec": ""});
        assert_eq!(
            CredSpec::from_object(&empty).unwrap().1,
            CredSpec::Found(None)
        );
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
        assert!(CredSpec::from_object(&other).is_none());
    }

    #[test]
    fn a_name_not_looked_up_is_unknown_unless_the_list_is_complete() {
        let mut facts = Facts::default();
        assert_eq!(facts.spec("x"), None);
        facts.complete = true;
        assert_eq!(facts.spec("x"), Some(&CredSpec::Missing));
    }
}
