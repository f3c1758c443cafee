//! tracefs, where the kernel lists its tracepoints: libbpf finds a classic tracepoint's
//! perf event id in `events/<group>/<name>/id` under /sys/kernel/tracing (or the old
//! /sys/kernel/debug/tracing). A system without systemd's sys-kernel-tracing.mount (a
//! fresh container, an initramfs) has the directory but nothing mounted on it, and
//! attaching then fails with ENOENT; perf mounts tracefs itself in that case, and so
//! does fragkit. It stays mounted afterwards, as perf leaves it.

use std::path::Path;

use anyhow::{anyhow, Result};

const TRACEFS: &str = "/sys/kernel/tracing";
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// Make sure the tracepoints' event directory is there, mounting tracefs on
/// /sys/kernel/tracing when neither place has it (needs root).
pub fn ensure_mounted() -> Result<()> {
    if [TRACEFS, DEBUGFS_TRACING]
        .iter()
        .any(|d| Path::new(d).join("events").is_dir())
    {
        return Ok(());
    }
    nix::mount::mount(
        Some("tracefs"),
        TRACEFS,
        Some("tracefs"),
        nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV | nix::mount::MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| {
        anyhow!("tracefs is not mounted on {TRACEFS} and mounting it failed ({e}); mount it with `mount -t tracefs tracefs {TRACEFS}`")
    })?;
    if Path::new(TRACEFS).join("events").is_dir() {
        Ok(())
    } else {
        Err(anyhow!("tracefs mounted on {TRACEFS} lists no events/: the kernel has no tracepoints (CONFIG_TRACEPOINTS)"))
    }
}
