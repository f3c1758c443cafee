//! Turning results into text for people and machines.

pub mod advise;
pub mod age;
pub mod bench;
pub(crate) mod bench_runs;
pub mod defrag;
pub mod fast24;
pub mod filefrag;
pub mod fragpicker;
pub mod free;
pub mod ior;
pub mod lab;
pub mod lab_app;
pub mod map;
pub mod probe;
pub mod progress;
pub mod scan;
pub mod scratch;
pub mod ssd;
pub mod trace;
#[cfg(feature = "watch")]
pub mod watch;

use std::io::{self, Write};

use anyhow::Context;

/// Buffered standard output, as report writers get it.
pub(crate) type Stdout = io::BufWriter<RawStdout>;

/// File descriptor 1 written directly, holding std's lock so nothing else writes between.
/// std's stdout is line-buffered: every 64 KiB chunk the buffer hands it is searched for
/// its last newline first, which was 6% of a 100k-file `scan --format json` (callgrind).
pub(crate) struct RawStdout {
    lock: io::StdoutLock<'static>,
}

impl Write for RawStdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        fragkit_sys::rw::write(std::os::fd::AsFd::as_fd(&self.lock), buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Write a report to stdout through one buffer. A closed pipe (`fragkit scan | head`)
/// comes back as an error like any other; main tells it apart and exits quietly.
pub(crate) fn to_stdout(f: impl FnOnce(&mut Stdout) -> io::Result<()>) -> anyhow::Result<()> {
    let mut lock = io::stdout().lock();
    // Whatever was printed before goes out first.
    lock.flush().context("writing output")?;
    let mut w = io::BufWriter::with_capacity(1 << 16, RawStdout { lock });
    f(&mut w).and_then(|_| w.flush()).context("writing output")
}

/// Pretty JSON and a newline.
pub(crate) fn write_json_pretty<T: serde::Serialize>(w: &mut dyn Write, v: &T) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, v)?;
    writeln!(w)
}
