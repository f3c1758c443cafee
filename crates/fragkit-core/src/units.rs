//! Byte sizes on the command line and in output: K, M, G, T suffixes are powers of 1024.

use std::fmt;

/// Parse "131072", "128K", "128k", "1M", "2G", "1T" (optionally with a trailing "B"/"iB").
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(format!(
            "'{}' is not a size: expected a size such as 4096, 128K, 1M or 2G",
            printable(text)
        ));
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
            "'{}' is not a size: expected digits with an optional K, M, G or T suffix (e.g. 128K)",
            printable(text)
        ));
    }
    let n: u64 = digits.parse().map_err(|_| {
        format!(
            "'{}' is too large: expected at most 16 EiB",
            printable(text)
        )
    })?;
    n.checked_mul(1u64 << shift).ok_or_else(|| {
        format!(
            "'{}' is too large: expected at most 16 EiB",
            printable(text)
        )
    })
}

/// A size that must be greater than zero (request sizes, block sizes).
pub fn parse_nonzero_size(text: &str) -> Result<u64, String> {
    let n = parse_size(text)?;
    if n == 0 {
        return Err(format!("'{}' must be greater than zero", printable(text)));
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
        if n >= (1 << shift) && n.is_multiple_of(1 << shift) {
            return format!("{}{}", n >> shift, suffix);
        }
    }
    n.to_string()
}

/// Seconds since the Unix epoch, now (0 on a clock set before 1970).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
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

/// The longest duration any option takes: 100 years. Past it, deadlines computed as
/// `now + duration` overflow the clock, and nothing fragkit does runs that long.
pub(crate) const MAX_DURATION_SECS: f64 = 100.0 * 365.25 * 86400.0;

/// Parse a duration: "500ms", "1s", "1.5s", "2m", "1h", "1d"; a bare number is seconds.
/// At most [`MAX_DURATION_SECS`].
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let expected = "expected a number with ms, s, m, h or d (e.g. 1s, 500ms, 10m)";
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
    // Digits and at most one '.', with a digit somewhere ("." and "1.2.3" are not numbers).
    let n: f64 = if num.bytes().any(|b| b.is_ascii_digit()) {
        num.parse().unwrap_or(f64::NAN)
    } else {
        f64::NAN
    };
    let secs = n * scale;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!(
            "'{}' is not a duration: {expected}",
            printable(text)
        ));
    }
    if secs > MAX_DURATION_SECS {
        return Err(format!(
            "duration '{}' is too long: expected at most 100 years",
            printable(text)
        ));
    }
    std::time::Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("'{}' is not a duration: {expected}", printable(text)))
}

/// Seconds as a plain positive number ("10", "2.5", "2.5s"), at most 100 years.
pub fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    let what = "expected a positive number of seconds, e.g. 10 or 2.5";
    match text.trim().trim_end_matches('s').parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v <= MAX_DURATION_SECS => {
            std::time::Duration::try_from_secs_f64(v)
                .map_err(|_| format!("duration '{}': {what}", printable(text)))
        }
        Ok(v) if v.is_finite() && v > MAX_DURATION_SECS => Err(format!(
            "duration '{}' is too long: expected at most 100 years",
            printable(text)
        )),
        _ => Err(format!("duration '{}': {what}", printable(text))),
    }
}

/// A rate in MB/s (10^6 bytes per second) as whole bytes per second: finite, at least
/// 0.001 MB/s (1 kB/s; below that a 4 KiB block would take seconds) and at most 10^9 MB/s.
pub fn parse_rate_mb_s(text: &str) -> Result<u64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.001..=1e9).contains(&v) => Ok((v * 1e6).round() as u64),
        _ => Err(format!(
            "'{}' is not a rate: expected MB/s from 0.001 to 1000000000 (e.g. 50 or 2.5)",
            printable(text)
        )),
    }
}

/// User text for an error message: control characters escaped, so one line stays one
/// line and a terminal shows what was typed (non-ASCII stays as it is).
/// (`fragkit_sys::console::printable`, the project's one escaping rule.)
pub fn printable(text: &str) -> String {
    fragkit_sys::console::printable(text).into_owned()
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
        assert!(parse_duration(".").is_err());
        assert!(parse_duration("99999999999999999999").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
        assert!(parse_duration("1e3").is_err());
        assert_eq!(parse_duration("100y").unwrap_err().lines().count(), 1);
    }

    #[test]
    fn seconds_and_rates() {
        use super::{parse_rate_mb_s, parse_seconds};
        assert_eq!(parse_seconds("2.5").unwrap(), Duration::from_millis(2500));
        let e = parse_seconds("99999999999999999999").unwrap_err();
        assert!(
            e.contains("99999999999999999999") && e.contains("too long"),
            "{e}"
        );
        assert!(parse_seconds("NaN").is_err());
        assert!(parse_seconds("inf").is_err());
        assert!(parse_seconds("0").is_err());
        assert_eq!(parse_rate_mb_s("50").unwrap(), 50_000_000);
        for bad in ["NaN", "nan", "inf", "-1", "0", "1e-300", "1e300"] {
            let e = parse_rate_mb_s(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("MB/s"), "{e}");
        }
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

/// A path as JSON fields, for `#[serde(flatten, serialize_with = "path_fields")]` on a
/// field named `path`: `"path"` is the name as UTF-8 (bytes that are not UTF-8 become
/// U+FFFD), and only when that loses something, `"path_bytes"` holds the name's bytes as
/// an array of numbers, so the file can always be found again. (serde's own `Path`
/// serialisation fails on such a name, and with it the whole document.)
pub fn path_fields<S: serde::Serializer>(p: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    named_path_fields(("path", "path_bytes"), p, s)
}

/// [`path_fields`] for a field named `dir`: `"dir"`, and `"dir_bytes"` when not UTF-8.
pub fn dir_fields<S: serde::Serializer>(p: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    named_path_fields(("dir", "dir_bytes"), p, s)
}

/// [`path_fields`] for a field named `target`: `"target"`, and `"target_bytes"`.
pub fn target_fields<S: serde::Serializer>(p: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    named_path_fields(("target", "target_bytes"), p, s)
}

fn named_path_fields<S: serde::Serializer>(
    (key, bytes_key): (&'static str, &'static str),
    p: &std::path::Path,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    use std::os::unix::ffi::OsStrExt;
    let bytes = p.as_os_str().as_bytes();
    let mut m = s.serialize_map(None)?;
    m.serialize_entry(key, &String::from_utf8_lossy(bytes))?;
    if std::str::from_utf8(bytes).is_err() {
        m.serialize_entry(bytes_key, bytes)?;
    }
    m.end()
}

#[cfg(test)]
mod path_fields_tests {
    use std::os::unix::ffi::OsStrExt;
    use std::path::PathBuf;

    #[derive(serde::Serialize)]
    struct Row {
        #[serde(flatten, serialize_with = "super::path_fields")]
        path: PathBuf,
        n: u32,
    }

    #[test]
    fn non_utf8_names_keep_their_bytes() {
        let ok = Row {
            path: PathBuf::from("/a/é"),
            n: 1,
        };
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"path":"/a/é","n":1}"#
        );
        let bad = Row {
            path: PathBuf::from(std::ffi::OsStr::from_bytes(b"/a\xff")),
            n: 2,
        };
        assert_eq!(
            serde_json::to_string(&bad).unwrap(),
            r#"{"path":"/a�","path_bytes":[47,97,255],"n":2}"#
        );
    }
}
