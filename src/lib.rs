//! fragkit: measure, watch, reproduce, explain and fix file fragmentation on Linux.
//!
//! Data flows layout (what is on disk) → metrics (what it costs) → report (what to say).

pub mod cli;
pub mod cmd;
pub mod layout;
pub mod metrics;
pub mod report;
pub mod scan;
pub mod scratch;
pub mod serve;
pub mod store;
pub mod units;
pub mod watch;
