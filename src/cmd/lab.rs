//! `fragkit lab`

use anyhow::{bail, Result};

use crate::cli::{InfoFormat, LabArgs};
use crate::lab::{self, LabSpec};

pub fn run(a: LabArgs) -> Result<i32> {
    if let Some(dir) = &a.report_only {
        let mut report = lab::report_from_dir(dir)?;
        let out = dir.canonicalize()?;
        crate::report::lab::write_all(&out, &mut report)?;
        crate::report::to_stdout(|w| match a.format {
            InfoFormat::Json => crate::report::write_json_pretty(w, &report),
            InfoFormat::Table => crate::report::lab::write_summary(w, &report, &out),
        })?;
        return Ok(0);
    }
    if a.size < 256 << 20 {
        bail!(
            "--size {}: expected at least 256M (the lab fills it, clones it and measures reads)",
            crate::units::HumanBytes(a.size)
        );
    }
    let spec = LabSpec {
        fs: a.fs,
        size: a.size,
        workload: a.workload,
        out: a.out.clone(),
        files: a.files,
        paf: a.paf.unwrap_or_else(|| {
            match a.app {
                Some(crate::lab::app::App::Sqlite) => "none",
                _ => "PAF:85.50@64K",
            }
            .to_string()
        }),
        iterations: a.iterations,
        baseline: !a.no_baseline,
        keep: a.keep,
        scratch_dir: a.scratch_dir,
        seed: a.seed,
    };
    if let Some(app) = a.app {
        let io_limit = lab::app::IoLimit::parse(&a.io_limit).map_err(anyhow::Error::msg)?;
        let spec = lab::app::AppSpec {
            lab: spec,
            app,
            rounds: a.rounds,
            io_limit,
            pin: !a.no_pin,
            database_from: a.database_from,
        };
        let mut report = lab::app::run(&spec)?;
        let out = spec.lab.out.canonicalize().unwrap_or(spec.lab.out.clone());
        crate::report::lab_app::write_all(&out, &mut report)?;
        crate::report::to_stdout(|w| match a.format {
            InfoFormat::Json => crate::report::write_json_pretty(w, &report),
            InfoFormat::Table => crate::report::lab_app::write_summary(w, &report, &out),
        })?;
        return Ok(0);
    }
    let mut report = lab::run(&spec)?;
    let out = a.out.canonicalize().unwrap_or(a.out);
    crate::report::lab::write_all(&out, &mut report)?;
    crate::report::to_stdout(|w| match a.format {
        InfoFormat::Json => crate::report::write_json_pretty(w, &report),
        InfoFormat::Table => crate::report::lab::write_summary(w, &report, &out),
    })?;
    Ok(0)
}
