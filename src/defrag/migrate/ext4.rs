//! ext4: EXT4_IOC_MOVE_EXT from a preallocated donor. The kernel copies the data into the
//! donor's blocks and swaps the block mappings under the inode locks, journalled: after a
//! crash the file maps either the old or the new blocks, never zeros (what e4defrag uses).

use std::os::fd::AsRawFd;

use anyhow::{bail, Result};

use super::{donor_for, not_better, Migrator, RangeOutcome, Target};

/// struct move_extent (fs/ext4/ext4.h).
#[repr(C)]
#[derive(Default)]
struct MoveExtent {
    reserved: u32,
    donor_fd: u32,
    orig_start: u64,
    donor_start: u64,
    len: u64,
    moved_len: u64,
}

/// EXT4_IOC_MOVE_EXT = _IOWR('f', 15, struct move_extent) (fs/ext4/ext4.h).
const EXT4_IOC_MOVE_EXT: libc::c_ulong =
    nix::request_code_readwrite!(b'f', 15, std::mem::size_of::<MoveExtent>()) as libc::c_ulong;

/// One EXT4_IOC_MOVE_EXT call: exchange `len` blocks of `orig` from block `orig_start`
/// with the donor's from `donor_start` (the kernel copies the data into the donor's blocks
/// first). Returns the blocks moved, which may be fewer than asked.
pub fn move_ext(
    orig: &std::fs::File,
    donor: &std::fs::File,
    orig_start: u64,
    donor_start: u64,
    len: u64,
) -> std::io::Result<u64> {
    let mut me = MoveExtent {
        donor_fd: donor.as_raw_fd() as u32,
        orig_start,
        donor_start,
        len,
        ..Default::default()
    };
    // SAFETY: valid struct move_extent for the ioctl.
    let rc = unsafe { libc::ioctl(orig.as_raw_fd(), EXT4_IOC_MOVE_EXT as _, &mut me) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(me.moved_len)
}

pub struct MoveExt;

impl Migrator for MoveExt {
    fn primitive(&self) -> &'static str {
        "EXT4_IOC_MOVE_EXT"
    }

    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome> {
        let bs = t.block_size;
        // Same logical offsets in donor and original, as MOVE_EXT wants.
        let (donor, judged, _sinks) = match donor_for(t, offset, length)? {
            Ok(d) => d,
            Err(best) => return Ok(not_better(best, length)),
        };
        let mut done = 0u64;
        let blocks = length / bs;
        while done < blocks {
            let at = offset / bs + done;
            let moved = match move_ext(t.file, &donor, at, at, blocks - done) {
                Ok(n) => n,
                Err(e) if done > 0 => {
                    bail!("EXT4_IOC_MOVE_EXT stopped after {done} of {blocks} blocks: {e}")
                }
                Err(e) => return Err(e.into()),
            };
            if moved == 0 {
                bail!("EXT4_IOC_MOVE_EXT moved nothing at block {at}");
            }
            done += moved;
        }
        // Closing the donor frees the old, fragmented blocks it now holds.
        drop(donor);
        Ok(RangeOutcome::Moved {
            bytes: length,
            judged,
        })
    }
}
