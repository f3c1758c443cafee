//! How one file lies on disk: extents as the kernel reports them, and the fragments
//! (physically contiguous runs) that fragkit's metrics are defined on (DESIGN.md).

use serde::{Serialize, Serializer};

/// FIEMAP extent flags (include/uapi/linux/fiemap.h), kept exactly as the kernel gave them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ExtentFlags(pub u32);

impl ExtentFlags {
    pub const LAST: ExtentFlags = ExtentFlags(0x0000_0001);
    pub const UNKNOWN: ExtentFlags = ExtentFlags(0x0000_0002);
    pub const DELALLOC: ExtentFlags = ExtentFlags(0x0000_0004);
    pub const ENCODED: ExtentFlags = ExtentFlags(0x0000_0008);
    pub const DATA_ENCRYPTED: ExtentFlags = ExtentFlags(0x0000_0080);
    pub const NOT_ALIGNED: ExtentFlags = ExtentFlags(0x0000_0100);
    pub const DATA_INLINE: ExtentFlags = ExtentFlags(0x0000_0200);
    pub const DATA_TAIL: ExtentFlags = ExtentFlags(0x0000_0400);
    pub const UNWRITTEN: ExtentFlags = ExtentFlags(0x0000_0800);
    pub const MERGED: ExtentFlags = ExtentFlags(0x0000_1000);
    pub const SHARED: ExtentFlags = ExtentFlags(0x0000_2000);
    /// ext4's extent-status-cache hole marker (fs/ext4/ext4.h); never from plain FIEMAP.
    pub const EXT4_HOLE: ExtentFlags = ExtentFlags(0x0800_0000);

    /// Names in filefrag's order, as used in JSON output.
    pub const NAMED: [(ExtentFlags, &'static str); 12] = [
        (Self::LAST, "last"),
        (Self::UNKNOWN, "unknown"),
        (Self::DELALLOC, "delalloc"),
        (Self::ENCODED, "encoded"),
        (Self::DATA_ENCRYPTED, "encrypted"),
        (Self::NOT_ALIGNED, "not_aligned"),
        (Self::DATA_INLINE, "inline"),
        (Self::DATA_TAIL, "tail"),
        (Self::UNWRITTEN, "unwritten"),
        (Self::MERGED, "merged"),
        (Self::SHARED, "shared"),
        (Self::EXT4_HOLE, "hole"),
    ];

    pub fn contains(self, other: ExtentFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Flag names; bits fragkit has no name for appear as hex ("0x40000").
    pub fn names(self) -> Vec<String> {
        let mut rest = self.0;
        let mut out = Vec::new();
        for (flag, name) in Self::NAMED {
            if rest & flag.0 != 0 {
                out.push(name.to_string());
                rest &= !flag.0;
            }
        }
        let mut bit = 1u32;
        while rest != 0 && bit != 0 {
            if rest & bit != 0 {
                out.push(format!("{bit:#x}"));
                rest &= !bit;
            }
            bit <<= 1;
        }
        out
    }
}

impl Serialize for ExtentFlags {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.names())
    }
}

/// One FIEMAP record: bytes [logical, logical+length) of the file live at
/// [physical, physical+length) of the device (on btrfs: btrfs's logical address space).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub flags: ExtentFlags,
}

impl Extent {
    pub fn logical_end(&self) -> u64 {
        self.logical.saturating_add(self.length)
    }
    pub fn physical_end(&self) -> u64 {
        self.physical.saturating_add(self.length)
    }
    /// Has a real place on the device (not delalloc/unknown, not packed into metadata).
    pub fn is_located(&self) -> bool {
        !self.flags.contains(ExtentFlags::UNKNOWN)
            && !self.flags.contains(ExtentFlags::DELALLOC)
            && !self.flags.contains(ExtentFlags::DATA_INLINE)
            && !self.flags.contains(ExtentFlags::EXT4_HOLE)
    }
    /// Reading it costs device I/O: located and written (unwritten extents read as zeros).
    pub fn costs_read_io(&self) -> bool {
        self.is_located() && !self.flags.contains(ExtentFlags::UNWRITTEN)
    }
    /// Whether `next` continues this extent on the device, so a read crosses no seek.
    ///
    /// Compressed (ENCODED) extents report their logical length, not the smaller length
    /// on disk, so a following extent that starts anywhere inside this one's reported
    /// span is taken as adjacent rather than blindly counted as fragmentation.
    pub fn continues_into(&self, next: &Extent) -> bool {
        if next.logical != self.logical_end() {
            return false;
        }
        if next.physical == self.physical_end() {
            return true;
        }
        self.flags.contains(ExtentFlags::ENCODED)
            && next.physical > self.physical
            && next.physical <= self.physical_end()
    }
}

/// A maximal run of extents contiguous both logically and physically (DESIGN.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fragment {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    /// How many extent records were merged into it.
    pub extents: u32,
}

impl Fragment {
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
    pub fn bytes_with(&self, flag: ExtentFlags) -> u64 {
        self.extents
            .iter()
            .filter(|e| e.flags.contains(flag))
            .map(|e| e.length)
            .sum()
    }
}
