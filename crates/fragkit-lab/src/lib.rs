//! The research harness: fragmentation on purpose (`age`), the seeds' experiments as
//! benchmarks (`bench`), the end-to-end lab (`lab`), and MPI ranks (`cluster`).

// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod age;
pub mod bench;
pub mod cluster;
pub mod lab;
