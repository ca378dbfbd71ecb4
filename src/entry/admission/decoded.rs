//! A review body decoded once, and what the rest of the review reads from
//! that one decode: the request's workload after the cheap checks
//! (operation, kind, subresource), and the facts the server resolves for it
//! before the decision ([`Decoded::wanted`]).
//!
//! The envelope and its object views are read in one pass. The object's
//! tree is built at most once, and only when it is needed: a declared
//! kind's template is at a path the view has no field for, and a patch that
//! the view cannot settle, or `/admit`'s preview of the patched object, is
//! applied to the tree.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::Value;

use super::envelope::{RawReviewIn, RequestIn, ReviewIn, text};
use super::{Endpoint, ReviewError, ReviewVerdict};
use crate::decision::policy::Policy;
use crate::decision::view::ObjectView;
use crate::decision::workload::{Kind, Workload};

/// A review body, decoded once.
#[derive(yoke::Yokeable)]
pub struct Decoded<'b> {
    pub(super) body: &'b [u8],
    /// The one-pass decode, or why it failed (answered by `recover`).
    pub(super) review: Result<Box<ReviewIn<'b>>, serde_json::Error>,
    /// `request.object` and `request.oldObject` as trees, once built.
    trees: OnceLock<Trees>,
}

/// The request's objects as trees.
#[derive(Default)]
pub(super) struct Trees {
    pub(super) object: Option<Value>,
    pub(super) old: Option<Value>,
}

/// Decodes a review body in one pass.
///
/// # Errors
/// The body is not UTF-8 (JSON is, RFC 8259).
pub fn decode(body: &[u8]) -> Result<Decoded<'_>, ReviewError> {
    // The borrowed one-pass decode skips fields it does not read without
    // checking them, so the whole body is checked first: otherwise a body
    // with invalid UTF-8 in, say, managedFields would be answered, and
    // patched, as if it were JSON. (Found by the admission_review fuzz
    // target.) It is then parsed as the `str` it is: serde_json validates
    // every string it reads from a byte slice again, not from a `str`.
    let json = std::str::from_utf8(body).map_err(|e| {
        ReviewError::Malformed(format!("invalid UTF-8 at byte {}", e.valid_up_to()))
    })?;
    #[cfg(test)]
    counts::DECODES.with(|c| c.set(c.get() + 1));
    Ok(Decoded {
        body,
        review: crate::decision::strict::from_str(json).map(Box::new),
        trees: OnceLock::new(),
    })
}

impl Decoded<'_> {
    /// The request's objects as trees, built on the first call; `old` says
    /// whether that call needs `oldObject` too (a declared kind's reader
    /// does, and asks first; a patch needs only the object).
    pub(super) fn trees(&self, old: bool) -> &Trees {
        self.trees.get_or_init(|| self.read_trees(old))
    }

    /// The object's tree to own (a patch is applied to it): a copy of the
    /// one built already, else built here and not kept, which saves
    /// copying it.
    pub(super) fn object_tree_owned(&self) -> Option<Value> {
        match self.trees.get() {
            Some(trees) => trees.object.clone(),
            None => self.read_trees(false).object,
        }
    }

    fn read_trees(&self, old: bool) -> Trees {
        #[cfg(test)]
        counts::TREES.with(|c| c.set(c.get() + 1));
        let Ok(raw) = serde_json::from_slice::<RawReviewIn<'_>>(self.body) else {
            return Trees::default();
        };
        let tree = |o: Option<&serde_json::value::RawValue>| {
            o.and_then(|o| serde_json::from_str(o.get()).ok())
        };
        let req = raw.request.unwrap_or_default();
        Trees {
            object: tree(req.object),
            old: if old { tree(req.old_object) } else { None },
        }
    }

    /// The facts the server resolves before deciding this review, of those
    /// it can resolve (`want`): none for a request the decision skips.
    #[must_use]
    pub fn wanted(&self, policy: &Policy, endpoint: Endpoint, want: Want) -> Wanted {
        let Some(req) = self.review.as_ref().ok().and_then(|r| r.request.as_ref()) else {
            return Wanted::default();
        };
        let operation = text(req.operation.as_ref());
        let read = with_workload(policy, self, req, |subject| {
            let Some(spec) = subject.workload.spec else {
                return Wanted::default();
            };
            let namespace = subject.workload.namespace.unwrap_or_default();
            let gmsa = want.gmsa.then(|| {
                let names = crate::decision::gmsa::names(spec);
                (!names.is_empty()).then(|| GmsaWanted {
                    namespace: namespace.to_owned(),
                    service_account: crate::decision::gmsa::service_account(spec).to_owned(),
                    names: names.into_iter().map(str::to_owned).collect(),
                    // Authorization is asked where the pod gets an
                    // identity: CREATE, and containers added through
                    // `ephemeralcontainers`. `/mutate` needs none (it only
                    // fills contents in, as upstream).
                    authorize: endpoint != Endpoint::Mutate
                        && !namespace.is_empty()
                        && (operation == "CREATE" || (operation == "UPDATE" && subject.ephemeral)),
                })
            });
            let images = want.images.then(|| {
                let mut images = BTreeSet::new();
                crate::decision::lookups::spec_images(spec, &mut images);
                (!images.is_empty()).then(|| ImagesWanted {
                    images,
                    namespace: Some(namespace.to_owned()).filter(|n| !n.is_empty()),
                    pull_secrets: crate::decision::lookups::spec_pull_secrets(spec),
                })
            });
            Wanted {
                gmsa: gmsa.flatten(),
                images: images.flatten(),
            }
        });
        read.unwrap_or_default()
    }
}

/// Which facts the server can resolve (the switches it was started with).
#[derive(Debug, Clone, Copy, Default)]
pub struct Want {
    pub gmsa: bool,
    pub images: bool,
}

/// The facts one review's object needs resolved before its decision.
#[derive(Debug, Default)]
pub struct Wanted {
    pub gmsa: Option<GmsaWanted>,
    pub images: Option<ImagesWanted>,
}

/// The gMSA credential specs a pod names, and who would use them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GmsaWanted {
    pub namespace: String,
    pub service_account: String,
    pub names: Vec<String>,
    /// Whether to ask if the service account may use each (the request
    /// gives the pod an identity).
    pub authorize: bool,
}

/// The images a workload runs, its namespace and the Secrets it pulls
/// them with (`imagePullSecrets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagesWanted {
    pub images: BTreeSet<String>,
    pub namespace: Option<String>,
    pub pull_secrets: Vec<String>,
}

/// A review answered before any decision: skipped (not something winadmit
/// checks) or invalid (unusable), with the note for logs.
pub(super) enum Undecided {
    Skip(ReviewVerdict, String),
    Invalid(String),
}

/// The request's workload as the decision reads it.
pub(super) struct Subject<'v, 'a> {
    pub(super) workload: Workload<'v, 'a>,
    /// The object before an UPDATE, when the request has it.
    pub(super) old: Option<Workload<'v, 'a>>,
    /// The `ephemeralcontainers` subresource: only the ephemeral
    /// containers are judged.
    pub(super) ephemeral: bool,
}

/// Reads the request's workload after the cheap checks and gives it to
/// `then`; an object that is skipped or unusable is [`Undecided`].
pub(super) fn with_workload<R>(
    policy: &Policy,
    decoded: &Decoded<'_>,
    req: &RequestIn<'_>,
    then: impl FnOnce(Subject<'_, '_>) -> R,
) -> Result<R, Undecided> {
    let (kind, ephemeral) = triage(policy, req)?;
    let Some(view) = req.object.as_ref() else {
        return Err(Undecided::Invalid("request.object is missing".to_owned()));
    };
    // A declared kind's template is read from the object as a tree: the
    // view has no field for a path only the policy knows.
    let trees = (kind == Kind::Declared).then(|| decoded.trees(true));
    let templates = &policy.pod_templates;
    let tree = trees.and_then(|t| t.object.as_ref());
    let declared: Option<ObjectView<'_>> = match tree.map(|t| templates.read(t)).transpose() {
        Ok(d) => d,
        Err(e) => return Err(Undecided::Invalid(format!("winadmit: {e}"))),
    };
    let declared_old = trees
        .and_then(|t| t.old.as_ref())
        .and_then(|t| templates.read(t).ok());
    let view = declared.as_ref().unwrap_or(view);
    let old_view = declared_old.as_ref().or(req.old_object.as_ref());
    let Some(mut workload) = Workload::from_view(view) else {
        let note = "request.object is not a workload (apiVersion/kind)";
        return Err(Undecided::Skip(ReviewVerdict::Skipped, note.to_owned()));
    };
    if let Some(note) = workload.note() {
        return Err(Undecided::Skip(ReviewVerdict::Skipped, note));
    }
    let request_ns = text(req.namespace.as_ref());
    if workload.namespace.is_none() && !request_ns.is_empty() {
        workload.namespace = Some(request_ns);
    }
    let old = if text(req.operation.as_ref()) == "UPDATE" {
        old_view.and_then(Workload::from_view)
    } else {
        None
    };
    Ok(then(Subject {
        workload,
        old,
        ephemeral,
    }))
}

/// The cheap checks, before touching the object: the operation, the kind
/// and the subresource. Returns the kind and whether only the ephemeral
/// containers are judged.
fn triage(policy: &Policy, req: &RequestIn<'_>) -> Result<(Kind, bool), Undecided> {
    let operation = text(req.operation.as_ref());
    if matches!(operation, "DELETE" | "CONNECT") {
        let note = format!("{operation} is not checked");
        return Err(Undecided::Skip(ReviewVerdict::Skipped, note));
    }
    let gvk = req.kind.as_ref();
    let group = text(gvk.and_then(|k| k.group.as_ref()));
    let version = text(gvk.and_then(|k| k.version.as_ref()));
    let api_version = if group.is_empty() {
        Cow::Borrowed(version)
    } else {
        Cow::Owned(format!("{group}/{version}"))
    };
    let kind = text(gvk.and_then(|k| k.kind.as_ref()));
    let Some(kind) = policy.pod_templates.kind_of(&api_version, kind) else {
        let note = "kind is not a workload".to_owned();
        return Err(Undecided::Skip(ReviewVerdict::Skipped, note));
    };
    match text(req.sub_resource.as_ref()) {
        "" => Ok((kind, false)),
        "ephemeralcontainers" if kind == Kind::Pod => Ok((kind, true)),
        other => {
            let note = format!("subresource {other} is not checked");
            Err(Undecided::Skip(ReviewVerdict::Skipped, note))
        }
    }
}

/// How many times this thread decoded a review body and built an object's
/// tree (the tests show a review is decoded once).
#[cfg(test)]
pub(super) mod counts {
    use std::cell::Cell;

    thread_local! {
        pub static DECODES: Cell<usize> = const { Cell::new(0) };
        pub static TREES: Cell<usize> = const { Cell::new(0) };
    }

    /// The counts so far on this thread: (decodes, trees).
    pub fn now() -> (usize, usize) {
        (DECODES.with(Cell::get), TREES.with(Cell::get))
    }
}
