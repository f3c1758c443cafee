//! From traced calls to per-file access ranges: align, model readahead, merge, count, filter.
//!
//! Each call [offset, offset+bytes) on a file becomes one *access*:
//! 1. **Align** outward to the file system block: start rounded down, end rounded up (a
//!    partial block still costs the whole block).
//! 2. **Readahead** (buffered reads only; O_DIRECT reads and all writes are taken as they
//!    are). Each open file (struct file) is one stream. A read that is the stream's first
//!    and starts at offset 0, or starts exactly where the stream's previous read ended, is
//!    *sequential*; its access is extended to the end of the kernel's readahead window,
//!    which is replayed with the kernel's own on-demand arithmetic (mm/readahead.c):
//!    the first window is get_init_ra_size(request) pages with an async marker
//!    `size - request` pages before its end; when a read reaches the marker the next window
//!    of get_next_ra_size(previous) pages starts right after the current one (×4 while
//!    small, ×2 up to half the maximum, then the maximum). The maximum is the device's real
//!    `read_ahead_kb` (/sys/class/bdi/MAJ:MIN, the value the page cache uses). Windows are
//!    clipped to the end of the file rounded up to a block. Random buffered reads are not
//!    extended (the kernel reads just the missing pages) and end the stream's window.
//!    *Tolerance*: on a cold cache, for a stream read in requests up to the window size,
//!    the modelled end is the kernel's (the integration test compares it with the pages
//!    mincore(2) finds cached); pages already cached, reads larger than the window,
//!    fadvise/madvise hints, readahead(2) and memory pressure make the kernel read less or
//!    later, so the documented bound is: the modelled end of a sequential run is within
//!    one `read_ahead_kb` of the bytes the kernel really fetched.
//! 3. **Merge** overlapping accesses (adjacent ones stay apart: a fragment boundary that
//!    falls exactly between two requests splits neither) into ranges, summing their read
//!    and write counts.
//! 4. **Hotness**: keep ranges with at least `min_count` accesses and, of those, the top
//!    `top_pct` percent by access count (ties at the cut are kept).

use std::collections::HashMap;

/// Align [offset, offset+len) outward to `block`.
pub fn align(offset: u64, len: u64, block: u64) -> (u64, u64) {
    let block = block.max(1);
    let start = offset / block * block;
    let end = (offset.saturating_add(len))
        .div_ceil(block)
        .saturating_mul(block);
    (start, end)
}

/// How many accesses of each kind an exact aligned range saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub reads: u64,
    pub writes: u64,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.reads + self.writes
    }
}

/// A merged range of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub offset: u64,
    pub length: u64,
    pub reads: u64,
    pub writes: u64,
}

impl Range {
    pub fn end(&self) -> u64 {
        self.offset + self.length
    }
    pub fn accesses(&self) -> u64 {
        self.reads + self.writes
    }
}

/// One traced call, as the range model needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Call {
    pub offset: u64,
    pub bytes: u64,
    pub write: bool,
    pub direct: bool,
    /// For a sequential buffered read: where the kernel's readahead window ends (bytes;
    /// see module docs and [`Streams::read`]).
    pub readahead_to: Option<u64>,
    /// File size after the call.
    pub file_size: u64,
}

/// Accesses of one file, deduplicated by exact aligned range (repeated hot reads cost one
/// map entry, not one per call).
#[derive(Debug, Clone, Default)]
pub(crate) struct FileAccesses {
    pub block_size: u64,
    /// Readahead window for this file's device, bytes.
    pub read_ahead: u64,
    pub accesses: HashMap<(u64, u64), Counts>,
    pub size: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl FileAccesses {
    pub fn new(block_size: u64, read_ahead: u64) -> FileAccesses {
        FileAccesses {
            block_size: block_size.max(1),
            read_ahead,
            ..Default::default()
        }
    }

    /// The aligned (and, for sequential buffered reads, readahead-extended) range of a call.
    pub(crate) fn access_range(&self, c: &Call) -> (u64, u64) {
        let (start, mut end) = align(c.offset, c.bytes, self.block_size);
        if let (false, false, Some(ra_end)) = (c.write, c.direct, c.readahead_to) {
            let eof = c.file_size.div_ceil(self.block_size) * self.block_size;
            end = end.max(ra_end.min(eof));
        }
        (start, end)
    }

    pub fn record(&mut self, c: &Call) {
        if c.bytes == 0 {
            return;
        }
        let key = self.access_range(c);
        let n = self.accesses.entry(key).or_default();
        if c.write {
            n.writes += 1;
            self.writes += 1;
            self.bytes_written += c.bytes;
        } else {
            n.reads += 1;
            self.reads += 1;
            self.bytes_read += c.bytes;
        }
        self.size = self.size.max(c.file_size);
    }

    /// Merged, sorted, non-overlapping ranges.
    pub fn ranges(&self) -> Vec<Range> {
        let mut acc: Vec<((u64, u64), Counts)> =
            self.accesses.iter().map(|(k, v)| (*k, *v)).collect();
        acc.sort_unstable_by_key(|(k, _)| *k);
        merge(acc.into_iter().map(|((s, e), c)| Range {
            offset: s,
            length: e - s,
            reads: c.reads,
            writes: c.writes,
        }))
    }
}

/// Merge ranges sorted by offset: overlapping ones (not merely adjacent) become one.
pub fn merge(sorted: impl IntoIterator<Item = Range>) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    for r in sorted.into_iter().filter(|r| r.length > 0) {
        match out.last_mut() {
            Some(cur) if r.offset < cur.end() => {
                let end = cur.end().max(r.end());
                cur.length = end - cur.offset;
                cur.reads += r.reads;
                cur.writes += r.writes;
            }
            _ => out.push(r),
        }
    }
    out
}

/// Hotness filter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hotness {
    /// Keep the top this-many percent of ranges by access count (100 = all).
    pub top_pct: f64,
    /// Keep only ranges with at least this many accesses.
    pub min_count: u64,
}

impl Default for Hotness {
    fn default() -> Self {
        Hotness {
            top_pct: 100.0,
            min_count: 1,
        }
    }
}

impl Hotness {
    /// The smallest access count a range needs to be kept, over all ranges of all files.
    pub fn threshold(&self, counts: &mut [u64]) -> u64 {
        let mut t = self.min_count;
        let eligible = counts.iter().filter(|&&c| c >= self.min_count).count();
        if eligible > 0 && self.top_pct < 100.0 {
            counts.sort_unstable_by(|a, b| b.cmp(a));
            let keep = ((eligible as f64 * self.top_pct / 100.0).ceil() as usize).max(1);
            t = t.max(counts[keep.min(eligible) - 1]);
        }
        t
    }
}

const PAGE: u64 = 4096;

/// mm/readahead.c get_init_ra_size: the first window for a request of `req` pages.
fn init_ra_pages(req: u64, max: u64) -> u64 {
    let n = req.max(1).next_power_of_two();
    if n <= max / 32 {
        n * 4
    } else if n <= max / 4 {
        n * 2
    } else {
        max
    }
}

/// mm/readahead.c get_next_ra_size: the window after one of `cur` pages.
fn next_ra_pages(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

/// One open file's readahead state, in pages (the kernel's struct file_ra_state).
#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    /// Byte offset where the previous read ended.
    next: u64,
    /// Current window [start, start+size) and its async tail; size 0 = no window.
    start: u64,
    size: u64,
    async_size: u64,
}

/// Per open file readahead replay (see module docs).
#[derive(Debug, Default)]
pub struct Streams {
    streams: HashMap<u64, Stream>,
}

impl Streams {
    /// A buffered read of [offset, offset+bytes) through open file `stream` on a device
    /// whose readahead maximum is `max_bytes`: where the kernel's window ends if the read is
    /// sequential, None if it is random.
    pub fn read(&mut self, stream: u64, offset: u64, bytes: u64, max_bytes: u64) -> Option<u64> {
        let max = (max_bytes / PAGE).max(1);
        let first = offset / PAGE;
        let last = (offset + bytes).div_ceil(PAGE); // exclusive
        let req = last - first;
        let st = self.streams.entry(stream).or_insert(Stream {
            next: u64::MAX,
            ..Default::default()
        });
        let sequential = if st.next == u64::MAX {
            offset == 0
        } else {
            offset == st.next
        };
        st.next = offset + bytes;
        if !sequential || max_bytes == 0 {
            st.size = 0;
            return None;
        }
        if st.size == 0 || first >= st.start + st.size {
            // Sync readahead on a miss: a fresh window at the read.
            st.start = first;
            st.size = init_ra_pages(req, max);
            st.async_size = if st.size > req {
                st.size - req
            } else {
                st.size
            };
        }
        // The read reaches the async marker (or runs past the window): the next window
        // starts right after the current one.
        let mut guard = 0;
        while guard < 1 << 16 {
            let marker = st.start + st.size - st.async_size;
            let crosses = marker >= first && marker < last;
            if !(crosses || last > st.start + st.size) {
                break;
            }
            st.start += st.size;
            st.size = next_ra_pages(st.size, max);
            st.async_size = st.size;
            guard += 1;
        }
        Some((st.start + st.size) * PAGE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(offset: u64, bytes: u64) -> Call {
        Call {
            offset,
            bytes,
            write: false,
            direct: true,
            readahead_to: None,
            file_size: 1 << 40,
        }
    }

    #[test]
    fn align_rounds_outward_beyond_4_gib() {
        assert_eq!(align(0, 1, 4096), (0, 4096));
        assert_eq!(align(4096, 4096, 4096), (4096, 8192));
        // FragPicker's 32-bit offsets and round-up bug: 4 GiB + 100, 10000 bytes.
        let g4 = 4u64 << 30;
        assert_eq!(align(g4 + 100, 10_000, 4096), (g4, g4 + 12_288));
    }

    #[test]
    fn repeated_and_overlapping_reads_merge_adjacent_do_not() {
        let mut f = FileAccesses::new(4096, 0);
        for _ in 0..3 {
            f.record(&read(8192, 4096));
        }
        f.record(&read(10_000, 8192)); // [8K, 20K) overlaps [8K, 12K)
        f.record(&read(20_480, 4096)); // adjacent to 20K: separate
        let mut w = read(0, 100);
        w.write = true;
        f.record(&w);
        assert_eq!(
            f.ranges(),
            vec![
                Range {
                    offset: 0,
                    length: 4096,
                    reads: 0,
                    writes: 1
                },
                Range {
                    offset: 8192,
                    length: 12_288,
                    reads: 4,
                    writes: 0
                },
                Range {
                    offset: 20_480,
                    length: 4096,
                    reads: 1,
                    writes: 0
                },
            ]
        );
    }

    #[test]
    fn readahead_replays_the_kernel_window_ramp() {
        // 64 KiB reads from 0 with a 2560 KiB maximum (640 pages): first window 64 pages
        // (16 rounded up, ×4), marker at page 16; the second read starts the next window of
        // 128 pages, so after 256 KiB the kernel has pages [0, 192) = 768 KiB.
        let mut s = Streams::default();
        let ends: Vec<u64> = (0..4u64)
            .map(|k| s.read(1, k * 65536, 65536, 2560 << 10).unwrap())
            .collect();
        assert_eq!(ends, vec![256 << 10, 768 << 10, 768 << 10, 768 << 10]);
        // 128 KiB maximum (32 pages), 4 KiB reads: windows of 4 then 8 pages (×2 once
        // past max/16).
        let mut s = Streams::default();
        assert_eq!(s.read(2, 0, 4096, 128 << 10), Some(16 << 10));
        assert_eq!(s.read(2, 4096, 4096, 128 << 10), Some(48 << 10));
        // A random read is not extended and ends the window.
        assert_eq!(s.read(2, 1 << 20, 4096, 128 << 10), None);
        assert_eq!(s.read(3, 4096, 4096, 128 << 10), None);
    }

    #[test]
    fn sequential_buffered_reads_get_readahead_clipped_at_eof() {
        let ra = 128 << 10;
        let mut f = FileAccesses::new(4096, ra);
        let mut s = Streams::default();
        for k in 0..4u64 {
            let c = Call {
                offset: k * 65536,
                bytes: 65536,
                write: false,
                direct: false,
                readahead_to: s.read(7, k * 65536, 65536, ra),
                file_size: 4 << 20,
            };
            f.record(&c);
        }
        // 16-page request, 32-page max: window 32, marker at 16; then 32-page windows.
        assert_eq!(
            f.ranges(),
            vec![Range {
                offset: 0,
                length: 384 << 10,
                reads: 4,
                writes: 0
            }]
        );
        // Near EOF the window stops at the file's last block.
        let c = Call {
            offset: 0,
            bytes: 4096,
            write: false,
            direct: false,
            readahead_to: Some(1 << 20),
            file_size: 10_000,
        };
        assert_eq!(f.access_range(&c), (0, 12_288));
    }

    #[test]
    fn hotness_keeps_top_percent_and_ties() {
        let h = Hotness {
            top_pct: 25.0,
            min_count: 1,
        };
        assert_eq!(h.threshold(&mut [1, 5, 2, 5, 3, 1, 1, 9]), 5);
        let h = Hotness {
            top_pct: 100.0,
            min_count: 3,
        };
        assert_eq!(h.threshold(&mut [1, 5, 2]), 3);
    }

    proptest! {
        #[test]
        fn merged_ranges_are_sorted_disjoint_and_keep_counts(
            calls in proptest::collection::vec((0u64..1 << 34, 1u64..1 << 20, any::<bool>()), 1..60)
        ) {
            let mut f = FileAccesses::new(4096, 0);
            for &(o, b, w) in &calls {
                let mut c = read(o, b);
                c.write = w;
                f.record(&c);
            }
            let r = f.ranges();
            for pair in r.windows(2) {
                prop_assert!(pair[0].end() <= pair[1].offset);
            }
            for x in &r {
                prop_assert!(x.offset % 4096 == 0 && x.length % 4096 == 0);
            }
            prop_assert_eq!(r.iter().map(|x| x.accesses()).sum::<u64>(), calls.len() as u64);
            // Every call lies inside exactly one range.
            for &(o, b, _) in &calls {
                prop_assert_eq!(r.iter().filter(|x| x.offset <= o && o + b <= x.end()).count(), 1);
            }
        }
    }
}
