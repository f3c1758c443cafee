//! `bench fast24`'s table and CSV: each row's MB/s and its ratio to the workload's
//! contiguous row, modeled / real / paper, then what each recorded run showed.

use std::io::{self, Write};

use crate::bench::fast24::{Fast24Report, Row};

fn real_ratio(rows: &[Row], r: &Row) -> Option<f64> {
    let c = rows
        .iter()
        .find(|c| c.workload == r.workload && c.state == "contiguous")?;
    match (r.real_mib_s, c.real_mib_s) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn show(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".into(), |v| format!("{v:.digits$}"))
}

pub fn table(w: &mut dyn Write, r: &Fast24Report) -> io::Result<()> {
    writeln!(
        w,
        "{:<17} {:<10} {:>9} {:>6} {:>8} {:>6} {:>8} {:>6} {:>9}",
        "workload", "state", "modeled", "ratio", "real", "ratio", "paper", "ratio", "vs paper"
    )?;
    for row in &r.rows {
        let (m, p) = (row.modeled_ratio, row.paper_ratio);
        let re = real_ratio(&r.rows, row);
        let off = if p > 0.0 {
            format!("{:+.0}%", (m / p - 1.0) * 100.0)
        } else {
            "-".into()
        };
        writeln!(
            w,
            "{:<17} {:<10} {:>9.1} {:>6} {:>8} {:>6} {:>8.1} {:>6} {:>9}",
            row.workload,
            row.state,
            row.modeled_mib_s,
            show(Some(m), 2),
            show(row.real_mib_s, 1),
            show(re, 2),
            row.paper_mib_s,
            show(Some(p), 2),
            off
        )?;
    }
    writeln!(
        w,
        "\nMiB/s (2^20 bytes/s, the paper's unit). modeled: the run's block trace (ext4 with its journal on another device, recorded with the modeled NVMe's queue limits, read phase timed) on the fast24 SSD; approach rows: the fragmented run's trace with the model's approach. real: the loop device (hypothetical approach rows: the artifact's pseudo approach). paper: fast24_ae README results.{}",
        if r.quick { " --quick: SQLite 1000 records, fileserver 1000 files." } else { "" }
    )?;
    writeln!(w, "\nruns:")?;
    for run in &r.runs {
        writeln!(
            w,
            "  {:<32} {:>5} fragments; real {:>8.1} MB/s; modeled {:>7.1} MB/s, {:>5} collisions ({:>7.1} MB/s, {:>5} with the approach); {} requests, {} events lost",
            run.name,
            run.fragments,
            run.read.mb_s,
            run.write_order.read_mb_s,
            run.write_order.collisions,
            run.approach.read_mb_s,
            run.approach.collisions,
            run.requests,
            run.dropped_events
        )?;
    }
    Ok(())
}

pub fn csv(w: &mut dyn Write, r: &Fast24Report) -> io::Result<()> {
    writeln!(
        w,
        "workload,state,modeled_mib_s,real_mib_s,paper_mib_s,modeled_ratio,paper_ratio"
    )?;
    for row in &r.rows {
        writeln!(
            w,
            "{},{},{},{},{},{},{}",
            row.workload,
            row.state,
            row.modeled_mib_s,
            row.real_mib_s.map_or(String::new(), |v| v.to_string()),
            row.paper_mib_s,
            row.modeled_ratio,
            row.paper_ratio
        )?;
    }
    Ok(())
}
