//! The rule catalogue.
//!
//! Rule logic lives in code, one rule per file; which rules run, and how
//! severely, is data (`policies/`). A rule's file holds all of it: its
//! [`RuleInfo`] (what it checks, why it breaks on Windows, citing the
//! Kubernetes Windows documentation, an example, the fix, and the
//! Kubernetes versions in which it applies), its check, and its export as
//! CEL for `winadmit admission-policy` ([`Rule::export`], written in
//! [`crate::decision::rules::cel`]), or why it has none. `winadmit
//! explain`, `winadmit rules` and `docs/rules.md` are rendered from the
//! info.
//!
//! Adding a rule: its file, its `mod` line and its entry in [`ALL`] below,
//! and its cases in `tests/fixtures/rules/<ID>/` (see the README there).

use self::cel::{Export, ExportContext};
use crate::decision::cluster::TargetCluster;
use crate::decision::finding::Severity;
use crate::decision::version::KubeVersion;

pub mod cel;
mod context;
mod findings;
mod gmsa_pod;
pub mod params;

pub use context::{HostProcess, ImageFacts, ImageFactsCache, Images, RuleContext};
pub(crate) use findings::security_field;
pub use findings::{Reported, RuleFindings, removable_if};

/// Which workloads a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Windows-targeted workloads.
    Windows,
    /// Linux-targeted workloads.
    Linux,
    /// Every workload (targeting rules themselves).
    Any,
}

/// A rule's stable identity and documentation.
#[derive(Debug)]
pub struct RuleInfo {
    /// Stable id, e.g. `WIN-PRIVILEGED`. Never renamed once released.
    pub id: &'static str,
    pub title: &'static str,
    /// The rule's verdict on the target cluster (`None`: silent there),
    /// before the policy and `--strict`. Follows docs/verdicts.md.
    pub level: fn(&TargetCluster) -> Option<Severity>,
    /// An ignored security setting: the workload asks for a security
    /// property or capability Windows silently does not give (docs/verdicts.md,
    /// "Security settings Windows ignores"). `--strict` raises such a
    /// warning to an error.
    pub intent_lost: bool,
    pub scope: Scope,
    /// What the rule checks.
    pub what: &'static str,
    /// Why it breaks on Windows.
    pub why: &'static str,
    /// Where the Kubernetes Windows documentation says so.
    pub source: &'static str,
    pub doc_url: &'static str,
    /// How to fix it by hand.
    pub fix: &'static str,
    /// A minimal manifest excerpt that triggers the rule.
    pub example: &'static str,
    /// First Kubernetes version the rule applies to (inclusive).
    pub since: Option<KubeVersion>,
    /// First Kubernetes version the rule no longer applies to.
    pub until: Option<KubeVersion>,
}

impl RuleInfo {
    #[must_use]
    pub fn applies_to(&self, v: KubeVersion) -> bool {
        self.since.is_none_or(|s| v >= s) && self.until.is_none_or(|u| v < u)
    }

    /// The rule's verdict on `cluster` when no policy overrides it: its
    /// level there, raised to an error under the strict stance when the
    /// rule is "intent lost".
    #[must_use]
    pub fn default_level(&self, cluster: &TargetCluster) -> Option<Severity> {
        if !self.applies_to(cluster.kubernetes_version) {
            return None;
        }
        match (self.level)(cluster) {
            Some(Severity::Warning) if self.intent_lost && cluster.is_strict() => {
                Some(Severity::Error)
            }
            other => other,
        }
    }
}

/// The usual rule levels, for [`RuleInfo::level`].
pub mod level {
    use crate::decision::cluster::TargetCluster;
    use crate::decision::finding::Severity;

    #[must_use]
    pub fn error(_: &TargetCluster) -> Option<Severity> {
        Some(Severity::Error)
    }
    #[must_use]
    pub fn warning(_: &TargetCluster) -> Option<Severity> {
        Some(Severity::Warning)
    }
    #[must_use]
    pub fn info(_: &TargetCluster) -> Option<Severity> {
        Some(Severity::Info)
    }
    /// Off unless a policy turns the rule on.
    #[must_use]
    pub fn off(_: &TargetCluster) -> Option<Severity> {
        None
    }
    /// An error on Docker nodes (Kubernetes 1.23 and earlier), a warning on containerd.
    #[must_use]
    pub fn error_on_docker(c: &TargetCluster) -> Option<Severity> {
        Some(if c.is_docker() {
            Severity::Error
        } else {
            Severity::Warning
        })
    }
}

/// A rule: its documentation, its check, and its export as CEL.
pub struct Rule {
    pub info: RuleInfo,
    pub check: fn(&RuleContext<'_, '_, '_>, &mut RuleFindings),
    /// The rule as CEL at a target, for `winadmit admission-policy`
    /// ([`crate::decision::admission_policy`]): the places it looks at and the
    /// condition that makes each a finding, mirroring `check`; or
    /// [`Export::Gap`] and why it is not exported (`|_| Export::Gap("...")`).
    pub export: fn(&ExportContext<'_>) -> Export,
}

// One file per rule module; `ALL` below lists their rules in evaluation
// order.
mod affinity_conflict;
mod allow_privilege_escalation;
mod api_refused;
pub mod apiserver_os_fields;
mod apparmor;
mod capabilities;
mod default_mode;
mod dns_hostnet;
mod dns_searches;
mod emptydir_memory;
mod fs_group;
mod gmsa_authz_unknown;
mod gmsa_contents_mismatch;
mod gmsa_contents_without_name;
pub mod gmsa_inline;
mod gmsa_no_credspec;
mod gmsa_not_authorized;
mod gmsa_not_found;
mod gmsa_update;
mod host_namespaces;
mod host_network;
mod host_path_os;
mod hostprocess;
mod hostprocess_advice;
mod hugepages;
pub mod hyperv;
mod hyperv_annotation;
mod image_arch;
mod image_facts_unknown;
pub mod image_windows_only;
mod linux_image;
pub mod linux_unpinned;
mod linux_windows_options;
mod memory_limits;
mod mixed_os;
mod mount_propagation;
mod nfs;
mod node_name_unknown;
mod nonroot_admin;
mod os_spec;
mod pod_resources;
mod privileged;
mod proc_mount;
mod readonly_rootfs;
mod run_as;
mod seccomp;
mod secret_volume;
mod selinux;
pub mod service_affinity;
mod subpath;
mod supplemental_groups;
mod sysctls;
mod termination_message;
pub mod unpinned_image;
mod volume_devices;
pub mod windows_build;
mod windows_options_format;
pub mod windows_taint;

/// Every rule, in evaluation order. The API server mirror runs last (it
/// reports a field whatever other rule reports it too).
pub static ALL: &[&Rule] = &[
    &affinity_conflict::RULE,
    &os_spec::RULE,
    &unpinned_image::RULE,
    &image_windows_only::WINDOWS_ONLY,
    &image_arch::RULE,
    &linux_windows_options::RULE,
    &linux_windows_options::IGNORED,
    &privileged::RULE,
    &run_as::RUN_AS_USER,
    &run_as::RUN_AS_GROUP,
    &host_network::RULE,
    &host_namespaces::HOST_PID,
    &host_namespaces::HOST_IPC,
    &host_namespaces::SHARE_PROCESS_NAMESPACE,
    &subpath::RULE,
    &emptydir_memory::RULE,
    &selinux::RULE,
    &seccomp::RULE,
    &apparmor::RULE,
    &capabilities::RULE,
    &allow_privilege_escalation::RULE,
    &proc_mount::RULE,
    &readonly_rootfs::RULE,
    &supplemental_groups::RULE,
    &sysctls::RULE,
    &fs_group::FS_GROUP,
    &fs_group::FS_GROUP_CHANGE_POLICY,
    &volume_devices::RULE,
    &pod_resources::RULE,
    &hugepages::RULE,
    &mount_propagation::RULE,
    &dns_hostnet::RULE,
    &nfs::RULE,
    &hostprocess::RULE,
    &hostprocess_advice::REDUNDANT,
    &hostprocess_advice::USER,
    &hostprocess_advice::NON_ROOT,
    &windows_options_format::RULE,
    &gmsa_not_found::RULE,
    &gmsa_no_credspec::RULE,
    &gmsa_not_authorized::RULE,
    &gmsa_authz_unknown::RULE,
    &gmsa_contents_without_name::RULE,
    &gmsa_contents_mismatch::RULE,
    &gmsa_inline::RULE,
    &gmsa_update::RULE,
    &nonroot_admin::RULE,
    &hyperv::RULE,
    &termination_message::RULE,
    &default_mode::RULE,
    &mixed_os::RULE,
    &linux_image::LISTED,
    &linux_image::TAG_WORD,
    &linux_unpinned::RULE,
    &image_facts_unknown::RULE,
    &node_name_unknown::RULE,
    &windows_build::MIXED,
    &windows_build::NODE_MISMATCH,
    &windows_build::NO_NODE,
    &hyperv_annotation::RULE,
    &windows_taint::MISSING,
    &windows_taint::LINUX_TOLERATES,
    &memory_limits::RULE,
    &host_path_os::LINUX_PATH,
    &host_path_os::LINUX_DEVICE,
    &host_path_os::WINDOWS_PATH,
    &secret_volume::RULE,
    &dns_searches::RULE,
    &service_affinity::RULE,
    &api_refused::RULE,
    &apiserver_os_fields::RULE,
];

/// Advice rules that `policies/default.yaml` turns off (enable them in a
/// policy file); every other rule is on in the default policy.
pub const OFF_BY_DEFAULT: &[&str] = &["WIN-SECRET-VOLUME"];

/// The rules that guard a security boundary: the gMSA checks that stand
/// between a pod's author and an Active Directory identity (the upstream
/// gMSA webhook's refusals). They speak only where the cluster's
/// GMSACredentialSpecs are known (the webhook's gMSA switch). No annotation
/// skips them and every mode enforces them: a policy may turn one off, but
/// not soften it to a warning or another mode (docs/policy.md, "Rules no
/// annotation skips"). Skipping WIN-GMSA-NOT-FOUND or WIN-GMSA-NO-CREDSPEC
/// would leave inline contents compared with nothing.
pub const BOUNDARY: &[&str] = &[
    "WIN-GMSA-NOT-FOUND",
    "WIN-GMSA-NO-CREDSPEC",
    "WIN-GMSA-NOT-AUTHORIZED",
    "WIN-GMSA-CONTENTS-WITHOUT-NAME",
    "WIN-GMSA-CONTENTS-MISMATCH",
    "WIN-GMSA-UPDATE",
];

/// Does rule `id` guard a security boundary ([`BOUNDARY`])?
#[must_use]
pub fn is_boundary(id: &str) -> bool {
    BOUNDARY.contains(&id)
}

/// Looks a rule up by id.
#[must_use]
pub fn find(id: &str) -> Option<&'static Rule> {
    ALL.iter().copied().find(|r| r.info.id == id)
}

/// The base URL rules link to.
pub const WINDOWS_DOCS: &str =
    "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod";

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn boundary_rules_exist_and_are_errors() {
        for id in BOUNDARY {
            let rule = find(id).unwrap_or_else(|| panic!("{id} is no rule"));
            assert_eq!(
                (rule.info.level)(&TargetCluster::default()),
                Some(Severity::Error),
                "{id}"
            );
        }
        // Every gMSA error is a boundary: a skipped one would let another through.
        for r in ALL {
            if r.info.id.starts_with("WIN-GMSA-")
                && (r.info.level)(&TargetCluster::default()) == Some(Severity::Error)
            {
                assert!(is_boundary(r.info.id), "{}", r.info.id);
            }
        }
    }

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for r in ALL {
            assert!(seen.insert(r.info.id), "duplicate rule id {}", r.info.id);
            assert!(r.info.id.starts_with("WIN-"), "{}", r.info.id);
            assert!(
                r.info
                    .id
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                r.info.id
            );
            for text in [
                r.info.title,
                r.info.what,
                r.info.why,
                r.info.source,
                r.info.fix,
                r.info.example,
            ] {
                assert!(
                    !text.trim().is_empty(),
                    "{} has an empty doc field",
                    r.info.id
                );
            }
            assert!(r.info.doc_url.starts_with("https://"), "{}", r.info.id);
        }
    }
}
