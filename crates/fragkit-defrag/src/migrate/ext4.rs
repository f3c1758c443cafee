//! ext4: EXT4_IOC_MOVE_EXT from a preallocated donor. The kernel copies the data into the
//! donor's blocks and swaps the block mappings under the inode locks, journalled: after a
//! crash the file maps either the old or the new blocks, never zeros (what e4defrag uses).

use anyhow::{bail, Result};

use super::{donor_for, not_better, Migrator, RangeOutcome, Target};
use fragkit_sys::move_ext::move_ext;

pub(crate) struct MoveExt;

impl Migrator for MoveExt {
    fn primitive(&self) -> &'static str {
        "EXT4_IOC_MOVE_EXT"
    }

    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome> {
        let bs = t.block_size;
        // Same logical offsets in donor and original, as MOVE_EXT wants.
        let (donor, judged, sinks) = match donor_for(t, offset, length)? {
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
        t.release(donor);
        for f in sinks {
            t.release(f);
        }
        Ok(RangeOutcome::Moved {
            bytes: length,
            judged,
            restamped: None,
        })
    }
}
