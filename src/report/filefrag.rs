//! `--format filefrag`: byte-for-byte what `filefrag -v FILE...` (e2fsprogs 1.47) prints
//! for the same files in the same order, so existing scripts keep working.
//!
//! filefrag keeps some state across the files of one run (column widths only grow; the
//! "Filesystem type" line is printed when the device changes), so the printer is a struct.

use std::io::{self, Write};

use crate::layout::model::{Extent, ExtentFlags};
use crate::layout::walk::ScannedFile;

pub struct FilefragPrinter {
    logical_width: usize,
    physical_width: usize,
    last_device: u64,
}

impl Default for FilefragPrinter {
    fn default() -> Self {
        FilefragPrinter {
            logical_width: 8,
            physical_width: 10,
            last_device: 0,
        }
    }
}

/// Digits minus one (filefrag's ulong_log10).
fn log10_floor(mut v: u64) -> usize {
    let mut l = 0;
    v /= 10;
    while v > 0 {
        l += 1;
        v /= 10;
    }
    l
}

fn log2_floor(v: u64) -> u32 {
    if v <= 1 {
        0
    } else {
        63 - v.leading_zeros()
    }
}

/// Flag names in filefrag's order and spelling.
const FLAG_NAMES: [(ExtentFlags, &str); 12] = [
    (ExtentFlags::LAST, "last,"),
    (ExtentFlags::UNKNOWN, "unknown_loc,"),
    (ExtentFlags::DELALLOC, "delalloc,"),
    (ExtentFlags::ENCODED, "encoded,"),
    (ExtentFlags::DATA_ENCRYPTED, "encrypted,"),
    (ExtentFlags::NOT_ALIGNED, "not_aligned,"),
    (ExtentFlags::DATA_INLINE, "inline,"),
    (ExtentFlags::DATA_TAIL, "tail_packed,"),
    (ExtentFlags::UNWRITTEN, "unwritten,"),
    (ExtentFlags::MERGED, "merged,"),
    (ExtentFlags::SHARED, "shared,"),
    (ExtentFlags::EXT4_HOLE, "hole,"),
];

impl FilefragPrinter {
    pub fn print(&mut self, out: &mut impl Write, f: &ScannedFile) -> io::Result<()> {
        let path = f.path.display();
        let blksize = f.fs.block_size.max(1) as u64;
        if self.last_device != f.dev || f.dev == 0 {
            writeln!(out, "Filesystem type is: {:x}", f.fs.magic)?;
        }
        self.last_device = f.dev;
        self.physical_width = self.physical_width.max(log10_floor(f.fs.blocks));
        let size = f.layout.size;
        let numblocks = size.div_ceil(blksize);
        let blk_shift = log2_floor(blksize);
        self.logical_width = self.logical_width.max(log10_floor(numblocks));
        writeln!(
            out,
            "File size of {path} is {size} ({} block{} of {} bytes)",
            (numblocks * blksize) >> blk_shift,
            if numblocks == 1 { "" } else { "s" },
            1u64 << blk_shift
        )?;

        let mut tot_extents = 0u64;
        let mut last: Option<&Extent> = None;
        for (n, e) in f.layout.extents.iter().enumerate() {
            if n == 0 {
                writeln!(
                    out,
                    " ext: {:>lw$} {:>pw$} length: {:>ew$} flags:",
                    "logical_offset:",
                    "physical_offset:",
                    "expected:",
                    lw = self.logical_width * 2 + 3,
                    pw = self.physical_width * 2 + 3,
                    ew = self.physical_width + 1
                )?;
            }
            // filefrag compares with the previous record (zeroed before the first one).
            let (lp, ll, llen) = last.map_or((0, 0, 0), |l| (l.physical, l.logical, l.length));
            let expected_dense = lp.wrapping_add(llen);
            let mut expected = lp.wrapping_add(e.logical).wrapping_sub(ll);
            if e.logical != 0 && e.physical != expected && e.physical != expected_dense {
                tot_extents += 1;
            } else {
                expected = 0;
                if tot_extents == 0 {
                    tot_extents = 1;
                }
            }
            self.print_extent(out, e, n, expected, blk_shift, size)?;
            last = Some(e);
        }
        if tot_extents == 1 {
            writeln!(out, "{path}: 1 extent found")
        } else {
            writeln!(out, "{path}: {tot_extents} extents found")
        }
    }

    fn print_extent(
        &self,
        out: &mut impl Write,
        e: &Extent,
        n: usize,
        expected: u64,
        blk_shift: u32,
        size: u64,
    ) -> io::Result<()> {
        let shift = if e.flags.contains(ExtentFlags::DATA_INLINE) {
            0
        } else {
            blk_shift
        };
        let mut ext_len = e.length >> shift;
        let ext_blks = e.length.wrapping_sub(1) >> shift;
        let logical_blk = e.logical >> shift;
        let unknown = e.flags.contains(ExtentFlags::UNKNOWN);
        let hole = e.flags.contains(ExtentFlags::EXT4_HOLE);
        let physical_blk = if unknown { 0 } else { e.physical >> shift };
        let pw = self.physical_width;

        let mut flags = if expected != 0 && !unknown && !hole {
            format!("{:>pw$}: ", expected >> shift)
        } else {
            format!("{}  ", " ".repeat(pw.min(19)))
        };
        let mut rest = e.flags.0;
        for (flag, name) in FLAG_NAMES {
            if rest & flag.0 != 0 {
                flags.push_str(name);
                rest &= !flag.0;
            }
        }
        let mut mask = 1u32;
        while rest != 0 && mask != 0 {
            if rest & mask != 0 {
                flags.push_str(&format!("{mask:#04x},"));
                rest &= !mask;
            }
            mask <<= 1;
        }
        if e.logical.wrapping_add(e.length) >= size {
            flags.push_str("eof,");
        }
        // filefrag drops the last character unconditionally (meant for the trailing comma).
        flags.pop();
        let ext_blks_phys = if unknown || hole {
            ext_len = 0;
            0
        } else {
            ext_blks
        };
        let lw = self.logical_width;
        writeln!(
            out,
            "{n:>4}: {logical_blk:>lw$}..{:>lw$}: {physical_blk:>pw$}..{:>pw$}: {ext_len:>6}: {flags}",
            logical_blk.wrapping_add(ext_blks),
            physical_blk.wrapping_add(ext_blks_phys),
        )
    }
}
