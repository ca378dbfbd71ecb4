//! Node taints and the tolerations that match them, as the scheduler reads
//! them: the policy's `params.windowsTaint`, the rules that check
//! tolerations and the mutation that adds one.

use serde::Deserialize;

use crate::decision::view::TolerationView;

/// A node taint: `{key, value, effect}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(deserialize_with = "taint_effect")]
    pub effect: String,
}

/// The effects a Kubernetes taint (and a toleration) can name.
pub const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
/// The operators a Kubernetes toleration can use.
pub const TOLERATION_OPERATORS: [&str; 2] = ["Exists", "Equal"];

/// A taint's `effect`, one of [`TAINT_EFFECTS`] (refused at load otherwise:
/// a pod with any other effect is rejected by the API server).
fn taint_effect<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let effect = String::deserialize(d)?;
    if TAINT_EFFECTS.contains(&effect.as_str()) {
        Ok(effect)
    } else {
        Err(serde::de::Error::custom(format!(
            "unknown taint effect `{effect}`: expected NoSchedule, PreferNoSchedule or NoExecute"
        )))
    }
}

impl Taint {
    /// What the API server would refuse in this taint, or in the toleration
    /// made from it (`validateNodeTaints`, `ValidateTolerations`): the
    /// field (`key`, `value`) and why.
    #[must_use]
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if let Some(why) = crate::decision::names::qualified_name(&self.key) {
            return Some((
                "key",
                format!("{:?} is not a valid label key: {why}", self.key),
            ));
        }
        let value = self.value.as_deref().unwrap_or_default();
        if let Some(why) = crate::decision::names::label_value(value) {
            return Some((
                "value",
                format!("{value:?} is not a valid label value: {why}"),
            ));
        }
        None
    }

    /// The toleration that tolerates exactly this taint.
    #[must_use]
    pub fn toleration(&self) -> serde_json::Value {
        let mut t = serde_json::json!({"key": self.key, "effect": self.effect});
        match &self.value {
            Some(v) => {
                t["operator"] = "Equal".into();
                t["value"] = v.clone().into();
            }
            None => t["operator"] = "Exists".into(),
        }
        t
    }
}

/// How a toleration matches a taint, as the scheduler decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tolerates {
    No,
    /// Names the taint's key.
    ByKey,
    /// `operator: Exists` with no key: tolerates every taint.
    Wildcard,
}

/// Does `t` tolerate `taint`? (Kubernetes `Toleration.ToleratesTaint`.)
#[must_use]
pub fn tolerates(t: &TolerationView<'_>, taint: &Taint) -> Tolerates {
    let effect = t.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return Tolerates::No;
    }
    let key = t.key.as_deref().unwrap_or_default();
    let operator = t.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        return if operator == "Exists" {
            Tolerates::Wildcard
        } else {
            Tolerates::No
        };
    }
    if key != taint.key {
        return Tolerates::No;
    }
    let matched = match operator {
        "Exists" => true,
        "Equal" | "" => {
            t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    };
    if matched {
        Tolerates::ByKey
    } else {
        Tolerates::No
    }
}
