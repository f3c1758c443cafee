//! Byte sizes on the command line and in output: K, M, G, T suffixes are powers of 1024.

use std::fmt;

/// Parse "131072", "128K", "128k", "1M", "2G", "1T" (optionally with a trailing "B"/"iB").
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("expected a size such as 4096, 128K, 1M or 2G".into());
    }
    let upper = t.to_ascii_uppercase();
    let stripped = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (digits, shift) = match stripped.chars().last() {
        Some('K') => (&stripped[..stripped.len() - 1], 10),
        Some('M') => (&stripped[..stripped.len() - 1], 20),
        Some('G') => (&stripped[..stripped.len() - 1], 30),
        Some('T') => (&stripped[..stripped.len() - 1], 40),
        _ => (stripped, 0),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "'{text}' is not a size: expected digits with an optional K, M, G or T suffix (e.g. 128K)"
        ));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is too large"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// A size that must be greater than zero (request sizes, block sizes).
pub fn parse_nonzero_size(text: &str) -> Result<u64, String> {
    let n = parse_size(text)?;
    if n == 0 {
        return Err(format!("'{text}' must be greater than zero"));
    }
    Ok(n)
}

/// Human-readable bytes with binary units ("1.5 MiB"); exact bytes below 1 KiB.
pub struct HumanBytes(pub u64);

impl fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let mut v = self.0 as f64;
        let mut unit = 0;
        while v >= 1024.0 && unit + 1 < UNITS.len() {
            v /= 1024.0;
            unit += 1;
        }
        if unit == 0 {
            write!(f, "{} B", self.0)
        } else if v.fract() == 0.0 {
            write!(f, "{v:.0} {}", UNITS[unit])
        } else {
            write!(f, "{v:.1} {}", UNITS[unit])
        }
    }
}

/// Compact size label for column headers: 131072 -> "128K", 1048576 -> "1M".
pub fn short_size(n: u64) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n >= (1 << shift) && n % (1 << shift) == 0 {
            return format!("{}{}", n >> shift, suffix);
        }
    }
    n.to_string()
}

/// "YYYY-MM-DD HH:MM:SS" UTC for a Unix time (days-to-civil, proleptic Gregorian).
pub fn utc(t: f64) -> String {
    let secs = t.floor() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("128K").unwrap(), 131072);
        assert_eq!(parse_size("128k").unwrap(), 131072);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("0").unwrap(), 0);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_size("").is_err());
        assert!(parse_size("1X").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("-1K").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_nonzero_size("0").is_err());
    }

    #[test]
    fn short_labels() {
        assert_eq!(short_size(131072), "128K");
        assert_eq!(short_size(1 << 20), "1M");
        assert_eq!(short_size(1000), "1000");
        assert_eq!(HumanBytes(1536).to_string(), "1.5 KiB");
        assert_eq!(HumanBytes(100).to_string(), "100 B");
    }
}

/// Parse a duration: "500ms", "1s", "1.5s", "2m", "1h", "1d"; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => f64::NAN,
    };
    let n: f64 = num.parse().unwrap_or(f64::NAN);
    let secs = n * scale;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!(
            "'{text}' is not a duration: expected a number with ms, s, m, h or d (e.g. 1s, 500ms, 10m)"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod duration_tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("1x").is_err());
        assert!(parse_duration("").is_err());
    }
}

/// Parse a value list for sweeps and matrices: comma-separated items, each a value or a
/// range `A..B` (doubling from A up to B) or `A..B/STEP` (A, A+STEP, ... up to B). Values
/// are sizes with optional K, M, G, T suffixes (`4K..1M`, `10..80/10`, `1M,8M,64M`).
/// Errors are one line naming the 1-based character position and what was expected there.
pub fn parse_value_list(text: &str) -> Result<Vec<u64>, String> {
    let bytes = text.as_bytes();
    let fail = |at: usize, what: &str| -> String {
        let found = match text[at.min(text.len())..].chars().next() {
            Some(c) => format!("'{c}'"),
            None => "the end".to_string(),
        };
        format!(
            "list '{text}': at character {} found {found}, expected {what} (form A,B,... or A..B (doubling) or A..B/STEP, e.g. 4K..1M or 10..80/10)",
            at + 1
        )
    };
    // One value starting at `pos`: digits, then an optional K/M/G/T suffix.
    let value = |pos: usize| -> Result<(u64, usize), String> {
        let mut end = pos;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
        if end == pos {
            return Err(fail(pos, "a number such as 64 or 128K"));
        }
        if end < bytes.len() && matches!(bytes[end].to_ascii_uppercase(), b'K' | b'M' | b'G' | b'T')
        {
            end += 1;
        }
        let v =
            parse_size(&text[pos..end]).map_err(|_| fail(pos, "a number that fits in 64 bits"))?;
        Ok((v, end))
    };
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let (a, mut next) = value(pos)?;
        if text[next..].starts_with("..") {
            let (b, after_b) = value(next + 2)?;
            if !matches!(bytes.get(after_b), None | Some(b',') | Some(b'/')) {
                return Err(fail(after_b, "'/', ',' or the end after a range"));
            }
            if b < a {
                return Err(fail(next + 2, &format!("an end not below the start {a}")));
            }
            next = after_b;
            let step = if next < bytes.len() && bytes[next] == b'/' {
                let (s, after_s) = value(next + 1)?;
                if s == 0 {
                    return Err(fail(next + 1, "a step greater than zero"));
                }
                next = after_s;
                Some(s)
            } else {
                None
            };
            if step.is_none() && a == 0 {
                return Err(fail(
                    pos,
                    "a start above 0 for a doubling range (or add /STEP)",
                ));
            }
            let mut v = a;
            while v <= b && out.len() < 100_000 {
                out.push(v);
                v = match step {
                    Some(s) => v.saturating_add(s),
                    None => v.saturating_mul(2),
                };
                if v == u64::MAX {
                    break;
                }
            }
        } else {
            out.push(a);
        }
        match bytes.get(next) {
            None => break,
            Some(b',') => pos = next + 1,
            Some(_) => {
                return Err(fail(next, "',', '..', '/' or the end"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod list_tests {
    use super::parse_value_list;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(
            parse_value_list("10..80/10").unwrap(),
            vec![10, 20, 30, 40, 50, 60, 70, 80]
        );
        assert_eq!(parse_value_list("0..20/10").unwrap(), vec![0, 10, 20]);
        assert_eq!(
            parse_value_list("1M..8M").unwrap(),
            vec![1 << 20, 2 << 20, 4 << 20, 8 << 20]
        );
        assert_eq!(parse_value_list("4K,1M").unwrap(), vec![4096, 1 << 20]);
        assert_eq!(
            parse_value_list("4K..16K,1M").unwrap(),
            vec![4096, 8192, 16384, 1 << 20]
        );
        let e = parse_value_list("10..x0").unwrap_err();
        assert!(e.contains("at character 5 found 'x'"), "{e}");
        let e = parse_value_list("10..80/").unwrap_err();
        assert!(e.contains("at character 8 found the end"), "{e}");
        let e = parse_value_list("10;20").unwrap_err();
        assert!(e.contains("at character 3 found ';'"), "{e}");
        assert!(parse_value_list("80..10/10")
            .unwrap_err()
            .contains("character 5"));
        assert!(parse_value_list("0..64").is_err());
    }
}
