//! How one file lies on disk: extents as the kernel reports them, and the fragments
//! (physically contiguous runs) that fragkit's metrics are defined on (docs/design.md).

use serde::Serialize;

pub use fragkit_sys::fiemap::{Extent, ExtentFlags};

/// A maximal run of extents contiguous both logically and physically (docs/design.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fragment {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    /// How many extent records were merged into it.
    pub extents: u32,
}

impl Fragment {
    /// The fragment of one extent record.
    pub fn of(e: &Extent) -> Fragment {
        Fragment {
            logical: e.logical,
            physical: e.physical,
            length: e.length,
            extents: 1,
        }
    }
    pub fn logical_end(&self) -> u64 {
        self.logical + self.length
    }
    pub fn physical_end(&self) -> u64 {
        self.physical + self.length
    }
}

/// The parts of `frags` inside [start, end), cut at the bounds.
pub fn clip_fragments(frags: &[Fragment], start: u64, end: u64) -> Vec<Fragment> {
    frags
        .iter()
        .filter(|f| f.logical < end && f.logical_end() > start)
        .map(|f| {
            let lo = f.logical.max(start);
            let hi = f.logical_end().min(end);
            Fragment {
                logical: lo,
                physical: f.physical + (lo - f.logical),
                length: hi - lo,
                extents: f.extents,
            }
        })
        .collect()
}

/// Merge extents that pass `keep` into maximal contiguous runs.
fn merge_runs(extents: &[Extent], keep: impl Fn(&Extent) -> bool) -> Vec<Fragment> {
    let mut out: Vec<Fragment> = Vec::new();
    let mut prev: Option<Extent> = None;
    for e in extents.iter().filter(|e| keep(e) && e.length > 0) {
        match (prev, out.last_mut()) {
            (Some(p), Some(run)) if p.continues_into(e) => {
                run.length = e.logical_end() - run.logical;
                run.extents += 1;
            }
            _ => out.push(Fragment {
                logical: e.logical,
                physical: e.physical,
                length: e.length,
                extents: 1,
            }),
        }
        prev = Some(*e);
    }
    out
}

/// Everything fragkit knows about one file's placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLayout {
    /// st_size.
    pub size: u64,
    /// st_blocks * 512: what the file really occupies, metadata-packed data included.
    pub allocated: u64,
    /// Block size of the file system (FIGETBSZ); the unit of layout score and alignment.
    pub block_size: u32,
    /// FIEMAP records in logical order.
    pub extents: Vec<Extent>,
}

impl FileLayout {
    /// Fragments over every located extent (written or preallocated): the DoF.
    pub fn fragments(&self) -> Vec<Fragment> {
        merge_runs(&self.extents, Extent::is_located)
    }

    /// Runs that a read actually fetches from the device: written, located data only,
    /// clipped to the end of the file rounded up to a block (an O_DIRECT read stops there).
    pub fn data_runs(&self) -> Vec<Fragment> {
        let mut runs = merge_runs(&self.extents, Extent::costs_read_io);
        let bs = self.block_size.max(1) as u64;
        let readable_end = self.size.div_ceil(bs) * bs;
        runs.retain_mut(|r| {
            if r.logical >= readable_end {
                return false;
            }
            if r.logical_end() > readable_end {
                r.length = readable_end - r.logical;
            }
            true
        });
        runs
    }

    /// Byte ranges of [0, size) not covered by any extent: (count, bytes).
    pub fn holes(&self) -> (u64, u64) {
        let mut count = 0;
        let mut bytes = 0;
        let mut pos = 0u64;
        for e in &self.extents {
            if e.logical > pos && pos < self.size {
                count += 1;
                bytes += e.logical.min(self.size) - pos;
            }
            pos = pos.max(e.logical_end());
        }
        if pos < self.size {
            count += 1;
            bytes += self.size - pos;
        }
        (count, bytes)
    }

    /// Bytes in extents carrying `flag`.
    #[cfg(test)]
    pub(crate) fn bytes_with(&self, flag: ExtentFlags) -> u64 {
        self.extents
            .iter()
            .filter(|e| e.flags.contains(flag))
            .map(|e| e.length)
            .sum()
    }
}
