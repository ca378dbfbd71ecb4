//! Variables bound into one expression, for the places that cannot read a
//! policy's variables (match conditions), and the policy's variables copied
//! onto the old object of an UPDATE (`oldObject`).

/// `expr` for a match condition, which cannot read the policy's
/// variables: each variable it uses (and those they use) is bound once, in
/// order, by a comprehension over a one-element list
/// (`[DEF].map(v_NAME, ...)[0]`), and `variables.NAME` becomes `v_NAME`.
#[must_use]
pub fn bind_variables(expr: &str, vars: &[(&'static str, String)]) -> String {
    bind(expr, vars)
}

/// `expr` evaluated on `oldObject` instead of `object`, reading the old
/// object's copies of the policy's variables (`variables.old_NAME`, see
/// [`old_variables`]).
#[must_use]
pub fn on_old_object(expr: &str) -> String {
    rename(&old_object(expr), "variables.old_").1
}

/// The copies on `oldObject` of the variables (of `vars`) that `exprs`
/// read through [`on_old_object`], and of those they read: each
/// `(old_NAME, definition)`, in the order of `vars`, to follow them in a
/// policy's variables. A copy is evaluated only when read: on an UPDATE
/// whose new object a rule finds something in.
#[must_use]
pub fn old_variables(exprs: &[String], vars: &[(&'static str, String)]) -> Vec<(String, String)> {
    let mut needed: Vec<String> = Vec::new();
    for e in exprs {
        for name in rename(e, "").0 {
            if !needed.contains(&name) {
                needed.push(name);
            }
        }
    }
    close_over(&mut needed, vars);
    vars.iter()
        .filter(|(name, _)| needed.iter().any(|n| n == name))
        .map(|(name, def)| (format!("old_{name}"), on_old_object(def)))
        .collect()
}

/// Adds to `needed` the variables its variables read (definitions read only
/// earlier variables).
fn close_over(needed: &mut Vec<String>, vars: &[(impl AsRef<str>, String)]) {
    for (name, def) in vars.iter().rev() {
        if needed.iter().any(|n| n == name.as_ref()) {
            for dep in rename(def, "").0 {
                if !needed.contains(&dep) {
                    needed.push(dep);
                }
            }
        }
    }
}

/// The variables `text` reads (`variables.NAME`), and `text` with each
/// `variables.` replaced by `to`.
fn rename(text: &str, to: &str) -> (Vec<String>, String) {
    let mut used: Vec<String> = Vec::new();
    let out = substitute(text, |name| {
        if !used.iter().any(|u| u == name) {
            used.push(name.to_owned());
        }
        Some(format!("{to}{name}"))
    });
    (used, out)
}

fn bind(expr: &str, vars: &[(&'static str, String)]) -> String {
    let (mut needed, body) = rename(expr, "v_");
    close_over(&mut needed, vars);
    let mut out = body;
    for (name, def) in vars.iter().rev() {
        if needed.iter().any(|n| n == name) {
            out = format!("[{}].map(v_{name}, {out})[0]", rename(def, "v_").1);
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

/// A policy's variables as the API server should hold them: those defined
/// as a constant (`true`, `false`) written in place of their reads, and
/// only those the policy's expressions (`exprs`, rewritten in place) read,
/// directly or through other variables, kept in their order.
///
/// The API server sets up every declared variable for each list of
/// expressions it evaluates, read or not, and looks each read up by name
/// (`k8s.io/apiserver` `pkg/admission/plugin/cel/composition.go` and
/// `pkg/cel/lazy`): a variable nobody reads still costs every request.
pub(super) fn settle(
    vars: Vec<(String, String)>,
    exprs: &mut [&mut String],
) -> Vec<(String, String)> {
    let constants: Vec<(String, String)> = vars
        .iter()
        .filter(|(_, def)| matches!(def.trim(), "true" | "false"))
        .map(|(name, def)| (name.clone(), def.trim().to_owned()))
        .collect();
    let fold = |text: &str| -> String {
        substitute(text, |name| {
            constants
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, value)| value.clone())
        })
    };
    for e in exprs.iter_mut() {
        **e = fold(e);
    }
    let vars: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(name, _)| !constants.iter().any(|(n, _)| n == name))
        .map(|(name, def)| {
            let def = fold(&def);
            (name, def)
        })
        .collect();
    let mut needed: Vec<String> = Vec::new();
    for e in exprs.iter() {
        for name in rename(e, "").0 {
            if !needed.contains(&name) {
                needed.push(name);
            }
        }
    }
    close_over(&mut needed, &vars);
    vars.into_iter()
        .filter(|(name, _)| needed.contains(name))
        .collect()
}

/// `text` with each read `variables.NAME` for which `value(NAME)` gives a
/// text replaced by that text.
fn substitute(text: &str, mut value: impl FnMut(&str) -> Option<String>) -> String {
    const AT: &str = "variables.";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(AT) {
        out.push_str(&rest[..i]);
        let after = &rest[i + AT.len()..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        match value(&after[..len]) {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[i..i + AT.len() + len]),
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, d)| ((*n).to_owned(), (*d).to_owned()))
            .collect()
    }

    #[test]
    fn settle_keeps_what_is_read_in_order_and_writes_constants_in_place() {
        let declared = vars(&[
            ("spec", "object.spec"),
            ("containers", "variables.spec.containers"),
            ("unread", "variables.spec.volumes"),
            ("exempt", "false"),
            ("ok_A", "variables.exempt || size(variables.containers) > 0"),
        ]);
        let mut validation = "variables.ok_A".to_owned();
        let mut message = "variables.exempt ? '' : 'x'".to_owned();
        let kept = settle(declared, &mut [&mut validation, &mut message]);
        assert_eq!(
            kept,
            vars(&[
                ("spec", "object.spec"),
                ("containers", "variables.spec.containers"),
                ("ok_A", "false || size(variables.containers) > 0"),
            ])
        );
        assert_eq!(validation, "variables.ok_A");
        assert_eq!(message, "false ? '' : 'x'");
    }

    #[test]
    fn substitute_replaces_whole_names_only() {
        let out = substitute("variables.a + variables.ab + variables.a", |n| {
            (n == "a").then(|| "1".to_owned())
        });
        assert_eq!(out, "1 + variables.ab + 1");
    }
}
