//! ANSI colours for terminals: the one colouring helper of the `lint` and
//! `report` text formats, so a meaning has one colour in both (errors and
//! denials bold red, warnings bold yellow, advice bold cyan, allowed
//! green). The commands decide whether to colour (`--color`, `NO_COLOR`,
//! a terminal); the renderers only pass the choice on.

use crate::decision::finding::Severity;

/// What a coloured piece of text says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// An error, a denial, an input error.
    Error,
    /// A warning, a warned object, an input warning.
    Warning,
    /// Advice (severity info).
    Info,
    /// An allowed object.
    Allowed,
}

impl Tone {
    /// The tone of a finding's severity.
    #[must_use]
    pub fn of(severity: Severity) -> Self {
        match severity {
            Severity::Error => Self::Error,
            Severity::Warning => Self::Warning,
            Severity::Info => Self::Info,
        }
    }

    /// The SGR parameters of the tone.
    fn code(self) -> &'static str {
        match self {
            Self::Error => "1;31",
            Self::Warning => "1;33",
            Self::Info => "1;36",
            Self::Allowed => "32",
        }
    }
}

/// Starts `tone` in `buf` when `color` (end it with [`end`]).
pub fn start(buf: &mut String, color: bool, tone: Tone) {
    if color {
        buf.push_str("\x1b[");
        buf.push_str(tone.code());
        buf.push('m');
    }
}

/// Ends what [`start`] started.
pub fn end(buf: &mut String, color: bool) {
    if color {
        buf.push_str("\x1b[0m");
    }
}

/// `text` in `tone` when `color`, else as it is.
#[must_use]
pub fn paint(color: bool, tone: Tone, text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 11);
    start(&mut out, color, tone);
    out.push_str(text);
    end(&mut out, color);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paints_only_when_asked() {
        assert_eq!(paint(false, Tone::Error, "error"), "error");
        assert_eq!(paint(true, Tone::Error, "error"), "\x1b[1;31merror\x1b[0m");
        assert_eq!(paint(true, Tone::Allowed, "ALLOW"), "\x1b[32mALLOW\x1b[0m");
        assert_eq!(
            paint(true, Tone::of(Severity::Info), "info"),
            "\x1b[1;36minfo\x1b[0m"
        );
    }
}
