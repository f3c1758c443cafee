//! `bench fragpicker`'s table and CSV, in the shape of FragPicker's view_result.sh: one
//! line per workload and file with its MB/s (mean of the runs, as FragPicker averages)
//! and the device requests that show whether each request reached the device whole.

use std::io::{self, Write};

use crate::bench::fragpicker::FragPickerReport;

pub fn table(w: &mut dyn Write, r: &FragPickerReport) -> io::Result<()> {
    writeln!(
        w,
        "FragPicker's read/update suite: {} KiB O_DIRECT requests at QD 1, stride gap {} KiB; MB/s = 10^6 bytes/s, mean of {} runs after {} unmeasured (its run_benchmark.sh)",
        r.request_size >> 10,
        r.stride_gap >> 10,
        r.runs,
        r.warmup
    )?;
    writeln!(
        w,
        "{:<14} {:<13} {:>9} {:>11} {:>10}  {:<22} file",
        "workload", "program", "requests", "device_req", "MB/s", "median (min–max)"
    )?;
    for row in &r.rows {
        writeln!(
            w,
            "{:<14} {:<13} {:>9} {:>11} {:>10.1}  {:<22} {}",
            row.workload.name(),
            row.program,
            row.requests,
            row.device_requests
                .map_or("-".to_string(), |d| format!("{d:.0}")),
            row.mb_per_s_mean,
            format!(
                "{:.1} ({:.1}–{:.1})",
                row.mb_per_s_median, row.mb_per_s_min, row.mb_per_s_max
            ),
            row.path.display()
        )?;
    }
    Ok(())
}

pub fn csv(w: &mut dyn Write, r: &FragPickerReport) -> io::Result<()> {
    let mut c = csv::Writer::from_writer(w);
    c.write_record([
        "workload",
        "program",
        "path",
        "size",
        "request_size",
        "stride_gap",
        "requests",
        "device_requests",
        "runs",
        "mb_per_s_mean",
        "mb_per_s_median",
        "mb_per_s_min",
        "mb_per_s_max",
    ])?;
    for row in &r.rows {
        c.write_record([
            row.workload.name().to_string(),
            row.program.to_string(),
            row.path.display().to_string(),
            row.size.to_string(),
            r.request_size.to_string(),
            r.stride_gap.to_string(),
            row.requests.to_string(),
            row.device_requests
                .map_or(String::new(), |d| format!("{d:.1}")),
            r.runs.to_string(),
            format!("{:.3}", row.mb_per_s_mean),
            format!("{:.3}", row.mb_per_s_median),
            format!("{:.3}", row.mb_per_s_min),
            format!("{:.3}", row.mb_per_s_max),
        ])?;
    }
    c.flush()
}
