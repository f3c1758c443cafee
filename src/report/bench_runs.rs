//! Output of `fragkit bench sweep | dof | paf`: tables, JSON, CSV and the PNG plots.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::Path;

use anyhow::Result;

use crate::bench::dof::DofReport;
use crate::bench::paf_matrix::{MatrixReport, MatrixRow};
use crate::bench::sweep::SweepReport;
use crate::render::plot::{heat_maps, line_panels, Heat, Line, Panel};
use crate::units::short_size;

fn json(w: &mut dyn Write, v: &impl serde::Serialize) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, v)?;
    writeln!(w)
}

/// Round away the floating-point dust that prints as "-0.000".
fn tidy(v: f64) -> f64 {
    if v.abs() < 5e-4 {
        0.0
    } else {
        v
    }
}

fn csv_err(e: csv::Error) -> io::Error {
    io::Error::other(e)
}

// ---------- sweep ----------

pub(crate) fn sweep_json(w: &mut dyn Write, r: &SweepReport) -> io::Result<()> {
    json(w, r)
}

pub(crate) fn sweep_table(w: &mut dyn Write, r: &SweepReport) -> io::Result<()> {
    writeln!(
        w,
        "bench sweep: {} file on scratch {} ({}), read with {} sequential O_DIRECT requests, {} iteration(s), caches dropped before each",
        crate::units::HumanBytes(r.size),
        r.fs,
        r.device,
        short_size(r.request_size),
        r.iterations
    )?;
    if r.effective_request_size != r.request_size {
        writeln!(
            w,
            "  the device caps one request at {}: S is predicted at R' = {}",
            short_size(r.effective_request_size),
            short_size(r.effective_request_size)
        )?;
    }
    let rs = short_size(r.effective_request_size);
    writeln!(
        w,
        "{:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>9} {:>7}",
        "frag_size",
        "distance",
        "fragments",
        format!("S({rs})"),
        format!("I({rs})"),
        "dev_reads",
        "MB/s",
        "CoV"
    )?;
    for p in &r.points {
        writeln!(
            w,
            "{:>9} {:>9} {:>9} {:>10} {:>10} {:>10.0} {:>9.1} {:>6.1}%",
            short_size(p.frag_size),
            short_size(p.frag_distance),
            p.fragments,
            p.predicted_split,
            p.predicted_ideal,
            p.device_reads,
            p.mb_per_s.mean,
            p.mb_per_s.cov * 100.0
        )?;
    }
    writeln!(
        w,
        "CC = Pearson correlation of parameter and response; NLRS = least-squares slope after dividing both by their maxima (over all points):"
    )?;
    for c in &r.correlations {
        writeln!(
            w,
            "  {:<13} vs {:<12}  CC {:>6.3}  NLRS {:>7.3}",
            c.parameter,
            c.response,
            tidy(c.cc),
            tidy(c.nlrs)
        )?;
    }
    if let Some(k) = &r.kept {
        writeln!(w, "scratch file system kept at {}", k.display())?;
    }
    Ok(())
}

pub(crate) fn sweep_csv(w: &mut dyn Write, r: &SweepReport) -> io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    c.write_record([
        "frag_size",
        "frag_distance",
        "fragments",
        "request_size",
        "predicted_split",
        "predicted_ideal",
        "device_reads",
        "device_read_bytes",
        "mb_per_s_mean",
        "mb_per_s_trimmed_mean",
        "mb_per_s_cov",
    ])
    .map_err(csv_err)?;
    for p in &r.points {
        c.write_record([
            p.frag_size.to_string(),
            p.frag_distance.to_string(),
            p.fragments.to_string(),
            r.effective_request_size.to_string(),
            p.predicted_split.to_string(),
            p.predicted_ideal.to_string(),
            format!("{:.1}", p.device_reads),
            format!("{:.0}", p.device_read_bytes),
            format!("{:.2}", p.mb_per_s.mean),
            format!("{:.2}", p.mb_per_s.trimmed_mean),
            format!("{:.4}", p.mb_per_s.cov),
        ])
        .map_err(csv_err)?;
    }
    c.flush()
}

/// Device reads and MB/s against frag size, one line per distance.
pub(crate) fn sweep_plot(out: &Path, r: &SweepReport) -> Result<()> {
    let distances: BTreeSet<u64> = r.points.iter().map(|p| p.frag_distance).collect();
    let lines = |f: &dyn Fn(&crate::bench::sweep::SweepPoint) -> f64| -> Vec<Line> {
        distances
            .iter()
            .map(|&d| Line {
                name: format!("distance {}", short_size(d)),
                points: r
                    .points
                    .iter()
                    .filter(|p| p.frag_distance == d)
                    .map(|p| (p.frag_size as f64, f(p)))
                    .collect(),
            })
            .collect()
    };
    let cc = |response: &str| {
        let one = |param: &str, short: &str| {
            r.correlations
                .iter()
                .find(|c| c.parameter == param && c.response == response)
                .map_or(String::new(), |c| {
                    format!("{short}: CC {:.2}, NLRS {:.2}", tidy(c.cc), tidy(c.nlrs))
                })
        };
        format!(
            "{}; {}",
            one("frag_size", "vs frag size"),
            one("frag_distance", "vs distance")
        )
    };
    let panels = [
        Panel {
            caption: format!(
                "device read requests per read of the file ({})",
                cc("device_reads")
            ),
            y_desc: "device read requests".into(),
            log_y: true,
            lines: lines(&|p| p.device_reads),
        },
        Panel {
            caption: format!("throughput ({})", cc("mb_per_s")),
            y_desc: "MB/s".into(),
            log_y: false,
            lines: lines(&|p| p.mb_per_s.mean),
        },
    ];
    line_panels(
        out,
        &format!(
            "bench sweep: {} file, {} O_DIRECT sequential read, scratch {}",
            short_size(r.size),
            short_size(r.request_size),
            r.fs,
        ),
        "frag size (bytes per fragment)",
        true,
        &|v| short_size(v.round() as u64),
        &panels,
    )
}

// ---------- dof ----------

pub(crate) fn dof_json(w: &mut dyn Write, r: &DofReport) -> io::Result<()> {
    json(w, r)
}

pub(crate) fn dof_table(w: &mut dyn Write, r: &DofReport) -> io::Result<()> {
    writeln!(
        w,
        "bench dof: {} file on scratch {} ({}), fragments {} apart, read with {} O_DIRECT requests, {} iteration(s)",
        short_size(r.size),
        r.fs,
        r.device,
        short_size(r.frag_distance),
        short_size(r.request_size),
        r.iterations
    )?;
    if r.effective_request_size != r.request_size {
        writeln!(
            w,
            "  the device caps one request at {}: S is predicted at that size",
            short_size(r.effective_request_size)
        )?;
    }
    writeln!(
        w,
        "{:>5} {:>9} {:>9} {:>4} {:>6} {:>8} {:>10} {:>7} {:>9} {:>7} {:>10}",
        "DoF",
        "fragments",
        "frag_size",
        "QD",
        "run_at",
        "S",
        "dev_reads",
        "merges",
        "MB/s",
        "CoV",
        "lat_us"
    )?;
    for p in &r.points {
        writeln!(
            w,
            "{:>5} {:>9} {:>9} {:>4} {:>6} {:>8} {:>10.0} {:>7.0} {:>9.1} {:>6.1}% {:>10.1}",
            p.dof,
            p.fragments,
            short_size(p.frag_size),
            p.queue_depth,
            p.effective_queue_depth,
            p.predicted_split,
            p.device_reads,
            p.device_read_merges,
            p.mb_per_s.mean,
            p.mb_per_s.cov * 100.0,
            p.mean_latency_us
        )?;
    }
    Ok(())
}

pub(crate) fn dof_csv(w: &mut dyn Write, r: &DofReport) -> io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    c.write_record([
        "dof",
        "fragments",
        "frag_size",
        "request_size",
        "queue_depth",
        "effective_queue_depth",
        "predicted_split",
        "device_reads",
        "device_read_merges",
        "mb_per_s_mean",
        "mb_per_s_cov",
        "mean_latency_us",
    ])
    .map_err(csv_err)?;
    for p in &r.points {
        c.write_record([
            p.dof.to_string(),
            p.fragments.to_string(),
            p.frag_size.to_string(),
            r.request_size.to_string(),
            p.queue_depth.to_string(),
            p.effective_queue_depth.to_string(),
            p.predicted_split.to_string(),
            format!("{:.1}", p.device_reads),
            format!("{:.1}", p.device_read_merges),
            format!("{:.2}", p.mb_per_s.mean),
            format!("{:.4}", p.mb_per_s.cov),
            format!("{:.1}", p.mean_latency_us),
        ])
        .map_err(csv_err)?;
    }
    c.flush()
}

pub(crate) fn dof_plot(out: &Path, r: &DofReport) -> Result<()> {
    let qds: BTreeSet<u32> = r.points.iter().map(|p| p.queue_depth).collect();
    let lines = |f: &dyn Fn(&crate::bench::dof::DofPoint) -> f64| -> Vec<Line> {
        qds.iter()
            .map(|&q| Line {
                name: format!("QD {q}"),
                points: r
                    .points
                    .iter()
                    .filter(|p| p.queue_depth == q)
                    .map(|p| (p.dof as f64, f(p)))
                    .collect(),
            })
            .collect()
    };
    line_panels(
        out,
        &format!(
            "bench dof: {} file in DoF fragments, {} O_DIRECT reads on {}",
            short_size(r.size),
            short_size(r.request_size),
            r.fs
        ),
        "degree of fragmentation (fragments in the file)",
        true,
        &|v| format!("{}", v.round() as u64),
        &[
            Panel {
                caption: "throughput".into(),
                y_desc: "MB/s".into(),
                log_y: false,
                lines: lines(&|p| p.mb_per_s.mean),
            },
            Panel {
                caption: "device read requests per read of the file".into(),
                y_desc: "device read requests".into(),
                log_y: true,
                lines: lines(&|p| p.device_reads),
            },
        ],
    )
}

// ---------- paf matrix ----------

/// MB/s (10^6 bytes) as MiB/s (2^20 bytes), the unit bench ior and IOR print.
fn mib_s(mb_per_s: f64) -> f64 {
    mb_per_s * 1e6 / (1u64 << 20) as f64
}

pub(crate) fn paf_json(w: &mut dyn Write, r: &MatrixReport) -> io::Result<()> {
    json(w, r)
}

pub(crate) fn paf_csv(w: &mut dyn Write, r: &MatrixReport) -> io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    for row in &r.rows {
        c.serialize(row).map_err(csv_err)?;
    }
    c.flush()
}

pub(crate) fn paf_table(w: &mut dyn Write, r: &MatrixReport) -> io::Result<()> {
    if let Some(first) = r.rows.first() {
        writeln!(
            w,
            "bench paf: scratch {} of {}, structure PAF:C.P@{} per cell, {} {} file{} written then read with O_DIRECT, {} iteration(s) ({} cells measured now, {} already in {})",
            first.fs,
            short_size(first.fs_size),
            short_size(first.file_size),
            if first.ranks > 1 { format!("{} ranks each", first.ranks) } else { "a".to_string() },
            short_size(first.bench_size),
            if first.ranks > 1 { " (IOR's method, reads from another rank's file)" } else { "" },
            first.iterations,
            r.measured_cells,
            r.skipped_cells,
            r.csv.display()
        )?;
    }
    let model = r
        .rows
        .iter()
        .find(|x| x.model_mb_s.is_some())
        .map(|x| x.model.clone());
    write!(
        w,
        "{:>4} {:>5} {:>5} {:>6} {:>10} {:>7} {:>10} {:>7} {:>6}",
        "cap%", "frag%", "used%", "xfer", "wr MiB/s", "CoV", "rd MiB/s", "CoV", "frags"
    )?;
    match &model {
        Some(_) => writeln!(w, " {:>10} {:>10} {:>7}", "model wr", "model rd", "seeks")?,
        None => writeln!(w)?,
    }
    let mut cells: BTreeMap<(u64, u64, u64), [Option<&MatrixRow>; 2]> = BTreeMap::new();
    for row in &r.rows {
        let k = if row.op == "write" { 0 } else { 1 };
        cells
            .entry((row.capacity_pct, row.frag_pct, row.xfer))
            .or_default()[k] = Some(row);
    }
    for ((c, p, x), [wr, rd]) in &cells {
        let mbs = |r: &Option<&MatrixRow>| {
            r.map_or("-".to_string(), |r| {
                format!("{:.1}", mib_s(r.mb_per_s_mean))
            })
        };
        let cov = |r: &Option<&MatrixRow>| {
            r.map_or("-".to_string(), |r| {
                format!("{:.1}%", r.mb_per_s_cov * 100.0)
            })
        };
        let any = wr.or(*rd);
        write!(
            w,
            "{:>4} {:>5} {:>5.1} {:>6} {:>10} {:>7} {:>10} {:>7} {:>6.1}",
            c,
            p,
            any.map_or(0.0, |r| r.used_pct),
            short_size(*x),
            mbs(wr),
            cov(wr),
            mbs(rd),
            cov(rd),
            any.map_or(0.0, |r| r.bench_file_fragments)
        )?;
        if model.is_some() {
            let m = |r: &Option<&MatrixRow>| {
                r.and_then(|r| r.model_mb_s)
                    .map_or("-".to_string(), |v| format!("{:.1}", mib_s(v)))
            };
            let seeks = rd
                .or(*wr)
                .and_then(|r| r.model_seeks)
                .map_or("-".to_string(), |v| format!("{v:.0}"));
            write!(w, " {:>10} {:>10} {:>7}", m(wr), m(rd), seeks)?;
        }
        writeln!(w)?;
    }
    writeln!(
        w,
        "MiB/s: 2^20 bytes per second, as bench ior and IOR print (the CSV and JSON keep MB/s, 10^6 bytes per second, in their mb_per_s fields)"
    )?;
    if let Some(name) = model {
        writeln!(
            w,
            "model wr/rd: MiB/s of the benchmarked files' writes and reads at the same transfer size on the disk model {name} (write-through, read look-ahead; requests at the files' FIEMAP physical addresses; see docs/hdd.md); seeks: per read of the file"
        )?;
    }
    Ok(())
}

/// Make `dir` (and its parents) and check a file can be created in it: the plots are
/// written after the whole matrix, which is too late to learn it cannot be.
pub(crate) fn check_plot_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("--plot-dir {}: cannot create: {e}", dir.display()))?;
    let probe = dir.join(format!(".fragkit-plot-check.{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| {
            anyhow::anyhow!(
                "--plot-dir {}: cannot write a file there: {e}",
                dir.display()
            )
        })?;
    std::fs::remove_file(&probe)
        .map_err(|e| anyhow::anyhow!("{}: cannot remove: {e}", probe.display()))
}

/// One PNG per transfer size in `dir`: write and read bandwidth over capacity × frag.
/// Returns the files written.
/// `dir` was made and checked by [`check_plot_dir`] before the matrix ran.
pub(crate) fn paf_plots(dir: &Path, r: &MatrixReport) -> Result<Vec<std::path::PathBuf>> {
    let caps: Vec<u64> = r
        .rows
        .iter()
        .map(|x| x.capacity_pct)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let frags: Vec<u64> = r
        .rows
        .iter()
        .map(|x| x.frag_pct)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let xfers: BTreeSet<u64> = r.rows.iter().map(|x| x.xfer).collect();
    let mut written = Vec::new();
    for x in xfers {
        let map = |op: &str| Heat {
            title: format!("{op} MiB/s, xfer {}", short_size(x)),
            xs: caps.clone(),
            ys: frags.clone(),
            values: frags
                .iter()
                .map(|&p| {
                    caps.iter()
                        .map(|&c| {
                            r.rows
                                .iter()
                                .find(|row| {
                                    row.xfer == x
                                        && row.op == op
                                        && row.capacity_pct == c
                                        && row.frag_pct == p
                                })
                                .map(|row| mib_s(row.mb_per_s_mean))
                        })
                        .collect()
                })
                .collect(),
        };
        let out = dir.join(format!("paf-{}.png", short_size(x)));
        heat_maps(
            &out,
            &format!(
                "bench paf: O_DIRECT bandwidth vs capacity filled (PaF C%) x fragmentation (P% deleted), xfer {}",
                short_size(x)
            ),
            "capacity filled %",
            "fragmentation % (files deleted)",
            &[map("write"), map("read")],
        )?;
        written.push(out);
    }
    Ok(written)
}
