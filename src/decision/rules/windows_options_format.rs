//! WIN-WINDOWSOPTIONS-FORMAT: `runAsUserName` and gMSA fields the API server
//! would reject, with its messages (`validateWindowsSecurityContextOptions`).

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::path::FieldPath;
use crate::decision::rules::cel::Export;
use crate::decision::view::WindowsOptionsView;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-WINDOWSOPTIONS-FORMAT",
        title: "malformed windowsOptions",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "`windowsOptions.runAsUserName` (DOMAIN\\\\user: domain under 256 characters in NetBIOS or DNS form, user 1-104 characters without `\"/\\\\:;|=,+*?<>@[]`, not only dots or spaces, no control characters, at most one backslash), `gmsaCredentialSpecName` (a lowercase RFC 1123 subdomain) and `gmsaCredentialSpec` (non-empty, under 64 KiB), on the pod and every container.",
        why: "The API server rejects these values with the same messages; catching them in CI saves a failed deploy.",
        source: "Kubernetes docs, 'Configure RunAsUserName for Windows pods and containers' (Windows username limitations) and 'Configure GMSA for Windows Pods and containers'; API server validateWindowsSecurityContextOptions.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-runasusername/#windows-username-limitations",
        fix: "Use a valid Windows user name such as `ContainerUser` or `NT AUTHORITY\\\\NETWORK SERVICE`, and the name of an existing GMSACredentialSpec resource.",
        example: "securityContext:\n  windowsOptions:\n    runAsUserName: \"a\\\\b\\\\c\"",
        since: None,
        until: None,
    },
    check,
    export: |_| {
        Export::Gap(
            "mirrors the API server's own validation of windowsOptions (gMSA names and specs, runAsUserName), which refuses these objects itself; nothing to add",
        )
    },
};

const MAX_DOMAIN: usize = 256;
const MAX_USER: usize = 104;
const MAX_CRED_SPEC: usize = 64 * 1024;
const MAX_SUBDOMAIN: usize = 253;

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if let Some(w) = cx
        .pod_security_context()
        .and_then(|p| p.windows_options.as_ref())
    {
        check_options(
            w,
            &|| cx.spec_field(&["securityContext", "windowsOptions"]),
            out,
        );
    }
    for c in cx.containers() {
        if let Some(w) = c
            .security_context()
            .and_then(|s| s.windows_options.as_ref())
        {
            check_options(
                w,
                &|| cx.container_field(&c, &["securityContext", "windowsOptions"]),
                out,
            );
        }
    }
}

/// Checks one `windowsOptions`; `base` builds its path, only when reporting.
fn check_options(w: &WindowsOptionsView<'_>, base: &dyn Fn() -> FieldPath, out: &mut RuleFindings) {
    if let Some(name) = w.gmsa_credential_spec_name.as_deref() {
        for message in subdomain_errors(name) {
            out.report(base().key("gmsaCredentialSpecName"), message);
        }
    }
    if let Some(spec) = w.gmsa_credential_spec.as_deref() {
        if spec.is_empty() {
            out.report(
                base().key("gmsaCredentialSpec"),
                "gmsaCredentialSpec cannot be an empty string",
            );
        } else if spec.len() > MAX_CRED_SPEC {
            out.report(
                base().key("gmsaCredentialSpec"),
                "gmsaCredentialSpec size must be under 64 KiB",
            );
        }
    }
    if let Some(user) = w.run_as_user_name.as_deref() {
        for message in user_name_errors(user) {
            out.report(base().key("runAsUserName"), message);
        }
    }
}

/// The API server's messages for an invalid `runAsUserName`, in its order.
#[must_use]
pub fn user_name_errors(value: &str) -> Vec<String> {
    if value.is_empty() {
        return vec!["runAsUserName cannot be an empty string".into()];
    }
    if value.chars().any(|c| c.is_ascii_control()) {
        return vec!["runAsUserName cannot contain control characters".into()];
    }
    if value.matches('\\').count() > 1 {
        return vec!["runAsUserName cannot contain more than one backslash".into()];
    }
    let mut errors = Vec::new();
    let (domain, user) = match value.split_once('\\') {
        Some((d, u)) => (Some(d), u),
        None => (None, value),
    };
    if let Some(domain) = domain {
        if domain.len() >= MAX_DOMAIN {
            errors.push("runAsUserName's Domain length must be under 256 characters".into());
        }
        if !is_netbios(domain) && !is_dns_domain(domain) {
            errors
                .push("runAsUserName's Domain doesn't match the NetBios nor the DNS format".into());
        }
    }
    if user.is_empty() {
        errors.push("runAsUserName's User cannot be empty".into());
    } else if user.len() > MAX_USER {
        errors.push("runAsUserName's User length must not be longer than 104 characters".into());
    }
    if !user.is_empty() && user.chars().all(|c| c == '.' || c == ' ') {
        errors.push("runAsUserName's User cannot contain only periods or spaces".into());
    }
    if user.contains([
        '"', '/', '\\', ':', ';', '|', '=', ',', '+', '*', '?', '<', '>', '@', '[', ']',
    ]) {
        errors.push(
            r#"runAsUserName's User cannot contain the following characters: "/\:;|=,+*?<>@[]"#
                .into(),
        );
    }
    errors
}

/// NetBIOS: 1-15 characters, none of `\/:*?"<>|`, not starting with `.`.
fn is_netbios(d: &str) -> bool {
    const BAD: [char; 9] = ['\\', '/', ':', '*', '?', '"', '<', '>', '|'];
    let n = d.chars().count();
    (1..=15).contains(&n) && !d.starts_with('.') && !d.contains(BAD)
}

/// DNS: dot-separated labels of letters, digits and inner hyphens, 1-63 long.
fn is_dns_domain(d: &str) -> bool {
    d.split('.').all(|label| {
        let bytes = label.as_bytes();
        (1..=63).contains(&bytes.len())
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            && bytes[0] != b'-'
            && bytes[bytes.len() - 1] != b'-'
    })
}

/// `IsDNS1123Subdomain` messages.
fn subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > MAX_SUBDOMAIN {
        errors.push("must be no more than 253 characters".into());
    }
    let valid = value.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    });
    if !valid {
        errors.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into());
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_as_the_api_server_judges_them() {
        for ok in [
            "ContainerUser",
            "ContainerAdministrator",
            "NT AUTHORITY\\NETWORK SERVICE",
            "corp.example.com\\svc-web",
            "NT AUTHORITY\\SYSTEM",
        ] {
            assert!(
                user_name_errors(ok).is_empty(),
                "{ok}: {:?}",
                user_name_errors(ok)
            );
        }
        assert_eq!(
            user_name_errors(""),
            ["runAsUserName cannot be an empty string"]
        );
        assert_eq!(
            user_name_errors("a\\b\\c"),
            ["runAsUserName cannot contain more than one backslash"]
        );
        assert_eq!(
            user_name_errors("a\u{7}b"),
            ["runAsUserName cannot contain control characters"]
        );
        assert_eq!(
            user_name_errors("dom\\"),
            ["runAsUserName's User cannot be empty"]
        );
        assert_eq!(
            user_name_errors("..."),
            ["runAsUserName's User cannot contain only periods or spaces"]
        );
        assert_eq!(user_name_errors("user@corp").len(), 1);
        assert_eq!(
            user_name_errors(&"u".repeat(105)),
            ["runAsUserName's User length must not be longer than 104 characters"]
        );
        assert!(user_name_errors(&format!("{}\\u", "d".repeat(300)))[0].contains("under 256"));
        assert!(
            !user_name_errors("-bad-.x\\u")
                .iter()
                .any(|e| e.contains("NetBios")),
            "NetBIOS allows a leading hyphen"
        );
        assert!(
            user_name_errors(".bad.\\u")
                .iter()
                .any(|e| e.contains("NetBios"))
        );
    }

    #[test]
    fn gmsa_names_are_subdomains() {
        assert!(subdomain_errors("webapp1-credspec").is_empty());
        assert_eq!(subdomain_errors("WebApp").len(), 1);
        assert_eq!(subdomain_errors("").len(), 1);
        assert_eq!(subdomain_errors(&"a".repeat(254)).len(), 1);
    }
}
