//! ext4's journal statistics (/proc/fs/jbd2/NAME-INO/info): how many commits were asked
//! for. EXT4_IOC_MOVE_EXT forces a commit and retries each time the kernel cannot release
//! a page-cache folio it is moving (another reader's large folio holding a range it just
//! moved), so this counter tells a caller that its moves are paying a journal write each.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The journal of one mounted ext4 (internal journal: /proc/fs/jbd2/DEV-8).
#[derive(Debug, Clone)]
pub struct Journal {
    info: PathBuf,
}

impl Journal {
    /// The journal of the file system holding `f`, when its device has one under
    /// /proc/fs/jbd2 (an external journal is named after its own device: None).
    pub fn of_file(f: &File) -> Option<Journal> {
        let name = crate::dev::block_name(f.metadata().ok()?.dev())?;
        let prefix = format!("{name}-");
        std::fs::read_dir("/proc/fs/jbd2")
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| Journal {
                info: e.path().join("info"),
            })
    }

    /// Commits asked for since the journal was loaded ("N transactions (M requested)").
    pub fn requested(&self) -> Option<u64> {
        parse_requested(&std::fs::read_to_string(&self.info).ok()?)
    }
}

fn parse_requested(text: &str) -> Option<u64> {
    let first = text.lines().next()?;
    let (_, rest) = first.split_once('(')?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requested_count_is_read_from_the_first_line() {
        let t = "3795 transactions (3121 requested), each up to 2730 blocks\naverage: \n";
        assert_eq!(parse_requested(t), Some(3121));
        assert_eq!(parse_requested("garbage"), None);
        assert_eq!(parse_requested(""), None);
    }
}
