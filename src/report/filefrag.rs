//! `--format filefrag`: byte-for-byte what `filefrag -v FILE...` (e2fsprogs 1.47) prints
//! for the same arguments in the same order, so existing scripts keep working: the same
//! lines on stdout, the same messages on stderr and the same exit status.
//!
//! filefrag keeps some state across the files of one run (column widths only grow; the
//! "Filesystem type" line is printed when the device changes), so the printer is a struct.

use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::layout::model::{Extent, ExtentFlags};
use crate::layout::walk::{self, ArgumentExtents};
use crate::sys::fsinfo::FsInfo;

pub(crate) struct FilefragPrinter {
    logical_width: usize,
    physical_width: usize,
    last_device: u64,
    said_bad_flags: bool,
}

impl Default for FilefragPrinter {
    fn default() -> Self {
        FilefragPrinter {
            logical_width: 8,
            physical_width: 10,
            last_device: 0,
            said_bad_flags: false,
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

/// strerror text without Rust's " (os error N)" suffix, as perror prints it.
fn strerror(errno: i32) -> String {
    let s = io::Error::from_raw_os_error(errno).to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Why one argument produced no extent list: what filefrag writes on stderr, and the errno
/// it exits with (the first failing argument's).
struct Failure {
    /// Bytes: a file name is printed as it is, UTF-8 or not, as filefrag prints it.
    message: Vec<u8>,
    errno: i32,
}

impl FilefragPrinter {
    /// "Filesystem type" (and, for ext2-style files, the cylinder-group line) when the
    /// device changes, then "File size of ...".
    fn header(
        &mut self,
        out: &mut impl Write,
        path: &Path,
        dev: u64,
        fs: &FsInfo,
        size: u64,
        block_mapped_ext: bool,
    ) -> io::Result<()> {
        let blksize = fs.block_size.max(1) as u64;
        if self.last_device != dev || dev == 0 {
            writeln!(out, "Filesystem type is: {:x}", fs.magic)?;
            if block_mapped_ext {
                writeln!(
                    out,
                    "Filesystem cylinder groups approximately {}",
                    fs.blocks.div_ceil(blksize * 8)
                )?;
            }
        }
        self.last_device = dev;
        self.physical_width = self.physical_width.max(log10_floor(fs.blocks));
        let numblocks = size.div_ceil(blksize);
        let blk_shift = log2_floor(blksize);
        self.logical_width = self.logical_width.max(log10_floor(numblocks));
        write!(out, "File size of ")?;
        out.write_all(path.as_os_str().as_bytes())?;
        writeln!(
            out,
            " is {size} ({} block{} of {} bytes)",
            (numblocks * blksize) >> blk_shift,
            if numblocks == 1 { "" } else { "s" },
            1u64 << blk_shift
        )
    }

    /// The extent lines and "N extents found".
    fn extents(
        &mut self,
        out: &mut impl Write,
        path: &Path,
        block_size: u32,
        size: u64,
        extents: &[Extent],
    ) -> io::Result<()> {
        let blk_shift = log2_floor(block_size.max(1) as u64);
        let mut tot_extents = 0u64;
        let mut last: Option<&Extent> = None;
        for (n, e) in extents.iter().enumerate() {
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
        out.write_all(path.as_os_str().as_bytes())?;
        if tot_extents == 1 {
            writeln!(out, ": 1 extent found")
        } else {
            writeln!(out, ": {tot_extents} extents found")
        }
    }

    /// One argument as `filefrag -v` handles it (mapped by [`walk::map_argument`]).
    fn report(
        &mut self,
        out: &mut impl Write,
        path: &Path,
        sync: bool,
    ) -> io::Result<Option<Failure>> {
        let m = match walk::map_argument(path, sync) {
            Ok(m) => m,
            Err((what, e)) => {
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                return Ok(Some(Failure {
                    message: format!("{what}: {}", strerror(errno)).into_bytes(),
                    errno,
                }));
            }
        };
        self.header(out, path, m.dev, &m.fs, m.size, m.block_mapped_ext)?;
        let (bad_flags, fibmap) = match m.extents {
            ArgumentExtents::Mapped(extents) => {
                self.extents(out, path, m.fs.block_size, m.size, &extents)?;
                return Ok(None);
            }
            ArgumentExtents::Unmapped { bad_flags, fibmap } => (bad_flags, fibmap),
        };
        if let Some(flags) = bad_flags {
            // filefrag says this once and then falls back like any other FIEMAP failure.
            if !self.said_bad_flags {
                self.said_bad_flags = true;
                out.flush()?;
                fragkit_sys::stderr_line!("FIEMAP failed with unknown flags {flags:x}");
            }
        }
        // filefrag's fallback: FIBMAP block by block. With no blocks there is nothing to ask.
        let Some(fibmap) = fibmap else {
            self.extents(out, path, m.fs.block_size, m.size, &[])?;
            return Ok(None);
        };
        let (text, errno) = match fibmap {
            Err(e) => match e.raw_os_error().unwrap_or(libc::EIO) {
                errno @ (libc::EINVAL | libc::ENOTTY) => {
                    (": FIBMAP/FIEMAP unsupported".to_string(), errno)
                }
                libc::EPERM => (": FIBMAP requires root privileges".into(), libc::EPERM),
                // Not met on tmpfs, procfs, sysfs or devices; this wording is fragkit's.
                errno => (format!(": FIBMAP error: {}", strerror(errno)), errno),
            },
            // A file system with block maps but no FIEMAP (minix, isofs, fuseblk): none is
            // mountable on the machines fragkit is tested on, so its listing is not emulated.
            Ok(_) => (
                ": no FIEMAP; fragkit does not list FIBMAP block maps (use filefrag)".into(),
                libc::EOPNOTSUPP,
            ),
        };
        let mut message = path.as_os_str().as_bytes().to_vec();
        message.extend_from_slice(text.as_bytes());
        Ok(Some(Failure { message, errno }))
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

/// `filefrag -v PATHS...`: every path in argument order, the same path as often as named,
/// a directory as its own inode. Extent lists go to `out`, filefrag's messages to stderr
/// (after flushing `out`, so a terminal shows them in order). Returns filefrag's exit
/// status: 0, or the errno of the first argument that failed.
pub(crate) fn filefrag_v(
    out: &mut impl Write,
    paths: &[impl AsRef<Path>],
    sync: bool,
) -> io::Result<i32> {
    let mut p = FilefragPrinter::default();
    let mut status = 0;
    for path in paths {
        if let Some(mut f) = p.report(out, path.as_ref(), sync)? {
            out.flush()?;
            f.message.push(b'\n');
            io::stderr().write_all(&f.message)?;
            if status == 0 {
                status = f.errno;
            }
        }
    }
    Ok(status)
}
