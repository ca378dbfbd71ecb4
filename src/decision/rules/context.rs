//! What a rule reads: [`RuleContext`] (the workload, its pod spec, the
//! target cluster and what is known of it), the pod's containers, and the
//! facts of its images, worked out once per evaluation.

use super::params;
use crate::decision::cluster::TargetCluster;
use crate::decision::path::FieldPath;
use crate::decision::targeting::Target;
use crate::decision::version::KubeVersion;
use crate::decision::view::{ContainerRef, SpecView};
use crate::decision::workload::Workload;

pub use crate::decision::targeting::HostProcess;

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
    pub cluster: &'e TargetCluster,
    /// The cluster's Windows nodes, when known.
    pub nodes: Option<&'e crate::decision::cluster::WindowsNodes>,
    /// What registries say of the pod's images, when looked up (never
    /// empty: no facts is `None`).
    pub registry: Option<&'e crate::decision::images::KnownImages>,
    /// The cluster's gMSA facts, when the entry point knows them.
    pub gmsa: Option<&'e crate::decision::gmsa::Facts>,
    pub host_process: HostProcess,
    /// Policy parameters the rules read.
    pub params: &'e params::RuleParams,
    /// What is known of the pod's RuntimeClass (from the input, the cluster
    /// or the policy), if it names one.
    pub runtime_class: Option<&'e crate::decision::targeting::RuntimeClassInfo>,
    /// The pod runs Hyper-V isolated: its RuntimeClass is one the policy
    /// names in `hypervRuntimeClasses`, or its handler is in
    /// `hypervRuntimeHandlers`. Its Windows build need not match the node's.
    pub hyperv: bool,
    /// What the rules ask of each image, worked out once per evaluation.
    pub images: Images<'v>,
    /// Every container of the pod ([`crate::decision::view::containers_of`]), listed once per
    /// evaluation for [`RuleContext::containers`].
    pub all_containers: Vec<ContainerRef<'v, 'a>>,
}

/// What the rules ask of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageFacts {
    /// A Windows image by the policy's patterns (`params.windowsImages`).
    pub windows: bool,
    /// Can only be a Windows image by its name
    /// ([`params::RuleParams::is_certain_windows_image`]).
    pub certain_windows: bool,
    /// The Windows build its name or tag says.
    pub build: Option<crate::decision::windows_builds::Build>,
    /// Known to run only on Linux ([`params::RuleParams::is_linux_image`]).
    pub linux: bool,
    /// Known to run only on Linux by its repository (`params.linuxImages`),
    /// not only by a tag word.
    pub linux_listed: bool,
}

/// [`ImageFacts`] already worked out, shared by every evaluation under the
/// same [`params::RuleParams`]: a cluster runs the same few images over and
/// over, and working the facts out (the policy's patterns, the build
/// table, the Linux names) costs many times a lookup here
/// (docs/BENCHMARKS.md, "What was tried and not kept").
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
    pub fn registry_facts(&self, image: &str) -> Option<&'e crate::decision::images::ImageFacts> {
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
        Vec<crate::decision::windows_builds::Build>,
        Option<&'e crate::decision::images::ImageFacts>,
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
    pub fn pod_security_context(
        &self,
    ) -> Option<&'v crate::decision::view::PodSecurityContextView<'a>> {
        self.spec.security_context.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_facts_are_remembered_bounded_and_not_cloned() {
        let cache = ImageFactsCache::default();
        let facts = |windows| ImageFacts {
            windows,
            certain_windows: false,
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
}
