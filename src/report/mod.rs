//! Turning results into text for people and machines.

pub mod age;
pub mod bench;
pub mod bench_runs;
pub mod defrag;
pub mod fast24;
pub mod filefrag;
pub mod fragpicker;
pub mod free;
pub mod ior;
pub mod lab;
pub mod map;
pub mod probe;
pub mod progress;
pub mod scan;
pub mod scratch;
pub mod ssd;
pub mod trace;
pub mod watch;

use std::io::{self, Write};

use anyhow::Context;

/// Buffered standard output, as report writers get it.
pub type Stdout = io::BufWriter<io::StdoutLock<'static>>;

/// Write a report to stdout through one buffer. A closed pipe (`fragkit scan | head`)
/// comes back as an error like any other; main tells it apart and exits quietly.
pub fn to_stdout(f: impl FnOnce(&mut Stdout) -> io::Result<()>) -> anyhow::Result<()> {
    let mut w = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
    f(&mut w).and_then(|_| w.flush()).context("writing output")
}

/// Pretty JSON and a newline.
pub fn write_json_pretty<T: serde::Serialize>(w: &mut dyn Write, v: &T) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, v)?;
    writeln!(w)
}
