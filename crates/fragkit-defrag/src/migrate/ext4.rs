//! ext4: EXT4_IOC_MOVE_EXT from a preallocated donor. The kernel copies the data into the
//! donor's blocks and swaps the block mappings under the inode locks, journalled: after a
//! crash the file maps either the old or the new blocks, never zeros (what e4defrag uses).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use anyhow::{bail, Result};

use super::{donor_for, not_better, Migrator, RangeOutcome, Target};
use crate::verify::{prefetch, read_ahead_window};
use fragkit_sys::fadvise::{fadvise, Advice};
use fragkit_sys::jbd2::Journal;
use fragkit_sys::move_ext::move_ext;

/// Bytes handed to one EXT4_IOC_MOVE_EXT call. The kernel holds the file's i_rwsem for
/// the whole call, and every read of the file waits behind it (O_DIRECT reads too): 64 KiB
/// holds it about 0.1 ms, roughly one flash read. db_bench reading the moved files waited
/// for the lock in 35% of its samples with 1 MiB calls, 8% with 64 KiB
/// (bench/app-interference.py; docs/defrag.md, "Beside a running application").
const MOVE_BYTES: u64 = 64 << 10;

/// Bytes moved over which forced journal commits are counted.
const RETRY_WINDOW: u64 = 1 << 20;

/// Forced journal commits while RETRY_WINDOW is moved that mean the kernel is retrying its
/// moves: moves alone ask for none, and a run's own syncs ask for one or two in all.
const RETRY_COMMITS: u64 = 4;

/// One migrator per file.
#[derive(Default)]
pub(crate) struct MoveExt {
    journal: OnceLock<Option<Journal>>,
    /// Another reader keeps the file's pages in large folios: drop each chunk's clean
    /// pages right before its move.
    drop_before_move: AtomicBool,
    window: OnceLock<u64>,
}

impl Migrator for MoveExt {
    fn primitive(&self) -> &'static str {
        "EXT4_IOC_MOVE_EXT"
    }

    fn feeds_before_checksum(&self) -> bool {
        true
    }

    fn migrate(&self, t: &Target<'_>, offset: u64, length: u64) -> Result<RangeOutcome> {
        let bs = t.block_size;
        // Same logical offsets in donor and original, as MOVE_EXT wants.
        let (donor, judged, sinks) = match donor_for(t, offset, length)? {
            Ok(d) => d,
            Err(best) => return Ok(not_better(best, length)),
        };
        // The kernel moves extent by extent, each within one page-cache folio of the file;
        // when a folio holds the extent just moved (dirty) and the next, it cannot release
        // it, so it forces a journal commit and retries, once per extent. Another reader's
        // buffered reads leave large folios spanning many small extents: a 48 MiB file in
        // 16 KiB pieces, read by `cat` in a loop, was written 1.0-3.2× over (up to 6,628
        // forced commits). Reading the chunk again into order-0 folios just before its
        // move avoids that for one more device read of the chunk, so it is done only once
        // the journal shows the retries.
        let journal = self.journal.get_or_init(|| Journal::of_file(t.file));
        let mut done = 0u64;
        let blocks = length / bs;
        let chunk = (MOVE_BYTES / bs).max(1);
        let retry_window = (RETRY_WINDOW / bs).max(1);
        // The journal's count when the current window of moves began.
        let mut commits = journal.as_ref().and_then(Journal::requested);
        let mut window_from = 0u64;
        while done < blocks {
            let at = offset / bs + done;
            let n = (blocks - done).min(chunk);
            if done == window_from && self.drop_before_move.load(Ordering::Relaxed) {
                // Drop the window's pages, then read them back at once in order-0 folios
                // (WILLNEED), before the reader's readahead can put large ones there
                // again. A whole window, not each call's span: a large folio reaching
                // past the range dropped stays cached (on 64 KiB spans one run of
                // bench/defrag-reader.sh in three made 1,058 commits instead of 98).
                let span = (blocks - done).min(retry_window);
                let _ = fadvise(t.file, at * bs, span * bs, Advice::DontNeed);
                let window = *self.window.get_or_init(|| read_ahead_window(t.file));
                prefetch(t.file, at * bs, span * bs, window);
            }
            // The source is read (and checksummed) a window at a time just before it
            // moves, not the whole range ahead of the first move: a 32 MiB range read
            // ahead whole went to the device in one burst above the ceiling's rate, and
            // db_bench's reads beside it stalled (docs/defrag.md). --max-rate waits here
            // too, so a large range is paced call by call.
            if let Some(before_step) = t.before_step {
                before_step((at + n) * bs)
                    .map_err(|e| anyhow::anyhow!("reading before migration: {e}"))?;
            }
            let moved = match move_ext(t.file, &donor, at, at, n) {
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
            if done - window_from >= retry_window || done >= blocks {
                let after = journal.as_ref().and_then(Journal::requested);
                if let (Some(a), Some(b)) = (commits, after) {
                    if b.saturating_sub(a) >= RETRY_COMMITS {
                        self.drop_before_move.store(true, Ordering::Relaxed);
                    }
                }
                commits = after;
                window_from = done;
            }
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
