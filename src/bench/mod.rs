//! Benchmarks built on the I/O engine: statistics over runs, and the device probes.

pub mod probe;
pub mod stats;
