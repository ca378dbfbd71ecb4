//! `winadmit certs`: a CA and serving certificate for installs without
//! cert-manager, written where the `self-signed` overlay reads them.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use base64::Engine as _;

use super::EXIT_CLEAN;
use crate::entry::certs::{self, CA_FILE, CERT_FILE, KEY_FILE};
use crate::entry::cli::CertsArgs;

/// # Errors
/// Invalid names, existing files without `--force`, or I/O failures (exit 2).
pub fn run(args: CertsArgs) -> anyhow::Result<ExitCode> {
    let CertsArgs {
        service,
        namespace,
        out,
        days,
        force,
    } = args;
    let bundle = certs::generate(&service, &namespace, time::OffsetDateTime::now_utc(), days)?;

    std::fs::create_dir_all(&out)
        .with_context(|| format!("creating the output directory {}", out.display()))?;
    if !force {
        for name in [CA_FILE, CERT_FILE, KEY_FILE] {
            let path = out.join(name);
            if path.exists() {
                bail!(
                    "{} exists. To rotate the certificate of an install, write the new files to another folder (--out certs-new) and follow docs/install.md, \"Rotating self-signed certificates\": trust the old and the new CA first, then switch the Secret, then drop the old CA, never the Secret and the caBundle in one step. --force overwrites these files",
                    path.display()
                );
            }
        }
    }
    write(&out.join(CA_FILE), bundle.ca_pem.as_bytes(), 0o644)?;
    write(&out.join(CERT_FILE), bundle.cert_pem.as_bytes(), 0o644)?;
    write(&out.join(KEY_FILE), bundle.key_pem.as_bytes(), 0o600)?;

    eprintln!(
        "winadmit: wrote {dir}/{CA_FILE}, {dir}/{CERT_FILE} and {dir}/{KEY_FILE} for {names}, valid {days} days; the CA key was not kept. The caBundle follows on stdout.",
        dir = out.display(),
        names = certs::service_dns_names(&service, &namespace).join(", "),
    );
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(bundle.ca_pem.as_bytes());
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{ca_bundle}").context("writing the caBundle to stdout")?;
    Ok(ExitCode::from(EXIT_CLEAN))
}

/// Writes a file with `mode` from the start (replacing any old file), so a
/// key is never readable by others, even briefly.
fn write(path: &Path, contents: &[u8], mode: u32) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        options.mode(mode);
        // An existing file keeps its old mode through open(); tighten it first.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("setting the mode of {}", path.display()))?;
        }
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(contents)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
