//! What the gMSA rules read of a pod: each `windowsOptions` with its place
//! and path ([`options`]), the credential spec names it sets
//! ([`spec_names`]), and who would `use` them ([`user`]).

use super::RuleContext;
use crate::decision::gmsa::{Facts, Place, service_account};
use crate::decision::path::FieldPath;
use crate::decision::view::WindowsOptionsView;

/// Each `gmsaCredentialSpecName` the pod names ([`options`]), with the
/// path of that field.
#[must_use]
pub fn spec_names<'v>(cx: &RuleContext<'_, 'v, '_>) -> Vec<(&'v str, FieldPath)> {
    options(cx)
        .into_iter()
        .filter_map(|o| {
            let name = o.options.gmsa_credential_spec_name.as_deref()?;
            Some((name, o.path.key("gmsaCredentialSpecName")))
        })
        .collect()
}

/// Who would `use` the pod's credential specs, when the gMSA facts are
/// known: the facts, the pod's namespace and its service account.
#[must_use]
pub fn user<'e, 'v>(cx: &RuleContext<'e, 'v, '_>) -> Option<(&'e Facts, &'e str, &'v str)> {
    Some((cx.gmsa?, cx.workload.namespace?, service_account(cx.spec)))
}

/// One `windowsOptions` of the pod: where, and its path (built on demand).
pub struct Options<'v, 'a> {
    pub place: Place,
    pub options: &'v WindowsOptionsView<'a>,
    /// The path of `windowsOptions`.
    pub path: FieldPath,
}

/// Every `windowsOptions` of the pod: the pod's, then every init
/// container's, container's and ephemeral container's (the upstream
/// webhook visits only the pod and `containers`).
#[must_use]
pub fn options<'v, 'a>(cx: &RuleContext<'_, 'v, 'a>) -> Vec<Options<'v, 'a>> {
    let mut out = Vec::new();
    if let Some(o) = cx
        .pod_security_context()
        .and_then(|p| p.windows_options.as_ref())
    {
        out.push(Options {
            place: Place::Pod,
            options: o,
            path: cx.spec_field(&["securityContext", "windowsOptions"]),
        });
    }
    for c in cx.containers() {
        if let Some(o) = c
            .security_context()
            .and_then(|s| s.windows_options.as_ref())
        {
            out.push(Options {
                place: Place::Container(c.list, c.name().to_owned()),
                options: o,
                path: cx.container_field(&c, &["securityContext", "windowsOptions"]),
            });
        }
    }
    out
}
