//! Block-level recording for the SSD model: bpf/blockio.bpf.c on block:block_rq_issue and
//! block:block_rq_complete for one device, paired into requests (time, sector, bytes, op),
//! then each data request's owning file (inode, offset) looked up in the file system's
//! final layout (FIEMAP of every file under the mount) where one is given.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::fs;
use std::mem::MaybeUninit;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};

use super::loader::{check_prerequisites, Stop};
use fragkit_core::ssd::trace::{BlockTrace, Op, Request};
use fragkit_sys::dev::kernel_dev;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/blockio.skel.rs"));
}
use skel::BlockioSkelBuilder;

/// struct blk_event in blockio.bpf.c.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct BlockEvent {
    ts: u64,
    sector: u64,
    bytes: u32,
    dev: u32,
    complete: u8,
    rwbs: [u8; 10],
    pad: [u8; 5],
}

impl BlockEvent {
    fn parse(data: &[u8]) -> Option<BlockEvent> {
        if data.len() < std::mem::size_of::<BlockEvent>() {
            return None;
        }
        // SAFETY: length checked; every bit pattern is a valid BlockEvent.
        Some(unsafe { std::ptr::read_unaligned(data.as_ptr().cast()) })
    }
}

/// The operation in a tracepoint's rwbs string (blk_fill_rwbs): an optional leading 'F'
/// (preflush), then W, R, D (discard), F (flush) or N.
pub(crate) fn op_of_rwbs(rwbs: &[u8]) -> Option<Op> {
    let s: Vec<u8> = rwbs.iter().copied().take_while(|&c| c != 0).collect();
    let body = match s.as_slice() {
        [b'F', rest @ ..] if !rest.is_empty() && b"WRDFN".contains(&rest[0]) => rest,
        other => other,
    };
    match body.first() {
        Some(b'W') => Some(Op::Write),
        Some(b'R') => Some(Op::Read),
        Some(b'D') => Some(Op::Discard),
        Some(b'F') => Some(Op::Flush),
        _ => None,
    }
}

/// Pairs issues with completions (same sector and operation, first in first out).
#[derive(Default)]
pub(crate) struct Pairing {
    requests: Vec<Request>,
    open: HashMap<(u64, u8), VecDeque<usize>>,
    pub unmatched_completions: u64,
    pub events: u64,
}

impl Pairing {
    /// Flushes carry no meaningful sector: they pair by order alone.
    fn key(sector: u64, op: Op) -> (u64, u8) {
        (if op == Op::Flush { 0 } else { sector }, op as u8)
    }

    pub fn issue(&mut self, ts: u64, sector: u64, bytes: u64, op: Op) {
        self.events += 1;
        let i = self.requests.len();
        self.requests.push(Request {
            issue_ns: ts,
            complete_ns: ts,
            sector,
            bytes,
            op,
            inode: None,
            offset: None,
        });
        self.open
            .entry(Self::key(sector, op))
            .or_default()
            .push_back(i);
    }

    pub fn complete(&mut self, ts: u64, sector: u64, op: Op) {
        self.events += 1;
        // An emptied queue is removed: the map holds only sectors with a request in
        // flight, not every sector the trace ever saw.
        let i = match self.open.entry(Self::key(sector, op)) {
            Entry::Occupied(mut q) => {
                let i = q.get_mut().pop_front();
                if q.get().is_empty() {
                    q.remove();
                }
                i
            }
            Entry::Vacant(_) => None,
        };
        match i {
            Some(i) => self.requests[i].complete_ns = ts.max(self.requests[i].issue_ns),
            None => self.unmatched_completions += 1,
        }
    }

    pub fn finish(self) -> Vec<Request> {
        self.requests
    }
}

/// Kernel dev_t of a whole block device; partitions are refused (the tracepoints report
/// the disk and disk-relative sectors).
pub(crate) fn block_dev(path: &Path) -> Result<(u32, String)> {
    let md = fs::metadata(path).map_err(|e| anyhow!("--block {}: {e}", path.display()))?;
    if !md.file_type().is_block_device() {
        bail!("--block {}: not a block device", path.display());
    }
    let rdev = md.rdev();
    let sys = format!("/sys/dev/block/{}:{}", libc::major(rdev), libc::minor(rdev));
    if Path::new(&sys).join("partition").exists() {
        bail!(
            "--block {}: a partition; give the whole disk (the block tracepoints report disks)",
            path.display()
        );
    }
    let name = fs::read_link(&sys)
        .ok()
        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| path.display().to_string());
    Ok((kernel_dev(rdev), name))
}

pub struct BlockRecording {
    pub trace: BlockTrace,
    pub status: Option<ExitStatus>,
    pub unmatched_completions: u64,
}

/// Record every block request on `dev` until `stop` (or `command` exits).
pub fn record(
    dev: &Path,
    command: Option<&mut Command>,
    stop: &Stop<'_>,
) -> Result<BlockRecording> {
    let mut status = None;
    let (trace, unmatched) = recording(dev, |poll| {
        (stop.on_attached)();
        let started = Instant::now();
        let mut child: Option<Child> = match command {
            Some(cmd) => {
                let shown = cmd.get_program().to_string_lossy().into_owned();
                Some(
                    cmd.spawn()
                        .map_err(|e| anyhow!("cannot run {shown}: {e}"))?,
                )
            }
            None => None,
        };
        loop {
            poll()?;
            if stop.signalled.load(Ordering::Relaxed)
                || stop.duration.is_some_and(|d| started.elapsed() >= d)
            {
                break;
            }
            if let Some(c) = child.as_mut() {
                if let Some(s) = c.try_wait()? {
                    status = Some(s);
                    break;
                }
            }
        }
        Ok(())
    })?;
    Ok(BlockRecording {
        trace,
        status,
        unmatched_completions: unmatched,
    })
}

/// Record every block request on `dev` while `work` runs on a thread of this process
/// (age and bench workloads record themselves); returns the trace and what `work` returned.
pub fn record_during<R: Send>(
    dev: &Path,
    work: impl FnOnce() -> R + Send,
) -> Result<(BlockTrace, R)> {
    let mut out = None;
    let (trace, _) = recording(dev, |poll| {
        std::thread::scope(|s| {
            let h = s.spawn(work);
            while !h.is_finished() {
                poll()?;
            }
            poll()?;
            out = Some(
                h.join()
                    .map_err(|_| anyhow!("the recorded workload panicked"))?,
            );
            Ok(())
        })
    })?;
    Ok((trace, out.expect("set when the body succeeds")))
}

/// Attach to `dev`, run `body` with a function that drains the ring buffer (waiting up to
/// 100 ms for events), detach and pair what was seen into requests. Returns the trace and
/// the completions without an issue.
fn recording(
    dev: &Path,
    body: impl FnOnce(&mut dyn FnMut() -> Result<()>) -> Result<()>,
) -> Result<(BlockTrace, u64)> {
    check_prerequisites()?;
    // Classic tracepoints (block:block_rq_*): libbpf looks their ids up in tracefs.
    fragkit_sys::tracefs::ensure_mounted()?;
    let (kdev, name) = block_dev(dev)?;
    let mut object = MaybeUninit::uninit();
    let mut open = BlockioSkelBuilder::default()
        .open(&mut object)
        .context("opening the block eBPF object")?;
    {
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .ok_or_else(|| anyhow!("block eBPF object has no .rodata"))?;
        ro.filter_dev = kdev;
        ro.wakeup_bytes = 4 << 20;
    }
    let mut skel = open
        .load()
        .map_err(|e| anyhow!("loading the block eBPF program failed: {e}"))?;
    skel.attach()
        .map_err(|e| anyhow!("attaching to block:block_rq_issue/complete failed: {e}"))?;

    let mut pairing = Pairing::default();
    let mut callback = |data: &[u8]| -> i32 {
        if let Some(e) = BlockEvent::parse(data) {
            if let Some(op) = op_of_rwbs(&e.rwbs) {
                if e.complete == 0 {
                    pairing.issue(e.ts, e.sector, e.bytes as u64, op);
                } else {
                    pairing.complete(e.ts, e.sector, op);
                }
            }
        }
        0
    };
    let mut rb = RingBufferBuilder::new();
    rb.add(&skel.maps.blk_events, &mut callback)?;
    let ring = rb.build()?;
    let mut poll = || -> Result<()> {
        match ring.poll(std::time::Duration::from_millis(100)) {
            Err(e) if e.kind() != libbpf_rs::ErrorKind::Interrupted => {
                Err(anyhow!("reading the ring buffer: {e}"))
            }
            _ => Ok(()),
        }
    };
    body(&mut poll)?;
    skel.links = Default::default();
    ring.consume()?;
    drop(ring);
    let key = 0u32.to_ne_bytes();
    let dropped: u64 = match skel.maps.blk_drops.lookup_percpu(&key, MapFlags::ANY)? {
        Some(per_cpu) => per_cpu
            .iter()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64 value")))
            .sum(),
        None => 0,
    };
    let unmatched = pairing.unmatched_completions;
    let mut trace = BlockTrace::new(&name, pairing.finish());
    trace.dropped = dropped;
    Ok((trace, unmatched))
}

/// Fill in inode and file offset of each read/write request from the final layout of
/// every regular file under `mount` (the traced device's file system, mounted directly
/// on it: device byte = file system byte). Requests in deleted files or metadata stay
/// unresolved. Returns how many requests were resolved.
pub fn resolve_owners(trace: &mut BlockTrace, mount: &Path) -> Result<usize> {
    // (physical start, physical end, inode, logical start), sorted by physical start.
    let mut extents: Vec<(u64, u64, u64, u64)> = Vec::new();
    let mut dirs = vec![mount.to_path_buf()];
    let root_dev = fs::metadata(mount)
        .map_err(|e| anyhow!("--mount {}: {e}", mount.display()))?
        .dev();
    while let Some(d) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(md) = e.metadata() else { continue };
            if md.dev() != root_dev {
                continue;
            }
            if md.is_dir() {
                dirs.push(e.path());
            } else if md.is_file() {
                if let Ok(f) = fragkit_core::layout::walk::map_path(&e.path(), true) {
                    for x in f.layout.extents.iter().filter(|x| x.is_located()) {
                        extents.push((x.physical, x.physical_end(), f.ino, x.logical));
                    }
                }
            }
        }
    }
    extents.sort_unstable();
    let mut resolved = 0;
    for r in &mut trace.requests {
        if !matches!(r.op, Op::Read | Op::Write) {
            continue;
        }
        let at = r.byte_offset();
        let i = extents.partition_point(|x| x.0 <= at);
        if i == 0 {
            continue;
        }
        let (ps, pe, ino, logical) = extents[i - 1];
        if at < pe {
            r.inode = Some(ino);
            r.offset = Some(logical + (at - ps));
            resolved += 1;
        }
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_strings_name_the_operation() {
        assert_eq!(op_of_rwbs(b"WS\0\0\0\0\0\0\0\0"), Some(Op::Write));
        assert_eq!(op_of_rwbs(b"FWS\0"), Some(Op::Write));
        assert_eq!(op_of_rwbs(b"FF\0"), Some(Op::Flush));
        assert_eq!(op_of_rwbs(b"F\0"), Some(Op::Flush));
        assert_eq!(op_of_rwbs(b"RA\0"), Some(Op::Read));
        assert_eq!(op_of_rwbs(b"DS\0"), Some(Op::Discard));
        assert_eq!(op_of_rwbs(b"N\0"), None);
    }

    #[test]
    fn completions_pair_with_their_issue() {
        let mut p = Pairing::default();
        p.issue(10, 8, 4096, Op::Read);
        p.issue(11, 8, 4096, Op::Write);
        p.issue(12, 8, 4096, Op::Read);
        p.complete(20, 8, Op::Read);
        p.complete(25, 8, Op::Write);
        p.complete(30, 999, Op::Read);
        assert_eq!(p.unmatched_completions, 1);
        let r = p.finish();
        assert_eq!(
            r.iter().map(|q| q.complete_ns).collect::<Vec<_>>(),
            vec![20, 25, 12]
        );
    }

    #[test]
    fn paired_sectors_leave_the_open_map() {
        let mut p = Pairing::default();
        for s in 0..1000u64 {
            p.issue(s, s * 8, 4096, Op::Read);
            p.complete(s + 1, s * 8, Op::Read);
        }
        p.issue(2000, 7, 4096, Op::Write);
        assert_eq!(p.open.len(), 1, "only the request still in flight is open");
        assert_eq!(p.unmatched_completions, 0);
    }
}
