//! Scalars resolved as Kubernetes' YAML reader (go-yaml v2, YAML 1.1) does:
//! `yes`/`on` are booleans, `0644` is octal.

use serde_json::{Number, Value};
use serde_saphyr::granit_parser::{ScalarStyle, Tag};

const CORE: &str = "tag:yaml.org,2002:";

/// A scalar's value: quoted and block scalars are strings; plain scalars
/// resolve to null, booleans and numbers as YAML 1.1 readers do.
pub fn resolve(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Value {
    if let Some(tag) = tag {
        if tag.handle() == CORE {
            match tag.suffix() {
                "str" | "binary" | "timestamp" => return Value::String(text.to_owned()),
                "null" => return Value::Null,
                _ => {}
            }
        } else {
            return Value::String(text.to_owned());
        }
    }
    if style != ScalarStyle::Plain {
        return Value::String(text.to_owned());
    }
    resolve_plain(text).unwrap_or_else(|| Value::String(text.to_owned()))
}

fn resolve_plain(s: &str) -> Option<Value> {
    let first = s.chars().next()?;
    if !(first.is_ascii_digit()
        || matches!(
            first,
            '-' | '+' | '.' | '~' | 'n' | 'N' | 't' | 'T' | 'f' | 'F' | 'y' | 'Y' | 'o' | 'O'
        ))
    {
        return None;
    }
    match s {
        "~" | "null" | "Null" | "NULL" => return Some(Value::Null),
        "true" | "True" | "TRUE" | "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Some(Value::Bool(true));
        }
        "false" | "False" | "FALSE" | "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Some(Value::Bool(false));
        }
        _ => {}
    }
    if !(first.is_ascii_digit() || matches!(first, '-' | '+' | '.')) {
        return None;
    }
    int(s).map(Value::Number).or_else(|| float(s))
}

fn int(s: &str) -> Option<Number> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let digits = body.replace('_', "");
    if digits.is_empty() {
        return None;
    }
    let (radix, digits) = if let Some(h) = digits.strip_prefix("0x") {
        (16, h.to_owned())
    } else if let Some(o) = digits.strip_prefix("0o") {
        (8, o.to_owned())
    } else if let Some(b) = digits.strip_prefix("0b") {
        (2, b.to_owned())
    } else if digits.len() > 1
        && digits.starts_with('0')
        && digits.bytes().all(|c| (b'0'..=b'7').contains(&c))
    {
        (8, digits[1..].to_owned())
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(&digits, radix).ok()?;
    if negative {
        let v = i64::try_from(magnitude).ok()?;
        Some(Number::from(-v))
    } else {
        Some(Number::from(magnitude))
    }
}

fn float(s: &str) -> Option<Value> {
    let body = s.trim_start_matches(['-', '+']);
    if matches!(body, ".inf" | ".Inf" | ".INF" | ".nan" | ".NaN" | ".NAN") {
        // JSON has no infinities; keep the text.
        return None;
    }
    let ok = body
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'-' | b'+' | b'_'))
        && body.bytes().any(|c| c.is_ascii_digit());
    if !ok {
        return None;
    }
    let v: f64 = s.replace('_', "").parse().ok()?;
    Number::from_f64(v).map(Value::Number)
}
