//! Small helpers for error messages shown to people.

/// An error and its causes in one line, without the repeats that layered
/// clients add (`client error (Connect): client error (Connect): ...`):
/// a cause already contained in an earlier message is dropped, and a
/// message that merely contains the next one gives way to it.
#[must_use]
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    let mut out: Vec<&str> = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if parts.get(i + 1).is_some_and(|n| p.contains(n.as_str())) {
            continue;
        }
        out.push(p);
    }
    out.join(": ")
}
