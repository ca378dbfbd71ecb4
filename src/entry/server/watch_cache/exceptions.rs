//! The cluster's `PolicyException`s as the webhook, `/report` and the
//! audit read them: every namespace's objects mirrored by a watch, read
//! into exceptions on each change, and sorted into those in force at the
//! instant a review asks (an exception that ends stops counting at its end
//! date, with no event needed; one created, changed or deleted counts from
//! the watch event on).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use futures::StreamExt as _;
use kube::runtime::watcher;
use serde_json::Value;

use super::Change;
use super::Mirror;
use super::Watched;
use super::watchers::run;
use crate::decision::exceptions::{Exception, ExceptionSet, ExceptionSettings, Timestamp};

/// What the cache publishes on each change: the exceptions read, the
/// problems of those that could not be, and the set in force when made.
#[derive(Debug, Default)]
struct Published {
    read: Vec<Exception>,
    unreadable: Vec<(String, String)>,
    set: Arc<ExceptionSet>,
    /// The set holds until this instant (the earliest end date); `None`:
    /// until the next change.
    until: Option<Timestamp>,
}

/// The mirror of the cluster's `PolicyException`s.
#[derive(Debug)]
pub struct ExceptionCache {
    settings: ExceptionSettings,
    own_namespace: String,
    mirror: Mutex<Mirror<Value>>,
    published: ArcSwap<Published>,
    /// The gauges (`winadmit_exceptions_*`), once the watch runs.
    metrics: std::sync::OnceLock<super::ClusterMetrics>,
}

impl ExceptionCache {
    /// A cache sorting exceptions as `settings` say, `own_namespace` being
    /// winadmit's own.
    #[must_use]
    pub fn new(settings: ExceptionSettings, own_namespace: String) -> Self {
        Self {
            settings,
            own_namespace,
            mirror: Mutex::new(Mirror::default()),
            published: ArcSwap::from_pointee(Published::default()),
            metrics: std::sync::OnceLock::new(),
        }
    }

    /// Keeps the exception gauges of `metrics` current.
    pub fn report_to(&self, metrics: super::ClusterMetrics) {
        let _ = self.metrics.set(metrics);
    }

    /// Reduces a watch event to a change keyed `namespace/name`.
    #[must_use]
    pub fn change(event: watcher::Event<kube::api::DynamicObject>) -> Option<Change<Value>> {
        let key = |o: &kube::api::DynamicObject| {
            Some(format!(
                "{}/{}",
                o.metadata.namespace.as_deref().unwrap_or_default(),
                o.metadata.name.as_deref()?
            ))
        };
        let value = |o: &kube::api::DynamicObject| serde_json::to_value(o).ok();
        Some(match event {
            watcher::Event::Init => Change::Relist,
            watcher::Event::InitApply(o) => Change::Listed(key(&o)?, value(&o)?),
            watcher::Event::InitDone => Change::ListDone,
            watcher::Event::Apply(o) => Change::Applied(key(&o)?, value(&o)?),
            watcher::Event::Delete(o) => Change::Deleted(key(&o)?),
        })
    }

    /// Applies a change; publishes the exceptions read once the first list
    /// is complete. Returns how many objects are mirrored.
    pub fn apply(&self, change: Change<Value>, now: Timestamp) -> usize {
        let mut m = self.mirror.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = m.apply(change);
        if m.is_synced() && changed {
            let objects: BTreeMap<&String, &Value> = m.iter().collect();
            let mut read = Vec::new();
            let mut unreadable = Vec::new();
            for (key, o) in objects {
                match crate::entry::exceptions::read(o) {
                    Ok(e) => read.push(e),
                    Err(why) => {
                        tracing::warn!(exception = %key, "PolicyException {key} is not read: {why}");
                        unreadable.push((key.clone(), why));
                    }
                }
            }
            self.publish(read, unreadable, now);
        }
        m.len()
    }

    fn publish(&self, read: Vec<Exception>, unreadable: Vec<(String, String)>, now: Timestamp) {
        let set = ExceptionSet::new(
            &self.settings,
            &self.own_namespace,
            read.iter().cloned(),
            now,
        );
        let until = set.next_end;
        if let Some(m) = self.metrics.get() {
            m.exceptions(&set, now, unreadable.len());
        }
        self.published.store(Arc::new(Published {
            read,
            unreadable,
            set: Arc::new(set),
            until,
        }));
    }

    /// The exceptions in force at `now`: the published set while it holds,
    /// else the set made again at `now` (and published for the next).
    #[must_use]
    pub fn at(&self, now: Timestamp) -> Arc<ExceptionSet> {
        let p = self.published.load();
        if let Some(m) = self.metrics.get() {
            m.exceptions(&p.set, now, p.unreadable.len());
        }
        if p.until.is_none_or(|end| now < end) {
            return Arc::clone(&p.set);
        }
        let read = p.read.clone();
        let unreadable = p.unreadable.clone();
        drop(p);
        self.publish(read, unreadable, now);
        Arc::clone(&self.published.load().set)
    }

    /// The objects that could not be read (`namespace/name`, why).
    #[must_use]
    pub fn unreadable(&self) -> Vec<(String, String)> {
        self.published.load().unreadable.clone()
    }
}

/// Starts the watch of the cluster's PolicyExceptions into `cache`.
pub fn spawn_exceptions(
    client: kube::Client,
    cache: Arc<ExceptionCache>,
    metrics: super::ClusterMetrics,
    deadlines: super::Deadlines,
) {
    let resource = crate::entry::exceptions::api_resource();
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client, &resource);
    cache.report_to(metrics.clone());
    tokio::spawn(async move {
        let start = move || {
            let config = watcher::Config::default().timeout(deadlines.watch_seconds);
            watcher(api.clone(), config).boxed()
        };
        run(
            start,
            Watched::PolicyExceptions,
            &metrics,
            deadlines,
            move |ev| {
                ExceptionCache::change(ev)
                    .map(|ch| cache.apply(ch, crate::entry::exceptions::clock()))
            },
        )
        .await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(name: &str, expires: &str) -> Value {
        json!({"apiVersion": "winadmit.io/v1alpha1", "kind": "PolicyException",
            "metadata": {"name": name, "namespace": "winadmit", "creationTimestamp": "2026-06-01T00:00:00Z"},
            "spec": {"rules": ["WIN-HOSTNETWORK"], "reason": "r", "expiresAt": expires}})
    }

    #[test]
    fn an_exception_stops_counting_at_its_end_without_an_event() {
        let c = ExceptionCache::new(ExceptionSettings::default(), "winadmit".into());
        let t = |s: &str| Timestamp::parse(s).unwrap();
        let now = t("2026-06-02T00:00:00Z");
        c.apply(Change::Relist, now);
        c.apply(
            Change::Listed("winadmit/a".into(), object("a", "2026-06-03T00:00:00Z")),
            now,
        );
        c.apply(
            Change::Listed("winadmit/b".into(), object("b", "2026-06-04T00:00:00Z")),
            now,
        );
        c.apply(
            Change::Listed("winadmit/bad".into(), json!({"metadata": {"name": "bad"}})),
            now,
        );
        c.apply(Change::ListDone, now);
        assert_eq!(c.at(now).in_force().len(), 2);
        assert_eq!(c.unreadable().len(), 1);
        assert_eq!(c.at(t("2026-06-03T00:00:00Z")).in_force().len(), 1);
        assert_eq!(c.at(t("2026-06-04T00:00:01Z")).in_force().len(), 0);
        // Deleted: gone from the next review on.
        c.apply(Change::Deleted("winadmit/a".into()), now);
        assert_eq!(c.at(now).in_force().len(), 1);
    }
}
