//! The lab's outputs: report.json, report.html (maps side by side, the comparison table,
//! a bar chart, per-file fragments, the commands, the machine), reproduce.sh and a text
//! summary for the terminal.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use crate::lab::figures::{self, Axis, RatioInterval, RealTime, MIN_CONFIDENCE};
use crate::lab::{LabReport, MethodResult};
use crate::render::bars::{write_panels, Bar, Panel};
use crate::units::{short_size, HumanBytes};

const CHART: &str = "maps/comparison.png";

fn colour(name: &str) -> [u8; 3] {
    match name {
        "before" => [150, 150, 150],
        "pick" | "bypass" => [40, 140, 90],
        "full" => [200, 110, 40],
        _ => [70, 110, 190],
    }
}

/// Write every output into `out` (the report's `images` is filled in here).
pub fn write_all(out: &Path, report: &mut LabReport) -> Result<()> {
    write_chart(out, report)?;
    report.images = report
        .methods
        .iter()
        .map(|m| m.map.clone())
        .chain([CHART.to_string()])
        .collect();
    let json = serde_json::to_string_pretty(report)? + "\n";
    fs::write(out.join("report.json"), json).context("writing report.json")?;
    fs::write(out.join("report.html"), html(report)).context("writing report.html")?;
    let script = out.join("reproduce.sh");
    fs::write(&script, reproduce_script(report)).context("writing reproduce.sh")?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn write_chart(out: &Path, r: &LabReport) -> Result<()> {
    let rows = |f: &dyn Fn(&MethodResult) -> Option<(f64, String)>| -> Vec<Bar> {
        r.methods
            .iter()
            .filter_map(|m| {
                f(m).map(|(value, text)| Bar {
                    label: m.name.clone(),
                    value,
                    text,
                    colour: colour(&m.name),
                })
            })
            .collect()
    };
    let panels = [
        Panel {
            title: "bytes written by the defragmenter".into(),
            subtitle: "device counters; fewer is better".into(),
            bars: rows(&|m| {
                m.defrag.as_ref().map(|d| {
                    (
                        d.device_bytes_written as f64,
                        HumanBytes(d.device_bytes_written).to_string(),
                    )
                })
            }),
        },
        Panel {
            title: "device read requests".into(),
            subtitle: format!(
                "one pass of the {} workload; fewer is better",
                r.workload.name()
            ),
            bars: rows(&|m| {
                Some((
                    m.workload.device_reads,
                    format!("{:.0}", m.workload.device_reads),
                ))
            }),
        },
        Panel {
            title: "workload throughput".into(),
            subtitle: "MB/s, trimmed mean; noisy: see the paired intervals".into(),
            bars: rows(&|m| {
                Some((
                    m.workload.mb_per_s,
                    format!("{:.0} MB/s", m.workload.mb_per_s),
                ))
            }),
        },
    ];
    write_panels(
        &format!(
            "fragkit lab: {} {}, {} workload, {} files of {}",
            HumanBytes(r.size),
            r.fs,
            r.workload.name(),
            r.files,
            HumanBytes(r.file_size)
        ),
        &panels,
        &out.join(CHART),
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn pct_change(after: f64, before: f64) -> String {
    if before <= 0.0 {
        return "–".into();
    }
    let c = (after / before - 1.0) * 100.0;
    format!("{}{c:.1}%", if c > 0.0 { "+" } else { "" })
}

/// The modeled NVMe columns of a method: MB/s and die collisions ("–" without a model).
fn modeled_cells(m: &MethodResult) -> (String, String) {
    m.workload.modeled.as_ref().map_or_else(
        || ("–".into(), "–".into()),
        |x| (format!("{:.0}", x.mb_s), x.collisions.to_string()),
    )
}

/// The modeled devices' sentences: the NVMe's ([`nvme_verdicts`]), then the disk's
/// ([`disk_verdict`]).
pub(crate) fn modeled_verdicts(methods: &[MethodResult]) -> Vec<String> {
    let mut out = nvme_verdicts(methods);
    out.extend(disk_verdict(methods));
    out
}

/// What the same fragmentation costs the modeled disk, beside the modeled NVMe: the
/// untouched files' MB/s with their seeks and rotational wait, then each defragmenter's
/// speed-up on the disk and on the NVMe. None without disk figures (an older report).
pub(crate) fn disk_verdict(methods: &[MethodResult]) -> Option<String> {
    let (first, rest) = methods.split_first()?;
    let b = first.workload.modeled_disk.as_ref()?;
    let ms = |ns: u64| ns as f64 / 1e6;
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let each: Vec<String> = rest
        .iter()
        .filter_map(|m| {
            let a = m.workload.modeled_disk.as_ref()?;
            let nvme = match (&m.workload.modeled, &first.workload.modeled) {
                (Some(x), Some(y)) => format!(" (NVMe ×{:.2})", ratio(x.mb_s, y.mb_s)),
                _ => String::new(),
            };
            Some(format!("{} ×{:.2}{nvme}", m.name, ratio(a.mb_s, b.mb_s)))
        })
        .collect();
    let after = if each.is_empty() {
        String::new()
    } else {
        format!(
            " Defragmented, on the disk against the NVMe: {}.",
            each.join(", ")
        )
    };
    Some(format!(
        "On the modeled disk ({}: a 7200 rpm Constellation ES.3, deterministic; docs/hdd.md) the fragmented files read at {:.1} MB/s: {} seeks and {:.1} ms waiting for the platter per pass, against {:.1} ms of transfer.{after}",
        b.model,
        b.mb_s,
        b.seeks,
        ms(b.rotation_ns),
        ms(b.transfer_ns),
    ))
}

/// What the fragmentation costs on the modeled NVMe (one sentence), then one sentence per
/// defragmenter: what it bought against each mechanism, or why it did not help.
fn nvme_verdicts(methods: &[MethodResult]) -> Vec<String> {
    let Some((first, rest)) = methods.split_first() else {
        return Vec::new();
    };
    let Some(b) = &first.workload.modeled else {
        return Vec::new();
    };
    let requests = first.workload.requests;
    let extra = |d: u64| d.saturating_sub(requests);
    let share = |part: u64, of: u64| {
        if of == 0 {
            0.0
        } else {
            part as f64 / of as f64
        }
    };
    let split = share(extra(b.device_reads), requests);
    let collided = share(b.collisions, b.page_reads);
    let mechanism = match (split > 0.0, collided > 0.0) {
        (false, false) => "neither request splitting nor die collisions".to_string(),
        _ if split >= collided => "request splitting more than die collisions".to_string(),
        _ => "die collisions more than request splitting".to_string(),
    };
    let mut out = vec![format!(
        "On the modeled {} NVMe ({} dies, deterministic) the fragmented files cost {mechanism}: the workload's {requests} requests became {} device reads (+{:.0}%: splitting) and put {} of {} flash page reads on a die the same request already used ({:.0}%: collisions); modeled {:.0} MB/s.",
        b.model,
        crate::ssd::Params::parse(&b.model).map_or(0, |p| p.dies()),
        b.device_reads,
        split * 100.0,
        b.collisions,
        b.page_reads,
        collided * 100.0,
        b.mb_s
    )];
    let cut = |before: u64, after: u64| {
        if after > before {
            format!("{} more", after - before)
        } else if before == 0 {
            "none to cut".to_string()
        } else {
            format!("{:.0}% cut", (1.0 - after as f64 / before as f64) * 100.0)
        }
    };
    for m in rest {
        let Some(a) = &m.workload.modeled else {
            continue;
        };
        let speed = if b.mb_s > 0.0 { a.mb_s / b.mb_s } else { 0.0 };
        let head = format!(
            "{} on the modeled NVMe: {:.0} → {:.0} MB/s (×{speed:.2}); splitting {} → {} extra device reads ({}), collisions {} → {} ({})",
            m.name,
            b.mb_s,
            a.mb_s,
            extra(b.device_reads),
            extra(a.device_reads),
            cut(extra(b.device_reads), extra(a.device_reads)),
            b.collisions,
            a.collisions,
            cut(b.collisions, a.collisions),
        );
        let why = if speed > 1.01 {
            String::new()
        } else {
            let declined = m
                .defrag
                .as_ref()
                .and_then(|d| d.declined.as_deref())
                .map(|w| format!(" (it declined: {w})"))
                .unwrap_or_default();
            let reason = if a.collisions > b.collisions {
                format!(
                    "{}its new places put {} more pages on a die the same request already used",
                    if a.device_reads < b.device_reads {
                        "it joined pieces, but "
                    } else {
                        ""
                    },
                    a.collisions - b.collisions
                )
            } else if a.device_reads > b.device_reads {
                format!(
                    "its layout splits the requests into {} more device reads",
                    a.device_reads - b.device_reads
                )
            } else if a.device_reads == b.device_reads && a.collisions == b.collisions {
                format!("its layout leaves the workload's requests as split and as collided as before{declined}")
            } else {
                "what it changed was not what limits the modeled read (the remaining die collisions and reads set the time)".to_string()
            };
            format!(". It does not help on the modeled device: {reason}")
        };
        out.push(format!("{head}{why}."));
    }
    for inv in figures::modeled_inversions(methods) {
        if let Some(s) = explain_inversion(methods, &inv) {
            out.push(s);
        }
    }
    out
}

/// Why the model ranks `inv.faster` ahead of `inv.fewer` although the counts favour
/// `inv.fewer`: the model's own per-die outputs that differ in `inv.faster`'s favour (the
/// busiest die's time, page reads queued behind another request or behind the same
/// request), with the pages per device request of both; when none favours it, it says so.
pub(crate) fn explain_inversion(
    methods: &[MethodResult],
    inv: &figures::ModeledInversion,
) -> Option<String> {
    let get = |n: &str| {
        methods
            .iter()
            .find(|m| m.name == n)
            .and_then(|m| m.workload.modeled.as_ref())
    };
    let (a, b) = (get(&inv.faster)?, get(&inv.fewer)?);
    let (fa, fb) = (&inv.faster, &inv.fewer);
    let per_req = |x: &crate::lab::ModeledFigures| {
        if x.device_reads == 0 {
            0.0
        } else {
            x.page_reads as f64 / x.device_reads as f64
        }
    };
    let mut why = Vec::new();
    if a.busiest_die_ns < b.busiest_die_ns {
        why.push(format!(
            "its busiest die is busy {} against {fb}'s {}",
            ms(a.busiest_die_ns),
            ms(b.busiest_die_ns),
        ));
    }
    if a.busiest_channel_ns < b.busiest_channel_ns {
        why.push(format!(
            "its busiest channel moves data for {} against {fb}'s {}",
            ms(a.busiest_channel_ns),
            ms(b.busiest_channel_ns),
        ));
    }
    if a.queued < b.queued {
        why.push(format!(
            "{} of its page reads wait for a die busy with another request against {} of {fb}'s (per-die queueing)",
            a.queued, b.queued
        ));
    }
    if a.waited_same_request < b.waited_same_request {
        why.push(format!(
            "{} of its page reads wait for a die busy with the same request against {} of {fb}'s",
            a.waited_same_request, b.waited_same_request
        ));
    }
    let mechanism = if why.is_empty() {
        format!(
            "none of the model's per-die and per-channel figures favours {fa} (busiest die {} vs {}, busiest channel {} vs {}, page reads queued behind another request {} vs {}, behind the same request {} vs {}): the difference is in how the transfers overlap on the channels and the host link, which the lab does not break down",
            ms(a.busiest_die_ns),
            ms(b.busiest_die_ns),
            ms(a.busiest_channel_ns),
            ms(b.busiest_channel_ns),
            a.queued,
            b.queued,
            a.waited_same_request,
            b.waited_same_request
        )
    } else {
        format!("for {fa} {}", why.join("; "))
    };
    Some(format!(
        "Modeled time ranks {fa} ahead of {fb} ({} against {} per pass) although {fb} has no more device reads ({fb} {}, {fa} {}), die collisions ({} and {}) or page reads ({} and {}; {:.2} and {:.2} per device request): in the model a read's time is set by the dies, channels and queues, not by these counts; {mechanism}.",
        ms(a.read_time_ns),
        ms(b.read_time_ns),
        b.device_reads,
        a.device_reads,
        b.collisions,
        a.collisions,
        b.page_reads,
        a.page_reads,
        per_req(b),
        per_req(a),
    ))
}

/// The real-time clause of a verdict: faster or slower only when the paired interval
/// excludes 1, else "no measurable difference on this machine", with the interval.
pub(crate) fn real_time_clause(i: Option<&RatioInterval>) -> String {
    let Some(i) = i else {
        return "real time: not measured in paired rounds".into();
    };
    let interval = format!(
        "median ×{:.2} over {} paired rounds, interval [{:.2}, {:.2}] at {:.1}% (sign test)",
        i.median,
        i.rounds,
        i.low,
        i.high,
        i.confidence * 100.0
    );
    match i.verdict() {
        RealTime::Faster => format!("real time: faster on this machine ({interval})"),
        RealTime::Slower => format!("real time: slower on this machine ({interval})"),
        RealTime::NoDifference if i.confidence < MIN_CONFIDENCE => format!(
            "real time: no measurable difference on this machine ({interval}; too few rounds to call one)"
        ),
        RealTime::NoDifference => {
            format!("real time: no measurable difference on this machine ({interval})")
        }
    }
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// Reads over the rounds: one figure when every round agreed, else the range.
/// How the layout model's predicted device reads compare with the device's, over the
/// rows that have a prediction: one sentence, or None without predictions.
pub(crate) fn prediction_check(methods: &[MethodResult]) -> Option<String> {
    let rows: Vec<(&str, u64, u64, u64)> = methods
        .iter()
        .filter_map(|m| {
            let p = m.workload.predicted_device_reads?;
            let (lo, hi) = figures::reads_range(m);
            Some((m.name.as_str(), p, lo, hi))
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let exact = rows
        .iter()
        .filter(|(_, p, lo, hi)| lo == p && hi == p)
        .count();
    let others: Vec<String> = rows
        .iter()
        .filter(|(_, p, lo, hi)| !(lo == p && hi == p))
        .map(|(name, p, lo, hi)| {
            let dev = |d: u64| (d as f64 / (*p).max(1) as f64 - 1.0) * 100.0;
            let worst = if dev(*lo).abs() > dev(*hi).abs() {
                dev(*lo)
            } else {
                dev(*hi)
            };
            let seen = if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}–{hi} over the rounds")
            };
            format!("{name}: predicted {p}, device {seen} (at most {worst:+.3}%)")
        })
        .collect();
    let head = format!(
        "layout model: predicted device reads equal the device's in every round on {exact} of {} rows (each file's mapping read back before the pass; its metadata reads in the mapping column)",
        rows.len()
    );
    Some(if others.is_empty() {
        head
    } else {
        format!("{head}; {}", others.join("; "))
    })
}

fn reads_text(m: &MethodResult) -> String {
    let (a, b) = figures::reads_range(m);
    if a == b {
        a.to_string()
    } else {
        format!("{a}–{b}")
    }
}

/// One sentence per defragmenter: what it cost and what it bought, from exact figures;
/// real time only with its interval; where real time and the counts disagree beyond the
/// noise, a sentence that says so.
pub(crate) fn verdicts(r: &LabReport) -> Vec<String> {
    let Some((before, rest)) = r.methods.split_first() else {
        return Vec::new();
    };
    let full_written = r
        .methods
        .iter()
        .find(|m| m.name == "full")
        .and_then(|m| m.defrag.as_ref())
        .map(|d| d.device_bytes_written);
    let rs = short_size(r.request_size);
    let mut out: Vec<String> = rest
        .iter()
        .map(|m| {
            let d = m.defrag.as_ref();
            let written = d.map_or(0, |d| d.device_bytes_written);
            let share = match (m.name.as_str(), full_written) {
                ("full", _) | (_, None) | (_, Some(0)) => String::new(),
                (_, Some(f)) => format!(" ({:.0}% of full's)", written as f64 / f as f64 * 100.0),
            };
            // Fragments and split requests against the untouched state: a method that
            // raised either is said to have made the file system worse.
            let (f0, f1) = (before.layout.fragments, m.layout.fragments);
            let (s0, s1) = (before.layout.split, m.layout.split);
            let effect = if f1 > f0 || s1 > s0 {
                format!("MADE IT WORSE: fragments {f0} → {f1}, requests at {rs} {s0} → {s1}")
            } else {
                format!("fragments {f0} → {f1}, requests at {rs} {s0} → {s1}")
            };
            let fragkit = matches!(m.name.as_str(), "pick" | "bypass" | "full");
            let declined = match d.and_then(|d| d.declined.as_deref()) {
                Some(w) => format!(" It declined: {w}."),
                // btrfs filesystem defragment prints nothing; xfs_fsr logs to syslog
                // when its stdin is no terminal.
                None if d.is_some() && !fragkit && f1 == f0 => {
                    " It left the fragment count as it was and printed no reason.".into()
                }
                None => String::new(),
            };
            let modeled = match (&before.workload.modeled, &m.workload.modeled) {
                (Some(b), Some(a)) => format!(
                    "; modeled NVMe time {} → {}",
                    ms(b.read_time_ns),
                    ms(a.read_time_ns)
                ),
                _ => String::new(),
            };
            let reads = if figures::fewer_reads(m, before) || figures::fewer_reads(before, m) {
                format!(
                    "{} → {} ({})",
                    reads_text(before),
                    reads_text(m),
                    pct_change(m.workload.device_reads, before.workload.device_reads)
                )
            } else {
                format!(
                    "{} → {} (no change beyond the count's round-to-round spread)",
                    reads_text(before),
                    reads_text(m)
                )
            };
            let disagree = match figures::real_time_disagrees(m, before) {
                Some(true) => format!(
                    " Real time disagrees with the counts beyond the noise: the device did less work for the same bytes (device reads {reads}), yet the paired rounds were slower; the counts measure the device's work, so the extra time was spent outside it (on {}-backed loop devices a read costs a memory copy and kernel CPU time that the layout does not set, and the rounds share {} CPUs with whatever else runs).",
                    r.machine.image_store, r.machine.cpus
                ),
                Some(false) => format!(
                    " Real time disagrees with the counts beyond the noise: the device did more work (device reads {reads}), yet the paired rounds were faster; the counts measure the device's work, so the time saved was outside it (on {}-backed loop devices a read costs a memory copy and kernel CPU time that the layout does not set, and the rounds share {} CPUs with whatever else runs).",
                    r.machine.image_store, r.machine.cpus
                ),
                None => String::new(),
            };
            let times = match d.and_then(|d| d.times.as_ref()) {
                Some(t) if t.kept == t.files => {
                    format!(" It left atime, mtime and ctime as they were on all {} files.", t.files)
                }
                Some(t) => format!(
                    " TIMES CHANGED on {} of {} files ({}).",
                    t.files - t.kept,
                    t.files,
                    t.changed.join("; ")
                ),
                None => String::new(),
            };
            format!(
                "{}: wrote {}{share} in {:.1} s; {effect}; the workload's device reads {reads}{modeled}; {}.{declined}{times}{disagree}",
                m.name,
                HumanBytes(written),
                d.map_or(0.0, |d| d.seconds),
                real_time_clause(m.real_time.as_ref()),
            )
        })
        .collect();
    if let Some(s) = ranking_sentence(&r.headline.winners) {
        out.push(s);
    }
    out
}

/// The ranking, axis by axis, from the winner table: ties named as ties; real time ranks
/// only what the paired intervals separate.
pub(crate) fn ranking_sentence(axes: &[Axis]) -> Option<String> {
    let parts: Vec<String> = axes
        .iter()
        .filter(|a| !a.best.is_empty() && a.values.len() > 1)
        .map(|a| {
            let who = a.best.join(", ");
            match (a.exact, a.tie(), a.best.len() == a.values.len()) {
                (false, _, true) => format!(
                    "{}: no measurable difference on this machine between {who}",
                    a.axis
                ),
                (false, true, false) => format!(
                    "{}: {who} (none of them measurably slower than any method; each other method measurably slower than at least one, in paired rounds)",
                    a.axis
                ),
                (false, false, _) => format!(
                    "{}: {who} (not measurably slower than any method; each other method measurably slower than at least one, in paired rounds)",
                    a.axis
                ),
                (true, true, _) => format!("{}: a tie between {who}", a.axis),
                (true, false, _) => format!("{}: {who}", a.axis),
            }
        })
        .collect();
    (!parts.is_empty()).then(|| format!("Best per axis — {}.", parts.join("; ")))
}

/// How the free space lies, from the measured histogram: the share of the free space in
/// runs smaller than one workload file, and the largest run.
pub(crate) fn free_space_words(free: &crate::lab::child::Free, file_size: u64) -> String {
    let largest = free
        .largest_free_run_blocks
        .max(free.max_free_extent_blocks)
        * free.block_size;
    match free.share_below(file_size) {
        None => format!("largest free run {}", HumanBytes(largest)),
        Some((share, exact)) => {
            let kind = if share >= 0.5 {
                "most of the free space is in runs smaller than one file"
            } else if largest >= file_size {
                "most of the free space is in runs at least as large as one file"
            } else {
                "no free run holds a whole file"
            };
            format!(
                "{}{:.0}% of the free space is in runs smaller than one workload file ({}), the largest free run is {}: {kind}",
                if exact { "" } else { "at least " },
                share * 100.0,
                HumanBytes(file_size),
                HumanBytes(largest)
            )
        }
    }
}

/// The winner table: one row per axis, each method's figure, the best (ties as ties).
fn winner_table(axes: &[Axis]) -> String {
    let Some(first) = axes.first() else {
        return String::new();
    };
    let mut h = String::from(
        "<h3>Best per axis</h3>\n<table><tr><th class=\"l\">axis</th><th class=\"l\">better</th>",
    );
    for (name, _) in &first.values {
        let _ = write!(h, "<th>{}</th>", esc(name));
    }
    h.push_str("<th class=\"l\">best</th></tr>\n");
    for a in axes {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td>",
            esc(&a.axis),
            esc(&a.better)
        );
        for (name, v) in &a.values {
            let mark = if a.best.contains(name) { "<b>" } else { "" };
            let end = if mark.is_empty() { "" } else { "</b>" };
            let _ = write!(h, "<td>{mark}{}{end}</td>", esc(v));
        }
        let best = match (a.best.len(), a.exact, a.best.len() == a.values.len()) {
            (0, _, _) => "not measured".to_string(),
            (_, false, true) if a.values.len() > 1 => {
                "no measurable difference between them on this machine".to_string()
            }
            (1, _, _) => a.best[0].clone(),
            (_, true, _) => format!("tie: {}", a.best.join(", ")),
            (_, false, _) => format!("no measurable difference between {}", a.best.join(", ")),
        };
        let _ = writeln!(h, "<td class=\"l\">{}</td></tr>", esc(&best));
    }
    h.push_str("</table>\n<p>Exact axes (counts and the modeled time) tie only on equal figures; device read requests tie within their round-to-round spread (shown as a range when the rounds differed); real time names a best method only when the paired interval of its ratio to every other excludes 1. Modeled time in ns per pass of the workload.</p>\n");
    h
}

fn html(r: &LabReport) -> String {
    let rs = short_size(r.request_size);
    let mut h = String::new();
    let title = format!(
        "fragkit lab — {} {}, {} workload",
        HumanBytes(r.size),
        r.fs,
        r.workload.name()
    );
    let _ = write!(
        h,
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: "DejaVu Sans", system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 24px 32px; color: #222; line-height: 1.45; }}
h1 {{ font-size: 26px; margin: 0 0 4px; }}
h2 {{ font-size: 19px; margin: 32px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }}
.sub {{ color: #666; margin: 0 0 16px; }}
.verdict {{ background: #f4f8f5; border-left: 4px solid #289a5a; padding: 10px 16px; margin: 16px 0; }}
.verdict p {{ margin: 4px 0; }}
.note {{ background: #fff7e6; border-left: 4px solid #d99a20; padding: 8px 16px; margin: 12px 0; }}
.maps {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr)); gap: 16px; }}
.maps figure {{ margin: 0; }}
.maps img {{ width: 100%; border: 1px solid #ccc; }}
figcaption {{ font-size: 14px; color: #444; margin-top: 4px; }}
table {{ border-collapse: collapse; font-size: 14px; margin: 8px 0; }}
th, td {{ border-bottom: 1px solid #e3e3e3; padding: 5px 10px; text-align: right; }}
th {{ background: #f5f5f5; }}
td.l, th.l {{ text-align: left; }}
pre {{ background: #f6f6f6; padding: 12px; overflow-x: auto; font-size: 13px; }}
code {{ font-size: 13px; }}
.chart {{ max-width: 100%; }}
dl {{ display: grid; grid-template-columns: max-content auto; gap: 2px 16px; font-size: 14px; }}
dt {{ color: #666; }} dd {{ margin: 0; }}
</style></head><body>
<h1>{title}</h1>
<p class="sub">{} files of {} fragmented on a scratch {} file system, read by the <b>{}</b> workload ({}), then defragmented on block-for-block clones. Run {} UTC, {:.0} s.</p>
"#,
        r.files,
        HumanBytes(r.file_size),
        r.fs,
        r.workload.name(),
        esc(&r.workload_description),
        esc(&r.started_utc),
        r.seconds
    );
    h.push_str("<div class=\"verdict\">\n");
    for v in verdicts(r).into_iter().chain(modeled_verdicts(&r.methods)) {
        let _ = writeln!(h, "<p>{}</p>", esc(&v));
    }
    h.push_str("</div>\n");
    for n in &r.notes {
        let _ = writeln!(h, "<div class=\"note\">{}</div>", esc(n));
    }

    let _ = write!(
        h,
        "<h2>Comparison</h2>\n<img class=\"chart\" src=\"{CHART}\" alt=\"bar chart: bytes written, device read requests and MB/s per method\">\n"
    );
    let _ = writeln!(
        h,
        "<table><tr><th class=\"l\">method</th><th class=\"l\">what it moves</th><th>device bytes written</th><th>write requests</th><th>defrag time</th><th>fragments</th><th>extra requests at {rs}</th><th>workload device reads</th><th>predicted</th><th>mapping reads</th><th>MB/s</th><th>CoV</th><th>real time after ÷ before, paired: median [interval]</th><th>modeled NVMe MB/s</th><th>die collisions</th></tr>"
    );
    for m in &r.methods {
        let d = m.defrag.as_ref();
        let _ = writeln!(
            h,
            "<tr><td class=\"l\"><b>{}</b></td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{:.0}</td><td>{:.1}</td><td>{:.1}%</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.name),
            esc(&m.description),
            d.map_or("–".into(), |d| HumanBytes(d.device_bytes_written).to_string()),
            d.map_or("–".into(), |d| d.device_write_requests.to_string()),
            d.map_or("–".into(), |d| format!("{:.1} s", d.seconds)),
            m.layout.fragments,
            m.layout.extra,
            m.workload.device_reads,
            m.workload
                .predicted_device_reads
                .map_or("–".into(), |p| p.to_string()),
            m.workload.mapping_reads,
            m.workload.mb_per_s,
            m.workload.mb_per_s_cov * 100.0,
            m.real_time.map_or("–".into(), |i| format!(
                "×{:.2} [{:.2}, {:.2}]",
                i.median, i.low, i.high
            )),
            modeled_cells(m).0,
            modeled_cells(m).1,
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(
        h,
        "<p>Device figures are the loop devices' own counters (<code>/sys/block/*/stat</code>), with a sync before and after each defragmenter. \"Predicted\" is fragkit's layout model from FIEMAP: the workload's requests, each split where the files' data runs end (for whole-file reads, S(R) summed over the files); it equals the device reads when the kernel submits what the layout implies. Before each pass the page cache is dropped and each file's mapping read back (its extent tree; on btrfs also its checksum items): those metadata reads are the \"mapping reads\" column, not in the workload's. The workload ran in {} rounds, each reading an untouched clone and every defragmented clone once (order rotating); MB/s is the trimmed mean over rounds. Real time is compared in pairs: per round, a method's MB/s over the untouched clone's in the same round; the table shows the median ratio and its exact sign-test interval for the median (order statistics of the rounds' ratios, coverage from the binomial distribution: with 5 rounds the smallest to the largest ratio, 93.8%). A method is called faster or slower in real time only when that interval excludes 1, and every ranking sentence above is made from the exact figures (bytes written, device read requests, layout requests, modeled time). MB/s on RAM-backed loop devices is noisy (see the notes); the modeled NVMe columns are not: <code>bench read --model fast24</code> replays the same requests on FAST'24's emulated SSD (8 dies, write-order FTL; see docs/ssd.md), the device's mapping built from the files' FIEMAP in physical order, so equal layouts give equal figures in every round. A die collision is a flash page a request puts on a die that another page of the same request already uses, beyond an even spread over the dies.</p>",
        r.iterations
    );

    if let Some(c) = prediction_check(&r.methods) {
        let _ = writeln!(h, "<p>{}</p>", esc(&c));
    }
    h.push_str(&winner_table(&r.headline.winners));
    h.push_str("<h2>Block maps</h2>\n<p>Each picture shows the whole device; the workload's files are drawn in alternating dark shades per fragment, everything else in beige, free space white.</p>\n<div class=\"maps\">\n");
    for m in &r.methods {
        let _ = writeln!(
            h,
            "<figure><a href=\"{0}\"><img src=\"{0}\" alt=\"block map: {1}\"></a><figcaption><b>{1}</b>: {2} fragments, {3} extra requests at {rs}</figcaption></figure>",
            esc(&m.map),
            esc(&m.name),
            m.layout.fragments,
            m.layout.extra
        );
    }
    h.push_str("</div>\n");

    h.push_str("<h2>Files</h2>\n<table><tr><th class=\"l\">file</th><th>size</th>");
    for m in &r.methods {
        let _ = write!(h, "<th>fragments: {}</th>", esc(&m.name));
    }
    h.push_str("</tr>\n");
    for f in &r.file_rows {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td>",
            esc(&f.file),
            HumanBytes(f.size)
        );
        for n in &f.fragments {
            let _ = write!(h, "<td>{n}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");

    h.push_str("<h2>How it was fragmented</h2>\n<dl>\n");
    let paf = &r.scratch.paf;
    match paf.generations.first() {
        Some(g0) => {
            let _ = writeln!(
                h,
                "<dt>PaF structure</dt><dd><code>{}</code>: filled to {:.1}% with {} files, deleted {} at random, leaving {:.1}% used (how the free space lies: see below)</dd>",
                esc(&paf.spec),
                g0.used_pct_after_fill,
                g0.files_written,
                g0.files_deleted,
                g0.used_pct_after_delete,
            );
        }
        None => h.push_str(
            "<dt>PaF structure</dt><dd>none (<code>--paf none</code>): the files grew in free space with room for them whole</dd>\n",
        ),
    }
    let syn = &r.scratch.synthetic;
    let _ = writeln!(
        h,
        "<dt>FragPicker synthetic</dt><dd>{} files grown round-robin in 4 KiB O_DIRECT appends (32 small + one 128 KiB per round, {} rounds): {} fragments in all; {:.0} per file achieved, {} expected from perfect interleaving{}</dd>",
        r.files,
        syn.rounds,
        syn.fragments,
        syn.achieved_fragments_per_file,
        syn.expected_fragments_per_file,
        if syn.fragmentor.ran {
            format!(
                " (after the fragmentor: {} pieces relocated with EXT4_IOC_MOVE_EXT, {} fragments before it)",
                syn.fragmentor.pieces_moved, syn.fragmentor.fragments_before
            )
        } else {
            String::new()
        }
    );
    if let Some(free) = &r.scratch.free_space {
        let bs = free.block_size;
        let _ = writeln!(
            h,
            "<dt>free space (before the defragmenters)</dt><dd>{} free extents, mean {}; {}</dd>",
            free.free_extents,
            HumanBytes((free.mean_free_extent_blocks_exact * bs as f64) as u64),
            esc(&free_space_words(free, r.file_size)),
        );
    }
    if let Some(t) = &r.trace {
        let _ = writeln!(
            h,
            "<dt>trace</dt><dd>{} events, {} dropped; pick migrated only the ranges the traced workload touched</dd>",
            t.events, t.dropped
        );
    }
    h.push_str("</dl>\n");

    h.push_str("<h2>Reproduce</h2>\n<p>Every figure above came from these commands (as root; <a href=\"reproduce.sh\">reproduce.sh</a> runs them). Each step's output is in <code>data/</code>, its stderr in <code>logs/</code>.</p>\n<pre>");
    h.push_str(&esc(&reproduce_script(r)));
    h.push_str("</pre>\n");

    let m = &r.machine;
    h.push_str("<h2>Machine and file system</h2>\n<dl>\n");
    for (k, v) in [
        ("kernel", m.kernel.clone()),
        ("CPU", format!("{} ({} CPUs)", m.cpu, m.cpus)),
        ("memory", HumanBytes(m.memory_bytes).to_string()),
        ("host", m.hostname.clone()),
        ("fragkit", m.fragkit_version.clone()),
        ("file system", format!("{} of {}", r.fs, HumanBytes(r.size))),
        ("mkfs", r.scratch.mkfs.clone()),
        (
            "device",
            format!(
                "{} backed by {} (on {}), cloned block for block for each method",
                r.scratch.loop_device, r.scratch.image, m.image_store
            ),
        ),
        (
            "workload",
            format!(
                "{} ({}), request size {rs}",
                r.workload.name(),
                r.workload_description
            ),
        ),
    ] {
        let _ = writeln!(h, "<dt>{k}</dt><dd>{}</dd>", esc(&v));
    }
    h.push_str("</dl>\n</body></html>\n");
    h
}

/// `VAR=$(CMD)` for a `scratch create`/`clone` step: without `--format json` the command
/// prints just the mount point, which `$(...)` takes whole (spaces, quotes, newlines), where
/// reading it back out of JSON with sed would keep JSON's escapes.
pub fn mountpoint_into(var: &str, cmd: &str) -> String {
    format!("{var}=$({})", cmd.replace(" --format json", ""))
}

/// Quote `s` for sh in single quotes.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Exit statuses a step may end with: fragkit defrag's 1 means "done, some ranges skipped,
/// listed in its report" (the lab accepts it the same way).
fn allowed_statuses(step: &str) -> &'static str {
    if step.starts_with("defrag --mode") {
        "0 1"
    } else {
        "0"
    }
}

/// The steps as a shell script that reproduces the run: the binary that made it (FRAGKIT=
/// overrides), each step's stdout into $OUT/data and its stderr into $OUT/logs, the scratch
/// images where the lab put them (IMAGES= overrides), every scratch file system and the
/// images' directory removed on exit, and the report rebuilt from the outputs at the end.
fn reproduce_script(r: &LabReport) -> String {
    let exe = std::env::current_exe()
        .map(|p| sh_quote(&p.to_string_lossy()))
        .unwrap_or_else(|_| "fragkit".into());
    let need_kib = ((r.methods.len() as u64 + 1) * r.size + (1 << 30)) / 1024;
    let images_rule = match &r.scratch_dir {
        Some(d) => format!(
            "if [ -z \"${{IMAGES:-}}\" ]; then\n  IMAGES={}; mkdir -p \"$IMAGES\"   # the lab's --scratch-dir\nfi\n",
            sh_quote(&d.to_string_lossy())
        ),
        None => format!(
            r#"# Where the images go, as the lab chose: $TMPDIR when set, else /dev/shm (RAM) when it
# has room for every image, else /tmp.
if [ -z "${{IMAGES:-}}" ]; then
  if [ -n "${{TMPDIR:-}}" ]; then PARENT=$TMPDIR
  elif [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {{ print $4 }}')" -ge {need_kib} ] 2>/dev/null; then PARENT=/dev/shm
  else PARENT=/tmp
  fi
  IMAGES=$(mktemp -d "$PARENT/fragkit-lab-XXXXXX")
  MADE_IMAGES=1
fi
"#
        ),
    };
    let plan = serde_json::to_string_pretty(&crate::lab::LabPlan::of_report(r))
        .unwrap_or_else(|_| "{}".into());
    let mut s = format!(
        r#"#!/bin/sh
# fragkit lab, step by step (run as root): the commands the lab ran, each defragmenter on
# its own block-for-block clone of the fragmented file system. Each step's stdout goes to
# $OUT/data, its stderr to $OUT/logs; at the end `fragkit lab --report-only` rebuilds
# report.html and report.json in $OUT from those outputs (nothing is run again).
#   FRAGKIT=/path/to/fragkit  the binary (default: the one that made this lab)
#   OUT=DIR                   the output directory (default: ./fragkit-lab-repro)
#   IMAGES=DIR                where the scratch images go (default: as the lab chose)
set -eu
FRAGKIT=${{FRAGKIT:-{exe}}}
if [ ! -x "$FRAGKIT" ]; then
  echo "reproduce.sh: $FRAGKIT is not an executable; set FRAGKIT=/path/to/fragkit" >&2
  exit 1
fi
fragkit() {{ "$FRAGKIT" "$@"; }}
OUT=${{OUT:-./fragkit-lab-repro}}
mkdir -p "$OUT/maps" "$OUT/data" "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
: > "$OUT/logs/steps.times"
MADE_IMAGES=
{images_rule}BASE= BEFORE= PICK= FULL= TOOL=
cleanup() {{
  rc=$?
  set +e
  for mp in "$TOOL" "$FULL" "$PICK" "$BEFORE" "$BASE"; do
    if [ -n "$mp" ] && ! "$FRAGKIT" scratch destroy "$mp" >> "$OUT/logs/cleanup.log" 2>&1; then
      echo "reproduce.sh: could not destroy $mp; try: $FRAGKIT scratch destroy $mp" >&2
    fi
  done
  if [ -n "$MADE_IMAGES" ]; then
    for d in "$IMAGES"/*; do [ -d "$d" ] && rmdir "$d"; done
    rmdir "$IMAGES" || echo "reproduce.sh: $IMAGES is not empty; left in place" >&2
  fi
  exit "$rc"
}}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
now() {{ date +%s.%N; }}
# done_step N START STATUS ALLOWED...: note the step's times; stop with one line unless
# its exit status is allowed.
done_step() {{
  n=$1 t0=$2 rc=$3
  shift 3
  echo "$n $t0 $(now) $rc" >> "$OUT/logs/steps.times"
  for ok in "$@"; do [ "$rc" = "$ok" ] && return 0; done
  echo "reproduce.sh: step $n failed (exit $rc); its stderr: $(ls "$OUT"/logs/"$(printf %02d "$n")"-* 2>/dev/null)" >&2
  exit 1
}}
"#
    );
    for step in &r.steps {
        // Inner commands (bench writes' and trace's) are run by path, not through the
        // shell function.
        let cmd = step.command.replace(" -- fragkit ", " -- \"${FRAGKIT}\" ");
        let log = if step.log.is_empty() {
            "/dev/null".to_string()
        } else {
            format!("\"$OUT/{}\"", step.log)
        };
        let clone_var = if step.name == "scratch create" {
            Some("BASE".to_string())
        } else {
            step.name
                .strip_prefix("scratch clone (")
                .and_then(|v| v.strip_suffix(')'))
                .map(str::to_uppercase)
        };
        let (line, after) = match (clone_var, &step.output) {
            // scratch create's JSON is kept (the report reads it); the mount point is
            // always DIR/mnt.
            (Some(var), Some(o)) if step.name == "scratch create" => (
                format!("{cmd} > \"$OUT/{o}\" 2> {log} || RC=$?"),
                format!("{var}=\"$IMAGES/base/mnt\"\n"),
            ),
            (Some(var), _) => (
                {
                    // VAR=$(CMD 2> LOG): the stderr redirection inside the substitution.
                    let m = mountpoint_into(&var, &cmd);
                    let inner = m.strip_suffix(')').unwrap_or(&m);
                    format!("{inner} 2> {log}) || RC=$?")
                },
                String::new(),
            ),
            (None, Some(o)) => (
                format!("{cmd} > \"$OUT/{o}\" 2> {log} || RC=$?"),
                String::new(),
            ),
            (None, None) => (
                format!("{cmd} > /dev/null 2> {log} || RC=$?"),
                String::new(),
            ),
        };
        let _ = writeln!(
            s,
            "\n# {}. {}\nT=$(now); RC=0\n{line}\ndone_step {} \"$T\" \"$RC\" {}\n{after}",
            step.n,
            step.name,
            step.n,
            allowed_statuses(&step.name)
        );
    }
    let _ = write!(
        s,
        "\n# What the run did (no figures): --report-only reads it.\ncat > \"$OUT/data/lab.json\" <<'FRAGKIT_LAB_PLAN'\n{plan}\nFRAGKIT_LAB_PLAN\n"
    );
    s.push_str(
        "\n# The report, from the outputs above (the scratch file systems go on exit).\nfragkit lab --report-only \"$OUT\" 2> \"$OUT/logs/report.log\" || {\n  echo \"reproduce.sh: the report could not be built: $(tail -n 1 \"$OUT/logs/report.log\")\" >&2\n  exit 1\n}\n",
    );
    s
}

/// What the terminal shows at the end.
pub(crate) fn write_summary(
    w: &mut dyn std::io::Write,
    r: &LabReport,
    out: &Path,
) -> std::io::Result<()> {
    writeln!(
        w,
        "fragkit lab: {} {}, {} workload, {} files of {} ({:.0} s)",
        HumanBytes(r.size),
        r.fs,
        r.workload.name(),
        r.files,
        HumanBytes(r.file_size),
        r.seconds
    )?;
    writeln!(
        w,
        "{:<10} {:>12} {:>10} {:>10} {:>14} {:>10} {:>9} {:>10} {:>22} {:>10} {:>10}",
        "method",
        "written",
        "fragments",
        "extra",
        "device reads",
        "predicted",
        "mapping",
        "MB/s",
        "real ×, paired [int.]",
        "NVMe MB/s",
        "collisions"
    )?;
    for m in &r.methods {
        writeln!(
            w,
            "{:<10} {:>12} {:>10} {:>10} {:>14} {:>10} {:>9.0} {:>10.1} {:>22} {:>10} {:>10}",
            m.name,
            m.defrag
                .as_ref()
                .map_or("–".into(), |d| HumanBytes(d.device_bytes_written)
                    .to_string()),
            m.layout.fragments,
            m.layout.extra,
            reads_text(m),
            m.workload
                .predicted_device_reads
                .map_or("–".into(), |p| p.to_string()),
            m.workload.mapping_reads,
            m.workload.mb_per_s,
            m.real_time.map_or("–".into(), |i| format!(
                "×{:.2} [{:.2}, {:.2}]",
                i.median, i.low, i.high
            )),
            modeled_cells(m).0,
            modeled_cells(m).1,
        )?;
    }
    let syn = &r.scratch.synthetic;
    writeln!(
        w,
        "synthetic files: {:.0} fragments per file achieved, {} expected{}",
        syn.achieved_fragments_per_file,
        syn.expected_fragments_per_file,
        if syn.fragmentor.ran {
            " (with the ext4 fragmentor)"
        } else {
            ""
        }
    )?;
    if let Some(c) = prediction_check(&r.methods) {
        writeln!(w, "{c}")?;
    }
    for v in verdicts(r).into_iter().chain(modeled_verdicts(&r.methods)) {
        writeln!(w, "{v}")?;
    }
    for n in &r.notes {
        writeln!(w, "note: {n}")?;
    }
    writeln!(w, "report: {}", out.join("report.html").display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::{DefragFigures, LayoutFigures, ModeledFigures, WorkloadFigures};

    fn method(name: &str, reads: u64, collisions: u64, mb_s: f64) -> MethodResult {
        MethodResult {
            name: name.into(),
            description: String::new(),
            mountpoint: "/m".into(),
            defrag: (name != "before").then(DefragFigures::default),
            layout: LayoutFigures::default(),
            workload: WorkloadFigures {
                requests: 100,
                modeled: Some(ModeledFigures {
                    model: "fast24".into(),
                    device_reads: reads,
                    collisions,
                    page_reads: 400,
                    mb_s,
                    ..ModeledFigures::default()
                }),
                ..WorkloadFigures::default()
            },
            speedup: None,
            speedup_each: Vec::new(),
            real_time: None,
            map: String::new(),
        }
    }

    #[test]
    fn modeled_story_names_the_mechanism_and_what_each_method_bought() {
        let v = modeled_verdicts(&[
            method("before", 300, 40, 500.0),
            method("pick", 100, 40, 900.0),
            method("full", 300, 60, 450.0),
        ]);
        assert_eq!(v.len(), 3, "{v:?}");
        // 200 extra reads per 100 requests against 10% of pages collided: splitting.
        assert!(v[0].contains("fast24 NVMe (8 dies"), "{}", v[0]);
        assert!(v[0].contains("request splitting more than die collisions"));
        assert!(
            v[1].contains("splitting 200 → 0 extra device reads (100% cut)"),
            "{}",
            v[1]
        );
        assert!(!v[1].contains("does not help"));
        assert!(v[2].contains("does not help"), "{}", v[2]);
        assert!(v[2].contains("20 more pages"), "{}", v[2]);
        // No model figures (an older report): no modeled sentences.
        let mut m = method("before", 1, 1, 1.0);
        m.workload.modeled = None;
        assert!(modeled_verdicts(&[m]).is_empty());
    }

    /// The disk's sentence follows the NVMe's: the untouched files' disk MB/s and its
    /// mechanics, then each method's speed-up on both devices.
    #[test]
    fn disk_verdict_puts_the_disk_beside_the_nvme() {
        let disk = |mb_s: f64, seeks: u64| crate::lab::DiskFigures {
            model: "hdd".into(),
            mb_s,
            seeks,
            rotation_ns: 376_100_000,
            transfer_ns: 383_500_000,
            ..crate::lab::DiskFigures::default()
        };
        let mut ms = vec![
            method("before", 300, 40, 500.0),
            method("pick", 100, 40, 550.0),
            method("full", 100, 40, 600.0),
        ];
        ms[0].workload.modeled_disk = Some(disk(88.0, 1));
        ms[1].workload.modeled_disk = Some(disk(176.0, 0));
        ms[2].workload.modeled_disk = Some(disk(176.0, 0));
        let v = modeled_verdicts(&ms);
        let d = v.last().unwrap();
        assert!(d.starts_with("On the modeled disk (hdd"), "{d}");
        assert!(d.contains("read at 88.0 MB/s: 1 seeks and 376.1 ms"), "{d}");
        assert!(
            d.contains("pick ×2.00 (NVMe ×1.10), full ×2.00 (NVMe ×1.20)"),
            "{d}"
        );
        // Without disk figures, the NVMe's sentences alone.
        ms[0].workload.modeled_disk = None;
        assert_eq!(modeled_verdicts(&ms).len(), v.len() - 1);
        assert_eq!(disk_verdict(&ms), None);
    }

    /// A method whose per-round MB/s are `ratios` × 100 against an untouched state at 100
    /// MB/s every round.
    fn measured(
        name: &str,
        fragments: u64,
        reads: &[u64],
        ratios: &[f64],
        modeled_ns: u64,
    ) -> MethodResult {
        let mbps: Vec<f64> = ratios.iter().map(|r| r * 100.0).collect();
        let before = name == "before";
        MethodResult {
            name: name.into(),
            description: String::new(),
            mountpoint: "/m".into(),
            defrag: (!before).then(|| DefragFigures {
                device_bytes_written: 64 << 20,
                ..DefragFigures::default()
            }),
            layout: LayoutFigures {
                fragments,
                split: fragments,
                ..LayoutFigures::default()
            },
            workload: WorkloadFigures {
                requests: 4096,
                device_reads: reads.iter().sum::<u64>() as f64 / reads.len() as f64,
                device_reads_each: reads.to_vec(),
                mb_per_s: fragkit_core::stats::trimmed_mean(&mbps),
                mb_per_s_cov: fragkit_core::stats::cov(&mbps),
                mb_per_s_each: mbps,
                modeled: Some(ModeledFigures {
                    model: "fast24".into(),
                    device_reads: reads[0],
                    page_reads: reads[0] * 4,
                    read_time_ns: modeled_ns,
                    read_bytes: 512 << 20,
                    mb_s: crate::ssd::model::mb_s(512 << 20, modeled_ns),
                    ..ModeledFigures::default()
                }),
                ..WorkloadFigures::default()
            },
            speedup: (!before).then(|| fragkit_core::stats::median(ratios)),
            speedup_each: if before { Vec::new() } else { ratios.to_vec() },
            real_time: if before {
                None
            } else {
                figures::sign_test_interval(ratios)
            },
            map: String::new(),
        }
    }

    fn report(methods: Vec<MethodResult>) -> LabReport {
        let synthetic = crate::lab::child::parse(
            "synthetic",
            r#"{"rounds":4,"fragments":132,"achieved_fragments_per_file":33.0,"expected_fragments_per_file":33,
                "fragmentor":{"ran":false,"fragments_before":0,"pieces_moved":0},"files":[]}"#,
        )
        .unwrap();
        LabReport {
            version: 1,
            started_utc: String::new(),
            seconds: 0.0,
            fs: "ext4".into(),
            size: 2 << 30,
            workload: crate::lab::Workload::Seq,
            workload_description: String::new(),
            request_size: 128 << 10,
            files: 4,
            file_size: 128 << 20,
            iterations: 5,
            seed: 1,
            scratch_dir: None,
            traced: true,
            trace: None,
            machine: crate::lab::Machine {
                kernel: String::new(),
                cpu: String::new(),
                cpus: 2,
                memory_bytes: 0,
                fragkit_version: String::new(),
                hostname: String::new(),
                image_store: "tmpfs".into(),
            },
            scratch: crate::lab::ScratchFigures {
                fs: "ext4".into(),
                size: 2 << 30,
                mkfs: String::new(),
                loop_device: String::new(),
                image: String::new(),
                paf: crate::lab::child::Paf {
                    spec: "none".into(),
                    generations: Vec::new(),
                    rest: Default::default(),
                },
                synthetic,
                free_space: None,
            },
            headline: crate::lab::figures::headline(&methods),
            methods,
            file_rows: Vec::new(),
            steps: Vec::new(),
            variables: Default::default(),
            notes: Vec::new(),
            images: Vec::new(),
        }
    }

    /// `--paf none`: three identical layouts, identical modeled time, device reads within
    /// their spread, MB/s ratios 3.17 / 1.89 / 2.05 with CoV of 24–114%: no ranking on
    /// real time, ties named as ties.
    #[test]
    fn identical_layouts_are_ties_whatever_mb_s_says() {
        let r = report(vec![
            measured("before", 400, &[9000; 5], &[1.0; 5], 900_000_000),
            measured(
                "pick",
                4,
                &[4489, 4500, 4489, 4500, 4489],
                &[0.9, 3.17, 5.0, 1.2, 4.0],
                520_000_000,
            ),
            measured(
                "full",
                4,
                &[4500; 5],
                &[0.8, 1.89, 3.0, 1.5, 4.5],
                520_000_000,
            ),
            measured(
                "e4defrag",
                4,
                &[4500; 5],
                &[1.0, 2.05, 5.5, 1.1, 3.0],
                520_000_000,
            ),
        ]);
        for m in &r.methods[1..] {
            assert!(
                m.workload.mb_per_s_cov > 0.24,
                "{}",
                m.workload.mb_per_s_cov
            );
        }
        let v = verdicts(&r);
        assert_eq!(v.len(), 4, "{v:#?}");
        for s in &v[..3] {
            assert!(
                s.contains("no measurable difference on this machine"),
                "{s}"
            );
            assert!(!s.contains("faster on"), "{s}");
            assert!(!s.contains("slower on"), "{s}");
            assert!(!s.contains("disagrees"), "{s}");
        }
        assert!(v[0].contains("interval [0.90, 5.00] at 93.8%"), "{}", v[0]);
        let rank = &v[3];
        assert!(
            rank.contains("device read requests after: a tie between pick, full, e4defrag"),
            "{rank}"
        );
        assert!(
            rank.contains("modeled NVMe time: a tie between pick, full, e4defrag"),
            "{rank}"
        );
        assert!(
            rank.contains(
                "real time: no measurable difference on this machine between pick, full, e4defrag"
            ),
            "{rank}"
        );
        // Bytes written are equal too: a tie.
        assert!(
            rank.contains("bytes written: a tie between pick, full, e4defrag"),
            "{rank}"
        );
        let h = html(&r);
        assert!(h.contains("Best per axis"));
        assert!(h.contains("tie: pick, full, e4defrag"));
        let mut t = Vec::new();
        write_summary(&mut t, &r, Path::new("/o")).unwrap();
        let t = String::from_utf8(t).unwrap();
        assert!(t.contains("4489–4500"), "{t}");
        assert!(!t.contains("faster on"), "{t}");
    }

    /// btrfs: device reads fall 93%, MB/s ×0.89 inside the noise: the verdict follows the
    /// counts and says real time shows no measurable difference (not "slower").
    #[test]
    fn counts_drive_the_verdict_when_mb_s_is_noise() {
        let r = report(vec![
            measured("before", 400, &[66074; 5], &[1.0; 5], 900_000_000),
            measured(
                "pick",
                40,
                &[4579; 5],
                &[0.5, 0.89, 1.3, 0.7, 1.1],
                500_000_000,
            ),
        ]);
        let v = verdicts(&r);
        assert!(
            v[0].contains("device reads 66074 → 4579 (-93.1%)"),
            "{}",
            v[0]
        );
        assert!(
            v[0].contains("modeled NVMe time 900.0 ms → 500.0 ms"),
            "{}",
            v[0]
        );
        assert!(
            v[0].contains("real time: no measurable difference on this machine (median ×0.89"),
            "{}",
            v[0]
        );
        assert!(!v[0].contains("slower"), "{}", v[0]);
        assert!(!v[0].contains("disagrees"), "{}", v[0]);
    }

    /// Real time measurably slower while the counts fell: said, with why; a measurably
    /// faster method is called faster, with its interval.
    #[test]
    fn disagreement_beyond_the_noise_is_said_and_faster_needs_the_interval() {
        let r = report(vec![
            measured("before", 400, &[66074; 5], &[1.0; 5], 900_000_000),
            measured(
                "pick",
                40,
                &[4579; 5],
                &[0.5, 0.6, 0.7, 0.8, 0.9],
                500_000_000,
            ),
            measured(
                "full",
                4,
                &[4500; 5],
                &[1.5, 1.6, 1.7, 1.8, 1.9],
                480_000_000,
            ),
        ]);
        let v = verdicts(&r);
        assert!(
            v[0].contains("real time: slower on this machine (median ×0.70"),
            "{}",
            v[0]
        );
        assert!(
            v[0].contains("Real time disagrees with the counts beyond the noise"),
            "{}",
            v[0]
        );
        assert!(v[0].contains("tmpfs-backed loop devices"), "{}", v[0]);
        assert!(
            v[1].contains("real time: faster on this machine (median ×1.70 over 5 paired rounds, interval [1.50, 1.90]"),
            "{}",
            v[1]
        );
        assert!(!v[1].contains("disagrees"), "{}", v[1]);
        assert!(
            v[2].contains("real time: full (not measurably slower than any method"),
            "{}",
            v[2]
        );
    }

    /// The db case: full modeled faster than pick although pick has fewer device reads,
    /// collisions and page reads; one sentence names the model's mechanism, or says that
    /// none of its per-die figures explains it.
    #[test]
    fn modeled_inversion_is_explained_by_the_models_own_figures() {
        let set = |m: &mut MethodResult, pages: u64, ns: u64, busiest: u64, queued: u64| {
            let x = m.workload.modeled.as_mut().unwrap();
            x.page_reads = pages;
            x.read_time_ns = ns;
            x.busiest_die_ns = busiest;
            x.queued = queued;
        };
        let mut pick = method("pick", 8192, 0, 178.0);
        let mut full = method("full", 8276, 3, 186.0);
        set(&mut pick, 8192, 47_100_000, 30_000_000, 2000);
        set(&mut full, 11457, 45_100_000, 20_000_000, 500);
        let inversions = |ms: &[MethodResult]| -> Vec<String> {
            modeled_verdicts(ms)
                .into_iter()
                .filter(|s| s.starts_with("Modeled time ranks"))
                .collect()
        };
        let before = method("before", 9000, 40, 150.0);
        let v = inversions(&[before.clone(), pick.clone(), full.clone()]);
        assert_eq!(v.len(), 1, "{v:?}");
        let s = &v[0];
        for part in [
            "ranks full ahead of pick (45.1 ms against 47.1 ms per pass)",
            "pick has no more device reads (pick 8192, full 8276), die collisions (0 and 3) or page reads (8192 and 11457; 1.00 and 1.38 per device request)",
            "for full its busiest die is busy 20.0 ms against pick's 30.0 ms",
            "500 of its page reads wait for a die busy with another request against 2000 of pick's (per-die queueing)",
        ] {
            assert!(s.contains(part), "{part}\n{s}");
        }
        // Nothing in the die figures favours full: said so, with the figures.
        set(&mut pick, 8192, 47_100_000, 10_000_000, 0);
        let v = inversions(&[before, pick.clone(), full.clone()]);
        assert!(
            v[0].contains(
                "none of the model's per-die and per-channel figures favours full (busiest die 20.0 ms vs 10.0 ms"
            ),
            "{}",
            v[0]
        );
        // A less busy channel is named.
        let mut full2 = full.clone();
        full2.workload.modeled.as_mut().unwrap().busiest_channel_ns = 5_000_000;
        pick.workload.modeled.as_mut().unwrap().busiest_channel_ns = 9_000_000;
        let v = inversions(&[method("before", 9000, 40, 150.0), pick, full2]);
        assert!(
            v[0].contains(
                "for full its busiest channel moves data for 5.0 ms against pick's 9.0 ms"
            ),
            "{}",
            v[0]
        );
    }

    /// xfs: a 273 MiB free run is not "small holes": the words come from the histogram.
    #[test]
    fn prediction_check_says_equal_only_when_every_round_is() {
        let with = |name: &str, reads: &[u64], predicted: Option<u64>| {
            let mut m = measured(name, 10, reads, &[1.0; 5], 1_000_000);
            m.workload.predicted_device_reads = predicted;
            m
        };
        let all = [
            with("before", &[100, 100, 100], Some(100)),
            with("pick", &[40, 40, 40], Some(40)),
        ];
        let c = prediction_check(&all).unwrap();
        assert!(c.contains("every round on 2 of 2 rows"), "{c}");
        assert!(!c.contains("predicted 100"), "{c}");
        // One round off by 3: not called equal, and the deviation is quantified.
        let off = [
            with("before", &[1000, 1003, 1000], Some(1000)),
            with("pick", &[40, 40, 40], Some(40)),
        ];
        let c = prediction_check(&off).unwrap();
        assert!(c.contains("every round on 1 of 2 rows"), "{c}");
        assert!(
            c.contains(
                "before: predicted 1000, device 1000–1003 over the rounds (at most +0.300%)"
            ),
            "{c}"
        );
        // Below the prediction is said with its sign.
        let under = [with("full", &[95, 95, 95], Some(100))];
        let c = prediction_check(&under).unwrap();
        assert!(
            c.contains("full: predicted 100, device 95 (at most -5.000%)"),
            "{c}"
        );
        // No prediction anywhere: no sentence.
        assert!(prediction_check(&[with("before", &[5], None)]).is_none());
    }

    #[test]
    fn free_space_words_follow_the_histogram() {
        let free: crate::lab::child::Free = crate::lab::child::parse(
            "free",
            r#"{"block_size":4096,"free_extents":40,"max_free_extent_blocks":69888,
                "mean_free_extent_blocks_exact":2000.0,"largest_free_run_blocks":69888,
                "histogram":[{"min_blocks":1,"max_blocks":1,"extents":30,"blocks":30},
                             {"min_blocks":65536,"max_blocks":131071,"extents":1,"blocks":69888}]}"#,
        )
        .unwrap();
        let w = free_space_words(&free, 32 << 20);
        assert!(
            w.contains("0% of the free space is in runs smaller than one workload file (32 MiB)"),
            "{w}"
        );
        assert!(w.contains("the largest free run is 273 MiB"), "{w}");
        assert!(
            w.contains("most of the free space is in runs at least as large as one file"),
            "{w}"
        );
        assert!(!w.contains("small holes"), "{w}");
        let holes: crate::lab::child::Free = crate::lab::child::parse(
            "free",
            r#"{"block_size":4096,"free_extents":40,"max_free_extent_blocks":160,
                "mean_free_extent_blocks_exact":3.0,"largest_free_run_blocks":160,
                "histogram":[{"min_blocks":1,"max_blocks":1,"extents":3000,"blocks":3000},
                             {"min_blocks":128,"max_blocks":255,"extents":1,"blocks":160}]}"#,
        )
        .unwrap();
        let w = free_space_words(&holes, 32 << 20);
        assert!(w.starts_with("100% of the free space"), "{w}");
        assert!(
            w.ends_with("most of the free space is in runs smaller than one file"),
            "{w}"
        );
    }
}
