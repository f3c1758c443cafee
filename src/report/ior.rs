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

/// IOR's "Summary of all tests" columns (operation, max/min/mean MiB/s, stddev, mean
/// seconds, xfer, block, tasks, tasks per node, repetitions, file per process, reorder),
/// then each rank's fragments after its last write.
pub fn table(w: &mut dyn Write, r: &IorReport) -> io::Result<()> {
    let fpp = matches!(r.layout, crate::bench::ior::IorLayout::FilePerProcess) as u8;
    writeln!(
        w,
        "bench ior: {} tasks ({} per node), {}, block {}, {}{}; reads shifted by {} rank(s)",
        r.tasks,
        r.tasks_per_node,
        if fpp == 1 {
            "file per process"
        } else {
            "shared file"
        },
        short_size(r.block),
        if r.direct { "O_DIRECT" } else { "buffered" },
        if r.fsync {
            ", fsync at the end of each write phase (IOR -e)"
        } else {
            ""
        },
        r.read_shift
    )?;
    writeln!(w, "Summary of all tests:")?;
    writeln!(
        w,
        "{:<9} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8} {:>8} {:>6} {:>4} {:>4} {:>3} {:>5}",
        "Operation",
        "Max(MiB)",
        "Min(MiB)",
        "Mean(MiB)",
        "StdDev",
        "Mean(s)",
        "xsize",
        "blksiz",
        "#Tasks",
        "tPN",
        "reps",
        "fPP",
        "reord"
    )?;
    for s in &r.summary {
        writeln!(
            w,
            "{:<9} {:>10.2} {:>10.2} {:>10.2} {:>9.2} {:>9.4} {:>8} {:>8} {:>6} {:>4} {:>4} {:>3} {:>5}",
            s.op,
            s.max_mib_per_s,
            s.min_mib_per_s,
            s.mean_mib_per_s,
            s.stddev_mib_per_s,
            s.mean_seconds,
            short_size(s.xfer),
            short_size(s.block),
            s.tasks,
            s.tasks_per_node,
            s.iterations,
            fpp,
            (r.read_shift > 0) as u8
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
