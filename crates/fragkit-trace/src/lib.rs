//! `fragkit trace`: which byte ranges of which files an application really reads and writes.
//!
//! bpf/fileio.bpf.c (syscall tracepoints, CO-RE) → loader.rs (load, attach, drain the ring
//! buffer) → collect.rs (per-file accesses, paths) → ranges.rs (align, readahead, merge,
//! hotness) → profile.rs (the JSON profile `fragkit defrag --profile` reads).
//!
//! Traced: read, write, pread64, pwrite64, readv, writev, preadv, pwritev, preadv2,
//! pwritev2 on regular files. Not traced: io_uring, mmap page faults, sendfile,
//! copy_file_range, splice, AIO (io_submit).

// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

/// What the tracer cannot see, said wherever its numbers are shown (`--help`, summaries):
/// I/O through these paths never reaches the traced syscalls, so a profile undercounts it.
pub(crate) const NOT_TRACED: &str =
    "mmap page faults, io_uring, AIO (io_submit), sendfile, splice and copy_file_range";

/// The error every tracing entry point returns in a build without the `bpf` feature.
#[cfg(not(feature = "bpf"))]
pub(crate) fn without_bpf() -> anyhow::Error {
    anyhow::anyhow!(
        "this fragkit was built without eBPF tracing (the `bpf` feature); rebuild with it: cargo install --locked --path . --features bpf"
    )
}

pub mod block;
pub mod collect;
pub mod loader;
pub mod profile;
pub mod ranges;
pub mod resolve;
pub mod summary;
