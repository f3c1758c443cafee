//! `fragkit free MOUNTPOINT`

use std::io::{self, BufWriter, Write};

use anyhow::{bail, Result};

use crate::cli::{FreeArgs, FreeFormat};
use crate::freespace;
use crate::report::free as out;

pub fn run(args: FreeArgs) -> Result<i32> {
    let view = freespace::free_space(&args.mountpoint)?;
    let stdout = io::stdout();
    let mut w = BufWriter::new(stdout.lock());
    let written = match args.format {
        FreeFormat::Table => out::write_table(&mut w, &view, args.all_groups),
        FreeFormat::Json => out::write_json(&mut w, &view),
        FreeFormat::Csv => out::write_csv(&mut w, &view, args.groups),
    };
    match written.and_then(|_| w.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => bail!("writing output: {e}"),
    }
}
