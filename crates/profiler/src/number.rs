//! Exact decimal scaling of the profiler's cells (docs/formats/profiler.md §3): µs with a
//! fraction to integer ns, MB and KB to bytes. The text is read as a decimal (never through a
//! float) and multiplied; the product is rounded (half to even) only when the cell's digits are
//! fine enough to give the whole unit back. A cell whose digits were lost is an error: one in
//! scientific notation that stops above the unit (`1.69512E+15` µs, a spreadsheet's rewrite),
//! or one whose product is not whole and whose digits stop above the unit (`4599.740723` MB).

/// Why a cell in scientific notation is refused (docs/formats/profiler.md §3).
pub fn scientific_reason(text: &str) -> String {
    format!("a spreadsheet re-saved this cell in scientific notation ({text}): its digits are lost")
}

/// Whether `text` is a number in scientific notation: an optional sign, digits with an optional
/// `.` and fraction, `e` or `E`, an optional sign and digits (`1.69512E+15`, `9.4509E+13`).
pub fn is_scientific(text: &str) -> bool {
    split_exponent(text).is_some_and(|(_, e)| e.is_some())
}

/// `text` as (sign-less mantissa text, exponent text) when it has the shape of a number with an
/// optional exponent; the sign is left on the mantissa.
fn split_exponent(text: &str) -> Option<(&str, Option<&str>)> {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    let body = mantissa.strip_prefix(['-', '+']).unwrap_or(mantissa);
    let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    if let Some(e) = exponent {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        if e.is_empty() || !digits(e) {
            return None;
        }
    }
    Some((mantissa, exponent))
}

/// `text` (an optional sign, digits, an optional `.` and fraction, an optional exponent) ×
/// `factor`, as an i64; an error says what is wrong (not a number, digits lost, out of range).
pub fn scaled(text: &str, factor: i64) -> Result<i64, String> {
    let Some((mantissa, exponent)) = split_exponent(text) else {
        return Err(format!("`{text}` is not a decimal number"));
    };
    let out_of_range = || format!("`{text}` is out of range");
    let (negative, body) = match mantissa.as_bytes().first() {
        Some(b'-') => (true, &mantissa[1..]),
        Some(b'+') => (false, &mantissa[1..]),
        _ => (false, mantissa),
    };
    let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let exponent: i64 = match exponent {
        Some(e) if e.trim_start_matches(['-', '+']).len() > 4 => return Err(out_of_range()),
        Some(e) => e.parse().map_err(|_| out_of_range())?,
        None => 0,
    };
    if digits.len() > 30 {
        return Err(out_of_range());
    }
    let mut value: i128 = 0;
    for b in digits.bytes() {
        value = value * 10 + (b - b'0') as i128;
    }
    // The value is `value` × 10^place: `place` is the place of the last digit written.
    let place = exponent - fraction.len() as i64;
    let pow10 =
        |n: i64| -> Option<i128> { u32::try_from(n).ok().and_then(|n| 10i128.checked_pow(n)) };
    let product = value.checked_mul(factor as i128).ok_or_else(out_of_range)?;
    let rounded = if place >= 0 {
        // The last digit is a whole file unit or coarser: exact only when written out in full.
        if exponent != 0 && value != 0 {
            return Err(scientific_reason(text));
        }
        product
            .checked_mul(pow10(place).ok_or_else(out_of_range)?)
            .ok_or_else(out_of_range)?
    } else {
        // More than 38 decimals: no profiler writes them.
        let divisor = pow10(-place).ok_or_else(out_of_range)?;
        // The digits give the whole ns or byte back when they go below it: 10^place × factor
        // < 1. Otherwise a product that is not whole means digits were cut.
        let fine = (factor as i128) < divisor;
        let (quotient, remainder) = (product / divisor, product % divisor);
        if !fine && exponent != 0 {
            return Err(scientific_reason(text));
        }
        if !fine && remainder != 0 {
            return Err(format!(
                "`{text}` × {factor} is not a whole number: the cell's last digits are lost (as when a spreadsheet re-saves the file)"
            ));
        }
        match (2 * remainder).cmp(&divisor) {
            std::cmp::Ordering::Less => quotient,
            std::cmp::Ordering::Greater => quotient + 1,
            std::cmp::Ordering::Equal => quotient + (quotient & 1),
        }
    };
    let signed = if negative { -rounded } else { rounded };
    i64::try_from(signed).map_err(|_| out_of_range())
}

/// `text` as a whole number (an optional sign and digits): graph ids, node indices.
pub fn integer(text: &str) -> Result<i64, String> {
    if is_scientific(text) {
        return Err(scientific_reason(text));
    }
    if text.contains('.') {
        return Err(format!("`{text}` is not a whole number"));
    }
    scaled(text, 1)
}

#[cfg(test)]
mod tests {
    use super::{integer, is_scientific, scaled};

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
        assert_eq!(scaled("-0.0009765625", 1 << 20), Ok(-1024));
        assert!(scaled("", 1000).is_err());
        assert!(scaled("1e", 1000).is_err());
        assert!(scaled("e5", 1000).is_err());
        assert!(scaled("1.2.3", 1000).is_err());
        assert!(scaled("99999999999999999999", 1000)
            .unwrap_err()
            .contains("out of range"));
    }

    /// Digits cut by a spreadsheet are refused; digits that still reach the unit are read.
    #[test]
    fn lost_digits() {
        let sci = "a spreadsheet re-saved this cell in scientific notation (1.69512E+15): its digits are lost";
        assert_eq!(scaled("1.69512E+15", 1000), Err(sci.to_string()));
        assert!(scaled("9.4509E+13", 1)
            .unwrap_err()
            .contains("scientific notation"));
        assert!(scaled("1e5", 1000)
            .unwrap_err()
            .contains("scientific notation"));
        // Python writes 1 byte in MB as 9.5367431640625e-07: every digit is there.
        assert_eq!(scaled("9.5367431640625e-07", 1 << 20), Ok(1));
        assert_eq!(scaled("1.5E-3", 1000), Ok(2)); // 1.5 ns, half to even
        assert!(scaled("1.5E-3", 1_000_000_000).is_err()); // s: stops at 0.1 ms
                                                           // 9 decimals of KB reach far below a byte: 216.9999995 B is 217 B.
        assert_eq!(scaled("0.211914063", 1024), Ok(217));
        // 6 decimals of MB do not: 4599.740723 MB is not a whole number of bytes.
        assert!(scaled("4599.740723", 1 << 20)
            .unwrap_err()
            .contains("last digits are lost"));
        assert_eq!(scaled("4599.74072265625", 1 << 20), Ok(4_823_177_728));
        assert!(is_scientific("1.69512E+15") && is_scientific("-2e-3"));
        assert!(!is_scientific("1695115378714622.8") && !is_scientific("E+15"));
        assert_eq!(integer("4294967295"), Ok(4_294_967_295));
        assert!(integer("1.5").is_err());
        assert!(integer("4.29497E+09").unwrap_err().contains("scientific"));
    }
}
