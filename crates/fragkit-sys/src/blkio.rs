//! The block I/O controller's device throttle (cgroup v1 `blkio.throttle.*_device` in the
//! root group): a ceiling on bytes and requests per second for one device, applied to
//! every request whoever submits it — the file system's writeback included, which a
//! limit on a child group (v1 or v2 `io.max`) would not see unless writeback is charged to
//! that group.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Bytes and requests per second for one device; 0 means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThrottleLimits {
    pub read_bps: u64,
    pub write_bps: u64,
    pub read_iops: u64,
    pub write_iops: u64,
}

const FILES: [&str; 4] = [
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
];

impl ThrottleLimits {
    fn values(&self) -> [u64; 4] {
        [
            self.read_bps,
            self.write_bps,
            self.read_iops,
            self.write_iops,
        ]
    }
}

/// Where the v1 blkio hierarchy is mounted, if it is.
pub fn root() -> Option<PathBuf> {
    let mounts = crate::mountinfo::read().ok()?;
    mounts
        .into_iter()
        .find(|m| {
            m.fstype == "cgroup"
                && m.super_options.split(',').any(|o| o == "blkio")
                && m.mountpoint.join(FILES[0]).exists()
        })
        .map(|m| m.mountpoint)
}

/// A throttle set on one device, put back to what it was (normally none) when dropped.
#[derive(Debug)]
pub struct DeviceThrottle {
    root: PathBuf,
    device: (u32, u32),
    old: [u64; 4],
}

/// The value a throttle file holds for `device` (0: none).
fn current(root: &Path, file: &str, device: (u32, u32)) -> io::Result<u64> {
    let key = format!("{}:{}", device.0, device.1);
    let text = fs::read_to_string(root.join(file))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0))
}

fn write(root: &Path, file: &str, device: (u32, u32), value: u64) -> io::Result<()> {
    fs::write(
        root.join(file),
        format!("{}:{} {value}\n", device.0, device.1),
    )
}

impl DeviceThrottle {
    /// Limit every request to block device `major:minor` (a whole device, not a partition).
    pub fn set(device: (u32, u32), limits: ThrottleLimits) -> io::Result<DeviceThrottle> {
        let root = root().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no cgroup v1 blkio hierarchy with throttling is mounted",
            )
        })?;
        let mut old = [0; 4];
        for (i, file) in FILES.iter().enumerate() {
            old[i] = current(&root, file, device)?;
        }
        let t = DeviceThrottle { root, device, old };
        for (file, v) in FILES.iter().zip(limits.values()) {
            write(&t.root, file, device, v)?;
        }
        Ok(t)
    }

    /// What the kernel holds now for this device.
    pub fn limits(&self) -> io::Result<ThrottleLimits> {
        let v = |i: usize| current(&self.root, FILES[i], self.device);
        Ok(ThrottleLimits {
            read_bps: v(0)?,
            write_bps: v(1)?,
            read_iops: v(2)?,
            write_iops: v(3)?,
        })
    }
}

impl Drop for DeviceThrottle {
    fn drop(&mut self) {
        for (file, v) in FILES.iter().zip(self.old) {
            // The device may be gone already (a detached loop device has no rule left).
            let _ = write(&self.root, file, self.device, v);
        }
    }
}
