//! Human units: parsing sizes such as `64MiB` or `1.5GB` from flags, and formatting byte counts
//! and durations for people.
//!
//! `check` parses its `--max-*` limits here; `report`'s text output and `check`'s lines format
//! their sizes and times here, so every command speaks the same units. JSON output never goes
//! through this module: scripts get exact integers.

use std::fmt;

/// Why a size could not be parsed; keeps the text that failed so the message can quote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseSizeError {
    input: String,
    kind: ParseSizeErrorKind,
}

/// What was wrong with a size, so `Display` can say what form was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ParseSizeErrorKind {
    Empty,
    NoNumber,
    BadNumber,
    UnknownUnit(String),
    FractionalBytes,
    TooLarge,
}

impl ParseSizeError {
    fn new(input: &str, kind: ParseSizeErrorKind) -> ParseSizeError {
        ParseSizeError {
            input: input.to_string(),
            kind,
        }
    }

    /// The text that failed to parse.
    pub fn input(&self) -> &str {
        &self.input
    }
}

/// The forms a size may take, repeated in every message so the user can fix the flag at once.
const SIZE_FORMS: &str = "expected a number of bytes with an optional unit: \
     B, K/KiB, M/MiB, G/GiB, T/TiB (1024-based) or KB, MB, GB, TB (1000-based), \
     e.g. 4096, 64MiB, 1.5GB";

impl fmt::Display for ParseSizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.kind {
            ParseSizeErrorKind::Empty => "it is empty".to_string(),
            ParseSizeErrorKind::NoNumber => "it does not start with a number".to_string(),
            ParseSizeErrorKind::BadNumber => "the number is malformed".to_string(),
            ParseSizeErrorKind::UnknownUnit(u) => format!("unknown unit '{u}'"),
            ParseSizeErrorKind::FractionalBytes => {
                "a plain number of bytes must be whole".to_string()
            }
            ParseSizeErrorKind::TooLarge => "it does not fit in 64 bits".to_string(),
        };
        write!(f, "invalid size '{}': {what} ({SIZE_FORMS})", self.input)
    }
}

impl std::error::Error for ParseSizeError {}

/// Parses a size in bytes: a decimal number (a fraction allowed with a unit) followed by an
/// optional unit, case-insensitive, spaces around the unit allowed. `KiB`..`TiB` and the bare
/// `K`..`T` are powers of 1024; `KB`..`TB` are powers of 1000. Fractions round down to a whole
/// byte, so `1.5K` is 1536 and `0.1KiB` is 102.
pub fn parse_size(input: &str) -> Result<u64, ParseSizeError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(ParseSizeError::new(input, ParseSizeErrorKind::Empty));
    }
    let number_len = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(number_len);
    if number.is_empty() {
        return Err(ParseSizeError::new(input, ParseSizeErrorKind::NoNumber));
    }
    let unit = unit.trim();
    let multiplier = unit_multiplier(unit).ok_or_else(|| {
        ParseSizeError::new(input, ParseSizeErrorKind::UnknownUnit(unit.to_string()))
    })?;
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    // "1." and ".5" are accepted like most tools do; "." and "1.2.3" are not.
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(ParseSizeError::new(input, ParseSizeErrorKind::BadNumber));
    }
    if multiplier == 1 && fraction.bytes().any(|b| b != b'0') {
        return Err(ParseSizeError::new(
            input,
            ParseSizeErrorKind::FractionalBytes,
        ));
    }
    let too_large = || ParseSizeError::new(input, ParseSizeErrorKind::TooLarge);
    let whole_value = parse_digits(whole).ok_or_else(too_large)?;
    let mut bytes = whole_value
        .checked_mul(u128::from(multiplier))
        .ok_or_else(too_large)?;
    // The fraction is computed exactly in integers: digits beyond 18 cannot change a whole byte
    // of anything that fits in 64 bits by more than rounding, so they are dropped.
    let fraction = &fraction[..fraction.len().min(18)];
    if !fraction.is_empty() {
        let numerator = parse_digits(fraction).ok_or_else(too_large)?;
        let denominator = 10u128.pow(fraction.len() as u32);
        bytes += numerator * u128::from(multiplier) / denominator;
    }
    u64::try_from(bytes).map_err(|_| too_large())
}

/// Parses ASCII digits into a u128; `None` on overflow. An empty string is zero.
fn parse_digits(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |acc, b| {
        acc.checked_mul(10)?.checked_add(u128::from(b - b'0'))
    })
}

/// The number of bytes one `unit` stands for, or `None` for a unit we do not know.
fn unit_multiplier(unit: &str) -> Option<u64> {
    const KI: u64 = 1 << 10;
    let unit = unit.to_ascii_lowercase();
    let m = match unit.as_str() {
        "" | "b" => 1,
        "k" | "ki" | "kib" => KI,
        "m" | "mi" | "mib" => KI.pow(2),
        "g" | "gi" | "gib" => KI.pow(3),
        "t" | "ti" | "tib" => KI.pow(4),
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return None,
    };
    Some(m)
}

/// Formats a byte count for people: whole bytes below 1 KiB ("512 B"), otherwise one decimal in
/// the largest 1024-based unit that keeps the number at least 1 ("1.5 KiB", "12.3 MiB").
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    // Moving up when the rounded text would read "1024.0" keeps "1023.99 KiB" from printing
    // as "1024.0 KiB".
    while value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Formats a signed byte count (resident deltas can be negative) the way [`format_bytes`] does,
/// with a leading minus sign when negative.
pub fn format_signed_bytes(bytes: i64) -> String {
    let text = format_bytes(bytes.unsigned_abs());
    if bytes < 0 {
        format!("-{text}")
    } else {
        text
    }
}

/// Formats a duration in nanoseconds (a time relative to the start of the recording): whole
/// nanoseconds below 1 µs ("789 ns"), one decimal in µs and ms ("12.3 µs", "12.3 ms"), and
/// milliseconds precision in seconds ("1.234 s", "754.200 s"); seconds stay the largest unit so
/// columns of times compare at a glance.
pub fn format_duration_ns(ns: u64) -> String {
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    // The thresholds sit just below each unit so rounding never prints "1000.0 µs".
    if ns < US {
        format!("{ns} ns")
    } else if ns < MS - 50 {
        format!("{:.1} µs", ns as f64 / US as f64)
    } else if ns < S - 50_000 {
        format!("{:.1} ms", ns as f64 / MS as f64)
    } else {
        format!("{:.3} s", ns as f64 / S as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> u64 {
        match parse_size(s) {
            Ok(v) => v,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    fn err(s: &str) -> String {
        match parse_size(s) {
            Ok(v) => panic!("{s:?} should not parse, got {v}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn plain_bytes() {
        assert_eq!(ok("123"), 123);
    }

    #[test]
    fn zero() {
        assert_eq!(ok("0"), 0);
    }

    #[test]
    fn bytes_unit() {
        assert_eq!(ok("512B"), 512);
    }

    #[test]
    fn kib() {
        assert_eq!(ok("4KiB"), 4096);
    }

    #[test]
    fn bare_k_is_binary() {
        assert_eq!(ok("4k"), 4096);
    }

    #[test]
    fn kb_is_decimal() {
        assert_eq!(ok("4KB"), 4000);
    }

    #[test]
    fn mib() {
        assert_eq!(ok("64MiB"), 64 << 20);
    }

    #[test]
    fn bare_m() {
        assert_eq!(ok("64M"), 64 << 20);
    }

    #[test]
    fn mb() {
        assert_eq!(ok("64MB"), 64_000_000);
    }

    #[test]
    fn gib() {
        assert_eq!(ok("2GiB"), 2 << 30);
    }

    #[test]
    fn fractional_gb() {
        assert_eq!(ok("1.5GB"), 1_500_000_000);
    }

    #[test]
    fn fractional_gib() {
        assert_eq!(ok("1.5GiB"), 3 << 29);
    }

    #[test]
    fn tib_and_tb() {
        assert_eq!(ok("1TiB"), 1 << 40);
        assert_eq!(ok("1TB"), 1_000_000_000_000);
    }

    #[test]
    fn case_insensitive() {
        assert_eq!(ok("64mib"), 64 << 20);
        assert_eq!(ok("64MIB"), 64 << 20);
        assert_eq!(ok("1gb"), 1_000_000_000);
    }

    #[test]
    fn space_before_unit() {
        assert_eq!(ok("64 MiB"), 64 << 20);
    }

    #[test]
    fn surrounding_whitespace() {
        assert_eq!(ok("  7k "), 7 << 10);
    }

    #[test]
    fn fraction_rounds_down() {
        assert_eq!(ok("0.1KiB"), 102);
    }

    #[test]
    fn leading_dot() {
        assert_eq!(ok(".5K"), 512);
    }

    #[test]
    fn trailing_dot() {
        assert_eq!(ok("2.K"), 2048);
    }

    #[test]
    fn whole_fraction_of_bytes_is_fine() {
        assert_eq!(ok("12.0"), 12);
    }

    #[test]
    fn long_fraction_is_cut() {
        assert_eq!(ok("1.0000000000000000000000001KiB"), 1024);
    }

    #[test]
    fn max_u64() {
        assert_eq!(ok("18446744073709551615"), u64::MAX);
    }

    #[test]
    fn overflow_is_error() {
        assert!(err("18446744073709551616").contains("64 bits"));
        assert!(err("20000000TiB").contains("64 bits"));
    }

    #[test]
    fn huge_digit_string_is_error() {
        assert!(err(&"9".repeat(60)).contains("64 bits"));
    }

    #[test]
    fn empty_is_error() {
        assert!(err("").contains("empty"));
        assert!(err("   ").contains("empty"));
    }

    #[test]
    fn unit_only_is_error() {
        assert!(err("MiB").contains("number"));
    }

    #[test]
    fn negative_is_error() {
        assert!(err("-5").contains("number"));
    }

    #[test]
    fn unknown_unit_is_named() {
        assert!(err("64XB").contains("unknown unit 'XB'"));
    }

    #[test]
    fn lone_dot_is_error() {
        assert!(err(".").contains("malformed"));
    }

    #[test]
    fn two_dots_is_error() {
        assert!(err("1.2.3K").contains("malformed"));
    }

    #[test]
    fn fractional_bytes_is_error() {
        assert!(err("1.5").contains("whole"));
        assert!(err("1.5B").contains("whole"));
    }

    #[test]
    fn error_quotes_input_and_forms() {
        let e = err("lots");
        assert!(e.contains("'lots'"), "{e}");
        assert!(e.contains("64MiB"), "{e}");
    }

    #[test]
    fn error_keeps_input() {
        let e = parse_size("9Q").unwrap_err();
        assert_eq!(e.input(), "9Q");
    }

    #[test]
    fn non_ascii_does_not_panic() {
        assert!(parse_size("5µB").is_err());
        assert!(parse_size("５").is_err());
    }

    #[test]
    fn format_small_bytes() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1023), "1023 B");
    }

    #[test]
    fn format_kib() {
        assert_eq!(format_bytes(1024), "1.0 KiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
    }

    #[test]
    fn format_mib() {
        assert_eq!(format_bytes(12_897_485), "12.3 MiB");
    }

    #[test]
    fn format_gib() {
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
    }

    #[test]
    fn format_rounds_up_to_next_unit() {
        assert_eq!(format_bytes((1 << 20) - 1), "1.0 MiB");
    }

    #[test]
    fn format_max() {
        assert_eq!(format_bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn format_signed() {
        assert_eq!(format_signed_bytes(-2048), "-2.0 KiB");
        assert_eq!(format_signed_bytes(2048), "2.0 KiB");
        assert_eq!(format_signed_bytes(i64::MIN), "-8.0 EiB");
    }

    #[test]
    fn duration_ns() {
        assert_eq!(format_duration_ns(0), "0 ns");
        assert_eq!(format_duration_ns(789), "789 ns");
    }

    #[test]
    fn duration_us() {
        assert_eq!(format_duration_ns(12_300), "12.3 µs");
    }

    #[test]
    fn duration_ms() {
        assert_eq!(format_duration_ns(12_300_000), "12.3 ms");
        assert_eq!(format_duration_ns(1_500_000), "1.5 ms");
    }

    #[test]
    fn duration_s() {
        assert_eq!(format_duration_ns(1_234_000_000), "1.234 s");
        assert_eq!(format_duration_ns(754_200_000_000), "754.200 s");
    }

    #[test]
    fn duration_rounding_moves_up_a_unit() {
        assert_eq!(format_duration_ns(999_999), "1.0 ms");
        assert_eq!(format_duration_ns(999_999_999), "1.000 s");
    }

    #[test]
    fn duration_max_does_not_panic() {
        assert!(format_duration_ns(u64::MAX).ends_with(" s"));
    }
}
