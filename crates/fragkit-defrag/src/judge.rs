//! Is a new placement of a range better than the one it has? Decided before a move is
//! committed (from the donor's or staged file's extents) and checked after it (btrfs,
//! where the kernel picks the space itself).
//!
//! The rule: the range must come out in strictly fewer fragments, with no more split
//! requests at the planning request size R over the windows it touches; and where cutting
//! the range out of longer runs adds fragments around it, that is only accepted when it
//! buys strictly fewer split requests (FragPicker's trade: a hot 128 KiB range moved out
//! of the middle of a run leaves the run in two, but reads with one request fewer).

use serde::Serialize;

use fragkit_core::layout::model::{clip_fragments, Extent, ExtentFlags, FileLayout, Fragment};
use fragkit_core::metrics::request_count;

/// The counts a move would change, before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Judgement {
    /// Fragments inside the range.
    pub fragments_before: u64,
    pub fragments_after: u64,
    /// Requests at R over the R-windows the range touches (neighbours' data included).
    pub split_before: u64,
    pub split_after: u64,
    /// Fragments over the range and one block either side: what the file's count changes by.
    pub around_before: u64,
    pub around_after: u64,
}

impl Judgement {
    /// Worth committing: see the module comment.
    pub fn better(&self) -> bool {
        self.fragments_after < self.fragments_before
            && self.split_after <= self.split_before
            && (self.around_after <= self.around_before || self.split_after < self.split_before)
    }

    /// One line for a skip reason or a warning.
    pub fn describe(&self) -> String {
        format!(
            "fragments {}→{}, split requests {}→{} (around it {}→{} fragments)",
            self.fragments_before,
            self.fragments_after,
            self.split_before,
            self.split_after,
            self.around_before,
            self.around_after
        )
    }
}

/// Extents overlapping [lo, hi), cut at the bounds.
pub(crate) fn clip_extents(
    extents: &[Extent],
    lo: u64,
    hi: u64,
) -> impl Iterator<Item = Extent> + '_ {
    extents
        .iter()
        .filter(move |e| e.logical < hi && e.logical_end() > lo)
        .map(move |e| {
            let s = e.logical.max(lo);
            let t = e.logical_end().min(hi);
            Extent {
                logical: s,
                physical: e.physical + (s - e.logical),
                length: t - s,
                flags: e.flags,
            }
        })
}

fn located_runs(extents: Vec<Extent>, block_size: u64) -> Vec<Fragment> {
    FileLayout {
        size: extents.last().map_or(0, |e| e.logical_end()),
        allocated: 0,
        block_size: block_size as u32,
        extents,
    }
    .fragments()
}

/// Judge moving [offset, offset+length) of a file mapped by `file` to where `new` maps it
/// (`new` may map more than the range: only the range is taken from it). Preallocated
/// (unwritten) donor extents count as data: the move writes them.
pub fn judge(
    file: &[Extent],
    new: &[Extent],
    offset: u64,
    length: u64,
    block_size: u64,
    request_size: u64,
) -> Judgement {
    let end = offset + length;
    let r = request_size.max(1);
    // Everything the counts below look at: the touched windows and a block either side.
    let lo = (offset - offset % r).min(offset.saturating_sub(block_size));
    let hi = end.div_ceil(r).saturating_mul(r).max(end + block_size);
    let before: Vec<Extent> = clip_extents(file, lo, hi).collect();
    let mut after: Vec<Extent> = clip_extents(file, lo, offset)
        .chain(clip_extents(new, offset, end).map(|mut e| {
            e.flags = ExtentFlags(e.flags.0 & !ExtentFlags::UNWRITTEN.0);
            e
        }))
        .chain(clip_extents(file, end, hi))
        .collect();
    after.sort_by_key(|e| e.logical);
    let (b, a) = (
        located_runs(before, block_size),
        located_runs(after, block_size),
    );
    let count = |runs: &[Fragment], s: u64, e: u64| clip_fragments(runs, s, e).len() as u64;
    let (wlo, whi) = (offset - offset % r, end.div_ceil(r) * r);
    let (alo, ahi) = (offset.saturating_sub(block_size), end + block_size);
    Judgement {
        fragments_before: count(&b, offset, end),
        fragments_after: count(&a, offset, end),
        split_before: request_count(&clip_fragments(&b, wlo, whi), r).split,
        split_after: request_count(&clip_fragments(&a, wlo, whi), r).split,
        around_before: count(&b, alo, ahi),
        around_after: count(&a, alo, ahi),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    fn ext(logical: u64, physical: u64, length: u64) -> Extent {
        Extent {
            logical,
            physical,
            length,
            flags: ExtentFlags(0),
        }
    }

    #[test]
    fn one_run_beats_two() {
        // [0,64K) and [64K,128K) apart; the donor holds 128K in one run.
        let file = [ext(0, 0, 64 * K), ext(64 * K, 1 << 30, 64 * K)];
        let donor = [ext(0, 1 << 20, 128 * K)];
        let j = judge(&file, &donor, 0, 128 * K, 4 * K, 128 * K);
        assert_eq!((j.fragments_before, j.fragments_after), (2, 1));
        assert_eq!((j.split_before, j.split_after), (2, 1));
        assert!(j.better(), "{j:?}");
    }

    #[test]
    fn donor_in_as_many_pieces_is_refused() {
        let file = [ext(0, 0, 64 * K), ext(64 * K, 1 << 30, 64 * K)];
        let donor = [ext(0, 1 << 20, 64 * K), ext(64 * K, 1 << 25, 64 * K)];
        assert!(!judge(&file, &donor, 0, 128 * K, 4 * K, 128 * K).better());
    }

    #[test]
    fn windows_each_whole_but_scattered_count_as_worse_for_the_whole_range() {
        // Full mode's old failure: a 4-fragment 512K range moved window by window into
        // four separate places is 4 fragments again, not fewer.
        let file = [
            ext(0, 0, 128 * K),
            ext(128 * K, 1 << 30, 128 * K),
            ext(256 * K, 2 << 30, 128 * K),
            ext(384 * K, 3 << 30, 128 * K),
        ];
        let donor = [
            ext(0, 10 << 20, 128 * K),
            ext(128 * K, 20 << 20, 128 * K),
            ext(256 * K, 30 << 20, 128 * K),
            ext(384 * K, 40 << 20, 128 * K),
        ];
        assert!(!judge(&file, &donor, 0, 512 * K, 4 * K, 128 * K).better());
    }

    #[test]
    fn cutting_a_run_is_accepted_only_for_fewer_requests() {
        // Runs [0,192K) and [192K,384K); moving [128K,256K) leaves three runs around it
        // but the window [128K,256K) reads in one request instead of two.
        let file = [ext(0, 0, 192 * K), ext(192 * K, 1 << 30, 192 * K)];
        let donor = [ext(128 * K, 1 << 20, 128 * K)];
        let j = judge(&file, &donor, 128 * K, 128 * K, 4 * K, 128 * K);
        assert_eq!((j.around_before, j.around_after), (2, 3));
        assert_eq!((j.split_before, j.split_after), (2, 1));
        assert!(j.better(), "{j:?}");
        // Same cut at a request size where nothing is saved: refused.
        let j = judge(&file, &donor, 128 * K, 128 * K, 4 * K, 384 * K);
        assert!(!j.better(), "{j:?}");
    }
}
