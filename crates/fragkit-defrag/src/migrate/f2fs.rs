//! f2fs: F2FS_IOC_DEFRAGMENT rewrites the range's blocks out of place (a new log
//! location); the node update is checkpointed, so a crash leaves the old blocks.

use anyhow::Result;

use super::{judge_result, stamp, Migrator, RangeOutcome, Restamp, Target};

pub struct Defragment;

impl Migrator for Defragment {
    fn primitive(&self) -> &'static str {
        "F2FS_IOC_DEFRAGMENT"
    }

    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome> {
        fragkit_sys::f2fs_defrag::defragment(t.file, offset, length)?;
        t.file.sync_all()?;
        Ok(RangeOutcome::Moved {
            bytes: length,
            judged: judge_result(t, offset, length)?,
            restamped: None,
        })
    }
}

/// FragPicker's F2FS migration (`--method rewrite --unsafe` on f2fs): read the range and
/// write the same bytes back, then fsync. F2FS writes the dirty pages out of place, at the
/// head of its data log, in one run. No hole is punched, so unlike the generic rewrite
/// there is no window in which a crash leaves zeros; but nothing locks out other writers.
///
/// It only moves data while F2FS's in-place-update policy is off: a small volume (< 16
/// GiB) mounts with ipu_policy = FORCE|HONOR_OPU_WRITE (129) and would overwrite every
/// block where it is, a large one with FSYNC (16) would do so in fsync. The caller sets
/// /sys/fs/f2fs/<dev>/ipu_policy to [`OUT_OF_PLACE_POLICY`] for the run and restores it
/// (see `defrag::run`).
pub struct Rewrite;

/// ipu_policy with no in-place-update condition: every rewrite goes out of place.
pub(crate) const OUT_OF_PLACE_POLICY: &str = "0";

impl Migrator for Rewrite {
    fn primitive(&self) -> &'static str {
        "read+write+fsync, out of place (f2fs ipu_policy 0, unsafe)"
    }

    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome> {
        let length = length.min(t.size.saturating_sub(offset));
        let began = stamp(t.file);
        super::copy_range_data(t.file, t.file, offset, length)?;
        t.file.sync_all()?;
        Ok(RangeOutcome::Moved {
            bytes: length,
            judged: judge_result(t, offset, length)?,
            restamped: Some(Restamp {
                began,
                ended: stamp(t.file),
            }),
        })
    }
}
