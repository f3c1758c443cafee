//! Turning results into text for people and machines.

pub mod bench;
pub mod bench_runs;
pub mod filefrag;
pub mod free;
pub mod ior;
pub mod lab;
pub mod probe;
pub mod progress;
pub mod scan;
pub mod watch;
