//! Fuzzing on the stable toolchain: every parser of outside input gets seeded mutations of
//! valid inputs (byte flips, inserted digits/punctuation/non-ASCII, deletions, spliced
//! chunks, huge numbers) and must return Ok or Err — never panic. Each target runs for
//! FRAGKIT_FUZZ_SECONDS (default 2) or exactly FRAGKIT_FUZZ_ITERS iterations;
//! `scripts/fuzz N` runs N per target. Property round-trips are at the end.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use fragkit::age::paf::PafSpec;
use fragkit::render::config::{parse_color, ColorConfig, ImgConfig};
use fragkit::trace::profile::Profile;
use fragkit::units;

/// xorshift64*: small, seeded, reproducible.
pub(crate) struct Rng(pub(crate) u64);
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "0",
    "1",
    "9",
    ".",
    ",",
    "..",
    "/",
    ":",
    "@",
    "<",
    "K",
    "M",
    "G",
    "T",
    "iB",
    "ms",
    "s",
    "d",
    "-",
    "+",
    "e",
    "E",
    "NaN",
    "inf",
    " ",
    "\n",
    "\t",
    "\"",
    "'",
    "[",
    "]",
    "=",
    "#",
    "Ã",
    "é",
    "€",
    "𝄞",
    "\u{0}",
    "\u{7f}",
    "18446744073709551615",
    "99999999999999999999",
    "4294967296",
    "1e308",
    "1e-300",
    "0x",
    "{",
    "}",
    "null",
    "true",
    "-1",
];

pub(crate) fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut s: Vec<char> = seed.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(s.len() + 1);
        match rng.below(5) {
            0 if !s.is_empty() => {
                let end = (at + 1 + rng.below(4)).min(s.len());
                s.drain(at.min(s.len())..end.max(at.min(s.len())));
            }
            1 => {
                let p = PIECES[rng.below(PIECES.len())];
                s.splice(at..at, p.chars());
            }
            2 if !s.is_empty() => {
                let i = rng.below(s.len());
                s[i] = char::from_u32(rng.next() as u32 % 0x3000).unwrap_or('?');
            }
            3 if !s.is_empty() => {
                let a = rng.below(s.len());
                let b = (a + rng.below(8)).min(s.len());
                let chunk: Vec<char> = s[a..b].to_vec();
                s.splice(at..at, chunk);
            }
            _ => {
                let c = (b' ' + rng.below(95) as u8) as char;
                s.insert(at, c);
            }
        }
    }
    s.into_iter().collect()
}

type Target = (&'static str, &'static [&'static str], fn(&str));

const PROFILE: &str = r#"{"version":1,"kind":"fragkit-trace-profile","duration_ns":5,"events":2,"dropped":0,"unresolved_files":0,"files":[{"path":"/a","dev":"8:1","ino":12,"block_size":4096,"size":8192,"read_ahead":0,"reads":1,"writes":0,"bytes_read":4096,"bytes_written":0,"ranges":[{"offset":0,"length":4096,"reads":1,"writes":0}]}]}"#;

fn targets() -> Vec<Target> {
    vec![
        ("size", &["128K", "1MiB", "4096", "2G", "1T"], |t| {
            let _ = units::parse_size(t);
            let _ = units::parse_nonzero_size(t);
        }),
        ("duration", &["500ms", "1.5s", "2m", "1h", "1d", "10"], |t| {
            let _ = units::parse_duration(t);
            let _ = units::parse_seconds(t);
        }),
        ("rate", &["50", "2.5", "0.001"], |t| {
            let _ = units::parse_rate_mb_s(t);
        }),
        ("list", &["4K..1M", "10..80/10", "1M,8M,64M", "0..70/10"], |t| {
            let _ = units::parse_value_list(t);
        }),
        ("paf", &["PAF:70.30,20.40:67005@264M,40M<24253639848", "PAF:85.50@64K"], |t| {
            if let Ok(s) = PafSpec::parse(t) {
                // What parses prints back and parses to the same spec.
                assert_eq!(PafSpec::parse(&s.to_string()).unwrap(), s);
            }
        }),
        ("color", &["#ffb950", "dark-orange", "white"], |t| {
            let _ = parse_color(t);
        }),
        (
            "color.cnf",
            &[
                ".sst,.ldb green light-orange dark-orange\ndefault light-gray black dark-gray\n@free white\n",
                "free = \"white\"\n[default]\ncontiguous = \"light-gray\"\nfragmented = [\"black\", \"dark-gray\"]\n[extensions.sst]\ncontiguous = \"green\"\nfragmented = [\"#ffb950\", \"dark-orange\"]\n",
            ],
            |t| {
                let _ = ColorConfig::parse(t, false);
                let _ = ColorConfig::parse(t, true);
            },
        ),
        (
            "img.cnf",
            &["max_length 0\ncolumns 256\nbox_size 4\nmax_boxes 65536\n", "max_length = 64\ncolumns = 128\n"],
            |t| {
                let _ = ImgConfig::parse(t, false);
                let _ = ImgConfig::parse(t, true);
            },
        ),
        ("trace profile", &[PROFILE], |t| {
            if let Ok(p) = serde_json::from_str::<Profile>(t) {
                let _ = p.check();
            }
        }),
        #[cfg(feature = "watch")]
        ("http host", &["127.0.0.1:9477", "localhost", "[::1]:80", "evil.example:1"], |t| {
            let _ = fragkit::watch::serve::host_allowed(Some(t), "127.0.0.1:9477".parse().ok());
        }),
    ]
}

/// How long each target runs: exactly the count in `iters_var` when set, else
/// FRAGKIT_FUZZ_SECONDS (default 2) seconds.
pub(crate) fn budget(iters_var: &str) -> (Option<u64>, f64) {
    let iters = std::env::var(iters_var).ok().and_then(|v| v.parse().ok());
    let secs = std::env::var("FRAGKIT_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.0);
    (iters, secs)
}

#[test]
fn parsers_never_panic() {
    let (iters, secs) = budget("FRAGKIT_FUZZ_ITERS");
    std::panic::set_hook(Box::new(|_| {}));
    let mut report = Vec::new();
    for (i, (name, seeds, f)) in targets().into_iter().enumerate() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
        let t0 = Instant::now();
        let (mut n, mut panics, mut examples) = (0u64, 0u64, Vec::new());
        loop {
            match iters {
                Some(max) if n >= max => break,
                None if n % 256 == 0 && t0.elapsed() >= Duration::from_secs_f64(secs) => break,
                _ => {}
            }
            let mut input = seeds[rng.below(seeds.len())].to_string();
            for _ in 0..1 + rng.below(3) {
                input = mutate(&mut rng, &input);
            }
            if catch_unwind(AssertUnwindSafe(|| f(&input))).is_err() {
                panics += 1;
                if examples.len() < 5 {
                    examples.push(input);
                }
            }
            n += 1;
        }
        let line = format!(
            "{name}: {n} inputs in {:.1} s, {panics} panics {examples:?}",
            t0.elapsed().as_secs_f64(),
        );
        // One line per parser as it finishes, so a long run shows where it is.
        println!("{line}");
        report.push(line);
    }
    let _ = std::panic::take_hook();
    assert!(
        report.iter().all(|l| l.contains(" 0 panics")),
        "{}",
        report.join("\n")
    );
}

mod round_trips {
    use fragkit::units;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn size_labels_parse_back(n in 0u64..(1 << 50)) {
            prop_assert_eq!(units::parse_size(&units::short_size(n)).unwrap(), n);
        }

        #[test]
        fn durations_in_ms_parse_back(ms in 0u64..10_000_000_000) {
            let d = units::parse_duration(&format!("{ms}ms")).unwrap();
            prop_assert!((d.as_secs_f64() - ms as f64 / 1000.0).abs() < 1e-6 * (1.0 + ms as f64 / 1000.0));
        }

        #[test]
        fn value_lists_parse_back(v in proptest::collection::vec(1u64..(1 << 40), 1..20)) {
            let text = v.iter().map(|&x| units::short_size(x)).collect::<Vec<_>>().join(",");
            prop_assert_eq!(units::parse_value_list(&text).unwrap(), v);
        }
    }
}
