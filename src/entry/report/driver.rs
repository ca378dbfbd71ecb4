//! The driver of a report: objects flow from a reader (the files, or an
//! entry point's own listing such as the live cluster's) through the
//! [`ReportBuilder`] into a [`ReportSink`], with the images of each looked
//! up first under `--registry`, and progress on stderr.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::Value;

use crate::input::source::json::StopError;
use crate::render::report::format::ReportSink;
use crate::render::report::{Added, Origin, ReportBuilder};

/// Objects flow from a reader through the builder into the sink.
pub struct Driver<'p> {
    pub builder: ReportBuilder<'p>,
    pub sink: Box<dyn ReportSink>,
    pub progress: Progress,
    /// `--registry`: the images of each object are looked up before it is
    /// judged.
    pub images: Option<ImageLookups>,
}

/// `report --registry`: the registry resolver, and the runtime its lookups
/// run on (the report itself is not async).
pub struct ImageLookups {
    resolver: crate::input::registry::Resolver,
    runtime: tokio::runtime::Runtime,
    /// `--registry-pull-secrets`: a resolver per credential identity.
    with_credentials: HashMap<u64, crate::input::registry::Resolver>,
    identity: std::hash::RandomState,
}

impl ImageLookups {
    /// Lookups through `resolver`.
    ///
    /// # Errors
    /// The runtime for the lookups cannot start.
    pub fn new(resolver: crate::input::registry::Resolver) -> anyhow::Result<Self> {
        Ok(Self {
            resolver,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the runtime for registry lookups")?,
            with_credentials: HashMap::new(),
            identity: std::hash::RandomState::new(),
        })
    }
}

impl Driver<'_> {
    /// One object from any input. With `--registry`, its images not known
    /// yet are looked up first (the readers look up a page or the input's
    /// images together before, so this finds them known).
    ///
    /// # Errors
    /// Writing its report failed.
    pub fn add(&mut self, value: &Value, origin: &Origin<'_>) -> Result<(), StopError> {
        if self.images.is_some() {
            let mut wanted = BTreeSet::new();
            self.builder.unknown_images(value, &mut wanted);
            self.resolve_images(wanted);
        }
        self.progress.tick();
        if let Added::Report(r) = self.builder.add(value, origin) {
            self.sink
                .object(&r)
                .map_err(|e| StopError(format!("cannot write the report: {e}")))?;
        }
        Ok(())
    }

    /// Whether the images of the objects are looked up (`--registry`).
    #[must_use]
    pub fn wants_images(&self) -> bool {
        self.images.is_some()
    }

    /// Looks `wanted` up (images whose facts are not known yet),
    /// [`crate::input::registry::CONCURRENT_LOOKUPS`] at a time, each within
    /// `--registry-timeout`, and hands the facts to the builder. A lookup
    /// that fails is an unknown fact (WIN-IMAGE-FACTS-UNKNOWN, the image
    /// judged by its name), never an error of the report.
    pub fn resolve_images(&mut self, wanted: BTreeSet<String>) {
        self.resolve_images_with(wanted, BTreeMap::new());
    }

    /// [`Driver::resolve_images`], where `own` gives, for some images, the
    /// credentials of a workload's `imagePullSecrets` for their registry
    /// (`--registry-pull-secrets`): those are looked up with them.
    pub fn resolve_images_with(
        &mut self,
        mut wanted: BTreeSet<String>,
        own: BTreeMap<String, crate::input::registry::Credentials>,
    ) {
        let Some(lookups) = &mut self.images else {
            return;
        };
        if wanted.is_empty() {
            return;
        }
        self.progress.note(&format!(
            "looking up {} in their registries",
            crate::render::report::plural(wanted.len(), "image", "images")
        ));
        // By credentials: each set of a pod's credentials has a resolver
        // (and an OCI client) of its own.
        let mut groups: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
        for (image, credentials) in own {
            if wanted.remove(&image) {
                let id = credentials.identity(&lookups.identity);
                let base = &lookups.resolver;
                lookups
                    .with_credentials
                    .entry(id)
                    .or_insert_with(|| base.with_credentials(credentials));
                groups.entry(id).or_default().insert(image);
            }
        }
        let mut found = lookups
            .runtime
            .block_on(lookups.resolver.resolve_all(&wanted));
        for (id, images) in groups {
            if let Some(resolver) = lookups.with_credentials.get(&id) {
                let more = lookups.runtime.block_on(resolver.resolve_all(&images));
                found.images.extend(more.images);
            }
        }
        for (image, lookup) in &found.images {
            if let crate::decision::images::Lookup::Unknown(why) = lookup {
                self.progress.note(&format!(
                    "{image}: facts unknown, judged by its name: {why}"
                ));
            }
        }
        self.builder.learn_images(found);
    }
}

/// Progress messages on stderr.
pub struct Progress {
    pub quiet: bool,
    pub seen: usize,
    every: usize,
    started: std::time::Instant,
}

impl Progress {
    #[must_use]
    pub fn new(quiet: bool) -> Self {
        Self {
            quiet,
            seen: 0,
            every: 25_000,
            started: std::time::Instant::now(),
        }
    }

    /// One more object read; a message every 25,000.
    pub fn tick(&mut self) {
        self.seen += 1;
        if !self.quiet && self.seen.is_multiple_of(self.every) {
            eprintln!(
                "winadmit: {} objects read ({:.1}s)",
                self.seen,
                self.started.elapsed().as_secs_f64()
            );
        }
    }

    pub fn note(&self, message: &str) {
        if !self.quiet {
            eprintln!("winadmit: {message}");
        }
    }
}

/// Feeds a report's objects to the driver (the live cluster's listing).
pub type ReadObjects<'a> = dyn FnOnce(&mut Driver<'_>) -> anyhow::Result<()> + 'a;

/// What a report reads.
pub enum Input<'a> {
    /// Manifest files and directories (`-` for stdin), read as `lint`
    /// reads them ([`super::files`]).
    Files(&'a [PathBuf]),
    /// Objects an entry point lists itself.
    Objects(Box<ReadObjects<'a>>),
}
