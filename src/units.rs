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
