//! One escaper per syntax, shared by the lint and report renderers.
//!
//! - [`Markup`]: text in XML (JUnit) and HTML element content or attribute
//!   values.
//! - [`script_json`]: JSON inside an HTML `<script>` element.
//!
//! JSON and YAML are written by serde; SARIF's URIs by
//! [`super::sarif`]'s percent-encoding.

use std::fmt;

/// Text escaped for XML and HTML, element content and attribute values
/// alike: `&`, `<`, `>`, `"` and `'` as character references (`&#39;`,
/// which XML and every HTML read), and control characters other than tab
/// and newline dropped (XML 1.0 cannot hold them). Written as it is
/// displayed, so a renderer escapes without building a copy.
pub struct Markup<'s>(pub &'s str);

impl fmt::Display for Markup<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write as _;
        for ch in self.0.chars() {
            match ch {
                '&' => f.write_str("&amp;")?,
                '<' => f.write_str("&lt;")?,
                '>' => f.write_str("&gt;")?,
                '"' => f.write_str("&quot;")?,
                '\'' => f.write_str("&#39;")?,
                c if c.is_control() && c != '\n' && c != '\t' => {}
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// [`Markup`] as a string.
#[must_use]
pub fn markup(s: &str) -> String {
    Markup(s).to_string()
}

/// JSON safe to embed in a `<script>` element: no `<`, `>`, `&`, U+2028
/// or U+2029 survive.
///
/// # Errors
/// The value does not serialize.
pub fn script_json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let s = serde_json::to_string(value)?;
    Ok(s.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_escapes_references_and_drops_control_characters() {
        assert_eq!(
            markup("<a href=\"x\">&'\u{7}\tb\nc"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\tb\nc"
        );
        assert_eq!(
            script_json("</script>&\u{2028}").unwrap(),
            "\"\\u003c/script\\u003e\\u0026\\u2028\""
        );
    }
}
