//! Integration tests on real loop-mounted file systems (ext4, xfs, btrfs): they need root for
//! loop devices, mkfs and mount (scripts/test runs them as root).
//! One test binary per kind of test (each module was its own binary before): Cargo
//! links three binaries instead of one per file.
//! The suite covers the whole product, so it is built with the default features (tracing,
//! watch, charts) and MPI where enabled; without them it compiles to nothing.
#![cfg(all(feature = "bpf", feature = "watch", feature = "plot"))]

#[path = "../shared/mod.rs"]
mod common;

mod advise;
mod age_layout;
mod age_paf;
mod age_workloads;
mod bench_fast24;
mod bench_fragpicker;
mod bench_io;
mod bench_runs;
mod browser;
mod cli_errors;
mod closed_pipe;
mod defrag_aged;
mod defrag_crash;
mod defrag_durable;
mod defrag_exit;
mod defrag_fs;
mod defrag_parallel;
mod filefrag_dropin;
mod free_map;
mod hostile_paths;
mod html_xss;
mod interrupt;
mod lab;
mod lab_app;
mod mpi;
mod scan_fs;
mod scratch_cli;
mod ssd_block;
mod trace_io;
mod watch_fs;
mod watch_http;
mod watch_page;
