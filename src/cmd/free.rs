//! `fragkit free MOUNTPOINT`

use anyhow::Result;

use crate::cli::{FreeArgs, FreeFormat};
use crate::freespace;
use crate::report::free as out;

pub fn run(args: FreeArgs) -> Result<i32> {
    let view = freespace::free_space(&args.mountpoint)?;
    crate::report::to_stdout(|w| match args.format {
        FreeFormat::Table => out::write_table(w, &view, args.all_groups),
        FreeFormat::Json => out::write_json(w, &view),
        FreeFormat::Csv => out::write_csv(w, &view, args.groups),
    })?;
    Ok(0)
}
