//! fragkit: measure, watch, reproduce, explain and fix file fragmentation on Linux.
//!
//! Data flows layout (what is on disk) → metrics (what it costs) → report (what to say).

pub mod age;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod cmd;
pub mod defrag;
pub mod freespace;
pub mod io;
pub mod lab;
pub mod layout;
pub mod metrics;
pub mod render;
pub mod report;
pub mod scan;
pub mod scratch;
pub mod ssd;
pub mod stats;
pub mod sys;
pub mod trace;
pub mod units;
pub mod watch;
