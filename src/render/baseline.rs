//! A baseline: the findings a repository has today, recorded by what they
//! are (rule, object kind, namespace, name, field path: the field path
//! names the container, `spec.containers[1]...`), not by file or line, so
//! that editing other lines, or moving an object to another file, keeps
//! them matched. `lint --baseline` fails only on findings it does not
//! record and lists its entries that are gone. SARIF's
//! `partialFingerprints` are the same identity ([`identity`]).
//!
//! Pure: texts in, texts out; the command reads and writes the file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{FindingRef, Report};

/// The format's version, the file's first key.
pub const VERSION: u32 = 1;

/// One finding recorded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    pub rule: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub field: String,
    /// Where it was when recorded (for people; not matched).
    pub file: String,
}

impl Entry {
    fn of(f: &FindingRef<'_>) -> Self {
        Self {
            rule: f.rule.to_owned(),
            kind: f.kind.to_owned(),
            namespace: f.namespace.map(str::to_owned),
            name: f.name.to_owned(),
            field: f.field.to_owned(),
            file: f.file.to_owned(),
        }
    }

    fn identity(&self) -> String {
        join(
            &self.rule,
            &self.kind,
            self.namespace.as_deref(),
            &self.name,
            &self.field,
        )
    }
}

/// The baseline file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Baseline {
    pub winadmit_baseline: u32,
    pub findings: Vec<Entry>,
}

/// A finding's identity: `RULE|Kind|namespace/name|field` (SARIF's
/// `partialFingerprints` `winadmit/v1`).
#[must_use]
pub fn identity(f: &FindingRef<'_>) -> String {
    join(f.rule, f.kind, f.namespace, f.name, f.field)
}

fn join(rule: &str, kind: &str, namespace: Option<&str>, name: &str, field: &str) -> String {
    let ns = namespace.map(|n| format!("{n}/")).unwrap_or_default();
    format!("{rule}|{kind}|{ns}{name}|{field}")
}

/// Whether a finding is in the baseline (SARIF's `baselineState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    New,
    Unchanged,
}

impl State {
    #[must_use]
    pub fn sarif(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Unchanged => "unchanged",
        }
    }
}

/// A report against a baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compared {
    /// Each finding's state, in output order.
    pub states: Vec<State>,
    /// The entries no finding matches any more (fixed).
    pub gone: Vec<Entry>,
}

impl Baseline {
    /// Today's findings, each identity once, sorted.
    #[must_use]
    pub fn of(report: &impl Report) -> Self {
        let mut by_identity = BTreeMap::new();
        for f in report.findings() {
            let e = Entry::of(&f);
            by_identity.entry(e.identity()).or_insert(e);
        }
        let mut findings: Vec<Entry> = by_identity.into_values().collect();
        findings.sort();
        Self {
            winadmit_baseline: VERSION,
            findings,
        }
    }

    /// Reads a baseline file's text.
    ///
    /// # Errors
    /// Not JSON, an unknown key, or another version: the message names
    /// the key and what was expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let b: Self = serde_path_to_error::deserialize(de)
            .map_err(|e| format!("at `{}`: {}", e.path(), e.inner()))?;
        if b.winadmit_baseline != VERSION {
            return Err(format!(
                "winadmitBaseline is {}, this winadmit reads version {VERSION}: write it again with --write-baseline",
                b.winadmit_baseline
            ));
        }
        Ok(b)
    }

    /// The file's text: JSON, one entry per finding.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a baseline is plain data");
        text.push('\n');
        text
    }

    /// Each finding of `report` new or unchanged, and the entries gone.
    #[must_use]
    pub fn compare(&self, report: &impl Report) -> Compared {
        let known: BTreeMap<String, &Entry> =
            self.findings.iter().map(|e| (e.identity(), e)).collect();
        let mut seen = std::collections::HashSet::new();
        let states = report
            .findings()
            .map(|f| {
                let id = identity(&f);
                if known.contains_key(&id) {
                    seen.insert(id);
                    State::Unchanged
                } else {
                    State::New
                }
            })
            .collect();
        let gone = known
            .into_iter()
            .filter(|(id, _)| !seen.contains(id))
            .map(|(_, e)| e.clone())
            .collect();
        Compared { states, gone }
    }
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = self
            .namespace
            .as_deref()
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        write!(
            f,
            "{} {} {ns}{} {} (was in {})",
            self.rule, self.kind, self.name, self.field, self.file
        )
    }
}

#[cfg(test)]
mod tests;
