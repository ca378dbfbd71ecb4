//! The live report's API calls: one bounded list call (`--api-timeout`,
//! `--max-response-bytes`), the continue token of the next page
//! (`--max-pages`), and what a failed call means for the user.

use anyhow::anyhow;
use kube::api::ListParams;
use kube::core::Request;

use super::{Live, Resource, scope};
use crate::entry::commands::report::Progress;
use crate::entry::errors::error_chain;

impl Live {
    /// One call's answer as text, read up to --max-response-bytes (a
    /// larger answer is `TooLarge`); an error status is the API server's
    /// `Status`, as kube's own `request_text` gives it.
    pub(super) async fn bounded_text(
        &self,
        req: axum::http::Request<Vec<u8>>,
    ) -> Result<String, CallError> {
        let limit = self.limits.max_response_bytes;
        let res = self
            .client
            .send(req.map(kube::client::Body::from))
            .await
            .map_err(CallError::Kube)?;
        let code = res.status();
        let cap = if code.is_success() {
            usize::try_from(limit).unwrap_or(usize::MAX)
        } else {
            // An error's Status is small; more is not worth reading.
            64 * 1024
        };
        let bytes = axum::body::to_bytes(axum::body::Body::new(res.into_body()), cap)
            .await
            .map_err(|e| {
                if code.is_success() && error_chain(&e).contains("length limit exceeded") {
                    CallError::TooLarge(limit)
                } else {
                    CallError::Kube(kube::Error::Service(e.into()))
                }
            })?;
        if !code.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let status = serde_json::from_str::<kube::core::Status>(&text).unwrap_or_else(|_| {
                kube::core::Status::failure(text.trim(), "Failed to parse error data")
                    .with_code(code.as_u16())
            });
            return Err(CallError::Kube(kube::Error::Api(status.boxed())));
        }
        // Without a copy when the buffer is unshared.
        String::from_utf8(Vec::from(bytes)).map_err(|e| CallError::Kube(kube::Error::FromUtf8(e)))
    }

    /// One list call, bounded by `--api-timeout` as a whole (the client
    /// bounds connecting and each silence by `--connect-timeout` and
    /// `--read-timeout`); says on stderr when it is slow.
    pub(super) async fn page(
        &self,
        r: Resource,
        namespace: Option<&str>,
        limit: u32,
        token: Option<&str>,
        progress: &Progress,
    ) -> Result<String, CallError> {
        let call = self.list_call(r, namespace, limit, token);
        tokio::pin!(call);
        let deadline = tokio::time::Instant::now() + self.deadlines.call_timeout;
        let started = std::time::Instant::now();
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + SLOW_CALL, SLOW_CALL);
        loop {
            tokio::select! {
                r = &mut call => return r,
                () = tokio::time::sleep_until(deadline) => {
                    return Err(CallError::Timeout(self.deadlines.call_timeout));
                }
                _ = tick.tick() => progress.note(&format!(
                    "still waiting for {} to list {} in {} ({}s; gives up after {:?}, --api-timeout)",
                    self.server,
                    r.display,
                    scope(namespace),
                    started.elapsed().as_secs(),
                    self.deadlines.call_timeout
                )),
            }
        }
    }

    pub(super) async fn list_call(
        &self,
        r: Resource,
        namespace: Option<&str>,
        limit: u32,
        token: Option<&str>,
    ) -> Result<String, CallError> {
        let path = match namespace {
            Some(ns) => format!("{}/namespaces/{ns}/{}", r.base, r.plural),
            None => format!("{}/{}", r.base, r.plural),
        };
        let mut lp = ListParams::default().limit(limit);
        if let Some(t) = token {
            lp = lp.continue_token(t);
        }
        let req = Request::new(path)
            .list(&lp)
            .map_err(|e| CallError::Kube(kube::Error::BuildRequest(e)))?;
        self.bounded_text(req).await
    }

    /// The token for the next page of `r` after `pages` pages, `None` when
    /// the list is complete. A token the API server repeats, or more than
    /// --max-pages pages, would never end: both stop the report.
    pub(super) fn next_page(
        &self,
        r: Resource,
        namespace: Option<&str>,
        pages: impl TryInto<u32>,
        previous: Option<String>,
        next: Option<String>,
    ) -> anyhow::Result<Option<String>> {
        let Some(next) = next else {
            return Ok(None);
        };
        let what = r.display;
        let scope = scope(namespace);
        if previous.as_deref() == Some(next.as_str()) {
            return Err(anyhow!(
                "the API server at {} answered the list of {what} in {scope} with the same continue token twice; a list that repeats itself never ends",
                self.server
            ));
        }
        let pages = pages.try_into().unwrap_or(u32::MAX);
        if pages >= self.limits.max_pages {
            return Err(anyhow!(
                "the list of {what} in {scope} at {} did not end within {pages} pages (--max-pages); raise --max-pages or --page-size if the cluster really holds that many",
                self.server
            ));
        }
        Ok(Some(next))
    }

    /// A list call failed: say which verb on which resource, and what to do.
    pub(super) fn describe(
        &self,
        err: CallError,
        r: Resource,
        namespace: Option<&str>,
    ) -> anyhow::Error {
        let scope = scope(namespace);
        let what = r.display;
        let err = match err {
            CallError::Kube(e) => e,
            CallError::TooLarge(limit) => {
                return anyhow!(
                    "too large: the API server at {} answered the list of {what} in {scope} with more than {limit} bytes (--max-response-bytes); lower --page-size, or raise --max-response-bytes if the objects really are that large",
                    self.server
                );
            }
            CallError::Timeout(t) => {
                return anyhow!(
                    "timed out: the API server at {} did not finish answering within {t:?} (--api-timeout) when asked to list {what} in {scope}; check that the cluster is healthy, or raise --api-timeout / lower --page-size",
                    self.server
                );
            }
        };
        match err {
            kube::Error::Api(status) => {
                let detail = if status.message.is_empty() {
                    String::new()
                } else {
                    format!(" (API server: {})", status.message)
                };
                match status.code {
                    403 => anyhow!(
                        "forbidden: cannot list {what} in {scope}{detail}; grant `list` on {what} to the kubeconfig's user, or narrow the report with --namespace"
                    ),
                    401 => anyhow!(
                        "unauthorized: the API server at {} rejected the credentials when asked to list {what} in {scope}{detail}; check the kubeconfig's user (an expired token?) or pick another --context",
                        self.server
                    ),
                    404 => anyhow!(
                        "not found: the API server at {} does not serve {what} ({}/{}){detail}; is the cluster older than the Kubernetes versions winadmit supports?",
                        self.server,
                        r.base,
                        r.plural
                    ),
                    410 => anyhow!(
                        "expired: the list of {what} in {scope} changed too much while it was being paged (continue token expired){detail}; run the report again"
                    ),
                    code => anyhow!(
                        "the API server at {} refused to list {what} in {scope}: HTTP {code} {}{detail}",
                        self.server,
                        status.reason
                    ),
                }
            }
            other => {
                let chain = error_chain(&other);
                if chain.contains("timed out") {
                    return anyhow!(
                        "timed out: the API server at {} did not answer when asked to list {what} in {scope} (no data within --read-timeout {:?}, or no connection within --connect-timeout {:?}): {chain:#}; check that the cluster is up and reachable",
                        self.server,
                        self.deadlines.read_timeout,
                        self.deadlines.connect_timeout
                    );
                }
                anyhow!(
                    "cannot reach the Kubernetes API server at {} to list {what} in {scope}: {chain:#}; check the kubeconfig's server address and that the cluster is up",
                    self.server
                )
            }
        }
    }
}

/// How often a slow call is reported on stderr.
const SLOW_CALL: std::time::Duration = std::time::Duration::from_secs(5);

/// Why one API call failed.
pub(super) enum CallError {
    Kube(kube::Error),
    /// `--api-timeout` passed before the whole answer arrived.
    Timeout(std::time::Duration),
    /// The answer was larger than `--max-response-bytes`.
    TooLarge(u64),
}
