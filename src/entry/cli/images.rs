//! `winadmit images` and the registry options that `images resolve`,
//! `lint --registry`, `report --registry` and `serve --registry` share.

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct ImagesArgs {
    #[command(subcommand)]
    pub what: ImagesCommand,
}

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Write an image facts file (each image's digest and platforms, for
    /// `--image-facts`) from the images' registries.
    #[command(
        after_help = "Exit codes: 0 every image resolved; 1 some lookups failed (the file still names them, with `unknown` and the reason); 2 a usage problem (a credentials file that cannot be read)."
    )]
    Resolve(ResolveArgs),
}

#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// Image references, as pods write them (`nginx:1.27`,
    /// `registry.example/app@sha256:...`).
    #[arg(value_name = "IMAGE", required = true)]
    pub images: Vec<String>,
    /// Write the file here instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// How registries are reached (`images resolve`, `lint --registry`,
/// `report --registry`, `serve --registry`).
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// A Docker config.json (`{"auths": {...}}`, the format of a
    /// `kubernetes.io/dockerconfigjson` Secret) with credentials per
    /// registry; other registries are accessed anonymously.
    #[arg(long, value_name = "FILE", env = "WINADMIT_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,
    /// A registry (`host[:port]`, as images name it) reached over plain
    /// HTTP instead of HTTPS (repeatable).
    #[arg(
        long,
        value_name = "HOST",
        env = "WINADMIT_INSECURE_REGISTRY",
        value_delimiter = ','
    )]
    pub insecure_registry: Vec<String>,
    /// A PEM file of CA certificates to trust for registries, besides the
    /// system's (repeatable).
    #[arg(
        long,
        value_name = "FILE",
        env = "WINADMIT_REGISTRY_CA",
        value_delimiter = ','
    )]
    pub registry_ca: Vec<PathBuf>,
    /// The deadline of one lookup, in seconds: past it the image's facts
    /// are unknown and it is judged by its name.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 5.0,
        env = "WINADMIT_REGISTRY_TIMEOUT"
    )]
    pub registry_timeout: f64,
    /// Look the images of registry HOST up at MIRROR first, and at HOST
    /// when the mirror fails, as containerd's hosts.toml mirrors do:
    /// `docker.io=mirror.example:5000`, `registry.example=harbor.example/proxy`
    /// (repositories under a path), `http://` for a plain-HTTP mirror
    /// (repeatable; several mirrors of one registry are asked in order).
    #[arg(
        long,
        value_name = "HOST=MIRROR",
        env = "WINADMIT_REGISTRY_MIRROR",
        value_delimiter = ','
    )]
    pub registry_mirror: Vec<String>,
    /// A host (`host[:port]`) a registry's token realm may name over
    /// plain HTTP (repeatable). A realm is otherwise asked only over HTTPS
    /// or on the registry's own host and port, so that a registry cannot make
    /// winadmit GET an arbitrary plain-HTTP address.
    #[arg(
        long,
        value_name = "HOST",
        env = "WINADMIT_REGISTRY_TOKEN_REALM",
        value_delimiter = ','
    )]
    pub registry_token_realm: Vec<String>,
}

impl RegistryArgs {
    /// # Errors
    /// The timeout is not a positive number of seconds, or a mirror is
    /// not `HOST=MIRROR`.
    pub fn options(&self) -> anyhow::Result<crate::input::registry::RegistryOptions> {
        if !(self.registry_timeout.is_finite()
            && self.registry_timeout > 0.0
            && self.registry_timeout <= 600.0)
        {
            anyhow::bail!(
                "--registry-timeout {}: give a number of seconds above 0, at most 600",
                self.registry_timeout
            );
        }
        let mirrors = self
            .registry_mirror
            .iter()
            .map(|m| {
                m.parse::<crate::input::registry::Mirror>()
                    .map_err(|e| anyhow::anyhow!("--registry-mirror {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(crate::input::registry::RegistryOptions {
            insecure: self.insecure_registry.clone(),
            config: self.registry_config.clone(),
            ca_files: self.registry_ca.clone(),
            deadline: Some(std::time::Duration::from_secs_f64(self.registry_timeout)),
            mirrors,
            token_realms: self.registry_token_realm.clone(),
        })
    }
}
