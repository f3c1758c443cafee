//! Kernel interfaces, each wrapped once: the system calls, ioctls, statfs and /proc files
//! the rest of fragkit reads and changes the system through. Nothing here knows about
//! fragmentation; callers above turn these plain facts into layouts, metrics and reports.
//! Above this crate libc supplies constants and types only, never calls.
//!
//! - Files and directories: `openat` (openat(2), O_CLOEXEC always), `stat` (fstat,
//!   fstatat, statx), `dirent` (readdir on a directory descriptor), `handle`
//!   (open_by_handle_at), `tmpfile` (O_TMPFILE), `rw` (read, write, pread, pwrite),
//!   `poll`.
//! - Extents and blocks: `fiemap` (FIEMAP, FIBMAP), `fsmap` (GETFSMAP), `alloc`
//!   (fallocate), `clone` (FICLONERANGE), `inode` (FS_IOC_GETFLAGS, FS_IOC_GETVERSION).
//! - Moving data (the migrators of `defrag::migrate`, one per file system, call these):
//!   `move_ext` (EXT4_IOC_MOVE_EXT, also the ext4 fragmentor of `age
//!   fragpicker-synthetic`), `xfs_commit` (XFS_IOC_START_COMMIT, XFS_IOC_COMMIT_RANGE),
//!   `btrfs_defrag` (BTRFS_IOC_DEFRAG_RANGE), `f2fs_defrag` (F2FS_IOC_DEFRAGMENT).
//! - File systems: `fsinfo` (statfs, FIGETBSZ), `superblock` (ext4/xfs on-disk),
//!   `btrfs_space` (BTRFS_IOC_SPACE_INFO), `btrfs_search` (BTRFS_IOC_TREE_SEARCH_V2), `xfs` (XFS_IOC_GET/SET_RESBLKS), `freeze`
//!   (FIFREEZE/FITHAW), `mountinfo`, `tunable` (sysfs knobs), `sync` (syncfs, sync).
//! - Page cache: `fadvise` (posix_fadvise), `cachestat`, `vm` (drop_caches).
//! - Change notification: `fanotify` and `inotify` (init, marks and watches, the event
//!   records of a read).
//! - Block devices: `blkio` (the cgroup v1 device throttle).
//! - Processes and the machine: `signals`, `pty`, `clock` (CLOCK_MONOTONIC), `affinity`
//!   (pin a thread to its CPU), `sysconf` (page size), `dev` (device numbers), `tracefs`.

// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod affinity;
pub mod alloc;
pub mod blkio;
pub mod btrfs_defrag;
pub mod btrfs_search;
pub mod btrfs_space;
pub mod cachestat;
pub mod clock;
pub mod clone;
pub mod console;
pub mod dev;
pub mod dirent;
pub mod f2fs_defrag;
pub mod fadvise;
pub mod fanotify;
pub mod fiemap;
pub mod freeze;
pub mod fsinfo;
pub mod fsmap;
pub mod handle;
pub mod inode;
pub mod inotify;
pub mod jbd2;
pub mod mountinfo;
pub mod move_ext;
pub mod openat;
pub mod poll;
pub mod process;
pub mod pty;
pub mod rw;
pub mod signals;
pub mod stat;
pub mod superblock;
pub mod sync;
pub mod sysconf;
pub mod tmpfile;
pub mod tracefs;
pub mod tunable;
pub mod vm;
pub mod xfs;
pub mod xfs_commit;
