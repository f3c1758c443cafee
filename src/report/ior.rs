//! `bench ior` output: IOR's summary table, JSON, and CSV with one row per iteration.

use std::io::{self, Write};

use crate::bench::ior::IorReport;
use crate::units::short_size;

pub fn json(w: &mut dyn Write, r: &IorReport) -> io::Result<()> {
    super::write_json_pretty(w, r)
}

pub fn csv(w: &mut dyn Write, r: &IorReport) -> io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    for row in &r.iterations {
        c.serialize(row).map_err(io::Error::other)?;
    }
    c.flush()
}

/// Bytes as IOR's Options block writes them: whole GiB or MiB, else bytes.
fn ior_size(x: u64) -> String {
    const MIB: u64 = 1 << 20;
    if x >= 1 << 30 && x.is_multiple_of(1 << 30) {
        format!("{} GiB", x >> 30)
    } else if x >= MIB && x.is_multiple_of(MIB) {
        format!("{} MiB", x / MIB)
    } else {
        format!("{x} bytes")
    }
}

/// A Results-table number as IOR prints it (PPDouble): left-aligned in 10 columns, six
/// decimals below 1, two below 3600, none from there on.
fn pp(x: f64) -> String {
    let decimals = if x < 1.0 {
        6
    } else if x < 3600.0 {
        2
    } else {
        0
    };
    format!("{x:<10.decimals$} ")
}

/// This machine's name, as IOR's "Machine" line gives it: uname's system and node name.
fn machine() -> String {
    nix::sys::utsname::uname().map_or_else(
        |_| String::new(),
        |u| {
            format!(
                "{} {}",
                u.sysname().to_string_lossy(),
                u.nodename().to_string_lossy()
            )
        },
    )
}

/// IOR's output: the header and Options block, the Results table (one row per phase of
/// each iteration), "Summary of all tests" with every column in IOR's order, widths and
/// units, and "Finished"; then fragkit's own lines (what IOR does not measure: each
/// rank's fragments after its last write).
pub fn table(w: &mut dyn Write, r: &IorReport) -> io::Result<()> {
    use crate::bench::ior::ReadOrder;
    let fpp = matches!(r.layout, crate::bench::ior::IorLayout::FilePerProcess) as u8;
    // IOR's reord, reordoff (-Q), reordrand and seed columns.
    let (reord, reordoff, reordrand, seed) = match r.order {
        ReadOrder::Own => (0, 1, 0, 0),
        ReadOrder::Constant { nodes } => (1, nodes, 0, 0),
        ReadOrder::Random { nodes, seed } => (0, nodes, 1, seed),
    };
    let began = crate::units::utc(r.began);
    let line = |w: &mut dyn Write, k: &str, v: &dyn std::fmt::Display| writeln!(w, "{k:<20}: {v}");
    writeln!(
        w,
        "fragkit-{} bench ior: MPI Coordinated Test of Parallel I/O (IOR's output)",
        env!("CARGO_PKG_VERSION")
    )?;
    line(w, "Began", &format!("{began} UTC"))?;
    let args: Vec<String> = std::env::args().collect();
    line(w, "Command line", &args.join(" "))?;
    line(w, "Machine", &machine())?;
    line(w, "TestID", &0)?;
    line(w, "StartTime", &format!("{began} UTC"))?;
    line(w, "Path", &r.dir.display())?;
    writeln!(w)?;
    writeln!(w, "Options: ")?;
    line(w, "api", &"POSIX")?;
    line(w, "apiVersion", &"")?;
    let file = if fpp == 1 { "ior" } else { "ior.shared" };
    line(w, "test filename", &r.dir.join(file).display())?;
    line(
        w,
        "access",
        &if fpp == 1 {
            "file-per-process"
        } else {
            "single-shared-file"
        },
    )?;
    line(w, "type", &"independent")?;
    line(w, "segments", &r.segments)?;
    line(
        w,
        "ordering in a file",
        &if r.random_offsets {
            "random"
        } else {
            "sequential"
        },
    )?;
    match r.order {
        ReadOrder::Own => line(w, "ordering inter file", &"no tasks offsets")?,
        ReadOrder::Constant { .. } => {
            line(w, "ordering inter file", &"constant task offset")?;
            line(w, "task offset", &r.read_shift)?;
        }
        ReadOrder::Random { seed, .. } => {
            line(w, "ordering inter file", &"random task offset")?;
            line(w, "reorder random seed", &seed)?;
        }
    }
    line(w, "nodes", &r.nodes)?;
    line(w, "tasks", &r.tasks)?;
    line(w, "clients per node", &r.tasks_per_node)?;
    let reps = r.summary.first().map_or(0, |s| s.iterations);
    line(w, "repetitions", &reps)?;
    let xfers: Vec<String> = r.xfers.iter().map(|&x| ior_size(x)).collect();
    line(w, "xfersize", &xfers.join(", "))?;
    line(w, "blocksize", &ior_size(r.block))?;
    line(
        w,
        "aggregate filesize",
        &ior_size(r.block * r.segments * r.tasks as u64),
    )?;
    if let Some(d) = r.deadline {
        line(w, "stonewallingTime", &d)?;
    }
    if r.direct {
        line(w, "O_DIRECT", &"yes (--direct)")?;
    }
    if r.fsync {
        line(
            w,
            "fsync",
            &"at the end of each write phase, timed in it (IOR -e)",
        )?;
    }
    writeln!(w)?;
    writeln!(w, "Results: ")?;
    writeln!(w)?;
    // The column names, then each underlined with as many dashes as IOR prints.
    let names = [
        "access",
        "bw(MiB/s)",
        "IOPS",
        "Latency(s)",
        "block(KiB)",
        "xfer(KiB)",
        "open(s)",
        "wr/rd(s)",
        "close(s)",
        "total(s)",
        "iter",
    ];
    let dashes = [6, 9, 4, 10, 10, 9, 8, 8, 8, 8, 4].map(|n| "-".repeat(n));
    for row in [names.map(String::from), dashes] {
        writeln!(
            w,
            "{:<9} {:<10} {:<10} {:<11} {:<10} {:<10} {:<10} {:<10} {:<10} {:<10} {:<4}",
            row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9], row[10]
        )?;
    }
    for it in &r.iterations {
        write!(w, "{:<10}", it.op)?;
        write!(w, "{}{}", pp(it.mib_per_s), pp(it.iops))?;
        // Latency is one column wider (IOR's header gives it 11).
        write!(w, "{:<11.6} ", it.latency_seconds)?;
        for v in [
            it.block as f64 / 1024.0,
            it.xfer as f64 / 1024.0,
            it.open_seconds,
            it.data_seconds,
            it.close_seconds,
            it.seconds,
        ] {
            write!(w, "{}", pp(v))?;
        }
        writeln!(w, "{:<4}", it.iteration)?;
    }
    writeln!(w)?;
    writeln!(w, "Summary of all tests:")?;
    writeln!(
        w,
        "{:<9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} Stonewall(s) Stonewall(MiB) Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt {:>8} {:>8} {:>9} {:>5} RefNum",
        "Operation",
        "Max(MiB)",
        "Min(MiB)",
        "Mean(MiB)",
        "StdDev",
        "Max(OPs)",
        "Min(OPs)",
        "Mean(OPs)",
        "StdDev",
        "Mean(s)",
        " blksiz",
        "xsize",
        "aggs(MiB)",
        "API"
    )?;
    for s in &r.summary {
        let test = r.xfers.iter().position(|&x| x == s.xfer).unwrap_or(0);
        writeln!(
            w,
            "{:<9} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.5} {:>10} {:>13} {:>5} {:>6} {:>3} {:>4} {:>3} {:>5} {:>8} {:>9} {:>4} {:>6} {:>8} {:>8} {:>9.1} {:>5} {:>6}",
            s.op,
            s.max_mib_per_s,
            s.min_mib_per_s,
            s.mean_mib_per_s,
            s.stddev_mib_per_s,
            s.max_ops,
            s.min_ops,
            s.mean_ops,
            s.stddev_ops,
            s.mean_seconds,
            "NA",
            "NA",
            test,
            s.tasks,
            s.tasks_per_node,
            s.iterations,
            fpp,
            reord,
            reordoff,
            reordrand,
            seed,
            r.segments,
            s.block,
            s.xfer,
            s.aggregate_bytes as f64 / (1u64 << 20) as f64,
            "POSIX",
            0
        )?;
    }
    line(
        w,
        "Finished",
        &format!("{} UTC", crate::units::utc(r.finished)),
    )?;
    writeln!(w)?;
    let reads = match r.order {
        ReadOrder::Own => "each rank read its own data".to_string(),
        ReadOrder::Constant { .. } => format!("reads shifted by {} rank(s)", r.read_shift),
        ReadOrder::Random { .. } => "each rank read a random rank's data".to_string(),
    };
    writeln!(
        w,
        "fragkit: {}, {}; {reads}; Nodemap {} ({})",
        if r.direct { "O_DIRECT" } else { "buffered" },
        if r.fsync {
            "fsync at the end of each write phase (IOR -e)"
        } else {
            "no fsync (IOR without -e)"
        },
        r.node_map,
        if r.by_slot { "by slot" } else { "round robin" }
    )?;
    let own: usize = r
        .iterations
        .iter()
        .map(|i| i.own_node_reads)
        .max()
        .unwrap_or(0);
    if own > 0 {
        writeln!(
            w,
            "fragkit: in some iterations up to {own} of {} ranks read data written on their own node",
            r.tasks
        )?;
    }
    for i in r.iterations.iter().filter(|i| i.bytes < i.planned_bytes) {
        writeln!(
            w,
            "fragkit: {} xsize {} iteration {}: stopped at the deadline after {} of {} bytes (ranks moved {} to {})",
            i.op,
            short_size(i.xfer),
            i.iteration,
            i.bytes,
            i.planned_bytes,
            i.rank_bytes_min,
            i.rank_bytes_max
        )?;
    }
    if let Some(last) = r.fragments.last() {
        let lasts: Vec<String> = r
            .fragments
            .iter()
            .filter(|f| f.xfer == last.xfer && f.iteration == last.iteration)
            .map(|f| format!("rank {}: {}", f.rank, f.fragments))
            .collect();
        writeln!(
            w,
            "fragments after the last write (xsize {}): {}",
            short_size(last.xfer),
            lasts.join(", ")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::ior::{IorIteration, IorLayout, IorSummary};
    use std::collections::HashMap;

    /// IOR's own output from a one-task run (public IOR 4 example), as a parser reads it.
    const IOR_SAMPLE: &str = "\
Results:

access    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)   close(s)   total(s)   iter
------    ---------  ----       ----------  ---------- ---------  --------   --------   --------   --------   ----
write     584.49     4094       0.000244    1024.00    256.00     0.000515   0.000977   0.000219   0.001711   0
read      2041.02    38836      0.000026    1024.00    256.00     0.000210   0.000103   0.000177   0.000490   0

Summary of all tests:
Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs)   Min(OPs)  Mean(OPs)     StdDev    Mean(s) Stonewall(s) Stonewall(MiB) Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt   blksiz    xsize aggs(MiB)   API RefNum
write         584.49     584.49     584.49       0.00    2337.96    2337.96    2337.96       0.00    0.00171         NA            NA     0      1   1    1   0     0        1         0    0      1  1048576   262144       1.0 POSIX      0
read         2041.02    2041.02    2041.02       0.00    8164.10    8164.10    8164.10       0.00    0.00049         NA            NA     0      1   1    1   0     0        1         0    0      1  1048576   262144       1.0 POSIX      0
Finished            : Tue May  9 12:14:07 2023
";

    /// The rules tools that read IOR's output follow: the table after a line starting with
    /// `title`, a header of whitespace-separated names, then rows of as many
    /// whitespace-separated values (a dashes line skipped), up to the first line that does
    /// not have that many.
    fn parse_table(text: &str, title: &str) -> (Vec<String>, Vec<HashMap<String, String>>) {
        let mut lines = text.lines().skip_while(|l| !l.starts_with(title)).skip(1);
        let header: Vec<String> = lines
            .by_ref()
            .find(|l| !l.trim().is_empty())
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect();
        let mut rows = Vec::new();
        for l in lines {
            let v: Vec<&str> = l.split_whitespace().collect();
            if v.first().is_some_and(|f| f.starts_with("---")) {
                continue;
            }
            if v.len() != header.len() {
                break;
            }
            rows.push(
                header
                    .iter()
                    .cloned()
                    .zip(v.iter().map(|s| s.to_string()))
                    .collect(),
            );
        }
        (header, rows)
    }

    fn report() -> IorReport {
        let it = |op: &str, iteration, mib: f64| IorIteration {
            op: op.into(),
            xfer: 1 << 20,
            iteration,
            tasks: 2,
            block: 64 << 20,
            bytes: 128 << 20,
            planned_bytes: 128 << 20,
            rank_bytes_min: 64 << 20,
            rank_bytes_max: 64 << 20,
            seconds: 128.0 / mib,
            mib_per_s: mib,
            rank_seconds_min: 0.0,
            rank_seconds_max: 128.0 / mib,
            open_seconds: 0.000_3,
            data_seconds: 0.1,
            close_seconds: 0.002,
            transfers: 128,
            iops: 1280.0,
            latency_seconds: 0.1 / 64.0,
            own_node_reads: 0,
        };
        let sum = |op: &str, mib: f64| IorSummary {
            op: op.into(),
            max_mib_per_s: mib,
            min_mib_per_s: mib,
            mean_mib_per_s: mib,
            stddev_mib_per_s: 0.0,
            mean_seconds: 128.0 / mib,
            max_ops: mib,
            min_ops: mib,
            mean_ops: mib,
            stddev_ops: 0.0,
            xfer: 1 << 20,
            block: 64 << 20,
            tasks: 2,
            tasks_per_node: 2,
            iterations: 1,
            aggregate_bytes: 128 << 20,
        };
        IorReport {
            version: 1,
            dir: "/mnt/ior".into(),
            tasks: 2,
            tasks_per_node: 2,
            nodes: 1,
            by_slot: true,
            node_map: "11".into(),
            layout: IorLayout::FilePerProcess,
            direct: true,
            fsync: false,
            block: 64 << 20,
            segments: 1,
            random_offsets: false,
            deadline: None,
            xfers: vec![1 << 20],
            order: crate::bench::ior::ReadOrder::Constant { nodes: 1 },
            read_shift: 1,
            read_plans: Vec::new(),
            iterations: vec![it("write", 0, 1234.5), it("read", 0, 5678.25)],
            summary: vec![sum("write", 1234.5), sum("read", 5678.25)],
            fragments: Vec::new(),
            began: 0.0,
            finished: 1.0,
        }
    }

    /// fragkit's text reads with the rules that read IOR's: the same columns in the same
    /// order, every row as wide as its header, the values where IOR puts them.
    #[test]
    fn ior_parsers_read_fragkits_output() {
        let mut out = Vec::new();
        table(&mut out, &report()).unwrap();
        let ours = String::from_utf8(out).unwrap();
        for title in ["Summary of all tests:", "Results:"] {
            let (iors_header, iors_rows) = parse_table(IOR_SAMPLE, title);
            let (header, rows) = parse_table(&ours, title);
            assert_eq!(header, iors_header, "{title}\n{ours}");
            assert_eq!((iors_rows.len(), rows.len()), (2, 2), "{title}\n{ours}");
        }
        let (_, rows) = parse_table(&ours, "Summary of all tests:");
        let w = &rows[0];
        assert_eq!(w["Operation"], "write");
        assert_eq!(w["Max(MiB)"], "1234.50");
        assert_eq!(w["#Tasks"], "2");
        assert_eq!(w["fPP"], "1");
        assert_eq!(w["reord"], "1");
        assert_eq!(w["blksiz"], (64u64 << 20).to_string());
        assert_eq!(w["xsize"], (1u64 << 20).to_string());
        assert_eq!(w["aggs(MiB)"], "128.0");
        assert_eq!(w["API"], "POSIX");
        assert_eq!(rows[1]["Mean(MiB)"], "5678.25");
        let (_, results) = parse_table(&ours, "Results:");
        assert_eq!(results[0]["access"], "write");
        assert_eq!(results[0]["bw(MiB/s)"], "1234.50");
        assert_eq!(results[0]["open(s)"], "0.000300");
        assert_eq!(results[1]["iter"], "0");
        // Column positions too: the summary's header and rows line up as IOR's do.
        let line = |text: &str, start: &str| {
            text.lines()
                .find(|l| l.starts_with(start))
                .unwrap()
                .to_string()
        };
        assert_eq!(
            line(&ours, "Operation"),
            line(IOR_SAMPLE, "Operation"),
            "header"
        );
        let ends = |l: &str| -> Vec<usize> {
            l.char_indices()
                .filter(|&(i, c)| c != ' ' && l[i + 1..].starts_with(' '))
                .map(|(i, _)| i)
                .collect()
        };
        let summary_row = |text: &str| {
            let l = line(text, "Operation");
            let after = text.split(l.as_str()).nth(1).unwrap();
            after.lines().nth(1).unwrap().trim_end().to_string()
        };
        assert_eq!(
            ends(&summary_row(&ours)),
            ends(&summary_row(IOR_SAMPLE)),
            "every summary value ends in IOR's column:\n{}\n{}",
            summary_row(&ours),
            summary_row(IOR_SAMPLE)
        );
    }

    #[test]
    fn numbers_are_printed_as_ior_prints_them() {
        assert_eq!(pp(0.000244), "0.000244   ");
        assert_eq!(pp(584.494), "584.49     ");
        assert_eq!(pp(4094.2), "4094       ");
        assert_eq!(ior_size(262_144), "262144 bytes");
        assert_eq!(ior_size(25 << 20), "25 MiB");
        assert_eq!(ior_size(150 << 30), "150 GiB");
    }
}
