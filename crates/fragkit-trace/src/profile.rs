//! The trace profile: a JSON file listing, per file, the byte ranges that were accessed and
//! how often. Written by `fragkit trace`, read by `fragkit defrag --mode pick --profile`.
//!
//! ```text
//! {"version": 1, "kind": "fragkit-trace-profile", "duration_ns": 0, "events": 0,
//!  "dropped": 0, "unresolved_files": 0,
//!  "files": [{"path": "/abs/path", "dev": "7:0", "ino": 12, "block_size": 4096,
//!             "size": 0, "read_ahead": 131072, "reads": 0, "writes": 0,
//!             "bytes_read": 0, "bytes_written": 0,
//!             "ranges": [{"offset": 0, "length": 131072, "reads": 3, "writes": 0}]}]}
//! ```
//! Offsets and lengths are bytes, block-aligned; each file's ranges are sorted and do not
//! overlap. Only `version`, `kind`, `files[].path/dev/ino/block_size/ranges` are required
//! when loading; the rest default to 0.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

pub const KIND: &str = "fragkit-trace-profile";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub version: u32,
    pub kind: String,
    #[serde(default)]
    pub duration_ns: u64,
    #[serde(default)]
    pub events: u64,
    #[serde(default)]
    pub dropped: u64,
    /// Files that were accessed but whose path could not be found (deleted meanwhile).
    #[serde(default)]
    pub unresolved_files: u64,
    pub files: Vec<ProfileFile>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFile {
    pub path: PathBuf,
    /// "major:minor" of the file system's device, as in `fragkit scan` output.
    pub dev: String,
    pub ino: u64,
    pub block_size: u64,
    /// Largest file size seen during the trace.
    #[serde(default)]
    pub size: u64,
    /// Readahead window the range model used (bytes).
    #[serde(default)]
    pub read_ahead: u64,
    #[serde(default)]
    pub reads: u64,
    #[serde(default)]
    pub writes: u64,
    #[serde(default)]
    pub bytes_read: u64,
    #[serde(default)]
    pub bytes_written: u64,
    pub ranges: Vec<ProfileRange>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRange {
    pub offset: u64,
    pub length: u64,
    pub reads: u64,
    pub writes: u64,
}

impl ProfileRange {
    /// Saturates: a hand-edited profile may hold any u64s.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.length)
    }
    pub fn accesses(&self) -> u64 {
        self.reads + self.writes
    }
}

impl Profile {
    /// Read and check a profile file.
    pub fn load(path: &Path) -> Result<Profile> {
        let shown = path.display();
        let text = fs::read(path).map_err(|e| anyhow!("profile {shown}: {e}"))?;
        let p: Profile = serde_json::from_slice(&text).map_err(|e| {
            anyhow!("profile {shown}: not a fragkit trace profile (expected JSON from `fragkit trace -o`): {e}")
        })?;
        p.check().map_err(|e| anyhow!("profile {shown}: {e}"))?;
        Ok(p)
    }

    pub fn check(&self) -> Result<()> {
        if self.kind != KIND {
            bail!("kind is '{}', expected '{KIND}'", self.kind);
        }
        if self.version != 1 {
            bail!("version {} is not supported (expected 1)", self.version);
        }
        for f in &self.files {
            if !f.path.is_absolute() {
                bail!("file path '{}' is not absolute", f.path.display());
            }
            for pair in f.ranges.windows(2) {
                if pair[0].end() > pair[1].offset {
                    bail!(
                        "{}: ranges must be sorted and not overlap ({}+{} then {})",
                        f.path.display(),
                        pair[0].offset,
                        pair[0].length,
                        pair[1].offset
                    );
                }
            }
        }
        Ok(())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("profile serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_the_documented_shape_and_rejects_overlaps() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.json");
        let doc = r#"{"version":1,"kind":"fragkit-trace-profile","duration_ns":5,"events":3,"dropped":0,
          "files":[{"path":"/abs/path","dev":"7:0","ino":12,"block_size":4096,
                    "ranges":[{"offset":0,"length":131072,"reads":3,"writes":0}]}]}"#;
        fs::write(&p, doc).unwrap();
        let prof = Profile::load(&p).unwrap();
        assert_eq!(prof.files[0].ranges[0].length, 131072);
        assert_eq!(prof.events, 3);
        let bad = doc.replace(
            r#"{"offset":0,"length":131072,"reads":3,"writes":0}"#,
            r#"{"offset":0,"length":8192,"reads":1,"writes":0},{"offset":4096,"length":4096,"reads":1,"writes":0}"#,
        );
        fs::write(&p, bad).unwrap();
        let err = Profile::load(&p).unwrap_err().to_string();
        assert!(err.contains("not overlap"), "{err}");
        fs::write(&p, "{}").unwrap();
        assert!(Profile::load(&p).is_err());
    }
}
