//! `*` wildcard matching for the policy's image and path patterns.

/// Matches `*` wildcards (any run of characters, including `/`).
#[must_use]
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn stars_match_any_run() {
        assert!(glob_match("a*b*c", "axxbyyc") && !glob_match("a*b*c", "axxbyy"));
        assert!(glob_match(
            "mcr.microsoft.com/windows/*",
            "mcr.microsoft.com/windows/servercore:ltsc2022"
        ));
        assert!(!glob_match("nginx", "nginx2"));
    }
}
