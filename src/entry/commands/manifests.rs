//! `winadmit manifests`: the committed `kubectl kustomize` render of an
//! overlay (`manifests/rendered/`), with the certificates, namespace, image
//! and caBundle filled in; with `--static DIR`, the overlay's webhook
//! configurations as the API server's static admission configuration.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;

use super::{EXIT_CLEAN, static_dir};
use crate::entry::cli::{ManifestsArgs, Overlay};
use crate::entry::manifests::{self, Certs, Customization, Render};
use crate::entry::static_admission;

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
        static_dir,
        static_host_dir,
        exempt_namespace,
        webhook_url,
    } = args;
    let render = render_of(overlay);
    // Only the self-signed overlay holds the certificates.
    let certs = match (&certs, render) {
        (Some(dir), Render::SelfSigned) => Some(read_certs(dir)?),
        _ => None,
    };
    let ca_pem = ca_bundle
        .as_ref()
        .map(|p| std::fs::read(p).with_context(|| format!("reading --ca-bundle {}", p.display())))
        .transpose()?;
    if render == Render::Base && ca_pem.is_none() && static_dir.is_none() {
        eprintln!(
            "winadmit: note: the base install has no caBundle and no TLS Secret; pass --ca-bundle FILE and create the Secret winadmit-tls, or use --overlay cert-manager or self-signed"
        );
    }
    let objects = manifests::customize(
        render,
        &Customization {
            certs: certs.as_ref(),
            namespace: namespace.as_deref(),
            image: image.as_deref(),
            // The static webhooks get the bundle below, whichever way the
            // overlay gets its own (cert-manager's cainjector...).
            ca_bundle: if static_dir.is_some() {
                None
            } else {
                ca_pem.as_deref()
            },
        },
    )?;

    if let Some(dir) = static_dir {
        // The self-signed overlay's CA, when no other bundle is given.
        let ca_pem = ca_pem.or_else(|| certs.as_ref().map(|c| c.ca_crt.clone()));
        write_static(
            &objects,
            &dir,
            static_host_dir.as_deref(),
            webhook_url.as_deref(),
            ca_pem.as_deref(),
            &exempt_namespace,
        )?;
        return Ok(ExitCode::from(EXIT_CLEAN));
    }
    let yaml = manifests::to_yaml(&objects).context("serializing the manifests")?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(yaml.as_bytes())
        .context("writing the manifests to stdout")?;
    Ok(ExitCode::from(EXIT_CLEAN))
}

fn render_of(overlay: Overlay) -> Render {
    match overlay {
        Overlay::Base => Render::Base,
        Overlay::CertManager => Render::CertManager,
        Overlay::SelfSigned => Render::SelfSigned,
        Overlay::Audit => Render::Audit,
        Overlay::NoMatchConditions => Render::NoMatchConditions,
        Overlay::CustomResources => Render::CustomResources,
        Overlay::AdmissionPolicy => Render::AdmissionPolicy,
        Overlay::Gmsa => Render::Gmsa,
        Overlay::OneCall => Render::OneCall,
    }
}

/// `--static DIR`: the overlay's webhooks as the API server's static
/// configuration, called at `url` and trusting `ca_pem`.
fn write_static(
    objects: &[serde_json::Value],
    dir: &Path,
    host_dir: Option<&str>,
    url: Option<&str>,
    ca_pem: Option<&[u8]>,
    exempt_namespace: &[String],
) -> anyhow::Result<()> {
    let (Some(url), Some(ca)) = (url, ca_pem) else {
        anyhow::bail!(
            "--static needs --webhook-url (where kube-apiserver calls winadmit) and --ca-bundle (the CA of winadmit's serving certificate): a static webhook cannot name a Service"
        );
    };
    let files = static_admission::webhook_files(
        objects,
        static_admission::WebhookTarget { url, ca_pem: ca },
        exempt_namespace,
    )?;
    let config = static_dir::write(
        dir,
        host_dir,
        &[
            static_admission::Plugin::MutatingWebhook,
            static_admission::Plugin::ValidatingWebhook,
        ],
        &files,
    )?;
    static_dir::report(&config, &files);
    Ok(())
}

/// `ca.crt`, `tls.crt` and `tls.key` from the output directory of `winadmit certs`.
fn read_certs(dir: &Path) -> anyhow::Result<Certs> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).with_context(|| {
            format!(
                "--certs: cannot read {}; run `winadmit certs --out {}` first",
                path.display(),
                dir.display()
            )
        })
    };
    Ok(Certs {
        ca_crt: read("ca.crt")?,
        tls_crt: read("tls.crt")?,
        tls_key: read("tls.key")?,
    })
}
