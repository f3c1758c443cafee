//! Full mode's free-space plan: from GETFSMAP's free records, the fewest pieces a file's
//! range could be put in (best fit, largest first), so that a file free space cannot
//! improve is skipped before anything is written.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

use fragkit_sys::dev::encode_dev;
use fragkit_sys::fsmap::{read_fsmap, FsmapError};

/// Lengths of the free extents of the file system holding `file`, largest first. On ext4
/// GETFSMAP reports free space per block group, and an allocation never spans groups
/// either, so each record is a run one allocation can take.
pub(crate) fn free_runs(file: &File) -> Result<Vec<u64>, FsmapError> {
    let dev = file.metadata().map_err(FsmapError::Io)?.dev();
    let mut runs: Vec<u64> = read_fsmap(file.as_fd(), Some(encode_dev(dev)), 0, u64::MAX)?
        .into_iter()
        .filter(|r| r.owner.is_free())
        .map(|r| r.length)
        .collect();
    runs.sort_unstable_by(|a, b| b.cmp(a));
    Ok(runs)
}

/// Piece sizes for `length` bytes: the smallest free run that holds what is left (best
/// fit), else the largest one and continue. None if all free space together is too small.
/// `runs` is sorted largest first; pieces are whole blocks.
pub(crate) fn best_fit_pieces(runs: &[u64], length: u64, block_size: u64) -> Option<Vec<u64>> {
    let bs = block_size.max(1);
    let mut left = length.div_ceil(bs) * bs;
    let mut pieces = Vec::new();
    let mut next_largest = 0;
    while left > 0 {
        // Runs from next_largest on are unused; the best fit is the last one >= left.
        let unused = &runs[next_largest.min(runs.len())..];
        let fits = unused.partition_point(|&r| r >= left);
        if fits > 0 {
            pieces.push(left);
            return Some(pieces);
        }
        let &largest = unused.first()?;
        let take = largest / bs * bs;
        if take == 0 {
            return None;
        }
        pieces.push(take);
        left -= take;
        next_largest += 1;
    }
    Some(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn best_fit_then_largest_first() {
        let runs = [64 * K * K, 16 * K * K, 1024 * K, 256 * K];
        // One run holds it: the smallest that does.
        assert_eq!(
            best_fit_pieces(&runs, 10 * K * K, 4 * K),
            Some(vec![10 * K * K])
        );
        assert_eq!(best_fit_pieces(&runs, 200 * K, 4 * K), Some(vec![200 * K]));
        // Needs two: the largest, then the best fit for the rest.
        assert_eq!(
            best_fit_pieces(&runs, 65 * K * K, 4 * K),
            Some(vec![64 * K * K, K * K])
        );
        // More than all free space.
        assert_eq!(best_fit_pieces(&runs, 100 * K * K, 4 * K), None);
        assert_eq!(best_fit_pieces(&[], 4 * K, 4 * K), None);
    }
}
