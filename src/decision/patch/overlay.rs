//! Settling a patch on the view: the operations `/mutate` makes applied to
//! a copy of the workload's view, so that the rounds after the first are
//! evaluated without parsing the object into a tree, copying the tree,
//! applying the patch to it and reading the view back.
//!
//! The tree ([`super::settle_from`]) stays the reference: this module gives
//! the same mutation for the operations it models, and declines (`None`)
//! everything else, so the caller falls back to the tree. It models what
//! the mutation itself makes: the `add`s of `spec.os`, `nodeSelector` and
//! its keys, `tolerations` and appended tolerations, pod `metadata`,
//! `annotations` and their keys; the `remove`s of the fields the rules
//! report as removable (pod and container `securityContext` fields,
//! `shareProcessNamespace`, an emptyDir's `medium`). An operation whose
//! target the JSON Patch would not find is declined too, so the tree
//! reports it as it always has.
//!
//! `tests/verdicts/settle_on_view.rs` compares both ways over generated pods and
//! the corpus.

use std::borrow::Cow;

use json_patch::jsonptr::PointerBuf;
use serde::Deserialize;
use serde_json::Value;

use super::settle::{SETTLE_ROUNDS, forbids_os_fields_in};
use super::{Mutation, MutationContext, mutation};
use crate::decision::engine::{self, Context, Evaluation};
use crate::decision::finding::PatchOperation;
use crate::decision::policy::Policy;
use crate::decision::view::{
    ContainerView, MetaView, PodSecurityContextView, SecurityContextView, SpecView, StrMap, Text,
};
use crate::decision::workload::{Kind, Workload};

/// A copy of a workload's pod spec and pod metadata with operations
/// applied to it.
struct Overlay<'a> {
    spec: SpecView<'a>,
    meta: Option<MetaView<'a>>,
    spec_pointer: PointerBuf,
    meta_pointer: PointerBuf,
}

impl<'a> Overlay<'a> {
    fn new(w: &Workload<'_, 'a>) -> Option<Self> {
        Some(Self {
            spec: w.spec?.clone(),
            meta: w.pod_meta.cloned(),
            spec_pointer: PointerBuf::from(&w.spec_path),
            meta_pointer: PointerBuf::from(&w.pod_metadata_path()),
        })
    }

    /// The workload `w` with this copy as its pod spec and pod metadata.
    fn workload<'v>(&'v self, w: &Workload<'v, 'a>) -> Workload<'v, 'a> {
        let mut out = w.clone();
        out.spec = Some(&self.spec);
        out.pod_meta = self.meta.as_ref();
        if w.kind == Kind::Pod {
            // A pod's own metadata is its pod metadata.
            out.labels = self.meta.as_ref().and_then(|m| m.labels.as_ref());
            out.annotations = self.meta.as_ref().and_then(|m| m.annotations.as_ref());
        }
        out
    }

    /// Applies the operations as JSON Patch would; `false` at the first
    /// one this copy does not model (the caller then settles on the tree).
    fn apply_all(&mut self, ops: &[PatchOperation]) -> bool {
        ops.iter().all(|op| self.apply(op))
    }

    fn apply(&mut self, op: &PatchOperation) -> bool {
        let (path, value) = match op {
            PatchOperation::Add(add) => (&add.path, Some(&add.value)),
            PatchOperation::Remove(remove) => (&remove.path, None),
            _ => return false,
        };
        let (in_spec, rest) = match (
            path.strip_prefix(&self.spec_pointer),
            path.strip_prefix(&self.meta_pointer),
        ) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => return false,
        };
        // The pointer's tokens, unescaped.
        let decoded: Vec<String> = rest.tokens().map(|t| t.decoded().into_owned()).collect();
        let tokens: Vec<&str> = decoded.iter().map(String::as_str).collect();
        match (in_spec, value) {
            (true, Some(value)) => add_to_spec(&mut self.spec, &tokens, value),
            (true, None) => remove_from_spec(&mut self.spec, &tokens),
            (false, Some(value)) => add_to_meta(&mut self.meta, &tokens, value),
            (false, None) => None,
        }
        .is_some()
    }
}

fn add_to_spec(spec: &mut SpecView<'_>, tokens: &[&str], value: &Value) -> Option<()> {
    match tokens {
        ["os"] => spec.os = Some(owned(value)?),
        ["nodeSelector"] => spec.node_selector = Some(owned(value)?),
        ["nodeSelector", key] => set(spec.node_selector.as_mut()?, key, value)?,
        ["tolerations"] => spec.tolerations = Some(owned(value)?),
        ["tolerations", "-"] => spec.tolerations.as_mut()?.push(owned(value)?),
        _ => return None,
    }
    Some(())
}

fn add_to_meta(meta: &mut Option<MetaView<'_>>, tokens: &[&str], value: &Value) -> Option<()> {
    match tokens {
        [] => *meta = Some(owned(value)?),
        ["annotations"] => meta.as_mut()?.annotations = Some(owned(value)?),
        ["annotations", key] => set(meta.as_mut()?.annotations.as_mut()?, key, value)?,
        _ => return None,
    }
    Some(())
}

/// `remove`: the field must be there, as JSON Patch requires.
fn remove_from_spec(spec: &mut SpecView<'_>, tokens: &[&str]) -> Option<()> {
    match tokens {
        ["shareProcessNamespace"] => take(&mut spec.share_process_namespace),
        ["securityContext", key] => remove_pod_security(spec.security_context.as_mut()?, key),
        [
            list @ ("containers" | "initContainers" | "ephemeralContainers"),
            index,
            "securityContext",
            key,
        ] => {
            let containers: &mut Vec<ContainerView<'_>> = match *list {
                "containers" => spec.containers.as_mut()?,
                "initContainers" => spec.init_containers.as_mut()?,
                _ => spec.ephemeral_containers.as_mut()?,
            };
            let container = containers.get_mut(index.parse::<usize>().ok()?)?;
            remove_container_security(container.security_context.as_mut()?, key)
        }
        ["volumes", index, "emptyDir", "medium"] => {
            let volume = spec
                .volumes
                .as_mut()?
                .get_mut(index.parse::<usize>().ok()?)?;
            take(&mut volume.empty_dir.as_mut()?.medium)
        }
        _ => None,
    }
}

/// Unsets a field that is set.
fn take<T>(field: &mut Option<T>) -> Option<()> {
    field.take().map(drop)
}

fn remove_pod_security(sc: &mut PodSecurityContextView<'_>, key: &str) -> Option<()> {
    match key {
        "runAsUser" => take(&mut sc.run_as_user),
        "runAsGroup" => take(&mut sc.run_as_group),
        "runAsNonRoot" => take(&mut sc.run_as_non_root),
        "supplementalGroups" => take(&mut sc.supplemental_groups),
        "supplementalGroupsPolicy" => take(&mut sc.supplemental_groups_policy),
        "sysctls" => take(&mut sc.sysctls),
        "fsGroup" => take(&mut sc.fs_group),
        "fsGroupChangePolicy" => take(&mut sc.fs_group_change_policy),
        "seLinuxOptions" => take(&mut sc.se_linux_options),
        "seLinuxChangePolicy" => take(&mut sc.se_linux_change_policy),
        "seccompProfile" => take(&mut sc.seccomp_profile),
        "appArmorProfile" => take(&mut sc.app_armor_profile),
        _ => None,
    }
}

fn remove_container_security(sc: &mut SecurityContextView<'_>, key: &str) -> Option<()> {
    match key {
        "privileged" => take(&mut sc.privileged),
        "allowPrivilegeEscalation" => take(&mut sc.allow_privilege_escalation),
        "capabilities" => take(&mut sc.capabilities),
        "procMount" => take(&mut sc.proc_mount),
        "readOnlyRootFilesystem" => take(&mut sc.read_only_root_filesystem),
        "runAsUser" => take(&mut sc.run_as_user),
        "runAsGroup" => take(&mut sc.run_as_group),
        "runAsNonRoot" => take(&mut sc.run_as_non_root),
        "seLinuxOptions" => take(&mut sc.se_linux_options),
        "seccompProfile" => take(&mut sc.seccomp_profile),
        "appArmorProfile" => take(&mut sc.app_armor_profile),
        _ => None,
    }
}

/// A view of an operation's value, owning its strings.
fn owned<T: Deserialize<'static>>(value: &Value) -> Option<T> {
    T::deserialize(value.clone()).ok()
}

/// `add` of a map key: replaces the value of a key already there.
fn set(map: &mut StrMap<'_>, key: &str, value: &Value) -> Option<()> {
    let value = Text(Cow::Owned(value.as_str()?.to_owned()));
    match map.0.iter_mut().find(|(k, _)| &**k == key) {
        Some((_, v)) => *v = value,
        None => map.0.push((Text(Cow::Owned(key.to_owned())), value)),
    }
    Some(())
}

/// [`super::settle_from`] on the view: the mutation settled from `first`
/// (the first round, made from `w`'s evaluation `eval` and filtered by
/// `keep`), or `None` when it involves an operation the view does not
/// model.
#[allow(clippy::too_many_arguments)] // settle's inputs, passed through
pub fn settle_on_view(
    policy: &Policy,
    cx: &Context<'_>,
    mcx: MutationContext<'_>,
    w: &Workload<'_, '_>,
    eval: &Evaluation,
    keep: &dyn Fn(&PatchOperation) -> bool,
    first: Mutation,
) -> Option<Mutation> {
    let (m, settled) = rounds(policy, cx, mcx, w, keep, first)?;
    if !m.sets_os() || !forbids_os_fields_in(policy, cx, &settled.workload(w)) {
        return Some(m);
    }
    // Setting spec.os would get the object refused: the mutation again,
    // without it.
    let policy = policy.without_os_name();
    let mut first = mutation(policy, w, eval, mcx);
    first.retain(keep);
    if first.is_empty() {
        return Some(first);
    }
    rounds(policy, cx, mcx, w, keep, first).map(|(m, _)| m)
}

/// The settling rounds of [`super::settle_from`]: the settled mutation and
/// the view with all of it applied.
fn rounds<'a>(
    policy: &Policy,
    cx: &Context<'_>,
    mcx: MutationContext<'_>,
    w: &Workload<'_, 'a>,
    keep: &dyn Fn(&PatchOperation) -> bool,
    first: Mutation,
) -> Option<(Mutation, Overlay<'a>)> {
    let mut overlay = Overlay::new(w)?;
    let mut m = first;
    let mut applied = 0;
    for _ in 1..=SETTLE_ROUNDS {
        if !overlay.apply_all(&m.ops[applied..]) {
            return None;
        }
        applied = m.ops.len();
        let patched = overlay.workload(w);
        let eval = engine::evaluate(policy, &patched, cx);
        let mut next = mutation(policy, &patched, &eval, mcx);
        next.retain(keep);
        if !m.absorb(next, overlay.spec_pointer.as_str()) {
            break;
        }
    }
    overlay.apply_all(&m.ops[applied..]).then_some((m, overlay))
}
