//! Layering policy files: each file's keys replace (or, for `rules`,
//! `params` and `mutation`, merge into) the settings layered so far, after
//! the checks the API server would make on what the webhook writes.

use std::collections::BTreeMap;
use std::path::Path;

use kube::core::Selector;

use super::check::{At, check_each, check_reach, check_selector, namespace_problem};
use super::file::{PolicyFile, check_header, parse_file, retired_profile_notice};
use super::load::{check_tolerations, located};
use super::{
    ClusterBlock, Derived, Exemptions, Mode, MutationSettings, Policy, PolicyError, Reach,
    RuleParams, RuleSetting, Skips,
};
use crate::decision::rules;
use crate::decision::targeting::{Os, RuntimeClasses};

impl Policy {
    pub(super) fn empty() -> Self {
        Self {
            mode: Mode::Enforce,
            stance: None,
            cluster: ClusterBlock::default(),
            notices: Vec::new(),
            namespace_mode_label: "winadmit.io/mode".into(),
            levels: vec![None; rules::ALL.len()],
            rule_modes: vec![None; rules::ALL.len()],
            runtime_classes: RuntimeClasses::default(),
            exemptions: Exemptions::default(),
            reach: Reach::default(),
            selectors: Vec::new(),
            params: RuleParams::default(),
            skips: Skips::default(),
            exceptions: crate::decision::exceptions::ExceptionSettings::default(),
            own_namespace: None,
            honours_skips: true,
            derived: Derived::default(),
            mutation: MutationSettings::default(),
            pod_templates: crate::decision::workload::PodTemplates::default(),
        }
    }

    /// Layers one policy file over the current settings: each key the file
    /// sets replaces (or, for `rules`, `params` and `mutation`, merges into)
    /// what is there.
    ///
    /// # Errors
    /// The text is not a valid policy; an error found after parsing is a
    /// [`PolicyError::AtKey`].
    pub fn layer(&mut self, path: &Path, text: &str) -> Result<(), PolicyError> {
        let file = parse_file(path, text)?;
        // Errors found after parsing, at the key they concern.
        let at = |pointer: &str, message: String| located(path, pointer, message);
        let PolicyFile {
            api_version,
            kind,
            profile,
            stance,
            cluster,
            mode,
            namespace_mode_label,
            windows_runtime_classes,
            rules,
            exemptions,
            reach,
            skips,
            exceptions,
            params,
            mutation,
            pod_templates,
        } = file;
        check_header(api_version.as_deref(), kind.as_deref(), &at)?;
        if let Some(p) = profile {
            self.notices.push(retired_profile_notice(path, p));
        }
        if let Some(s) = stance {
            self.stance = Some(s);
        }
        if let Some(c) = cluster {
            self.layer_cluster(c, &at)?;
        }
        if let Some(m) = mode {
            self.mode = m;
        }
        if let Some(l) = namespace_mode_label {
            if let Some(why) = crate::decision::names::qualified_name(&l) {
                return Err(at(
                    "/namespaceModeLabel",
                    format!("namespaceModeLabel: {l:?} is not a valid label key: {why}"),
                ));
            }
            self.namespace_mode_label = l;
        }
        if let Some(names) = windows_runtime_classes {
            check_each(&names, "windowsRuntimeClasses", &at, |n| {
                crate::decision::names::dns1123_subdomain(n)
                    .map(|why| format!("{n:?} is not a valid RuntimeClass name: {why}"))
            })?;
            self.runtime_classes = windows_only(names);
        }
        self.layer_rules(rules.unwrap_or_default(), &at)?;
        if let Some(ex) = exemptions {
            self.layer_exemptions(ex, &at)?;
        }
        if let Some(r) = reach {
            check_reach(&r, &at)?;
            self.reach = r;
        }
        if let Some(s) = skips {
            check_skips(&s, &at)?;
            self.skips = s;
        }
        if let Some(e) = exceptions {
            check_exceptions(&e, &at)?;
            self.exceptions = e;
        }
        if let Some(p) = params {
            p.check(&at)?;
            p.apply(&mut self.params);
        }
        if let Some(keys) = mutation {
            self.mutation = layered_mutation(&self.mutation, keys, &at)?;
        }
        if let Some(entries) = pod_templates {
            self.pod_templates = crate::decision::workload::PodTemplates::new(entries)
                .map_err(|e| at("/podTemplates", e.to_string()))?;
        }
        Ok(())
    }

    /// The `cluster` block: each fact it states replaces the current one.
    pub(super) fn layer_cluster(&mut self, c: ClusterBlock, at: At<'_>) -> Result<(), PolicyError> {
        if let Some(v) = c.kubernetes_version {
            crate::decision::cluster::check_version(v)
                .map_err(|e| at("/cluster/kubernetesVersion", e.to_string()))?;
            self.cluster.kubernetes_version = Some(v);
        }
        if c.container_runtime.is_some() {
            self.cluster.container_runtime = c.container_runtime;
        }
        if c.containerd_version.is_some() {
            self.cluster.containerd_version = c.containerd_version;
        }
        Ok(())
    }

    /// The `rules` block: severity and mode per rule id, rule by rule.
    pub(super) fn layer_rules(
        &mut self,
        settings: BTreeMap<String, RuleSetting>,
        at: At<'_>,
    ) -> Result<(), PolicyError> {
        for (id, setting) in settings {
            let Some(i) = rules::ALL.iter().position(|r| r.info.id == id) else {
                let pointer = format!("/rules/{}", crate::decision::path::escape_pointer(&id));
                return Err(at(
                    &pointer,
                    format!(
                        "unknown rule id `{id}` under `rules` (run `winadmit rules` for the list)"
                    ),
                ));
            };
            if rules::is_boundary(&id) {
                let pointer = format!("/rules/{}", crate::decision::path::escape_pointer(&id));
                if matches!(
                    setting.level,
                    Some(super::Level::Warning | super::Level::Info)
                ) {
                    return Err(at(
                        &pointer,
                        format!(
                            "rules.{id}: {id} guards a security boundary (docs/policy.md, \"Rules no annotation skips\"): it is an error or off, never a warning or advice"
                        ),
                    ));
                }
                if setting.mode.is_some_and(|m| m != Mode::Enforce) {
                    return Err(at(
                        &pointer,
                        format!(
                            "rules.{id}: {id} guards a security boundary (docs/policy.md, \"Rules no annotation skips\"): it is enforced in every mode; turn it off to stop it"
                        ),
                    ));
                }
            }
            if let Some(level) = setting.level {
                self.levels[i] = Some(level);
            }
            if setting.mode.is_some() {
                self.rule_modes[i] = setting.mode;
            }
        }
        Ok(())
    }

    /// The `exemptions` block, replacing the current one once every label
    /// selector in it is valid.
    pub(super) fn layer_exemptions(
        &mut self,
        ex: Exemptions,
        at: At<'_>,
    ) -> Result<(), PolicyError> {
        check_each(
            &ex.namespaces,
            "exemptions.namespaces",
            at,
            namespace_problem,
        )?;
        for (n, s) in ex.label_selectors.iter().enumerate() {
            check_selector(
                s,
                &format!("exemptions.labelSelectors[{n}]"),
                &format!("/exemptions/labelSelectors/{n}"),
                at,
            )?;
        }
        let mut selectors = Vec::with_capacity(ex.label_selectors.len());
        for (n, s) in ex.label_selectors.iter().enumerate() {
            let sel = Selector::try_from(s.clone()).map_err(|e| {
                at(
                    &format!("/exemptions/labelSelectors/{n}"),
                    format!("exemptions.labelSelectors[{n}]: {e}"),
                )
            })?;
            selectors.push(sel);
        }
        self.selectors = selectors;
        self.exemptions = ex;
        Ok(())
    }
}

/// `exceptions`: namespaces that can be, a lifetime of at least a day,
/// only boundary rules under `boundaryRules`.
fn check_exceptions(
    e: &crate::decision::exceptions::ExceptionSettings,
    at: At<'_>,
) -> Result<(), PolicyError> {
    if e.max_lifetime_days == 0 {
        return Err(at(
            "/exceptions/maxLifetimeDays",
            "exceptions.maxLifetimeDays: at least 1 (an exception must be able to last)".into(),
        ));
    }
    for (i, id) in e.boundary_rules.iter().enumerate() {
        if !rules::is_boundary(id) {
            return Err(at(
                &format!("/exceptions/boundaryRules/{i}"),
                format!(
                    "exceptions.boundaryRules[{i}]: `{id}` is not a rule that guards a security boundary (those are {}); every other rule may be excepted",
                    rules::BOUNDARY.join(", ")
                ),
            ));
        }
    }
    check_each(
        &e.namespaces,
        "exceptions.namespaces",
        at,
        namespace_problem,
    )
}

/// `skips`: known rule ids, no boundary rule among the skippable ones,
/// valid namespace names.
fn check_skips(s: &Skips, at: At<'_>) -> Result<(), PolicyError> {
    for (key, list) in [("rules", &s.rules), ("unskippable", &s.unskippable)] {
        for (i, id) in list.iter().enumerate() {
            let pointer = format!("/skips/{key}/{i}");
            if rules::find(id).is_none() {
                return Err(at(
                    &pointer,
                    format!(
                        "skips.{key}[{i}]: unknown rule id `{id}` (run `winadmit rules` for the list)"
                    ),
                ));
            }
            if key == "rules" && rules::is_boundary(id) {
                return Err(at(
                    &pointer,
                    format!(
                        "skips.rules[{i}]: {id} guards a security boundary: no annotation skips it (docs/policy.md, \"Rules no annotation skips\"); turn it off under `rules` or exempt the namespace under `exemptions` instead"
                    ),
                ));
            }
        }
    }
    check_each(&s.namespaces, "skips.namespaces", at, namespace_problem)
}

/// `windowsRuntimeClasses`: these names, all pinned to Windows, and no others.
pub(super) fn windows_only(names: Vec<String>) -> RuntimeClasses {
    let mut classes = RuntimeClasses::default();
    for n in names {
        classes.insert(n, Os::Windows);
    }
    classes
}

/// The `mutation` block merged key by key over `current`; an unknown key,
/// bad tolerations or an isolation other than process/hyperv is an error.
pub(super) fn layered_mutation(
    current: &MutationSettings,
    keys: serde_json::Map<String, serde_json::Value>,
    at: At<'_>,
) -> Result<MutationSettings, PolicyError> {
    let mut merged = serde_json::to_value(current).expect("mutation settings serialize");
    let known: Vec<String> = merged
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    for (key, value) in &keys {
        let pointer = format!("/mutation/{}", crate::decision::path::escape_pointer(key));
        if !known.contains(key) {
            return Err(at(
                &pointer,
                format!(
                    "unknown key `mutation.{key}`: expected one of {}",
                    known.join(", ")
                ),
            ));
        }
        if key == "tolerations" {
            check_tolerations(value)
                .map_err(|(at_pointer, message)| at(&format!("{pointer}{at_pointer}"), message))?;
        }
    }
    if let Some(current) = merged.as_object_mut() {
        current.extend(keys);
    }
    let m: MutationSettings =
        serde_json::from_value(merged).map_err(|e| at("/mutation", format!("mutation: {e}")))?;
    if let Some(iso) = &m.isolation
        && iso != "process"
        && iso != "hyperv"
    {
        return Err(at(
            "/mutation/isolation",
            format!("mutation.isolation must be process or hyperv, not {iso}"),
        ));
    }
    if let Some(label) = &m.isolation_namespace_label
        && let Some(why) = crate::decision::names::qualified_name(label)
    {
        return Err(at(
            "/mutation/isolationNamespaceLabel",
            format!("mutation.isolationNamespaceLabel: {label:?} is not a valid label key: {why}"),
        ));
    }
    Ok(m)
}
