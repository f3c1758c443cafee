//! The replay engine: an FTL that maps 4 KiB logical units in write order (or, with the
//! approach, by file offset) and NVMeVirt-style resource timing of dies, channels and the
//! host link.
//!
//! Timing follows NVMeVirt's `ssd_advance_nand` [DA]: a read senses the page on its die
//! (`read_ns`), then moves it over the die's channel in `channel_xfer_bytes` pieces, each
//! piece overlapped with its host-link transfer; the die stays busy until its channel
//! transfer ends. A write is acknowledged once in the write buffer (`WRITE_EARLY_COMPLETION`)
//! and programs a page when the page fills (channel transfer, then `program_ns`). A flush
//! completes when every die is idle (`conv_flush`). Every resource keeps a "free from"
//! time and is reserved in replay order (NVMeVirt's `next_lun_avail_time`), so the result
//! depends only on the trace and the parameters: integer nanoseconds throughout.
//!
//! Replay keeps the recorded program's dependencies, not the recorded device's speed: a
//! request waits for the requests that had completed before it was issued in the
//! recording, then for the host time the recording shows between those completions and its
//! issue (think time, sleeps); requests in flight together in the recording are in flight
//! together in the model, up to `queue_depth` device commands.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use serde::Serialize;

use super::params::{ParamError, Params, MAP_UNIT};
use super::replay::{Busy, Dependencies};
use super::trace::{Op, Request};

/// Where the FTL puts written units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Conventional FTL: write order, g bytes per die, then the next die.
    #[default]
    WriteOrder,
    /// FAST'24's host-assisted placement (NVMeVirt_DA): an append continues on the die
    /// after the file's previous block, an overwrite returns to the old data's die, so a
    /// file's consecutive g-sized pieces sit on consecutive dies whatever was written in
    /// between. Requests without an inode/offset in the trace continue in write order.
    Approach,
}

/// Chunk keys (4 MiB of units each) → chunk numbers in a [`Chunks`] arena.
#[derive(Default)]
struct ChunkIndex {
    /// Chunk number + 1 of each key below `DENSE` (0: not allocated), grown to the
    /// highest key used: one load per lookup, no hashing.
    dense: Vec<u32>,
    /// Chunks at or beyond `DENSE` (a trace's far end of a huge address space).
    sparse: HashMap<u64, u32>,
}

const CHUNK: usize = 1024;
/// Keys (4 MiB each) the dense index covers: 16 TiB, at most 16 MiB of index.
const DENSE: u64 = 1 << 22;

impl ChunkIndex {
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        if key < DENSE {
            match self.dense.get(key as usize) {
                Some(&i) if i != 0 => Some(i as usize - 1),
                _ => None,
            }
        } else {
            self.sparse.get(&key).map(|&i| i as usize)
        }
    }

    #[inline]
    fn find_or_create(&mut self, key: u64, chunks: &mut Chunks) -> usize {
        if let Some(i) = self.find(key) {
            return i;
        }
        let i = chunks.push();
        if key < DENSE {
            if self.dense.len() <= key as usize {
                self.dense.resize(key as usize + 1, 0);
            }
            self.dense[key as usize] = i as u32 + 1;
        } else {
            self.sparse.insert(key, i as u32);
        }
        i
    }
}

/// A map entry: 32 bits, so a cache line holds 16 and a read's entries take half the
/// lines 64 bits did. 0 is "unmapped"; a value that does not fit is kept aside (`WIDE`).
type Entry = u32;
/// The entry of a value kept in [`Chunks::wide`].
const WIDE: Entry = Entry::MAX;

/// Chunks of `CHUNK` entries (0: unmapped), one after another (chunk i at `i * CHUNK`):
/// one allocation, which the kernel may back with huge pages (random lookups miss the
/// TLB less), shared by every index that allocates from it.
#[derive(Default)]
struct Chunks {
    units: Vec<Entry>,
    /// Values of `WIDE` entries, by position in `units`.
    wide: HashMap<usize, u64>,
}

impl Chunks {
    fn len(&self) -> usize {
        self.units.len() / CHUNK
    }

    /// A new zeroed chunk; its number.
    fn push(&mut self) -> usize {
        let i = self.len();
        let cap = self.units.capacity();
        self.units.resize(self.units.len() + CHUNK, 0);
        if self.units.capacity() != cap {
            fragkit_sys::vm::hint_huge_pages(&self.units);
        }
        i
    }

    #[inline]
    fn chunk(&self, i: usize) -> &[Entry; CHUNK] {
        self.units[i * CHUNK..(i + 1) * CHUNK]
            .try_into()
            .expect("whole chunk")
    }

    /// Position in `units` of `lpn`'s entry in chunk `i`.
    #[inline]
    fn pos(i: usize, lpn: u64) -> usize {
        i * CHUNK + (lpn % CHUNK as u64) as usize
    }

    /// The value of entry `e` at `pos` (0: unmapped).
    #[inline]
    fn value(&self, pos: usize, e: Entry) -> u64 {
        if e == WIDE {
            self.wide[&pos]
        } else {
            e as u64
        }
    }

    #[inline]
    fn load(&self, pos: usize) -> u64 {
        self.value(pos, self.units[pos])
    }

    /// Set entries `pos..pos + n` to the values `first..first + n`, or to `values` when
    /// given (then n = values.len()); how many of them were 0 (unmapped) before.
    #[inline]
    fn store_run(&mut self, pos: usize, n: usize, first: u64, values: Option<&[u64]>) -> u64 {
        let slots = &mut self.units[pos..pos + n];
        let (fresh, wide_here) = slots.iter().fold((0, false), |(f, w), &e| {
            (f + u64::from(e == 0), w | (e == WIDE))
        });
        let largest = match values {
            Some(v) => v.iter().copied().fold(0, u64::max),
            None => first + n as u64 - 1,
        };
        if !wide_here && largest < WIDE as u64 {
            // The common case: every old and new value fits an entry.
            match values {
                Some(v) => {
                    for (s, &v) in slots.iter_mut().zip(v) {
                        *s = v as Entry;
                    }
                }
                None => {
                    for (s, v) in slots.iter_mut().zip(first..) {
                        *s = v as Entry;
                    }
                }
            }
        } else {
            for k in 0..n {
                let v = values.map_or(first + k as u64, |v| v[k]);
                self.store(pos + k, v);
            }
        }
        fresh
    }

    /// Set the value at `pos`; the value it had.
    fn store(&mut self, pos: usize, v: u64) -> u64 {
        let old = self.units[pos];
        let was = if old == WIDE {
            self.wide.remove(&pos).expect("wide value")
        } else {
            old as u64
        };
        self.units[pos] = match Entry::try_from(v) {
            Ok(e) if e != WIDE => e,
            _ => {
                self.wide.insert(pos, v);
                WIDE
            }
        };
        was
    }
}

/// Logical-to-physical map in 4 MiB chunks allocated on first write: memory grows with
/// the mapped pages (and 4 bytes of index per 4 MiB below the highest chunk written),
/// not with the device size.
#[derive(Default)]
struct PageMap {
    index: ChunkIndex,
    chunks: Chunks,
    mapped: u64,
}

impl PageMap {
    #[cfg(test)]
    fn chunks(&self) -> usize {
        self.chunks.len()
    }

    /// The entries of `lpn..end` (0 where unmapped) to `f` with the position of the first
    /// in the arena (for [`Chunks::value`]), a chunk's run at a time.
    #[inline]
    fn for_range(&self, mut lpn: u64, end: u64, mut f: impl FnMut(&[Entry], usize)) {
        const ZEROS: [Entry; CHUNK] = [0; CHUNK];
        while lpn < end {
            let key = lpn / CHUNK as u64;
            let at = (lpn % CHUNK as u64) as usize;
            let n = ((key + 1) * CHUNK as u64).min(end) - lpn;
            let (c, base): (&[Entry; CHUNK], usize) = match self.index.find(key) {
                Some(i) => (self.chunks.chunk(i), i * CHUNK),
                None => (&ZEROS, 0),
            };
            f(&c[at..at + n as usize], base + at);
            lpn += n;
        }
    }

    /// Map `lpn..lpn + values.len()` to `values` (all non-zero), a chunk at a time.
    fn set_range(&mut self, mut lpn: u64, mut values: &[u64]) {
        while !values.is_empty() {
            let key = lpn / CHUNK as u64;
            let at = (lpn % CHUNK as u64) as usize;
            let n = (CHUNK - at).min(values.len());
            let i = self.index.find_or_create(key, &mut self.chunks);
            self.mapped += self
                .chunks
                .store_run(i * CHUNK + at, n, 0, Some(&values[..n]));
            values = &values[n..];
            lpn += n as u64;
        }
    }

    /// The entry of `lpn`, when mapped.
    #[inline]
    fn get(&self, lpn: u64) -> Option<u64> {
        let i = self.index.find(lpn / CHUNK as u64)?;
        let v = self.chunks.load(Chunks::pos(i, lpn));
        (v != 0).then_some(v)
    }

    /// Ask the cache for the entry of `lpn` ahead of its use (no effect on results).
    #[inline]
    fn prefetch(&self, lpn: u64) {
        if let Some(i) = self.index.find(lpn / CHUNK as u64) {
            prefetch(&self.chunks.units[Chunks::pos(i, lpn)]);
        }
    }

    fn set(&mut self, lpn: u64, v: u64) {
        let key = lpn / CHUNK as u64;
        let i = if v != 0 {
            Some(self.index.find_or_create(key, &mut self.chunks))
        } else {
            self.index.find(key)
        };
        if let Some(i) = i {
            let was = self.chunks.store(Chunks::pos(i, lpn), v);
            match (was != 0, v != 0) {
                (false, true) => self.mapped += 1,
                (true, false) => self.mapped -= 1,
                _ => {}
            }
        }
    }
}

/// Start loading the cache line of `x` (a hint: nothing changes but the time).
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and cannot fault; `x` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (x as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Hasher for inode numbers: one multiply (keys come from a trace, not an adversary).
#[derive(Default)]
struct InoHasher(u64);

impl std::hash::Hasher for InoHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The approach's (inode, file unit) → logical unit map: one chunk index per file, all
/// files' chunks in one arena (one allocation the kernel may back with huge pages, where
/// a map per file took 4 KiB pages and missed the TLB on most lookups), so recording a
/// write costs a chunk's run of stores, not a hash insert per 4 KiB.
#[derive(Default)]
struct FileUnits {
    /// Inode → its index in `files`.
    slots: HashMap<u64, u32, std::hash::BuildHasherDefault<InoHasher>>,
    files: Vec<ChunkIndex>,
    /// Logical unit + 1 of each file unit (0: never written).
    chunks: Chunks,
}

impl FileUnits {
    /// The index of file `ino`, when it has been written.
    #[inline]
    fn find(&self, ino: u64) -> Option<usize> {
        self.slots.get(&ino).map(|&f| f as usize)
    }

    /// The index of file `ino`, made on its first write.
    fn find_or_create(&mut self, ino: u64) -> usize {
        let next = self.files.len() as u32;
        let f = *self.slots.entry(ino).or_insert(next);
        if f == next {
            self.files.push(ChunkIndex::default());
        }
        f as usize
    }

    /// The logical unit file `f`'s unit `fu` was last written to.
    #[inline]
    fn get(&self, f: usize, fu: u64) -> Option<u64> {
        let i = self.files[f].find(fu / CHUNK as u64)?;
        self.chunks.load(Chunks::pos(i, fu)).checked_sub(1)
    }

    /// Ask the cache for file `f`'s entry of unit `fu` (no effect on results).
    #[inline]
    fn prefetch(&self, f: usize, fu: u64) {
        if let Some(i) = self.files[f].find(fu / CHUNK as u64) {
            prefetch(&self.chunks.units[Chunks::pos(i, fu)]);
        }
    }

    /// File units `fu..fu + n` of file `f` now live at logical units `lpn..lpn + n`.
    fn set(&mut self, f: usize, mut fu: u64, mut lpn: u64, mut n: u64) {
        while n > 0 {
            let key = fu / CHUNK as u64;
            let at = (fu % CHUNK as u64) as usize;
            let k = (CHUNK - at).min(n as usize);
            let i = self.files[f].find_or_create(key, &mut self.chunks);
            self.chunks.store_run(i * CHUNK + at, k, lpn + 1, None);
            fu += k as u64;
            lpn += k as u64;
            n -= k as u64;
        }
    }
}

/// Division by a number fixed for the replay: a shift when it is a power of two.
#[derive(Clone, Copy)]
struct Divisor {
    d: u64,
    shift: Option<u32>,
}

impl Divisor {
    fn new(d: u64) -> Divisor {
        Divisor {
            d,
            shift: d.is_power_of_two().then(|| d.trailing_zeros()),
        }
    }

    #[inline]
    fn div(self, x: u64) -> u64 {
        match self.shift {
            Some(s) => x >> s,
            None => x / self.d,
        }
    }

    #[inline]
    fn divides(self, x: u64) -> bool {
        match self.shift {
            Some(s) => x & ((1 << s) - 1) == 0,
            None => x.is_multiple_of(self.d),
        }
    }
}

/// A map value: die and unit on the die, with as few bits for the die as the device
/// needs (values stay small enough for a 32-bit [`Entry`] while a die has under 2^29
/// units written with 8 dies).
#[derive(Clone, Copy)]
struct Packing {
    die_bits: u32,
}

impl Packing {
    fn new(dies: u32) -> Packing {
        Packing {
            die_bits: u32::BITS - dies.saturating_sub(1).leading_zeros(),
        }
    }

    #[inline]
    fn pack(self, die: u32, local: u64) -> u64 {
        ((local << self.die_bits) | die as u64) + 1
    }

    #[inline]
    fn unpack(self, v: u64) -> (u32, u64) {
        let v = v - 1;
        ((v & ((1 << self.die_bits) - 1)) as u32, v >> self.die_bits)
    }
}

/// What a replay found. All times in nanoseconds of modeled time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub model: String,
    pub placement: Placement,
    pub reads: u64,
    pub writes: u64,
    pub discards: u64,
    pub flushes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Read bytes that hit never-written units (no NAND time, as in NVMeVirt).
    pub unmapped_read_bytes: u64,
    /// Time at least one read was in flight (idle host time excluded).
    pub read_time_ns: u64,
    /// From the first issue to the last completion, idle time included.
    pub total_time_ns: u64,
    /// read_bytes / read_time (MB = 10^6 bytes).
    pub read_mb_s: f64,
    /// FAST'24's die-level collisions: page reads a read group (see [`Report::read_groups`])
    /// put on a die beyond an even spread of its pages over all dies (sum over dies of
    /// pages − ⌈pages / dies⌉). A contiguous read has none; a file whose chunks all sit on
    /// one die has nearly all.
    pub collisions: u64,
    /// Read groups with at least one collision.
    pub collided_reads: u64,
    /// Read groups: device reads that continue one another's file bytes (device bytes
    /// when the trace names no file) and were issued before the group's first read
    /// completed. One application request at queue depth 1, however many pieces its
    /// file's fragments cut it into; a sequential stream's requests in flight together.
    pub read_groups: u64,
    /// Flash page reads that waited for a die busy with another request or a program.
    pub queued: u64,
    /// Flash page reads that waited for a die busy with the same request.
    pub waited_same_request: u64,
    /// Flash page reads issued.
    pub page_reads: u64,
    /// Per die: share of read_time the die spent reading for reads.
    pub die_utilisation: Vec<f64>,
    /// Time the busiest channel spent moving read data from its dies.
    pub busiest_channel_ns: u64,
    /// The recording's own read time and MB/s (the device that was traced).
    pub recorded_read_time_ns: u64,
    pub recorded_read_mb_s: f64,
    /// 4 KiB units mapped at the end (memory is proportional to this).
    pub mapped_units: u64,
}

/// A shared link (channel, host interface): booked intervals, sorted. A transfer takes the
/// first gap that fits at or after it is ready, so a piece ready early is not queued behind
/// one that was booked first but is ready later.
#[derive(Default)]
struct Calendar {
    busy: Vec<(u64, u64)>,
}

impl Calendar {
    /// Book `dur` at the first gap that fits at or after `ready`; the booking.
    #[inline]
    fn reserve(&mut self, ready: u64, dur: u64) -> (u64, u64) {
        // Nearly half the bookings start after the last one ended (the link is free from
        // `ready` on): no search, and no call.
        match self.busy.last_mut() {
            Some(last) if last.1 > ready => self.reserve_before_last(ready, dur),
            Some(last) if last.1 == ready => {
                last.1 = ready + dur;
                (ready, ready + dur)
            }
            _ => {
                self.busy.push((ready, ready + dur));
                (ready, ready + dur)
            }
        }
    }

    /// [`Calendar::reserve`] when the last booking ends after `ready`.
    #[inline(never)]
    fn reserve_before_last(&mut self, ready: u64, dur: u64) -> (u64, u64) {
        let mut s = ready;
        // First booking that ends after `ready`: usually among the last few (bookings
        // are made close to the latest ones), so look there before a binary search.
        let n = self.busy.len();
        let mut i = n - 1;
        while i > 0 && n - i < 8 && self.busy[i - 1].1 > ready {
            i -= 1;
        }
        if i > 0 && n - i == 8 && self.busy[i - 1].1 > ready {
            i = self.busy[..i].partition_point(|&(_, e)| e <= ready);
        }
        while i < self.busy.len() {
            let (bs, be) = self.busy[i];
            if s + dur <= bs {
                break;
            }
            s = s.max(be);
            i += 1;
        }
        let e = s + dur;
        // Merge with touching neighbours to keep the list short.
        if i > 0 && self.busy[i - 1].1 == s {
            self.busy[i - 1].1 = e;
            if i < self.busy.len() && self.busy[i].0 == e {
                self.busy[i - 1].1 = self.busy[i].1;
                self.busy.remove(i);
            }
        } else if i < self.busy.len() && self.busy[i].0 == e {
            self.busy[i].0 = s;
        } else {
            self.busy.insert(i, (s, e));
        }
        (s, e)
    }

    /// Forget bookings that end before `t`, once more than 32 have ended or all have (the
    /// same bookings as a search on every call would drop; the common case needs none).
    fn prune(&mut self, t: u64) {
        match self.busy.last() {
            None => {}
            Some(&(_, e)) if e <= t => self.busy.clear(),
            Some(_) if self.busy.get(32).is_some_and(|&(_, e)| e <= t) => {
                let n = self.busy.partition_point(|&(_, e)| e <= t);
                self.busy.drain(..n);
            }
            Some(_) => {}
        }
    }
}

/// Closed-loop readers' state (see [`Ssd::closed_reads`]).
struct ClosedReads {
    from_ns: u64,
    readers: u32,
    /// The non-read requests' dependencies: a read the recording issued after such a
    /// request completed still starts after it on the model (reads follow the writes they
    /// read).
    writes: Dependencies,
    /// When each reader is free again.
    free: BinaryHeap<Reverse<u64>>,
    started: bool,
    /// The current group's start and latest completion.
    group_start: u64,
    group_done: u64,
}

/// The read group being counted (see [`Report::read_groups`]).
struct ReadGroup {
    /// The file, when the trace resolved one; else the group follows device bytes.
    inode: Option<u64>,
    /// The file offset (or device byte) the next read of the group starts at.
    next: u64,
    /// When the group's first read completed in the recording.
    first_complete: u64,
}

impl ReadGroup {
    fn continued_by(&self, r: &Request) -> bool {
        let at = match (self.inode, r.inode, r.offset) {
            (Some(i), Some(j), Some(o)) => i == j && o == self.next,
            (None, _, None) | (None, None, _) => r.byte_offset() == self.next,
            _ => false,
        };
        at && r.issue_ns < self.first_complete
    }
}

pub struct Ssd {
    p: Params,
    placement: Placement,
    dies: u32,
    packing: Packing,
    units_per_g: Divisor,
    units_per_page: Divisor,
    /// Each die's channel.
    die_channel: Vec<usize>,
    /// Transfer times of a full channel piece on the channel and on the host link, and
    /// of a page on the channel.
    piece_ch_ns: u64,
    piece_host_ns: u64,
    page_ch_ns: u64,
    read_ns: u64,
    map: PageMap,
    // Write pointers.
    cur_die: u32,
    local: Vec<u64>,
    /// The approach: (inode, file unit) → logical unit of resolved writes, so an append
    /// can find the die of the file's previous block.
    file_units: FileUnits,
    // Resources: free-from times.
    die_free: Vec<u64>,
    die_owner: Vec<u64>,
    die_busy: Vec<u64>,
    /// Per channel: time spent moving read data.
    ch_read_busy: Vec<u64>,
    ch: Vec<Calendar>,
    host: Calendar,
    inflight: BinaryHeap<Reverse<u64>>,
    // Replay state.
    deps: Dependencies,
    last_start: u64,
    end: u64,
    reads_busy: Busy,
    recorded_busy: Busy,
    seq: u64,
    /// Reads re-timed as closed-loop readers (see [`Ssd::closed_reads`]).
    closed: Option<ClosedReads>,
    /// The read group being counted, and per die its page reads; the dies it touched.
    group: Option<ReadGroup>,
    pages_on: Vec<u32>,
    touched: Vec<u32>,
    /// Reused buffer of map entries.
    scratch: Vec<u64>,
    r: Report,
}

impl Ssd {
    pub fn new(p: &Params, placement: Placement) -> Result<Ssd, ParamError> {
        p.validate()?;
        let dies = p.dies();
        Ok(Ssd {
            placement,
            dies,
            packing: Packing::new(dies),
            units_per_g: Divisor::new(p.g_bytes / MAP_UNIT),
            units_per_page: Divisor::new(p.page_bytes / MAP_UNIT),
            die_channel: (0..dies).map(|d| (d % p.channels) as usize).collect(),
            piece_ch_ns: Params::xfer_ns(p.channel_xfer_bytes, p.channel_mb_s),
            piece_host_ns: Params::xfer_ns(p.channel_xfer_bytes, p.host_mb_s),
            page_ch_ns: Params::xfer_ns(p.page_bytes, p.channel_mb_s),
            read_ns: p.read_ns,
            map: PageMap::default(),
            cur_die: 0,
            local: vec![0; dies as usize],
            file_units: FileUnits::default(),
            die_free: vec![0; dies as usize],
            die_owner: vec![u64::MAX; dies as usize],
            die_busy: vec![0; dies as usize],
            ch_read_busy: vec![0; p.channels as usize],
            ch: (0..p.channels).map(|_| Calendar::default()).collect(),
            host: Calendar::default(),
            inflight: BinaryHeap::new(),
            deps: Dependencies::default(),
            last_start: 0,
            end: 0,
            reads_busy: Busy::default(),
            recorded_busy: Busy::default(),
            seq: 0,
            closed: None,
            group: None,
            pages_on: vec![0; dies as usize],
            touched: Vec::new(),
            scratch: Vec::new(),
            r: Report {
                model: p.name.clone(),
                placement,
                ..Report::default()
            },
            p: p.clone(),
        })
    }

    /// Replay a whole trace.
    pub fn replay(
        p: &Params,
        placement: Placement,
        requests: &[Request],
    ) -> Result<Report, ParamError> {
        let mut ssd = Ssd::new(p, placement)?;
        ssd.submit_all(requests);
        Ok(ssd.finish())
    }

    /// Replay the reads issued at or after `from_ns` (in the recording's clock) as
    /// `readers` closed-loop readers instead of with the recording's overlap: each read
    /// group (one application request, see [`Report::read_groups`]) starts as soon as
    /// one of `readers` is free — at once for the first `readers` groups — its pieces
    /// together, and frees its reader when its last piece completes. What a benchmark
    /// with that many synchronous threads does on the modeled device, whatever the
    /// speed of the device it was recorded on (which decides what overlapped there).
    pub fn closed_reads(mut self, from_ns: u64, readers: u32) -> Ssd {
        self.closed = Some(ClosedReads {
            from_ns,
            readers: readers.max(1),
            writes: Dependencies::default(),
            free: BinaryHeap::new(),
            started: false,
            group_start: 0,
            group_done: 0,
        });
        self
    }

    /// Replay a whole trace, the reads from `from_ns` on by `readers` closed-loop readers
    /// ([`Ssd::closed_reads`]).
    pub fn replay_closed(
        p: &Params,
        placement: Placement,
        requests: &[Request],
        from_ns: u64,
        readers: u32,
    ) -> Result<Report, ParamError> {
        let mut ssd = Ssd::new(p, placement)?.closed_reads(from_ns, readers);
        ssd.submit_all(requests);
        Ok(ssd.finish())
    }

    /// Submit `requests` in order, asking the cache for what the next ones will look up
    /// while this one is modeled (the map is too large for the cache, and its entries
    /// are read at random).
    fn submit_all(&mut self, requests: &[Request]) {
        const FILES_AHEAD: usize = 4;
        const MAP_AHEAD: usize = 2;
        for (i, r) in requests.iter().enumerate() {
            if let Some(q) = requests.get(i + FILES_AHEAD) {
                self.prefetch_files(q);
            }
            if let Some(q) = requests.get(i + MAP_AHEAD) {
                self.prefetch_map(q);
            }
            self.submit(r);
        }
    }

    /// The approach's file units a write will look up (see [`Ssd::steer`]).
    #[inline]
    fn prefetch_files(&self, r: &Request) {
        if let (Placement::Approach, Op::Write, Some(ino), Some(off)) =
            (self.placement, r.op, r.inode, r.offset)
        {
            if let Some(f) = self.file_units.find(ino) {
                let fu = off.saturating_sub(r.byte_offset() % MAP_UNIT) / MAP_UNIT;
                self.file_units.prefetch(f, fu);
                // fu - 1 shares fu's cache line (8 entries) unless fu starts one.
                if fu.is_multiple_of(8) {
                    self.file_units.prefetch(f, fu.saturating_sub(1));
                }
            }
        }
    }

    /// The map entries a request will read or write, and for the approach those of the
    /// units its file's blocks were written to.
    #[inline]
    fn prefetch_map(&self, r: &Request) {
        if matches!(r.op, Op::Read | Op::Write) {
            let (first, end) = Self::units(r);
            // One cache line holds 8 entries.
            for lpn in (first..end).step_by(8).take(4) {
                self.map.prefetch(lpn);
            }
        }
        if let (Placement::Approach, Op::Write, Some(ino), Some(off)) =
            (self.placement, r.op, r.inode, r.offset)
        {
            if let Some(f) = self.file_units.find(ino) {
                let fu = off.saturating_sub(r.byte_offset() % MAP_UNIT) / MAP_UNIT;
                // The steer reads the previous unit's entry only when this one has none.
                let lpn = self
                    .file_units
                    .get(f, fu)
                    .or_else(|| self.file_units.get(f, fu.checked_sub(1)?));
                if let Some(lpn) = lpn {
                    self.map.prefetch(lpn);
                }
            }
        }
    }

    /// Modeled start of a request: after its recorded dependencies plus its think time.
    fn start_time(&mut self, r: &Request) -> u64 {
        let origin = self.deps.origin(r);
        self.advance_to(origin);
        self.last_start
    }

    /// Nothing later starts before `t`: older bookings cannot be in the way.
    fn advance_to(&mut self, t: u64) {
        if t > self.last_start {
            self.last_start = t;
            for c in &mut self.ch {
                c.prune(t);
            }
            self.host.prune(t);
        }
    }

    /// Start of a read replayed by the closed-loop readers; None when not in that mode.
    fn closed_start(&mut self, r: &Request) -> Option<u64> {
        let c = self.closed.as_ref()?;
        if r.op != Op::Read || r.issue_ns < c.from_ns {
            return None;
        }
        let continues = c.started && self.group.as_ref().is_some_and(|g| g.continued_by(r));
        if !c.started {
            let base = self.start_time(r);
            let c = self.closed.as_mut()?;
            c.started = true;
            c.free.extend((0..c.readers).map(|_| Reverse(base)));
        }
        let c = self.closed.as_mut()?;
        let floor = c.writes.settle(r.issue_ns).map_or(0, |(_, done)| done);
        if !continues {
            if c.group_done > 0 {
                c.free.push(Reverse(c.group_done));
            }
            let Reverse(t) = c.free.pop()?;
            c.group_start = t.max(floor);
            c.group_done = c.group_start;
        }
        let start = c.group_start;
        self.advance_to(start);
        Some(start)
    }

    /// Wait for a free device queue slot.
    fn slot(&mut self, mut t: u64) -> u64 {
        while let Some(&Reverse(done)) = self.inflight.peek() {
            if done <= t {
                self.inflight.pop();
            } else if self.inflight.len() >= self.p.queue_depth as usize {
                self.inflight.pop();
                t = done;
            } else {
                break;
            }
        }
        t
    }

    pub(crate) fn submit(&mut self, r: &Request) {
        let closed = self.closed_start(r);
        let start = match closed {
            Some(t) => t,
            None => self.start_time(r),
        };
        self.seq += 1;
        let done = match r.op {
            Op::Read => self.read(r, start),
            Op::Write => self.write(r, start),
            Op::Discard => self.discard(r, start),
            Op::Flush => {
                self.r.flushes += 1;
                self.die_free.iter().copied().max().unwrap_or(0).max(start) + self.p.host_ns
            }
        };
        self.end = self.end.max(done);
        if let Some(c) = self.closed.as_mut() {
            match closed {
                Some(_) => c.group_done = c.group_done.max(done),
                None if r.op != Op::Read => c.writes.completed(r, done),
                None => {}
            }
        }
        self.deps.completed(r, done);
    }

    fn units(r: &Request) -> (u64, u64) {
        let first = r.byte_offset() / MAP_UNIT;
        let end = (r.byte_offset() + r.bytes).div_ceil(MAP_UNIT);
        (first, end)
    }

    fn read(&mut self, r: &Request, start: u64) -> u64 {
        self.r.reads += 1;
        self.r.read_bytes += r.bytes;
        self.recorded_busy.add(r.issue_ns, r.complete_ns);
        let (first, end) = Self::units(r);
        let per_cmd = self.p.max_transfer_bytes / MAP_UNIT;
        let next = match (r.inode, r.offset) {
            (Some(_), Some(o)) => o + r.bytes,
            _ => r.byte_offset() + r.bytes,
        };
        match &mut self.group {
            Some(g) if g.continued_by(r) => g.next = next,
            _ => {
                self.close_group();
                self.group = Some(ReadGroup {
                    inode: r.inode.filter(|_| r.offset.is_some()),
                    next,
                    first_complete: r.complete_ns,
                });
            }
        }
        let mut done = start;
        let mut u = first;
        while u < end {
            let cmd_end = (u + per_cmd).min(end);
            let t = self.slot(start);
            let bytes = (cmd_end - u) * MAP_UNIT;
            let stime = t + if bytes <= MAP_UNIT {
                self.p.fw_read_4k_ns
            } else {
                self.p.fw_read_ns
            };
            let mut cmd_done = stime;
            // Consecutive units in one flash page are one NAND read (conv_read).
            let mut group: Option<(u32, u64, u64)> = None;
            // The map's entries are read in place; nand_read does not touch the map.
            let map = std::mem::take(&mut self.map);
            map.for_range(u, cmd_end, |found, pos| {
                for (k, &e) in found.iter().enumerate() {
                    if e == 0 {
                        self.r.unmapped_read_bytes += MAP_UNIT;
                        continue;
                    }
                    let (die, local) = self.packing.unpack(map.chunks.value(pos + k, e));
                    let page = self.units_per_page.div(local);
                    match &mut group {
                        Some((d, pg, n)) if *d == die && *pg == page => *n += 1,
                        g => {
                            if let Some((d, _, n)) = g.take() {
                                cmd_done = cmd_done.max(self.nand_read(d, stime, n * MAP_UNIT));
                            }
                            *g = Some((die, page, 1));
                        }
                    }
                }
            });
            self.map = map;
            if let Some((d, _, n)) = group {
                cmd_done = cmd_done.max(self.nand_read(d, stime, n * MAP_UNIT));
            }
            self.inflight.push(Reverse(cmd_done));
            done = done.max(cmd_done);
            u = cmd_end;
        }
        // The host sees the completion host_ns after the device posted it.
        let done = done + self.p.host_ns;
        self.reads_busy.add(start, done);
        done
    }

    /// Count the finished read group's collisions: its page reads on each die beyond an
    /// even spread of them over all dies.
    fn close_group(&mut self) {
        if self.group.take().is_none() {
            return;
        }
        self.r.read_groups += 1;
        let pages: u64 = self
            .touched
            .iter()
            .map(|&d| self.pages_on[d as usize] as u64)
            .sum();
        let even = pages.div_ceil(self.dies as u64);
        let mut c = 0;
        for &d in &self.touched {
            let n = std::mem::take(&mut self.pages_on[d as usize]) as u64;
            c += n.saturating_sub(even);
        }
        self.touched.clear();
        self.r.collisions += c;
        self.r.collided_reads += u64::from(c > 0);
    }

    /// One NAND read on `die` of `bytes` from one page; returns when its data reached the host.
    fn nand_read(&mut self, die: u32, stime: u64, bytes: u64) -> u64 {
        let d = die as usize;
        self.r.page_reads += 1;
        if self.pages_on[d] == 0 {
            self.touched.push(die);
        }
        self.pages_on[d] += 1;
        let busy = self.die_free[d];
        if busy > stime {
            if self.die_owner[d] == self.seq {
                self.r.waited_same_request += 1;
            } else {
                self.r.queued += 1;
            }
        }
        let nand_start = busy.max(stime);
        let sense = if bytes == MAP_UNIT {
            self.p.read_4k_ns
        } else {
            self.read_ns
        };
        let mut ch_start = nand_start + sense;
        let ch = self.die_channel[d];
        let mut remaining = bytes;
        let mut completed = ch_start;
        while remaining > 0 {
            let x = remaining.min(self.p.channel_xfer_bytes);
            let (xfer, host_xfer) = if x == self.p.channel_xfer_bytes {
                (self.piece_ch_ns, self.piece_host_ns)
            } else {
                (
                    Params::xfer_ns(x, self.p.channel_mb_s),
                    Params::xfer_ns(x, self.p.host_mb_s),
                )
            };
            self.ch_read_busy[ch] += xfer;
            let (_, e) = self.ch[ch].reserve(ch_start, xfer);
            // Each piece crosses the host link as soon as it left the channel.
            let (_, he) = self.host.reserve(e, host_xfer);
            completed = completed.max(he);
            remaining -= x;
            ch_start = e;
        }
        self.die_free[d] = ch_start;
        self.die_owner[d] = self.seq;
        self.die_busy[d] += ch_start - nand_start;
        completed
    }

    fn write(&mut self, r: &Request, start: u64) -> u64 {
        self.r.writes += 1;
        self.r.write_bytes += r.bytes;
        let (first, end) = Self::units(r);
        let t = self.slot(start);
        // Write buffer: Y = A + B × (4 KiB units), then the host transfer (ssd_advance_write_buffer).
        let t = t + self.p.fw_write_ns + self.p.fw_write_4k_ns * (end - first);
        let (_, acked) = self
            .host
            .reserve(t, Params::xfer_ns(r.bytes, self.p.host_mb_s));
        // The approach's hint: the file and offset of the write's first unit (the request
        // may start inside it), when the trace resolved them. The file is looked up once
        // for all the request's commands (a file never written has no units to find).
        let hint = match (self.placement, r.inode, r.offset) {
            (Placement::Approach, Some(ino), Some(off)) => Some((
                self.file_units.find_or_create(ino),
                off.saturating_sub(r.byte_offset() % MAP_UNIT) / MAP_UNIT,
            )),
            _ => None,
        };
        // Out of place: an overwritten unit's old page just becomes invalid (no GC).
        let mut placed = std::mem::take(&mut self.scratch);
        placed.clear();
        // One hint per device command, as the patched kernel sends it: the driver cuts
        // the request at the largest transfer first.
        let per_cmd = self.p.max_transfer_bytes / MAP_UNIT;
        let mut u = first;
        while u < end {
            let cmd_end = (u + per_cmd).min(end);
            if let Some((f, fu)) = hint {
                let fu = fu + (u - first);
                self.steer(f, fu);
                self.file_units.set(f, fu, u, cmd_end - u);
            }
            for _ in u..cmd_end {
                let (die, local) = self.alloc();
                placed.push(self.packing.pack(die, local));
                if self.units_per_page.divides(local + 1) {
                    self.program(die, acked);
                }
            }
            u = cmd_end;
        }
        self.map.set_range(first, &placed);
        self.scratch = placed;
        self.inflight.push(Reverse(acked));
        acked + self.p.host_ns
    }

    /// The next unit at the write pointer: each die fills its own pages; the pointer moves
    /// to the next die when the die it stands on has filled g bytes (NVMeVirt's
    /// `advance_write_pointer`, and `advance_write_pointer_DA` with one pointer per die).
    fn alloc(&mut self) -> (u32, u64) {
        let d = self.cur_die;
        let l = self.local[d as usize];
        self.local[d as usize] += 1;
        if self.units_per_g.divides(l + 1) {
            self.cur_die = (d + 1) % self.dies;
        }
        (d, l)
    }

    /// The approach as NVMeVirt_DA's `conv_write` does it, once per request: an overwrite
    /// (the file's first unit was written before) goes back to the die that held the old data; an append
    /// goes to the die after the one holding the file's previous block. Either way the
    /// request then fills that die's open page and moves on like any write, so a chunk
    /// that starts inside a page continues on the next die instead of taking two pages of
    /// one die. (Die = base + offset / g per unit, the earlier form, put a chunk that
    /// started mid-page on two pages of one die: more collisions than write order.)
    fn steer(&mut self, f: usize, file_unit: u64) {
        if let Some(v) = self
            .file_units
            .get(f, file_unit)
            .and_then(|lpn| self.map.get(lpn))
        {
            self.cur_die = self.packing.unpack(v).0;
        } else if let Some(prev) = file_unit
            .checked_sub(1)
            .and_then(|u| self.file_units.get(f, u))
            .and_then(|lpn| self.map.get(lpn))
        {
            self.cur_die = (self.packing.unpack(prev).0 + 1) % self.dies;
        }
    }

    /// Program one full page on `die` once its data is in the buffer at `t`.
    fn program(&mut self, die: u32, t: u64) {
        let d = die as usize;
        let ready = self.die_free[d].max(t);
        let (_, e) = self.ch[self.die_channel[d]].reserve(ready, self.page_ch_ns);
        self.die_free[d] = e + self.p.program_ns;
        self.die_owner[d] = u64::MAX;
    }

    fn discard(&mut self, r: &Request, start: u64) -> u64 {
        self.r.discards += 1;
        // Only whole units are unmapped.
        let first = r.byte_offset().div_ceil(MAP_UNIT);
        let end = (r.byte_offset() + r.bytes) / MAP_UNIT;
        for lpn in first..end {
            self.map.set(lpn, 0);
        }
        start
    }

    pub fn finish(mut self) -> Report {
        self.close_group();
        let rt = self.reads_busy.finish();
        self.r.read_time_ns = rt;
        self.r.total_time_ns = self.end;
        self.r.read_mb_s = mb_s(self.r.read_bytes, rt);
        self.r.die_utilisation = self
            .die_busy
            .iter()
            .map(|&b| if rt == 0 { 0.0 } else { b as f64 / rt as f64 })
            .collect();
        self.r.busiest_channel_ns = self.ch_read_busy.iter().copied().max().unwrap_or(0);
        self.r.recorded_read_time_ns = self.recorded_busy.finish();
        self.r.recorded_read_mb_s = mb_s(self.r.read_bytes, self.r.recorded_read_time_ns);
        self.r.mapped_units = self.map.mapped;
        self.r
    }
}

/// MB/s (10^6 bytes) of `bytes` in `ns`; 0 when no time passed.
pub fn mb_s(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 1000.0 / ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    fn req(op: Op, off: u64, bytes: u64, t: u64) -> Request {
        Request {
            issue_ns: t,
            complete_ns: t + 1,
            sector: off / 512,
            bytes,
            op,
            inode: None,
            offset: None,
        }
    }

    /// Fast24 with one die per channel-free timing so hand sums stay short: 8 dies on 8
    /// channels, no firmware time, a host link that never limits.
    fn simple(dies: u32, qd: u32) -> Params {
        let mut p = Params::fast24();
        p.name = "test".into();
        p.channels = dies;
        p.dies_per_channel = 1;
        p.fw_read_ns = 0;
        p.fw_read_4k_ns = 0;
        p.host_mb_s = 1_000_000_000; // 1 ns per 1 MB piece: rounds to 1 ns per piece
        p.host_ns = 0;
        p.queue_depth = qd;
        p
    }

    // Channel transfer of 16 KiB at 800 MB/s: 16384*1000/800 = 20480 ns; a 32 KiB page
    // moves in two pieces: 40960 ns. Read 36013 ns. One page on an idle die: 76973 ns of die
    // time, +1 ns host for the last piece.
    const PAGE_DIE_NS: u64 = 36_013 + 2 * 20_480;

    /// The test host link costs 1 ns per 16 KiB piece: allow one per piece in flight.
    fn near(actual: u64, expected: u64, pieces: u64) {
        assert!(
            (expected..=expected + pieces).contains(&actual),
            "{actual} not within {expected}..={}",
            expected + pieces
        );
    }

    #[test]
    fn contiguous_read_spreads_over_all_dies() {
        let p = simple(8, 1023);
        // 256 KiB written in order = one 32 KiB page on each of the 8 dies.
        let mut t = vec![req(Op::Write, 0, 256 * K, 0)];
        t.push(req(Op::Read, 0, 256 * K, 1_000_000_000));
        let r = Ssd::replay(&p, Placement::WriteOrder, &t).unwrap();
        assert_eq!(r.page_reads, 8);
        assert_eq!(r.collisions, 0);
        // All dies in parallel: one page time (+1 ns host for the last piece).
        near(r.read_time_ns, PAGE_DIE_NS, 16);
        assert!(r.die_utilisation.iter().all(|&u| u > 0.99));
    }

    /// FAST'24's worst case written: 32 KiB of the file (at 0, 32K, ...), then 224 KiB of
    /// other data (S - g), eight times, so every file chunk lands on die 0.
    fn worst_case_writes() -> Vec<Request> {
        let mut t = Vec::new();
        let mut other = 1 << 30;
        for i in 0..8u64 {
            t.push(req(Op::Write, i * 32 * K, 32 * K, i * 10));
            t.push(req(Op::Write, other, 224 * K, i * 10 + 5));
            other += 224 * K;
        }
        t
    }

    #[test]
    fn worst_case_every_chunk_on_one_die() {
        let p = simple(8, 1023);
        // FAST'24's worst case: 32 KiB of the file, then 224 KiB of other data (S - g), so
        // every file chunk lands on die 0.
        let mut t = worst_case_writes();
        t.push(req(Op::Read, 0, 256 * K, 1_000_000_000));
        let r = Ssd::replay(&p, Placement::WriteOrder, &t).unwrap();
        assert_eq!(r.page_reads, 8);
        // Seven pages waited for die 0 busy with this same request.
        assert_eq!(r.collisions, 7);
        assert_eq!(r.collided_reads, 1);
        near(r.read_time_ns, 8 * PAGE_DIE_NS, 1);
        assert!(r.die_utilisation[0] > 0.99);
        assert_eq!(r.die_utilisation[1], 0.0);

        // The approach: the same writes with file offsets land on consecutive dies.
        let with = |mut q: Request, ino: u64, off: u64| {
            q.inode = Some(ino);
            q.offset = Some(off);
            q
        };
        let t2: Vec<Request> = t
            .iter()
            .map(|q| match (q.op, q.sector * 512 < 1 << 30) {
                (Op::Write, true) => with(q.clone(), 11, q.sector * 512),
                (Op::Write, false) => with(q.clone(), 100 + q.issue_ns, 0),
                _ => q.clone(),
            })
            .collect();
        let a = Ssd::replay(&p, Placement::Approach, &t2).unwrap();
        assert_eq!(a.collisions, 0);
        near(a.read_time_ns, PAGE_DIE_NS, 16);
    }

    /// A 4 KiB metadata write leaves die 0's page partly filled; the file's first chunk
    /// then starts mid-page. NVMeVirt_DA fills die 0's open page and continues on die 1;
    /// the second chunk (an append) goes to the die after its previous block. Hand
    /// placement (units): meta d0:0; A0 d0:1-7 + d1:0; dummy 224K d1:1-7, d2..d7, d0:8;
    /// A1 after d1 → d2:8-15. Reading A: pages d0/0, d1/0, d2/1 — three dies, no
    /// collision. Write order: A1 lands on d0:9-15 + d1:8 — two pages on each of d0, d1.
    #[test]
    fn approach_chunk_starting_mid_page_continues_on_the_next_die() {
        let p = simple(8, 1023);
        let file = |mut q: Request, ino: u64, off: u64| {
            q.inode = Some(ino);
            q.offset = Some(off);
            q
        };
        let t = vec![
            req(Op::Write, 2 << 30, 4 * K, 0),
            file(req(Op::Write, 0, 32 * K, 10), 11, 0),
            file(req(Op::Write, 1 << 30, 224 * K, 20), 100, 0),
            file(req(Op::Write, 32 * K, 32 * K, 30), 11, 32 * K),
            req(Op::Read, 0, 64 * K, 1_000_000_000),
        ];
        let a = Ssd::replay(&p, Placement::Approach, &t).unwrap();
        assert_eq!(a.page_reads, 3);
        assert_eq!(a.collisions, 0);
        let w = Ssd::replay(&p, Placement::WriteOrder, &t).unwrap();
        assert_eq!(w.page_reads, 4);
        assert_eq!(w.collisions, 2);
    }

    /// A file written in order gets the same placement with the approach as without:
    /// one hint per 256 KiB command (a 1 MiB request is four), each an append after the
    /// previous command's last block, continues where the write pointer already is.
    #[test]
    fn approach_leaves_a_contiguous_file_as_write_order() {
        let p = Params::fast24();
        let mut t = Vec::new();
        for i in 0..8u64 {
            let mut q = req(Op::Write, i << 20, 1 << 20, i * 10);
            q.inode = Some(11);
            q.offset = Some(i << 20);
            t.push(q);
        }
        for i in 0..8u64 {
            let mut q = req(Op::Read, i << 20, 1 << 20, 1_000_000_000 + i * 1_000_000);
            q.complete_ns = q.issue_ns + 500_000;
            t.push(q);
        }
        let w = Ssd::replay(&p, Placement::WriteOrder, &t).unwrap();
        let a = Ssd::replay(&p, Placement::Approach, &t).unwrap();
        assert_eq!(
            (a.read_time_ns, a.collisions),
            (w.read_time_ns, w.collisions)
        );
        assert_eq!(w.collisions, 0);
    }

    /// An overwrite goes back to the die of the data it replaces.
    #[test]
    fn approach_overwrite_returns_to_the_old_die() {
        let p = simple(8, 1023);
        let file = |mut q: Request, ino: u64, off: u64| {
            q.inode = Some(ino);
            q.offset = Some(off);
            q
        };
        // 256 KiB file on dies 0..7, then chunk 3 rewritten after 224 KiB of other data.
        let t = vec![
            file(req(Op::Write, 0, 256 * K, 0), 11, 0),
            file(req(Op::Write, 1 << 30, 224 * K, 10), 100, 0),
            file(req(Op::Write, 96 * K, 32 * K, 20), 11, 96 * K),
            req(Op::Read, 0, 256 * K, 1_000_000_000),
        ];
        let a = Ssd::replay(&p, Placement::Approach, &t).unwrap();
        assert_eq!((a.page_reads, a.collisions), (8, 0));
        // Write order puts the rewrite on die 7 (after 7 dies of dummy), beside chunk 7.
        let w = Ssd::replay(&p, Placement::WriteOrder, &t).unwrap();
        assert_eq!((w.page_reads, w.collisions), (8, 1));
    }

    /// The fast24 preset's host time is derived from the paper's contiguous figure: 8 MiB
    /// written in order, read in 1 MiB O_DIRECT requests (each 4 commands of 256 KiB,
    /// issued together, the next read after the last completed) gives 2174.53 MiB/s.
    #[test]
    fn fast24_host_time_gives_the_papers_contiguous_rate() {
        let p = Params::fast24();
        let mut t: Vec<Request> = (0..8)
            .map(|i| req(Op::Write, i << 20, 1 << 20, i))
            .collect();
        t.push(req(Op::Flush, 0, 0, 10));
        let mut at = 1_000_000_000;
        for i in 0..8u64 {
            for c in 0..4u64 {
                let mut q = req(Op::Read, (i << 20) + c * 256 * K, 256 * K, at + c);
                q.complete_ns = at + 400_000;
                t.push(q);
            }
            at += 1_000_000;
        }
        let r = Ssd::replay(&p, Placement::WriteOrder, &t).unwrap();
        let mib_s = r.read_bytes as f64 / (r.read_time_ns as f64 / 1e9) / (1u64 << 20) as f64;
        assert!((mib_s / 2174.53 - 1.0).abs() < 0.001, "{mib_s} MiB/s");
        assert_eq!((r.read_groups, r.collisions), (8, 0));
    }

    /// Collisions are counted per read group: the pieces of one request (continuing one
    /// another's file bytes, issued before the first completed) are one group; the same
    /// pieces read one after another are eight groups of one page each, none colliding.
    #[test]
    fn collisions_are_counted_per_application_request() {
        let p = simple(8, 1023);
        let file = |mut q: Request, off: u64| {
            q.inode = Some(11);
            q.offset = Some(off);
            q
        };
        // The worst case: every 32 KiB chunk of the file on die 0.
        let t = worst_case_writes();
        let mut together = t.clone();
        let mut apart = t;
        for i in 0..8u64 {
            let mut q = file(
                req(Op::Read, i * 32 * K, 32 * K, 1_000_000_000 + i),
                i * 32 * K,
            );
            q.complete_ns = 2_000_000_000;
            together.push(q);
            let mut q = file(
                req(Op::Read, i * 32 * K, 32 * K, 3_000_000_000 + i * 1_000_000),
                i * 32 * K,
            );
            q.complete_ns = q.issue_ns + 500_000;
            apart.push(q);
        }
        let a = Ssd::replay(&p, Placement::WriteOrder, &together).unwrap();
        assert_eq!((a.read_groups, a.collisions, a.collided_reads), (1, 7, 1));
        let b = Ssd::replay(&p, Placement::WriteOrder, &apart).unwrap();
        assert_eq!((b.read_groups, b.collisions, b.collided_reads), (8, 0, 0));
    }

    #[test]
    fn queue_depth_limits_parallel_reads() {
        // 8 separate 32 KiB reads of pages on 8 dies, all in flight in the recording.
        let mut t = vec![req(Op::Write, 0, 256 * K, 0)];
        for i in 0..8 {
            let mut q = req(Op::Read, i * 32 * K, 32 * K, 1_000_000_000 + i);
            q.complete_ns = 2_000_000_000;
            t.push(q);
        }
        let deep = Ssd::replay(&simple(8, 8), Placement::WriteOrder, &t).unwrap();
        let qd1 = Ssd::replay(&simple(8, 1), Placement::WriteOrder, &t).unwrap();
        let qd2 = Ssd::replay(&simple(8, 2), Placement::WriteOrder, &t).unwrap();
        // Issued 1 ns apart, each on its own die: the last ends 7 ns after the first would.
        near(deep.read_time_ns, PAGE_DIE_NS + 7, 16);
        // QD1: one after another.
        near(qd1.read_time_ns, 8 * PAGE_DIE_NS, 8);
        // QD2: pairs.
        near(qd2.read_time_ns, 4 * PAGE_DIE_NS, 8);
        assert_eq!(qd1.collisions + qd1.queued, 0);
    }

    /// Closed-loop readers: four one-page reads on four dies, recorded one after another,
    /// are replayed two at a time by two readers (and one at a time by one), whatever
    /// the recording overlapped; the writes before `from_ns` keep their recorded timing.
    #[test]
    fn closed_loop_readers_set_the_overlap() {
        let p = simple(8, 1023);
        let mut t = vec![req(Op::Write, 0, 256 * K, 0)];
        for i in 0..4u64 {
            let mut q = req(Op::Read, i * 64 * K, 32 * K, 1_000_000_000 + i * 1_000_000);
            q.complete_ns = q.issue_ns + 900_000;
            t.push(q);
        }
        let rec = Ssd::replay(&p, Placement::WriteOrder, &t).unwrap();
        let two = Ssd::replay_closed(&p, Placement::WriteOrder, &t, 1_000_000_000, 2).unwrap();
        let one = Ssd::replay_closed(&p, Placement::WriteOrder, &t, 1_000_000_000, 1).unwrap();
        near(rec.read_time_ns, 4 * PAGE_DIE_NS, 8);
        near(one.read_time_ns, 4 * PAGE_DIE_NS, 8);
        // Dies 0, 2, 4, 6: two readers overlap fully, pair after pair.
        near(two.read_time_ns, 2 * PAGE_DIE_NS, 8);
        assert_eq!((two.read_groups, two.collisions), (4, 0));
        // A read issued before the writes (e.g. metadata) does not pull the later reads
        // ahead of the writes they read: with one at t = 0, they still start after the
        // write completed, and each still costs one page time.
        let mut early = vec![req(Op::Read, 1 << 30, 4 * K, 0)];
        early[0].complete_ns = 1;
        early.extend(t.iter().cloned().map(|mut q| {
            if q.op == Op::Write {
                q.issue_ns = 10;
                q.complete_ns = 20;
            }
            q
        }));
        let e = Ssd::replay_closed(&p, Placement::WriteOrder, &early, 0, 1).unwrap();
        near(e.read_time_ns, 4 * PAGE_DIE_NS, 8);
    }

    #[test]
    fn dependencies_and_think_time_are_kept() {
        let p = simple(8, 1023);
        let mut t = vec![req(Op::Write, 0, 64 * K, 0)];
        // Two reads of the same page, the second issued 5 µs after the first completed.
        let mut a = req(Op::Read, 0, 32 * K, 1_000_000);
        a.complete_ns = 1_300_000;
        let mut b = req(Op::Read, 32 * K, 32 * K, 1_305_000);
        b.complete_ns = 1_400_000;
        t.push(a);
        t.push(b);
        let r = Ssd::replay(&p, Placement::WriteOrder, &t).unwrap();
        // Reads time: two page reads, the 5 µs gap is idle host time, not read time.
        near(r.read_time_ns, 2 * PAGE_DIE_NS, 2);
        assert_eq!(r.recorded_read_time_ns, 300_000 + 95_000);
    }

    #[test]
    fn same_trace_same_numbers() {
        let p = Params::fast24();
        let mut t = Vec::new();
        let mut x: u64 = 12345;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let op = if i % 3 == 0 { Op::Read } else { Op::Write };
            let mut q = req(op, (x % 100_000) * 4096, (1 + x % 64) * 4096, i * 1000);
            q.complete_ns = i * 1000 + x % 5000;
            q.inode = Some(x % 7);
            q.offset = Some(x % 1000 * 4096);
            t.push(q);
        }
        for pl in [Placement::WriteOrder, Placement::Approach] {
            let a = serde_json::to_string(&Ssd::replay(&p, pl, &t).unwrap()).unwrap();
            let b = serde_json::to_string(&Ssd::replay(&p, pl, &t).unwrap()).unwrap();
            assert_eq!(a, b);
        }
    }

    /// Values past 32 bits are kept aside, exactly, and forgotten when overwritten.
    #[test]
    fn wide_values_round_trip() {
        let mut c = Chunks::default();
        let i = c.push();
        let big = u64::from(WIDE) + 5;
        assert_eq!(c.store_run(i * CHUNK, 3, big, None), 3);
        assert_eq!(
            (c.load(0), c.load(2), c.units[1], c.wide.len()),
            (big, big + 2, WIDE, 3)
        );
        assert_eq!(c.store_run(1, 2, 7, None), 0);
        assert_eq!((c.load(0), c.load(1), c.load(2)), (big, 7, 8));
        assert_eq!(c.wide.len(), 1);
        let values = [1, u64::MAX, 3];
        assert_eq!(c.store_run(8, 3, 0, Some(&values)), 3);
        assert_eq!((c.load(8), c.load(9), c.load(10)), (1, u64::MAX, 3));
        assert_eq!(c.store(9, 0), u64::MAX);
        assert_eq!((c.load(9), c.wide.len()), (0, 1));
        assert_eq!(c.store(WIDE as usize % CHUNK, u64::from(WIDE)), 0);
        assert_eq!(c.load(WIDE as usize % CHUNK), u64::from(WIDE));
    }

    /// The approach's overwrite case 16 TiB up the address space (logical units past 32
    /// bits): the same dies as at address 0.
    #[test]
    fn approach_overwrite_far_up_the_address_space() {
        let p = simple(8, 1023);
        let base = 16 << 40;
        let file = |mut q: Request, ino: u64, off: u64| {
            q.inode = Some(ino);
            q.offset = Some(off);
            q
        };
        let t = |base: u64| {
            vec![
                file(req(Op::Write, base, 256 * K, 0), 11, 0),
                file(req(Op::Write, base + (1 << 30), 224 * K, 10), 100, 0),
                file(req(Op::Write, base + 96 * K, 32 * K, 20), 11, 96 * K),
                req(Op::Read, base, 256 * K, 1_000_000_000),
            ]
        };
        let far = Ssd::replay(&p, Placement::Approach, &t(base)).unwrap();
        assert_eq!((far.page_reads, far.collisions), (8, 0));
        let near = Ssd::replay(&p, Placement::Approach, &t(0)).unwrap();
        assert_eq!(far.read_time_ns, near.read_time_ns);
    }

    #[test]
    fn memory_follows_mapped_pages() {
        let p = Params::fast24();
        // Two 4 KiB writes 1 TB apart map two units in two 4 MiB chunks.
        let t = vec![
            req(Op::Write, 0, 4096, 0),
            req(Op::Write, 1 << 40, 4096, 10),
        ];
        let mut s = Ssd::new(&p, Placement::WriteOrder).unwrap();
        for q in &t {
            s.submit(q);
        }
        assert_eq!(s.map.chunks(), 2);
        let mut d = req(Op::Discard, 0, 4096, 20);
        d.complete_ns = 21;
        s.submit(&d);
        assert_eq!(s.finish().mapped_units, 1);
    }

    /// A seeded trace shaped like `bench/ssd_replay.rs`'s (flushes, 4 KiB – 256 KiB
    /// writes, 4 KiB – 1 MiB reads, issue gaps that keep the device saturated) over
    /// `span` bytes, with discards and unaligned requests mixed in.
    fn seeded(n: usize, seed: u64, span: u64, gap: u64) -> Vec<Request> {
        let mut x = seed;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut t = 0u64;
        (0..n)
            .map(|i| {
                let r = next();
                let (op, bytes) = match i % 20 {
                    0 => (Op::Flush, 0),
                    1 => (Op::Discard, 4096 << (r % 6)),
                    2 => (Op::Write, 512 * (1 + r % 300)),
                    3..=11 => (Op::Write, 4096 << (r % 7)),
                    _ => (Op::Read, 4096 << (r % 9)),
                };
                let sector = match i % 7 {
                    0 => next() % (span / 512),
                    _ => (next() % span) / 4096 * 8,
                };
                t += gap / 20 + r % gap;
                let ino = r % 64;
                Request {
                    issue_ns: t,
                    complete_ns: t + 5_000 + r % 100_000,
                    sector,
                    bytes,
                    op,
                    inode: (i % 11 != 0).then_some(ino),
                    offset: (i % 11 != 0).then_some(sector * 512 % (64 << 20)),
                }
            })
            .collect()
    }

    /// FNV-1a of a report's JSON: every field, floats included, bit for bit.
    fn fingerprint(r: &Report) -> u64 {
        serde_json::to_string(r)
            .unwrap()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            })
    }

    /// The replay's results do not move when the engine is made faster: fixed traces give
    /// the reports (every time and count) recorded before the change.
    #[test]
    fn fixed_traces_give_the_recorded_reports() {
        let mut got = Vec::new();
        for (spec, seed, span, gap) in [
            ("fast24", 1, 8 << 30, 20_000),
            ("fast24", 2, 64 << 20, 20_000),
            ("fast24", 3, 1 << 30, 200_000),
            ("nvme-a", 4, 8 << 30, 20_000),
            ("sata-a", 5, 256 << 20, 50_000),
            ("sata-b", 6, 1 << 30, 5_000),
        ] {
            let p = Params::parse(spec).unwrap();
            let t = seeded(60_000, seed, span, gap);
            for pl in [Placement::WriteOrder, Placement::Approach] {
                let r = Ssd::replay(&p, pl, &t).unwrap();
                got.push((r.read_time_ns, r.collisions, r.queued, fingerprint(&r)));
                let from = t[t.len() / 2].issue_ns;
                let c = Ssd::replay_closed(&p, pl, &t, from, 4).unwrap();
                got.push((c.read_time_ns, c.collisions, c.queued, fingerprint(&c)));
            }
        }
        // (read_time_ns, collisions, queued, fingerprint) per preset and seed: write
        // order, write order with closed-loop readers, approach, approach with readers.
        let want = [
            (2126849702, 2518, 18360, 12840830016390775706),
            (2028649721, 2518, 21586, 514245304431339243),
            (2279165216, 2507, 18190, 6490564085798233884),
            (2181553925, 2507, 21265, 8597514228385096485),
            (4940135777, 31261, 76552, 4363425191386182835),
            (4806545621, 31261, 79573, 13979540577162166840),
            (5083701076, 32301, 75571, 3374747091139596477),
            (4935143348, 32301, 78028, 3352191474673349117),
            (4292534244, 17699, 10027, 1031129941918142782),
            (3318090244, 17699, 36277, 4789004928592183502),
            (4306653042, 17453, 10055, 11415996843710243039),
            (3327057278, 17453, 36034, 6274394043414679535),
            (1286742394, 3012, 11387, 6028803484316536911),
            (1185792838, 3012, 13227, 11056361381435660193),
            (1349837012, 2878, 10721, 4724217648107955697),
            (1248912589, 2878, 12355, 13113862017570052181),
            (18598329869, 31544, 84621, 11533025647428093832),
            (18262041493, 31544, 102162, 1514270724947457659),
            (18692787235, 30484, 84648, 16061433423092980590),
            (18326739862, 30484, 101765, 16528477532137021803),
            (8149747570, 24823, 116356, 4041663897412271714),
            (8164958214, 24823, 97759, 6120530224049745277),
            (8147231839, 24691, 115568, 13019042371964752222),
            (8161457207, 24691, 97177, 17185158839344916930),
        ];
        assert_eq!(got, want);
    }
}
