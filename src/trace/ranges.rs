//! From traced calls to per-file access ranges: align, model readahead, merge, count, filter.
//!
//! Each call [offset, offset+bytes) on a file becomes one *access*:
//! 1. **Align** outward to the file system block: start rounded down, end rounded up (a
//!    partial block still costs the whole block).
//! 2. **Readahead** (buffered reads only; O_DIRECT reads and all writes are taken as they
//!    are). The kernel reads ahead for a *sequential* stream, which we take to be a read
//!    through one open file (struct file) that is its first read and starts at offset 0,
//!    or starts exactly where that open file's previous read ended. Such an access is
//!    extended by the device's `read_ahead_kb` (from /sys/class/bdi/MAJ:MIN, the value the
//!    kernel uses), clipped to the end of the file rounded up to a block. Random buffered
//!    reads are not extended (the kernel reads just the missing pages).
//!    *Tolerance*: the kernel ramps its window up from a few pages to read_ahead_kb and
//!    keeps one asynchronous window ahead of the reader, so the bytes it really fetches
//!    past the last byte read lie between 0 and 2 × read_ahead_kb (never past EOF); the
//!    model's extension is read_ahead_kb, so the modelled end of a sequential run is within
//!    ± read_ahead_kb of the real one. Cache hits, fadvise/madvise hints and
//!    readahead(2) are not modelled.
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
pub struct Call {
    pub offset: u64,
    pub bytes: u64,
    pub write: bool,
    pub direct: bool,
    /// A buffered read the kernel sees as part of a sequential stream (see module docs).
    pub sequential: bool,
    /// File size after the call.
    pub file_size: u64,
}

/// Accesses of one file, deduplicated by exact aligned range (repeated hot reads cost one
/// map entry, not one per call).
#[derive(Debug, Clone, Default)]
pub struct FileAccesses {
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
    pub fn access_range(&self, c: &Call) -> (u64, u64) {
        let (start, mut end) = align(c.offset, c.bytes, self.block_size);
        if !c.write && !c.direct && c.sequential {
            let eof = c.file_size.div_ceil(self.block_size) * self.block_size;
            end = end.max((end + self.read_ahead).min(eof));
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

/// Per open file: where its last read ended (for sequential-stream detection).
#[derive(Debug, Default)]
pub struct Streams {
    last_read_end: HashMap<u64, u64>,
}

impl Streams {
    /// Is this read sequential for the open file `stream`? Records it either way.
    pub fn read(&mut self, stream: u64, offset: u64, bytes: u64) -> bool {
        let seq = match self.last_read_end.get(&stream) {
            None => offset == 0,
            Some(&end) => offset == end,
        };
        self.last_read_end.insert(stream, offset + bytes);
        seq
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
            sequential: false,
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
                sequential: s.read(7, k * 65536, 65536),
                file_size: 4 << 20,
            };
            f.record(&c);
        }
        assert_eq!(
            f.ranges(),
            vec![Range {
                offset: 0,
                length: (256 << 10) + ra,
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
            sequential: true,
            file_size: 10_000,
        };
        assert_eq!(f.access_range(&c), (0, 12_288));
        // A random buffered read is not extended.
        assert!(!s.read(8, 4096, 4096));
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
