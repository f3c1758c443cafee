//! The I/O engine behind `fragkit bench` and `fragkit probe`: aligned buffers, engines
//! (io_uring, pread/pwrite), the job driver, and the device's own counters.

pub mod buf;
pub mod device;
pub mod engine;
pub mod job;
pub mod uring;

pub use device::{BlockDevice, DeviceDelta, DeviceStats, QueueLimits};
pub use engine::{EngineKind, Op};
pub use job::{drop_caches, run_job, run_job_observed, JobResult, JobSpec, Pattern};
