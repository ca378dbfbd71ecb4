//! `winadmit manifests`: the install from `manifests/`, rendered without
//! kustomize, with the namespace, image and caBundle filled in.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;

use super::EXIT_CLEAN;
use crate::cli::{ManifestsArgs, Overlay};
use crate::manifests::{self, Customization, ManifestsError};

/// # Errors
/// Unreadable files, a missing `--certs` for the self-signed overlay, or
/// options that do not fit the overlay (exit 2).
pub fn run(args: ManifestsArgs) -> anyhow::Result<ExitCode> {
    let ManifestsArgs {
        overlay,
        ca_bundle,
        certs,
        namespace,
        image,
    } = args;
    let dir = match overlay {
        Overlay::Base => "",
        Overlay::CertManager => "overlays/cert-manager",
        Overlay::SelfSigned => "overlays/self-signed",
        Overlay::Audit => "overlays/audit",
        Overlay::NoMatchConditions => "overlays/no-match-conditions",
        Overlay::CustomResources => "overlays/custom-resources",
        Overlay::AdmissionPolicy => "overlays/admission-policy",
    };

    // secretGenerator files (`certs/tls.crt`, ...) come from --certs, by file name.
    let generator_file = |path: &str| -> Option<Vec<u8>> {
        let name = path.rsplit('/').next()?;
        std::fs::read(certs.as_ref()?.join(name)).ok()
    };
    let mut objects = manifests::build(dir, &generator_file).map_err(|e| match e {
        ManifestsError::MissingGeneratorFile { ref file, .. } => match &certs {
            Some(d) => anyhow::anyhow!(
                "{e}: cannot read {}; run `winadmit certs --out {}` first",
                d.join(file.rsplit('/').next().unwrap_or(file)).display(),
                d.display()
            ),
            None => anyhow::anyhow!(
                "{e}: pass --certs DIR with the output of `winadmit certs --namespace NS --out DIR`"
            ),
        },
        other => other.into(),
    })?;

    let ca_pem = ca_bundle
        .as_ref()
        .map(|p| std::fs::read(p).with_context(|| format!("reading --ca-bundle {}", p.display())))
        .transpose()?;
    if overlay == Overlay::Base && ca_pem.is_none() {
        eprintln!(
            "winadmit: note: the base install has no caBundle and no TLS Secret; pass --ca-bundle FILE and create the Secret winadmit-tls, or use --overlay cert-manager or self-signed"
        );
    }
    manifests::customize(
        &mut objects,
        &Customization {
            namespace: namespace.as_deref(),
            image: image.as_deref(),
            ca_bundle: ca_pem.as_deref(),
        },
    )?;

    let yaml = manifests::to_yaml(&objects).context("serializing the manifests")?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(yaml.as_bytes())
        .context("writing the manifests to stdout")?;
    Ok(ExitCode::from(EXIT_CLEAN))
}
