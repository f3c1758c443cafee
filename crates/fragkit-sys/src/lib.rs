//! Kernel interfaces, each wrapped once: the ioctls, statfs and /proc files the rest of
//! fragkit reads the system through. Nothing here knows about fragmentation; callers
//! above turn these plain facts into layouts, metrics and reports.
//!
//! The per-file-system migrators (`defrag::migrate`) keep their own move ioctls, one
//! engine per file system (fio's ioengine shape), except ext4's MOVE_EXT, which the ext4
//! fragmentor of `age fragpicker-synthetic` uses too (`move_ext`).

// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod alloc;
pub mod btrfs_space;
pub mod clock;
pub mod clone;
pub(crate) mod console;
pub mod dev;
pub mod fiemap;
pub mod freeze;
pub mod fsinfo;
pub mod fsmap;
pub mod inode;
pub mod mountinfo;
pub mod move_ext;
pub mod pty;
pub mod signals;
pub mod superblock;
pub mod sync;
pub mod tmpfile;
pub mod tracefs;
pub mod tunable;
pub mod xfs;
