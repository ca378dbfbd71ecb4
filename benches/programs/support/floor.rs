//! The floor's work on an AdmissionReview: read only `request.uid` and
//! answer `allowed: true`, the least any webhook must do. Shared by
//! `noop_server` (the floor server) and `review_latency` (its `floor` row),
//! so both measure the same code.

use serde::Deserialize;

#[derive(Deserialize)]
struct Review<'a> {
    #[serde(borrow)]
    request: Option<Request<'a>>,
}

#[derive(Deserialize)]
struct Request<'a> {
    uid: &'a str,
}

/// The allowed response to `body`, or `None` when it is not an
/// AdmissionReview with a request.
pub fn answer(body: &[u8]) -> Option<String> {
    let Ok(Review { request: Some(req) }) = serde_json::from_slice::<Review<'_>>(body) else {
        return None;
    };
    Some(format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":{},"allowed":true}}}}"#,
        serde_json::Value::from(req.uid)
    ))
}
