//! Variables bound into one expression, for the places that cannot read a
//! policy's variables (match conditions) or read them on another object
//! (`oldObject`).

/// `expr` for a match condition, which cannot read the policy's
/// variables: each variable it uses (and those they use) is bound once, in
/// order, by a comprehension over a one-element list
/// (`[DEF].map(v_NAME, ...)[0]`), and `variables.NAME` becomes `v_NAME`.
#[must_use]
pub fn bind_variables(expr: &str, vars: &[(&'static str, String)]) -> String {
    bind(expr, vars, false)
}

/// `expr` evaluated on `oldObject` instead of `object`, with the variables
/// it uses bound as in [`bind_variables`], each on `oldObject` too.
#[must_use]
pub fn on_old_object(expr: &str, vars: &[(&'static str, String)]) -> String {
    bind(expr, vars, true)
}

fn bind(expr: &str, vars: &[(&'static str, String)], old: bool) -> String {
    const AT: &str = "variables.";
    // The names `text` reads, and `text` with them renamed (and `object`
    // read as `oldObject` when `old`).
    let rename = |text: &str| -> (Vec<String>, String) {
        let text = if old {
            old_object(text)
        } else {
            text.to_owned()
        };
        let mut used = Vec::new();
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(i) = rest.find(AT) {
            out.push_str(&rest[..i]);
            let after = &rest[i + AT.len()..];
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            let name = &after[..len];
            if !used.iter().any(|u| u == name) {
                used.push(name.to_owned());
            }
            out.push_str("v_");
            out.push_str(name);
            rest = &after[len..];
        }
        out.push_str(rest);
        (used, out)
    };
    let (mut needed, body) = rename(expr);
    // Close over the variables' own dependencies (definitions read only
    // earlier variables).
    for (name, def) in vars.iter().rev() {
        if needed.iter().any(|n| n == name) {
            for dep in rename(def).0 {
                if !needed.contains(&dep) {
                    needed.push(dep);
                }
            }
        }
    }
    let mut out = body;
    for (name, def) in vars.iter().rev() {
        if needed.iter().any(|n| n == name) {
            out = format!("[{}].map(v_{name}, {out})[0]", rename(def).1);
        }
    }
    out
}

/// `text` with the identifier `object` read as `oldObject`.
fn old_object(text: &str) -> String {
    const OBJECT: &str = "object";
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(OBJECT) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + OBJECT.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(|c| ident(c) || c == '.') || after.is_some_and(ident) {
            out.push_str(OBJECT);
        } else {
            out.push_str("oldObject");
        }
        rest = &rest[i + OBJECT.len()..];
    }
    out.push_str(rest);
    out
}
