//! Checksums of a byte range, read from the device with O_DIRECT, before and after a move.
//!
//! Before: O_DIRECT, then readahead is asked for the range (POSIX_FADV_WILLNEED, as
//! `--no-verify` does), so MOVE_EXT finds most pages in the cache without the range having
//! gone through a buffered read. Hashing it with buffered reads instead made ext4's
//! MOVE_EXT of a whole 32 MiB range (full mode) write 284 MB with 26k cache flushes for
//! 67 MB moved, 9.1 s against 1.5 s (`bench writes -- defrag --mode full` on an aged
//! ext4, 2026-11-23); the same as the measurement this module's first version recorded
//! (154 MB of writes for a 32 MiB range read through the cache).
//! After: O_DIRECT, so the checksum is what the device holds; then the range's pages are
//! dropped from the cache (as e4defrag does) so a defrag run does not evict the
//! applications' working set.
//! Both read with several requests in flight through io_uring (the bench's engine), not
//! one synchronous read at a time.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

use xxhash_rust::xxh3::Xxh3;

use crate::io::buf::AlignedBuf;
use crate::io::engine::{self, Engine, EngineKind, Op, Request};

const CHUNK: usize = 1 << 20;

fn advise(f: &File, offset: u64, length: u64, advice: libc::c_int) {
    // SAFETY: posix_fadvise on an open fd; advice only, failure changes nothing.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), offset as i64, length as i64, advice) };
}

/// Start reading [offset, offset+length) into the page cache (without --verify: the
/// migration then finds the pages there instead of reading them one by one).
pub fn prefetch(f: &File, offset: u64, length: u64) {
    advise(f, offset, length, libc::POSIX_FADV_WILLNEED);
}

/// xxh3-64 of [offset, offset+length) (clipped at EOF) as the device holds it now, then
/// readahead of the range for the migration that follows.
pub fn hash_before(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    let h = hash_with(&open_direct(f)?, offset, length);
    prefetch(f, offset, length);
    h
}

fn open_direct(f: &File) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(format!("/proc/self/fd/{}", f.as_raw_fd()))
}

/// xxh3-64 of [offset, offset+length) (clipped at EOF) as the device holds it. `offset`
/// must be block-aligned (migration ranges are). Dirty cached data is written back first
/// by the kernel, as for any O_DIRECT read. The range's clean pages are dropped after.
pub fn hash_range(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    let h = hash_with(&open_direct(f)?, offset, length);
    advise(f, offset, length, libc::POSIX_FADV_DONTNEED);
    h
}

/// Reads of CHUNK in flight at once. A range is read in order, each request a whole
/// CHUNK (the block layer cuts it into max_sectors_kb pieces: 128 KiB on a loop device):
/// with 4 in flight the device has 4 MiB = 32 such requests queued, its nr_requests
/// default for a loop device (128) not reached, while one synchronous read at a time
/// left it idle between reads (ScaleDefrag's finding about e4defrag's loop).
const IN_FLIGHT: usize = 4;

/// xxh3-64 of [offset, offset+length) read through `f` (opened O_DIRECT): IN_FLIGHT reads
/// at once through io_uring (the bench's engine), hashed in order; synchronous reads where
/// io_uring is not available.
fn hash_with(f: &File, offset: u64, length: u64) -> std::io::Result<u64> {
    let mut h = Xxh3::new();
    let end = offset + length;
    // The ring lives and dies on a thread of its own: io_uring's completion and teardown
    // work flags its task with TIF_NOTIFY_SIGNAL, which signal_pending() reports, and
    // btrfs's DEFRAG_RANGE stops early when it sees a signal pending (measured: full mode
    // left a 16 MiB file defragmented only to 1.8-11 MiB in 4 of 4 runs with the ring on
    // the worker's thread, tests/defrag_crash.rs; whole with it here).
    let pos = std::thread::scope(|s| {
        s.spawn(
            || match engine::open(EngineKind::Uring, f.as_raw_fd(), IN_FLIGHT as u32) {
                Ok(mut ring) => hash_in_flight(&mut *ring, &mut h, offset, end),
                Err(_) => Ok(Some(offset)),
            },
        )
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })?;
    if let Some(pos) = pos {
        hash_sync(f, &mut h, pos, end)?;
    }
    Ok(h.digest())
}

/// Bytes of the read that starts at `pos`: whole blocks up to CHUNK.
fn want(pos: u64, end: u64) -> usize {
    (end - pos).next_multiple_of(4096).min(CHUNK as u64) as usize
}

/// Hash [pos, end) with up to IN_FLIGHT reads outstanding. Returns where a synchronous
/// read must go on (after a short read that was not at EOF), or None when done.
fn hash_in_flight(
    ring: &mut dyn Engine,
    h: &mut Xxh3,
    mut pos: u64,
    end: u64,
) -> std::io::Result<Option<u64>> {
    let mut buf = AlignedBuf::new(CHUNK * IN_FLIGHT);
    // Not registered (fixed buffers): pinning 4 MiB per range cost 1.2 ms a call, more than
    // the per-request pinning it saves on a few reads (strace -c, docs/defrag.md).
    let base = buf.as_mut_ptr();
    // Chunk i reads [pos + i*CHUNK, ...) into slot i % IN_FLIGHT.
    let mut ready: Vec<Option<std::io::Result<usize>>> = (0..IN_FLIGHT).map(|_| None).collect();
    let mut issue_at = pos;
    let mut issued = 0usize;
    let mut hashed = 0usize;
    let mut outstanding = 0usize;
    let mut failed: Option<std::io::Error> = None;
    let mut resume = None;
    let mut completions = Vec::new();
    // Every request is reaped before `buf` goes, error or not: the kernel writes into it.
    loop {
        let stopping = failed.is_some() || resume.is_some() || pos >= end;
        while !stopping && issue_at < end && issued < hashed + IN_FLIGHT {
            let slot = issued % IN_FLIGHT;
            let req = Request {
                slot,
                op: Op::Read,
                offset: issue_at,
                // SAFETY: slot * CHUNK + CHUNK <= the buffer's length.
                buf: unsafe { base.add(slot * CHUNK) },
                len: want(issue_at, end),
            };
            if let Err(e) = ring.queue(req) {
                failed = Some(e);
                break;
            }
            outstanding += 1;
            issue_at += req.len as u64;
            issued += 1;
        }
        if failed.is_some() || resume.is_some() || pos >= end {
            if outstanding == 0 {
                break;
            }
        } else if let Some(done) = ready[hashed % IN_FLIGHT].take() {
            let n = match done {
                Ok(n) => n,
                Err(e) => {
                    failed = Some(e);
                    continue;
                }
            };
            let asked = want(pos, end);
            let take = (n as u64).min(end - pos) as usize;
            let slot = hashed % IN_FLIGHT;
            h.update(&buf.as_slice()[slot * CHUNK..slot * CHUNK + take]);
            pos += n as u64;
            hashed += 1;
            if n == 0 {
                pos = end; // EOF
            } else if n < asked && pos < end {
                // The file ends inside this chunk, or a short read: what follows is read
                // one request at a time (a 0-byte read then ends it at EOF).
                resume = Some(pos);
            }
            continue;
        }
        if let Err(e) = ring.reap(1, &mut completions) {
            // Nothing can be known about the requests in flight: give up on the ring only
            // once none is left.
            failed.get_or_insert(e);
            if outstanding == 0 {
                break;
            }
            continue;
        }
        for c in completions.drain(..) {
            outstanding -= 1;
            ready[c.slot] = Some(c.result);
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(resume)
}

/// Hash [pos, end) one synchronous read at a time.
fn hash_sync(f: &File, h: &mut Xxh3, mut pos: u64, end: u64) -> std::io::Result<()> {
    let mut buf = AlignedBuf::new(CHUNK);
    while pos < end {
        // Read whole blocks; only the bytes inside the range are hashed.
        let want = want(pos, end);
        let n = f.read_at(&mut buf.as_mut_slice()[..want], pos)?;
        if n == 0 {
            break;
        }
        let take = (n as u64).min(end - pos) as usize;
        h.update(&buf.as_slice()[..take]);
        pos += n as u64;
    }
    Ok(())
}

/// Make sure what the migration wrote is on the device before reading it back.
pub fn write_back(f: &File) -> std::io::Result<()> {
    f.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The reads in flight hash exactly what one read at a time hashes: ranges inside the
    /// file, across its end, past it, shorter than a block and longer than the reads in
    /// flight together.
    #[test]
    fn reads_in_flight_hash_what_synchronous_reads_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let len = 5 * CHUNK + 12_345;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        File::create(&path).unwrap().write_all(&data).unwrap();
        let f = File::open(&path).unwrap();
        let len = len as u64;
        for (off, n) in [
            (0, len),
            (0, 100),
            (4096, 3 * CHUNK as u64),
            (CHUNK as u64, len),
            (0, 2 * len),
            (len.next_multiple_of(4096), 8192),
        ] {
            let mut h = Xxh3::new();
            hash_sync(&f, &mut h, off, off + n).unwrap();
            assert_eq!(
                hash_with(&f, off, n).unwrap(),
                h.digest(),
                "range {off}+{n}"
            );
        }
        let whole = xxhash_rust::xxh3::xxh3_64(&data);
        assert_eq!(hash_with(&f, 0, len).unwrap(), whole);
    }
}
