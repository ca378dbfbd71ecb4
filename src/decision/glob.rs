//! `*` wildcard matching for the policy's image and path patterns.

/// Matches `*` wildcards (any run of characters, including `/`).
#[must_use]
pub fn glob_match(pattern: &str, text: &str) -> bool {
    // No star: the text is the pattern.
    let Some((first, stars)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    // `stars` is what follows the first star: middle parts, then the last.
    let (middle, last) = match stars.rsplit_once('*') {
        Some((middle, last)) => (Some(middle), last),
        None => (None, stars),
    };
    for part in middle.into_iter().flat_map(|m| m.split('*')) {
        // memchr's one-shot search: no searcher built per call (this runs
        // for every image and pattern of every evaluation).
        match memchr::memmem::find(rest.as_bytes(), part.as_bytes()) {
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
        assert!(glob_match("*", "") && glob_match("**", "x") && glob_match("a*", "a"));
        assert!(glob_match(
            "*nanoserver*",
            "mcr.microsoft.com/nanoserver:1809"
        ));
        assert!(!glob_match("*nanoserver*", "nanoserve"));
        // The last part may not overlap the part before it.
        assert!(!glob_match("*ab*ba", "aba") && glob_match("*ab*ba", "abba"));
        assert!(glob_match("a*a", "aa") && !glob_match("a*a", "a"));
    }
}
