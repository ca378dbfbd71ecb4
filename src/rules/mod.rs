//! The rule catalogue.
//!
//! Rule logic lives in code, one rule per file; which rules run, and how
//! severely, is data (`policies/`). Every rule documents itself through
//! [`RuleInfo`]: what it checks, why it breaks on Windows (citing the
//! Kubernetes Windows documentation), an example, the fix, and the
//! Kubernetes versions in which it applies. `winadmit explain`, `winadmit
//! rules` and `docs/rules.md` are rendered from these fields.

use crate::admission_policy::cel::{Export, ExportContext};
use crate::cluster::Cluster;
use crate::finding::{Finding, Fix, FixKind, Severity};
use crate::path::FieldPath;
use crate::targeting::Target;
use crate::version::KubeVersion;
use crate::view::{ContainerView, SecurityContextView, SpecView};
use crate::workload::Workload;

pub mod params;

// The ids of the rules that other modules name: they use these, never the
// id's text.
pub use affinity_conflict::ID as OS_CONFLICT;
pub use apiserver_os_fields::ID as OS_FIELDS;
pub use emptydir_memory::ID as EMPTYDIR_MEMORY;
pub use gmsa_inline::ID as GMSA_INLINE;
pub use hostprocess::ID as HOSTPROCESS;
pub use image_windows_only::ID as IMAGE_WINDOWS_ONLY;
pub use service_affinity::ID as SERVICE_AFFINITY_TIMEOUT;
pub use unpinned_image::ID as UNPINNED_IMAGE;

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
    pub level: fn(&Cluster) -> Option<Severity>,
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
    pub fn default_level(&self, cluster: &Cluster) -> Option<Severity> {
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
    use crate::cluster::Cluster;
    use crate::finding::Severity;

    #[must_use]
    pub fn error(_: &Cluster) -> Option<Severity> {
        Some(Severity::Error)
    }
    #[must_use]
    pub fn warning(_: &Cluster) -> Option<Severity> {
        Some(Severity::Warning)
    }
    #[must_use]
    pub fn info(_: &Cluster) -> Option<Severity> {
        Some(Severity::Info)
    }
    /// Off unless a policy turns the rule on.
    #[must_use]
    pub fn off(_: &Cluster) -> Option<Severity> {
        None
    }
    /// An error on Docker nodes (Kubernetes 1.23 and earlier), a warning on containerd.
    #[must_use]
    pub fn error_on_docker(c: &Cluster) -> Option<Severity> {
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
    /// ([`crate::admission_policy`]): the places it looks at and the
    /// condition that makes each a finding, mirroring `check`; or
    /// [`Export::Gap`] and why it is not exported (`|_| Export::Gap("...")`).
    pub export: fn(&ExportContext<'_>) -> Export,
}

/// Declares each rule module once, with its rules in evaluation order:
/// `module: RULE, ...;` becomes `mod module;` and the entries of [`ALL`].
macro_rules! rules {
    ($($vis:vis $module:ident: $($rule:ident),+;)+) => {
        $($vis mod $module;)+

        /// Every rule, in evaluation order. The API server mirror runs last
        /// (it reports a field whatever other rule reports it too).
        pub static ALL: &[&Rule] = &[$($(&$module::$rule,)+)+];
    };
}

rules! {
    affinity_conflict: RULE;
    os_spec: RULE;
    unpinned_image: RULE;
    image_windows_only: WINDOWS_ONLY;
    image_arch: RULE;
    linux_windows_options: RULE, IGNORED;
    privileged: RULE;
    run_as: RUN_AS_USER, RUN_AS_GROUP;
    host_network: RULE;
    host_namespaces: HOST_PID, HOST_IPC, SHARE_PROCESS_NAMESPACE;
    subpath: RULE;
    emptydir_memory: RULE;
    selinux: RULE;
    seccomp: RULE;
    apparmor: RULE;
    capabilities: RULE;
    allow_privilege_escalation: RULE;
    proc_mount: RULE;
    readonly_rootfs: RULE;
    supplemental_groups: RULE;
    sysctls: RULE;
    fs_group: FS_GROUP, FS_GROUP_CHANGE_POLICY;
    volume_devices: RULE;
    pod_resources: RULE;
    hugepages: RULE;
    mount_propagation: RULE;
    dns_hostnet: RULE;
    nfs: RULE;
    hostprocess: RULE;
    hostprocess_advice: REDUNDANT, USER, NON_ROOT;
    windows_options_format: RULE;
    gmsa_not_found: RULE;
    gmsa_no_credspec: RULE;
    gmsa_not_authorized: RULE;
    gmsa_authz_unknown: RULE;
    gmsa_contents_without_name: RULE;
    gmsa_contents_mismatch: RULE;
    gmsa_inline: RULE;
    gmsa_update: RULE;
    nonroot_admin: RULE;
    pub hyperv: RULE;
    termination_message: RULE;
    default_mode: RULE;
    mixed_os: RULE;
    linux_image: LISTED, TAG_WORD;
    image_facts_unknown: RULE;
    pub windows_build: MIXED, NODE_MISMATCH, NO_NODE;
    hyperv_annotation: RULE;
    pub windows_taint: MISSING, LINUX_TOLERATES;
    memory_limits: RULE;
    host_path_os: LINUX_PATH, LINUX_DEVICE, WINDOWS_PATH;
    secret_volume: RULE;
    dns_searches: RULE;
    pub service_affinity: RULE;
    api_refused: RULE;
    apiserver_os_fields: RULE;
}

/// Advice rules that `policies/default.yaml` turns off (enable them in a
/// policy file); every other rule is on in the default policy.
pub const OFF_BY_DEFAULT: &[&str] = &["WIN-SECRET-VOLUME"];

/// Looks a rule up by id.
#[must_use]
pub fn find(id: &str) -> Option<&'static Rule> {
    ALL.iter().copied().find(|r| r.info.id == id)
}

/// The base URL rules link to.
pub const WINDOWS_DOCS: &str =
    "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod";

/// Which container list a container came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerList {
    Containers,
    InitContainers,
    EphemeralContainers,
}

impl ContainerList {
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Self::Containers => "containers",
            Self::InitContainers => "initContainers",
            Self::EphemeralContainers => "ephemeralContainers",
        }
    }
}

/// One container of the pod, with where it lives.
#[derive(Clone, Copy)]
pub struct ContainerRef<'v, 'a> {
    pub list: ContainerList,
    pub index: usize,
    pub container: &'v ContainerView<'a>,
}

impl<'v, 'a> ContainerRef<'v, 'a> {
    #[must_use]
    pub fn security_context(&self) -> Option<&'v SecurityContextView<'a>> {
        self.container.security_context.as_ref()
    }

    #[must_use]
    pub fn name(&self) -> &'v str {
        self.container.name.as_deref().unwrap_or_default()
    }
}

pub use crate::targeting::HostProcess;

/// Everything a rule may read: the workload, its pod spec, how it is
/// targeted, the Kubernetes version, and helpers to build field paths.
pub struct RuleContext<'e, 'v, 'a> {
    pub workload: &'e Workload<'v, 'a>,
    pub spec: &'v SpecView<'a>,
    pub target: &'e Target,
    /// The target cluster's Kubernetes version (`cluster.kubernetes_version`).
    pub version: KubeVersion,
    /// The target cluster: version, runtime, stance, with their sources
    /// (narrowed to the nodes this pod may land on, when they are known).
    pub cluster: &'e Cluster,
    /// The cluster's Windows nodes, when known.
    pub nodes: Option<&'e crate::cluster::WindowsNodes>,
    /// What registries say of the pod's images, when looked up (never
    /// empty: no facts is `None`).
    pub registry: Option<&'e crate::images::KnownImages>,
    /// The cluster's gMSA facts, when the door knows them.
    pub gmsa: Option<&'e crate::gmsa::Facts>,
    pub host_process: HostProcess,
    /// Policy parameters the rules read.
    pub params: &'e params::RuleParams,
    /// What is known of the pod's RuntimeClass (from the input, the cluster
    /// or the policy), if it names one.
    pub runtime_class: Option<&'e crate::targeting::RuntimeClassInfo>,
    /// The pod runs Hyper-V isolated: its RuntimeClass is one the policy
    /// names in `hypervRuntimeClasses`, or its handler is in
    /// `hypervRuntimeHandlers`. Its Windows build need not match the node's.
    pub hyperv: bool,
    /// What the rules ask of each image, worked out once per evaluation.
    pub images: Images<'v>,
    /// Every container of the pod ([`containers_of`]), listed once per
    /// evaluation for [`RuleContext::containers`].
    pub all_containers: Vec<ContainerRef<'v, 'a>>,
}

/// What the rules ask of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageFacts {
    /// A Windows image by the policy's patterns (`params.windowsImages`).
    pub windows: bool,
    /// The Windows build its name or tag says.
    pub build: Option<crate::windows_builds::Build>,
    /// Known to run only on Linux ([`params::RuleParams::is_linux_image`]).
    pub linux: bool,
    /// Known to run only on Linux by its repository (`params.linuxImages`),
    /// not only by a tag word.
    pub linux_listed: bool,
}

/// [`ImageFacts`] already worked out, shared by every evaluation under the
/// same [`params::RuleParams`]: a cluster runs the same few images over and
/// over, and working the facts out (the policy's patterns, the build
/// table, the Linux names) costs some 2,700 instructions an image
/// (callgrind), a lookup here about a tenth of that.
///
/// Bounded: at most [`ImageFactsCache::MAX_ENTRIES`] images, forgotten all
/// at once when full; names longer than [`ImageFactsCache::MAX_NAME`] are
/// not kept. Like the policy's other derived data, it assumes the
/// parameters no longer change once used; a clone starts empty.
#[derive(Default)]
pub struct ImageFactsCache(std::sync::Mutex<std::collections::HashMap<Box<str>, ImageFacts>>);

impl ImageFactsCache {
    /// Images remembered at most.
    pub const MAX_ENTRIES: usize = 4096;
    /// Longest image name remembered.
    pub const MAX_NAME: usize = 512;

    /// The facts of `image`, from `work` the first time.
    pub fn get_or_insert(&self, image: &str, work: impl FnOnce() -> ImageFacts) -> ImageFacts {
        if let Some(facts) = self.known().get(image) {
            return *facts;
        }
        // Worked out without the lock held.
        let facts = work();
        if image.len() <= Self::MAX_NAME {
            let mut known = self.known();
            if known.len() >= Self::MAX_ENTRIES {
                known.clear();
            }
            known.insert(image.into(), facts);
        }
        facts
    }

    /// Images remembered now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.known().len()
    }

    /// The images remembered (a poisoned lock still holds good facts).
    fn known(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Box<str>, ImageFacts>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Nothing remembered yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Clone for ImageFactsCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for ImageFactsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ImageFactsCache({} images)", self.len())
    }
}

/// [`ImageFacts`] of the images of one evaluation, each worked out on
/// first use: several rules ask about every container's image.
#[derive(Debug, Default)]
pub struct Images<'v>(std::cell::RefCell<Vec<(&'v str, ImageFacts)>>);

/// Every container, init container and ephemeral container of `spec`, in
/// that order. Listed once per evaluation: some twenty rules go through
/// them, and a slice is less code in each than this chain of lists.
#[must_use]
pub fn containers_of<'v, 'a>(spec: &'v SpecView<'a>) -> Vec<ContainerRef<'v, 'a>> {
    [
        (
            ContainerList::InitContainers,
            spec.init_containers.as_deref(),
        ),
        (ContainerList::Containers, spec.containers.as_deref()),
        (
            ContainerList::EphemeralContainers,
            spec.ephemeral_containers.as_deref(),
        ),
    ]
    .into_iter()
    .flat_map(|(list, cs)| {
        cs.unwrap_or_default()
            .iter()
            .enumerate()
            .map(move |(index, container)| ContainerRef {
                list,
                index,
                container,
            })
    })
    .collect()
}

impl<'e, 'v, 'a> RuleContext<'e, 'v, 'a> {
    /// The facts of `image` (memoized for this evaluation, and across
    /// evaluations under the same parameters by [`ImageFactsCache`]).
    pub fn image(&self, image: &'v str) -> ImageFacts {
        if let Some((_, facts)) = self.images.0.borrow().iter().find(|(i, _)| *i == image) {
            return *facts;
        }
        let facts = self
            .params
            .image_facts
            .get_or_insert(image, || self.params.facts_of(image));
        self.images.0.borrow_mut().push((image, facts));
        facts
    }

    /// The registry's facts of `image`, when its lookup succeeded: they
    /// win over what its name says.
    #[must_use]
    pub fn registry_facts(&self, image: &str) -> Option<&'e crate::images::ImageFacts> {
        self.registry?.facts(image)
    }

    /// Runs only on Windows: every platform its registry lists is Windows,
    /// or, without facts, its name says so (`params.windowsImages`, a tag
    /// naming a Windows build).
    pub fn windows_only(&self, image: &'v str) -> bool {
        match self.registry_facts(image) {
            Some(f) => f.windows_only(),
            None => {
                let facts = self.image(image);
                facts.windows || facts.build.is_some()
            }
        }
    }

    /// Has no Windows variant: its registry lists no Windows platform, or,
    /// without facts, its name says Linux-only (`params.linuxImages`,
    /// `params.linuxTagWords`).
    pub fn linux_only(&self, image: &'v str) -> bool {
        match self.registry_facts(image) {
            Some(f) => f.no_windows(),
            None => self.image(image).linux,
        }
    }

    /// The Windows builds `image` offers to a process-isolated container:
    /// the `os.version` builds of its registry's Windows platforms, or,
    /// without facts (or Windows platforms without `os.version`), the build
    /// its name says. With the facts that gave them.
    pub fn windows_builds(
        &self,
        image: &'v str,
    ) -> (
        Vec<crate::windows_builds::Build>,
        Option<&'e crate::images::ImageFacts>,
    ) {
        if let Some(f) = self.registry_facts(image) {
            let builds = f.windows_builds();
            if !builds.is_empty() {
                return (builds, Some(f));
            }
            if !f.has_windows() {
                // A Linux image has no Windows build at all; Windows
                // platforms without `os.version` leave it to the name.
                return (Vec::new(), Some(f));
            }
        }
        (self.image(image).build.into_iter().collect(), None)
    }

    /// Path of a pod-spec field, e.g. `cx.spec_field(&["hostPID"])`.
    #[must_use]
    pub fn spec_field(&self, keys: &[&'static str]) -> FieldPath {
        let mut p = self.workload.spec_path.clone();
        p.push_keys(keys);
        p
    }

    /// Path of a container field, e.g. `securityContext.privileged` of `c`.
    #[must_use]
    pub fn container_field(&self, c: &ContainerRef<'_, '_>, keys: &[&'static str]) -> FieldPath {
        let mut p = self.workload.spec_path.key(c.list.key()).index(c.index);
        p.push_keys(keys);
        p
    }

    /// Every container, init container and ephemeral container.
    pub fn containers(&self) -> impl Iterator<Item = ContainerRef<'v, 'a>> + '_ {
        self.all_containers.iter().copied()
    }

    /// The pod-level security context, if any.
    #[must_use]
    pub fn pod_security_context(&self) -> Option<&'v crate::view::PodSecurityContextView<'a>> {
        self.spec.security_context.as_ref()
    }
}

/// Where a rule writes its findings. The engine sets the rule and severity;
/// the rule gives the field, the message and, where safe, the fix.
pub struct RuleFindings {
    pub(crate) rule: &'static str,
    pub(crate) severity: Severity,
    pub(crate) findings: Vec<Finding>,
}

impl RuleFindings {
    #[must_use]
    pub fn new() -> Self {
        Self {
            rule: "",
            severity: Severity::Error,
            findings: Vec::new(),
        }
    }

    /// Drops the findings after the first `len` (a rule the workload opted out of).
    pub(crate) fn truncate(&mut self, len: usize) {
        self.findings.truncate(len);
    }

    /// The findings reported so far.
    pub(crate) fn into_findings(self) -> Vec<Finding> {
        self.findings
    }

    pub fn report(&mut self, field: FieldPath, message: impl Into<String>) {
        self.push(field, message.into(), None);
    }

    /// Reports a finding whose fix removes the offending field: safe only
    /// for settings that have no effect on Windows.
    pub fn report_removable(&mut self, field: FieldPath, message: impl Into<String>, fix: &str) {
        let op = crate::finding::remove_op(&field);
        let fix = Fix {
            kind: FixKind::RemoveNoOp,
            description: fix.to_owned(),
            ops: vec![op],
        };
        self.push(field, message.into(), Some(fix));
    }

    pub fn report_with_fix(&mut self, field: FieldPath, message: impl Into<String>, fix: Fix) {
        self.push(field, message.into(), Some(fix));
    }

    /// Reports a removable finding when `removable`, a plain one otherwise
    /// (the strict stance keeps "intent lost" fields so validation sees them).
    pub fn report_maybe_removable(
        &mut self,
        removable: bool,
        field: FieldPath,
        message: impl Into<String>,
        fix: &str,
    ) {
        if removable {
            self.report_removable(field, message, fix);
        } else {
            self.report(field, message);
        }
    }

    fn push(&mut self, field: FieldPath, message: String, fix: Option<Fix>) {
        self.findings.push(Finding {
            rule: self.rule,
            severity: self.severity,
            field,
            message,
            fix,
        });
    }
}

impl Default for RuleFindings {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn image_facts_are_remembered_bounded_and_not_cloned() {
        let cache = ImageFactsCache::default();
        let facts = |windows| ImageFacts {
            windows,
            build: None,
            linux: !windows,
            linux_listed: !windows,
        };
        assert_eq!(cache.get_or_insert("a:1", || facts(true)), facts(true));
        let again = || -> ImageFacts { panic!("worked out a second time") };
        assert_eq!(cache.get_or_insert("a:1", again), facts(true));
        assert_eq!(cache.clone().len(), 0, "a clone starts empty");

        let long = "x".repeat(ImageFactsCache::MAX_NAME + 1);
        assert_eq!(cache.get_or_insert(&long, || facts(false)), facts(false));
        assert_eq!(cache.len(), 1, "a long name is not kept");
        for i in 0..ImageFactsCache::MAX_ENTRIES {
            cache.get_or_insert(&format!("i{i}"), || facts(false));
            assert!(cache.len() <= ImageFactsCache::MAX_ENTRIES);
        }
        assert!(
            cache.len() < ImageFactsCache::MAX_ENTRIES,
            "forgotten when full"
        );
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

/// Whether a rule reports a security-context field, and whether the fix
/// may remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    /// Not set, or set to an accepted value: not reported.
    No,
    /// Reported; removing it would change behaviour somewhere, so no
    /// automatic fix.
    Kept,
    /// Reported, and set to a value that has no effect on Windows:
    /// removing it is safe.
    Removable,
}

/// A field Windows ignores: reported, and removable, when `set`.
#[must_use]
pub fn removable_if(set: bool) -> Reported {
    if set {
        Reported::Removable
    } else {
        Reported::No
    }
}

impl From<bool> for Reported {
    fn from(reported: bool) -> Self {
        if reported { Self::Kept } else { Self::No }
    }
}

/// Checks one security-context field at pod level and in every container.
/// `pod` and `container` say whether the field is reported; `message` is the
/// finding's text and `fix` describes the removal for no-op values.
pub(crate) fn security_field(
    cx: &RuleContext<'_, '_, '_>,
    out: &mut RuleFindings,
    key: &'static str,
    message: &str,
    pod: Option<&dyn Fn(&crate::view::PodSecurityContextView<'_>) -> Reported>,
    container: Option<&dyn Fn(&SecurityContextView<'_>) -> Reported>,
    fix: &str,
) {
    // Paths are built only for hits: this runs for every container and rule.
    let mut emit = |hit: Reported, path: &dyn Fn() -> FieldPath| match hit {
        Reported::No => {}
        Reported::Kept => out.report(path(), message),
        Reported::Removable => out.report_removable(path(), message, fix),
    };
    if let (Some(pod), Some(sc)) = (pod, cx.pod_security_context()) {
        emit(pod(sc), &|| cx.spec_field(&["securityContext", key]));
    }
    if let Some(container) = container {
        for c in cx.containers() {
            if let Some(sc) = c.security_context() {
                emit(container(sc), &|| {
                    cx.container_field(&c, &["securityContext", key])
                });
            }
        }
    }
}
