//! `fragkit ssd TRACE [--model PRESET|g,S] [--approach] [--queue-depth N] [--readers N]`

use std::io::{self, BufWriter, Write};

use anyhow::{bail, Result};

use crate::cli::{ReportFormat, SsdArgs};
use crate::report::ssd as out;
use crate::ssd::params::PRESETS;
use crate::ssd::{BlockTrace, Params, Placement, Ssd};

/// Model parameters from `--model` and `--queue-depth`: one-line errors.
pub(crate) fn model_params(spec: &str, queue_depth: Option<u32>) -> Result<Params> {
    let mut p = Params::parse(spec)?;
    if let Some(q) = queue_depth {
        p.queue_depth = q;
    }
    p.validate()?;
    Ok(p)
}

pub fn run(args: SsdArgs) -> Result<i32> {
    let stdout = io::stdout();
    let mut w = BufWriter::new(stdout.lock());
    let written = if args.presets {
        let all: Vec<Params> = PRESETS
            .iter()
            .map(|n| Params::parse(n))
            .collect::<Result<_, _>>()?;
        match args.format {
            ReportFormat::Table => all.iter().try_for_each(|p| writeln!(w, "{p}")),
            ReportFormat::Json => writeln!(w, "{}", serde_json::to_string_pretty(&all)?),
        }
    } else {
        let p = model_params(&args.model, args.queue_depth)?;
        let path = args.trace.expect("clap requires TRACE without --presets");
        let trace = BlockTrace::load(&path)?;
        let placement = if args.approach {
            Placement::Approach
        } else {
            Placement::WriteOrder
        };
        let report = match args.readers {
            Some(n) => Ssd::replay_closed(&p, placement, &trace.requests, 0, n)?,
            None => Ssd::replay(&p, placement, &trace.requests)?,
        };
        match args.format {
            ReportFormat::Table => out::write_table(&mut w, &p, &trace, &report),
            ReportFormat::Json => out::write_json(&mut w, &p, &trace, &report),
        }
    };
    match written.and_then(|_| w.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => bail!("writing output: {e}"),
    }
}
