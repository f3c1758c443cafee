//! The I/O engine behind `fragkit bench` and `fragkit probe`: aligned buffers, engines
//! (io_uring, pread/pwrite), the job driver, and the device's own counters.
//!
//! Other commands (sweeps, DoF, the PaF matrix, the lab) run jobs through [`run_job`]:
//!
//! ```no_run
//! use fragkit::io::{run_job, JobSpec, Op};
//! let mut spec = JobSpec::new("/mnt/scratch/file", Op::Read); // 128K, QD1, seq, O_DIRECT
//! spec.iterations = 5;
//! let result = run_job(&spec)?;
//! let device_reads = result.iterations[0].device.map(|d| d.reads);
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod buf;
pub mod device;
pub mod engine;
pub mod job;
pub mod mapping;
pub(crate) mod uring;

pub use device::{BlockDevice, DeviceDelta};
pub use engine::{EngineKind, Op};
pub use job::{
    drop_caches, planned_requests, run_job, run_job_observed, JobResult, JobSpec, Pattern, Segments,
};
