//! `fragkit trace`: which byte ranges of which files an application really reads and writes.
//!
//! bpf/fileio.bpf.c (syscall tracepoints, CO-RE) → loader.rs (load, attach, drain the ring
//! buffer) → collect.rs (per-file accesses, paths) → ranges.rs (align, readahead, merge,
//! hotness) → profile.rs (the JSON profile `fragkit defrag --profile` reads).
//!
//! Traced: read, write, pread64, pwrite64, readv, writev, preadv, pwritev, preadv2,
//! pwritev2 on regular files. Not traced: io_uring, mmap page faults, sendfile,
//! copy_file_range, splice, AIO (io_submit).

pub mod collect;
pub mod loader;
pub mod profile;
pub mod ranges;
pub mod resolve;
pub mod summary;
