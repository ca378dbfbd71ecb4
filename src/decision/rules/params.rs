//! The parameters rules read (the policy's `params`), as the rules' own
//! type: the policy fills it in, the rules never read the policy.

use crate::decision::tolerations::Taint;

/// Parameters rules read.
#[derive(Debug, Clone, Default)]
pub struct RuleParams {
    /// Image name patterns that mark an image as a Windows image
    /// (`*` matches any run of characters).
    pub windows_images: Vec<String>,
    /// Image name patterns of repositories that publish only Windows
    /// images (Microsoft's Windows base images and their well-known
    /// derivatives): an image of one can only be a Windows image.
    pub certain_windows_images: Vec<String>,
    /// Repositories (after `docker.io/` and `library/` are stripped; `*`
    /// wildcards) whose images only run on Linux. Only images known to have
    /// no Windows variant belong here: multi-OS images (pause, agnhost, CSI
    /// sidecars) must not.
    pub linux_images: Vec<String>,
    /// Tag words (split at `-` and `_`) that mark a Linux image whatever its
    /// repository: `alpine`, `bookworm`, `ubuntu`, ...
    pub linux_tag_words: Vec<String>,
    /// The taint the cluster puts on Windows nodes, if any.
    pub windows_taint: Option<Taint>,
    /// RuntimeClass handlers that run Hyper-V isolated containers.
    pub hyperv_runtime_handlers: Vec<String>,
    /// RuntimeClass names known to use a Hyper-V handler (for the webhook,
    /// which may not see the RuntimeClass objects).
    pub hyperv_runtime_classes: Vec<String>,
    /// hostPath prefixes that only exist on Linux hosts (`/proc`, `/sys`, ...).
    pub linux_host_paths: Vec<String>,
    /// What is known of images seen before (empty in a clone).
    pub(crate) image_facts: super::ImageFactsCache,
}

impl RuleParams {
    /// Is this image a Windows image by the policy's patterns?
    #[must_use]
    pub fn is_windows_image(&self, image: &str) -> bool {
        let image = lowercase(image);
        self.windows_images
            .iter()
            .any(|p| crate::decision::glob::glob_match(p, &image))
    }

    /// Can this image only be a Windows image by its name: its repository
    /// is in `params.certainWindowsImages`, or its tag names a Windows base
    /// (a `windowsservercore` or `nanoserver` word) or a Windows release or
    /// build (`ltsc2022`, `10.0.20348`...). A name that merely looks Windows
    /// (`params.windowsImages`, e.g. `*servercore*` on any repository) is
    /// not enough.
    #[must_use]
    pub fn is_certain_windows_image(&self, image: &str) -> bool {
        let image = lowercase(image);
        let (_, tag) = crate::decision::windows_builds::split_image(&image);
        tag.into_iter()
            .flat_map(|t| t.split(['-', '_']))
            .any(|w| w == "windowsservercore" || w == "nanoserver")
            || crate::decision::windows_builds::image_build(&image).is_some()
            || self
                .certain_windows_images
                .iter()
                .any(|p| crate::decision::glob::glob_match(p, &image))
    }

    /// Is this image known to run only on Linux? Conservative: a Windows
    /// image by the patterns, or one whose tag names a Windows base
    /// (`nanoserver`, `windowsservercore`, `windows`, `ltsc2022`, ...), is
    /// never Linux.
    #[must_use]
    pub fn is_linux_image(&self, image: &str) -> bool {
        self.facts_of(image).linux
    }

    /// What the rules ask of an image, worked out (rules ask through
    /// [`super::RuleContext::image`], which remembers the answer).
    #[must_use]
    pub fn facts_of(&self, image: &str) -> super::ImageFacts {
        let windows = self.is_windows_image(image);
        let build = crate::decision::windows_builds::image_build(image);
        let linux = if windows || build.is_some() {
            LinuxBy::No
        } else {
            self.linux_by(image)
        };
        super::ImageFacts {
            windows,
            certain_windows: self.is_certain_windows_image(image),
            build,
            linux: linux != LinuxBy::No,
            linux_listed: linux == LinuxBy::Repository,
        }
    }

    /// The rest of [`RuleParams::is_linux_image`], for an image already
    /// known to be neither a Windows image by the patterns nor one with a
    /// known Windows build.
    #[must_use]
    pub fn linux_by_name(&self, image: &str) -> bool {
        self.linux_by(image) != LinuxBy::No
    }

    /// Why an image (neither a Windows image by the patterns nor one with
    /// a known Windows build) is taken for Linux-only, if it is: its
    /// repository is in `linuxImages`, or its tag has a `linuxTagWords`
    /// word. A tag naming Windows (`nanoserver`, `windowsservercore`,
    /// `windows-*`, `win`) always wins.
    #[must_use]
    pub fn linux_by(&self, image: &str) -> LinuxBy {
        let lower = lowercase(image);
        let (repository, tag) = crate::decision::windows_builds::split_image(&lower);
        let words = || tag.into_iter().flat_map(|t| t.split(['-', '_']));
        let windows_word = |w: &str| {
            w.contains("windows")
                || w.contains("nanoserver")
                || w.contains("servercore")
                || w == "win"
        };
        if words().any(windows_word) {
            LinuxBy::No
        } else if self
            .linux_images
            .iter()
            .any(|p| crate::decision::glob::glob_match(p, repository))
        {
            LinuxBy::Repository
        } else if words().any(|w| self.linux_tag_words.iter().any(|l| l == w)) {
            LinuxBy::TagWord
        } else {
            LinuxBy::No
        }
    }

    /// The first `linuxTagWords` word in the image's tag, for messages.
    #[must_use]
    pub fn linux_tag_word(&self, image: &str) -> Option<String> {
        let lower = lowercase(image);
        let (_, tag) = crate::decision::windows_builds::split_image(&lower);
        tag.into_iter()
            .flat_map(|t| t.split(['-', '_']))
            .find(|w| self.linux_tag_words.iter().any(|l| l == w))
            .map(str::to_owned)
    }

    /// Is this RuntimeClass (by name, or by its handler when known) a
    /// Hyper-V isolated one?
    #[must_use]
    pub fn is_hyperv_runtime(&self, class: &str, handler: Option<&str>) -> bool {
        self.hyperv_runtime_classes.iter().any(|c| c == class)
            || handler.is_some_and(|h| self.hyperv_runtime_handlers.iter().any(|x| x == h))
    }
}

/// Why an image is taken for Linux-only ([`RuleParams::linux_by`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinuxBy {
    /// Not known to be Linux-only.
    No,
    /// Its repository is in `params.linuxImages`: known to publish no
    /// Windows variant.
    Repository,
    /// Only a word of its tag (`alpine`, `bookworm`, ...) says Linux: a
    /// heuristic, some registries publish Windows builds under such tags.
    TagWord,
}

/// Image names are lowercase by the registry grammar: allocate only for the
/// odd one that is not (this runs for every container of every pod).
fn lowercase(image: &str) -> std::borrow::Cow<'_, str> {
    if image.bytes().any(|b| b.is_ascii_uppercase()) {
        image.to_ascii_lowercase().into()
    } else {
        image.into()
    }
}
