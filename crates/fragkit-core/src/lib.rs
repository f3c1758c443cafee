//! What is on disk and what it costs: extent maps and the tree walk (`layout`), the
//! fragmentation metrics (`metrics`), free space, the scan engine, the I/O engine (`io`),
//! scratch file systems, and the SSD model (`ssd`) and disk model (`hdd`) that price a layout
//! on flash and on a rotating disk.

// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod device;
pub mod freespace;
pub mod hdd;
pub mod io;
pub mod layout;
pub mod limits;
pub mod metrics;
pub mod scan;
pub mod scratch;
pub mod ssd;
pub mod stats;
pub mod units;
