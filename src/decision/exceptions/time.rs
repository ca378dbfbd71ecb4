//! Instants as the API server writes them (RFC 3339), in seconds since the
//! Unix epoch. Pure arithmetic: "now" is always an input.

use std::fmt;

/// An instant, in whole seconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

/// Seconds in a day.
pub const DAY: i64 = 86_400;

impl Timestamp {
    /// Reads an RFC 3339 date-time (`2026-12-31T00:00:00Z`,
    /// `2026-12-31T01:00:00.5+01:00`); fractions of a second are dropped.
    ///
    /// # Errors
    /// The text is not an RFC 3339 date-time; the message says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not an RFC 3339 date-time (like 2026-12-31T00:00:00Z)");
        let b = text.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
            return Err(bad());
        }
        if b[13] != b':' || b[16] != b':' {
            return Err(bad());
        }
        let num = |from: usize, to: usize| -> Result<i64, String> {
            let s = text.get(from..to).ok_or_else(bad)?;
            if !s.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            s.parse::<i64>().map_err(|_| bad())
        };
        let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
        let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 60
        {
            return Err(bad());
        }
        let mut rest = &text[19..];
        if let Some(frac) = rest.strip_prefix('.') {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(bad());
            }
            rest = &frac[digits..];
        }
        let offset = match rest {
            "Z" | "z" => 0,
            _ if rest.len() == 6 && matches!(rest.as_bytes()[0], b'+' | b'-') => {
                if rest.as_bytes()[3] != b':' {
                    return Err(bad());
                }
                let at = text.len() - 6;
                let (h, m) = (num(at + 1, at + 3)?, num(at + 4, at + 6)?);
                if h > 23 || m > 59 {
                    return Err(bad());
                }
                let sign = if rest.starts_with('-') { -1 } else { 1 };
                sign * (h * 3600 + m * 60)
            }
            _ => return Err(bad()),
        };
        let days = days_from_civil(year, month, day);
        Ok(Self(
            days * DAY + hour * 3600 + minute * 60 + second.min(59) - offset,
        ))
    }

    /// This instant plus `days` days.
    #[must_use]
    pub fn plus_days(self, days: u32) -> Self {
        Self(self.0.saturating_add(i64::from(days) * DAY))
    }
}

impl fmt::Display for Timestamp {
    /// `2026-12-31T00:00:00Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(DAY);
        let secs = self.0.rem_euclid(DAY);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01 (the inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_rfc3339() {
        let t = Timestamp::parse("2026-12-31T00:00:00Z").unwrap();
        assert_eq!(t.to_string(), "2026-12-31T00:00:00Z");
        assert_eq!(Timestamp::parse("1970-01-01T00:00:00Z").unwrap().0, 0);
        assert_eq!(
            Timestamp::parse("2024-02-29T01:30:00.25+01:30")
                .unwrap()
                .to_string(),
            "2024-02-29T00:00:00Z"
        );
        assert_eq!(t.plus_days(1).to_string(), "2027-01-01T00:00:00Z");
        for bad in [
            "",
            "2026-12-31",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-12-31T00:00:00",
            "2026-12-31 00:00:00Z",
            "2026-12-31T00:00:00+0100",
            "next week",
        ] {
            let e = Timestamp::parse(bad).unwrap_err();
            assert!(e.contains("RFC 3339"), "{bad}: {e}");
        }
    }
}
