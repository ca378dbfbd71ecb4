//! Which custom resources with a pod template the cluster serves, found
//! through the discovery API, and reading one discovery document.

use serde_json::Value;

use super::calls::CallError;
use super::{Live, Resource};
use crate::entry::commands::report::Progress;
use crate::entry::errors::error_chain;

impl Live {
    /// Finds which of the `(group, kind)` custom resources the cluster
    /// serves, through the discovery API (`/apis/GROUP` for the preferred
    /// version, then its resource list), and keeps those the identity may
    /// list. A group or kind the cluster does not serve is skipped quietly:
    /// most clusters have no Argo Rollouts, OpenKruise or KEDA. A list the
    /// identity may not make is a note, and the report goes on without it.
    /// A group whose discovery fails otherwise (no answer within
    /// --api-timeout, an error, an answer too large) is returned second:
    /// its kinds are skipped, and the report says so and exits 2 unless
    /// --allow-partial. Discovery as a whole ends within --api-timeout:
    /// groups answered one after another, each just within the deadline,
    /// cannot hold the report for their sum; the groups left are
    /// undiscovered.
    pub(super) fn discover(
        &self,
        custom: &[(String, String)],
        progress: &Progress,
    ) -> (Vec<Resource>, Vec<String>) {
        let mut found = Vec::new();
        let mut undiscovered = Vec::new();
        let mut groups: Vec<&str> = Vec::new();
        for (g, _) in custom {
            if !groups.contains(&g.as_str()) {
                groups.push(g);
            }
        }
        let end = tokio::time::Instant::now() + self.deadlines.call_timeout;
        for group in groups {
            let mut document = |path: &str| match self.get_json_by(path, end) {
                Ok(doc) => doc,
                Err(why) => {
                    progress.note(&format!(
                        "warning: cannot discover {group} at {} ({path}): {why}; its kinds are skipped",
                        self.server
                    ));
                    undiscovered.push(group.to_owned());
                    None
                }
            };
            let Some(group_version) = document(&format!("/apis/{group}")).and_then(|g| {
                g.pointer("/preferredVersion/groupVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }) else {
                continue;
            };
            let Some(list) = document(&format!("/apis/{group_version}")) else {
                continue;
            };
            let served = list
                .get("resources")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            for (_, kind) in custom.iter().filter(|(g, _)| g == group) {
                let Some(plural) = served
                    .iter()
                    .filter(|r| r.get("kind").and_then(Value::as_str) == Some(kind))
                    .filter_map(|r| r.get("name").and_then(Value::as_str))
                    .find(|name| !name.contains('/'))
                else {
                    continue;
                };
                // Once per discovered kind, for the life of this short CLI
                // process: leaking keeps `Resource` a plain `Copy` value
                // like the built-in table's.
                let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
                let r = Resource {
                    base: leak(format!("/apis/{group_version}")),
                    plural: leak(plural.to_owned()),
                    display: leak(format!("{plural}.{group}")),
                    api_version: leak(group_version.clone()),
                    kind: leak(kind.clone()),
                };
                let allowed = self.namespaces.iter().try_for_each(|ns| {
                    self.runtime
                        .block_on(self.page(r, ns.as_deref(), 1, None, progress))
                        .map(drop)
                        .map_err(|e| self.describe(e, r, ns.as_deref()))
                });
                match allowed {
                    Ok(()) => found.push(r),
                    Err(e) => progress.note(&format!(
                        "note: {e:#} (the report goes on without {})",
                        r.display
                    )),
                }
            }
        }
        (found, undiscovered)
    }

    /// A discovery document, `None` when the cluster does not serve it
    /// (404), or why it could not be read, within --api-timeout and
    /// --max-response-bytes.
    pub(super) fn get_json(&self, path: &str) -> Result<Option<Value>, String> {
        self.get_json_by(
            path,
            tokio::time::Instant::now() + self.deadlines.call_timeout,
        )
    }

    /// [`Live::get_json`] by `end` at the latest.
    fn get_json_by(&self, path: &str, end: tokio::time::Instant) -> Result<Option<Value>, String> {
        let req = axum::http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let own = tokio::time::Instant::now() + self.deadlines.call_timeout;
        if end < own && end <= tokio::time::Instant::now() {
            return Err(format!(
                "discovery as a whole took longer than {:?} (--api-timeout)",
                self.deadlines.call_timeout
            ));
        }
        let call = async { tokio::time::timeout_at(end.min(own), self.bounded_text(req)).await };
        match self.runtime.block_on(call) {
            Err(_) if end < own => Err(format!(
                "discovery as a whole took longer than {:?} (--api-timeout)",
                self.deadlines.call_timeout
            )),
            Err(_) => Err(format!(
                "no complete answer within {:?} (--api-timeout)",
                self.deadlines.call_timeout
            )),
            Ok(Err(CallError::Kube(kube::Error::Api(status)))) if status.code == 404 => Ok(None),
            Ok(Err(CallError::TooLarge(limit))) => Err(format!(
                "the answer is larger than {limit} bytes (--max-response-bytes)"
            )),
            Ok(Err(CallError::Kube(e))) => Err(error_chain(&e)),
            Ok(Err(CallError::Timeout(t))) => {
                Err(format!("no complete answer within {t:?} (--api-timeout)"))
            }
            Ok(Ok(text)) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("not a discovery document: {e}")),
        }
    }
}
