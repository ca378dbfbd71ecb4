//! Loading the cluster configuration: `--kubeconfig`, `--context`,
//! `$KUBECONFIG`, `~/.kube/config` or the pod's in-cluster config, with
//! errors that say once what was tried and why it failed.

use std::path::Path;

use kube::Config;
use kube::config::{KubeConfigOptions, Kubeconfig};

pub(crate) async fn load_config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> anyhow::Result<Config> {
    load_config_or(
        kubeconfig,
        context,
        "pass --kubeconfig, set $KUBECONFIG, or report from files with --from-file",
    )
    .await
}

/// [`load_config`] for a command whose way out without a cluster
/// configuration is `instead` (said when none is found).
pub(crate) async fn load_config_or(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    instead: &str,
) -> anyhow::Result<Config> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    // kube's errors repeat their cause at every level (and quote the path
    // twice): say once what was tried and the root cause.
    match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| {
                anyhow::anyhow!(
                    "cannot read kubeconfig {}: {}",
                    path.display(),
                    root_cause(&e)
                )
            })?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot use kubeconfig {}: {}",
                        path.display(),
                        root_cause(&e)
                    )
                })
        }
        None if context.is_some() => Config::from_kubeconfig(&options).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot load {} for --context: {}",
                default_kubeconfig(),
                root_cause(&e)
            )
        }),
        None => Config::infer().await.map_err(|e| {
            anyhow::anyhow!(
                "no cluster configuration found (not in a pod, and {}: {}): {instead}",
                default_kubeconfig(),
                root_cause(&e)
            )
        }),
    }
}

/// Where kube looks for a kubeconfig without --kubeconfig.
pub(super) fn default_kubeconfig() -> String {
    match std::env::var_os("KUBECONFIG") {
        Some(k) => format!("$KUBECONFIG ({})", k.to_string_lossy()),
        None => std::env::var_os("HOME").map_or_else(
            || "~/.kube/config".to_owned(),
            |h| format!("{}/.kube/config", h.to_string_lossy()),
        ),
    }
}

/// The innermost cause of an error (kube wraps an I/O error in several
/// layers that each print it again).
pub(super) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut e = e;
    while let Some(next) = e.source() {
        e = next;
    }
    e.to_string()
}
