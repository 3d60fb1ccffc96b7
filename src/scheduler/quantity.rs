//! Kubernetes quantities in the scheduler's units: millicores for cpu, whole units otherwise,
//! rounded up like `Quantity.MilliValue` / `Quantity.Value`.

/// `text` as an amount of `resource`; `None` for anything the apiserver would not accept.
pub(crate) fn amount(resource: &str, text: &str) -> Option<i64> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(end);
    let negative = number.starts_with('-');
    let digits = number.strip_prefix(['+', '-']).unwrap_or(number);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if (whole.is_empty() && fraction.is_empty())
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // Digits past what i128 holds exactly are beyond any real quantity.
    if whole.len() + fraction.len() > 30 {
        return None;
    }
    let mantissa: i128 = format!("{whole}{fraction}").parse().ok()?;
    let (binary_power, mut exp10): (u32, i32) = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        s if s.starts_with(['e', 'E']) => (0, s[1..].parse().ok()?),
        _ => return None,
    };
    exp10 -= i32::try_from(fraction.len()).ok()?;
    if resource == "cpu" {
        exp10 += 3;
    }
    if !(-40..=40).contains(&exp10) {
        return None;
    }
    let scaled = mantissa.checked_shl(binary_power)?;
    let value = if exp10 >= 0 {
        scaled.checked_mul(10_i128.pow(exp10.unsigned_abs()))?
    } else {
        let divisor = 10_i128.pow(exp10.unsigned_abs());
        (scaled + divisor - 1) / divisor
    };
    i64::try_from(if negative { -value } else { value }).ok()
}

#[cfg(test)]
mod tests {
    use super::amount;

    #[test]
    fn units_and_rounding() {
        for (resource, text, want) in [
            ("cpu", "2", Some(2000)),
            ("cpu", "250m", Some(250)),
            ("cpu", "1.5", Some(1500)),
            ("cpu", "0.0001", Some(1)),
            ("cpu", "100u", Some(1)),
            ("memory", "4Gi", Some(4 << 30)),
            ("memory", "1e3", Some(1000)),
            ("memory", "1.5k", Some(1500)),
            ("memory", "500m", Some(1)),
            ("pods", "110", Some(110)),
            ("memory", "", None),
            ("memory", "12 Gi", None),
            ("memory", "1.2.3", None),
            ("cpu", "--1", None),
            ("memory", "1e400", None),
            ("memory", "99999999999999999999999999999999999", None),
        ] {
            assert_eq!(amount(resource, text), want, "{resource} {text:?}");
        }
    }
}
