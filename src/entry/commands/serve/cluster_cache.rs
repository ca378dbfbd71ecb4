//! `serve --cluster-cache`: find the cluster configuration, then start the
//! watch cache and hold `/readyz` until its first list (bounded). Glue only:
//! the cache is `server::watch_cache`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kube::Config;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::decision::policy::Policy;
use crate::entry::cli::{ClusterCacheMode, GmsaMode, WatchCacheArgs};
use crate::entry::server::ServerState;
use crate::entry::server::api_limits::{ApiLimits, ApiLimitsLayer};
use crate::entry::server::watch_cache::{self, WatchCache};

/// A cache whose configuration was found, not yet started.
pub struct Prepared {
    config: Config,
    pub cache: Arc<WatchCache>,
    sync_timeout: Duration,
    /// How long each call to the API server may take.
    pub deadlines: watch_cache::Deadlines,
    /// What the cache accepts from the API server.
    pub limits: ApiLimits,
    /// Whether the watchers run (`--cluster-cache` not off).
    watch: bool,
    /// `--gmsa`.
    gmsa: GmsaMode,
    /// `--registry-pull-secrets`: the image cache reads pods' Secrets.
    pull_secrets: bool,
    /// `--manage-pin-linux`.
    manage_pin_linux: Option<String>,
}

/// Finds the cluster configuration for `--cluster-cache`. `None`: run
/// without the cache (`off`, or `auto` with no configuration, logged once).
///
/// # Errors
/// `--cluster-cache on` without a usable configuration, or an explicit
/// `--kubeconfig`/`--context` that cannot be used: start-up mistakes,
/// reported before binding.
pub fn prepare(
    args: WatchCacheArgs,
    policy: &Policy,
    pull_secrets: bool,
) -> anyhow::Result<Option<Prepared>> {
    let WatchCacheArgs {
        mode,
        kubeconfig,
        context,
        cluster_cache_sync_timeout,
        cluster_cache_max_response_bytes,
        cluster_cache_max_pages,
        gmsa,
        manage_pin_linux,
    } = args;
    if pull_secrets && mode == ClusterCacheMode::Off {
        tracing::info!(
            "cluster cache off (--cluster-cache off): namespace labels and cluster RuntimeClasses are not used; --registry-pull-secrets reads pods' Secrets with a get"
        );
    } else if gmsa != GmsaMode::Off && mode == ClusterCacheMode::Off {
        tracing::info!(
            "cluster cache off (--cluster-cache off): namespace labels and cluster RuntimeClasses are not used; --gmsa reads the cluster's GMSACredentialSpecs with a get per review"
        );
    } else if mode == ClusterCacheMode::Off {
        tracing::info!(
            "cluster cache off (--cluster-cache off): namespace labels and cluster RuntimeClasses are not used"
        );
        return Ok(None);
    }
    let Some(config) = find_config(kubeconfig.as_deref(), context, mode, gmsa, pull_secrets)?
    else {
        return Ok(None);
    };
    Ok(Some(Prepared {
        config,
        cache: Arc::new(WatchCache::for_policy(policy)),
        sync_timeout: cluster_cache_sync_timeout,
        deadlines: watch_cache::Deadlines::default(),
        limits: ApiLimits {
            max_response_bytes: usize::try_from(cluster_cache_max_response_bytes)
                .unwrap_or(usize::MAX),
            max_pages: cluster_cache_max_pages,
        },
        watch: mode != ClusterCacheMode::Off,
        gmsa,
        pull_secrets,
        manage_pin_linux,
    }))
}

/// The cluster configuration: `--kubeconfig`, `--context`, or inferred
/// (in-cluster, `$KUBECONFIG`, `~/.kube/config`). `None`: none found and
/// none required (logged once).
fn find_config(
    kubeconfig: Option<&std::path::Path>,
    context: Option<String>,
    mode: ClusterCacheMode,
    gmsa: GmsaMode,
    pull_secrets: bool,
) -> anyhow::Result<Option<Config>> {
    // Config loading is async in kube but does no network I/O; a small
    // runtime of its own keeps it before the server's runtime and binding.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let options = KubeConfigOptions {
        context: context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match (kubeconfig, &context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path).with_context(|| {
                format!(
                    "cannot read --kubeconfig {} (or use --cluster-cache off)",
                    path.display()
                )
            })?;
            rt.block_on(Config::from_custom_kubeconfig(kc, &options))
                .with_context(|| format!("cannot use --kubeconfig {}", path.display()))?
        }
        (None, Some(ctx)) => rt
            .block_on(Config::from_kubeconfig(&options))
            .with_context(|| {
                format!(
                    "cannot load context {ctx:?} (--context) from $KUBECONFIG or ~/.kube/config"
                )
            })?,
        (None, None) => match rt.block_on(Config::infer()) {
            Ok(c) => c,
            Err(e) if pull_secrets => {
                return Err(anyhow::Error::new(e).context(
                    "--registry-pull-secrets: no cluster configuration found; run in a pod, set $KUBECONFIG or pass --kubeconfig",
                ));
            }
            Err(e) if gmsa == GmsaMode::On => {
                return Err(anyhow::Error::new(e).context(
                    "--gmsa on: no cluster configuration found; run in a pod, set $KUBECONFIG or pass --kubeconfig",
                ));
            }
            Err(e) if mode == ClusterCacheMode::On => {
                return Err(anyhow::Error::new(e).context(
                    "--cluster-cache on: no cluster configuration found; run in a pod, set $KUBECONFIG or pass --kubeconfig",
                ));
            }
            Err(e) => {
                tracing::info!(
                    reason = %e,
                    "no cluster configuration found (in-cluster, $KUBECONFIG, ~/.kube/config): serving without the cluster cache, so namespace labels and cluster RuntimeClasses are not used"
                );
                return Ok(None);
            }
        },
    };
    Ok(Some(config))
}

impl Prepared {
    /// Starts the watchers on the current runtime and holds readiness until
    /// both resources are listed or the sync timeout passes, whichever
    /// comes first.
    ///
    /// # Errors
    /// The client cannot be built from the configuration (e.g. an invalid
    /// certificate in the kubeconfig).
    pub fn start(self, state: &Arc<ServerState>) -> anyhow::Result<()> {
        let Self {
            config,
            cache,
            sync_timeout,
            deadlines,
            limits,
            watch,
            gmsa,
            pull_secrets,
            manage_pin_linux,
        } = self;
        let mut config = config;
        // Every call has deadlines: a silent or trickling API server makes
        // the watcher fail and retry (logged), never hang for good.
        deadlines.apply_to(&mut config);
        let server = config.cluster_url.to_string();
        let client = ClientBuilder::try_from(config)
            .with_context(|| {
                format!("cannot create a Kubernetes client for {server} (--kubeconfig, or --cluster-cache off)")
            })?
            .with_layer(&ApiLimitsLayer::new(limits))
            .build();
        if pull_secrets && let Some(images) = state.image_cache() {
            tracing::info!(
                "registry: pods' imagePullSecrets are used (--registry-pull-secrets): Secrets are read with a get in the pod's namespace"
            );
            images.use_pull_secrets(client.clone());
        }
        if gmsa != GmsaMode::Off {
            let watched = watch.then(|| (Arc::clone(&cache), deadlines));
            start_gmsa(gmsa, client.clone(), state, watched, sync_timeout);
        }
        if !watch {
            return Ok(());
        }
        tracing::info!(
            server = %server,
            "cluster cache: watching namespaces and runtimeclasses.node.k8s.io"
        );
        if let Some(name) = manage_pin_linux {
            super::pin_linux::spawn(client.clone(), Arc::clone(&cache), name, Arc::clone(state));
        }
        watch_cache::spawn(
            client,
            Arc::clone(&cache),
            state.metrics.cluster(),
            deadlines,
        );
        state.set_cluster_pending(true);
        let state = Arc::clone(state);
        tokio::spawn(async move {
            if tokio::time::timeout(sync_timeout, cache.wait_synced())
                .await
                .is_ok()
            {
                tracing::info!("cluster cache: first list complete; ready");
            } else {
                let s = cache.synced();
                let missing: Vec<&str> = [
                    (!s.namespaces).then_some("namespaces"),
                    (!s.runtime_classes).then_some("runtimeclasses.node.k8s.io"),
                ]
                .into_iter()
                .flatten()
                .collect();
                tracing::warn!(
                    missing = %missing.join(","),
                    "cluster cache: not listed within {:?} (--cluster-cache-sync-timeout); ready without it, still retrying",
                    sync_timeout
                );
            }
            state.set_cluster_pending(false);
        });
        Ok(())
    }
}

/// Turns the gMSA checks on: at once with `--gmsa on`; with `auto`, once
/// the API server says it serves gmsacredentialspecs.windows.k8s.io (asked
/// once at start; absent or unanswered, the checks stay off, logged).
/// `/readyz` waits for the decision and, with the cluster cache, for the
/// credential specs' first list, at most `sync_timeout` for each (past
/// it, the resolver reads them with a get until the watch has listed).
fn start_gmsa(
    mode: GmsaMode,
    client: kube::Client,
    state: &Arc<ServerState>,
    watched: Option<(Arc<WatchCache>, watch_cache::Deadlines)>,
    sync_timeout: Duration,
) {
    use crate::entry::server::gmsa::{DEADLINE, Resolver, served};
    let resolver = Resolver::new(
        client.clone(),
        watched.as_ref().map(|(c, _)| Arc::clone(c)),
        DEADLINE,
    )
    .with_metrics(state.metrics.gmsa());
    let metrics = state.metrics.cluster();
    state.set_gmsa_pending(true);
    let mut resolver = Some(resolver);
    if mode == GmsaMode::On {
        tracing::info!("gmsa: on (--gmsa on): pods naming a GMSACredentialSpec are checked");
        if let Some(r) = resolver.take() {
            state.set_gmsa(r);
        }
    }
    let state = Arc::clone(state);
    tokio::spawn(async move {
        if let Some(resolver) = resolver {
            match tokio::time::timeout(sync_timeout, served(&client)).await {
                Ok(Ok(true)) => {
                    tracing::info!(
                        "gmsa: on (--gmsa auto): the API server serves gmsacredentialspecs.windows.k8s.io"
                    );
                    state.set_gmsa(resolver);
                }
                Ok(Ok(false)) => tracing::info!(
                    "gmsa: off (--gmsa auto): the API server does not serve gmsacredentialspecs.windows.k8s.io/v1 (install the GMSACredentialSpec CRD, then restart, or pass --gmsa on)"
                ),
                Ok(Err(e)) => tracing::warn!(
                    error = %crate::entry::errors::error_chain(&e),
                    "gmsa: off (--gmsa auto): cannot ask the API server whether it serves gmsacredentialspecs.windows.k8s.io; pass --gmsa on to check gMSA regardless"
                ),
                Err(_) => tracing::warn!(
                    "gmsa: off (--gmsa auto): no answer within {sync_timeout:?} (--cluster-cache-sync-timeout) to whether the API server serves gmsacredentialspecs.windows.k8s.io; pass --gmsa on to check gMSA regardless"
                ),
            }
        }
        if state.gmsa_on()
            && let Some((cache, deadlines)) = watched
        {
            tracing::info!("cluster cache: watching gmsacredentialspecs.windows.k8s.io");
            watch_cache::spawn_gmsa(client, Arc::clone(&cache), metrics, deadlines);
            if tokio::time::timeout(sync_timeout, cache.wait_gmsa_synced())
                .await
                .is_err()
            {
                tracing::warn!(
                    "cluster cache: gmsacredentialspecs.windows.k8s.io not listed within {sync_timeout:?} (--cluster-cache-sync-timeout); ready without it (credential specs are read with a get meanwhile), still retrying"
                );
            }
        }
        state.set_gmsa_pending(false);
    });
}
