//! fragkit: measure, watch, reproduce, explain and fix file fragmentation on Linux.
//!
//! The binary's own layers are here: `cli` (clap definitions), `cmd` (one function per
//! subcommand) and `report` (all printing). The engines live in the workspace's crates,
//! re-exported under their old module names for the integration tests and the benches.

// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod cli;
pub mod cmd;
pub mod report;

pub use fragkit_core::{
    device, freespace, hdd, io, layout, metrics, scan, scratch, ssd, stats, units,
};
pub use fragkit_defrag as defrag;
pub use fragkit_lab::{age, bench, cluster, lab};
pub use fragkit_render as render;
pub use fragkit_sys as sys;
pub use fragkit_trace as trace;
#[cfg(feature = "watch")]
pub use fragkit_watch as watch;
