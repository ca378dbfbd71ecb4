//! `winadmit images resolve`: image facts from the registries, as a file
//! for `--image-facts`.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;

use super::{EXIT_CLEAN, EXIT_FINDINGS};
use crate::decision::images::Lookup;
use crate::entry::cli::{ImagesArgs, ImagesCommand, ResolveArgs};
use crate::input::registry::Resolver;

/// # Errors
/// Bad registry options, or the output cannot be written.
pub fn run(args: ImagesArgs) -> anyhow::Result<ExitCode> {
    match args.what {
        ImagesCommand::Resolve(args) => resolve(args),
    }
}

fn resolve(args: ResolveArgs) -> anyhow::Result<ExitCode> {
    let ResolveArgs {
        images,
        output,
        registry,
    } = args;
    let resolver = Resolver::new(&registry.options()?)?;
    let images: BTreeSet<String> = images.into_iter().collect();
    let known = block_on(resolver.resolve_all(&images))?;
    let mut failed = 0;
    for (image, lookup) in &known.images {
        if let Lookup::Unknown(why) = lookup {
            failed += 1;
            eprintln!("winadmit: {image}: facts unknown: {why}");
        }
    }
    let text = known.to_json();
    match output {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => super::Stdout::new().write_all(text.as_bytes())?,
    }
    Ok(ExitCode::from(if failed == 0 {
        EXIT_CLEAN
    } else {
        EXIT_FINDINGS
    }))
}

/// Runs a registry lookup from a command that is not async.
///
/// # Errors
/// The runtime cannot be started.
pub fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime for registry lookups")?;
    Ok(runtime.block_on(f))
}
