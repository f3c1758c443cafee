//! Folds trace records into per-file accesses and, at the end, into a profile.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Time all fallback walks together may take at the end of a trace.
const WALK_BUDGET: Duration = Duration::from_secs(10);

use super::loader::{Event, TraceStats};
use super::profile::{Profile, ProfileFile, ProfileRange, KIND};
use super::ranges::{Call, FileAccesses, Hotness, Streams};
use super::resolve;
use fragkit_sys::dev::kernel_dev_parts;

/// Readahead window of a device in bytes: the bdi's read_ahead_kb, which is what the page
/// cache uses (for block-device file systems it mirrors /sys/block/DEV/queue/read_ahead_kb).
pub fn read_ahead_bytes(dev: u32) -> Option<u64> {
    let (ma, mi) = kernel_dev_parts(dev);
    let kb = fs::read_to_string(format!("/sys/class/bdi/{ma}:{mi}/read_ahead_kb"))
        .or_else(|_| fs::read_to_string(format!("/sys/dev/block/{ma}:{mi}/queue/read_ahead_kb")))
        .ok()?;
    kb.trim().parse::<u64>().ok().map(|k| k * 1024)
}

/// The kernel's default when a device does not say (VM_READAHEAD_PAGES, 128 KiB).
const DEFAULT_READ_AHEAD: u64 = 128 << 10;

#[derive(Default)]
pub struct Collector {
    files: HashMap<(u32, u64), FileAccesses>,
    paths: HashMap<(u32, u64), PathBuf>,
    generations: HashMap<(u32, u64), u32>,
    streams: Streams,
    read_ahead: HashMap<u32, u64>,
}

impl Collector {
    pub fn new() -> Collector {
        Collector::default()
    }

    pub fn add(&mut self, e: &Event) {
        let key = (e.dev, e.ino);
        if !self.files.contains_key(&key) {
            let ra = *self
                .read_ahead
                .entry(e.dev)
                .or_insert_with(|| read_ahead_bytes(e.dev).unwrap_or(DEFAULT_READ_AHEAD));
            let bs = 1u64 << e.blkbits.min(31);
            self.files.insert(key, FileAccesses::new(bs, ra));
            self.generations.insert(key, e.gen);
            // Resolve while the tracee most likely still has the file open.
            if let Some(p) = resolve::from_proc(e.tgid, e.dev, e.ino) {
                self.paths.insert(key, p);
            }
        }
        let f = self.files.get_mut(&key).expect("inserted above");
        let readahead_to = if e.is_write() || e.is_direct() {
            None
        } else {
            self.streams.read(e.file, e.offset, e.bytes, f.read_ahead)
        };
        let call = Call {
            offset: e.offset,
            bytes: e.bytes,
            write: e.is_write(),
            direct: e.is_direct(),
            readahead_to,
            file_size: e.size,
        };
        f.record(&call);
    }

    /// Paths for files the tracee no longer had open when first seen: by file handle, else
    /// one walk per device.
    fn resolve_remaining(&mut self) {
        let mut missing: HashMap<u32, HashSet<u64>> = HashMap::new();
        let mut mounts: HashMap<u32, Option<PathBuf>> = HashMap::new();
        for key in self.files.keys() {
            if self.paths.contains_key(key) {
                continue;
            }
            let mount = mounts
                .entry(key.0)
                .or_insert_with(|| resolve::mount_point(key.0));
            let Some(mount) = mount else {
                continue;
            };
            let gen = self.generations.get(key).copied().unwrap_or(0);
            match resolve::by_handle(mount, key.0, key.1, gen) {
                resolve::ByHandle::Found(p) => {
                    self.paths.insert(*key, p);
                }
                resolve::ByHandle::Gone => {}
                resolve::ByHandle::Unsupported => {
                    missing.entry(key.0).or_default().insert(key.1);
                }
            }
        }
        // Walks are the last resort; bound them so a trace of a big file system still ends.
        let deadline = Instant::now() + WALK_BUDGET;
        for (dev, inos) in missing {
            for (ino, p) in resolve::by_walk(dev, &inos, deadline) {
                self.paths.insert((dev, ino), p);
            }
        }
    }

    pub fn finish(mut self, stats: &TraceStats, hot: &Hotness) -> Profile {
        self.resolve_remaining();
        let mut merged: Vec<((u32, u64), &FileAccesses, Vec<super::ranges::Range>)> = self
            .files
            .iter()
            .map(|(k, f)| (*k, f, f.ranges()))
            .collect();
        let mut counts: Vec<u64> = merged
            .iter()
            .flat_map(|(_, _, r)| r.iter().map(|x| x.accesses()))
            .collect();
        let threshold = hot.threshold(&mut counts);
        let mut unresolved = 0;
        let mut files = Vec::new();
        for (key, f, ranges) in merged.drain(..) {
            let Some(path) = self.paths.get(&key) else {
                unresolved += 1;
                continue;
            };
            let ranges: Vec<ProfileRange> = ranges
                .into_iter()
                .filter(|r| r.accesses() >= threshold)
                .map(|r| ProfileRange {
                    offset: r.offset,
                    length: r.length,
                    reads: r.reads,
                    writes: r.writes,
                })
                .collect();
            if ranges.is_empty() {
                continue;
            }
            let (ma, mi) = kernel_dev_parts(key.0);
            files.push(ProfileFile {
                path: path.clone(),
                dev: format!("{ma}:{mi}"),
                ino: key.1,
                block_size: f.block_size,
                size: f.size,
                read_ahead: f.read_ahead,
                reads: f.reads,
                writes: f.writes,
                bytes_read: f.bytes_read,
                bytes_written: f.bytes_written,
                ranges,
            });
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Profile {
            version: 1,
            kind: KIND.to_string(),
            duration_ns: stats.duration.as_nanos() as u64,
            events: stats.events,
            dropped: stats.dropped(),
            unresolved_files: unresolved,
            files,
        }
    }
}
