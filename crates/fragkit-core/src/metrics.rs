//! Fragmentation metrics, exactly as docs/design.md defines them. Pure functions over extent
//! lists so they can be property-tested without a file system.

use serde::Serialize;

use crate::layout::model::{clip_fragments, Extent, ExtentFlags, FileLayout, Fragment};

/// Requests a whole-file sequential read with aligned `size`-byte requests needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RequestCount {
    /// The request size R in bytes.
    pub size: u64,
    /// S(R): Σ over windows [kR,(k+1)R) of the data runs touching the window.
    pub split: u64,
    /// I(R): windows holding any data.
    pub ideal: u64,
}

impl RequestCount {
    /// S(R) − I(R): requests spent only because fragments split windows.
    pub fn extra(&self) -> u64 {
        self.split - self.ideal
    }
    /// S(R)/I(R) ≥ 1; 1 for a file with no data.
    pub fn ratio(&self) -> f64 {
        if self.ideal == 0 {
            1.0
        } else {
            self.split as f64 / self.ideal as f64
        }
    }
    pub fn add(&mut self, other: &RequestCount) {
        self.split += other.split;
        self.ideal += other.ideal;
    }
}

/// S(R) and I(R) for data runs sorted by logical offset and not overlapping.
pub fn request_count(runs: &[Fragment], size: u64) -> RequestCount {
    assert!(size > 0, "request size must be positive");
    let mut split = 0;
    let mut ideal = 0;
    let mut last_window: Option<u64> = None;
    for r in runs.iter().filter(|r| r.length > 0) {
        let first = r.logical / size;
        let last = (r.logical_end() - 1) / size;
        split += last - first + 1;
        // Windows already counted for an earlier run are not new windows.
        let new_from = match last_window {
            Some(w) if w >= first => w + 1,
            _ => first,
        };
        if last >= new_from {
            ideal += last - new_from + 1;
        }
        last_window = Some(last_window.map_or(last, |w| w.max(last)));
    }
    RequestCount { size, split, ideal }
}

/// An R-aligned window that more than one data run touches: one read request becomes
/// `runs` device requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitWindow {
    /// Window start (a multiple of R).
    pub start: u64,
    /// Window end (start + R).
    pub end: u64,
    /// Data runs touching the window (≥ 2).
    pub runs: u64,
    /// Bytes of data inside the window.
    pub data_bytes: u64,
}

/// Every window of size `size` that more than one data run touches, in order.
pub fn split_window_list(runs: &[Fragment], size: u64) -> Vec<SplitWindow> {
    // Only a run's first and last window can be shared with another run: every window in
    // between lies inside the run. Runs are sorted and disjoint, so the windows visited
    // below come in non-decreasing order and equal ones are adjacent.
    let mut out = Vec::new();
    let mut current: Option<SplitWindow> = None;
    let mut flush = |c: Option<SplitWindow>| {
        if let Some(w) = c.filter(|w| w.runs > 1) {
            out.push(w);
        }
    };
    for r in runs.iter().filter(|r| r.length > 0) {
        let first = r.logical / size;
        let last = (r.logical_end() - 1) / size;
        let ends = [first, last];
        for &w in &ends[..if first == last { 1 } else { 2 }] {
            let part = r.logical_end().min((w + 1) * size) - r.logical.max(w * size);
            match current.as_mut() {
                Some(c) if c.start == w * size => {
                    c.runs += 1;
                    c.data_bytes += part;
                }
                _ => {
                    flush(current);
                    current = Some(SplitWindow {
                        start: w * size,
                        end: (w + 1) * size,
                        runs: 1,
                        data_bytes: part,
                    });
                }
            }
        }
    }
    flush(current);
    out
}

/// (windows, data bytes) over [`split_window_list`]: what a bypass/pick-style defrag must
/// rewrite at R to remove every extra request.
#[cfg(test)]
pub(crate) fn split_windows(runs: &[Fragment], size: u64) -> (u64, u64) {
    split_window_list(runs, size)
        .iter()
        .fold((0, 0), |(n, b), w| (n + 1, b + w.data_bytes))
}

/// Power-of-two histogram plus moments. Bucket k holds values in [2^k, 2^(k+1)); zero has
/// its own bucket.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub sum: u64,
    /// Non-empty buckets only, ascending.
    pub buckets: Vec<Bucket>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Smallest value in the bucket (0, 1, 2, 4, ...).
    pub min: u64,
    /// Largest value in the bucket.
    pub max: u64,
    pub count: u64,
}

fn bucket_bounds(v: u64) -> (u64, u64) {
    if v == 0 {
        (0, 0)
    } else {
        let k = 63 - v.leading_zeros();
        let lo = 1u64 << k;
        (lo, lo.saturating_sub(1).saturating_add(lo))
    }
}

impl Distribution {
    pub fn add(&mut self, v: u64) {
        self.add_n(v, 1);
    }

    fn add_n(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += n;
        self.sum = self.sum.saturating_add(v.saturating_mul(n));
        let (lo, hi) = bucket_bounds(v);
        match self.buckets.binary_search_by_key(&lo, |b| b.min) {
            Ok(i) => self.buckets[i].count += n,
            Err(i) => self.buckets.insert(
                i,
                Bucket {
                    min: lo,
                    max: hi,
                    count: n,
                },
            ),
        }
    }

    /// Empty again, keeping the bucket vector's room.
    pub fn clear(&mut self) {
        self.count = 0;
        self.min = 0;
        self.max = 0;
        self.sum = 0;
        self.buckets.clear();
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    pub fn merge(&mut self, other: &Distribution) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = other.clone();
            return;
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum = self.sum.saturating_add(other.sum);
        for b in &other.buckets {
            match self.buckets.binary_search_by_key(&b.min, |x| x.min) {
                Ok(i) => self.buckets[i].count += b.count,
                Err(i) => self.buckets.insert(i, *b),
            }
        }
    }
}

/// Add extent `e` to the run being built (as `merge_runs` does: the run grows while its
/// last record continues into the next); returns the run it ends, if any.
fn extend_run(cur: &mut Option<(Fragment, Extent)>, e: &Extent) -> Option<Fragment> {
    if let Some((run, last)) = cur {
        if last.continues_into(e) {
            run.length = e.logical_end() - run.logical;
            *last = *e;
            return None;
        }
    }
    cur.replace((Fragment::of(e), *e)).map(|(done, _)| done)
}

/// Per request size, the state [`FileMetrics::compute_into`] carries from one data run to
/// the next: the last window counted for I(R), and the window currently touched (its
/// index, runs and data bytes) for the split-window bytes. Eight sizes live on the stack;
/// more (a long `-r` list) go to the heap.
struct WindowState {
    inline: [Window; 8],
    more: Vec<Window>,
}

#[derive(Clone, Copy, Default)]
struct Window {
    last: Option<u64>,
    open: Option<u64>,
    runs: u64,
    bytes: u64,
}

impl WindowState {
    fn new(sizes: usize) -> WindowState {
        WindowState {
            inline: [Window::default(); 8],
            more: vec![Window::default(); sizes.saturating_sub(8)],
        }
    }
    fn at(&mut self, i: usize) -> &mut Window {
        if i < 8 {
            &mut self.inline[i]
        } else {
            &mut self.more[i - 8]
        }
    }
    fn last_window(&mut self, i: usize) -> Option<u64> {
        self.at(i).last
    }
    fn set_last_window(&mut self, i: usize, last: u64) {
        let w = self.at(i);
        w.last = Some(w.last.map_or(last, |l| l.max(last)));
    }
    /// A run touches window `win` with `part` bytes: the open window grows or is closed
    /// (its bytes moved if more than one run touched it) and `win` opens.
    fn touch(&mut self, i: usize, win: u64, part: u64, moved: &mut u64) {
        let w = self.at(i);
        if w.open == Some(win) {
            w.runs += 1;
            w.bytes += part;
            return;
        }
        if w.open.is_some() && w.runs > 1 {
            *moved += w.bytes;
        }
        w.open = Some(win);
        w.runs = 1;
        w.bytes = part;
    }
    fn finish(&mut self, moved: &mut [u64]) {
        for (i, m) in moved.iter_mut().enumerate() {
            let w = self.at(i);
            if w.open.is_some() && w.runs > 1 {
                *m += w.bytes;
            }
        }
    }
}

/// Per-file metrics (docs/design.md "Definitions").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileMetrics {
    pub size: u64,
    pub allocated: u64,
    pub extents: u64,
    /// Degree of fragmentation: fragments over located extents (written or preallocated).
    pub fragments: u64,
    pub holes: u64,
    pub hole_bytes: u64,
    pub unwritten_bytes: u64,
    pub delalloc_bytes: u64,
    pub shared_bytes: u64,
    pub encoded_bytes: u64,
    pub inline_bytes: u64,
    /// File-system blocks in located extents: the "blocks" of the layout score.
    pub blocks: u64,
    pub frag_sizes: Distribution,
    /// |frag distance| between logically consecutive fragments.
    pub frag_distances: Distribution,
    pub requests: Vec<RequestCount>,
    /// Bytes a window-granular defrag would move to remove all extra requests at each R
    /// (same order as `requests`).
    pub move_bytes: Vec<u64>,
}

impl FileMetrics {
    pub fn compute(layout: &FileLayout, request_sizes: &[u64]) -> FileMetrics {
        let mut m = FileMetrics::empty();
        m.compute_into(layout, request_sizes);
        m
    }

    /// All zero, no request sizes: a buffer for [`FileMetrics::compute_into`].
    pub fn empty() -> FileMetrics {
        FileMetrics {
            size: 0,
            allocated: 0,
            extents: 0,
            fragments: 0,
            holes: 0,
            hole_bytes: 0,
            unwritten_bytes: 0,
            delalloc_bytes: 0,
            shared_bytes: 0,
            encoded_bytes: 0,
            inline_bytes: 0,
            blocks: 0,
            frag_sizes: Distribution::default(),
            frag_distances: Distribution::default(),
            requests: Vec::new(),
            move_bytes: Vec::new(),
        }
    }

    /// [`FileMetrics::compute`] into `self`, reusing its vectors: a scan computes one file
    /// after another into the same buffer and allocates nothing once they have grown.
    /// One pass over the extents gives fragments, holes and flag bytes; the data runs
    /// (at most one per extent) then go once through every request size. The fragments
    /// and runs are never collected (the two vectors this replaces were a quarter of a
    /// one-block file's metrics cost, callgrind).
    pub fn compute_into(&mut self, layout: &FileLayout, request_sizes: &[u64]) {
        let bs = layout.block_size.max(1) as u64;
        let readable_end = layout.size.div_ceil(bs) * bs;
        self.size = layout.size;
        self.allocated = layout.allocated;
        self.extents = layout.extents.len() as u64;
        self.fragments = 0;
        self.blocks = 0;
        self.frag_sizes.clear();
        self.frag_distances.clear();
        self.requests.clear();
        self.move_bytes.clear();
        for &size in request_sizes {
            assert!(size > 0, "request size must be positive");
            self.requests.push(RequestCount {
                size,
                split: 0,
                ideal: 0,
            });
            self.move_bytes.push(0);
        }
        let (mut unwritten, mut delalloc, mut shared, mut encoded, mut inline) = (0, 0, 0, 0, 0);
        let (mut holes, mut hole_bytes, mut pos) = (0u64, 0u64, 0u64);
        // The fragment and the data run being built, with the last extent merged into each
        // (as `merge_runs`: a run grows while its last record continues into the next).
        let mut frag: Option<(Fragment, Extent)> = None;
        let mut prev_frag_end: Option<u64> = None;
        let mut run: Option<(Fragment, Extent)> = None;
        // Per request size: the last window counted (I(R)) and the open shared window.
        let mut windows = WindowState::new(request_sizes.len());
        for e in &layout.extents {
            let with = |flag| if e.flags.contains(flag) { e.length } else { 0 };
            unwritten += with(ExtentFlags::UNWRITTEN);
            delalloc += with(ExtentFlags::DELALLOC);
            shared += with(ExtentFlags::SHARED);
            encoded += with(ExtentFlags::ENCODED);
            inline += with(ExtentFlags::DATA_INLINE);
            if e.logical > pos && pos < layout.size {
                holes += 1;
                hole_bytes += e.logical.min(layout.size) - pos;
            }
            pos = pos.max(e.logical_end());
            if e.length == 0 {
                continue;
            }
            if e.is_located() {
                if let Some(done) = extend_run(&mut frag, e) {
                    self.close_fragment(&done, &mut prev_frag_end, bs);
                }
            }
            if e.costs_read_io() {
                if let Some(done) = extend_run(&mut run, e) {
                    self.close_run(done, readable_end, &mut windows);
                }
            }
        }
        if let Some((done, _)) = frag {
            self.close_fragment(&done, &mut prev_frag_end, bs);
        }
        if let Some((done, _)) = run {
            self.close_run(done, readable_end, &mut windows);
        }
        windows.finish(&mut self.move_bytes);
        if pos < layout.size {
            holes += 1;
            hole_bytes += layout.size - pos;
        }
        self.holes = holes;
        self.hole_bytes = hole_bytes;
        self.unwritten_bytes = unwritten;
        self.delalloc_bytes = delalloc;
        self.shared_bytes = shared;
        self.encoded_bytes = encoded;
        self.inline_bytes = inline;
    }

    fn close_fragment(&mut self, f: &Fragment, prev_end: &mut Option<u64>, bs: u64) {
        self.fragments += 1;
        self.blocks += f.length.div_ceil(bs);
        self.frag_sizes.add(f.length);
        if let Some(end) = *prev_end {
            self.frag_distances.add(f.physical.abs_diff(end));
        }
        *prev_end = Some(f.physical_end());
    }

    /// A finished data run, clipped to the readable end, counted at every request size
    /// exactly as [`request_count`] and [`split_windows`] count a list of runs.
    fn close_run(&mut self, mut r: Fragment, readable_end: u64, w: &mut WindowState) {
        if r.logical >= readable_end {
            return;
        }
        r.length = r.length.min(readable_end - r.logical);
        for (i, (rc, moved)) in self
            .requests
            .iter_mut()
            .zip(&mut self.move_bytes)
            .enumerate()
        {
            let size = rc.size;
            let first = r.logical / size;
            let last = (r.logical_end() - 1) / size;
            rc.split += last - first + 1;
            let new_from = match w.last_window(i) {
                Some(lw) if lw >= first => lw + 1,
                _ => first,
            };
            if last >= new_from {
                rc.ideal += last - new_from + 1;
            }
            w.set_last_window(i, last);
            let ends = [first, last];
            for &win in &ends[..if first == last { 1 } else { 2 }] {
                let part = r.logical_end().min((win + 1) * size) - r.logical.max(win * size);
                w.touch(i, win, part, moved);
            }
        }
    }
    /// Smith–Seltzer layout score of one file: (blocks − fragments)/(blocks − 1); 1 when
    /// the file has at most one block.
    pub fn layout_score(&self) -> f64 {
        if self.blocks <= 1 {
            1.0
        } else {
            (self.blocks - self.fragments.min(self.blocks)) as f64 / (self.blocks - 1) as f64
        }
    }

    pub fn is_fragmented(&self) -> bool {
        self.fragments > 1
    }
}

/// e4defrag's "best" extent count for a file of `blocks` blocks, assuming ext4's default
/// geometry (32768 blocks per group, 16 groups per flex group) as e4defrag -c does.
pub(crate) fn e4defrag_best_extents(blocks: u64) -> u64 {
    const BLOCKS_PER_FLEX_GROUP: u64 = 32768 * 16;
    if blocks == 0 {
        0
    } else {
        (blocks - 1) / BLOCKS_PER_FLEX_GROUP + 1
    }
}

/// e2fsprogs' CALC_SCORE over a ratio in percent: >10 → 80 + 20·ratio/100, else 8·ratio.
pub fn e4defrag_score(fragments: u64, best: u64, blocks: u64) -> f64 {
    if blocks == 0 {
        return 0.0;
    }
    let ratio = (fragments as f64 - best as f64) * 100.0 / blocks as f64;
    if ratio > 10.0 {
        80.0 + 20.0 * ratio / 100.0
    } else {
        8.0 * ratio
    }
}

/// Totals over a set of files.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SetMetrics {
    pub files: u64,
    pub fragmented_files: u64,
    pub bytes: u64,
    pub allocated: u64,
    pub extents: u64,
    pub fragments: u64,
    pub holes: u64,
    pub unwritten_bytes: u64,
    pub shared_bytes: u64,
    pub encoded_bytes: u64,
    pub blocks: u64,
    /// Σ(blocks − fragments) and Σ(blocks − 1) over files with ≥1 block.
    layout_num: u64,
    layout_den: u64,
    e4_best: u64,
    e4_fragments: u64,
    pub requests: Vec<RequestCount>,
    pub move_bytes: Vec<u64>,
    pub frag_sizes: Distribution,
    pub frag_distances: Distribution,
}

impl SetMetrics {
    pub fn new(request_sizes: &[u64]) -> SetMetrics {
        SetMetrics {
            requests: request_sizes
                .iter()
                .map(|&size| RequestCount {
                    size,
                    split: 0,
                    ideal: 0,
                })
                .collect(),
            move_bytes: vec![0; request_sizes.len()],
            ..SetMetrics::default()
        }
    }

    pub fn add(&mut self, m: &FileMetrics) {
        self.files += 1;
        self.fragmented_files += m.is_fragmented() as u64;
        self.bytes += m.size;
        self.allocated += m.allocated;
        self.extents += m.extents;
        self.fragments += m.fragments;
        self.holes += m.holes;
        self.unwritten_bytes += m.unwritten_bytes;
        self.shared_bytes += m.shared_bytes;
        self.encoded_bytes += m.encoded_bytes;
        self.blocks += m.blocks;
        if m.blocks >= 1 {
            self.layout_num += m.blocks - m.fragments.min(m.blocks);
            self.layout_den += m.blocks - 1;
        }
        if m.size > 0 && m.blocks > 0 {
            self.e4_best += e4defrag_best_extents(m.blocks);
            self.e4_fragments += m.fragments;
        }
        for (acc, r) in self.requests.iter_mut().zip(&m.requests) {
            acc.add(r);
        }
        for (acc, b) in self.move_bytes.iter_mut().zip(&m.move_bytes) {
            *acc += b;
        }
        self.frag_sizes.merge(&m.frag_sizes);
        self.frag_distances.merge(&m.frag_distances);
    }

    /// Add another set's totals (a batch summed on another thread); same request sizes.
    pub fn merge(&mut self, o: &SetMetrics) {
        self.files += o.files;
        self.fragmented_files += o.fragmented_files;
        self.bytes += o.bytes;
        self.allocated += o.allocated;
        self.extents += o.extents;
        self.fragments += o.fragments;
        self.holes += o.holes;
        self.unwritten_bytes += o.unwritten_bytes;
        self.shared_bytes += o.shared_bytes;
        self.encoded_bytes += o.encoded_bytes;
        self.blocks += o.blocks;
        self.layout_num += o.layout_num;
        self.layout_den += o.layout_den;
        self.e4_best += o.e4_best;
        self.e4_fragments += o.e4_fragments;
        for (acc, r) in self.requests.iter_mut().zip(&o.requests) {
            acc.add(r);
        }
        for (acc, b) in self.move_bytes.iter_mut().zip(&o.move_bytes) {
            *acc += b;
        }
        self.frag_sizes.merge(&o.frag_sizes);
        self.frag_distances.merge(&o.frag_distances);
    }

    /// Smith–Seltzer layout score over the set: Σ(blocks − fragments)/Σ(blocks − 1).
    pub fn layout_score(&self) -> f64 {
        if self.layout_den == 0 {
            1.0
        } else {
            self.layout_num as f64 / self.layout_den as f64
        }
    }

    /// e4defrag -c's fragmentation score (0–30 fine, 31–55 a little, 56+ defrag).
    pub fn e4defrag_score(&self) -> f64 {
        e4defrag_score(self.e4_fragments, self.e4_best, self.blocks)
    }
}

/// S(R) and I(R) for reading only the byte range [start, end) of a file in aligned
/// `size`-byte requests: the runs are clipped to the range first. What one access of a
/// traced range costs (`fragkit trace --summary`).
pub fn range_request_count(runs: &[Fragment], start: u64, end: u64, size: u64) -> RequestCount {
    request_count(&clip_fragments(runs, start, end), size)
}

/// Device requests that O_DIRECT `reads` (file offset, length) of a file with data runs
/// `runs` become, when the device takes at most `cap` bytes per request: per read, each
/// data run it touches is its own request (the kernel maps one run at a time and never
/// joins runs that are not physically contiguous), cut into `cap`-byte pieces; holes
/// and unwritten ranges read as zeros and cost none. For whole-file sequential reads of
/// R ≤ cap bytes this is S(R).
pub fn planned_request_count(runs: &[Fragment], reads: &[(u64, u64)], cap: u64) -> u64 {
    let cap = cap.max(1);
    reads
        .iter()
        .map(|&(off, len)| {
            let end = off.saturating_add(len);
            let first = runs.partition_point(|r| r.logical_end() <= off);
            runs[first..]
                .iter()
                .take_while(|r| r.logical < end)
                .map(|r| {
                    let piece = r.logical_end().min(end) - r.logical.max(off);
                    piece.div_ceil(cap)
                })
                .sum::<u64>()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BS: u64 = 4096;

    fn ext(logical: u64, physical: u64, length: u64, flags: u32) -> Extent {
        Extent {
            logical,
            physical,
            length,
            flags: ExtentFlags(flags),
        }
    }

    fn layout(extents: Vec<Extent>) -> FileLayout {
        let size = extents.last().map_or(0, |e| e.logical_end());
        FileLayout {
            size,
            allocated: extents.iter().map(|e| e.length).sum(),
            block_size: BS as u32,
            extents,
        }
    }

    /// Random block-aligned extent lists: logical gaps (holes), physical jumps or
    /// continuations, some unwritten records.
    fn arb_extents() -> impl Strategy<Value = Vec<Extent>> {
        prop::collection::vec(
            (0u64..4, 1u64..64, any::<bool>(), 0u64..2000, any::<bool>()),
            0..40,
        )
        .prop_map(|specs| {
            let mut out = Vec::new();
            let mut logical = 0u64;
            let mut physical = 1000 * BS;
            for (gap, len, jump, to, unwritten) in specs {
                logical += gap * BS;
                if jump || gap > 0 {
                    physical = (to + 1) * 64 * BS;
                }
                let flags = if unwritten {
                    ExtentFlags::UNWRITTEN.0
                } else {
                    0
                };
                out.push(ext(logical, physical, len * BS, flags));
                logical += len * BS;
                physical += len * BS;
            }
            if let Some(l) = out.last_mut() {
                l.flags.0 |= ExtentFlags::LAST.0;
            }
            out
        })
    }

    proptest! {
        #[test]
        fn planned_requests_of_a_sequential_read_are_s_of_r(
            extents in arb_extents(),
            k in 1u64..40,
        ) {
            let l = layout(extents);
            let runs = l.data_runs();
            let r = k * BS;
            let reads: Vec<(u64, u64)> = (0..l.size.div_ceil(r))
                .map(|i| (i * r, r.min(l.size - i * r)))
                .collect();
            let want = request_count(&runs, r).split;
            prop_assert_eq!(planned_request_count(&runs, &reads, r), want);
            // A cap of one block cuts every run piece into blocks.
            let blocks: u64 = reads
                .iter()
                .map(|&(o, n)| range_request_count(&runs, o, o + n, BS).split)
                .sum();
            prop_assert_eq!(planned_request_count(&runs, &reads, BS), blocks);
        }
    }

    fn brute_requests(runs: &[Fragment], r: u64) -> (u64, u64) {
        let end = runs.iter().map(|f| f.logical_end()).max().unwrap_or(0);
        let (mut split, mut ideal) = (0, 0);
        let mut w = 0;
        while w * r < end {
            let n = runs
                .iter()
                .filter(|f| f.logical < (w + 1) * r && f.logical_end() > w * r)
                .count() as u64;
            split += n;
            ideal += (n > 0) as u64;
            w += 1;
        }
        (split, ideal)
    }

    /// The metrics as defined, from the collected fragments and data runs: what the
    /// one-pass [`FileMetrics::compute_into`] must agree with.
    fn reference(layout: &FileLayout, request_sizes: &[u64]) -> FileMetrics {
        let frags = layout.fragments();
        let runs = layout.data_runs();
        let bs = layout.block_size.max(1) as u64;
        let (holes, hole_bytes) = layout.holes();
        let mut frag_sizes = Distribution::default();
        let mut frag_distances = Distribution::default();
        for (i, f) in frags.iter().enumerate() {
            frag_sizes.add(f.length);
            if i > 0 {
                frag_distances.add(f.physical.abs_diff(frags[i - 1].physical_end()));
            }
        }
        FileMetrics {
            size: layout.size,
            allocated: layout.allocated,
            extents: layout.extents.len() as u64,
            fragments: frags.len() as u64,
            holes,
            hole_bytes,
            unwritten_bytes: layout.bytes_with(ExtentFlags::UNWRITTEN),
            delalloc_bytes: layout.bytes_with(ExtentFlags::DELALLOC),
            shared_bytes: layout.bytes_with(ExtentFlags::SHARED),
            encoded_bytes: layout.bytes_with(ExtentFlags::ENCODED),
            inline_bytes: layout.bytes_with(ExtentFlags::DATA_INLINE),
            blocks: frags.iter().map(|f| f.length.div_ceil(bs)).sum(),
            frag_sizes,
            frag_distances,
            requests: request_sizes
                .iter()
                .map(|&r| request_count(&runs, r))
                .collect(),
            move_bytes: request_sizes
                .iter()
                .map(|&r| split_windows(&runs, r).1)
                .collect(),
        }
    }

    /// Extent lists with every flag the metrics look at, zero-length and overlapping
    /// (compressed) records, and a size that may end before or after the last extent.
    fn arb_flagged_layout() -> impl Strategy<Value = FileLayout> {
        let flag = prop::sample::select(vec![
            0u32,
            0,
            ExtentFlags::UNWRITTEN.0,
            ExtentFlags::DELALLOC.0 | ExtentFlags::UNKNOWN.0,
            ExtentFlags::SHARED.0,
            ExtentFlags::ENCODED.0,
            ExtentFlags::DATA_INLINE.0 | ExtentFlags::NOT_ALIGNED.0,
            ExtentFlags::EXT4_HOLE.0,
        ]);
        (
            prop::collection::vec((0u64..3, 0u64..40, 0u64..4, flag), 0..30),
            0u64..200,
            prop::sample::select(vec![512u32, 1024, 4096]),
        )
            .prop_map(|(specs, size_blocks, bs)| {
                let b = bs as u64;
                let (mut logical, mut physical) = (0u64, 1u64 << 20);
                let mut extents = Vec::new();
                for (gap, len, jump, flags) in specs {
                    logical += gap * b;
                    physical = match jump {
                        0 => physical,
                        1 => physical.saturating_sub(b),
                        _ => physical + jump * 7 * b,
                    };
                    extents.push(ext(logical, physical, len * b, flags));
                    logical += len * b;
                    physical += len * b;
                }
                FileLayout {
                    size: size_blocks * b + size_blocks % 3 * 100,
                    allocated: extents.iter().map(|e| e.length).sum(),
                    block_size: bs,
                    extents,
                }
            })
    }

    proptest! {
        #[test]
        fn one_pass_metrics_equal_the_definitions(l in arb_flagged_layout(), k in 1u64..48, n in 0usize..11) {
            // 0..10 request sizes: past the 8 kept on the stack too.
            let sizes: Vec<u64> = (0..n as u64).map(|i| (k + i * 5) * 512).collect();
            let want = reference(&l, &sizes);
            prop_assert_eq!(&FileMetrics::compute(&l, &sizes), &want);
            // Reused: a buffer that held another file's metrics gives the same answer.
            let mut reused = FileMetrics::compute(&layout(vec![ext(0, 0, 9 * BS, 0), ext(9 * BS, 99 * BS, BS, 0)]), &[BS, 3 * BS]);
            reused.compute_into(&l, &sizes);
            prop_assert_eq!(reused, want);
        }

        #[test]
        fn fragments_never_exceed_extents(exts in arb_extents()) {
            let l = layout(exts);
            prop_assert!(l.fragments().len() <= l.extents.len());
            prop_assert!(l.data_runs().len() <= l.extents.len());
        }

        #[test]
        fn split_at_least_ideal_and_matches_brute_force(exts in arb_extents(), k in 1u64..64) {
            let l = layout(exts);
            let runs = l.data_runs();
            let r = k * BS;
            let c = request_count(&runs, r);
            prop_assert!(c.split >= c.ideal);
            prop_assert!(c.ratio() >= 1.0);
            prop_assert_eq!((c.split, c.ideal), brute_requests(&runs, r));
            // Each extra request needs a run boundary inside a window.
            prop_assert!(c.extra() <= runs.len().saturating_sub(1) as u64);
        }

        #[test]
        fn adjacent_record_splits_are_not_fragmentation(exts in arb_extents(), pieces in 2u64..5) {
            let l = layout(exts.clone());
            // Cut every extent into physically adjacent records, as ext4 does at 32768 blocks.
            let mut cut = Vec::new();
            for e in &exts {
                let blocks = e.length / BS;
                let step = (blocks / pieces).max(1);
                let mut off = 0;
                while off < blocks {
                    let n = step.min(blocks - off);
                    cut.push(ext(e.logical + off * BS, e.physical + off * BS, n * BS, e.flags.0 & !ExtentFlags::LAST.0));
                    off += n;
                }
            }
            let l2 = layout(cut);
            prop_assert_eq!(l.fragments().len(), l2.fragments().len());
            let m1 = FileMetrics::compute(&l, &[128 * 1024]);
            let m2 = FileMetrics::compute(&l2, &[128 * 1024]);
            prop_assert_eq!(m1.requests, m2.requests);
            prop_assert_eq!(m1.fragments, m2.fragments);
            prop_assert_eq!(m1.move_bytes, m2.move_bytes);
        }

        #[test]
        fn move_bytes_bounded(exts in arb_extents(), k in 1u64..64) {
            let l = layout(exts);
            let runs = l.data_runs();
            let r = k * BS;
            let (windows, bytes) = split_windows(&runs, r);
            let c = request_count(&runs, r);
            prop_assert!(windows <= c.extra());
            prop_assert_eq!(windows == 0, c.extra() == 0);
            prop_assert!(bytes <= windows * r);
            prop_assert!(bytes <= runs.iter().map(|f| f.length).sum::<u64>());
        }

        #[test]
        fn layout_score_in_unit_interval(exts in arb_extents()) {
            let m = FileMetrics::compute(&layout(exts), &[BS]);
            let s = m.layout_score();
            prop_assert!((0.0..=1.0).contains(&s));
            let mut set = SetMetrics::new(&[BS]);
            set.add(&m);
            prop_assert!((0.0..=1.0).contains(&set.layout_score()));
        }

        #[test]
        fn merged_batches_equal_one_sum(files in prop::collection::vec(arb_extents(), 0..8), cut in 0usize..8) {
            // The streaming scan sums batches on workers and merges them in the sink.
            let ms: Vec<FileMetrics> = files.into_iter().map(|e| FileMetrics::compute(&layout(e), &[BS, 4 * BS])).collect();
            let mut one = SetMetrics::new(&[BS, 4 * BS]);
            ms.iter().for_each(|m| one.add(m));
            let (a, b) = ms.split_at(cut.min(ms.len()));
            let (mut left, mut right) = (SetMetrics::new(&[BS, 4 * BS]), SetMetrics::new(&[BS, 4 * BS]));
            a.iter().for_each(|m| left.add(m));
            b.iter().for_each(|m| right.add(m));
            left.merge(&right);
            prop_assert_eq!(left, one);
        }

        #[test]
        fn distribution_counts_add_up(values in prop::collection::vec(0u64..1u64 << 40, 0..100)) {
            let mut d = Distribution::default();
            for v in &values { d.add(*v); }
            prop_assert_eq!(d.count, values.len() as u64);
            prop_assert_eq!(d.buckets.iter().map(|b| b.count).sum::<u64>(), d.count);
            for v in &values {
                prop_assert!(d.buckets.iter().any(|b| b.min <= *v && *v <= b.max));
            }
        }
    }

    #[test]
    fn contiguous_file_has_ratio_one() {
        // 200 MiB in two records split at ext4's 32768-block cap, physically adjacent.
        let l = layout(vec![
            ext(0, 1 << 30, 32768 * BS, 0),
            ext(
                32768 * BS,
                (1 << 30) + 32768 * BS,
                18432 * BS,
                ExtentFlags::LAST.0,
            ),
        ]);
        let m = FileMetrics::compute(&l, &[128 * 1024, 1 << 20]);
        assert_eq!(m.extents, 2);
        assert_eq!(m.fragments, 1);
        for r in &m.requests {
            assert_eq!(r.split, r.ideal);
            assert_eq!(r.ratio(), 1.0);
        }
        assert_eq!(m.layout_score(), 1.0);
    }

    #[test]
    fn interleaved_64k_fragments_double_128k_requests() {
        // 16 fragments of 64 KiB, each 64 KiB apart on disk: every 128 KiB window holds two.
        let exts: Vec<Extent> = (0..16)
            .map(|i| ext(i * 65536, 1 << 30 | (i * 131072), 65536, 0))
            .collect();
        let m = FileMetrics::compute(&layout(exts), &[128 * 1024]);
        assert_eq!(m.fragments, 16);
        assert_eq!(m.requests[0].split, 16);
        assert_eq!(m.requests[0].ideal, 8);
        assert_eq!(m.requests[0].extra(), 8);
        assert_eq!(m.move_bytes[0], 16 * 65536);
        assert_eq!(m.frag_distances.min, 65536);
        assert_eq!(m.frag_distances.count, 15);
    }

    #[test]
    fn unwritten_and_holes_cost_no_requests() {
        let l = FileLayout {
            size: 1 << 20,
            allocated: 512 * 1024,
            block_size: 4096,
            extents: vec![
                ext(0, 1 << 30, 131072, 0),
                ext(131072, (1 << 30) + 131072, 131072, ExtentFlags::UNWRITTEN.0),
                // hole at [256K, 512K)
                ext(524288, 1 << 31, 262144, ExtentFlags::LAST.0),
            ],
        };
        let m = FileMetrics::compute(&l, &[128 * 1024]);
        assert_eq!(
            m.fragments, 2,
            "written+unwritten adjacent records are one fragment"
        );
        assert_eq!(m.requests[0].ideal, 3);
        assert_eq!(m.requests[0].split, 3);
        assert_eq!((m.holes, m.hole_bytes), (2, 262144 + 262144));
        assert_eq!(m.unwritten_bytes, 131072);
    }

    #[test]
    fn e4defrag_score_formula() {
        // ratio = (now - best) * 100 / blocks; 8*ratio up to 10, then 80 + 20*ratio/100.
        assert_eq!(e4defrag_score(1, 1, 100), 0.0);
        assert_eq!(e4defrag_score(6, 1, 100), 40.0);
        assert_eq!(e4defrag_score(51, 1, 100), 90.0);
        assert_eq!(e4defrag_best_extents(524288), 1);
        assert_eq!(e4defrag_best_extents(524289), 2);
    }
    #[test]
    fn range_request_count_clips_runs_to_the_range() {
        let run = |l: u64, p: u64, n: u64| Fragment {
            logical: l,
            physical: p,
            length: n,
            extents: 1,
        };
        // Two fragments meeting at 96K: a read of [64K, 192K) in 128K requests touches both
        // inside window 0 (split 2 + window 1: 1) while the whole file costs more.
        let runs = [run(0, 1 << 20, 96 << 10), run(96 << 10, 8 << 20, 160 << 10)];
        let rc = range_request_count(&runs, 64 << 10, 192 << 10, 128 << 10);
        assert_eq!((rc.split, rc.ideal), (3, 2));
        let rc = range_request_count(&runs, 128 << 10, 256 << 10, 128 << 10);
        assert_eq!((rc.split, rc.ideal), (1, 1));
        assert_eq!(
            range_request_count(&runs, 1 << 30, 2 << 30, 128 << 10).split,
            0
        );
    }
}
