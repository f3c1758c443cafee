//! The block device under a file, its request counters and its request-size caps.
//!
//! Counters come from `/sys/class/block/<dev>/stat` (format: Documentation/block/stat.rst):
//! they count requests as the device saw them, after merging and splitting, which is what
//! makes request splitting and write amount checkable without blktrace.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use fragkit_sys::dev::split as split_dev;
use fragkit_sys::mountinfo;

/// A block device as sysfs names it. `name` is what the counters are read from (a
/// partition counts its own requests); `disk` is the whole disk whose queue limits apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockDevice {
    pub name: String,
    pub disk: String,
    pub major: u32,
    pub minor: u32,
    pub partition: bool,
}

/// What one request may carry on this device (`/sys/block/<disk>/queue/*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueueLimits {
    pub logical_block_size: u64,
    pub physical_block_size: u64,
    /// max_sectors_kb in bytes: the largest request the block layer builds.
    pub max_request_bytes: u64,
    pub max_segments: u64,
    pub max_segment_size: u64,
    pub rotational: bool,
    pub nr_requests: u64,
}

impl QueueLimits {
    /// The largest request one user buffer becomes: capped by max_sectors_kb and by
    /// max_segments pages (a user buffer is page-sized pieces, not physically contiguous).
    pub fn request_cap(&self) -> u64 {
        let page = page_size();
        let by_segments = self.max_segments * self.max_segment_size.min(page);
        self.max_request_bytes.min(by_segments.max(page))
    }

    /// The request size a device sees for R-byte user requests: min(R, cap).
    pub fn effective_request_size(&self, request: u64) -> u64 {
        request.min(self.request_cap())
    }
}

pub(crate) fn page_size() -> u64 {
    fragkit_sys::sysconf::page_size()
}

/// One snapshot of the device's counters (fields in Documentation/block/stat.rst order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeviceStats {
    pub reads: u64,
    pub read_merges: u64,
    pub read_sectors: u64,
    pub read_ticks_ms: u64,
    pub writes: u64,
    pub write_merges: u64,
    pub write_sectors: u64,
    pub write_ticks_ms: u64,
    pub in_flight: u64,
    pub io_ticks_ms: u64,
    pub time_in_queue_ms: u64,
    pub discards: u64,
    pub discard_merges: u64,
    pub discard_sectors: u64,
    pub discard_ticks_ms: u64,
    pub flushes: u64,
    pub flush_ticks_ms: u64,
}

/// What the device did between two snapshots, in requests and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DeviceDelta {
    pub reads: u64,
    pub read_merges: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_merges: u64,
    pub write_bytes: u64,
    pub discards: u64,
    pub discard_bytes: u64,
    pub flushes: u64,
    /// Milliseconds the device had requests in flight.
    pub busy_ms: u64,
}

impl DeviceStats {
    /// Parse the whitespace-separated stat line (older kernels have 11 or 15 fields).
    pub fn parse(text: &str) -> Option<DeviceStats> {
        let v: Vec<u64> = text
            .split_whitespace()
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        if v.len() < 11 {
            return None;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Some(DeviceStats {
            reads: at(0),
            read_merges: at(1),
            read_sectors: at(2),
            read_ticks_ms: at(3),
            writes: at(4),
            write_merges: at(5),
            write_sectors: at(6),
            write_ticks_ms: at(7),
            in_flight: at(8),
            io_ticks_ms: at(9),
            time_in_queue_ms: at(10),
            discards: at(11),
            discard_merges: at(12),
            discard_sectors: at(13),
            discard_ticks_ms: at(14),
            flushes: at(15),
            flush_ticks_ms: at(16),
        })
    }

    /// The counters of the device under `path` now.
    pub fn for_path(path: &Path) -> Result<DeviceStats> {
        BlockDevice::for_path(path)?.stats()
    }

    /// `later − self`; sectors are always 512 bytes in this file, whatever the device.
    pub fn delta(&self, later: &DeviceStats) -> DeviceDelta {
        let d = |a: u64, b: u64| b.saturating_sub(a);
        DeviceDelta {
            reads: d(self.reads, later.reads),
            read_merges: d(self.read_merges, later.read_merges),
            read_bytes: d(self.read_sectors, later.read_sectors) * 512,
            writes: d(self.writes, later.writes),
            write_merges: d(self.write_merges, later.write_merges),
            write_bytes: d(self.write_sectors, later.write_sectors) * 512,
            discards: d(self.discards, later.discards),
            discard_bytes: d(self.discard_sectors, later.discard_sectors) * 512,
            flushes: d(self.flushes, later.flushes),
            busy_ms: d(self.io_ticks_ms, later.io_ticks_ms),
        }
    }
}

fn read_sys(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_sys_u64(path: &str) -> Option<u64> {
    read_sys(path)?.parse().ok()
}

impl BlockDevice {
    /// The device a path's data lives on: the device itself for a block special file,
    /// otherwise the one under its file system (st_dev; for file systems with anonymous
    /// device numbers such as btrfs, the mount's source device).
    pub fn for_path(path: &Path) -> Result<BlockDevice> {
        let md = fs::metadata(path).with_context(|| format!("{}: cannot stat", path.display()))?;
        if md.file_type().is_block_device() {
            let (ma, mi) = split_dev(md.rdev());
            return BlockDevice::from_numbers(ma, mi)
                .with_context(|| format!("{}: block device not in sysfs", path.display()));
        }
        let (ma, mi) = split_dev(md.dev());
        if let Ok(d) = BlockDevice::from_numbers(ma, mi) {
            return Ok(d);
        }
        if let Some(source) = mount_source_of(path, ma, mi) {
            if let Ok(smd) = fs::metadata(&source) {
                if smd.file_type().is_block_device() {
                    let (sa, si) = split_dev(smd.rdev());
                    return BlockDevice::from_numbers(sa, si);
                }
            }
        }
        bail!(
            "{}: no block device under it (device {ma}:{mi} is not in /sys/dev/block: tmpfs, overlay, network or another virtual file system)",
            path.display()
        )
    }

    /// Resolve MAJ:MIN through /sys/dev/block (a partition's parent is the whole disk).
    pub(crate) fn from_numbers(major: u32, minor: u32) -> Result<BlockDevice> {
        let link = format!("/sys/dev/block/{major}:{minor}");
        let real = fs::canonicalize(&link).map_err(|_| anyhow!("{link}: no such device"))?;
        let name = file_name(&real).ok_or_else(|| anyhow!("{link}: unnamed device"))?;
        let partition = real.join("partition").exists();
        let disk = if partition {
            real.parent()
                .and_then(file_name)
                .ok_or_else(|| anyhow!("{link}: partition without a disk"))?
        } else {
            name.clone()
        };
        Ok(BlockDevice {
            name,
            disk,
            major,
            minor,
            partition,
        })
    }

    /// By sysfs name ("loop3", "vda", "sda1") or /dev path.
    pub fn from_name(name: &str) -> Result<BlockDevice> {
        let base = name.strip_prefix("/dev/").unwrap_or(name);
        let dev = read_sys(&format!("/sys/class/block/{base}/dev"))
            .ok_or_else(|| anyhow!("{name}: no such block device (not in /sys/class/block)"))?;
        let (ma, mi) = dev
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(|| anyhow!("{name}: unreadable device number '{dev}'"))?;
        BlockDevice::from_numbers(ma, mi)
    }

    pub fn dev_path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/{}", self.name))
    }

    pub fn stats(&self) -> Result<DeviceStats> {
        let path = format!("/sys/class/block/{}/stat", self.name);
        let text = fs::read_to_string(&path).with_context(|| format!("{path}: cannot read"))?;
        DeviceStats::parse(&text).ok_or_else(|| anyhow!("{path}: unexpected format"))
    }

    /// The counters once the device has nothing in flight (waiting at most 200 ms).
    /// A request's bytes are counted before its completion wakes the submitter, its
    /// request count only after (blk_account_io_done); sampled right after the last
    /// read returns, the bytes can be complete and the count one short. The in-flight
    /// count drops in the same step as the request count rises, so zero in flight means
    /// every finished request is counted. Another process keeping the device busy
    /// can hold it above zero: then the last reading is returned.
    pub fn settled_stats(&self) -> Result<DeviceStats> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        loop {
            let s = self.stats()?;
            if s.in_flight == 0 || std::time::Instant::now() >= deadline {
                return Ok(s);
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    pub fn limits(&self) -> QueueLimits {
        let q = |f: &str| read_sys_u64(&format!("/sys/block/{}/queue/{f}", self.disk));
        QueueLimits {
            logical_block_size: q("logical_block_size").unwrap_or(512),
            physical_block_size: q("physical_block_size").unwrap_or(512),
            max_request_bytes: q("max_sectors_kb").unwrap_or(512) * 1024,
            max_segments: q("max_segments").unwrap_or(128),
            max_segment_size: q("max_segment_size").unwrap_or(65536),
            rotational: q("rotational") == Some(1),
            nr_requests: q("nr_requests").unwrap_or(0),
        }
    }

    /// Size in bytes (sysfs `size` is in 512-byte sectors).
    pub fn size(&self) -> u64 {
        read_sys_u64(&format!("/sys/class/block/{}/size", self.name)).unwrap_or(0) * 512
    }

    /// Device numbers of this device and, for a whole disk, its partitions.
    fn self_and_partitions(&self) -> Vec<(u32, u32)> {
        let mut out = vec![(self.major, self.minor)];
        if !self.partition {
            if let Ok(rd) = fs::read_dir(format!("/sys/block/{}", self.disk)) {
                for e in rd.flatten() {
                    let p = e.path();
                    if p.join("partition").exists() {
                        if let Some(n) = read_sys(&p.join("dev").to_string_lossy()) {
                            if let Some((a, b)) = n.split_once(':') {
                                if let (Ok(a), Ok(b)) = (a.parse(), b.parse()) {
                                    out.push((a, b));
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// Why this device must not be used raw: mount points of file systems on it (or on
    /// its partitions) from /proc/self/mountinfo, and holders (dm, md, ...) from sysfs.
    /// Empty when it is free.
    pub fn users(&self) -> Vec<String> {
        let numbers = self.self_and_partitions();
        let mut users = Vec::new();
        if let Ok(mounts) = mountinfo::read() {
            for m in mounts {
                let by_number = numbers.contains(&(m.major, m.minor));
                let by_source = m.source.starts_with("/dev/")
                    && fs::metadata(&m.source).is_ok_and(|md| {
                        md.file_type().is_block_device() && numbers.contains(&split_dev(md.rdev()))
                    });
                if by_number || by_source {
                    users.push(format!(
                        "mounted on {} ({})",
                        m.mountpoint.display(),
                        m.fstype
                    ));
                }
            }
        }
        // Swap on the device or a partition: /proc/swaps lists it by path.
        if let Ok(text) = fs::read_to_string("/proc/swaps") {
            for path in text
                .lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().next())
            {
                let on_it = fs::metadata(path).is_ok_and(|md| {
                    md.file_type().is_block_device() && numbers.contains(&split_dev(md.rdev()))
                });
                if on_it {
                    users.push(format!("swap {path}"));
                }
            }
        }
        for (ma, mi) in &numbers {
            let holders = format!("/sys/dev/block/{ma}:{mi}/holders");
            if let Ok(rd) = fs::read_dir(&holders) {
                for e in rd.flatten() {
                    users.push(format!("held by {}", e.file_name().to_string_lossy()));
                }
            }
        }
        users.sort();
        users.dedup();
        users
    }
}

fn file_name(p: &Path) -> Option<String> {
    p.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// The /dev source of the mount a path is on: by device number, else (btrfs subvolumes
/// have their own anonymous numbers) the longest mount point containing the path.
fn mount_source_of(path: &Path, major: u32, minor: u32) -> Option<String> {
    let mounts = mountinfo::read().ok()?;
    if let Some(m) = mounts
        .iter()
        .find(|m| m.major == major && m.minor == minor && m.source.starts_with("/dev/"))
    {
        return Some(m.source.clone());
    }
    let real = fs::canonicalize(path).ok()?;
    mountinfo::containing(&mounts, &real)
        .filter(|m| m.source.starts_with("/dev/"))
        .map(|m| m.source.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_line() {
        let line = "  100  2  800  5  40  1  320  9  0  12  14  3  0  24  1  7  2\n";
        let s = DeviceStats::parse(line).unwrap();
        assert_eq!(
            (s.reads, s.read_sectors, s.writes, s.write_sectors),
            (100, 800, 40, 320)
        );
        assert_eq!((s.discards, s.flushes), (3, 7));
        let later = DeviceStats {
            reads: 110,
            read_sectors: 1056,
            ..s
        };
        let d = s.delta(&later);
        assert_eq!((d.reads, d.read_bytes, d.writes), (10, 256 * 512, 0));
        assert!(DeviceStats::parse("1 2 3").is_none());
    }

    #[test]
    fn caps_requests() {
        let l = QueueLimits {
            logical_block_size: 512,
            physical_block_size: 512,
            max_request_bytes: 1280 << 10,
            max_segments: 128,
            max_segment_size: 1 << 20,
            rotational: false,
            nr_requests: 128,
        };
        if page_size() == 4096 {
            assert_eq!(l.effective_request_size(1 << 20), 512 << 10);
            assert_eq!(l.effective_request_size(128 << 10), 128 << 10);
        }
    }

    #[test]
    fn resolves_root_file_system() {
        // Whatever / sits on, resolution must give a device whose counters parse, or say why.
        if let Ok(d) = BlockDevice::for_path(Path::new("/")) {
            assert!(d.stats().is_ok(), "{d:?}");
            assert!(d.limits().logical_block_size >= 512);
        }
    }
}
