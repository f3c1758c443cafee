//! `bench fast24`'s table and CSV: each row's MB/s and its ratio to the workload's
//! contiguous row, modeled / real / paper, then what each recorded run showed.

use std::io::{self, Write};

use crate::bench::fast24::{Fast24Report, Row};

fn ratio(rows: &[Row], r: &Row, f: impl Fn(&Row) -> Option<f64>) -> Option<f64> {
    let c = rows
        .iter()
        .find(|c| c.workload == r.workload && c.state == "contiguous")?;
    match (f(r), f(c)) {
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
        let m = ratio(&r.rows, row, |x| Some(x.modeled_mb_s));
        let re = ratio(&r.rows, row, |x| x.real_mb_s);
        let p = ratio(&r.rows, row, |x| Some(x.paper_mb_s));
        let off = match (m, p) {
            (Some(m), Some(p)) if p > 0.0 => format!("{:+.0}%", (m / p - 1.0) * 100.0),
            _ => "-".into(),
        };
        writeln!(
            w,
            "{:<17} {:<10} {:>9.1} {:>6} {:>8} {:>6} {:>8.1} {:>6} {:>9}",
            row.workload,
            row.state,
            row.modeled_mb_s,
            show(m, 2),
            show(row.real_mb_s, 1),
            show(re, 2),
            row.paper_mb_s,
            show(p, 2),
            off
        )?;
    }
    writeln!(
        w,
        "\nMB/s = 10^6 bytes/s. modeled: the run's block trace (ext4 journal dropped, read phase timed) on the fast24 SSD; approach rows: the fragmented run's trace with the model's approach. real: the loop device (hypothetical approach rows: the artifact's pseudo approach). paper: fast24_ae README results.{}",
        if r.quick { " --quick: SQLite 1000 records, fileserver 1000 files." } else { "" }
    )?;
    writeln!(w, "\nruns:")?;
    for run in &r.runs {
        writeln!(
            w,
            "  {:<32} {:>5} fragments; real {:>8.1} MB/s; modeled {:>7.1} MB/s, {:>5} collisions ({:>7.1} MB/s, {:>5} with the approach); {} requests, {} journal requests dropped, {} events lost",
            run.name,
            run.fragments,
            run.read.mb_s,
            run.write_order.read_mb_s,
            run.write_order.collisions,
            run.approach.read_mb_s,
            run.approach.collisions,
            run.requests,
            run.journal_requests_dropped,
            run.dropped_events
        )?;
    }
    Ok(())
}

pub fn csv(w: &mut dyn Write, r: &Fast24Report) -> io::Result<()> {
    writeln!(w, "workload,state,modeled_mb_s,real_mb_s,paper_mb_s")?;
    for row in &r.rows {
        writeln!(
            w,
            "{},{},{},{},{}",
            row.workload,
            row.state,
            row.modeled_mb_s,
            row.real_mb_s.map_or(String::new(), |v| v.to_string()),
            row.paper_mb_s
        )?;
    }
    Ok(())
}
