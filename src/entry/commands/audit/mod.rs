//! `winadmit audit`: keep the cluster's workloads judged and their findings
//! in reports. Glue only: the judging is [`crate::entry::audit`] (the
//! report's builder, so the same decision as the webhook, `lint` and
//! `report`), the watching of cluster facts is the webhook's watch cache.
//!
//! A command of its own rather than a mode of `serve`: it holds every
//! workload of the cluster in memory and needs list/watch on all of them
//! and write access to reports, none of which the webhook needs; run apart,
//! its memory and permissions stay out of the admission path, it scales
//! (one replica writing, by Lease) independently of the webhook's
//! replicas, and a restart of either leaves the other alone.
//!
//! The loop, every `--audit-interval`: load the policy again if its files
//! changed (every namespace is judged again); compare the cluster facts
//! with those last judged with and mark the namespaces a change affects
//! ([`facts`]); judge the marked namespaces (each from its objects in
//! [`store`], so folding is as `report` folds); set the gauges; and, while
//! leading, write what changed ([`writer`]).

mod exceptions;
mod facts;
mod failure;
mod judge;
mod kept;
mod service;
mod store;
mod writer;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::Client;

use crate::decision::cluster::TargetCluster;
use crate::decision::policy::Policy;
use crate::entry::audit::{self, Judged, Options, ReportApi, Tally};
use crate::entry::cli::{AuditArgs, GmsaMode, ReportApiChoice};
use crate::entry::server::Metrics;
use crate::entry::server::gmsa::Resolver;
use crate::entry::server::watch_cache::{self, WatchCache};

use facts::{PolicyFiles, Seen, Uses};
use judge::{Judge, Outcome, judging_threads};
use store::{Kept, Store};
use writer::{Key, Wanted, Writer};

/// How long the first pass waits for the cluster cache's first lists.
const SYNC_WAIT: Duration = Duration::from_secs(30);

/// # Errors
/// A start-up problem: the policy, the cluster configuration, the Lease,
/// the metrics address.
pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let _log = super::serve::init_logging(args.log_format, &args.log_level)?;
    let (policy, cluster) =
        super::load_policy(&args.policy).context("cannot start: fix the policy (--policy)")?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(audit(args, policy, cluster))?;
    rt.shutdown_timeout(Duration::from_secs(5));
    Ok(ExitCode::SUCCESS)
}

/// The audit's state between passes.
struct State {
    judge: Judge,
    store: Arc<Store>,
    /// Each namespace's finding counts and tally; its results live on
    /// only in its reports' text ([`Wanted`]).
    judged: BTreeMap<String, (Judged, Tally)>,
    uses: BTreeMap<String, Uses>,
    /// The names of each namespace's reports in `desired`.
    reports: BTreeMap<String, Vec<String>>,
    /// Every report wanted: the namespaces' and the cluster's.
    desired: BTreeMap<Key, Wanted>,
    /// The cluster's report is out of date (a namespace was judged).
    cluster_stale: bool,
    seen: Seen,
    policy_files: PolicyFiles,
    policy_checked: Instant,
    metrics: crate::entry::server::audit_metrics::AuditMetrics,
    /// The exceptions in force at the last pass ([`ExceptionSet::fingerprint`](crate::decision::exceptions::ExceptionSet::fingerprint)).
    exceptions_seen: Vec<String>,
}

async fn audit(args: AuditArgs, policy: Policy, cluster: TargetCluster) -> anyhow::Result<()> {
    let (client, server) = connect(&args).await?;
    let metrics = Arc::new(Metrics::new());
    let cache = Arc::new(WatchCache::for_policy(&policy));
    cache.track_exceptions(watch_cache::ExceptionCache::new(
        policy.exceptions.clone(),
        args.own_namespace.clone().unwrap_or_default(),
    ));
    watch_cache::spawn(
        client.clone(),
        Arc::clone(&cache),
        metrics.cluster(),
        watch_cache::Deadlines::default(),
    );
    let gmsa = start_gmsa(args.gmsa, &client, &cache, &metrics).await;
    let store = Arc::new(Store::default());
    store::spawn(&client, &store, watch_cache::WATCH_SECONDS);
    let ready = Arc::new(AtomicBool::new(false));
    if let Some(addr) = args.metrics_listen {
        service::serve_metrics(addr, Arc::clone(&metrics), Arc::clone(&ready)).await?;
    }
    let identity = service::identity(&args);
    let leadership = service::leadership(&args, &client, &identity).await?;
    let api = match args.report_api {
        ReportApiChoice::Openreports => ReportApi::OpenReports,
        ReportApiChoice::Policyreport => ReportApi::PolicyReport,
    };
    tracing::info!(
        server = %server,
        reports = %format!("{}/{}", api.group(), api.version()),
        "audit: watching the workloads, namespaces, RuntimeClasses and Windows nodes"
    );
    let mut state = State {
        judge: Judge {
            policy: Arc::new(policy),
            cluster,
            cache: Arc::clone(&cache),
            gmsa,
            options: Options {
                api,
                info: args.audit_info,
            },
        },
        store: Arc::clone(&store),
        judged: BTreeMap::new(),
        uses: BTreeMap::new(),
        reports: BTreeMap::new(),
        desired: BTreeMap::new(),
        cluster_stale: true,
        seen: Seen::default(),
        policy_files: PolicyFiles::stat(&args.policy.policy),
        policy_checked: Instant::now(),
        metrics: metrics.audit(),
        exceptions_seen: Vec::new(),
    };
    let mut writer = Writer::new(
        client.clone(),
        api,
        identity,
        args.report_writes_per_second,
        args.report_verify_interval,
        metrics.audit(),
    );
    wait_synced(&store, &cache).await;
    state.run(&args, &mut writer, &leadership, &ready).await;
    tracing::info!("audit: stopping");
    let service::Leadership { flag, task, .. } = leadership;
    drop(flag);
    if let Some(handle) = task {
        // Dropping the receiver releases the Lease: the next replica leads at once.
        let _ = tokio::time::timeout(Duration::from_secs(5), handle).await;
    }
    Ok(())
}

impl State {
    /// Passes every `--audit-interval` until SIGTERM or SIGINT.
    async fn run(
        &mut self,
        args: &AuditArgs,
        writer: &mut Writer,
        leadership: &service::Leadership,
        ready: &AtomicBool,
    ) {
        let mut tick = tokio::time::interval(args.audit_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stop = std::pin::pin!(service::shutdown());
        let mut was_leading = false;
        loop {
            tokio::select! {
                () = &mut stop => break,
                _ = tick.tick() => {}
            }
            if self.policy_checked.elapsed() >= args.policy_reload_interval {
                self.reload_policy(&args.policy);
            }
            self.pass().await;
            ready.store(true, Ordering::Relaxed);
            // The Lease itself, not only the lease manager's last word.
            let leading = leadership.leads().await;
            if leading != was_leading && args.leader_election {
                tracing::info!(
                    leading,
                    "audit: {}",
                    if leading {
                        "took the lead: writing the reports"
                    } else {
                        "not leading: standing by"
                    }
                );
            }
            was_leading = leading;
            self.metrics.leader(leading);
            self.refresh_cluster_report();
            let n = writer
                .reconcile(&self.desired, leading, &leadership.flag)
                .await;
            if leading {
                self.metrics.reports(n);
            } else {
                writer.forget();
            }
        }
    }

    /// Loads the policy again when its files changed; every namespace is
    /// judged again. A broken policy is logged and the last good one kept.
    fn reload_policy(&mut self, args: &crate::entry::cli::PolicyArgs) {
        self.policy_checked = Instant::now();
        let now = PolicyFiles::stat(&args.policy);
        if now == self.policy_files {
            return;
        }
        self.policy_files = now;
        match super::load_policy(args) {
            Ok((policy, cluster)) => {
                tracing::info!(
                    "audit: the policy changed (--policy); judging every namespace again"
                );
                self.judge.policy = Arc::new(policy);
                self.judge.cluster = cluster;
                self.store.mark_all();
            }
            Err(e) => tracing::warn!(
                "audit: the changed policy cannot be loaded, keeping the last good one: {}",
                crate::entry::errors::error_chain(&e)
            ),
        }
    }

    /// One pass: what changed, judged.
    async fn pass(&mut self) {
        self.check_exceptions();
        let keys = self.judge.cache.label_keys().to_vec();
        let changed = self
            .seen
            .check(&self.judge.cache, &keys, &self.uses, &self.store);
        if !changed.is_empty() {
            tracing::info!(changed = %changed.join(","), "audit: cluster facts changed; judging the namespaces they affect");
        }
        let dirty = self.store.take_dirty();
        if !dirty.is_empty() {
            let names: Vec<&String> = dirty.keys().collect();
            let runtime = tokio::runtime::Handle::current();
            let started = Instant::now();
            // The namespaces in equal shares, one blocking thread each.
            let share = names.len().div_ceil(judging_threads());
            let tasks: Vec<_> = names
                .chunks(share.max(1))
                .map(|part| {
                    let todo: Vec<(String, Vec<Kept>)> = part
                        .iter()
                        .map(|ns| ((*ns).clone(), self.store.objects_of(ns)))
                        .collect();
                    let judge = self.judge.clone();
                    let runtime = runtime.clone();
                    let task =
                        tokio::task::spawn_blocking(move || judge.namespaces(todo, &runtime));
                    (part, task)
                })
                .collect();
            let mut n = 0;
            for (part, task) in tasks {
                match task.await {
                    Ok(done) => {
                        n += done.len();
                        for (ns, result) in done {
                            self.apply(ns, result);
                        }
                    }
                    Err(e) => {
                        tracing::error!(
                            "audit: judging failed: {e}; judging these namespaces again"
                        );
                        self.store.mark(part.iter().map(|ns| ns.as_str()));
                    }
                }
            }
            tracing::debug!(namespaces = n, elapsed = ?started.elapsed(), "audit: judged");
            let counts =
                audit::finding_counts(self.judged.iter().map(|(ns, (j, _))| (ns.as_str(), j)));
            self.metrics.set_findings(&counts);
            self.metrics.passed();
        }
        let (pending, oldest) = self.store.pending();
        let namespaces = self.judged.len();
        self.metrics.progress(
            self.store.len(),
            namespaces,
            pending,
            oldest.map_or(0.0, |t| t.elapsed().as_secs_f64()),
        );
    }

    /// Keeps a judged namespace's reports, counts and tally; `None`: the
    /// namespace has no workloads left.
    fn apply(&mut self, ns: String, result: Option<Outcome>) {
        self.cluster_stale = true;
        for name in self.reports.remove(&ns).unwrap_or_default() {
            self.desired.remove(&(Some(ns.clone()), name));
        }
        match result {
            Some(outcome) => {
                let mut names = Vec::with_capacity(outcome.reports.len());
                for (name, wanted) in outcome.reports {
                    self.desired
                        .insert((Some(ns.clone()), name.clone()), wanted);
                    names.push(name);
                }
                self.reports.insert(ns.clone(), names);
                self.uses.insert(ns.clone(), outcome.uses);
                self.judged.insert(ns, (outcome.judged, outcome.tally));
            }
            None => {
                self.uses.remove(&ns);
                self.judged.remove(&ns);
            }
        }
    }

    /// Builds the cluster's report again when a namespace was judged since.
    fn refresh_cluster_report(&mut self) {
        if !std::mem::take(&mut self.cluster_stale) {
            return;
        }
        let report = audit::cluster_report_of(
            self.judge.options.api,
            self.judged.values().map(|(_, t)| *t),
        );
        self.desired.insert(
            (None, audit::CLUSTER_REPORT.to_owned()),
            Wanted::new(&report),
        );
    }
}

/// Waits for the workloads' first lists, and for the cluster cache's (at
/// most [`SYNC_WAIT`]: without them the verdicts use the flags' and the
/// policy's facts, and are judged again once they come).
async fn wait_synced(store: &Store, cache: &WatchCache) {
    let started = Instant::now();
    let _ = tokio::time::timeout(SYNC_WAIT, cache.wait_synced()).await;
    while !store.synced() {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if started.elapsed() > SYNC_WAIT
            && started.elapsed() < SYNC_WAIT + Duration::from_millis(150)
        {
            tracing::warn!(
                "audit: the workloads are not listed yet; waiting (see the errors above)"
            );
        }
    }
    tracing::info!(workloads = store.len(), "audit: workloads listed; judging");
}

/// What to do when no cluster configuration is found: the audit has no
/// files to judge instead.
const NO_CLUSTER: &str = "pass --kubeconfig or --context, set $KUBECONFIG, or run the audit in a pod (the chart's audit.enabled=true); to judge manifests without a cluster, use `winadmit lint PATH` or `winadmit report --from-file PATH`";

/// The client of `--kubeconfig`/`--context` (or in-cluster), with the
/// watch cache's deadlines on every call.
async fn connect(args: &AuditArgs) -> anyhow::Result<(Client, String)> {
    let mut config = crate::entry::commands::report::live::config::load_config_or(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        NO_CLUSTER,
    )
    .await?;
    watch_cache::Deadlines::default().apply_to(&mut config);
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config)
        .with_context(|| format!("cannot create a Kubernetes client for {server}"))?;
    Ok((client, server))
}

/// `--gmsa`: the webhook's resolver, reading the watched credential specs.
async fn start_gmsa(
    mode: GmsaMode,
    client: &Client,
    cache: &Arc<WatchCache>,
    metrics: &Metrics,
) -> Option<Arc<Resolver>> {
    let on = match mode {
        GmsaMode::Off => false,
        GmsaMode::On => true,
        GmsaMode::Auto => crate::entry::server::gmsa::served(client)
            .await
            .unwrap_or(false),
    };
    if !on {
        return None;
    }
    watch_cache::spawn_gmsa(
        client.clone(),
        Arc::clone(cache),
        metrics.cluster(),
        watch_cache::Deadlines::default(),
    );
    tracing::info!("audit: gmsa on: watching gmsacredentialspecs.windows.k8s.io");
    Some(Arc::new(
        Resolver::new(
            client.clone(),
            Some(Arc::clone(cache)),
            crate::entry::server::gmsa::DEADLINE,
        )
        .with_metrics(metrics.gmsa()),
    ))
}
