//! Limits on what the cluster cache accepts from the API server, as a tower
//! layer on its kube client: an answer larger than `max_response_bytes`
//! fails (the body stops being read), and a list whose `continue` token
//! repeats, or that runs past `max_pages` pages, fails before the next
//! request is sent. Each failure reaches the watcher as an error, which is
//! logged and retried with backoff, so a broken or hostile API server
//! cannot make the cache spin or grow without bound. List pages are read
//! one at a time over all the client's watchers (a page is held whole
//! until it is decoded; watch streams are not): the memory of answers in
//! flight is one page at the cap, not one per watcher.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http_body_util::Limited;
use kube::client::Body;
use tower::{Layer, Service};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What one client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiLimits {
    /// Largest answer to one call (a list page, or everything one watch
    /// call streams), in bytes.
    pub max_response_bytes: usize,
    /// Most pages of one list.
    pub max_pages: u32,
}

impl Default for ApiLimits {
    fn default() -> Self {
        Self {
            max_response_bytes: MAX_RESPONSE_BYTES,
            max_pages: MAX_PAGES,
        }
    }
}

/// Default of [`ApiLimits::max_response_bytes`]: 64 MiB. One page of
/// 500 objects at this size is 128 KiB an object, more than any Node;
/// with one page read at a time, the cache stays within the chart's
/// 256Mi memory limit.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Default of [`ApiLimits::max_pages`].
pub const MAX_PAGES: u32 = 10_000;

/// The layer: `ClientBuilder::try_from(config)?.with_layer(&ApiLimitsLayer::new(limits))`.
#[derive(Debug, Clone)]
pub struct ApiLimitsLayer {
    limits: ApiLimits,
    /// Per list path: the last `continue` token sent and the pages so far.
    lists: Arc<Mutex<HashMap<String, (String, u32)>>>,
    /// One list page read at a time.
    pages: Arc<tokio::sync::Semaphore>,
}

impl ApiLimitsLayer {
    #[must_use]
    pub fn new(limits: ApiLimits) -> Self {
        Self {
            limits,
            lists: Arc::default(),
            pages: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }
}

impl<S> Layer<S> for ApiLimitsLayer {
    type Service = ApiLimitsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ApiLimitsService {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ApiLimitsService<S> {
    inner: S,
    layer: ApiLimitsLayer,
}

impl ApiLimitsLayer {
    /// Checks a request's `continue` token against the list's history.
    fn check(&self, uri: &http::Uri) -> Result<(), String> {
        let path = uri.path().to_owned();
        let token = uri.query().and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix("continue="))
                .map(str::to_owned)
        });
        let mut lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(token) = token else {
            // A first page (or a watch): a new list of this path begins.
            lists.remove(&path);
            return Ok(());
        };
        let entry = lists
            .entry(path.clone())
            .or_insert_with(|| (String::new(), 1));
        if entry.0 == token {
            lists.remove(&path);
            return Err(format!(
                "the API server sent the same continue token twice for {path}: a list that repeats itself never ends"
            ));
        }
        entry.1 += 1;
        if entry.1 > self.limits.max_pages {
            let pages = self.limits.max_pages;
            lists.remove(&path);
            return Err(format!(
                "the list of {path} did not end within {pages} pages"
            ));
        }
        entry.0 = token;
        Ok(())
    }
}

impl<S, B> Service<http::Request<Body>> for ApiLimitsService<S>
where
    S: Service<http::Request<Body>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
{
    type Response = http::Response<Limited<Held<B>>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if let Err(why) = self.layer.check(req.uri()) {
            return Box::pin(async move { Err(why.into()) });
        }
        let limit = self.layer.limits.max_response_bytes;
        // A page of a list: the watchers' lists are paged (`limit`), and a
        // watch call never is; gets of one object and reviews are left be.
        let page = req.method() == http::Method::GET
            && req.uri().query().is_some_and(|q| {
                let mut kv = q.split('&');
                kv.clone().any(|kv| kv.starts_with("limit="))
                    && !kv.any(|kv| kv == "watch=true" || kv == "watch=1")
            });
        let pages = page.then(|| Arc::clone(&self.layer.pages));
        let call = self.inner.call(req);
        Box::pin(async move {
            // A page's turn is taken before it is asked for and given back
            // when its body has been read (or dropped).
            let permit = match pages {
                Some(p) => Some(
                    p.acquire_owned()
                        .await
                        .map_err(|e| Box::new(e) as BoxError)?,
                ),
                None => None,
            };
            let response = call.await.map_err(Into::into)?;
            Ok(response.map(|body| {
                Limited::new(
                    Held {
                        body: Box::pin(body),
                        _permit: permit,
                    },
                    limit,
                )
            }))
        })
    }
}

/// A response body that holds a list page's turn until it is dropped.
pub struct Held<B> {
    body: std::pin::Pin<Box<B>>,
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl<B: http_body::Body> http_body::Body for Held<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.body.as_mut().poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    #[test]
    fn repeated_tokens_and_endless_lists_are_refused() {
        let layer = ApiLimitsLayer::new(ApiLimits {
            max_response_bytes: 1024,
            max_pages: 3,
        });
        let path = "/api/v1/namespaces";
        assert!(layer.check(&uri(&format!("{path}?limit=500"))).is_ok());
        assert!(
            layer
                .check(&uri(&format!("{path}?limit=500&continue=a")))
                .is_ok()
        );
        let err = layer
            .check(&uri(&format!("{path}?limit=500&continue=a")))
            .unwrap_err();
        assert!(err.contains("same continue token twice"), "{err}");
        // A fresh list starts counting again.
        assert!(layer.check(&uri(&format!("{path}?limit=500"))).is_ok());
        assert!(layer.check(&uri(&format!("{path}?continue=b"))).is_ok());
        assert!(layer.check(&uri(&format!("{path}?continue=c"))).is_ok());
        let err = layer
            .check(&uri(&format!("{path}?continue=d")))
            .unwrap_err();
        assert!(err.contains("did not end within 3 pages"), "{err}");
        // Another path is its own list.
        assert!(layer.check(&uri("/api/v1/nodes?continue=a")).is_ok());
    }
}
