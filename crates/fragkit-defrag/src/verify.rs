//! Checksums of a byte range, before and after a move.
//!
//! Before: the fragmented source is read from the device once. Readahead is asked for the
//! range first (POSIX_FADV_WILLNEED, one call per readahead window: the kernel clips each
//! call to max(io_pages, ra_pages), mm/readahead.c force_page_cache_ra, so one call for a
//! 4 MiB range read only the first 2.5 MiB here), which puts the range in the page cache
//! as order-0 folios (page_cache_ra_unbounded allocates at the mapping's minimum order)
//! with every fragment's read in flight at once. The checksum is then taken with buffered
//! reads that find those pages, and MOVE_EXT finds them uptodate and reads nothing.
//! Before this, the source was read three times (an O_DIRECT checksum, the readahead,
//! MOVE_EXT's own block reads of what the clipped readahead missed).
//! A migrator that moves in steps (ext4) takes the checksum as it goes instead
//! ([`BeforeHash`]): each MiB read just before the moves that cover it, so the range's
//! reads are spread over its move rather than sent to the device in one burst.
//! A buffered read of pages that are NOT cached goes through page_cache_sync_ra, which
//! allocates large folios on ext4 (6.16+) and xfs, and MOVE_EXT of a range held in large
//! folios wrote 284 MB for 67 MB moved (`bench writes -- defrag --mode full`, aged ext4,
//! 2026-11-23). So each chunk's residency is checked (cachestat(2)) before it is read;
//! a chunk not fully cached (evicted under memory pressure) gets its readahead again, and
//! if still not cached it is hashed with O_DIRECT instead: never the large-folio path.
//! After: O_DIRECT (one descriptor per file, opened once), so the checksum is what the
//! device holds; then the range's pages are dropped from the cache (as e4defrag does) so
//! a defrag run does not evict the applications' working set.
//! O_DIRECT reads go with several requests in flight through io_uring (the bench's
//! engine), not one synchronous read at a time.

use std::cell::{Cell, OnceCell, RefCell, RefMut};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};

use xxhash_rust::xxh3::Xxh3;

use fragkit_core::io::buf::AlignedBuf;
use fragkit_core::io::engine::{self, Engine, EngineKind, Op, Request};
use fragkit_sys::cachestat::cached_pages;
use fragkit_sys::fadvise::{fadvise, Advice};

const CHUNK: usize = 1 << 20;

/// The kernel's readahead window when the device does not say (VM_READAHEAD_PAGES).
const DEFAULT_READ_AHEAD: u64 = 128 << 10;

fn advise(f: &File, offset: u64, length: u64, advice: Advice) {
    // Advice only: a failure changes nothing.
    let _ = fadvise(f, offset, length, advice);
}

/// The page cache's readahead window for `f`'s device: its bdi's read_ahead_kb (the
/// ra_pages every WILLNEED call is clipped to, unless io_pages is larger).
pub(crate) fn read_ahead_window(f: &File) -> u64 {
    f.metadata()
        .ok()
        .and_then(|m| {
            fragkit_trace::collect::read_ahead_bytes(fragkit_sys::dev::kernel_dev(m.dev()))
        })
        .filter(|&w| w >= 4096)
        .unwrap_or(DEFAULT_READ_AHEAD)
}

/// Start reading [offset, offset+length) into the page cache, one WILLNEED call per
/// `window` (each call is clipped to the readahead window): all of it is submitted before
/// the first page is waited for.
pub(crate) fn prefetch(f: &File, offset: u64, length: u64, window: u64) {
    let end = offset + length;
    let mut pos = offset;
    while pos < end {
        let n = window.min(end - pos);
        advise(f, pos, n, Advice::WillNeed);
        pos += n;
    }
}

/// How the before-checksums of one file were read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BeforeReads {
    /// Chunks hashed from the page cache after the readahead.
    pub cached: u64,
    /// Chunks that were not (all) cached when hashed and needed their readahead again.
    pub readahead_again: u64,
    /// Chunks hashed with O_DIRECT because they stayed uncached (or cachestat is missing).
    pub direct: u64,
}

/// One file's checksums: its O_DIRECT descriptor is opened once, at the first read that
/// needs it, and reused for every range.
pub struct Sums<'a> {
    file: &'a File,
    direct: OnceCell<File>,
    window: u64,
    reads: Cell<BeforeReads>,
    /// The reads' buffer, taken at the first read from [`SPARE`] (or allocated) and put
    /// back there when the file is done: a fresh 4 MiB per range was zeroed, faulted in and
    /// unmapped again, more than half of the run's CPU (perf, bypass -j 1 on an aged ext4:
    /// 266 ranges, 1 GiB of memset and page faults); a fresh one per file was still 9% of
    /// full mode's CPU on 16 files of 4 MiB (perf, xfs).
    buf: RefCell<Option<AlignedBuf>>,
}

/// Read buffers of files whose checksums are done, for the next files'. At most one per
/// file being worked on at once comes back here, so this holds no more than the workers'
/// count.
static SPARE: std::sync::Mutex<Vec<AlignedBuf>> = std::sync::Mutex::new(Vec::new());

impl Drop for Sums<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.buf.get_mut().take() {
            if let Ok(mut spare) = SPARE.lock() {
                spare.push(b);
            }
        }
    }
}

impl<'a> Sums<'a> {
    pub fn new(file: &'a File) -> Sums<'a> {
        Sums {
            file,
            direct: OnceCell::new(),
            window: read_ahead_window(file),
            reads: Cell::new(BeforeReads::default()),
            buf: RefCell::new(None),
        }
    }

    fn direct(&self) -> std::io::Result<&File> {
        if let Some(d) = self.direct.get() {
            return Ok(d);
        }
        let d = open_direct(self.file)?;
        Ok(self.direct.get_or_init(|| d))
    }

    fn buffer(&self) -> RefMut<'_, AlignedBuf> {
        RefMut::map(self.buf.borrow_mut(), |b| {
            b.get_or_insert_with(|| {
                // Every read fills the bytes it hashes: what an earlier file left is never read.
                let spare = SPARE.lock().ok().and_then(|mut s| s.pop());
                spare.unwrap_or_else(|| AlignedBuf::new(CHUNK * IN_FLIGHT))
            })
        })
    }

    /// The readahead window used for this file's WILLNEED calls.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// How the before-checksums so far were read.
    pub(crate) fn before_reads(&self) -> BeforeReads {
        self.reads.get()
    }

    /// Drop the clean cached pages of [offset, offset+length) before its readahead, so the
    /// range comes back in order-0 folios. An application's buffered reads leave large
    /// folios (page_cache_sync_ra), and MOVE_EXT of a range held in them wrote 3.4× the
    /// bytes moved (111 MB for 32 MiB, bypass on a file read with `cat` first; 32.9 MB
    /// after dropping them; /sys/block/DEV/stat, ext4, kernel 6.18). Costs one device read
    /// of pages that were cached; they are cached again after the move. Dirty pages stay
    /// (the kernel only starts their writeback). Nothing is dropped for a range with no
    /// page cached (cachestat).
    pub(crate) fn drop_clean_pages(&self, offset: u64, length: u64) {
        if cached_pages(self.file, offset, length).is_none_or(|c| c > 0) {
            advise(self.file, offset, length, Advice::DontNeed);
        }
    }

    /// Readahead of [offset, offset+length) for a migration that is not verified.
    pub(crate) fn prefetch(&self, offset: u64, length: u64) {
        prefetch(self.file, offset, length, self.window);
    }

    /// Readahead of what [`BeforeHash::read_to`] reads first of [offset, offset+length).
    pub(crate) fn prefetch_start(&self, offset: u64, length: u64) {
        prefetch(self.file, offset, length.min(2 * CHUNK as u64), self.window);
    }

    /// xxh3-64 of [offset, offset+length) (clipped at EOF): the file's content now, read
    /// through the page cache after readahead, so the migration that follows finds the
    /// range cached. `offset` must be block-aligned (migration ranges are).
    pub(crate) fn hash_before(&self, offset: u64, length: u64) -> std::io::Result<u64> {
        self.hash_before_with(offset, length, || {})
    }

    /// hash_before with `between` run after the readahead and before the reads (tests evict
    /// the pages there).
    fn hash_before_with(
        &self,
        offset: u64,
        length: u64,
        between: impl FnOnce(),
    ) -> std::io::Result<u64> {
        self.prefetch(offset, length);
        between();
        let mut h = Xxh3::new();
        let size = self.file.metadata()?.size();
        let end = (offset + length).min(size);
        self.hash_cached(&mut h, offset, end)?;
        Ok(h.digest())
    }

    /// The before-checksum of [offset, offset+length) taken as the range moves: each
    /// [`BeforeHash::read_to`] reads (with readahead, then from the page cache, as
    /// [`Sums::hash_before`]) up to where the next move ends, a CHUNK at a time, with the
    /// next CHUNK's readahead out meanwhile.
    pub(crate) fn before_hash(
        &self,
        offset: u64,
        length: u64,
    ) -> std::io::Result<BeforeHash<'_, 'a>> {
        let size = self.file.metadata()?.size();
        Ok(BeforeHash {
            sums: self,
            h: RefCell::new(Xxh3::new()),
            done: Cell::new(offset),
            read_ahead: Cell::new(offset),
            end: (offset + length).min(size),
        })
    }

    /// Feed [pos, end) to `h`, CHUNK by CHUNK, each from the page cache when all of it is
    /// cached (after its readahead), else with O_DIRECT; false: a short read (the file
    /// shrank meanwhile) ended it early.
    fn hash_cached(&self, h: &mut Xxh3, mut pos: u64, end: u64) -> std::io::Result<bool> {
        let mut buf = self.buffer();
        let buf = &mut buf.as_mut_slice()[..CHUNK];
        let mut reads = self.reads.get();
        let mut whole = true;
        while pos < end {
            let n = (CHUNK as u64).min(end - pos);
            let pages = n.div_ceil(4096);
            let mut cached = cached_pages(self.file, pos, n);
            if cached.is_some_and(|c| c < pages) {
                reads.readahead_again += 1;
                prefetch(self.file, pos, n, self.window);
                cached = cached_pages(self.file, pos, n);
            }
            if cached.is_some_and(|c| c >= pages) {
                // Cached now; evicted between the check and the read, a page would come
                // back through the large-folio path: a cost, never a wrong checksum.
                // A short read (the file shrank meanwhile) ends the checksum there: the
                // content changed, which the stamp comparison reports.
                let mut got = 0usize;
                while got < n as usize {
                    let k = self
                        .file
                        .read_at(&mut buf[got..n as usize], pos + got as u64)?;
                    if k == 0 {
                        break;
                    }
                    got += k;
                }
                h.update(&buf[..got]);
                reads.cached += 1;
                if got < n as usize {
                    whole = false;
                    break;
                }
            } else {
                reads.direct += 1;
                hash_sync(self.direct()?, h, pos, pos + n, buf)?;
            }
            pos += n;
        }
        self.reads.set(reads);
        Ok(whole)
    }

    /// xxh3-64 of each range (clipped at EOF) as the device holds it, read with O_DIRECT,
    /// all of a file's ranges in one pass: one ring, reads of several ranges in flight at
    /// once. Dirty cached data is written back first by the kernel, as for any O_DIRECT
    /// read. The ranges' clean pages are dropped after. `pace`: called before each read
    /// with the bytes read so far and that read's (--max-rate).
    pub(crate) fn hash_after_all(
        &self,
        ranges: &[(u64, u64)],
        pace: Option<&(dyn Fn(u64) + Sync)>,
    ) -> Vec<std::io::Result<u64>> {
        let hashes = match self.direct() {
            Ok(d) => hash_ranges(d, ranges, &mut self.buffer(), pace),
            Err(e) => ranges
                .iter()
                .map(|_| Err(std::io::Error::new(e.kind(), e.to_string())))
                .collect(),
        };
        for (offset, length) in coalesced(ranges) {
            advise(self.file, offset, length, Advice::DontNeed);
        }
        hashes
    }

    /// hash_after_all of one range.
    #[cfg(test)]
    pub(crate) fn hash_after(&self, offset: u64, length: u64) -> std::io::Result<u64> {
        self.hash_after_all(&[(offset, length)], None)
            .pop()
            .unwrap_or_else(|| Ok(Xxh3::new().digest()))
    }
}

/// A range's before-checksum taken as it moves ([`Sums::before_hash`]).
pub(crate) struct BeforeHash<'s, 'a> {
    sums: &'s Sums<'a>,
    h: RefCell<Xxh3>,
    /// Read and hashed up to here.
    done: Cell<u64>,
    /// Readahead asked for up to here.
    read_ahead: Cell<u64>,
    /// The range's end, clipped at the file's size when it began.
    end: u64,
}

impl BeforeHash<'_, '_> {
    /// Read and hash the range up to `upto` (at least; whole CHUNKs), before anything
    /// below it moves.
    pub(crate) fn read_to(&self, upto: u64) -> std::io::Result<()> {
        let upto = upto.min(self.end);
        while self.done.get() < upto {
            let pos = self.done.get();
            let n = (CHUNK as u64).min(self.end - pos);
            // This chunk's readahead, and the next one's, so the device reads it while
            // this one is hashed and moved: a chunk or two queued, never the whole range;
            // each part asked for once.
            let from = self.read_ahead.get().max(pos);
            let to = (pos + 2 * CHUNK as u64).min(self.end);
            if from < to {
                prefetch(self.sums.file, from, to - from, self.sums.window);
                self.read_ahead.set(to);
            }
            let whole = self
                .sums
                .hash_cached(&mut self.h.borrow_mut(), pos, pos + n)?;
            // A short read: the file shrank; the checksum ends there (the stamp tells).
            self.done.set(if whole { pos + n } else { self.end });
        }
        Ok(())
    }

    /// The checksum, once all of the range was read before it moved.
    pub(crate) fn finish(self) -> std::io::Result<u64> {
        if self.done.get() < self.end {
            return Err(std::io::Error::other(format!(
                "read up to byte {} of the range ending at {} before it moved",
                self.done.get(),
                self.end
            )));
        }
        Ok(self.h.into_inner().digest())
    }
}

/// Ranges in offset order with overlapping and touching ones merged (one fadvise each).
fn coalesced(ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut sorted: Vec<(u64, u64)> = ranges.iter().copied().filter(|r| r.1 > 0).collect();
    sorted.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(sorted.len());
    for (off, len) in sorted {
        match out.last_mut() {
            Some(last) if off <= last.0 + last.1 => {
                last.1 = last.1.max(off + len - last.0);
            }
            _ => out.push((off, len)),
        }
    }
    out
}

/// `f` again with O_DIRECT; with O_NOATIME too where permitted, so that checking the file
/// leaves its atime as it was.
fn open_direct(f: &File) -> std::io::Result<File> {
    fragkit_sys::openat::open_without_atime(
        OpenOptions::new().read(true),
        libc::O_DIRECT,
        std::path::Path::new(&format!("/proc/self/fd/{}", f.as_raw_fd())),
    )
}

/// The O_DIRECT after-reads: SLOTS reads of up to PIECE bytes in flight, in one buffer
/// of CHUNK * IN_FLIGHT (4 MiB). Each read is at most PIECE (the block layer cuts larger
/// ones into max_sectors_kb pieces anyway: 128 KiB on a loop device), so a file's many
/// small ranges (bypass: 128 KiB windows) keep 16 reads in flight, and a long range the
/// same 4 MiB as before; one synchronous read at a time left the device idle between
/// reads (ScaleDefrag's finding about e4defrag's loop).
const IN_FLIGHT: usize = 4;
const PIECE: usize = 256 << 10;
const SLOTS: usize = CHUNK * IN_FLIGHT / PIECE;

/// xxh3-64 of [offset, offset+length) read through `f` (opened O_DIRECT).
#[cfg(test)]
fn hash_with(f: &File, offset: u64, length: u64, buf: &mut AlignedBuf) -> std::io::Result<u64> {
    hash_ranges(f, &[(offset, length)], buf, None)
        .pop()
        .unwrap_or_else(|| Ok(Xxh3::new().digest()))
}

/// xxh3-64 of each range, read through `f` (opened O_DIRECT): the ranges' reads in
/// order, SLOTS at once through io_uring (the bench's engine), hashed in order; one read
/// at a time where io_uring is not available or fails.
fn hash_ranges(
    f: &File,
    ranges: &[(u64, u64)],
    buf: &mut AlignedBuf,
    pace: Option<&(dyn Fn(u64) + Sync)>,
) -> Vec<std::io::Result<u64>> {
    let mut out: Vec<Option<std::io::Result<u64>>> = ranges.iter().map(|_| None).collect();
    // The ring lives and dies on a thread of its own: io_uring's completion and teardown
    // work flags its task with TIF_NOTIFY_SIGNAL, which signal_pending() reports, and
    // btrfs's DEFRAG_RANGE stops early when it sees a signal pending (measured: full mode
    // left a 16 MiB file defragmented only to 1.8-11 MiB in 4 of 4 runs with the ring on
    // the worker's thread, tests/defrag_crash.rs; whole with it here). One thread and one
    // ring per file: one per range cost a thread spawn and an io_uring_setup for each of
    // bypass's 128 KiB windows (2,129 of each, strace, docs/defrag.md).
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Ok(mut ring) = engine::open(EngineKind::Uring, f.as_raw_fd(), SLOTS as u32) {
                hash_in_flight(&mut *ring, f, buf, ranges, &mut out, pace);
            }
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    });
    // What the ring did not finish (no ring, or it failed), one read at a time.
    let slot = &mut buf.as_mut_slice()[..CHUNK];
    ranges
        .iter()
        .zip(out)
        .map(|(&(offset, length), done)| {
            done.unwrap_or_else(|| {
                let mut h = Xxh3::new();
                hash_sync(f, &mut h, offset, offset + length, slot)?;
                Ok(h.digest())
            })
        })
        .collect()
}

/// Bytes of the read that starts at `pos`: whole blocks up to `max`.
fn want(pos: u64, end: u64, max: usize) -> usize {
    (end - pos).next_multiple_of(4096).min(max as u64) as usize
}

/// One read of a range: which range, where, how many bytes.
#[derive(Clone, Copy)]
struct Piece {
    range: usize,
    pos: u64,
    len: usize,
}

/// Fill `out` with each range's hash, up to SLOTS reads outstanding. A short read that is
/// not at EOF finishes its range with synchronous reads; a read error is that range's
/// result. If the ring itself fails, the ranges not yet done stay None (the caller reads
/// them one at a time).
fn hash_in_flight(
    ring: &mut dyn Engine,
    f: &File,
    buf: &mut AlignedBuf,
    ranges: &[(u64, u64)],
    out: &mut [Option<std::io::Result<u64>>],
    pace: Option<&(dyn Fn(u64) + Sync)>,
) {
    assert!(buf.len() >= PIECE * SLOTS);
    let pieces: Vec<Piece> = ranges
        .iter()
        .enumerate()
        .flat_map(|(range, &(offset, length))| {
            let end = offset + length;
            let mut pos = offset;
            std::iter::from_fn(move || {
                (pos < end).then(|| {
                    let len = want(pos, end, PIECE);
                    let p = Piece { range, pos, len };
                    pos += len as u64;
                    p
                })
            })
        })
        .collect();
    // Ranges with nothing to read hash nothing.
    for (o, r) in out.iter_mut().zip(ranges) {
        if r.1 == 0 {
            *o = Some(Ok(Xxh3::new().digest()));
        }
    }
    // Not registered (fixed buffers): pinning 4 MiB cost 1.2 ms a call, more than the
    // per-request pinning it saves on a few reads (strace -c, docs/defrag.md).
    let base = buf.as_mut_ptr();
    // Piece i reads into slot i % SLOTS.
    let mut ready: Vec<Option<std::io::Result<usize>>> = (0..SLOTS).map(|_| None).collect();
    let mut issued = 0usize;
    let mut issued_bytes = 0u64;
    let mut hashed = 0usize;
    let mut outstanding = 0usize;
    let mut broken = false;
    let mut h = Xxh3::new();
    let mut completions = Vec::new();
    // For a range finished synchronously after a short read (the slots are in use).
    let mut spare: Option<AlignedBuf> = None;
    // Every request is reaped before `buf` goes, error or not: the kernel writes into it.
    loop {
        while !broken && issued < pieces.len() && issued < hashed + SLOTS {
            let p = pieces[issued];
            if out[p.range].is_some() {
                // Its range already ended (EOF, short read, error): its slot stays empty.
                ready[issued % SLOTS] = Some(Ok(0));
                issued += 1;
                continue;
            }
            issued_bytes += p.len as u64;
            if let Some(pace) = pace {
                pace(issued_bytes);
            }
            let req = Request {
                slot: issued % SLOTS,
                op: Op::Read,
                offset: p.pos,
                // SAFETY: slot * PIECE + PIECE <= the buffer's length.
                buf: unsafe { base.add((issued % SLOTS) * PIECE) },
                len: p.len,
            };
            if ring.queue(req).is_err() {
                broken = true;
                break;
            }
            outstanding += 1;
            issued += 1;
        }
        if broken || hashed == pieces.len() {
            if outstanding == 0 {
                break;
            }
        } else if let Some(done) = ready[hashed % SLOTS].take() {
            let p = pieces[hashed];
            hashed += 1;
            if out[p.range].is_some() {
                continue; // the range ended before this piece
            }
            let (offset, length) = ranges[p.range];
            let end = offset + length;
            if p.pos == offset {
                h = Xxh3::new();
            }
            let n = match done {
                Ok(n) => n,
                Err(e) => {
                    out[p.range] = Some(Err(e));
                    continue;
                }
            };
            let take = (n as u64).min(end - p.pos) as usize;
            let slot = (hashed - 1) % SLOTS;
            h.update(&buf.as_slice()[slot * PIECE..slot * PIECE + take]);
            let at = p.pos + n as u64;
            if n == 0 || at >= end {
                out[p.range] = Some(Ok(h.digest())); // EOF, or the range's last read
            } else if n < p.len {
                // The file ends inside this read, or a short read: the rest one read at a
                // time (a 0-byte read then ends it at EOF).
                let spare = spare.get_or_insert_with(|| AlignedBuf::new(CHUNK));
                out[p.range] =
                    Some(hash_sync(f, &mut h, at, end, spare.as_mut_slice()).map(|()| h.digest()));
            }
            continue;
        }
        // (A range half hashed when the ring fails stays None and is read again whole.)
        if ring.reap(1, &mut completions).is_err() {
            // Nothing can be known about the requests in flight: give up on the ring once
            // none is left; the unfinished ranges are read one at a time.
            broken = true;
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
}

/// Hash [pos, end) one synchronous read at a time into `buf` (CHUNK bytes, aligned for
/// O_DIRECT).
fn hash_sync(
    f: &File,
    h: &mut Xxh3,
    mut pos: u64,
    end: u64,
    buf: &mut [u8],
) -> std::io::Result<()> {
    while pos < end {
        // Read whole blocks; only the bytes inside the range are hashed.
        let want = want(pos, end, buf.len());
        let n = f.read_at(&mut buf[..want], pos)?;
        if n == 0 {
            break;
        }
        let take = (n as u64).min(end - pos) as usize;
        h.update(&buf[..take]);
        pos += n as u64;
    }
    Ok(())
}

/// Make sure what the migration wrote is on the device before reading it back.
pub(crate) fn write_back(f: &File) -> std::io::Result<()> {
    f.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The reads in flight hash exactly what one read at a time hashes: ranges inside the
    /// file, across its end, past it, empty, shorter than a block and longer than the
    /// reads in flight together; one range at a time and many at once.
    #[test]
    fn reads_in_flight_hash_what_synchronous_reads_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let len = 5 * CHUNK + 12_345;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        File::create(&path).unwrap().write_all(&data).unwrap();
        let f = File::open(&path).unwrap();
        let len = len as u64;
        let mut buf = AlignedBuf::new(CHUNK * IN_FLIGHT);
        let mut ranges = vec![
            (0, len),
            (0, 100),
            (4096, 3 * CHUNK as u64),
            (CHUNK as u64, len),
            (0, 2 * len),
            (len.next_multiple_of(4096), 8192),
            (8192, 0),
        ];
        // Many small ranges, as bypass verifies them: more than SLOTS, each inside one
        // read or across two, one ending in the file's last block.
        ranges.extend((0..40).map(|i| (i * 131_072, 131_072 + (i % 3) * 4096)));
        ranges.push((len - 5000, 4096 * 3));
        let mut each = Vec::new();
        for &(off, n) in &ranges {
            let mut h = Xxh3::new();
            hash_sync(&f, &mut h, off, off + n, &mut buf.as_mut_slice()[..CHUNK]).unwrap();
            assert_eq!(
                hash_with(&f, off, n, &mut buf).unwrap(),
                h.digest(),
                "range {off}+{n}"
            );
            each.push(h.digest());
        }
        // All at once, reads of several ranges in flight: the same hashes, in order.
        let all: Vec<u64> = hash_ranges(&f, &ranges, &mut buf, None)
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(all, each);
        let whole = xxhash_rust::xxh3::xxh3_64(&data);
        assert_eq!(hash_with(&f, 0, len, &mut buf).unwrap(), whole);
    }

    /// A file of `len` bytes on a real file system (the tests' temporary directory; on
    /// tmpfs eviction is a no-op and the eviction test says so), written back and dropped
    /// from the cache so the first read comes from the device.
    fn cold_file(len: usize) -> (tempfile::TempDir, File, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..len).map(|i| (i * 13 % 253) as u8).collect();
        let mut w = File::create(&path).unwrap();
        w.write_all(&data).unwrap();
        w.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        advise(&f, 0, 0, Advice::DontNeed);
        (dir, f, data)
    }

    /// The before-checksum read through the cache is the file's content, every chunk came
    /// from the cache the readahead filled, and the O_DIRECT after-checksum agrees.
    /// Read as the range moves, in steps of any size that end anywhere: the same checksum
    /// as read whole first; and no checksum when the moves went past what was read.
    #[test]
    fn before_checksum_read_as_it_moves_is_the_content() {
        let len = 3 * CHUNK + 5000;
        let (_d, f, data) = cold_file(len);
        let sums = Sums::new(&f);
        let b = sums.before_hash(4096, len as u64).unwrap();
        for upto in [
            4096,
            70_000,
            70_000,
            1 << 20,
            (2 << 20) + 12_288,
            len as u64 + 4096,
        ] {
            b.read_to(upto).unwrap();
        }
        assert_eq!(
            b.finish().unwrap(),
            xxhash_rust::xxh3::xxh3_64(&data[4096..])
        );
        let short = sums.before_hash(0, len as u64).unwrap();
        short.read_to(CHUNK as u64).unwrap();
        let e = short.finish().unwrap_err();
        assert!(e.to_string().contains("before it moved"), "{e}");
    }

    #[test]
    fn before_checksum_from_the_cache_is_the_content() {
        let len = 3 * CHUNK + 5000;
        let (_d, f, data) = cold_file(len);
        let sums = Sums::new(&f);
        let h = sums.hash_before(4096, len as u64).unwrap();
        assert_eq!(h, xxhash_rust::xxh3::xxh3_64(&data[4096..]));
        let r = sums.before_reads();
        if cached_pages(&f, 0, 4096).is_some() {
            assert_eq!((r.cached, r.direct), (4, 0), "{r:?}");
        }
        assert_eq!(sums.hash_after(4096, len as u64).unwrap(), h);
    }

    /// A file done hands its read buffer to the next (one per file was 9% of a full run's
    /// CPU): what the first file left in it never reaches the second's checksums, before or
    /// after, for a second file shorter than one read and one ending inside a read.
    #[test]
    fn a_reused_buffer_hashes_only_the_next_files_bytes() {
        let (_a, fa, _) = cold_file(4 * CHUNK);
        let first = Sums::new(&fa);
        first.hash_before(0, 4 * CHUNK as u64).unwrap();
        first.hash_after(0, 4 * CHUNK as u64).unwrap();
        drop(first);
        for len in [5000, 2 * CHUNK + 12_345] {
            let (_b, fb, data) = cold_file(len);
            let next = Sums::new(&fb);
            let whole = xxhash_rust::xxh3::xxh3_64(&data);
            assert_eq!(next.hash_before(0, 4 * CHUNK as u64).unwrap(), whole);
            assert_eq!(next.hash_after(0, 4 * CHUNK as u64).unwrap(), whole);
        }
    }

    /// Pages evicted between the readahead and the reads: the chunk gets its readahead
    /// again (not a buffered read's large-folio path), and the checksum is still the
    /// file's content.
    #[test]
    fn pages_evicted_after_readahead_still_hash_the_content() {
        let len = 2 * CHUNK;
        let (_d, f, data) = cold_file(len);
        if cached_pages(&f, 0, 4096).is_none() {
            eprintln!("cachestat(2) not available: the O_DIRECT path is taken, as tested above");
            return;
        }
        let sums = Sums::new(&f);
        let evict = || {
            // The readahead's pages are locked until read; DONTNEED drops only the ones
            // that are done, so repeat until none is left.
            for _ in 0..1000 {
                advise(&f, 0, len as u64, Advice::DontNeed);
                if cached_pages(&f, 0, len as u64) == Some(0) {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            false
        };
        let mut evicted = false;
        let h = sums
            .hash_before_with(0, len as u64, || evicted = evict())
            .unwrap();
        assert_eq!(h, xxhash_rust::xxh3::xxh3_64(&data));
        if !evicted {
            eprintln!("pages could not be evicted here (tmpfs?): nothing more to check");
            return;
        }
        let r = sums.before_reads();
        assert_eq!(r.readahead_again, 2, "{r:?}");
        assert_eq!(r.cached + r.direct, 2, "{r:?}");
    }
}
