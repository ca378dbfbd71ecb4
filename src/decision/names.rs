//! The API server's format rules for the names and values a policy puts
//! into objects: label keys and annotation keys (qualified names), label
//! values, DNS-1123 labels and subdomains (namespace and RuntimeClass
//! names), as `k8s.io/apimachinery/pkg/api/validate/content` states them
//! (`IsLabelKey` = `IsQualifiedName`, `IsLabelValue`, `IsDNS1123Label`,
//! `IsDNS1123Subdomain`). Each check returns what is wrong, in the API
//! server's words, or `None`.

/// The longest name part of a qualified name, and the longest label value.
pub const LABEL_MAX: usize = 63;
/// The longest DNS-1123 subdomain (and a qualified name's prefix).
pub const SUBDOMAIN_MAX: usize = 253;

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, the name part of a label key
/// and a non-empty label value.
fn label_key_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => edge(first) && edge(last) && b.iter().all(inner),
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length.
fn dns1123_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            edge(first) && edge(last) && b.iter().all(|c| edge(c) || *c == b'-')
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters (`IsDNS1123Label`:
/// namespace names).
#[must_use]
pub fn dns1123_label(s: &str) -> Option<String> {
    if s.len() > LABEL_MAX {
        Some(format!("must be no more than {LABEL_MAX} characters"))
    } else if !dns1123_label_chars(s) {
        Some(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name')"
                .to_owned(),
        )
    } else {
        None
    }
}

/// DNS-1123 labels joined by dots, at most 253 characters in all
/// (`IsDNS1123Subdomain`: RuntimeClass names, label key prefixes).
#[must_use]
pub fn dns1123_subdomain(s: &str) -> Option<String> {
    if s.len() > SUBDOMAIN_MAX {
        Some(format!("must be no more than {SUBDOMAIN_MAX} characters"))
    } else if !s.split('.').all(dns1123_label_chars) {
        Some(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')"
                .to_owned(),
        )
    } else {
        None
    }
}

/// A label key or annotation key: an optional DNS subdomain prefix and `/`,
/// then a name of at most 63 characters (`IsQualifiedName`).
#[must_use]
pub fn qualified_name(s: &str) -> Option<String> {
    let mut parts = s.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            return Some(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', 'my.name', '123-abc'), with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                    .to_owned(),
            );
        }
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some("prefix part must be non-empty".to_owned());
        }
        if let Some(why) = dns1123_subdomain(prefix) {
            return Some(format!("prefix part {why}"));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".to_owned());
    }
    if name.len() > LABEL_MAX {
        return Some(format!(
            "name part must be no more than {LABEL_MAX} characters"
        ));
    }
    if !label_key_chars(name) {
        return Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', 'my.name', '123-abc')"
                .to_owned(),
        );
    }
    None
}

/// A label value: empty, or at most 63 characters of the label key
/// pattern (`IsLabelValue`).
#[must_use]
pub fn label_value(s: &str) -> Option<String> {
    if s.len() > LABEL_MAX {
        return Some(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !s.is_empty() && !label_key_chars(s) {
        return Some(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', 'my_value', '12345')"
                .to_owned(),
        );
    }
    None
}

/// An annotation key: a qualified name once lowercased (`ValidateAnnotations`).
#[must_use]
pub fn annotation_key(s: &str) -> Option<String> {
    qualified_name(&s.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_as_the_api_server_reads_them() {
        for ok in [
            "os",
            "kubernetes.io/os",
            "node.kubernetes.io/windows-build",
            "a",
            "A_b.C-1",
            &"x".repeat(63),
            &format!("{}/x", "a".repeat(253)),
        ] {
            assert_eq!(qualified_name(ok), None, "{ok}");
        }
        for bad in [
            "",
            "bad key!!/x/y",
            "os/x~y",
            "no spaces allowed here",
            "/x",
            "x/",
            "Example.com/x",
            "-x",
            "x-",
            "a\rb",
            &"x".repeat(64),
            &format!("{}/x", "a".repeat(254)),
        ] {
            assert!(qualified_name(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn label_values_and_dns_names() {
        for ok in ["", "windows", "v_1.2-x", "10.0.20348", &"v".repeat(63)] {
            assert_eq!(label_value(ok), None, "{ok}");
        }
        for bad in ["v v", "-v", "v-", "a/b", "\r", &"v".repeat(64)] {
            assert!(label_value(bad).is_some(), "{bad:?}");
        }
        assert_eq!(dns1123_subdomain("windows-2022.example"), None);
        assert!(dns1123_subdomain("Windows").is_some());
        assert!(dns1123_subdomain("a..b").is_some());
        assert!(dns1123_subdomain("a\r").is_some());
        assert_eq!(dns1123_label("kube-system"), None);
        assert!(dns1123_label("a.b").is_some());
    }
}
