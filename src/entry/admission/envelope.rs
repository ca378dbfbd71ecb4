//! An AdmissionReview's types: the borrowed one-pass envelope the webhook
//! answers from, the envelope with its objects left raw (to build their
//! trees, or to recover a uid), and the envelope checks every entry point
//! shares.

use kube::core::TypeMeta;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{ReviewError, V1, V1BETA1};
use crate::decision::view::{ObjectView, Text};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReviewIn<'a> {
    #[serde(borrow, default)]
    pub(super) api_version: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub(super) kind: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub(super) request: Option<RequestIn<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct RequestIn<'a> {
    #[serde(borrow)]
    pub(super) uid: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) kind: Option<GvkIn<'a>>,
    #[serde(borrow)]
    pub(super) sub_resource: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) name: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) namespace: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) operation: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) user_info: Option<UserInfoIn<'a>>,
    #[serde(borrow)]
    pub(super) object: Option<ObjectView<'a>>,
    #[serde(borrow)]
    pub(super) old_object: Option<ObjectView<'a>>,
    pub(super) dry_run: Option<bool>,
}

/// The envelope with the object left raw: to answer a request whose object
/// the view cannot read, and to patch a copy of the object.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawReviewIn<'a> {
    #[serde(borrow, default)]
    pub(super) api_version: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub(super) kind: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub(super) request: Option<RawRequestIn<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct RawRequestIn<'a> {
    #[serde(borrow)]
    pub(super) uid: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) namespace: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) object: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(super) old_object: Option<&'a RawValue>,
}

/// The checks every answerable envelope passes: a known version, the right
/// kind, a request with a uid. Returns the response's type and the uid.
pub(super) fn envelope_header<'t>(
    api_version: Option<&Text<'_>>,
    kind: Option<&Text<'_>>,
    has_request: bool,
    uid: Option<&'t Text<'_>>,
) -> Result<(TypeMeta, &'t str), ReviewError> {
    let api_version = match text(api_version) {
        V1 => V1,
        V1BETA1 => V1BETA1,
        "" => return Err(ReviewError::MissingVersion),
        other => return Err(ReviewError::UnsupportedVersion(other.to_owned())),
    };
    if let Some(kind) = kind.filter(|k| &***k != "AdmissionReview") {
        return Err(ReviewError::WrongKind(kind.to_string()));
    }
    if !has_request {
        return Err(ReviewError::MissingRequest);
    }
    let uid = text(uid);
    if uid.is_empty() {
        return Err(ReviewError::MissingUid);
    }
    let types = TypeMeta {
        api_version: api_version.to_owned(),
        kind: "AdmissionReview".to_owned(),
    };
    Ok((types, uid))
}

/// What an entry point other than `/validate` and `/mutate` (the `/report`
/// endpoint) reads of an AdmissionReview, decoded and checked by the same
/// envelope code as the webhook.
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    pub operation: String,
    pub namespace: Option<String>,
    pub username: String,
    pub groups: Vec<String>,
    /// `request.object`, when present and not null.
    pub object: Option<serde_json::Value>,
}

/// Decodes an AdmissionReview body as the webhook does.
///
/// # Errors
/// The body is not an AdmissionReview the webhook would answer.
pub fn envelope(body: &[u8]) -> Result<Envelope, ReviewError> {
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    struct Request<'a> {
        #[serde(borrow)]
        uid: Option<Text<'a>>,
        #[serde(borrow)]
        namespace: Option<Text<'a>>,
        #[serde(borrow)]
        operation: Option<Text<'a>>,
        #[serde(borrow)]
        user_info: Option<UserInfoIn<'a>>,
        #[serde(borrow)]
        object: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Review<'a> {
        #[serde(borrow, default)]
        api_version: Option<Text<'a>>,
        #[serde(borrow, default)]
        kind: Option<Text<'a>>,
        #[serde(borrow, default)]
        request: Option<Request<'a>>,
    }
    let review: Review<'_> =
        serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    let req = review.request.as_ref();
    envelope_header(
        review.api_version.as_ref(),
        review.kind.as_ref(),
        req.is_some(),
        req.and_then(|r| r.uid.as_ref()),
    )?;
    let Some(req) = req else {
        return Err(ReviewError::MissingRequest);
    };
    let object = match req.object {
        Some(raw) => Some(
            serde_json::from_str::<serde_json::Value>(raw.get())
                .map_err(|e| ReviewError::Malformed(e.to_string()))?,
        )
        .filter(|o| !o.is_null()),
        None => None,
    };
    let user = req.user_info.as_ref();
    Ok(Envelope {
        operation: text(req.operation.as_ref()).to_owned(),
        namespace: Some(text(req.namespace.as_ref()).to_owned()).filter(|n| !n.is_empty()),
        username: text(user.and_then(|u| u.username.as_ref())).to_owned(),
        groups: user
            .and_then(|u| u.groups.as_ref())
            .into_iter()
            .flatten()
            .map(ToString::to_string)
            .collect(),
        object,
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct GvkIn<'a> {
    #[serde(borrow)]
    pub(super) group: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) version: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) kind: Option<Text<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct UserInfoIn<'a> {
    #[serde(borrow)]
    pub(super) username: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) groups: Option<Vec<Text<'a>>>,
}

pub(super) fn text<'t>(t: Option<&'t Text<'_>>) -> &'t str {
    t.map_or("", |t| &**t)
}
