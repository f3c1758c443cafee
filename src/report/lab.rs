//! The lab's outputs: report.json, report.html (maps side by side, the comparison table,
//! a bar chart, per-file fragments, the commands, the machine), reproduce.sh and a text
//! summary for the terminal.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

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
            subtitle: "MB/s, trimmed mean; more is better".into(),
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

/// What the fragmentation costs on the modeled NVMe (one sentence), then one sentence per
/// defragmenter: what it bought against each mechanism, or why it did not help.
pub(crate) fn modeled_verdicts(methods: &[MethodResult]) -> Vec<String> {
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
    out
}

/// One sentence per defragmenter: what it cost and what it bought.
pub(crate) fn verdicts(r: &LabReport) -> Vec<String> {
    let before = &r.methods[0];
    let full_written = r
        .methods
        .iter()
        .find(|m| m.name == "full")
        .and_then(|m| m.defrag.as_ref())
        .map(|d| d.device_bytes_written);
    r.methods[1..]
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
                format!("MADE IT WORSE: fragments {f0} → {f1}, split requests {s0} → {s1}")
            } else {
                format!("fragments {f0} → {f1}, split requests {s0} → {s1}")
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
            format!(
                "{}: wrote {}{share} in {:.1} s; {effect}; the workload's device reads went {:.0} → {:.0} ({}); speedup ×{:.2} (report.json \"speedup\": median of {} paired rounds of the workload's MB/s after ÷ before).{declined}",
                m.name,
                HumanBytes(written),
                d.map_or(0.0, |d| d.seconds),
                before.workload.device_reads,
                m.workload.device_reads,
                pct_change(m.workload.device_reads, before.workload.device_reads),
                m.speedup.unwrap_or(0.0),
                m.speedup_each.len(),
            )
        })
        .collect()
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
        "<table><tr><th class=\"l\">method</th><th class=\"l\">what it moves</th><th>device bytes written</th><th>write requests</th><th>defrag time</th><th>fragments</th><th>extra requests at {rs}</th><th>workload device reads</th><th>predicted</th><th>MB/s</th><th>CoV</th><th>speed-up, paired</th><th>modeled NVMe MB/s</th><th>die collisions</th></tr>"
    );
    for m in &r.methods {
        let d = m.defrag.as_ref();
        let _ = writeln!(
            h,
            "<tr><td class=\"l\"><b>{}</b></td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{:.1}</td><td>{:.1}%</td><td>{}</td><td>{}</td><td>{}</td></tr>",
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
            m.workload.mb_per_s,
            m.workload.mb_per_s_cov * 100.0,
            m.speedup.map_or("–".into(), |x| format!("×{x:.2}")),
            modeled_cells(m).0,
            modeled_cells(m).1,
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(
        h,
        "<p>Device figures are the loop devices' own counters (<code>/sys/block/*/stat</code>), with a sync before and after each defragmenter. \"Predicted\" is fragkit's layout model (S(R) summed over the workload's requests) from FIEMAP; it should equal the device reads. The workload ran in {} rounds, each reading an untouched clone and every defragmented clone once (order rotating, page cache dropped before each); MB/s is the trimmed mean over rounds, the speed-up the median of each round's ratio to the untouched clone. MB/s on RAM-backed loop devices is noisy (see the notes); the modeled NVMe columns are not: <code>bench read --model fast24</code> replays the same requests on FAST'24's emulated SSD (8 dies, write-order FTL; see docs/ssd.md), the device's mapping built from the files' FIEMAP in physical order, so equal layouts give equal figures in every round. A die collision is a flash page a request puts on a die that another page of the same request already uses, beyond an even spread over the dies.</p>",
        r.iterations
    );

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
                "<dt>PaF structure</dt><dd><code>{}</code>: filled to {:.1}% with {} files, deleted {} at random, leaving {:.1}% used in small holes</dd>",
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
            "<dt>free space (before the defragmenters)</dt><dd>{} free extents, largest {}, mean {}</dd>",
            free.free_extents,
            HumanBytes(free.max_free_extent_blocks * bs),
            HumanBytes((free.mean_free_extent_blocks_exact * bs as f64) as u64),
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

/// The steps as a shell script: variables first, then each command.
fn reproduce_script(r: &LabReport) -> String {
    let mut s = String::from(
        "#!/bin/sh\n# fragkit lab, step by step (run as root). Each defragmenter runs on its own\n# block-for-block clone of the fragmented file system.\nset -e\n",
    );
    let _ = writeln!(
        s,
        "OUT=${{OUT:-./fragkit-lab-repro}}; mkdir -p \"$OUT/maps\" \"$OUT/data\""
    );
    if r.variables.contains_key("IMAGES") {
        // The images' directory of this run may be gone; make a new one where the lab would.
        let _ = writeln!(
            s,
            "IMAGES=${{IMAGES:-$(mktemp -d \"${{TMPDIR:-/tmp}}/fragkit-lab-XXXXXX\")}}"
        );
    }
    for step in &r.steps {
        let cmd = &step.command;
        let line = if step.name == "scratch create" {
            mountpoint_into("BASE", cmd)
        } else if let Some(var) = step
            .name
            .strip_prefix("scratch clone (")
            .and_then(|v| v.strip_suffix(')'))
        {
            mountpoint_into(&var.to_uppercase(), cmd)
        } else {
            match &step.output {
                Some(o) => format!("{cmd} > \"${{OUT}}/{o}\""),
                None => cmd.clone(),
            }
        };
        let _ = writeln!(s, "\n# {}. {}\n{line}", step.n, step.name);
    }
    s.push_str("\n# clean up\n");
    for var in ["TOOL", "FULL", "PICK", "BEFORE", "BASE"] {
        if r.variables.contains_key(var) {
            let _ = writeln!(s, "fragkit scratch destroy \"${{{var}}}\"");
        }
    }
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
        "{:<10} {:>12} {:>10} {:>10} {:>14} {:>10} {:>10} {:>10}",
        "method",
        "written",
        "fragments",
        "extra",
        "device reads",
        "MB/s",
        "NVMe MB/s",
        "collisions"
    )?;
    for m in &r.methods {
        writeln!(
            w,
            "{:<10} {:>12} {:>10} {:>10} {:>14.0} {:>10.1} {:>10} {:>10}",
            m.name,
            m.defrag
                .as_ref()
                .map_or("–".into(), |d| HumanBytes(d.device_bytes_written)
                    .to_string()),
            m.layout.fragments,
            m.layout.extra,
            m.workload.device_reads,
            m.workload.mb_per_s,
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
}
