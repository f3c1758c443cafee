//! `fragkit advise` report: the answer, the ranked files, prevention, and with --apply
//! predicted against achieved.

use std::io::{self, Write};

use fragkit_sys::console::Shown;

use crate::cmd::advise::ApplyReport;
use crate::defrag::advise::{prevention, Advice};
use crate::units::HumanBytes;

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.0}%", 100.0 * part as f64 / whole as f64)
    }
}

/// `text` broken at spaces into lines of at most `width` characters.
fn wrapped(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The answer, then the `top` files with the most excess, then prevention.
pub(crate) fn write_table(w: &mut dyn Write, a: &Advice, top: usize) -> io::Result<()> {
    let access = if a.access == "profile" {
        "the profile's accesses"
    } else {
        "one sequential read of each file"
    };
    let stripe = a
        .stripe_bytes
        .map_or(String::new(), |s| format!(" (S = {})", HumanBytes(s)));
    writeln!(
        w,
        "advise: {} file{} on {}{stripe}, R = {}, priced: {access}; a fix must pay for its own I/O within {} such reads",
        a.totals.files,
        if a.totals.files == 1 { "" } else { "s" },
        a.device,
        HumanBytes(a.request_size),
        a.reads
    )?;
    writeln!(w)?;
    for line in wrapped(&a.answer, 100) {
        writeln!(w, "{}", fragkit_sys::console::printable(&line))?;
    }
    let listed: Vec<_> = a
        .files
        .iter()
        .filter(|f| f.excess_ns > 0)
        .take(if top == 0 { usize::MAX } else { top })
        .collect();
    if !listed.is_empty() {
        let (split, other) = if a.stripe_bytes.is_some() {
            ("SPLIT", "COLLIDE")
        } else {
            ("SEEKS", "")
        };
        writeln!(w)?;
        writeln!(
            w,
            "{:>3} {:>9} {:>9} {:>9} {:>6} {:>7} {:>5} {:>6}  {:<7} {:>10} {:>9} {:>7}  PATH",
            "#",
            "NOW ms",
            "CONTIG",
            "EXCESS",
            split,
            other,
            "READ%",
            "FRAGS",
            "FIX",
            "WRITES",
            "SAVES ms",
            "PAYBACK"
        )?;
        for (i, f) in listed.iter().enumerate() {
            let chosen = f.chosen();
            writeln!(
                w,
                "{:>3} {:>9} {:>9} {:>9} {:>6} {:>7} {:>5} {:>6}  {:<7} {:>10} {:>9} {:>7}  {}",
                i + 1,
                ms(f.now.time_ns),
                ms(f.contiguous_ns),
                ms(f.excess_ns),
                // On a disk: the seeks themselves (all of the excess is theirs).
                if a.stripe_bytes.is_some() {
                    pct(f.split_ns, f.excess_ns)
                } else {
                    f.now.seeks.to_string()
                },
                if a.stripe_bytes.is_some() {
                    pct(f.collision_ns, f.excess_ns)
                } else {
                    String::new()
                },
                format!("{:.0}%", 100.0 * f.read_share),
                f.fragments,
                f.fix.name(),
                chosen.map_or("-".into(), |o| HumanBytes(o.bytes).to_string()),
                chosen.map_or("-".into(), |o| ms(o.saves_ns)),
                chosen
                    .and_then(|o| o.payback_reads)
                    .map_or("-".into(), |p| format!("{p:.1}")),
                Shown(&f.path)
            )?;
        }
        let more = a.files.iter().filter(|f| f.excess_ns > 0).count() - listed.len();
        let none = a.files.iter().filter(|f| f.excess_ns == 0).count();
        if more > 0 || none > 0 {
            writeln!(
                w,
                "    ({more} more with some excess not listed; {none} read as fast as contiguous)"
            )?;
        }
    }
    if a.files
        .iter()
        .any(|f| f.collision_ns > 0 || f.fix == crate::defrag::advise::Fix::Prevent)
    {
        writeln!(w)?;
        writeln!(w, "Prevention:")?;
        for p in prevention(a) {
            for (k, line) in wrapped(&p, 96).iter().enumerate() {
                writeln!(w, "{} {line}", if k == 0 { "  -" } else { "   " })?;
            }
        }
    }
    Ok(())
}

/// Predicted against achieved for every file --apply moved.
pub(crate) fn write_applied(w: &mut dyn Write, a: &ApplyReport) -> io::Result<()> {
    writeln!(w)?;
    writeln!(w, "Applied: predicted against achieved")?;
    writeln!(
        w,
        "{:<7} {:>11} {:>11} {:>10} {:>12} {:>12} {:>7}  PATH",
        "FIX", "PREDICTED", "MOVED", "BEFORE ms", "PREDICTED ms", "ACHIEVED ms", "ERROR"
    )?;
    for f in &a.files {
        writeln!(
            w,
            "{:<7} {:>11} {:>11} {:>10} {:>12} {:>12} {:>7}  {}",
            f.fix.name(),
            HumanBytes(f.predicted_bytes).to_string(),
            HumanBytes(f.moved_bytes).to_string(),
            ms(f.before_ns),
            ms(f.predicted_ns),
            ms(f.achieved_ns),
            signed_pct(f.achieved_ns, f.predicted_ns),
            Shown(&f.path)
        )?;
    }
    writeln!(
        w,
        "bytes: predicted {}, moved {}, written by the device{} {} ({}); modeled read time: predicted {} ms, achieved {} ms ({})",
        HumanBytes(a.predicted_bytes),
        HumanBytes(a.moved_bytes),
        if a.defrag.len() == 1 { "" } else { "s" },
        HumanBytes(a.device_written_bytes),
        signed_pct(a.device_written_bytes, a.predicted_bytes),
        ms(a.predicted_ns),
        ms(a.achieved_ns),
        signed_pct(a.achieved_ns, a.predicted_ns),
    )
}

/// (actual − predicted) / predicted, signed.
fn signed_pct(actual: u64, predicted: u64) -> String {
    if predicted == 0 {
        return "-".into();
    }
    format!(
        "{:+.1}%",
        100.0 * (actual as f64 - predicted as f64) / predicted as f64
    )
}
