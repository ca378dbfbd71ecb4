//! Writing values in the file's style: block or flow, YAML or JSON, its
//! line endings and indentation.

use serde_json::Value;

pub(super) fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

pub(super) fn line_start(text: &str, pos: usize) -> usize {
    text[..pos].rfind('\n').map_or(0, |i| i + 1)
}

pub(super) fn next_line(text: &str, pos: usize) -> usize {
    text[pos..].find('\n').map_or(text.len(), |i| pos + i + 1)
}

/// Spaces at the start of the line holding `pos`.
pub(super) fn indent_width(text: &str, pos: usize) -> usize {
    let start = line_start(text, pos);
    text[start..].len() - text[start..].trim_start_matches(' ').len()
}

/// The file's block indentation: the step of nested maps, and whether list
/// items are indented under their key (`key:\n  - a`) or not (`key:\n- a`).
pub(super) fn block_style(text: &str) -> (usize, usize) {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#')
        })
        .collect();
    let key_col = |l: &str| l.len() - l.trim_start_matches([' ', '-']).len();
    let (mut unit, mut seq) = (None, None);
    for pair in lines.windows(2) {
        let (a, b) = (pair[0].trim_end(), pair[1]);
        if !a.ends_with(':') {
            continue;
        }
        let (ka, ib) = (key_col(a), b.len() - b.trim_start().len());
        if b.trim_start().starts_with('-') {
            seq.get_or_insert(ib.saturating_sub(ka));
        } else if ib > ka {
            unit.get_or_insert(ib - ka);
        }
        if unit.is_some() && seq.is_some() {
            break;
        }
    }
    (unit.unwrap_or(2), seq.unwrap_or(0))
}

/// A JSON string literal.
pub(super) fn json_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A value in flow style: JSON, or YAML flow style (`{key: value}`, plain
/// scalars where safe) when `yaml`; pretty as `(indent, unit)` puts nested
/// entries on their own lines.
pub(super) fn flow_value(
    v: &Value,
    pretty: Option<(usize, usize)>,
    nl: &str,
    yaml: bool,
) -> String {
    let inner = pretty.map(|(i, u)| (i + u, u));
    let (open, close, parts): (&str, &str, Vec<String>) = match v {
        Value::Object(m) if !m.is_empty() => (
            "{",
            "}",
            m.iter()
                .map(|(k, x)| {
                    let key = if yaml { block_key(k) } else { json_str(k) };
                    format!("{key}: {}", flow_value(x, inner, nl, yaml))
                })
                .collect(),
        ),
        Value::Array(a) if !a.is_empty() => (
            "[",
            "]",
            a.iter().map(|x| flow_value(x, inner, nl, yaml)).collect(),
        ),
        v if yaml => return block_scalar(v),
        v => return v.to_string(),
    };
    match pretty {
        Some((indent, unit)) => {
            let inner = " ".repeat(indent + unit);
            let body = parts.join(&format!(",{nl}{inner}"));
            format!("{open}{nl}{inner}{body}{nl}{}{close}", " ".repeat(indent))
        }
        None => format!("{open}{}{close}", parts.join(", ")),
    }
}

/// A scalar (or empty collection) in block style.
pub(super) fn block_scalar(v: &Value) -> String {
    match v {
        Value::String(s) => block_key(s),
        Value::Null => "null".into(),
        Value::Object(m) if m.is_empty() => "{}".into(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
        Value::Object(_) | Value::Array(_) => flow_value(v, None, "\n", true),
    }
}

/// A plain scalar when safe, else a JSON (double-quoted) string.
pub(super) fn block_key(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-' | '_'))
        && !s.starts_with(['-', '.'])
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | "null" | "~"
        )
        && s.parse::<f64>().is_err()
        && !s.starts_with(|c: char| c.is_ascii_digit());
    if plain { s.to_owned() } else { json_str(s) }
}
