//! Exact decimal scaling of the profiler's cells (docs/formats/profiler.md §3): µs with a
//! fraction to integer ns, MB and KB to bytes. The text is read as a decimal (never through a
//! float), multiplied, and rounded half to even only when the product is not whole.

/// `text` (an optional sign, digits, an optional `.` and fraction) × `factor`, as an i64;
/// an error says what is wrong (not a number, out of range).
pub fn scaled(text: &str, factor: i64) -> Result<i64, String> {
    let (negative, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits_ok(whole) || !digits_ok(fraction) {
        return Err(format!("`{text}` is not a decimal number"));
    }
    let out_of_range = || format!("`{text}` is out of range");
    // At most 18 fraction digits matter for any factor here; more are refused, not dropped.
    if fraction.len() > 18 || whole.len() > 30 {
        return Err(out_of_range());
    }
    let mut mantissa: i128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add((b - b'0') as i128))
            .ok_or_else(out_of_range)?;
    }
    let product = mantissa
        .checked_mul(factor as i128)
        .ok_or_else(out_of_range)?;
    let divisor = 10i128.pow(fraction.len() as u32);
    let (quotient, remainder) = (product / divisor, product % divisor);
    let rounded = match (2 * remainder).cmp(&divisor) {
        std::cmp::Ordering::Less => quotient,
        std::cmp::Ordering::Greater => quotient + 1,
        std::cmp::Ordering::Equal => quotient + (quotient & 1),
    };
    let signed = if negative { -rounded } else { rounded };
    i64::try_from(signed).map_err(|_| out_of_range())
}

#[cfg(test)]
mod tests {
    use super::scaled;

    #[test]
    fn exact_scaling() {
        assert_eq!(
            scaled("1736405443756384.100", 1000),
            Ok(1_736_405_443_756_384_100)
        );
        assert_eq!(scaled("2109.6015625", 1 << 20), Ok(2_212_077_568));
        assert_eq!(scaled("147456.5", 1024), Ok(150_995_456));
        assert_eq!(scaled("34.74", 1000), Ok(34_740));
        assert_eq!(scaled("0.0005", 1000), Ok(0)); // half to even
        assert_eq!(scaled("0.0015", 1000), Ok(2));
        assert_eq!(scaled("-1.5", 1000), Ok(-1500));
        assert_eq!(scaled("7", 1), Ok(7));
        assert!(scaled("", 1000).is_err());
        assert!(scaled("1e5", 1000).is_err());
        assert!(scaled("1.2.3", 1000).is_err());
        assert!(scaled("99999999999999999999", 1000)
            .unwrap_err()
            .contains("out of range"));
    }
}
